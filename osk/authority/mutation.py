"""The vault's one mutation lock. Every osk process that changes the vault holds it; just after
taking it, the audit records of a write killed between its node files and its records are
finished (``osk.authority.audit``: no other writer can be under way then, so a journal left is
a dead one's), and before letting go it moves the vault generation (``osk.store.generation``)
so readers in other processes look again. Here, above the audit log, because taking the lock
finishes the log; the audit module itself is imported only when a journal is left.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from osk.store.generation import bump
from osk.store.locks import DEFAULT_TIMEOUT, file_lock
from osk.store.vault import Vault


@contextmanager
def mutation(vault: Vault, timeout: float = DEFAULT_TIMEOUT) -> Iterator[None]:
    """Hold the vault's one mutation lock; bump the generation before letting go.

    Just after taking it, the audit records of a write killed between its node files and its
    records are finished (no other writer can be under way then, so a journal left is a dead
    one's): every holder of the lock sees a complete audit log. The bump runs even when the
    body raised: a write that failed half-way may have changed a file, and a needless bump
    costs a reader only one quick look.
    """
    with file_lock(vault.mutation_lock_path(), timeout=timeout):
        try:
            if vault.audit_intent_path().exists():  # one stat; the audit module only then
                from osk.authority import audit

                audit.recover(vault)
            yield
        finally:
            try:
                bump(vault)
            except OSError:  # a full disk: readers still find the change by their periodic look
                pass  # within a second; the write itself landed (or failed) on its own terms


def finish_killed_writes(vault: Vault) -> None:
    """What a process killed mid-write left, finished before anything is read: temp files in
    device state (removed when their writer is gone) and audit records journalled but not
    appended (``finish_killed_audit``). What opening an engine, a fresh search and a fresh
    read do first."""
    vault.clear_debris()
    finish_killed_audit(vault)


def finish_killed_audit(vault: Vault) -> None:
    """Finish the audit records a killed write left, taking the mutation lock only when there
    are any (one stat otherwise): what opening an engine and ``osk log`` do before they read.
    Taking the lock is what finishes them (``mutation``). A disk that refuses them now (full,
    read-only) stops no reader: the journal stays for the next writer, which meets the same
    refusal and names it."""
    if vault.audit_intent_path().exists():
        try:
            with mutation(vault):
                pass
        except OSError:
            pass
