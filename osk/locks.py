"""Locks that work across processes.

Every agent session starts its own MCP server, so several processes writing one vault at once is
the normal case. One mutation lock per vault serialises node writes; each ledger and raw record
has its own lock for appends. Lock files live in device state and are never synced.
"""

from __future__ import annotations

from pathlib import Path

from filelock import FileLock

DEFAULT_TIMEOUT = 30.0


def file_lock(lock_path: Path, timeout: float = DEFAULT_TIMEOUT) -> FileLock:
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(str(lock_path), timeout=timeout)
