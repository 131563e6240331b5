"""The vault generation: one stamp that every osk writer moves, read with one ``stat``.

Readers (search, read_node, the catalog behind them) would otherwise learn of another osk
process's write only from a walk of the vault, which they run at most once a second. Instead
every osk process that changes the vault holds the mutation lock
(``osk.authority.mutation``) and, still holding it, after its change is on disk, moves the
stamp (``bump``). A reader compares
``current`` with the stamp it saw when it last made its catalog fresh; a different stamp means
"another osk process wrote since": look again now. The stamp says nothing about hand edits or a
``git pull`` run by hand; those are still found by the once-a-second walk.

The stamp is the file ``.osk/generation`` (device state, never synced). A bump appends one
byte, so its size only grows and its ``(inode, size, mtime)`` never repeats while the file
lives. Deleting it is safe: the next bump creates a new file, whose stamp differs from what a
reader last saw unless that reader last looked when the old file was one byte long, in the same
clock tick, on the same inode. A million writes make a megabyte.

Order is what makes it exact: a writer's change is visible before its bump, and a reader takes
the stamp before it looks, so a reader that sees a bump also sees the change behind it; a write
still under way when a reader looks bumps afterwards, and the reader's next query looks again.

The same kind of stamp, ``.osk/raw-generation`` (``RECORDS``), tells the raw rounds' index
(``osk.search.rounds``) in a process without a watch that an osk writer changed a raw record
file (a capture, ``osk redact``, a sync landing): each such writer bumps it after the record's
bytes are on disk, holding the record's lock, not the mutation lock (appends to different
records run at once; each bump is one ``write`` of one byte to a file opened for appending, so
concurrent bumps each move the size, and none is lost). It is apart from the vault generation
so that a capture, every turn, does not send every node reader to look again.

Standard library only: hook-path modules may import it.
"""

from __future__ import annotations

import os
from collections import deque

from osk.store.vault import Vault

__all__ = ["Stamp", "bump", "current", "own_bumps"]

FILE = "generation"  # under the vault's device state (.osk/)
RECORDS = "raw-generation"  # the raw records' stamp, beside it
OWN_KEPT = 64  # of a process's bumps of one stamp remembered: a hook makes a few

_own: dict[str, deque[tuple[int, int, str]]] = {}  # stamp path -> (inode, size after, note)

Stamp = tuple[int, int, int]  # the stamp file's (inode, size, mtime_ns); zeros before a bump


def current(vault: Vault, name: str = FILE) -> Stamp:
    """The vault's generation now (``name``: another stamp, ``RECORDS``): one ``stat``."""
    try:
        st = os.stat(vault.state(name))
    except OSError:
        return (0, 0, 0)
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def bump(vault: Vault, name: str = FILE, note: str = "") -> None:
    """Move the generation. Call it holding the mutation lock, after the change is on disk
    (``name``: another stamp, bumped as its writers say). The process remembers the bump,
    with ``note`` (what it told of), by the size it made the file (``own_bumps``)."""
    path = vault.state(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, b".")  # no fsync: only processes on this device read it, through the cache
        # where this byte ends: a write to a file opened for appending moves the offset past
        # its own bytes, whoever else appends at the same time
        mark = (os.fstat(fd).st_ino, os.lseek(fd, 0, os.SEEK_CUR), note)
    finally:
        os.close(fd)
    _own.setdefault(str(path), deque(maxlen=OWN_KEPT)).append(mark)


def own_bumps(vault: Vault, name: str, inode: int) -> dict[int, str]:
    """The sizes this process's last ``OWN_KEPT`` bumps of the stamp ``name`` made it while
    its inode was ``inode``, each with its note: a reader that last saw the stamp at size N
    and finds every size from N + 1 to now among them knows no other process bumped since."""
    kept = _own.get(str(vault.state(name)), ())
    return {end: note for node, end, note in kept if node == inode}


