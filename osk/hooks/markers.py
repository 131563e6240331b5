"""The markers a hit carries that a recall-file copy cannot: ``conflict`` (an open conflict
candidate names the node) and ``pending`` (its protected region holds an unapproved change),
read as ``Engine.markers`` reads them. Shared by per-prompt recall and a fresh ``osk search``
answered from the store (``osk.reads.quick_search``); standard library until a ledger exists.
"""

from __future__ import annotations

from collections.abc import Sequence

from osk.errors import OskError
from osk.store.vault import Vault

# The ledger the conflict marker comes from, named here so a prompt that finds no such ledger
# pays for no import (osk.provenance.candidates loads the ledger machinery); a test keeps the name
# equal to its owner's.
CANDIDATES_LEDGER = "candidates"  # osk.provenance.candidates.LEDGER


def conflicted_ids(vault: Vault) -> set[str]:
    if not vault.ledger_path(CANDIDATES_LEDGER).exists():
        return set()
    from osk.provenance import candidates

    try:
        return set(candidates.Candidates(vault).open_party_ids())
    except OskError:
        return set()  # a damaged ledger is reported by overview and the validators


def pending_paths(vault: Vault, paths: Sequence[str]) -> set[str]:
    if not vault.ledger_path("approvals").exists():
        return set()
    from osk.authority import protection

    found = set()
    for rel in paths:
        try:
            if protection.is_pending(vault, rel):
                found.add(rel)
        except (OskError, OSError, UnicodeDecodeError):
            found.add(rel)
    return found


__all__ = ["CANDIDATES_LEDGER", "conflicted_ids", "pending_paths"]
