"""The recall file: the search index's one store, in a form a hook can query in place.

The prompt-submit hook ranks the vault for every prompt, in a fresh process that must finish
in well under 100 ms, and a fresh ``osk search`` answers from here too. Both open
``.osk/index/recall.sqlite`` (device state, never synced, built from the node files whenever
it is missing, damaged or of another schema) read-only and read only the postings of the
query's terms and the records of the few documents ranking looks at (``RecallCorpus``), then
rank them with the same ``Ranking`` as ``search``. The long-running engine loads it whole
(``load``) and ranks from memory.

Who writes it: ``SearchIndex`` and nothing else, one transaction a commit (``mirror``), so
every change the index takes (a write through the engine, a hand edit found by its walk, a
sync) reaches the file, and a writer killed before its commit leaves the file as it was. The
file is a cache of the node files: each record carries the stat key of the file it was read
from, the engine's walk reads again a file whose stat key moved, and the hook drops a hit
whose file no longer has it (``still_served`` in ``osk.hooks.recall.per_prompt``), so a
deleted, rejected or hand-edited node is never shown from a stale copy.

SQLite (standard library) rather than a custom format: it gives random access by term,
concurrent readers while a writer commits (WAL), and atomic multi-row changes for free.
"""

from __future__ import annotations

import json
import os
import sqlite3
import zlib
from array import array
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from osk.search.bm25 import CODES, Bm25, code_for, mean_idf, narrowest, rarest
from osk.search.corpus import SearchDoc, Stored
from osk.store.locks import file_lock
from osk.store.transactions import immediate

SCHEMA = 5  # 2: supersedes holds a loose title key (key or text, osk.store.edges); 3: blocks;
# 4: blocks by count, packed (offsets and counts in the fewest bytes); a record holds no
# column again; a document's terms compressed; 5: the counts of dfs a table (``COUNTS``), kept
# by every write, and no mean idf in the meta
BLOCK = 180  # postings a block holds when built (``blocks``); a write splits one past 2 x BLOCK
FILE = "recall.sqlite"
LOCK = "recall.lock"  # writers only: a mirror and a rebuild never overlap; readers never wait
BUSY_MS = 2000  # how long a writer waits for another writer's transaction
# The meta's version: a new random token with each write that adds or removes a document or
# changes one's terms (every writer's, in the same transaction; ``_put``), so a writer knows
# whether another moved the counts of document frequencies since it wrote.
VERSION = "version"
# The counts of document frequencies (df -> how many terms), a table of a row a distinct df
# (2,000 at 100,000 nodes): what rank-bm25's floor for a word in over half the documents sums
# (``bm25.mean_idf``), with the meta's n. Every write changes the rows of the dfs its writer's
# index moved (``RecallWriter.mirror``: a create moves about two a distinct term), so they
# are always that writer's counts, as n is; a writer that no longer knows the file holds its
# documents (another process wrote since) writes them whole.
COUNTS = "dfs"
# The version whose documents the counts count exactly (the meta): a writer stamps it when it
# knows the file's documents are its own. A fresh search that takes a hand edit moves the counts
# from the dfs on disk (``RecallCorpus._counts``) only while it is the file's version.
COUNTED = "counted"

