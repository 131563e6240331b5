"""Durable file operations: atomic replace, fsynced append, directory fsync.

Every file osk writes goes through here, so "no partial node, no damaged line" has one home.
"""

from __future__ import annotations

import errno
import gc
import os
import stat as stat_mod
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

#: A file read this soon after its mtime may be rewritten again with the same size and mtime
#: (FAT keeps mtimes to 2 s), so every stat-keyed cache re-reads such a file until it settles.
RACE_WINDOW_NS = 2_000_000_000
StatKey = tuple[int, int, int]  # (size, mtime_ns, inode): what stat-keyed caches compare


def stat_key(path: str | os.PathLike[str], *, follow_symlinks: bool = True) -> StatKey | None:
    """The file's stat key, or None when it cannot be stat-ed (absent, unreadable)."""
    try:
        st = os.stat(path, follow_symlinks=follow_symlinks)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino)


def folder_stat(path: str | os.PathLike[str], *, top: bool) -> tuple[int, int, int, int] | None:
    """What the catalog's freshness records of a folder (``osk.store.freshness``), or None when
    it is not a folder. ``top``: a Space folder, the only kind followed through a link."""
    try:
        st = os.stat(path, follow_symlinks=top)
    except OSError:
        return None
    if not stat_mod.S_ISDIR(st.st_mode):
        return None
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_size)


def node_listing(path: str | os.PathLike[str]
                 ) -> tuple[set[str], dict[str, StatKey]] | None:
    """One folder of a Space as the catalog walks it (``catalog.walk_nodes``): its sub-folder
    names and the stat key of each node file (a ``.md`` regular file; hidden entries are
    skipped); None when it is not a folder. Shared by the writers' folder check
    (``osk.store.freshness``) and a fresh search's (``osk.reads.quick_search``)."""
    folders: set[str] = set()
    files: dict[str, StatKey] = {}
    try:
        with os.scandir(path) as entries:
            for entry in entries:
                name = entry.name
                if name.startswith("."):
                    continue
                if entry.is_dir(follow_symlinks=False):
                    folders.add(name)
                elif name.endswith(".md") and entry.is_file(follow_symlinks=False):
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue  # removed while we listed: it is not there
                    files[name] = (st.st_size, st.st_mtime_ns, st.st_ino)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return folders, files


def is_temp_name(name: str) -> bool:
    """Whether a file name is one of our temporary files (``.NAME.….tmp``): never read, never
    synced, and debris when its writer died."""
    return name.startswith(".") and name.endswith(".tmp")


# Inside ``synced_at_exit``: the files and folders whose fsync waits for the block's end.
_deferred: dict[str, bool] | None = None  # path -> is a folder


@contextmanager
def synced_at_exit() -> Iterator[None]:
    """Make the writes of a block durable once, at its end, instead of one by one.

    For bulk loads (``osk import``): every write inside stays atomic (temporary file and
    rename, one ``write`` per appended line) but skips its own fsyncs; leaving the block fsyncs
    every file and folder written, so a crash of the machine loses at most this block's
    writes, while a killed process loses nothing (the bytes are in the page cache). Nested
    blocks sync at the outermost exit.
    """
    global _deferred
    if _deferred is not None:
        yield
        return
    _deferred = {}
    try:
        yield
    finally:
        pending, _deferred = _deferred, None
        if pending and sys.platform.startswith("linux"):
            os.sync()  # waits on Linux; one call instead of an fsync per file (2 ms each here)
        else:
            for path, folder in pending.items():
                _fsync_path(path, folder=folder)


