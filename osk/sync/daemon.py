"""`osk sync --status` and the sync daemon: a cycle whenever the vault's fingerprint moves, and
at a steady interval otherwise.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable

from osk.errors import OskError, SyncError
from osk.store import clock
from osk.store.conflict_copies import (
    conflict_copies,
)
from osk.store.vault import Vault
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
        digest = hashlib.sha256((repo.sha("HEAD") or "").encode())
        for code, rel in [] if committed_only else status_paths(repo):
            try:
                stat = vault.abs(rel).stat()
                stamp = f"{stat.st_size}:{stat.st_mtime_ns}"
            except (OSError, OskError):  # gone, or a link out of the vault (never followed)
                stamp = "-"
            digest.update(f"{code}\0{rel}\0{stamp}\0".encode())
    return digest.hexdigest()


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
    synced_print = previous = ""
    while not stop.is_set() and (max_cycles is None or cycles < max_cycles):
        current = _safe_fingerprint(vault)
        changed = current != synced_print and current == previous
        if time.monotonic() >= due or changed:
            report(_one_cycle(vault, remote, after))
            cycles += 1
            due = time.monotonic() + interval
            # What a cycle leaves synced is the committed state: a write that landed after the
            # commit still shows as a change, and triggers the next cycle once quiet.
            synced_print = _safe_fingerprint(vault, committed_only=True)
            previous = _safe_fingerprint(vault)
            continue
        previous = current
        stop.wait(max(0.0, min(poll, due - time.monotonic())))
    return cycles


def _one_cycle(vault: Vault, remote: str, after: Callable[[Vault, SyncResult], None]) -> str:
    stamp = clock.now_text()
    try:
        result = sync_once(vault, remote=remote)
        after(vault, result)
        return f"{stamp} {result.line()}"
    except OskError as exc:
        return f"{stamp} Error: {exc}"


def _safe_fingerprint(vault: Vault, *, committed_only: bool = False) -> str:
    try:
        return fingerprint(vault, committed_only=committed_only)
    except SyncError as exc:
        return f"error:{exc}"
