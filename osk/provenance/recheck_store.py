"""The rechecks table kept on disk, so a fresh process reads its hits' citations, not the ledger.

A search hit's ``recheck`` marker needs the hit's recorded citation pairs: the rechecks ledger
as a table (``osk.provenance.recheck_table``), which the engine builds from every record of the
ledger. In a vault whose nodes cite their evidence (every node an agent distils does) that made
every fresh ``osk search`` open the engine: 2.8 s and 716 MB at 100,000 nodes instead of 45 ms
(docs/performance.md, "A fresh search in a vault that cites"). This keeps the same table in
device state, ``.osk/rechecks/citations.sqlite`` (never synced; rebuilt from the ledger
whenever it cannot vouch for it): a row per citing node holding its ``Citations``, and how much
of the ledger the rows cover (a ``Mark``: its length, inode and the digest of its last bytes
there) with the ledger's heads at that point.

Records appended after the mark are applied one by one when each names every head before it as
a parent, as every append does (``Ledger.append`` takes the heads under the ledger's lock): such
a record descends from every record before it, so it alone is its subject's current record,
read as the whole ledger's reader reads it (``citations_from``). Anything else (two devices'
lines merged, a file rewritten, a damaged line) is not applied: the store is rebuilt from a
table read from the whole ledger, which only the engine holds.

Who writes it: ``RecheckTable``, after each append it makes (the tail since the mark, its own
line with whatever another process appended) and whenever it has read the ledger anew (the
tail, or the whole table when the tail cannot be applied). Device state that the next writer
mends, so a commit is not fsynced, and a writer that cannot write it leaves it behind. A writer
killed between its append and its row leaves the store behind its ledger, which the next
writer, or a reader, applies as a tail.

Who reads it: ``osk.reads.quick_search`` for its hits (``citations_of``), the tail since the
mark applied in memory the same way; when the store cannot vouch for the ledger as it is now,
the answer is None and the search opens the engine.

Beside the rows, the body hash of a node file by the hash of the whole file (``bodies_of``):
what citations bind to, known to the engine from its catalog without reading the file, noted
as its rechecks ask (``TargetHasher.take_bodies``), so a fresh search learns a cited node's
body hash from the recall file's file hash instead of reading a file it does not show. A
function of the text alone: never stale, whatever happens to the ledger.
"""

from __future__ import annotations

import binascii
import json
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from osk.store.fastclass import dataclass
from osk.store.fsutil import StatKey
from osk.store.ledger import Ledger, Mark, Record, Tip
from osk.store.transactions import busy, immediate
from osk.store.vault import Vault, disk_error

if TYPE_CHECKING:  # imported where used: a search none of whose hits cites reads no pair
    from osk.provenance.pairs import Citations

_Found = TypeVar("_Found")

FILE = ("rechecks", "citations.sqlite")
SCHEMA = "3"  # 2: rows as ``encoded`` packs them; 3: the ``cited`` rows beside them
BUSY_S = 0.5  # a writer that waits longer for another leaves the catching up to the next one
CITING = "citing:"  # a rechecks ledger subject: ``citing:<node id>``

_META = "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
_CITING = ("CREATE TABLE IF NOT EXISTS citing (id TEXT PRIMARY KEY, citations TEXT NOT NULL) "
           "WITHOUT ROWID")
# Who cites a node: a row per node a citing node's row names (``cited_nodes``), so a fresh
# ``osk read --json`` lists a node's citers from their rows, not from every row read.
_CITED = ("CREATE TABLE IF NOT EXISTS cited (node TEXT NOT NULL, citing TEXT NOT NULL, "
          "PRIMARY KEY (node, citing)) WITHOUT ROWID")
# A node file's body hash by the hash of the whole file (a function of the text alone, so
# never stale, whatever the ledger does): what a node's citers bind to, known to a fresh
# search from the recall file's file hash without reading the cited file.
_BODIES = ("CREATE TABLE IF NOT EXISTS bodies (file_hash TEXT PRIMARY KEY, body_hash TEXT NOT NULL)"
           " WITHOUT ROWID")