def _fsync_path(path: str, *, folder: bool) -> None:
    try:
        fd = os.open(path, os.O_RDONLY if folder else os.O_RDWR | getattr(os, "O_BINARY", 0))
    except OSError:
        return  # unsupported (a folder on Windows), or gone since: its successor is recorded
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _fsync_fd(fd: int, path: Path) -> None:
    if _deferred is None:
        os.fsync(fd)
    else:
        _deferred[str(path)] = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cycle collector while loading a large cache from disk.

    Loading the catalog and search-index snapshots of 50,000 nodes makes millions of small,
    acyclic objects; the collector's passes over them were a third of a cold ``osk search``
    (2.95 s of CPU against 1.85 s without). Nothing loaded forms cycles, so nothing waits for
    the collector; it runs again, as usual, after the block.

    What the block made (with every other tracked object) goes straight to the oldest
    generation (``freeze`` then ``unfreeze``: list splices), so turning the collector back on
    does not start a young-generation pass over those millions of objects (0.2-0.6 s at
    50,000 nodes) that would free nothing; a full collection still looks at them, as at any
    long-lived object.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.unfreeze()
        gc.enable()


def fsync_dir(directory: Path) -> None:
    """Make a rename or creation inside ``directory`` durable (a no-op where unsupported)."""
    if _deferred is not None:
        _deferred[str(directory)] = True
    else:
        _fsync_path(str(directory), folder=True)


def atomic_write(path: Path, data: bytes | str | Iterable[bytes | memoryview], *,
                 temp_dir: Path | None = None, reopen: bool = False) -> int | None:
    """Replace ``path`` with ``data`` (else its parts in order, written one by one where
    joining them would copy the whole; an iterator's as it makes them, so the whole is never
    held): temp file, fsync, rename, dir fsync.

    A reader sees the old bytes or the new bytes, never a mixture, even if the process dies.
    The temp file goes in ``temp_dir`` when one is given (a vault's device state, where sync
    never looks, so a write killed midway leaves nothing beside the file), else beside
    ``path``; its name carries the writer's pid so ``clear_stale_temps`` knows a dead one.
    ``reopen``: return a read-only descriptor of the file written, opened before it took
    ``path``'s place, so it reads these bytes whatever replaces the file later (the caller
    closes it); else None.
    """
    parts = [data.encode("utf-8")] if isinstance(data, str) else \
        [data] if isinstance(data, bytes) else data
    where = temp_dir if temp_dir is not None else path.parent  # made by _new_temp if missing
    fd, tmp_name = _new_temp(where, path.name)
    kept: int | None = None
    try:
        with os.fdopen(fd, "wb") as handle:
            for part in parts:
                handle.write(part)
            handle.flush()
            _fsync_fd(handle.fileno(), path)
        if reopen:
            kept = os.open(tmp_name, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        _replace(tmp_name, path)
    except BaseException as exc:
        if kept is not None:
            os.close(kept)
        try:
            os.unlink(tmp_name)
        except FileNotFoundError:
            pass
        name_path(exc, path)
        raise
    try:
        fsync_dir(path.parent)
    except BaseException:
        if kept is not None:
            os.close(kept)
        raise
    return kept


def name_path(exc: BaseException, path: Path) -> None:
    """Give an OSError that names no file (a write to a full disk) the file being written,
    so the error a person reads says where (``osk.store.vault.disk_error``)."""
    if isinstance(exc, OSError) and exc.filename is None:
        exc.filename = str(path)


def _new_temp(folder: Path, name: str) -> tuple[int, str]:
    """A new temp file ``.PID.NAME.RANDOM.tmp`` in ``folder`` (made if missing), created
    exclusively (mode 0600, as ``tempfile.mkstemp`` makes it; that module costs a hook 5 ms to
    import)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    while True:
        candidate = os.path.join(folder, f".{os.getpid()}.{name[:80]}.{os.urandom(6).hex()}.tmp")
        try:
            return open_making_folder(candidate, flags, 0o600), candidate
        except FileExistsError:  # 48 random bits taken: draw again
            continue


def open_making_folder(path: str | Path, flags: int, mode: int = 0o644) -> int:
    """``os.open`` that makes the file's folder (and its parents) when it is missing. Tried
    first, made only then: a ``mkdir`` of a folder that exists is not free (17 us each on the
    bench box, and ``osk import`` made nine a node)."""
    try:
        return os.open(path, flags, mode)
    except FileNotFoundError:
        if not flags & os.O_CREAT:
            raise
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        return os.open(path, flags, mode)


def _replace(source: str, path: Path) -> None:
    """Rename ``source`` over ``path`` (its folder made if missing); a temp folder on another
    file system (device state mounted elsewhere) makes the rename a copy into ``path``'s
    folder first."""
    try:
        try:
            os.replace(source, path)
        except FileNotFoundError:
            if not os.path.exists(source):
                raise
            path.parent.mkdir(parents=True, exist_ok=True)
            os.replace(source, path)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        beside = path.with_name(f".{os.getpid()}.{path.name[:80]}.{os.urandom(4).hex()}.tmp")
        try:
            with open(source, "rb") as src, open(beside, "wb") as dst:
                dst.write(src.read())
                dst.flush()
                os.fsync(dst.fileno())
            os.replace(beside, path)
        except BaseException:
            beside.unlink(missing_ok=True)
            raise
        os.unlink(source)


def clear_stale_temps(folder: Path, *, deep: bool = True) -> int:
    """Remove the temp files under ``folder`` (at any depth, or in it alone when not ``deep``)
    whose writer is no longer running (killed midway, or stopped by a full disk); a live
    writer's file is kept. Returns how many were removed."""
    removed = 0
    for path in stale_temps(folder, deep=deep):
        try:
            os.unlink(path)
            removed += 1
        except OSError:
            continue  # gone already, or not ours to remove
    return removed


def stale_temps(folder: Path, *, deep: bool = True) -> list[Path]:
    """The temp files under ``folder`` whose writer is gone (links are not followed)."""
    found = []
    for here, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if deep and not os.path.islink(os.path.join(here, d))]
        for name in names:
            pid = _writer_pid(name)
            if pid is not None and not _alive(pid):
                found.append(Path(here) / name)
    return found