_TABLES = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS dfs (df INTEGER PRIMARY KEY, terms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS blobs (name TEXT PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS docs (
    row INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, file_hash TEXT NOT NULL,
    content_hash TEXT NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
    ino INTEGER NOT NULL, length INTEGER NOT NULL, title_key TEXT NOT NULL,
    loose_key TEXT NOT NULL, supersedes TEXT, terms BLOB NOT NULL, record TEXT NOT NULL,
    id TEXT NOT NULL, updated TEXT NOT NULL, space TEXT NOT NULL, scope TEXT);
CREATE INDEX IF NOT EXISTS docs_id ON docs (id);
CREATE INDEX IF NOT EXISTS docs_updated ON docs (space, scope, updated);
CREATE INDEX IF NOT EXISTS docs_title ON docs (title_key);
CREATE INDEX IF NOT EXISTS docs_loose ON docs (loose_key);
CREATE INDEX IF NOT EXISTS docs_supersedes ON docs (supersedes) WHERE supersedes IS NOT NULL;
CREATE TABLE IF NOT EXISTS postings (
    term TEXT NOT NULL, first INTEGER NOT NULL, rows BLOB NOT NULL, tfs BLOB NOT NULL,
    PRIMARY KEY (term, first)) WITHOUT ROWID
"""
# Postings are two arrays per block (``_pack``): a hook reads a term in one query and unpacks
# it in C, where a row per posting cost it a Python loop over thousands. A block holds a run of
# a term's postings (rows ascending; ``_origin`` says how they are stored), keyed by its base
# (at most its first row), so a write rewrites the one block that holds its row, not a common
# word's whole list (a row for most documents), and a rare word is one block wherever its rows
# lie. Schema 3 cut blocks by row range (row // 1024), which left a rare word's few postings
# one to a block, every row and count an unsigned int: at 10,000 nodes 189,566 blocks of 5
# postings on average, 14.9 MB; by count, in 16 and 8 bits, 38,823 blocks in 4.1 MB
# (docs/performance.md, "The recall file packed"). BLOCK keeps a block of 32-bit rows within
# what a 4 KB page holds of a row (about 1,000 bytes): a larger one spills into overflow pages
# and leaves them part empty (at 100,000 nodes 256 a block made 59.5 MB, 180 makes 42.7).
# Document lengths are one array by row (``blobs``), for BM25's length normalisation.
# A document's record (``_RECORD``) holds only what no column holds.


Error = sqlite3.Error  # what a reader catches without importing sqlite3 itself


class Unusable(Exception):
    """The recall file is missing, damaged or of another schema: rebuild it (writers) or do
    without it (the hook)."""


class Refused(Unusable):
    """The disk refused what reading the recall file takes (full or read-only, where a
    connection must make the files of its write-ahead log): the file may be whole, and is left
    as it is (``SearchIndex`` builds from the files in memory); the hook does without it."""


def _unusable(directory: Path, exc: BaseException, what: str) -> Unusable:
    """``Refused`` when the disk holding the file refused (``osk.store.vault.disk_error``),
    else ``Unusable`` saying the file ``what``."""
    from osk.store.vault import disk_error

    refused = disk_error(exc, sqlite_file=path_in(directory))
    if refused is not None:
        return Refused(f"the disk refused the recall file: {refused}")
    return Unusable(f"the recall file {what} ({exc})")


# the engine's last look, beside the file it vouches for (osk.reads.quick_search)
LOOK = "look.json"


def read_look(directory: Path) -> dict[str, Any] | None:
    """The look recorded with the recall file (``SearchIndex.note_look``), or None."""
    try:
        found = json.loads((directory / LOOK).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def write_look(directory: Path, look: dict[str, Any]) -> None:
    from osk.store.fsutil import replace_unsynced

    replace_unsynced(directory / LOOK, json.dumps(look, separators=(",", ":")))


def forget_look(directory: Path) -> None:
    """Called before the recall file takes changes: a look vouches only for what it saw."""
    try:
        os.unlink(directory / LOOK)
    except OSError:  # none there; or a read-only folder, where the recall file cannot change
        pass


def path_in(directory: Path) -> Path:
    return directory / FILE


def remove(directory: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        try:
            os.unlink(f"{path_in(directory)}{suffix}")
        except FileNotFoundError:
            pass


# -- writing (SearchIndex only) ----------------------------------------------------------------
class RecallWriter:
    """The index's side: apply its changes in one transaction (``mirror``)."""

    def __init__(self, directory: Path) -> None:
        self.path = path_in(directory)

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, under the writers' lock (a rebuild swaps the file)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with file_lock(self.path.with_name(LOCK), timeout=BUSY_MS / 1000), closing(
                sqlite3.connect(self.path, timeout=BUSY_MS / 1000, isolation_level=None)) as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")  # a cache: a lost commit is mended on load
            with immediate(db):
                yield db

    def mirror(self, ops: Iterable[list[Any]], meta: Mapping[str, Any], *,
               expected: str | None = None, counts: Mapping[int, int] | None = None,
               moved: Iterable[int] | None = None, last: str | None = None
               ) -> tuple[str | None, str]:
        """Apply the index's changes (``put``, ``stat``, ``del``) in one transaction; returns
        the file's version before and after it. ``counts``: the writer's counts of document
        frequencies after them; only the rows of the dfs ``moved`` names (those moved since
        this writer's last write, which left the file at version ``last``) when no other
        writer wrote since, else every row. The new version is stamped as counted when the
        version before was ``expected`` (the writer's documents were the file's)."""
        with self._transaction() as db:
            found = db.execute("SELECT value FROM meta WHERE key = ?", (VERSION,)).fetchone()
            before = json.loads(found[0]) if found is not None else None
            lengths = _Lengths(db)
            changed = False  # whether a document's terms may have changed
            for op in ops:
                if op[0] == "put":
                    changed = _put(db, lengths, SearchDoc.from_record(op[1]), op[2]) or changed
                elif op[0] == "stat":  # the same bytes at another stat, read at op[5]
                    db.execute(_RESTAT, (op[2], op[3], op[4], op[5], op[1]))
                elif op[0] == "del":
                    changed = _put(db, lengths, None, {}, path=op[1]) or changed
            after = new_version() if changed or not isinstance(before, str) else before
            values = {**meta, VERSION: after}
            if counts is not None:
                _set_counts(db, counts, moved if last is not None and before == last else None)
                if expected is not None and before == expected:
                    values[COUNTED] = after
            _set_meta(db, values)
        return before if isinstance(before, str) else None, after

    def meta(self) -> dict[str, Any]:
        """The meta the last ``mirror`` or ``rebuild`` wrote (the schema row aside)."""
        with closing(sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)) as db:
            rows = db.execute("SELECT key, value FROM meta WHERE key != 'schema'").fetchall()
        return {key: json.loads(value) for key, value in rows}

    def counted(self, version: str) -> Counter[int] | None:
        """The counts of document frequencies, when they count the documents the file holds
        at ``version`` (``COUNTED``) and it is still there, else None: what an index that
        found the file holding its documents adopts instead of counting them over every
        term."""
        with closing(sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)) as db:
            db.execute("BEGIN")
            stamps = {key: json.loads(value) for key, value in db.execute(
                "SELECT key, value FROM meta WHERE key IN (?, ?)", (VERSION, COUNTED))}
            if stamps.get(VERSION) != version or stamps.get(COUNTED) != version:
                return None
            return read_counts(db)