@dataclass(frozen=True)
class Whole:
    """A table read from the whole ledger at ``stat`` (size, mtime_ns, inode), and the
    ledger's heads there: what the store is rebuilt from."""

    stat: StatKey
    table: Mapping[str, Citations]
    heads: tuple[str, ...]


def citations_from(citing_id: str, record: Record, *, forked: bool) -> Citations:
    """One citing node's pairs as ``record`` holds them."""
    from osk.provenance.pairs import Citations, Pair

    pairs: dict[str, Pair] = {}
    items = record.data.get("pairs")
    for item in items if isinstance(items, list) else ():
        if isinstance(item, Mapping):
            pair = Pair.from_data(citing_id, item, forked=forked)
            pairs[pair.target.key] = pair
    corrected = record.data.get("corrected")
    return Citations(citing_id, pairs, str(corrected) if corrected else None, record.id, forked)


def successors(records: Sequence[Record], heads: Iterable[str]
               ) -> tuple[dict[str, Citations], tuple[str, ...]] | None:
    """The citing nodes ``records`` (appended, in file order, to a ledger whose heads are
    ``heads``) make current, and the heads after them; None unless each record names every
    head before it as a parent (two devices' lines merged: read the ledger whole)."""
    now = set(heads)
    found: dict[str, Citations] = {}
    for record in records:
        if set(record.parents) != now:
            return None
        now = {record.id}
        if record.subject.startswith(CITING):
            citing_id = record.subject[len(CITING):]
            found[citing_id] = citations_from(citing_id, record, forked=False)
    return found, tuple(sorted(now))


def citations_of(vault: Vault, ledger: Ledger, ids: Iterable[str]) -> dict[str, Citations] | None:
    """The recorded citations of those of ``ids`` that cite anything, as the ledger stands now;
    None when the store cannot say (missing, damaged, of another schema, or the ledger changed
    since its mark other than by appends): the engine can."""
    wanted = list(dict.fromkeys(ids))
    read = _read(vault, ledger, lambda db: {
        citing_id: decoded(citing_id, text) for citing_id, text in db.execute(
            f"SELECT id, citations FROM citing WHERE id IN "  # noqa: S608 - placeholders
            f"({','.join('?' * len(wanted))})", wanted)})
    if read is None:
        return None
    found, appended = read
    found.update((citing_id, appended[citing_id]) for citing_id in wanted if citing_id in appended)
    return found


def citers_of(vault: Vault, ledger: Ledger, node_id: str) -> set[str] | None:
    """The ids of the nodes whose recorded citations name node ``node_id``, as the ledger
    stands now (``RecheckTable.citing``); None when the store cannot say (as ``citations_of``)."""
    read = _read(vault, ledger, lambda db: {citing_id for (citing_id,) in db.execute(
        "SELECT citing FROM cited WHERE node = ?", (node_id,))})
    if read is None:
        return None
    found, appended = read
    for citing_id, citations in appended.items():
        if node_id in cited_nodes(citations):
            found.add(citing_id)
        else:
            found.discard(citing_id)
    return found


def _read(vault: Vault, ledger: Ledger, rows: Callable[[sqlite3.Connection], _Found]
          ) -> tuple[_Found, dict[str, Citations]] | None:
    """What ``rows`` reads of the store, with the citing nodes made current by what was
    appended to the ledger since the store's mark; None when the store cannot vouch for the
    ledger as it is now."""
    path = vault.state(*FILE)
    if not path.exists():
        return None
    try:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=BUSY_S,
                                     isolation_level=None)) as db:
            db.execute("BEGIN")  # the mark and the rows of one commit
            state = _state(db)
            found = rows(db)
            db.execute("COMMIT")
        if state is None:
            return None
    except (sqlite3.Error, ValueError, TypeError, KeyError):
        return None
    mark, heads = state
    tail = ledger.read_after(mark)
    appended = successors(tail[0], heads) if tail is not None else None
    if appended is None:
        return None
    return found, appended[0]


