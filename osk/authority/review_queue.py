"""The person's review of what agents wrote (``osk review --new``): what was kept, and which
scopes hold new agent nodes out of recall until then.

A keep is one record in ``_ledger/reviews.jsonl`` (synced: every device knows what the person
reviewed), subject the node id, with the file hash and the content hash (what the index and the
hooks' receipts name a version by) of the version the person kept. A node is **unreviewed**
when an agent wrote it (its trust state is ``inferred``: the person's own and confirmed nodes
are not) and no keep names its current content hash.

``[review] hold = ["scope", …]`` in ``osk.toml`` opts scopes in: there an unreviewed node is
kept out of per-prompt recall and the session-start digest (the receipt says ``pending``), and
search still finds it, marked ``pending-review``. Reject is ``osk reject`` (a tombstone: the
same agent text is refused when written again); edit is the person's own write.

Hook path: the light part (``held_scopes``, ``kept``, ``unreviewed``) uses the standard library
and the ledger only; ``keep`` (a person's verb, terminal only) imports the rest.
"""

from __future__ import annotations

from collections.abc import Mapping

from osk.errors import OskError
from osk.store.ledger import Ledger
from osk.store.trust_state import INFERRED
from osk.store.vault import Vault

REVIEWS = "reviews"
MARKER = "pending-review"
HOLD_SETTINGS = frozenset({"hold"})


def held_scopes(vault: Vault) -> frozenset[str]:
    """The scopes whose new agent nodes wait for review (``[review] hold``; none by default)."""
    hold = vault.settings().table("review", HOLD_SETTINGS).get("hold", [])
    if not isinstance(hold, list) or not all(isinstance(s, str) and s for s in hold):
        raise OskError(f"osk.toml: [review] hold must be a list of scope names (got {hold!r})")
    return frozenset(hold)


def kept(vault: Vault) -> dict[str, set[str]]:
    """node id -> the content hashes of the versions the person kept."""
    if not vault.ledger_path(REVIEWS).exists():
        return {}
    found: dict[str, set[str]] = {}
    for record in Ledger(vault, REVIEWS).read().records:
        if record.kind == "keep":
            found.setdefault(record.subject, set()).add(str(record.data.get("content", "")))
    return found


def unreviewed(node_id: str, trust: str | None, content_hash: str,
               keeps: Mapping[str, set[str]]) -> bool:
    """Written by an agent and not kept at this content (see the module docstring)."""
    return trust == INFERRED and content_hash not in keeps.get(node_id, ())


def held_back(held: frozenset[str], keeps: Mapping[str, set[str]], scope: str | None,
              node_id: str, trust: str | None, content_hash: str) -> bool:
    """A node in a scope ``held`` names (``held_scopes``) that waits for the person's review
    (``keeps``: ``kept``): marked in search, kept out of what the hooks inject."""
    return scope in held and unreviewed(node_id, trust, content_hash, keeps)


def keep(vault: Vault, node_id: str, *, file_hash: str, content_hash: str) -> None:
    """Record that the person reviewed this version and keeps it (person, terminal)."""
    from osk.authority import protection
    from osk.store import clock

    protection.require_person("review")
    Ledger(vault, REVIEWS).append("keep", node_id, {
        "file": file_hash, "content": content_hash, "time": clock.now_text()})
