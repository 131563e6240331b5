"""Locks that work across processes.

Every agent session starts its own MCP server, so several processes writing one vault at once is
the normal case. One mutation lock per vault serialises node writes; each ledger and raw record
has its own lock for appends. Lock files live in device state and are never synced.

This is a small standard-library lock (``flock`` on POSIX, ``msvcrt.locking`` on Windows) rather
than the ``filelock`` package: hooks take these locks on every turn, and importing the package
cost them ~16 ms (it pulls in logging, inspect and secrets). Like ``filelock``, two lock objects
for one path conflict even inside one process, so code must never nest the same lock.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from types import TracebackType

from osk.errors import LockTimeout
from osk.store.fsutil import open_making_folder

__all__ = ["FileLock", "LockTimeout", "file_lock"]

DEFAULT_TIMEOUT = 30.0

if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def _try_lock(fd: int) -> bool:
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            return True
        except OSError:
            return False

    def _unlock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)


class FileLock:
    """An exclusive inter-process lock on ``path``; re-entrant for the same object."""

    def __init__(self, path: Path, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.path = path
        self.timeout = timeout
        self._fd: int | None = None
        self._depth = 0

    def acquire(self, timeout: float | None = None) -> FileLock:
        if self._fd is not None:
            self._depth += 1
            return self
        limit = self.timeout if timeout is None else timeout
        fd = open_making_folder(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + max(limit, 0.0)
        pause = 0.001
        while not _try_lock(fd):
            if time.monotonic() >= deadline:
                os.close(fd)
                raise LockTimeout(self.path, limit)
            time.sleep(pause)
            pause = min(pause * 2, 0.025)
        self._fd, self._depth = fd, 1
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        self._depth -= 1
        if self._depth:
            return
        fd, self._fd = self._fd, None
        try:
            _unlock(fd)
        finally:
            os.close(fd)

    def __enter__(self) -> FileLock:
        return self.acquire()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.release()


def file_lock(lock_path: Path, timeout: float = DEFAULT_TIMEOUT) -> FileLock:
    return FileLock(lock_path, timeout=timeout)  # its folder is made when first missing