def bodies_of(vault: Vault, file_hashes: Iterable[str]) -> dict[str, str]:
    """The body hashes the store knows for these node file hashes (file hash -> body hash);
    a hash it does not know, or a store that cannot be read, is simply left out."""
    path = vault.state(*FILE)
    wanted = list(dict.fromkeys(file_hashes))
    if not wanted or not path.exists():
        return {}
    try:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=BUSY_S)) as db:
            return dict(db.execute(
                f"SELECT file_hash, body_hash FROM bodies WHERE file_hash IN "  # noqa: S608
                f"({','.join('?' * len(wanted))})", wanted).fetchall())
    except sqlite3.Error:
        return {}


class CitationStore:
    """The writers' side: one connection per process, kept open across appends."""

    def __init__(self, vault: Vault) -> None:
        self.path: Path = vault.state(*FILE)
        self._db: sqlite3.Connection | None = None

    def catch_up(self, ledger: Ledger, whole: Callable[[], Whole | None],
                 bodies: Mapping[str, str] | None = None) -> None:
        """Bring the rows up to the ledger: apply what was appended since the mark, or, when
        that cannot be done, rewrite them from ``whole()`` (None: the caller holds no table
        read from the whole ledger as it is now; the store stays behind for a writer that
        does). A store another writer holds too long is left to the next catch-up; a damaged
        one is removed and started again; one that cannot be written stays as it is: readers
        see that it is behind. ``bodies``: file hash -> body hash pairs to keep as well."""
        for _ in range(2):
            try:
                self._transaction(ledger, whole, bodies or {})
                return
            except OSError:
                self.close()
                return
            except sqlite3.Error as exc:
                self.close()
                if busy(exc) or disk_error(exc, sqlite_file=self.path) is not None:
                    return  # another writer's, or the disk refused: behind, not damaged
                self._remove()

    def load(self, ledger: Ledger, tip: Tip) -> dict[str, str] | None:
        """Every row (citing id -> ``encoded`` citations), with what was appended after the
        mark applied, when that is the ledger at ``tip`` (``Ledger.tip``: every line checked,
        none kept): what a long-running engine starts its table from instead of every record
        of the ledger decoded. None when the store cannot vouch for the ledger as it is
        (missing, of another schema, behind a merge or a rewrite, or the ledger moved on
        meanwhile): read the ledger whole."""
        if tip.key is None or not self.path.exists():
            return None
        try:
            db = self._open()
            db.execute("BEGIN")  # the mark and the rows of one commit
            try:
                state = _state(db)
                rows = dict(db.execute("SELECT id, citations FROM citing")) if state else {}
            finally:
                db.execute("COMMIT")
        except (sqlite3.Error, OSError):
            self.close()
            return None
        if state is None:
            return None
        tail = ledger.read_after(state[0])
        appended = successors(tail[0], state[1]) if tail is not None else None
        if tail is None or appended is None or tail[1].size != tip.key[0] \
                or appended[1] != tip.heads:
            return None
        rows.update((citing_id, encoded(value)) for citing_id, value in appended[0].items())
        return rows

    def keep_bodies(self, bodies: Mapping[str, str]) -> None:
        """Keep file hash -> body hash pairs (``TargetHasher.take_bodies``); a store that
        cannot take them now goes without (a fresh search then reads the cited file)."""
        if not bodies:
            return
        try:
            db = self._open()
            with immediate(db):
                db.executemany("INSERT OR IGNORE INTO bodies VALUES (?, ?)", bodies.items())
        except (sqlite3.Error, OSError):
            self.close()

    def _transaction(self, ledger: Ledger, whole: Callable[[], Whole | None],
                     bodies: Mapping[str, str]) -> None:
        db = self._open()
        with immediate(db):  # writers one at a time; readers keep reading
            if bodies:
                db.executemany("INSERT OR IGNORE INTO bodies VALUES (?, ?)", bodies.items())
            self._apply(db, ledger, whole)

    def discard(self) -> None:
        """Remove the store (a row that cannot be read): the next catch-up rebuilds it."""
        self.close()
        self._remove()

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def _remove(self) -> None:
        for suffix in ("", "-wal", "-shm"):
            try:
                os.unlink(f"{self.path}{suffix}")
            except OSError:
                pass

    def _open(self) -> sqlite3.Connection:
        if self._db is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=BUSY_S, isolation_level=None,
                                 check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=OFF")  # device state the next writer mends
            db.execute(_META)
            db.execute(_CITING)
            db.execute(_CITED)
            db.execute(_BODIES)
            self._db = db
            _upgrade(db)
        return self._db

    def _apply(self, db: sqlite3.Connection, ledger: Ledger,
               whole: Callable[[], Whole | None]) -> None:
        state = _state(db)
        tail = ledger.read_after(state[0]) if state is not None else None
        appended = successors(tail[0], state[1]) if tail is not None and state else None
        if tail is not None and appended is not None:
            if tail[0]:
                _replace(db, appended[0])
                _set_state(db, tail[1], appended[1])
            return
        table = whole()
        mark = ledger.mark(table.stat) if table is not None else None
        if table is None or mark is None:
            return
        for name, schema in (("citing", _CITING), ("cited", _CITED)):
            db.execute(f"DROP TABLE IF EXISTS {name}")  # of this schema, whatever was there
            db.execute(schema)
        db.executemany("INSERT INTO citing VALUES (?, ?)",
                       [(key, encoded(value)) for key, value in table.table.items()])
        db.executemany("INSERT INTO cited VALUES (?, ?)", _cited_rows(table.table.values()))
        _set_state(db, mark, table.heads)


