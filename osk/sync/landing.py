"""Landing: moving the vault's working tree from one commit to another. Each file that differs is
rewritten atomically; appends made while the cycle ran are carried onto the new content, each
file landing under the lock its appends take; a landing is journalled first, so an interrupted
one is finished by the next cycle.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path, PurePosixPath

from osk.errors import RawRecordError
from osk.store.conflict_copies import (
    copy_content,
    copy_name,
    is_conflict_copy,
)
from osk.store.fsutil import atomic_write
from osk.store.vault import Vault
from osk.sync.commit import commit_into
from osk.sync.cycle_state import (
    ZERO,
    Cycle,
    append_only,
    is_ledger,
    is_raw,
    journal_path,
    locked,
    owe_index,
    tree_changes,
    union_lines,
)


# -- landing: move the vault's working tree from one commit to another ----------------------
class Landed(Enum):
    """What landing one file did to the working tree."""

    THERE = "there"  # it held the new version already
    WRITTEN = "written"  # it now holds the new version, as the commit does
    # it holds the new version and what was written here during the cycle (an append carried
    # after it, a ledger's lines joined, a conflict copy beside it): a commit git has not made
    KEPT = "kept"


def land_tree(cycle: Cycle, old: str, new: str) -> None:
    """Bring the working tree from ``old`` to ``new`` without losing anything written since.

    Journalled: a killed landing is finished by ``_recover_landing``. Caller holds the lock.
    """
    repo = cycle.repo
    entries = tree_changes(repo, old, new)
    # What it brings was admitted before (osk.sync.admission): no link, nothing oversized.
    journal = journal_path(cycle.vault)
    atomic_write(journal, json.dumps({"from": old, "to": new}) + "\n")
    if any(not is_raw(rel) for *_, rel in entries):
        owe_index(cycle.vault)  # before any file moves: a kill from here on leaves it owed
    first, kept = True, False
    for new_mode, old_sha, new_sha, rel in entries:
        landed = _land_file(cycle, rel, old_sha, new_sha, new_mode)
        kept = kept or landed is Landed.KEPT
        if landed is not Landed.THERE and not is_raw(rel):
            cycle.result.landed += 1
        if first:
            cycle.mark("landing")
            first = False
    repo.run("update-ref", "-m", "osk sync", f"refs/heads/{cycle.branch}", new, old)
    repo.run("reset", "-q", new)  # the index follows; the working tree is already there
    journal.unlink(missing_ok=True)
    cycle.mark("landed")
    if kept:  # what was written here during the cycle, kept beside or after what landed
        commit_into(cycle)


def _land_file(cycle: Cycle, rel: str, old_sha: str, new_sha: str, new_mode: str) -> Landed:
    """Bring ``rel`` to ``new_sha``; what that did to the working tree."""
    repo, vault = cycle.repo, cycle.vault
    lock = _append_lock(vault, rel)
    with locked(lock, 60.0, f"an append to {rel} is stuck") if lock else _nothing():
        path = vault.abs(rel)
        old = repo.blob(old_sha) if old_sha != ZERO else None
        new = repo.blob(new_sha) if new_sha != ZERO else None
        current = _read_current(path)
        if current == new or new_mode == "160000":
            return Landed.THERE
        if current == old:
            _write(vault, rel, new, new_mode)
            return Landed.WRITTEN
        if current is not None and append_only(rel):
            if new is not None and current.startswith(new):
                return Landed.THERE  # landed before a crash, then appended to
            if old is not None and current.startswith(old):
                tail = current[len(old):]
                _write(vault, rel, (new + tail) if new is not None else current, new_mode)
                return Landed.KEPT
            if old is None and new is not None and is_ledger(rel):
                _write(vault, rel, union_lines(new, current), new_mode)
                return Landed.KEPT
        if current is not None:  # changed here while the cycle ran: keep it beside the node
            copy = copy_name(rel, cycle.device, lambda name: vault.abs(name).exists())
            _write(vault, copy, copy_content(rel, current), "100644")
            cycle.result.conflict_copies.append(copy)
        _write(vault, rel, new, new_mode)
        return Landed.WRITTEN if current is None else Landed.KEPT


def _append_lock(vault: Vault, rel: str) -> Path | None:
    """The lock an append to ``rel`` takes (a ledger or a raw record), held while it lands so
    the append cannot interleave with the rewrite; None for files nobody appends to."""
    if is_ledger(rel):
        return vault.lock_path(f"ledger-{PurePosixPath(rel).stem}")
    if is_raw(rel) and rel.endswith(".md") and not is_conflict_copy(rel):
        from osk.capture import raw

        try:
            return raw.lock_path(vault, rel)
        except RawRecordError:
            return None  # not a record file (_raw/README.md, say): nothing appends to it
    return None


def _read_current(path: Path) -> bytes | None:
    if path.is_symlink():  # git stores a link as its target's path
        return os.readlink(path).encode("utf-8")
    return path.read_bytes() if path.is_file() else None


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def _write(vault: Vault, rel: str, data: bytes | None, mode: str) -> None:
    path = vault.abs(rel)
    if data is None:
        path.unlink(missing_ok=True)
        _prune_empty_dirs(vault, path.parent)
    else:
        vault.write_file(path, data)  # never a link: land_tree refuses a commit that brings one
        path.chmod(0o755 if mode == "100755" else 0o644)  # what a git checkout would leave
    if is_raw(rel):  # the rounds' index looks at the records again (osk.search.rounds)
        from osk.capture.raw import written

        written(vault, rel)


def _prune_empty_dirs(vault: Vault, directory: Path) -> None:
    root = vault.root.resolve()
    while directory.resolve() != root and directory.parent.resolve() != root:
        try:
            directory.rmdir()
        except OSError:
            return
        directory = directory.parent
