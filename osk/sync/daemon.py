"""`osk sync --status` and the sync daemon: a cycle whenever the vault's fingerprint moves, and
at a steady interval otherwise.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from osk.errors import OskError, SyncError
from osk.store import clock
from osk.store.conflict_copies import (
    conflict_copies,
)
from osk.store.vault import STATE_DIR, Vault
from osk.store.watch import Watch
from osk.sync.cycle import DEFAULT_REMOTE, current_branch, refuse_foreign_operations, sync_once
from osk.sync.cycle_state import (
    SyncResult,
    SyncState,
    SyncStatus,
    is_temp,
    status_paths,
)
from osk.sync.gitrepo import open_repo


# -- status ---------------------------------------------------------------------------------
def status(vault: Vault, *, remote: str = DEFAULT_REMOTE) -> SyncStatus:
    """Where the vault stands, from local refs and the saved state (no network)."""
    state = SyncState.load(vault)
    with open_repo(vault.root) as repo:
        branch = current_branch(repo, remote)
        tracking = f"refs/remotes/{remote}/{branch}"
        upstream = repo.sha(tracking)
        ahead = behind = 0
        if upstream:
            counts = repo.run("rev-list", "--left-right", "--count",
                              f"HEAD...{upstream}").out.split()
            ahead, behind = int(counts[0]), int(counts[1])
        else:
            ahead = repo.count("HEAD")
        pending = sum(1 for _code, rel in status_paths(repo) if not is_temp(rel))
        blocked = None
        try:
            refuse_foreign_operations(repo)
        except SyncError as exc:
            blocked = str(exc).split(";")[0]
    return SyncStatus(remote, branch, upstream is not None, ahead, behind, pending,
                      state.last_sync, state.last_fetch, state.offline_since, state.reason,
                      state.failed_at, state.error, len(conflict_copies(vault)), blocked)


# -- daemon ---------------------------------------------------------------------------------
def fingerprint(vault: Vault, *, committed_only: bool = False) -> str:
    """A cheap digest of the uncommitted changes: it moves whenever a file is written.

    ``committed_only`` gives the digest the vault would have with nothing left to commit.
    """
    with open_repo(vault.root) as repo:
        digest = _head_digest(repo.sha("HEAD") or "")
        for code, rel in [] if committed_only else status_paths(repo):
            try:
                stat = vault.abs(rel).stat()
                stamp = f"{stat.st_size}:{stat.st_mtime_ns}"
            except (OSError, OskError):  # gone, or a link out of the vault (never followed)
                stamp = "-"
            digest.update(f"{code}\0{rel}\0{stamp}\0".encode())
    return digest.hexdigest()


def _head_digest(head: str) -> hashlib._Hash:
    return hashlib.sha256(head.encode())


def _head_print(head: str) -> str:
    """The fingerprint of a vault at commit ``head`` with nothing left to commit."""
    return _head_digest(head).hexdigest()


def daemon(vault: Vault, *, interval: float = 300.0, poll: float = 5.0,
           max_cycles: int | None = None, remote: str = DEFAULT_REMOTE,
           stop: threading.Event | None = None,
           report: Callable[[str], None] = lambda line: None,
           after: Callable[[Vault, SyncResult], None] = lambda vault, result: None) -> int:
    """Sync every ``interval`` seconds, and soon after the vault changes; return cycles run.

    A change triggers a cycle once the vault has been quiet for one ``poll`` period, so a burst
    of writes makes one commit. Errors are reported and retried next time, never fatal.
    ``stop`` ends the loop between cycles (the CLI sets it on SIGTERM/SIGINT). ``after`` runs
    once each cycle has ended, before it is reported (``osk.verbs.syncing``: the index takes
    what landed).
    """
    stop = stop or threading.Event()
    cycles, due = 0, 0.0
    synced_print = previous = head = ""
    changes = FolderChanges(vault.root)
    try:
        while not stop.is_set() and (max_cycles is None or cycles < max_cycles):
            # The watch is read before the look, so a write made during the look is seen
            # by the next poll. HEAD is asked every time: a commit made by hand changes no
            # folder the watch sees.
            moved = changes.moved()
            now_head = _safe_fingerprint(vault, committed_only=True)
            if moved or now_head != head or not previous:
                current = _safe_fingerprint(vault)
            else:
                current = previous
            head = now_head
            changed = current != synced_print and current == previous
            if time.monotonic() >= due or changed:
                line, synced_head = _one_cycle(vault, remote, after)
                report(line)
                cycles += 1
                due = time.monotonic() + interval
                changes.resume()
                # What a cycle leaves synced is the commit it synced: a write, or a commit by
                # hand, made after it still shows as a change, and triggers the next cycle
                # once quiet. A failed cycle is tried again at the interval.
                synced_print = (_head_print(synced_head) if synced_head is not None
                                else _safe_fingerprint(vault, committed_only=True))
                previous = _safe_fingerprint(vault)
                continue
            previous = current
            stop.wait(max(0.0, min(poll, due - time.monotonic())))
    finally:
        changes.close()
    return cycles


class FolderChanges:
    """Whether any file a sync carries may have changed since the last ask, from a kernel
    watch (``osk.store.watch``) on every folder of the vault but ``.git`` and ``.osk``.

    An idle daemon then polls without a look at the files: ``git status`` over every file
    costs 0.25 s of CPU at 100,000 nodes, every poll. Where the watch cannot be complete
    (not Linux, a network mount, the watch limit, an overflow) every ask answers True and
    the daemon looks each poll as it always did; a new watch is tried after each cycle.
    """

    SKIPPED = frozenset({".git", STATE_DIR})  # git's own files; device state, never synced

    def __init__(self, root: Path) -> None:
        self.root = root
        self._watch: Watch | None = None
        self._asked = False
        self.resume()

    def resume(self) -> None:
        """Start a watch if none is running (the first, or one lost since)."""
        if self._watch is not None:
            return
        self._watch = Watch.start(self.root)
        if self._watch is not None:
            self._add_tree(".")
            if self._watch.lost:
                self.close()
        self._asked = False  # nothing is vouched for until the watch has been read once

    def moved(self) -> bool:
        """True unless the watch vouches that no synced folder changed since the last ask."""
        touched = self._watch.drain() if self._watch is not None else None
        if touched is None:
            self.close()
            return True
        first, self._asked = not self._asked, True
        moved = first
        for rel in touched:
            parts = PurePosixPath(rel).parts
            if parts[:1] and parts[0] in self.SKIPPED:
                continue
            moved = True
            if os.path.isdir(self.root / rel) and not os.path.islink(self.root / rel):
                self._add_tree(rel)  # a new folder: watched from now on (the look follows)
        return moved

    def _add_tree(self, top: str) -> None:
        """Watch ``top`` and every folder under it, each before it is listed."""
        folders = [top]
        while folders and self._watch is not None and not self._watch.lost:
            rel = folders.pop()
            if not self._watch.add(rel):
                continue
            try:
                with os.scandir(self.root / rel) as entries:
                    folders.extend(
                        entry.name if rel == "." else f"{rel}/{entry.name}"
                        for entry in entries
                        if entry.is_dir(follow_symlinks=False)
                        and not (rel == "." and entry.name in self.SKIPPED))
            except OSError:
                continue  # gone or unreadable: the look that follows sees it

    def close(self) -> None:
        if self._watch is not None:
            self._watch.close()
        self._watch = None


def _one_cycle(vault: Vault, remote: str, after: Callable[[Vault, SyncResult], None]
               ) -> tuple[str, str | None]:
    """The cycle's report line, and the commit it synced (None when it failed)."""
    stamp = clock.now_text()
    try:
        result = sync_once(vault, remote=remote)
        after(vault, result)
        return f"{stamp} {result.line()}", result.head
    except OskError as exc:
        return f"{stamp} Error: {exc}", None


def _safe_fingerprint(vault: Vault, *, committed_only: bool = False) -> str:
    try:
        return fingerprint(vault, committed_only=committed_only)
    except SyncError as exc:
        return f"error:{exc}"