def _replace(db: sqlite3.Connection, current: Mapping[str, Citations]) -> None:
    """The rows of these citing nodes made ``current``, and who cites what with them."""
    for citing_id in current:
        before = db.execute("SELECT citations FROM citing WHERE id = ?", (citing_id,)).fetchone()
        if before is not None:
            db.executemany("DELETE FROM cited WHERE node = ? AND citing = ?", [
                (node_id, citing_id) for node_id in cited_nodes(decoded(citing_id, before[0]))])
    db.executemany("INSERT OR REPLACE INTO citing VALUES (?, ?)",
                   [(key, encoded(value)) for key, value in current.items()])
    db.executemany("INSERT OR IGNORE INTO cited VALUES (?, ?)", _cited_rows(current.values()))


def _cited_rows(rows: Iterable[Citations]) -> Iterator[tuple[str, str]]:
    """(node, citing) for each node each of ``rows`` names."""
    for citations in rows:
        for node_id in cited_nodes(citations):
            yield node_id, citations.citing_id


def cited_nodes(citations: Citations | None) -> set[str]:
    """The ids of the nodes ``citations`` names."""
    return {pair.target.key[len("node:"):] for pair in citations.pairs.values()
            if pair.target.kind == "node"} if citations is not None else set()


def _upgrade(db: sqlite3.Connection) -> None:
    """A store of an older schema brought to this one in place, a thousand rows at a time in
    one transaction: each row of schema 1 (the ledger's line form) rewritten as ``encoded``
    packs it, and (schemas 1 and 2) the ``cited`` rows made from the rows. Without it the next
    engine rebuilt the store from the ledger read whole, twice (at 10,000 citing nodes its
    first start peaked at 99 MB where the next one peaks at 66). A row that cannot be read
    leaves the store as it was, which no reader vouches for: it is rebuilt from the ledger."""
    found = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
    if found is None or found[0] not in ("1", "2"):
        return
    older = found[0] == "1"
    try:
        with immediate(db):
            last = ""
            while rows := db.execute("SELECT id, citations FROM citing WHERE id > ? ORDER BY "
                                     "id LIMIT 1000", (last,)).fetchall():
                current = [_decoded_v1(key, text) if older else decoded(key, text)
                           for key, text in rows]
                if older:
                    db.executemany("UPDATE citing SET citations = ? WHERE id = ?",
                                   [(encoded(value), value.citing_id) for value in current])
                db.executemany("INSERT OR IGNORE INTO cited VALUES (?, ?)",
                               _cited_rows(current))
                last = rows[-1][0]
            db.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (SCHEMA,))
    except (ValueError, TypeError, KeyError, AttributeError):
        return  # rolled back: the store stays as it was, rebuilt from the ledger


