"""What is open about a node wherever a hit lists it: the one rule for a hit's markers.

- ``recheck``: a source it cites changed since it was written. Each caller knows this its own
  way and says so, by one rule (``osk.provenance.pairs.stale_pairs``): the engine from its
  rechecks table and catalog (``osk.provenance.rechecks``); a fresh ``osk search`` from the
  store from that table kept on disk (``osk.provenance.recheck_store``) and the files its hits
  cite; the hooks from the summary the engine keeps for them;
- ``conflict``: an open conflict candidate names it (``osk.provenance.candidates``; a damaged
  ledger marks nothing: overview and the validators report it);
- ``pending``: its protected region holds a change the person has not approved, judged from
  the working copy on disk; a file that cannot be judged is pending
  (``osk.authority.protection``);
- ``inferred``: an inferred Person fact (``osk.authority.trust``);
- ``pending-review``: an agent's node in a scope ``[review] hold`` names that the person has
  not kept yet (``osk.authority.review_queue``);
- ``steering``: its text steers the agent (``osk.capture.steering``); the hooks inject such a
  node only once a person confirmed it.

The engine (``Engine.markers``: search hits and ``read_node``), a fresh search answered from the
store (``osk.reads.quick_search``) and the hooks' recall (``osk.hooks.recall``) each hold
another copy of a node (a catalog node, a recall-file document, a hit with its origin): each
hands ``OpenItems.of`` the same few facts of it as a ``Listed``.

Standard library until a ledger exists: the hook path imports it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from osk.errors import OskError
from osk.store.fastclass import dataclass
from osk.store.vault import Vault, scope_of

# The ledgers the markers come from, named here so a prompt that finds no such ledger pays for
# no import (osk.provenance.candidates loads the ledger machinery); a test keeps each name
# equal to its owner's.
CANDIDATES_LEDGER = "candidates"  # osk.provenance.candidates.LEDGER
APPROVALS_LEDGER = "approvals"  # osk.authority.protection.APPROVALS


@dataclass(frozen=True)
class Listed:
    """What the rule reads of one node, from whichever copy of it the caller holds."""

    id: str
    path: str
    space: str | None
    trust: str | None
    content_hash: Callable[[], str]  # asked only when its scope is held for review
    steers: Callable[[], bool]  # whether its text carries steering


class OpenItems:
    """The vault's open items, read once for one call's hits: the ledgers when a hit first
    needs them (a failure is not kept: each hit meets it as before)."""

    def __init__(self, vault: Vault) -> None:
        self.vault = vault
        self.conflicted = conflicted_ids(vault)
        self._protected = vault.ledger_path(APPROVALS_LEDGER).exists()
        self._approvals = functools.cache(self._read_approvals)
        self._review = functools.cache(self._read_review)

    def of(self, node_id: str, node: Listed | None = None, *, recheck: bool = False
           ) -> list[str]:
        """The markers of ``node_id``, sorted; ``node``: its copy at hand (None: only the
        markers its id alone gives), ``recheck``: as its caller knows it."""
        found = ["recheck"] if recheck else []
        if node_id in self.conflicted:
            found.append("conflict")
        if node is not None:
            found.extend(self._of_node(node))
        return sorted(found)

    def _of_node(self, node: Listed) -> list[str]:
        from osk.authority import review_queue, trust

        found = ["pending"] if self.pending(node.path) else []
        marker = trust.person_marker(node.space, node.trust)
        if marker:
            found.append(marker)
        held, keeps = self._review()
        scope = scope_of(node.path)
        if scope in held and review_queue.held_back(  # hashed only when it may be held
                held, keeps, scope, node.id, node.trust, node.content_hash()):
            found.append(review_queue.MARKER)
        if node.steers():
            found.append("steering")
        return found

    def pending(self, path: str) -> bool:
        """Its protected region holds an unapproved change (or it cannot be judged)."""
        if not self._protected:
            return False
        from osk.authority import protection

        try:  # judged from the working copy on disk, whatever text the caller holds
            return protection.is_pending(self.vault, path, self._approvals())
        except (OskError, OSError, UnicodeDecodeError):
            return True

    def _read_approvals(self) -> Any:
        from osk.authority import protection

        return protection.state(self.vault)

    def _read_review(self) -> tuple[frozenset[str], dict[str, set[str]]]:
        """The scopes ``[review] hold`` names and the versions the person kept (read only
        when a scope is held)."""
        from osk.authority import review_queue

        held = review_queue.held_scopes(self.vault)
        return held, review_queue.kept(self.vault) if held else {}


def conflicted_ids(vault: Vault) -> set[str]:
    """The ids an open conflict candidate names."""
    if not vault.ledger_path(CANDIDATES_LEDGER).exists():
        return set()
    from osk.provenance import candidates

    try:
        return set(candidates.Candidates(vault).open_party_ids())
    except OskError:
        return set()  # a damaged ledger is reported by overview and the validators


__all__ = ["APPROVALS_LEDGER", "CANDIDATES_LEDGER", "Listed", "OpenItems", "conflicted_ids"]