class RecallBuild:
    """A recall file built aside and swapped in whole, so a hook never reads a half-built one:
    the documents as they come (``put``: a bulk build streams them, in batches, and keeps no
    document's terms), then each term's postings cut into blocks whole, not posting by
    posting (``finish``: a bulk load ends with this, some 150 postings a node)."""

    BATCH = 1000  # documents inserted together

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._built = path.with_name(f".{os.getpid()}.{FILE}.tmp")  # what fsutil sweeps
        self._built.unlink(missing_ok=True)
        self._db: sqlite3.Connection | None = sqlite3.connect(self._built, isolation_level=None)
        # No rollback journal: nothing reads this file before it is whole, and a build killed
        # midway (it now lasts the whole read of the vault) leaves only the temp file, which
        # fsutil sweeps by its name, not a journal beside it that nothing would remove.
        self._db.execute("PRAGMA journal_mode=OFF")
        self._rows: list[tuple[Any, ...]] = []
        statements = _TABLES.strip().split(";")
        # Rows in key order and the indexes made after them: B-trees filled in order leave
        # their pages full, where inserts in hash order left 40 % of the postings' pages empty
        # (26 of 67 MB at 100,000 nodes).
        self._indexes = [statement for statement in statements if "CREATE INDEX" in statement]
        self._db.execute("BEGIN")
        for statement in statements:
            if statement not in self._indexes:
                self._db.execute(statement)

    def put(self, slot: int, doc: SearchDoc, terms: Iterable[str]) -> None:
        """The document at row ``slot`` (rows come in ascending order in a bulk build)."""
        self._rows.append((slot, *_columns(doc, terms)))
        if len(self._rows) >= self.BATCH:
            self._flush()

    def drop(self, slot: int) -> None:
        """No document at row ``slot`` after all (one put earlier in the build)."""
        self._flush()
        self._open().execute("DELETE FROM docs WHERE row = ?", (slot,))

    def finish(self, docs: Mapping[int, SearchDoc], bm25: Bm25, meta: Mapping[str, Any]
               ) -> str | None:
        """Write the postings of ``bm25`` and ``docs``' lengths, then swap the file in
        (``docs``: the documents put, by slot; a posting of a slot without one is left out,
        and then so are the counts of document frequencies). Returns what ``end`` does."""
        self.postings(_all_blocks(docs, bm25))
        lengths = array("I", [0] * (max(docs, default=-1) + 1))
        for slot, doc in docs.items():
            lengths[slot] = doc.length
        whole = bm25.lengths.keys() <= docs.keys()
        return self.end(lengths, meta, bm25.df_counts() if whole else None)

    def postings(self, blocks: Iterable[Block]) -> None:
        """Insert stored blocks (``blocks``: terms in sorted order, each term's rows ascending,
        as ``blocks`` makes them), after the documents put so far."""
        self._flush()
        self._open().executemany("INSERT INTO postings VALUES (?, ?, ?, ?)", blocks)

    def end(self, lengths: array[int], meta: Mapping[str, Any],
            counts: Mapping[int, int] | None = None) -> str | None:
        """Write the documents' lengths (by slot), ``meta`` and the counts of document
        frequencies of the postings built (``counts``, if known), then swap the file in.
        Returns its version when the counts went with it (None: they are not known to be
        the file's, and its writer takes none later)."""
        self._flush()
        db = self._open()
        db.execute("INSERT INTO blobs VALUES ('lengths', ?)", (lengths.tobytes(),))
        for statement in self._indexes:
            db.execute(statement)
        version = new_version()
        values = {"schema": SCHEMA, **meta, VERSION: version}
        if counts is not None:
            _set_counts(db, dict(sorted(counts.items())), None)  # in key order: full pages
            values[COUNTED] = version
        _set_meta(db, values)
        db.execute("COMMIT")
        db.close()
        self._db = None
        with file_lock(self.path.with_name(LOCK), timeout=BUSY_MS / 1000):
            remove(self.path.parent)  # the old file's WAL must not meet the new file
            os.replace(self._built, self.path)
        return version if counts is not None else None

    def abandon(self) -> None:
        """Close and remove what is not swapped in (a failed build; nothing after ``finish``)."""
        if self._db is not None:
            self._db.close()
            self._db = None
            self._built.unlink(missing_ok=True)

    def _open(self) -> sqlite3.Connection:
        if self._db is None:
            raise Unusable("the recall file's build was already ended")
        return self._db

    def _flush(self) -> None:
        rows, self._rows = self._rows, []
        if rows:
            self._open().executemany(_REPLACE_DOC, rows)  # one put again: the last stands


Block = tuple[str, int, bytes, bytes]  # a postings row: term, base row, rows, counts


def _all_blocks(docs: Mapping[int, SearchDoc], bm25: Bm25) -> Iterator[Block]:
    """Every term's postings as stored blocks, in key order (terms sorted, each term's rows
    ascending), made one term at a time; a posting of a slot without its document is left
    out."""
    strays = bm25.lengths.keys() - docs.keys()
    for term in sorted(bm25.all_terms()):
        slots, tfs = bm25.columns(term)
        if strays and not strays.isdisjoint(slots):
            kept = [(slot, tf) for slot, tf in zip(slots, tfs, strict=True) if slot in docs]
            slots, tfs = array("I", [slot for slot, _ in kept]), array("I", [tf for _, tf in kept])
        if slots:
            yield from blocks(term, slots, tfs)


# A document read again at another stat and found the same: its stat key and when it was read
# (the record's last item, ``_columns``), so a load knows it is past the mtime race.
_RESTAT = ("UPDATE docs SET size = ?, mtime_ns = ?, ino = ?, record = json_replace(record, "
           "'$[6]', ?) WHERE path = ?")
_INSERT_DOC = "INSERT INTO docs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
_REPLACE_DOC = _INSERT_DOC.replace("INSERT", "INSERT OR REPLACE", 1)


def _columns(doc: SearchDoc, terms: Iterable[str]) -> tuple[Any, ...]:
    size, mtime_ns, ino = doc.stat
    record = [doc.title, doc.summary, doc.trust, doc.created, doc.valid_from, doc.valid_to,
              doc.read_ns]  # _RECORD: what no column holds (schema 3 held all of it again)
    return (doc.path, doc.file_hash, doc.content_hash, size, mtime_ns, ino, doc.length,
            doc.title_key, doc.loose_key, doc.supersedes, _terms_column(terms),
            json.dumps(record, ensure_ascii=False, separators=(",", ":")), doc.id,
            doc.updated, doc.space, doc.scope)


def _terms_column(terms: Iterable[str]) -> bytes:
    """A document's distinct terms as stored: read only when it changes (``_put``), so kept
    compressed (7.0 MB of text at 10,000 nodes, 4.4 compressed)."""
    return zlib.compress(" ".join(terms).encode("utf-8"))