def _writer_pid(name: str) -> int | None:
    """The pid a temp file's name carries (``.PID.NAME.RANDOM.tmp``, or ``.NAME.PID.tmp`` as
    earlier versions wrote), or None."""
    if not is_temp_name(name):
        return None
    head = name[1:].split(".", 1)[0]
    tail = name[: -len(".tmp")].rsplit(".", 1)[-1]
    return int(head) if head.isdigit() else int(tail) if tail.isdigit() else None


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    if os.name == "nt":  # pragma: no cover - no signal 0 there; keep what we cannot judge
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's live process
    return True


def replace_unsynced(path: Path, text: str | bytes | memoryview, *,
                     temp_dir: Path | None = None) -> None:
    """Replace ``path`` with ``text`` atomically but without fsync: for device-state caches
    whose loss or staleness after a crash costs only a recomputation. The temp file goes in
    ``temp_dir`` when one is given (as ``atomic_write``'s), else beside ``path``."""
    temporary = (temp_dir or path.parent) / f".{os.getpid()}.{path.name[:80]}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0)
    try:
        with os.fdopen(open_making_folder(temporary, flags), "wb") as handle:
            handle.write(text.encode("utf-8") if isinstance(text, str) else text)
        _replace(str(temporary), path)  # its folder made, another file system copied
    except BaseException:
        temporary.unlink(missing_ok=True)  # a full disk leaves no half-written temp behind
        raise


def append_durably(path: Path, data: bytes) -> None:
    """Append ``data`` with one write and fsync it; fsync the folder when the file is new."""
    # O_BINARY keeps Windows from translating newlines inside the appended bytes.
    flags = os.O_WRONLY | os.O_APPEND | getattr(os, "O_BINARY", 0)
    try:
        fd, created = os.open(path, flags), False
    except FileNotFoundError:
        fd, created = open_making_folder(path, flags | os.O_CREAT, 0o644), True
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        _fsync_fd(fd, path)
    except OSError as exc:
        name_path(exc, path)
        raise
    finally:
        os.close(fd)
    if created:
        fsync_dir(path.parent)


def sha256_bytes(data: bytes | memoryview) -> str:
    import hashlib  # here: 4 ms to import, and a prompt's hook hashes nothing

    return hashlib.sha256(data).hexdigest()


def sha256_text(text: str) -> str:
    return sha256_bytes(text.encode("utf-8"))
