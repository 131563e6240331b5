"""The vault's node set: which files are nodes, and how a title or id finds one.

The catalog parses each node file once and re-parses only files whose (size, mtime, inode)
changed, so a long-lived server pays for a change, not for the vault. ``refresh`` reports what
changed so the search index can update just those postings.

A snapshot in device state (``.osk/catalog/snapshot.json``) keeps each node's stat, front
matter and hashes, so a new process (a hook, a CLI command, a server starting) restores
unchanged nodes without reading their files; their text is read on first use. An entry is
trusted only when the file's stat still matches and the bytes were read safely after the
mtime race window. The snapshot is a cache: delete it and the next load reads every file.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import time
import weakref
from array import array
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from osk.errors import ContractError, DuplicateId, NodeNotFound, OskError, TitleError
from osk.store import node as node_mod
from osk.store.fsutil import RACE_WINDOW_NS, StatKey, atomic_write, collector_paused
from osk.store.ids import check_identifier
from osk.store.node import Node, Spool
from osk.store.titles import title_key
from osk.store.vault import SPACES, Vault


@dataclass(frozen=True, slots=True)  # no dict an entry: 0.1 KB a node at 100,000
class Entry:
    path: str
    stat: StatKey
    node: Node | None
    error: OskError | None
    read_at_ns: int = 0  # when the bytes were read; see read_is_final


@dataclass(frozen=True)
class Changes:
    added: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.added or self.changed or self.removed)


SNAPSHOT_SAVE_SECONDS = 30.0
# The nodes put last keep their text and front matter model; older ones keep their fields and
# hashes and read their text again on use, as nodes restored from the snapshot do: a catalog
# that reads or writes every node (``osk import``, a first load) holds a bounded share of them.
HELD_TEXTS = 256
CHANGE_LOG_KEEP = 100_000  # changed paths the catalog remembers for changed_since


@dataclass(eq=False)
class Catalog:
    vault: Vault
    entries: dict[str, Entry] = field(default_factory=dict)
    # id / title key -> its path, or the paths (two or more) that claim it (``_paths``): a
    # list a key cost 88 bytes a node more (two keys a node; 18 MB at 100,000).
    _by_id: dict[str, str | list[str]] = field(default_factory=dict)
    _by_title: dict[str, str | list[str]] = field(default_factory=dict)
    _snapshot: dict[str, Any] | None = None  # rel -> its saved entry, JSON as read
    _dirty: bool = False
    _saved_at: float = 0.0
    _log: list[str] = field(default_factory=list)  # paths whose entry was put or dropped
    _log_base: int = 0  # log items dropped from the front (see changed_since)
    # The snapshot this catalog last wrote, held open, and where each entry lies in it: a save
    # encodes only entries put since the last and copies the rest from there.
    _written: _Written | None = None
    # Until this catalog first saves: the snapshot it restored from, held open, and the entries
    # it restored from there. That first save copies those still unchanged from it too.
    _restored_from: _Written | None = None
    _restored: dict[str, Entry] = field(default_factory=dict)
    _held: dict[str, None] = field(default_factory=dict)  # paths put with text, oldest first
    # Whether a save keeps its file open for the next save to copy from (``_written``): a
    # server's saves then encode only what changed; ``osk import`` puts every entry anew
    # between its saves, so it keeps nothing.
    keep_encoded: bool = True
    _reader: _Reader = field(init=False)  # reads a let-go or restored node's text again
    _spool: Spool | None = None  # a bulk load's: where the nodes let go keep their fields

    def __post_init__(self) -> None:
        self._reader = _Reader(str(self.vault.root))

    def bulk_load(self) -> None:
        """This catalog serves a bulk load (``osk import``), which puts every node anew between
        two saves and reads few of them again: no save keeps its encoded entries for the next
        (``keep_encoded``), and the nodes let go keep their fields and hashes in a spool on
        disk (``node.Spool``), not in memory, until the process ends."""
        self.keep_encoded = False
        if self._spool is None:
            self.vault.temp_dir.mkdir(parents=True, exist_ok=True)
            self._spool = Spool(self._reader, str(self.vault.temp_dir))

    # -- refreshing ---------------------------------------------------------------------
    def refresh(self, files: Mapping[str, StatKey] | None = None) -> Changes:
        """Stat every node file; re-read the ones that changed. Returns what changed.

        ``files``: the stat of every node file, from a walk the caller just made the way
        ``walk_nodes`` walks (``osk.store.freshness`` lists the folders and stats their files in
        one).
        """
        if self._snapshot is None:
            _LIVE.add(self)
            with collector_paused():  # the first refresh restores every node: see there
                self._snapshot, self._restored_from = _load_snapshot(self.vault)
                return self._refresh(files)
        return self._refresh(files)

    def _refresh(self, files: Mapping[str, StatKey] | None) -> Changes:
        seen: Mapping[str, StatKey] = dict(self._walk()) if files is None else files
        added, changed = [], []
        read_any = False
        for rel, stat in seen.items():
            old = self.entries.get(rel)
            if old is None or old.stat != stat or not read_is_final(old):
                entry = self._restore(rel, stat) if old is None else None
                if entry is None:
                    entry, read_any = self._load(rel, stat), True
                if old is None:
                    added.append(rel)
                elif old.stat != stat or _content_differs(old, entry):
                    changed.append(rel)
                self._put(entry)
        removed = [rel for rel in self.entries if rel not in seen]
        for rel in removed:
            self._drop(rel)
        self._snapshot = {}  # restored from once: a later refresh finds nothing new in it
        result = Changes(tuple(added), tuple(changed), tuple(removed))
        self._dirty = self._dirty or read_any or bool(removed)
        self.save_if_due()
        return result

    def save_if_due(self) -> None:
        """Save the snapshot if it changed and the last save is ``SNAPSHOT_SAVE_SECONDS`` old."""
        if self._dirty and time.monotonic() - self._saved_at >= SNAPSHOT_SAVE_SECONDS:
            self.save_snapshot()

    # -- the snapshot -------------------------------------------------------------------
    def _restore(self, rel: str, stat: StatKey) -> Entry | None:
        """An entry rebuilt from the snapshot, if it still describes this file exactly."""
        saved = (self._snapshot or {}).get(rel)
        try:
            if not saved or tuple(saved["stat"]) != stat:
                return None
            read_at = int(saved["read_at"])
            # Written by save_snapshot from validated models, under this contract's version.
            fields = saved["meta"]
            if not isinstance(fields, dict) or not _REQUIRED_FIELDS <= fields.keys():
                return None
            hashes = {"file_hash": str(saved["file_hash"]), "body_hash": str(saved["body_hash"])}
        except (KeyError, TypeError, ValueError):
            return None  # a damaged entry: read the file instead
        if read_at - stat[1] < _RACE_WINDOW_NS:
            return None
        # The front matter model is built on first use (most restored nodes never need it).
        restored = Node(rel, None, loader=self._reader, fields=fields, **hashes)
        entry = Entry(rel, stat, restored, None, read_at)
        if self._restored_from is not None:
            self._restored[rel] = entry
        return entry

    def save_snapshot(self, *, last: bool = False) -> None:
        """Write the snapshot of every valid node (device state; atomic). ``last``: no later
        save will copy from this one, so its file is not kept open (``osk import``'s end)."""
        keep = self.keep_encoded and not last
        if not self._dirty:
            if not keep:
                self._close_written()
                self._let_restored_go()  # nothing will copy from it
            return
        old = self._written if self._written is not None else self._first_save_source()
        written = _Writing()
        try:
            # Its temp file in the write path's temp folder, which every open sweeps: a save
            # killed midway (the end of `osk import`) leaves no debris until the hourly sweep.
            fd = atomic_write(_snapshot_path(self.vault), written.parts(self._plan(old), old),
                              temp_dir=self.vault.temp_dir, reopen=keep)
        except OSError:
            if not keep:
                self._close_written()
            return  # a cache: failing to save it costs the next process a full read
        self._close_written()
        if fd is not None:
            self._written = _Written(fd, written.entries, written.starts, written.ends)
        self._dirty = False
        self._saved_at = time.monotonic()

    def _close_written(self) -> None:
        if self._written is not None:
            self._written.close()
            self._written = None

    def _let_restored_go(self) -> None:
        """Close the snapshot restored from and forget its entries: no save copies from it."""
        if self._restored_from is not None:
            self._restored_from.close()
        self._restored_from, self._restored = None, {}

    def _first_save_source(self) -> _Written | None:
        """For this catalog's first save: the snapshot it restored from, as if it had written
        it, holding the entries restored from it that are still its own (``_plan`` copies their
        runs instead of encoding each again: 1.3-1.6 s at 100,000 nodes). Where that file
        cannot be read back as this code writes one, None: every entry is encoded. Either way
        the catalog lets go of the snapshot it restored from."""
        source, restored = self._restored_from, self._restored
        if source is None:
            return None
        spans = _entry_spans(b"".join(source.read(0, source.size())))
        if spans is None:
            self._let_restored_go()
            return None
        self._restored_from, self._restored = None, {}  # held as ``_written`` from here
        entries: list[Entry] = []
        for rel, _start, _end in spans:
            entry = restored.get(rel)
            # An entry changed or gone since keeps its place, as one nothing is copied from:
            # a run copied is entries next to each other in the file.
            entries.append(entry if entry is not None and self.entries.get(rel) is entry
                           else _GONE)
        source.entries = entries
        source.starts = array("Q", (start for _rel, start, _end in spans))
        source.ends = array("Q", (end for _rel, _start, end in spans))
        self._written = source  # closed as a written snapshot is, by the save
        return source

    def _plan(self, old: _Written | None) -> Iterator[tuple[str, Entry] | range]:
        """The snapshot's entries in order: (path, entry) to encode, or a range of ``old``'s
        entries, whole runs of them still the same and next to each other there, to copy."""
        where = {} if old is None else {id(entry): at for at, entry in enumerate(old.entries)}
        run = range(0)
        for rel, entry in self.entries.items():
            if entry.node is None or not read_is_final(entry):
                continue
            at = where.get(id(entry), -1)
            if at >= 0 and run and at == run.stop:
                run = range(run.start, at + 1)
                continue
            if run:
                yield run
            run = range(at, at + 1) if at >= 0 else range(0)
            if at < 0:
                yield rel, entry
        if run:
            yield run

    def note_written(self, rel: str, written: Node | None = None) -> None:
        """Record a file osk itself just wrote, without waiting for the next walk; ``written``:
        the node as parsed from the text written (used when the file holds that text)."""
        self._dirty = True
        path = self.vault.abs(rel)
        try:
            stat = _stat_key(path.stat())
        except FileNotFoundError:
            self._drop(rel)
        else:
            self._put(self._load(rel, stat, written))

    def unsettled(self) -> tuple[int, int]:
        """(how many entries were read too soon after their file's mtime to vouch for it,
        the newest such mtime): what the next refresh still re-reads (``read_is_final``)."""
        count, newest = 0, 0
        for entry in self.entries.values():
            if not read_is_final(entry):
                count, newest = count + 1, max(newest, entry.stat[1])
        return count, newest

    def note_removed(self, rel: str) -> None:
        self._dirty = True
        self._drop(rel)

    def _walk(self) -> Iterator[tuple[str, StatKey]]:
        return walk_nodes(self.vault)

    def _load(self, rel: str, stat: StatKey, known: Node | None = None) -> Entry:
        """The file read now. Its node is parsed from the bytes, unless ``known`` (else the
        entry held) is a node of this path parsed from exactly these bytes: a re-read of an
        unchanged file (the race guard re-reads every fresh file) or of a file osk just wrote
        then costs the read and a compare, not the parse and the contract's validation."""
        read_at = time.time_ns()
        held = self.entries.get(rel)
        if held is not None:  # its path and stat objects, not a walk's copies (265 bytes)
            rel, stat = held.path, held.stat if held.stat == stat else stat
        known = known if known is not None else None if held is None else held.node
        try:
            text = _read_text(os.path.join(self.vault.root, rel))
            if known is not None and known.path == rel and known.holds(text):
                return Entry(rel, stat, known, None, read_at)
            return Entry(rel, stat, node_mod.parse(rel, text), None, read_at)
        except ContractError as exc:
            return Entry(rel, stat, None, exc, read_at)
        except (UnicodeDecodeError, OSError) as exc:
            error = ContractError(f"{rel}: unreadable as UTF-8 text ({exc})", path=rel)
            return Entry(rel, stat, None, error, read_at)

    def _put(self, entry: Entry) -> None:
        self._drop(entry.path)
        self.entries[entry.path] = entry
        self._logged(entry.path)
        _link_index(self._by_title, title_key(node_mod.title_from_path(entry.path)), entry.path)
        if entry.node is not None:
            _link_index(self._by_id, entry.node.id, entry.path)
            if entry.node.text_held:
                self._hold(entry.path)

    def _hold(self, rel: str) -> None:
        """``rel``'s entry is the newest holding its text; the oldest beyond ``HELD_TEXTS``
        lets its text go."""
        held = self._held
        held.pop(rel, None)
        held[rel] = None
        while len(held) > HELD_TEXTS:
            oldest = next(iter(held))
            del held[oldest]
            self._let_go(oldest)

    def _let_go(self, rel: str) -> None:
        entry = self.entries.get(rel)
        if entry is None or entry.node is None or not entry.node.text_held:
            return
        entry.node.let_text_go(self._reader, self._spool)

    def _drop(self, rel: str) -> None:
        old = self.entries.pop(rel, None)
        if old is None:
            return
        self._logged(rel)
        _unlink_index(self._by_title, title_key(node_mod.title_from_path(rel)), rel)
        if old.node is not None:
            _unlink_index(self._by_id, old.node.id, rel)

    def _logged(self, rel: str) -> None:
        self._log.append(rel)
        if len(self._log) > CHANGE_LOG_KEEP:
            half = len(self._log) // 2
            del self._log[:half]
            self._log_base += half

    # -- what changed -------------------------------------------------------------------
    @property
    def mark(self) -> int:
        """A position in the catalog's change log: pass it to ``changed_since`` later."""
        return self._log_base + len(self._log)

    def changed_since(self, mark: int) -> list[str] | None:
        """The paths whose entry was replaced, added or dropped since ``mark`` (repeats
        possible), or None when the log no longer reaches back that far: a reader that keeps
        derived state then looks at every entry once, as on first use."""
        if mark < self._log_base or mark > self.mark:
            return None
        return self._log[mark - self._log_base:]

    # -- reading ------------------------------------------------------------------------
    def nodes(self) -> Iterator[Node]:
        for entry in self.entries.values():
            if entry.node is not None:
                yield entry.node

    def errors(self) -> list[OskError]:
        return [entry.error for entry in self.entries.values() if entry.error is not None]

    def duplicate_ids(self) -> dict[str, list[str]]:
        return {nid: sorted(paths) for nid, paths in self._by_id.items()
                if isinstance(paths, list)}

    def duplicate_titles(self) -> dict[str, list[str]]:
        return {key: sorted(paths) for key, paths in self._by_title.items()
                if isinstance(paths, list)}

    def paths_with_title(self, title: str) -> list[str]:
        return sorted(_paths(self._by_title, title_key(title)))

    def get(self, ref: str) -> Node:
        """A node by id or title. Refuses while its id or title is claimed by two files."""
        check_identifier("a node reference (title or id)", ref)
        paths = _paths(self._by_id, ref) or _paths(self._by_title, title_key(ref))
        if not paths:
            raise NodeNotFound.named(ref)
        if len(paths) > 1:
            raise _ambiguity(ref, sorted(paths), by_id=ref in self._by_id)
        entry = self.entries[paths[0]]
        if entry.node is None:
            assert entry.error is not None
            raise entry.error
        twins = _paths(self._by_id, entry.node.id)
        if len(twins) > 1:
            raise _ambiguity(entry.node.id, sorted(twins), by_id=True)
        return entry.node

    def by_path(self, rel: str) -> Node | None:
        entry = self.entries.get(rel)
        return entry.node if entry else None


def _ambiguity(ref: str, paths: list[str], *, by_id: bool) -> OskError:
    listing = ", ".join(paths)
    if by_id:
        return DuplicateId(
            f"id {ref} is carried by {len(paths)} files ({listing}); osk will not read or write "
            f"it until a person keeps one and removes or re-ids the others",
            node_id=ref, paths=paths,
        )
    return TitleError(
        f"title {ref!r} is claimed by {len(paths)} files after case folding ({listing}); "
        f"a person must rename all but one",
        title=ref, paths=paths,
    )


def walk_nodes(vault: Vault) -> Iterator[tuple[str, StatKey]]:
    """Every ``.md`` file under the three Spaces with its stat key, hidden entries skipped.

    The one traversal behind the catalog's and the search index's freshness checks.
    """
    for space in SPACES:
        yield from _walk_dir(os.path.join(vault.root, space), space)


def _walk_dir(directory: str, prefix: str) -> Iterator[tuple[str, StatKey]]:
    try:
        with os.scandir(directory) as it:
            entries = list(it)
    except (FileNotFoundError, NotADirectoryError):
        return
    for entry in entries:
        if entry.name.startswith("."):
            continue
        rel = f"{prefix}/{entry.name}"
        try:  # a file removed during the walk is simply not there
            if entry.is_dir(follow_symlinks=False):
                yield from _walk_dir(entry.path, rel)
            elif entry.name.endswith(".md") and entry.is_file(follow_symlinks=False):
                yield rel, _stat_key(entry.stat(follow_symlinks=False))
        except FileNotFoundError:
            continue


def _stat_key(stat: os.stat_result) -> StatKey:
    return (stat.st_size, stat.st_mtime_ns, stat.st_ino)


_RACE_WINDOW_NS = RACE_WINDOW_NS  # a module name, so a test can narrow the window


def read_is_final(entry: Entry) -> bool:
    """Whether the bytes we hold are final for this stat.

    A file read within the clock's granularity of its mtime may be rewritten again with an
    identical (size, mtime). Such an entry is re-read on each refresh until one read happens
    safely after the window; from then on the stat alone vouches for it.
    """
    return entry.read_at_ns - entry.stat[1] >= _RACE_WINDOW_NS


# Catalogs still alive when the process exits save their snapshot then. Held weakly, so a
# catalog that was dropped (a validator run in a long-lived server) is freed, not kept.
_LIVE: weakref.WeakSet[Catalog] = weakref.WeakSet()


@atexit.register
def _save_live_snapshots() -> None:
    for catalog in list(_LIVE):
        catalog.save_snapshot()


def _read_text(path: str) -> str:
    return node_mod.read_text(path)


class _Reader:
    """Reads a node file's text by its vault path: the one loader a catalog's nodes share
    (``Node.let_text_go``)."""

    __slots__ = ("root",)

    def __init__(self, root: str) -> None:
        self.root = root

    def __call__(self, rel: str) -> str:
        return _read_text(f"{self.root}{os.sep}{rel}")  # os.path.join's checks: 0.1 s at 50,000


_REQUIRED_FIELDS = frozenset(node_mod.REQUIRED_KEYS)  # no required key has an alias
# The snapshot is valid only for the contract it was written under.
_SNAPSHOT_VERSION = f"1:{','.join(node_mod.KEYS)}"


_GONE = Entry("", (0, 0, 0), None, None)  # in a file's list: an entry no catalog holds now


class _Written:
    """A snapshot file as this catalog wrote it, held open (its bytes stay readable whatever
    replaces the file since), and where each of its entries lies in it, in its order. A later
    save copies the runs of entries still the same from it: 16 bytes an entry, where keeping
    their encoded texts took 0.65 KB (65 MB at 100,000 nodes)."""

    def __init__(self, fd: int, entries: list[Entry], starts: array[int], ends: array[int]
                 ) -> None:
        self.entries, self.starts, self.ends = entries, starts, ends
        self._fd = fd
        self._closing = weakref.finalize(self, os.close, fd)

    def close(self) -> None:
        self._closing()

    def size(self) -> int:
        return os.fstat(self._fd).st_size

    def read(self, start: int, end: int) -> Iterator[bytes]:
        """Bytes ``[start, end)`` of the file, a piece at a time."""
        while start < end:
            piece = os.pread(self._fd, min(_COPY_PIECE, end - start), start)
            if not piece:
                raise OSError(f"the catalog snapshot kept open ended at byte {start}")
            yield piece
            start += len(piece)


class _Writing:
    """A snapshot as it is written from a plan (``Catalog._plan``): entries encoded half a
    megabyte at a time, runs of the last file's copied; where each entry lands, for the next
    save."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.starts, self.ends = array("Q"), array("Q")

    def parts(self, plan: Iterator[tuple[str, Entry] | range], old: _Written | None
              ) -> Iterator[bytes]:
        head = _head()
        yield head
        at, sep, batch = len(head), b"", bytearray()
        for item in plan:
            batch += sep
            sep = b","
            if isinstance(item, range):  # what is encoded so far, then the run copied
                assert old is not None
                yield bytes(batch)
                at, batch = at + len(batch), bytearray()
                first, last = old.starts[item.start], old.ends[item.stop - 1]
                shift = at - first
                self.entries.extend(old.entries[item.start:item.stop])
                self.starts.extend(start + shift for start in old.starts[item.start:item.stop])
                self.ends.extend(end + shift for end in old.ends[item.start:item.stop])
                yield from old.read(first, last)
                at += last - first
                continue
            text = _encode(*item).encode("utf-8")
            self.entries.append(item[1])
            self.starts.append(at + len(batch))
            batch += text
            self.ends.append(at + len(batch))
            if len(batch) >= _BATCH_BYTES:
                yield bytes(batch)
                at, batch = at + len(batch), bytearray()
        yield bytes(batch) + b"}}"


_COPY_PIECE = 1 << 20  # bytes of the last snapshot read at a time when copying its entries
_BATCH_BYTES = 1 << 19  # encoded entries written at a time (some 800): never the whole held


def _encode(rel: str, entry: Entry) -> str:
    """One snapshot entry, ``"path":{...}``, as ``json.dumps`` writes it within the whole."""
    assert entry.node is not None
    # ``{"stat":…,"read_at":…,"meta":…,"file_hash":…,"body_hash":…}``, as ``_dumps`` writes
    # the whole: a spooled node's record is copied as it lies (``Node.plain_record``).
    return (f'{_dumps(rel)}:{{"stat":{_dumps(list(entry.stat))},"read_at":{entry.read_at_ns},'
            f"{entry.node.plain_record()[1:]}")


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _head() -> bytes:
    """What a snapshot file starts with; its entries follow, then ``}}``."""
    return f'{{"version":{_dumps(_SNAPSHOT_VERSION)},"entries":{{'.encode()


def _entry_spans(data: bytes) -> list[tuple[str, int, int]] | None:
    """Each entry's path and where its text (``"path":{...}``, as ``_encode`` writes it)
    lies in ``data``, a snapshot as ``_Writing`` writes one, in file order; None when
    ``data`` is not laid out so.

    Found without decoding the entries: JSON escapes every quote inside a string, so an
    unescaped ``":{"stat":`` can only close an entry's path and ``"body_hash":"<64 hex>"}``
    only close the entry, whose last field the hash is.
    """
    head = _head()
    if not data.startswith(head) or not data.endswith(b"}}"):
        return None
    key_ends = [match.start() for match in _KEY_END.finditer(data, len(head))]
    ends = [match.end() for match in _ENTRY_END.finditer(data, len(head))]
    if len(key_ends) != len(ends):
        return None
    spans: list[tuple[str, int, int]] = []
    at, last = len(head), len(data) - 2
    for key_end, end in zip(key_ends, ends, strict=True):
        if not at < key_end < end or data[at] != 0x22 or data[end] != (0x2C if end < last
                                                                        else 0x7D):
            return None  # an entry starts with its path's quote; a comma or the end follows
        raw = data[at + 1:key_end]
        try:
            rel = raw.decode("utf-8") if b"\\" not in raw else json.loads(b'"' + raw + b'"')
        except ValueError:
            return None
        spans.append((rel, at, end))
        at = end + 1
    return spans if at == last + 1 or not spans and at == last else None


_ENTRY_END = re.compile(rb'"body_hash":"[0-9a-f]{64}"\}')
_KEY_END = re.compile(rb'":\{"stat":')


def _snapshot_path(vault: Vault) -> Path:
    return vault.state("catalog", "snapshot.json")


def _load_snapshot(vault: Vault) -> tuple[dict[str, Any], _Written | None]:
    """The snapshot's entries (path -> its saved entry, JSON as read), and the file read,
    held open for the first save to copy from (``Catalog._first_save_source``)."""
    try:
        fd = os.open(_snapshot_path(vault), os.O_RDONLY)
    except OSError:
        return {}, None
    source = _Written(fd, [], array("Q"), array("Q"))
    try:
        data = json.loads(b"".join(source.read(0, source.size())))
    except (OSError, ValueError):
        source.close()
        return {}, None
    if not isinstance(data, dict) or data.get("version") != _SNAPSHOT_VERSION \
            or not isinstance(data.get("entries"), dict):
        source.close()
        return {}, None
    return data["entries"], source


def _paths(index: dict[str, str | list[str]], key: str) -> list[str]:
    """The paths an index holds under ``key`` (none, one, or the claimants)."""
    paths = index.get(key)
    return [] if paths is None else [paths] if isinstance(paths, str) else list(paths)


def _link_index(index: dict[str, str | list[str]], key: str, rel: str) -> None:
    paths = index.get(key)
    if paths is None:
        index[key] = rel
    elif isinstance(paths, str):
        index[key] = [paths, rel]
    else:
        paths.append(rel)


def _unlink_index(index: dict[str, str | list[str]], key: str, rel: str) -> None:
    paths = index.get(key)
    if paths == rel:
        del index[key]
    elif isinstance(paths, list) and rel in paths:
        paths.remove(rel)
        if len(paths) == 1:
            index[key] = paths[0]


def _content_differs(old: Entry, new: Entry) -> bool:
    if old.node is None or new.node is None:
        return old.node is not new.node or (old.error is None) != (new.error is None)
    if old.node.text_held:
        return old.node.text != new.node.text
    return old.node.file_hash != new.node.file_hash  # its text let go: read now, it would be new's