def _terms_of(stored: bytes) -> list[str]:
    text = zlib.decompress(stored).decode("utf-8")
    return text.split(" ") if text else []


def stored_terms(directory: Path, doc: SearchDoc, params: Mapping[str, Any]) -> list[str] | None:
    """The distinct terms the recall file holds for this version of ``doc`` (the same content
    hash and length, indexed with ``params``): what the index removes when the version
    changes (it loads no document's terms). None when the file holds another version (a later
    write mirrored there, another process's), none, or cannot be read: the caller then
    finds them in its postings."""
    try:
        with closing(sqlite3.connect(f"file:{path_in(directory)}?mode=ro", uri=True)) as db:
            meta = dict(db.execute("SELECT key, value FROM meta "
                                   "WHERE key IN ('schema', 'params')"))
            if meta.get("schema") != str(SCHEMA) or json.loads(meta.get("params", "0")) != params:
                return None
            row = db.execute("SELECT content_hash, length, terms FROM docs WHERE path = ?",
                             (doc.path,)).fetchone()
        if row is None or (row[0], row[1]) != (doc.content_hash, doc.length):
            return None
        return _terms_of(row[2])
    except (sqlite3.Error, ValueError, zlib.error):  # UnicodeDecodeError is a ValueError
        return None


# A document's columns, as ``documents`` reads them back into a SearchDoc
_RECORD = ("record, path, id, updated, space, scope, supersedes, size, mtime_ns, ino, "
           "file_hash, length, title_key, loose_key, content_hash")


def _lengths(db: sqlite3.Connection) -> array[int]:
    found = db.execute("SELECT data FROM blobs WHERE name = 'lengths'").fetchone()
    if found is None:
        raise Unusable("the recall file has no document lengths")
    lengths = array("I")
    lengths.frombytes(found[0])
    return lengths