def _decoded_v1(citing_id: str, text: str) -> Citations:
    """A row of schema 1: ``[pairs as the ledger's line holds them, forked target keys,
    corrected, record id, forked]``."""
    from osk.provenance.pairs import Citations, Pair

    items, forked_keys, corrected, record_id, forked = json.loads(text)
    marked = set(forked_keys)
    pairs: dict[str, Pair] = {}
    for item in items:
        pair = Pair.from_data(citing_id, item, forked=str(item["target"]) in marked)
        pairs[pair.target.key] = pair
    return Citations(citing_id, pairs, corrected, record_id, bool(forked))


def _state(db: sqlite3.Connection) -> tuple[Mark, tuple[str, ...]] | None:
    """The mark the rows cover and the ledger's heads there; None: no usable store."""
    meta: dict[str, Any] = dict(db.execute("SELECT key, value FROM meta").fetchall())
    if meta.get("schema") != SCHEMA or "mark" not in meta or "heads" not in meta:
        return None
    mark = Mark.from_json(json.loads(meta["mark"]))
    heads = json.loads(meta["heads"])
    if mark is None or not isinstance(heads, list) or not all(isinstance(h, str) for h in heads):
        return None
    return mark, tuple(heads)


def _set_state(db: sqlite3.Connection, mark: Mark, heads: Sequence[str]) -> None:
    db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", [
        ("schema", SCHEMA), ("mark", json.dumps(mark.to_json())),
        ("heads", json.dumps(list(heads)))])


def encoded(citations: Citations) -> str:
    """A row's text: each pair as a list in ``Pair``'s field order, its hashes packed
    (``_packed``) and its kind left out where the target key starts with it. The ledger's
    line form (named fields, hex hashes) was 404 bytes a row held by a long-running engine
    and by ``osk import`` (40 MB at 100,000 citing nodes); this is about 290."""
    return json.dumps([[[pair.target.key, _kind_kept(pair.target.key, pair.target.kind),
                         pair.target.link, pair.target.root, _packed(pair.citing_hash),
                         _packed(pair.target_hash), pair.via, int(pair.forked)]
                        for pair in citations.pairs.values()],
                       citations.corrected, citations.record_id, int(citations.forked)],
                      ensure_ascii=False, separators=(",", ":"))


def decoded(citing_id: str, text: str) -> Citations:
    from osk.provenance.pairs import Citations, Pair, TargetRef

    items, corrected, record_id, forked = json.loads(text)
    pairs: dict[str, Pair] = {}
    for key, kind, link, root, citing_hash, target_hash, via, pair_forked in items:
        target = TargetRef(key, kind if kind is not None else key.partition(":")[0], link,
                           root or None)
        pairs[key] = Pair(citing_id, target, _unpacked(citing_hash),
                          (_unpacked(target_hash) or None) if target_hash is not None else None,
                          via, bool(pair_forked))
    return Citations(citing_id, pairs, corrected, record_id, bool(forked))


def _kind_kept(key: str, kind: str) -> str | None:
    """None where ``decoded`` finds the kind as the key's prefix (``node:<id>`` is a node)."""
    return None if ":" in key and key.partition(":")[0] == kind else kind


def _packed(digest: str | None) -> str | None:
    """A sha256 hex digest as its 32 bytes in base64 without padding (43 characters where
    there were 64); any other text behind a ``!``, which base64 never holds."""
    if digest is None:
        return None
    if len(digest) == 64:
        try:
            raw = bytes.fromhex(digest)
        except ValueError:
            raw = b""
        if raw.hex() == digest:  # lower-case hex only: what unpacking gives back
            return binascii.b2a_base64(raw, newline=False)[:-1].decode("ascii")
    return f"!{digest}"


def _unpacked(packed: str) -> str:
    if packed.startswith("!"):
        return packed[1:]
    return binascii.a2b_base64(f"{packed}=").hex()
