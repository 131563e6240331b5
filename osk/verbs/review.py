"""``osk review --new``: what agents wrote or changed since the person last reviewed it, as
diffs with their citations; the person keeps (``osk.authority.review_queue.keep``), rejects
(``osk.authority.tombstones.reject``) or edits (their own write through the engine, then kept).

A node is listed when its audit history (``osk.authority.audit``) has an agent's create,
update or supersede after the person's last keep of it, and its file is still there. The diff
runs from the version last kept (or, never kept, from the version before the agents' first
change; nothing for a node an agent created) to the file as it is now.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from osk.authority import audit, review_queue
from osk.errors import OskError
from osk.search.corpus import node_content_hash
from osk.store import objects
from osk.store.catalog import Catalog
from osk.store.ledger import Ledger
from osk.store.node import Node
from osk.store.vault import Vault

AGENT_ACTIONS = frozenset({"create", "update", "supersede"})


@dataclass(frozen=True)
class NewWrite:
    """One node agents wrote or changed since the person's last keep of it."""

    node_id: str
    title: str
    path: str
    scope: str | None
    actors: tuple[str, ...]   # who changed it since (agent, agent:SESSION)
    since: str                # the first such change's time
    diff: str                 # unified diff, last kept (or earlier) version -> now
    citations: tuple[str, ...]
    held: bool                # its scope holds it out of recall until reviewed
    file_hash: str
    content_hash: str


def new_writes(vault: Vault) -> list[NewWrite]:
    """Every node with an agent's change since the person's last keep, oldest change first."""
    catalog = Catalog(vault)
    catalog.refresh()
    last_keep = _last_keeps(vault)
    held = review_queue.held_scopes(vault)
    found = []
    for node_id, entries in audit.by_node(vault).items():
        keep = last_keep.get(node_id)
        since = [e for e in entries if e.action in AGENT_ACTIONS and e.actor.startswith("agent")
                 and (keep is None or e.id > keep[0])]
        if not since:
            continue
        try:
            node = catalog.get(node_id)
        except OskError:
            continue  # rejected, deleted, or a history of a node no longer here
        base = keep[1] if keep is not None else since[0].before
        found.append(_write(vault, node, base, since, node.scope in held))
    return sorted(found, key=lambda w: w.since)


def _last_keeps(vault: Vault) -> dict[str, tuple[str, str]]:
    """node id -> (ledger id, file hash) of the person's last keep."""
    if not vault.ledger_path(review_queue.REVIEWS).exists():
        return {}
    found: dict[str, tuple[str, str]] = {}
    for record in Ledger(vault, review_queue.REVIEWS).read().records:
        if record.kind == "keep" and (record.subject not in found
                                      or record.id > found[record.subject][0]):
            found[record.subject] = (record.id, str(record.data.get("file", "")))
    return found


def _write(vault: Vault, node: Node, base: str | None, since: list[audit.Entry],
           held: bool) -> NewWrite:
    before = _text(vault, base)
    diff = "".join(difflib.unified_diff(
        before.splitlines(keepends=True), node.text.splitlines(keepends=True),
        fromfile=f"{node.path} (last reviewed)" if before else "/dev/null",
        tofile=f"{node.path} (now)"))
    return NewWrite(node.id, node.title, node.path, node.scope,
                    tuple(sorted({e.actor for e in since})), since[0].time, diff,
                    tuple(node.meta.derived_from), held, node.file_hash,
                    node_content_hash(node))


def _text(vault: Vault, sha: str | None) -> str:
    if not sha or not objects.has(vault, sha):
        return ""
    return objects.get(vault, sha)


def keep(vault: Vault, write: NewWrite) -> None:
    """The person keeps the version shown (terminal only)."""
    review_queue.keep(vault, write.node_id, file_hash=write.file_hash,
                      content_hash=write.content_hash)


def keep_current(vault: Vault, node_id: str) -> None:
    """The person keeps the node as it is now (after their own edit; terminal only)."""
    catalog = Catalog(vault)
    catalog.refresh()
    node = catalog.get(node_id)
    review_queue.keep(vault, node.id, file_hash=node.file_hash,
                      content_hash=node_content_hash(node))