class _Lengths:
    """The document-length array, changed where it lies: a write sets one row's 4 bytes in
    place (SQLite's incremental blob I/O), where rewriting the whole array cost every write
    4 bytes a document (its read, its pages in the WAL, their checkpoint). A row past the end
    grows the array with room to spare, so a run of creates rewrites it rarely; the spare rows
    hold 0, as a deleted document's row does, and no posting names them."""

    _ITEM = array("I").itemsize

    def __init__(self, db: sqlite3.Connection) -> None:
        found = db.execute("SELECT rowid, length(data) FROM blobs WHERE name = 'lengths'"
                           ).fetchone()
        if found is None:
            raise Unusable("the recall file has no document lengths")
        self._db, self._rowid, self._rows = db, found[0], found[1] // self._ITEM

    def __setitem__(self, row: int, length: int) -> None:
        if row >= self._rows:
            self._grow(row + 1 + max(1024, row // 4))
        with self._db.blobopen("blobs", "data", self._rowid) as blob:
            blob.seek(row * self._ITEM)
            blob.write(array("I", [length]).tobytes())

    def _grow(self, rows: int) -> None:
        every = _lengths(self._db)
        every.extend([0] * (rows - len(every)))
        self._db.execute("UPDATE blobs SET data = ? WHERE rowid = ?",
                         (every.tobytes(), self._rowid))
        self._rows = rows


def blocks(term: str, slots: array[int], tfs: array[int]) -> Iterator[Block]:
    """A term's postings (rows ascending) as stored blocks of ``BLOCK`` postings each."""
    for start in range(0, len(slots), BLOCK):
        rows = slots[start:start + BLOCK]
        origin = _origin(rows[0])
        yield (term, rows[0], *_pack(_counted_from(rows, 0, origin),
                                     narrowest(tfs[start:start + BLOCK])))


def _origin(base: int) -> int:
    """Where the stored rows of a block with this base count from: the start of the 65,536
    rows its base lies in. Below 65,536 rows (most vaults) they are the rows themselves, which
    a reader takes as stored (counted from the base, they cost it an addition a posting: 8,000
    postings read 1.0 -> 2.0 ms); and a block whose rows share their span is in 16 bits."""
    return base & ~0xFFFF


def _counted_from(values: array[int], origin: int, to: int) -> array[int]:
    """Rows counted from ``origin`` counted from ``to`` instead, in the narrowest type."""
    if origin == to:
        return narrowest(values)
    return narrowest(array("I", [value + origin - to for value in values]))


def _pack(rows: array[int], tfs: array[int]) -> tuple[bytes, bytes]:
    """A block's stored arrays: each behind one byte naming its array type (``_block``)."""
    return rows.typecode.encode() + rows.tobytes(), tfs.typecode.encode() + tfs.tobytes()


def _block(stored: bytes) -> array[int]:
    """One of a block's arrays as ``_pack`` stored it; Unusable when it is not one."""
    try:
        if chr(stored[0]) not in CODES:
            raise ValueError(stored[:1])
        return array(chr(stored[0]), stored[1:])
    except (ValueError, IndexError, TypeError):  # another type, a partial item, no type byte
        raise Unusable("a postings block of the recall file is damaged") from None


def unpack(base: int, rows: bytes, tfs: bytes) -> tuple[Iterable[int], array[int]]:
    """A stored block's (rows ascending, their counts) from its base (its key) and arrays."""
    origin = _origin(base)
    found = _block(rows)
    return (map(origin.__add__, found) if origin else found), _block(tfs)


def _put(db: sqlite3.Connection, lengths: _Lengths, doc: SearchDoc | None,
         frequencies: Mapping[str, int], *, path: str = "") -> bool:
    """Store ``doc`` (None: delete ``path``), touching each affected term's arrays once.
    Whether a document came or went, or one's terms changed: what moves the counts of
    document frequencies (a version another writer already stored moves nothing)."""
    path = doc.path if doc is not None else path
    old = db.execute("SELECT row, terms FROM docs WHERE path = ?", (path,)).fetchone()
    if old is None and doc is None:
        return False
    if old is not None:
        row, before = old[0], _terms_of(old[1])
    else:
        row = db.execute("SELECT coalesce(max(row) + 1, 0) FROM docs").fetchone()[0]
        before = []
    for term in dict.fromkeys([*before, *frequencies]):
        _post(db, term, row, int(frequencies.get(term, 0)))
    if doc is None:
        db.execute("DELETE FROM docs WHERE row = ?", (row,))
        lengths[row] = 0
        return True
    db.execute("DELETE FROM docs WHERE row = ?", (row,))
    db.execute(_INSERT_DOC, (row, *_columns(doc, frequencies)))
    lengths[row] = doc.length
    return old is None or set(before) != frequencies.keys()


def _post(db: sqlite3.Connection, term: str, row: int, tf: int) -> None:
    """Set ``row``'s count in ``term``'s postings (0 removes it): one block's arrays, the last
    whose base is at or before ``row``. Blocks split a term's rows by their bases, so a block
    keeps its base when its first row goes; a row before every block becomes the first
    block's base. The arrays are edited as stored (in 8 or 16 bits), widened only
    for a value they cannot hold: a write costs a copy of the block, not a pass over it."""
    found = (db.execute("SELECT first, rows, tfs FROM postings WHERE term = ? AND first <= ? "
                        "ORDER BY first DESC LIMIT 1", (term, row)).fetchone()
             or db.execute("SELECT first, rows, tfs FROM postings WHERE term = ? "
                           "ORDER BY first LIMIT 1", (term,)).fetchone())
    if found is None:
        base, stored, tfs = row, array("B"), array("B")
    else:
        base, stored, tfs = found[0], _block(found[1]), _block(found[2])
    origin = _origin(base)
    if row < base:  # before every block of the term: the first block starts at it
        if not tf:
            return
        base = row
        stored, origin = _counted_from(stored, origin, _origin(row)), _origin(row)
    at = bisect_left(stored, row - origin)
    present = at < len(stored) and stored[at] == row - origin
    if present and tfs[at] == tf:
        return  # unchanged: an edit rewrites only the terms it changed (a common term's
        # arrays hold a row for most documents)
    if present and tf:
        tfs = _fitting(tfs, tf)
        tfs[at] = tf
    elif present:
        del stored[at], tfs[at]
    elif tf:
        stored = _fitting(stored, row - origin)
        stored.insert(at, row - origin)
        tfs = _fitting(tfs, tf)
        tfs.insert(at, tf)
    else:
        return
    if found is not None and (not stored or base != found[0]):  # its key moves, or it goes
        db.execute("DELETE FROM postings WHERE term = ? AND first = ?", (term, found[0]))
    if len(stored) > 2 * BLOCK:  # cut in two: a write's cost stays that of one block
        half = len(stored) // 2
        split = origin + stored[half]
        db.execute("INSERT OR REPLACE INTO postings VALUES (?, ?, ?, ?)",
                   (term, split, *_pack(_counted_from(stored[half:], origin, _origin(split)),
                                        tfs[half:])))
        stored, tfs = stored[:half], tfs[:half]
    if stored:
        db.execute("INSERT OR REPLACE INTO postings VALUES (?, ?, ?, ?)",
                   (term, base, *_pack(stored, tfs)))


def new_version() -> str:
    """A version no other write of any recall file gives (``VERSION``)."""
    return os.urandom(8).hex()


def _set_counts(db: sqlite3.Connection, counts: Mapping[int, int],
                moved: Iterable[int] | None) -> None:
    """The rows of the counts of dfs ``moved`` names (None: all, the others removed), as
    ``counts`` has them; none empty."""
    if moved is None:
        db.execute(f"DELETE FROM {COUNTS}")  # noqa: S608 - a fixed name
        moved = counts
    rows = [(df, counts.get(df, 0)) for df in moved if df > 0]
    db.executemany(f"DELETE FROM {COUNTS} WHERE df = ?",  # noqa: S608 - a fixed name
                   [(df,) for df, terms in rows if terms <= 0])
    db.executemany(f"INSERT OR REPLACE INTO {COUNTS} VALUES (?, ?)",  # noqa: S608
                   [row for row in rows if row[1] > 0])


def read_counts(db: sqlite3.Connection) -> Counter[int]:
    """The counts of document frequencies the file holds; Unusable when damaged."""
    counts = Counter(dict(db.execute(f"SELECT df, terms FROM {COUNTS}")))  # noqa: S608
    if not all(type(df) is int and type(terms) is int and df > 0 and terms > 0
               for df, terms in counts.items()):
        raise Unusable("the recall file's counts of document frequencies are damaged")
    return counts


def _fitting(values: array[int], value: int) -> array[int]:
    """``values`` as they are if their type holds ``value``, else in the next that does."""
    if value < 1 << 8 * values.itemsize:
        return values
    code = next(code for code in CODES if value < 1 << 8 * array(code).itemsize)
    return array(code, values)


def _set_meta(db: sqlite3.Connection, meta: Mapping[str, Any]) -> None:
    """The meta rows; ``n`` and ``total_length`` are counted from the docs unless the writer
    knows them (the index does: counting is a scan of every row, on every write)."""
    if "n" in meta and "total_length" in meta:
        values = dict(meta)
    else:
        n, total = db.execute("SELECT count(*), coalesce(sum(length), 0) FROM docs").fetchone()
        values = {**meta, "n": n, "total_length": total}
    db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                   ((key, json.dumps(value)) for key, value in values.items()))


# -- reading (the hooks) -----------------------------------------------------------------------
def read_meta(db: sqlite3.Connection) -> dict[str, Any]:
    """The file's meta table, decoded (N, the total length, the parameters, the approvals the
    index read under...); ``Unusable`` when the file is of another schema."""
    meta = dict(db.execute("SELECT key, value FROM meta"))
    if json.loads(meta.get("schema", "0")) != SCHEMA:
        raise Unusable("the recall file has another schema")
    return {key: json.loads(value) for key, value in meta.items()}


class RecallCorpus:
    """What ``Ranking`` reads of a corpus, loaded from the recall file for one query's terms.

    Postings are those of ``terms`` only; a document record is read when ranking first looks
    at it. N and the average document length are the whole corpus's, kept in the file's meta
    table, and the mean idf (rank-bm25's epsilon floor) is summed from its counts of dfs when
    a word in over half the documents needs it, so the scores are the index's own.

    ``bound``: for a ranking bounded to that many postings (``Ranking.rank``'s ``postings``)
    only the terms it reads are loaded (``bm25.rarest``, by each term's document frequency
    counted from its blocks' sizes), the others known by their document frequency alone: a
    read's similar nodes cost the same at any size, where a common word's list grew with the
    vault. Such a corpus ranks that bound only and takes no ``amend``.
    """

    def __init__(self, db: sqlite3.Connection, terms: Iterable[str], *,
                 bound: int | None = None) -> None:
        self._db = db
        self.meta = read_meta(db)
        self.docs = _LazyDocs(db)
        self.by_title = _Lookup(db, "title_key")
        self.by_loose = _Lookup(db, "loose_key")
        self.successors: dict[str, set[int]] = {}
        for row, key in db.execute("SELECT row, supersedes FROM docs "
                                   "WHERE supersedes IS NOT NULL"):
            self.successors.setdefault(key, set()).add(row)
        every = _lengths(db)
        postings: dict[str, dict[int, int]] = {}
        unread: dict[str, int] = {}
        if bound is not None:
            counts = terms if isinstance(terms, Mapping) else Counter(terms)
            unread = _dfs(db, list(counts))
            terms = rarest(counts, lambda term: unread.get(term, 0), bound)
            unread = {term: df for term, df in unread.items() if term not in terms}
        self._bound = bound
        self._unread = unread
        for term in dict.fromkeys(terms):
            held: dict[int, int] = {}
            for block in db.execute("SELECT first, rows, tfs FROM postings WHERE term = ? "
                                    "ORDER BY first", (term,)):
                held.update(zip(*unpack(*block), strict=True))
            postings[term] = held
        wanted = set().union(*postings.values()) if postings else set()
        # (superseded, superseding) rows, in one indexed join: what Corpus.supersession gives
        self._pairs = list(db.execute(
            "SELECT old.row, new.row FROM docs AS new JOIN docs AS old "
            "ON old.loose_key = new.supersedes WHERE old.row != new.row"))
        wanted.update(row for pair in self._pairs for row in pair)
        lengths = {row: every[row] for row in wanted if row < len(every)}
        self._every = every
        self._next_row = 0  # a created document's row (``amend``), found on first need
        self.amended: dict[str, SearchDoc | None] = {}  # path -> its document now (``amend``)
        self._stored_df = {term: len(held) for term, held in postings.items()}
        self._moved: dict[str, int] = {}  # term -> how much ``amend`` moved its df by
        self.bm25 = _PartialBm25(postings, lengths, int(self.meta.get("n", 0)),
                                 int(self.meta.get("total_length", 0)), self._counts, unread)

    def supersession(self) -> tuple[list[tuple[int, int]], set[int]]:
        return self._pairs, {old for old, _ in self._pairs}

    def amend(self, path: str, doc: SearchDoc | None, frequencies: Mapping[str, int]) -> None:
        """Take a change of one node file the file does not hold yet, as the index would
        take it (``doc`` and ``frequencies``: ``osk.search.versions.document``'s; None: the
        file is gone), for this query only: its postings among the query's terms, N and the
        total length (integers: exact), its record, title keys and supersession; and how it
        moves the df of each term it gained or lost, which the mean idf over every term
        (rank-bm25's floor for a word in over half the documents) sums (``_counts``). A path
        amended twice, or a document made under another path, is the caller's error."""
        if self._bound is not None:
            raise ValueError("a corpus bounded to its rarest terms takes no amend")
        self.amended[path] = doc
        found = self._db.execute("SELECT row, terms FROM docs WHERE path = ?",
                                 (path,)).fetchone()
        old = self.docs[found[0]] if found is not None else None
        if old is None and doc is None:
            return
        row = found[0] if found is not None else self._created_row()
        before = set(_terms_of(found[1])) if found is not None else set()
        after = set(frequencies) if doc is not None else set()
        moved = self._moved
        for term in before ^ after:  # a term kept keeps its df
            moved[term] = moved.get(term, 0) + (1 if term in after else -1)
        bm25 = self.bm25
        bm25.take(row, None if old is None else old.length,
                  None if doc is None else doc.length, frequencies)
        self.by_title.move(row, None if doc is None else doc.title_key)
        self.by_loose.move(row, None if doc is None else doc.loose_key)
        if old is not None and row in self.successors.get(old.supersedes or "", ()):
            self.successors[old.supersedes or ""].discard(row)
            if not self.successors[old.supersedes or ""]:
                del self.successors[old.supersedes or ""]
        if doc is not None:
            self.docs[row] = doc
            if doc.supersedes is not None:
                self.successors.setdefault(doc.supersedes, set()).add(row)
        self._pairs = [pair for pair in self._pairs if row not in pair]
        if doc is not None:  # what the join of ``__init__`` gives this row now
            self._pairs.extend((old_row, row) for old_row in sorted(
                self.by_loose.get(doc.supersedes, ()) if doc.supersedes else ())
                if old_row != row)
            self._pairs.extend((row, new_row) for new_row in sorted(
                self.successors.get(doc.loose_key, ())) if new_row != row)
        for pair_row in {slot for pair in self._pairs for slot in pair} - bm25.lengths.keys():
            bm25.lengths[pair_row] = self._every[pair_row]

    def _counts(self) -> Counter[int]:
        """The counts of document frequencies as the file holds them (its last writer's, as
        its n is), and as the changes taken (``amend``) leave them: then only when they count
        the documents the file holds (``COUNTED`` is its version), each term the changes
        gained or lost moved from its df on disk to its df now (the query's terms as read,
        another's counted from its stored blocks). Unusable when a change needs counts the
        file does not vouch for, or they are damaged: the engine ranks."""
        counts = read_counts(self._db)
        if not counts and self.meta.get("n"):  # a build that could not count them: none yet
            raise Unusable("the recall file holds no counts of dfs")
        if not self.amended:
            return counts
        version = self.meta.get(VERSION)
        if not isinstance(version, str) or self.meta.get(COUNTED) != version:
            raise Unusable("the recall file holds no counts of dfs of its documents as they are")
        for term, by in self._moved.items():
            if by:
                df = self._stored_df.get(term)
                if df is None:
                    df = sum(len(_block(tfs)) for (tfs,) in self._db.execute(
                        "SELECT tfs FROM postings WHERE term = ?", (term,)))
                if df:
                    counts[df] -= 1
                if df + by > 0:
                    counts[df + by] += 1
        return counts

    def _created_row(self) -> int:
        """A row no document holds: past every row the file has, and each one given."""
        if not self._next_row:
            top = self._db.execute("SELECT coalesce(max(row) + 1, 0) FROM docs").fetchone()[0]
            self._next_row = max(int(top), len(self._every))
        self._next_row += 1
        return self._next_row - 1

    def terms_of(self, row: int) -> list[str]:
        """The document's terms among the query's (all ranking asks of it): those whose
        postings were read, then (``bound``) those known by their df alone, from the
        document's own list of terms."""
        found = [term for term, rows in self.bm25.postings_by_term.items() if row in rows]
        if self._unread:
            stored = self._db.execute("SELECT terms FROM docs WHERE row = ?", (row,)).fetchone()
            held = set(_terms_of(stored[0])) if stored is not None else set()
            found += [term for term in self._unread if term in held]
        return found

    def holding(self, rows: Iterable[int], terms: Iterable[str]) -> dict[int, set[str]]:
        """Which of ``terms`` each row holds, among the query's (``Corpus.holding``)."""
        wanted = set(terms)
        return {row: wanted.intersection(self.terms_of(row)) for row in rows}


def _dfs(db: sqlite3.Connection, terms: list[str]) -> dict[str, int]:
    """Each of ``terms``' document frequency, from its blocks' sizes (``_pack``'s type byte
    and length), no block decoded; a term the file does not hold is left out."""
    width = {ord(code): array(code).itemsize for code in CODES}
    found: dict[str, int] = {}
    for term, kind, size in db.execute(
            f"SELECT term, unicode(CAST(substr(tfs, 1, 1) AS TEXT)), length(tfs) FROM postings "  # noqa: S608
            f"WHERE term IN ({','.join('?' * len(terms))})", terms):
        found[term] = found.get(term, 0) + (size - 1) // width[kind]
    return found


class _LazyDocs(dict):  # type: ignore[type-arg]
    """row -> SearchDoc, read on first access (the stat columns are the current ones)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        super().__init__()
        self._db = db

    def __missing__(self, row: int) -> SearchDoc:
        found = next(documents(self._db, "row = ?", (row,)), None)
        if found is None:  # postings name a row with no record: damaged, do without
            raise Unusable(f"the recall file's postings name a missing document ({row})")
        self[row] = found
        return found


class _Lookup:
    """title key -> rows, one indexed query per key asked; the rows ``move`` changed (a
    document amended: its key now, or None when gone) by their keys here."""

    def __init__(self, db: sqlite3.Connection, column: str) -> None:
        self._db, self._column = db, column
        self._moved: dict[int, str | None] = {}

    def move(self, row: int, key: str | None) -> None:
        self._moved[row] = key

    def get(self, key: str, default: Iterable[int] = ()) -> Iterable[int]:
        rows = {row for (row,) in self._db.execute(
            f"SELECT row FROM docs WHERE {self._column} = ?", (key,))}  # noqa: S608 - fixed
        if self._moved:
            rows.difference_update(self._moved)
            rows.update(row for row, now in self._moved.items() if now == key)
        return rows or default


class _PartialBm25(Bm25):
    """BM25 over some terms' postings, with the whole corpus's statistics (and the document
    frequencies of terms whose postings were not read: ``unread``)."""

    KEEPS_IMPACTS = False  # read for one query: ordering a long list costs more than walking it

    def __init__(self, postings: dict[str, dict[int, int]], lengths: dict[int, int], n: int,
                 total_length: int, counts: Callable[[], Mapping[int, int]],
                 unread: Mapping[str, int]) -> None:
        super().__init__()
        self._added = postings  # no base: every posting read is in the overlay
        self.lengths = lengths
        self.total_length = total_length
        self._n = n
        self._counts = counts  # the counts of dfs as the changes taken leave them
        self._unread = unread

    def df(self, term: str) -> int:
        held = self._added.get(term)
        return len(held) if held is not None else self._unread.get(term, 0)

    @property
    def size(self) -> int:
        return self._n

    @property
    def postings_by_term(self) -> dict[str, dict[int, int]]:
        return self._added

    def take(self, row: int, before: int | None, after: int | None,
             frequencies: Mapping[str, int]) -> None:
        """A document's change at ``row`` (its length ``before`` and ``after``, None where it
        is absent) among the terms read, as ``Bm25.remove`` then ``add`` leave them: counts
        set or dropped where they lie, a new row last (as the index's overlay holds it)."""
        if before is not None:
            self._n -= 1
            self.total_length -= before
            self.lengths.pop(row, None)
        if after is not None:
            self._n += 1
            self.total_length += after
            self.lengths[row] = after
        for term, held in self._added.items():
            tf = frequencies.get(term, 0) if after is not None else 0
            if tf:
                held[row] = tf
            else:
                held.pop(row, None)
        self._changed()  # the mean idf over every term, too: summed again when asked

    def average_idf(self) -> float:
        """The mean idf summed from the counts of dfs on disk (the writer's bits: read only
        for a word in over half the documents), as the changes taken moved them (``take``,
        ``RecallCorpus._counts``: the bits an index holding the change gets), or Unusable
        where the file holds none that count its documents (the engine ranks that query)."""
        cached = self._average_idf
        if cached is not None and cached[0] == self._n:
            return cached[1]
        value = mean_idf(self._n, self._counts())
        self._average_idf = (self._n, value)
        return value


def documents(db: sqlite3.Connection, where: str = "", args: Iterable[object] = (),
              order: str = "", limit: int = 0) -> Iterator[SearchDoc]:
    """Document records (current stat keys) matching an SQL condition, lazily."""
    return (doc for _, doc in _rows(db, where, args, order, limit))


def _rows(db: sqlite3.Connection, where: str = "", args: Iterable[object] = (),
          order: str = "", limit: int = 0) -> Iterator[tuple[int, SearchDoc]]:
    """``documents`` with each one's row."""
    query = f"SELECT row, {_RECORD} FROM docs"  # noqa: S608 - fixed column names
    query += f" WHERE {where}" if where else ""
    query += f" ORDER BY {order}" if order else ""
    query += f" LIMIT {int(limit)}" if limit else ""
    for (row, record, path, node_id, updated, space, scope, supersedes, size, mtime_ns, ino,
         file_hash, length, title_key, loose_key, content_hash) in db.execute(query, tuple(args)):
        title, summary, trust, created, valid_from, valid_to, read_ns = json.loads(record)
        yield row, SearchDoc(path, node_id, title, summary, updated, space, scope, trust,
                             created, valid_from, valid_to, supersedes, (size, mtime_ns, ino),
                             file_hash, read_ns, length, title_key, loose_key, content_hash)


# -- loading (the engine's index) --------------------------------------------------------------
def load(directory: Path, params: Mapping[str, Any]) -> Stored:
    """Everything the recall file holds, read in one transaction (another writer's commit
    is either wholly in it or not at all); Unusable, with the reason, when there is no file,
    it is of another schema or ``params``, or damaged (the index then builds it afresh)."""
    with closing(open_reader(directory)) as db:
        try:
            db.execute("BEGIN")
            meta = {key: json.loads(value) for key, value in db.execute(
                "SELECT key, value FROM meta")}
            if meta.get("schema") != SCHEMA:
                raise Unusable("the recall file has another schema")
            if meta.get("params") != params:
                raise Unusable("the recall file was built with other tokenizer or ranking "
                               "parameters")
            lengths = _lengths(db)
            docs = list(_rows(db, order="row"))
            for row, doc in docs:
                if not 0 <= row < len(lengths) or lengths[row] != doc.length:
                    raise Unusable(f"the recall file's length of row {row} disagrees with "
                                   "its document")
            terms, offsets, slots, tfs = _every_posting(db, code_for(len(lengths)))
            version = meta.get(VERSION)
            version = version if isinstance(version, str) else None
            counted = version is not None and meta.get(COUNTED) == version
            return Stored(docs, lengths, terms, offsets, slots, tfs, version, meta,
                          read_counts(db) if counted else None)
        except (sqlite3.Error, ValueError, TypeError, KeyError, IndexError, OverflowError
                ) as exc:
            raise _unusable(directory, exc, "is damaged") from None


def _every_posting(db: sqlite3.Connection, slots_code: str
                   ) -> tuple[list[str], array[int], array[int], array[int]]:
    """Every block, in key order, joined into one array of rows and one of counts (rows in
    ``slots_code``, wide enough for every row; counts as wide as the widest block's). A block
    stored in the arrays' own types, its rows counted from 0, is taken as its bytes: the few
    postings of a rare word are most blocks (31,864 blocks at 5,000 nodes, 168,000 at
    100,000), and decoding each as an array of its own cost more than the bytes."""
    terms: list[str] = []
    offsets, slots, tfs = array("I"), array(slots_code), array("B")
    rows_type, tfs_type = ord(slots_code), ord(tfs.typecode)
    for term, base, rows, counts in db.execute(  # the key's order: no sort
            "SELECT term, first, rows, tfs FROM postings ORDER BY term, first"):
        if not terms or terms[-1] != term:
            terms.append(term)
            offsets.append(len(slots))
        if rows[0] == rows_type and not _origin(base):
            slots.frombytes(memoryview(rows)[1:])
        else:
            slots.extend(_rows_as(_block(rows), _origin(base), slots_code))
        if counts[0] == tfs_type:
            tfs.frombytes(memoryview(counts)[1:])
        else:
            held = _block(counts)
            if CODES.index(held.typecode) > CODES.index(tfs.typecode):
                tfs = array(held.typecode, tfs)
                tfs_type = ord(tfs.typecode)
            tfs.extend(held if held.typecode == tfs.typecode else array(tfs.typecode, held))
        if len(tfs) != len(slots):
            raise Unusable("a postings block of the recall file has not one count a row")
    offsets.append(len(slots))
    return terms, offsets, slots, tfs


def _rows_as(stored: array[int], origin: int, code: str) -> array[int]:
    """A block's stored rows, counted from ``origin``, as rows in the type ``code``."""
    if origin:
        return array(code, map(origin.__add__, stored))
    return stored if stored.typecode == code else array(code, stored)


def open_reader(directory: Path) -> sqlite3.Connection:
    """A read-only connection, or Unusable."""
    path = path_in(directory)
    if not path.exists():
        raise Unusable(f"no recall file at {path}")
    try:
        return sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise _unusable(directory, exc, "cannot be opened") from None
