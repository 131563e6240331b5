"""Hand edits reported by the kernel: an inotify watch on every Space folder (Linux).

The periodic look (``osk.store.freshness``) finds an edit made in place (an editor or Obsidian
rewriting a file's bytes: no folder changes) by re-stat-ing node files, up to 4,096 a look.
A long-running process (the MCP server) can instead ask the kernel: each folder it lists is
watched first, and every change to a file in it (a write, a truncate, a rename, a delete) is
queued by the kernel as it happens. A look then reads the queue (``drain``) and re-stats only
the files named there, so it costs what changed, not what the vault holds.

Only where the queue is complete: Linux, on a local file system (a network or FUSE mount does
not report changes made by other machines or its daemon), every folder watched, and no
overflow. ``drain`` answers None when any of that failed, and the look falls back to the stat
sweep (and a full look to start watching again). Standard library only (``ctypes``).
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
import sys
import weakref
from pathlib import Path

IN_MODIFY = 0x2
IN_ATTRIB = 0x4
IN_CLOSE_WRITE = 0x8
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = 0o2000000
MASK = (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE
        | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW)
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then len bytes of name
# File systems whose changes all pass through this kernel (a watch sees every one of them).
LOCAL = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "zfs", "f2fs", "overlay",
                   "jfs", "reiserfs", "bcachefs", "ramfs"})


class Watch:
    """One inotify instance over the folders it is told of (``add``), relative to ``root``."""

    def __init__(self, fd: int, libc: ctypes.CDLL, root: str) -> None:
        self._fd = fd
        self._libc = libc
        self._root = root
        self._folders: dict[int, str] = {}  # watch descriptor -> folder (vault-relative)
        self.lost = False  # a folder could not be watched or events were dropped
        # A process may hold only so many (128 by default): an engine dropped gives its back.
        self._closer = weakref.finalize(self, os.close, fd)

    @classmethod
    def start(cls, root: Path) -> Watch | None:
        """A watch for the vault at ``root``, or None where it could miss a change."""
        if not sys.platform.startswith("linux") or file_system(root) not in LOCAL:
            return None
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        except (OSError, AttributeError):
            return None
        if fd < 0:
            return None
        return cls(fd, libc, str(root))

    def add(self, rel: str) -> bool:
        """Watch one folder (call it before listing the folder, so nothing falls between);
        False when it is not watched (gone, or the watch lost)."""
        path = os.fsencode(os.path.join(self._root, rel))
        wd = self._libc.inotify_add_watch(self._fd, path, MASK)
        if wd < 0:
            if ctypes.get_errno() != errno.ENOENT:  # gone: the folder check sees that
                self.lost = True  # the watch limit, say: the queue is no longer complete
            return False
        self._folders[wd] = rel
        return True

    def drain(self) -> set[str] | None:
        """The vault-relative paths changed since the last drain; None when the queue may
        be incomplete (then the caller looks by stat, and starts a new watch)."""
        touched: set[str] = set()
        while not self.lost:
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                break
            except OSError:
                self.lost = True
                break
            self._parse(data, touched)
        return None if self.lost else touched

    def _parse(self, data: bytes, touched: set[str]) -> None:
        offset = 0
        while offset + _EVENT.size <= len(data):
            wd, mask, _, size = _EVENT.unpack_from(data, offset)
            name = data[offset + _EVENT.size:offset + _EVENT.size + size].rstrip(b"\0")
            offset += _EVENT.size + size
            if mask & IN_Q_OVERFLOW:
                self.lost = True
                return
            folder = self._folders.get(wd)
            if mask & IN_IGNORED:
                self._folders.pop(wd, None)  # its folder went away: the folder check sees it
            elif folder is not None and name:
                touched.add(f"{folder}/{os.fsdecode(name)}")
            elif folder is not None and mask & (IN_DELETE_SELF | IN_MOVE_SELF):
                touched.add(folder)  # its own: for a Space folder, no watched one reports it

    def close(self) -> None:
        self._closer()  # closes the descriptor once, whoever asks first
        self._fd = -1
        self.lost = True


def file_system(path: Path) -> str:
    """The type of the file system holding ``path`` (Linux's mount table), "" if unknown."""
    try:
        target = os.path.realpath(path)
        with open("/proc/self/mountinfo", encoding="utf-8") as handle:
            mounts = [line.split() for line in handle]
    except OSError:
        return ""
    best, kind = "", ""
    for fields in mounts:
        try:
            point = fields[4].replace("\\040", " ")
            kind_at = fields.index("-") + 1
        except (IndexError, ValueError):
            continue
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fields[kind_at]
    return kind
