"""Trust state: is a node the person's word, or an agent's inference?

Every node has a trust state (the contract's optional ``trust`` key; absent, it follows
``author``). The rule (governance/authority.md, "Trust"):

- a node the person writes is ``confirmed``; a node an agent writes is ``inferred``;
- an agent's write into the Person space is always ``inferred``, even when it edits a node the
  person had confirmed, until the person runs ``osk confirm NODE`` at a terminal;
- readers mark inferred Person facts (``marker``); the vault setting ``inject_inferred_person``
  keeps them out of what the hooks inject, per-prompt recall and the session-start digest
  (``injectable``, called by ``osk.hooks.recall.per_prompt``).

The write path stamps the key explicitly on every write (``trust_for_new``/``trust_for_update``)
because ``author`` names who created the node, not who last changed it.
"""

from __future__ import annotations

from typing import Any

from osk.errors import ProtectedRegionError
from osk.store.fastclass import dataclass
from osk.store.trust_state import CONFIRMED, INFERRED
from osk.store.vault import PERSON, Vault

MARKER = "inferred"


def is_person(actor: str) -> bool:
    """Actors are 'user' (the person) or 'agent' / 'agent:SESSION'."""
    return actor == "user"





def trust_for_new(space: str | None, actor: str) -> str:
    """The trust state a new node gets: confirmed when the person wrote it, else inferred."""
    return CONFIRMED if is_person(actor) else INFERRED


def trust_for_update(space: str | None, actor: str, current: str | None = None) -> str:
    """The trust state after a write: an agent's write is an inference again, in every Space.

    ``current`` is accepted so callers state what they replace; an agent cannot carry a
    confirmation forward, because the person confirmed the text that is being changed.
    """
    return CONFIRMED if is_person(actor) else INFERRED


def marker(node: Any) -> str | None:
    """'inferred' for an inferred Person node (what search and injection show), else None."""
    if getattr(node, "space", None) != PERSON:
        return None
    return person_marker(PERSON, node.trust_state)


def person_marker(space: str | None, trust_state: str | None) -> str | None:
    """``marker`` from a node's Space and trust state alone (what the hooks hold of a node)."""
    return MARKER if space == PERSON and trust_state == INFERRED else None


def injectable(vault: Vault, space: str | None, trust_state: str | None) -> bool:
    """False when the vault keeps this node, an inferred Person fact, out of what the hooks
    inject (per-prompt recall and the session-start digest): ``inject_inferred_person``."""
    return person_marker(space, trust_state) is None or vault.settings().inject_inferred_person


@dataclass(frozen=True)
class Confirmed:
    path: str
    node_id: str
    before: str
    after: str | None  # None: the node was already confirmed; nothing written


def confirm(vault: Vault, ref: str) -> Confirmed:
    """Set ``trust: confirmed`` on a node (the person, at a terminal), and audit it."""
    from osk.authority import approvals, audit, protection
    from osk.store import node, objects
    from osk.store.catalog import Catalog

    protection.require_person("confirm")
    with approvals.mutation_lock(vault):
        catalog = Catalog(vault)
        catalog.refresh()
        found = catalog.get(ref)
        _refuse_pending(vault, found.path)
        text = vault.abs(found.path).read_text(encoding="utf-8")
        current = node.parse(found.path, text)
        before = objects.put(vault, text)
        if current.meta.trust == CONFIRMED:
            return Confirmed(found.path, current.id, before, None)
        new_text = node.render(current.meta.model_copy(update={"trust": CONFIRMED}), current.body)
        intent = audit.intend(vault, [audit.Change("user", "confirm", current.id, found.path,
                                                   text, new_text)])
        vault.write_file(vault.abs(found.path), new_text)
        [entry] = intent.record()
        approvals.record_person_write(vault, found.path, entry.after)
    return Confirmed(found.path, current.id, before, entry.after)


def _refuse_pending(vault: Vault, rel: str) -> None:
    from osk.authority import protection

    try:
        protection.check_writable(vault, rel)
    except ProtectedRegionError as exc:
        raise ProtectedRegionError(
            f"{exc}. Decide on the pending change first, then confirm", **exc.facts
        ) from None
