"""Raw rounds as search documents: every captured round findable by its words and its date.

A round's document is its person text, its final answer and its tool summary, with its date
written out in the words people ask with ("8 May 2023", "May 2023"), its host, its record's key
(the project it belongs to, whose scope decides who may see it) and its coordinate.

The index holds each round's terms (``tokenize_prose``: whole Snowball stems, so "rejected"
finds "rejection") and its neighbours', and each term's postings in impact order
(``osk.search.round_postings``: FTS5's BM25 over the same terms, read by a top-k that stops
when the rest cannot beat the k-th round, so a query does not score every round holding a
common word), in SQLite, ``.osk/index/rounds.sqlite``:
device state, rebuilt from the records whenever missing or of another schema.
It is a cache of the raw record files, kept by their stat keys: a query that finds something
moved stats the record files (one ``os.stat`` each) and reads any record whose stat changed or
that is new (an append: only its last rounds, ``osk.capture.raw.read_tail``),
so a round captured by a hook, by ``append_raw`` or landed by sync is found by the next query,
and a redaction (which rewrites the record) removes the round's old terms at once. What moved
is found without that walk: a long-running process (the MCP server) has the kernel report
changes to the raw folders (``watch``, ``osk.store.watch``); any other reads the last look a
process left beside the index (``osk.search.round_look``: the records' stamp every osk writer
of a record bumps, the raw folders' stats, the records changed within the race window before
it), and while that holds (and the index file and the exclusions are unmoved), a query stats
no record file.
Standard library only: the prompt-submit hook queries it too. A watched index (the
long-running process's) ranks with the same top-k on numpy arrays
(``osk.search.round_arrays``), which only it imports; an unwatched one (a hook's, a command's)
with ``round_postings.top``. Both give the same rounds and scores.

A round the person excluded (``osk exclude``, ``osk.capture.exclusions``), alone or with its
conversation, is never indexed: its terms are neither a document nor its neighbours' context,
and its text is not kept. The index records which exclusions it was built against (their
digest in ``meta``), so a refresh that sees the ledger changed (an exclusion here, or one sync
landed from another device) re-indexes the records it touches. A query that cannot refresh
first (another process holds the index's lock) and finds the index built against other
exclusions leaves the excluded rounds out by name and ranks by the rounds' own words only
(a neighbour's words might be an excluded round's): an excluded round is never found, and
none is found by its words.

Visibility is the caller's: ``search`` takes ``visible(key)`` (scope isolation, decided where
the routing ledger is read) and never returns a round of a key it refuses.
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osk.capture.exclusions import Excluded, excluded
from osk.search import round_look
from osk.search.round_postings import (
    MARKS,
    NAMES,
    TABLES,
    Accept,
    Pending,
    counts_in,
    flush,
    terms_of,
    top,
)
from osk.search.tokenize import tokenize, tokenize_prose
from osk.store.fastclass import dataclass
from osk.store.fsutil import StatKey, stat_key
from osk.store.locks import file_lock
from osk.store.transactions import immediate
from osk.store.vault import Vault

if TYPE_CHECKING:
    from osk.capture.raw import Tail
    from osk.store.watch import Watch

SCHEMA = 13  # 4: each round's neighbours as a second column; 5: the vocabulary by column;
# 6: a round's first TEXT_CHARS kept, to cut excerpts from around the words asked; 7: the
# rounds' count and total length kept by triggers (a query read them by scanning every round);
# 8: where a record's next read resumes (``raw.Mark``), so an append reads its tail only;
# 9: terms made by ``tokenize_prose`` (whole Snowball stems); 10: our own postings in impact
# order (``round_postings``) instead of FTS5, a round's row never reused; 11: each round's
# forward list (its terms' ids and counts), scored whole from it instead of from its text;
# 12: no ``terms`` table (a round's terms as text: its forward list holds them, and a round
# dropped takes its terms' document counts from it); 13: a block's head holds what its best
# posting gave when written (``round_postings.drifted``), a bound far below its counts' most
FILE = "rounds.sqlite"
LOCK = "rounds.lock"
VECTORS = "round_vectors"  # the folder of the rounds' vectors, beside FILE
EXCERPT_CHARS = 200
PAGE = 8192  # bytes of a page of a new index file (an existing one keeps its own)
MAP_BYTES = 1 << 31  # the most of the index file a long-running process maps (_kept_connection)
TEXT_CHARS = 1000  # of a round's text kept in the index (the excerpt is cut from these)
# A round's neighbours (the rounds before and after it in its conversation) count at this
# weight beside its own words: a question is often asked in one round and answered in the
# next. On LoCoMo's development half: R@10 0.727 -> 0.809 at 0.4 (docs/performance.md).
CONTEXT_WEIGHT = 0.4
KIND = "round"  # what a round is called beside nodes (``Hit.space``)
MARKER = "raw round"  # its marker on a search hit
# A top-k: (db, terms, k, context, accept) -> the best (row, score), best first
Top = Callable[[sqlite3.Connection, Sequence[str], int, float, Accept | None],
               list[tuple[int, float]]]
# ``RoundIndex.records()``: which index this is, and (rel, key, rounds indexed) per record
Listed = tuple[str, tuple[tuple[str, str, int], ...]]
SEARCH_KINDS = ("all", "nodes", "rounds")  # what a search may ask for

_TABLES = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS records (
    rel TEXT PRIMARY KEY, key TEXT NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
    ino INTEGER NOT NULL, indexed INTEGER NOT NULL, resume_at INTEGER, resume_round INTEGER,
    resume_prefix TEXT, resumed_digest TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rounds (
    row INTEGER PRIMARY KEY AUTOINCREMENT, rel TEXT NOT NULL, key TEXT NOT NULL,
    coordinate TEXT NOT NULL, number INTEGER NOT NULL, at TEXT NOT NULL, host TEXT NOT NULL,
    excerpt TEXT NOT NULL, length INTEGER NOT NULL, size INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS rounds_rel ON rounds (rel, number);
CREATE TABLE IF NOT EXISTS totals (
    one INTEGER PRIMARY KEY CHECK (one = 0), rounds INTEGER NOT NULL, length INTEGER NOT NULL,
    size INTEGER NOT NULL);
INSERT OR IGNORE INTO totals VALUES (0, 0, 0, 0);
CREATE TRIGGER IF NOT EXISTS rounds_added AFTER INSERT ON rounds BEGIN
    UPDATE totals SET rounds = rounds + 1, length = length + new.length,
    size = size + new.size; END;
CREATE TRIGGER IF NOT EXISTS rounds_removed AFTER DELETE ON rounds BEGIN
    UPDATE totals SET rounds = rounds - 1, length = length - old.length,
    size = size - old.size; END;
""" + TABLES


@dataclass(frozen=True)
class RoundHit:
    coordinate: str  # _raw/KEY/CONV#Round N: what read_raw takes
    key: str
    at: str
    host: str
    excerpt: str  # where the most of the query's words meet (``excerpt``)
    score: float  # BM25 as FTS5's bm25() gives it, larger is better
    slot: int = 0  # its place in the result: the key of ``RoundStats``' tables


@dataclass(frozen=True)
class RoundStats:
    """What BM25 knows about the rounds of one result, in the shape recall's ``confidence``
    reads of the node index (``size``, ``k1``, ``norms``, ``tf``, ``df``), so rounds
    and nodes are held to one measure of how sure a hit is. A term may be asked in either
    form, ``query_terms(query)``'s or a round's own (``prose=True``): ``_names`` renames the
    one to the other for the query these statistics were made for."""

    size: int
    k1: float
    _norms: dict[int, float]
    _tfs: dict[str, dict[int, int]]
    _dfs: dict[str, int]
    _names: Mapping[str, str]  # ``expand.prose_names`` of the query

    def norms(self) -> dict[int, float]:
        return self._norms

    def tf(self, term: str, slot: int) -> int:
        return self._tfs.get(self._names.get(term, term), {}).get(slot, 0)

    def df(self, term: str) -> int:
        return self._dfs.get(self._names.get(term, term), 0)

    def without(self, unsaid: Mapping[int, Collection[str]]) -> RoundStats:
        """These statistics with each slot's ``unsaid`` terms (a round's own form) taken
        from what it holds (``osk.search.speakers.unsaid``: words only another speaker said)."""
        if not any(unsaid.values()):
            return self
        tfs = {term: {slot: tf for slot, tf in held.items() if term not in unsaid.get(slot, ())}
               for term, held in self._tfs.items()}
        return RoundStats(self.size, self.k1, self._norms, tfs, self._dfs, self._names)

    def coverage(self, terms: Mapping[str, float], slot: int) -> float:
        """How much of the query the round in ``slot`` holds in its own words, as
        ``Ranking.coverage`` measures a node: the share of the query's term weight (count ×
        idf, over the rounds' own words) carried by terms it contains."""
        from osk.search.bm25 import idf
        from osk.search.ranking import IDF_FLOOR

        weights = {term: count * max(idf(self.size, self.df(term)), IDF_FLOOR)
                   for term, count in terms.items() if count and self.df(term)}
        total = sum(weights.values())
        held = sum(weight for term, weight in weights.items() if self.tf(term, slot))
        return held / total if total > 0 else 0.0


def vectors_file(vault: Vault, rel: str) -> Path:
    """Where the semantic channel keeps the vectors of the record ``rel`` (``_raw/KEY/CONV.md``;
    ``osk.search.round_vectors``). The index deletes it whenever it forgets a record it held
    (a record changed other than by an append, as a redaction changes it; an exclusion; a
    record gone), so no vector outlives its round's place here."""
    return vectors_in(vault.state("index") / VECTORS, rel)


def vectors_in(folder: Path, rel: str) -> Path:
    """``vectors_file`` under ``folder`` (the vault's ``VECTORS`` folder, resolved once)."""
    _, key, name = rel.split("/", 2)
    return folder / key / f"{name[:-3]}.vec"


_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")


def date_words(at: str) -> str:
    """A round's time as people name its day: "8 May 2023 2023-05-08" ("" if none)."""
    try:
        moment = datetime.fromisoformat(at)
    except ValueError:
        return ""
    return f"{moment.day} {moment:%B} {moment.year} {moment:%Y-%m-%d}"


def dates_in(text: str) -> str:
    """The ISO dates written in ``text`` (2023-05-07) as people ask for them ("7 May 2023"),
    so "May 2023" finds a round that wrote the date in numbers."""
    found = []
    for match in _ISO_DATE.finditer(text):
        try:
            day = datetime(int(match[1]), int(match[2]), int(match[3]))
        except ValueError:
            continue
        found.append(f"{day.day} {day:%B} {day.year}")
    return " ".join(found)


def excerpt(text: str, limit: int = EXCERPT_CHARS, terms: Collection[str] = ()) -> str:
    """At most ``limit`` characters of ``text`` on one line: the stretch where the most of
    ``terms`` (index terms, as ``tokenize`` or ``tokenize_prose`` gives them) meet, else its
    start; "…" marks a cut."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    start = _densest(flat, frozenset(terms), limit) if terms else 0
    if start > len(flat) - limit:  # near the end: fill the stretch from before instead
        later = flat.find(" ", len(flat) - limit + 1)
        start = min(start, later + 1) if later >= 0 else start
    lead = "…" if start else ""
    room = limit - len(lead)
    piece = flat[start:start + room]
    if start + room < len(flat):
        piece = piece[:room - 1].rstrip() + "…"
    return lead + piece


@lru_cache(maxsize=1 << 16)
def _word_terms(word: str) -> frozenset[str]:
    """A word's index terms in either form (``tokenize``'s and ``tokenize_prose``'s): the
    words of excerpts repeat, so this is mostly a lookup."""
    return frozenset((*tokenize(word), *tokenize_prose(word)))


def _heads_at(flat: str, heads: Collection[str]) -> Iterator[int]:
    """Where any of ``heads`` (a term's first letters, no space in one) occurs in ``flat``,
    letter case aside: by ``str.find`` in ASCII text (lowered in place), 5x faster than a
    case-blind regular expression of them, which other text still takes."""
    if flat.isascii():
        low = flat.lower()
        for head in heads:
            at = low.find(head)
            while at >= 0:
                yield at
                at = low.find(head, at + 1)
        return
    pattern = re.compile("|".join(map(re.escape, sorted(heads, key=len, reverse=True))),
                         re.IGNORECASE)
    for found in pattern.finditer(flat):
        yield found.start()


def _densest(flat: str, terms: frozenset[str], limit: int) -> int:
    """Where a ``limit``-character stretch of ``flat`` holding the most distinct ``terms``
    starts: at a word a little before a matching word (so the match has some lead-in). Only
    words holding a term's first three letters are tokenized (an English stem keeps them; a
    word written other than as it is indexed, full-width or accented there, is not looked
    for: the stretch is then the text's start)."""
    matched: dict[int, frozenset[str]] = {}  # a matching word's start -> the terms it holds
    for found in _heads_at(flat, {term[:3] for term in terms}):
        start = flat.rfind(" ", 0, found) + 1
        if start not in matched:
            end = flat.find(" ", found)
            word = flat[start:end if end >= 0 else len(flat)]
            matched[start] = _word_terms(word) & terms
    starts = sorted(at for at, held in matched.items() if held)
    # Each stretch starts a little before a match and both of its ends only move on from one
    # match to the next: one pass, counting how many of the stretch's matches hold each term.
    held_in: dict[str, int] = {}
    best, best_start, first, last = 0, 0, 0, 0
    for at in starts:
        start = flat.rfind(" ", 0, at - limit // 8) + 1 if at > limit // 8 else 0
        while last < len(starts) and starts[last] < start + limit - 2:
            for term in matched[starts[last]]:
                held_in[term] = held_in.get(term, 0) + 1
            last += 1
        while first < last and starts[first] < start:
            for term in matched[starts[first]]:
                held_in[term] -= 1
                if not held_in[term]:
                    del held_in[term]
            first += 1
        if len(held_in) > best:
            best, best_start = len(held_in), start
    return best_start


class RoundIndex:
    """The rounds of one vault's raw records, searchable by their terms."""

    Error = sqlite3.Error  # what a reader catches without importing sqlite3 itself

    def __init__(self, vault: Vault, *, watch: bool = False) -> None:
        """``watch``: a long-running process's choice: have the kernel report changes to the
        raw folders, so a query that finds none stats no record file (where no complete report
        can be had, every query stats them as before)."""
        self.vault = vault
        self.path = vault.state("index") / FILE
        self._log = self.path.with_name(f"{FILE}-wal")
        # What this process last saw the file agree with: the records on disk, the
        # exclusions, and the file's own stat (and its write-ahead log's). While all three
        # are so, a refresh has nothing to do and opens nothing (``refresh``).
        self._agreed: tuple[Any, ...] | None = None
        # ``records()`` as last read, and the file's stats then: a search with the semantic
        # channel asks for it every time, and a connection cost more than the vector scan.
        self._listed: tuple[tuple[StatKey | None, StatKey | None], Listed] | None = None
        # The records' keys and the exclusions the index was built against, and the file's
        # stats then (``_known``): a query asked them again each time.
        self._read: tuple[tuple[StatKey | None, StatKey | None], list[str], Excluded
                          ] | None = None
        self._watching = watch
        self._watch: Watch | None = self._start_watch()
        self._blind = True  # a raw folder went unwatched at the last look: the report may miss
        self._folders: round_look.Folders = {}  # the raw folders' stats the last look took
        self._count: int | None = None  # records the last refresh found the index agree with
        self._left: tuple[StatKey | None, StatKey | None] = (None, None)  # see _stats_left
        # A watched (long-running) process keeps one connection a thread between queries:
        # opening and closing cost a query about 0.3 ms, and each opening began with an empty
        # page cache (0.8-0.9 ms of a warm query at 200,000 rounds together).
        self._kept: Any = None
        if self._watch is not None:
            import threading

            self._kept = threading.local()

    def _start_watch(self) -> Watch | None:
        if not self._watching:
            return None
        from osk.store.watch import Watch

        return Watch.start(self.vault.root)

    def _unmoved(self, hidden: Excluded) -> bool:
        """With a watch: nothing reported in the raw folders since this process last saw the
        file agree with them, with the same exclusions, the file and its log unmoved. A report
        that may have lost a change starts a new watch (the look that follows stats all)."""
        if self._watch is None or self._agreed is None or self._blind:
            return False
        touched = self._watch.drain()
        if touched is None:
            self._watch.close()
            self._watch = self._start_watch()
            return False
        return not touched and self._agreed[1:] == (hidden, self._file_stats())

    # -- freshness ----------------------------------------------------------------------------
    def _records_on_disk(self) -> dict[str, tuple[str, tuple[int, int, int]]]:
        """rel -> (key, stat key) of every raw record file."""
        found: dict[str, tuple[str, tuple[int, int, int]]] = {}
        root = self.vault.raw_dir
        watch = self._watch  # each folder watched before it is listed: nothing falls between
        self._blind = watch is None or not watch.add("_raw")
        # and its stat taken before it is listed: a name added after moves it (round_look)
        self._folders = {"": round_look.folder(root, top=True)}
        try:
            keys = list(os.scandir(root))
        except FileNotFoundError:
            return found
        for key in keys:
            if not key.is_dir(follow_symlinks=False):
                continue
            if watch is not None and not watch.add(f"_raw/{key.name}"):
                self._blind = True
            self._folders[key.name] = round_look.folder(key.path, top=False)
            for entry in os.scandir(key.path):
                if entry.name.endswith(".md") and entry.is_file(follow_symlinks=False):
                    st = entry.stat(follow_symlinks=False)
                    found[f"_raw/{key.name}/{entry.name}"] = (
                        key.name, (st.st_size, st.st_mtime_ns, st.st_ino))
        return found

    @contextmanager
    def _open(self) -> Iterator[sqlite3.Connection]:
        if self._kept is not None:
            yield self._kept_connection(self._kept)
            return
        with closing(self._connect()) as db:
            yield db

    def _connect(self, *, mapped: bool = False) -> sqlite3.Connection:
        """A connection to the index file; ``mapped``: one kept between queries, which reads
        pages in place from the file's map rather than copying each into its cache by a
        system call (its top-k at an agent's pace 0.92x of the CPU at 100,000 records,
        docs/performance.md; SQLite caps the map at its build's limit, 2 GB by default, and
        reads beyond it as before). A process that opens the file for one query maps nothing:
        the map would cost it a system call more."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        new = not self.path.exists()
        db = sqlite3.connect(self.path, timeout=2.0, isolation_level=None)
        try:
            if new:  # a round's terms and its neighbours' (about 2 KB) filled a 4 KB page alone
                db.execute(f"PRAGMA page_size={PAGE}")
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")  # a cache: a lost commit is re-read
            if mapped:
                db.execute(f"PRAGMA mmap_size={MAP_BYTES}")
        except BaseException:
            db.close()
            raise
        return db

    def _kept_connection(self, kept: Any) -> sqlite3.Connection:
        """This thread's connection, kept between queries (its page cache with it) while the
        file is the one it opened: a file deleted (``osk redact`` drops it) or replaced is
        another, opened anew. (The kept connection holds the old file open, so a new one
        cannot take its inode.)"""
        held: tuple[tuple[int, int], sqlite3.Connection] | None = getattr(kept, "db", None)
        try:
            st = os.stat(self.path)
            if held is not None and held[0] == (st.st_dev, st.st_ino):
                return held[1]
        except FileNotFoundError:
            pass
        if held is not None:
            kept.db = None
            held[1].close()
        db = self._connect(mapped=True)
        st = os.stat(self.path)
        kept.db = ((st.st_dev, st.st_ino), db)
        return db

    def _schema(self, db: sqlite3.Connection) -> None:
        try:
            row = db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc):  # a busy file or a full disk: not a new one,
                raise  # whose tables would be dropped below
            row = None
        if row is None or row[0] != f"{SCHEMA}":
            for table in ("meta", "records", "rounds", "totals", "terms_vocab", "terms",
                          *NAMES):
                db.execute(f"DROP TABLE IF EXISTS {table}")
            _reclaim(db)
            db.executescript(_TABLES)
            db.execute("INSERT INTO meta VALUES ('schema', ?)", (f"{SCHEMA}",))
            # which index this is: a rebuilt one (a new schema; `osk redact` drops it) is
            # another, whose rounds' vectors are checked against it before they are used
            db.execute("INSERT INTO meta VALUES ('built', ?)", (os.urandom(8).hex(),))

    def refresh(self, *, timeout: float = 5.0, budget: float | None = None,
                hidden: Excluded | None = None) -> int:
        """Re-read every record whose file changed since it was indexed; drop gone ones.
        Returns how many records were (re)indexed. LockTimeout after ``timeout`` seconds
        when another process is indexing. ``budget``: seconds of indexing after which the
        records not yet read are left to the next refresh (what was indexed is committed, so
        a hook the host stops at its timeout still moves a large catch-up forward); None:
        all of them. ``hidden``: the exclusions, as the caller just read them."""
        hidden = excluded(self.vault) if hidden is None else hidden
        if self._unmoved(hidden):
            return 0  # the kernel reported no change to a record since
        if self._watch is None:  # no report to be had: the last look, by any process
            held = round_look.holds(self.vault, self.path, hidden, self._file_stats)
            if held is not None and not held[1]:
                self._count = held[0]
                return 0  # no writer's stamp, no folder, nor the file moved since
            if held is not None:  # moved by this process's own writes alone: read only them
                return self._refresh_own(held, hidden, timeout, budget)
        begun = round_look.begin(self.vault)
        disk = self._records_on_disk()
        if self._agreed == (disk, hidden, self._file_stats()):
            self._keep_look(begun, disk, hidden)
            return 0  # nothing moved since this process saw the file agree with both
        self._agreed, self._count = None, None  # until it agrees again: the report is spent
        count, whole = self._refresh(disk, hidden, timeout, budget)
        if whole:
            self._agreed = (disk, hidden, self._left)
            self._keep_look(begun, disk, hidden)
        return count

    def _keep_look(self, begun: round_look.Begun, disk: dict[str, tuple[str, tuple[int, int, int]]],
                   hidden: Excluded) -> None:
        """What this look saw, for the processes without a watch that query next."""
        self._count = len(disk)
        assert self._agreed is not None
        round_look.keep(self.vault, self.path, begun, self._folders,
                        {rel: stat for rel, (_, stat) in disk.items()}, len(disk), hidden,
                        self._agreed[2])

    def _refresh_own(self, held: round_look.Held, hidden: Excluded, timeout: float,
                     budget: float | None) -> int:
        """Index the records this process changed since the last look (which holds for every
        other record), and leave a look that says so: the Stop hook after its capture."""
        count, own, begun, look = held
        self._agreed, self._count = None, None
        done, whole = self._refresh(dict(own), hidden, timeout, budget, others_held=True)
        if whole:
            self._count = count
            checked = {**{rel: tuple(stat) for rel, stat in look["unsettled"].items()},
                       **{rel: stat for rel, (_, stat) in own.items()}}
            round_look.keep(self.vault, self.path, begun, look["folders"], checked, count,
                            hidden, self._left, walked=int(look["walked"]))
        return done

    @contextmanager
    def _stats_left(self) -> Iterator[None]:
        """On leaving (after the connection closes, before the lock is let go): the file's
        stats as this refresh left them, so another process's later write is never taken for
        part of what this one agreed with."""
        yield
        self._left = self._file_stats()

    def _file_stats(self) -> tuple[StatKey | None, StatKey | None]:
        """The file's stat and its write-ahead log's: any write by any process moves one,
        and a file deleted (``osk redact`` drops it) or rebuilt is another file."""
        return stat_key(self.path), stat_key(self._log)

    def _holds_none(self) -> bool:
        """The last refresh found no raw record on disk (so the index holds no round)."""
        return self._count == 0

    def _refresh(self, disk: dict[str, tuple[str, tuple[int, int, int]]], hidden: Excluded,
                 timeout: float, budget: float | None, others_held: bool = False
                 ) -> tuple[int, bool]:
        """(records indexed, whether every changed record was). The records an exclusion or
        inclusion touched are indexed anew in the first transaction, which also records the
        exclusions the index is now built against: from its commit on, every round the index
        holds agrees with ``hidden``, so the other changed records (appends, new records, a
        whole rebuild) may be committed a part at a time, within ``budget``."""
        started = time.monotonic()
        with file_lock(self.path.with_name(LOCK), timeout=timeout), self._stats_left(), \
                self._open() as db:
            self._schema(db)
            known = {rel: (size, mtime, ino) for rel, size, mtime, ino in
                     db.execute("SELECT rel, size, mtime_ns, ino FROM records")}
            if others_held:  # ``disk`` names the records that changed; the rest are as held
                disk = {**{rel: (rel.split("/")[1], stat) for rel, stat in known.items()},
                        **disk}
            before = _built_against(db)
            touched = _touched(before, hidden)  # by an exclusion or inclusion: indexed anew
            changed = [rel for rel, (_, stat) in disk.items()
                       if known.get(rel) != stat or rel in touched]
            gone = [rel for rel in known if rel not in disk]
            if not changed and not gone and before == hidden:
                return 0, True
            first = [rel for rel in changed if rel in touched]
            rest = [rel for rel in changed if rel not in touched]
            if gone or first or before != hidden:  # else (an append) nothing to commit here
                with _transaction(db) as pending:
                    for rel in [*gone, *first]:
                        self._forget(db, rel, pending)
                    for rel in first:
                        self._index_record(db, rel, *disk[rel], hidden, pending)
                    _build_against(db, hidden)
            done = 0
            with _transaction(db) as pending:
                for rel in rest:
                    if budget is not None and done and time.monotonic() - started > budget:
                        break  # at least one record a refresh, so a catch-up always moves
                    self._index_record(db, rel, *disk[rel], hidden, pending)
                    done += 1
            return len(first) + done, done == len(rest)

    def _forget(self, db: sqlite3.Connection, rel: str, pending: Pending) -> None:
        if db.execute("SELECT 1 FROM records WHERE rel=?", (rel,)).fetchone() is not None:
            vectors_file(self.vault, rel).unlink(missing_ok=True)  # before its rows go
        _drop(db, [r for (r,) in db.execute("SELECT row FROM rounds WHERE rel=?", (rel,))],
              pending)
        db.execute("DELETE FROM records WHERE rel=?", (rel,))

    def _index_record(self, db: sqlite3.Connection, rel: str, key: str,
                      stat: tuple[int, int, int], hidden: Excluded, pending: Pending) -> None:
        """(Re)index one record, leaving out the rounds ``hidden`` excludes (as documents and
        as their neighbours' context). After an append (the only change capture makes) only
        the record's last rounds are read (``read_tail``: the bytes before them unchanged, the
        rounds indexed among them with the hashes they had) and only the new rounds are added,
        so the cost does not grow with the record; any other change (a redaction re-frames a
        round) indexes the record anew."""
        from osk.errors import OskError

        conversation = rel.rsplit("/", 1)[1][:-3]
        try:
            tail, indexed = self._tail(db, rel, key, conversation, pending)
        except (OskError, OSError, UnicodeDecodeError):
            self._forget(db, rel, pending)  # unreadable now: no stat stored, so tried again
            return
        rounds = tail.rounds
        base = rounds[0].number - 1 if rounds else indexed  # rounds[0]'s place in the record
        total = base + len(rounds)
        mark = tail.resume
        window = _digest([r for r in rounds if mark and r.number >= mark.number])
        db.execute("INSERT OR REPLACE INTO records VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (rel, key, *stat, total, mark and mark.offset, mark and mark.number,
                    mark and mark.prefix, window))
        if indexed:  # the last round indexed gains the new ones' words as its context
            indexed -= 1
            _drop(db, [r for (r,) in db.execute(
                "SELECT row FROM rounds WHERE rel=? AND number>?", (rel, indexed))], pending)
        kept = {i: not hidden.covers(rel, rounds[i - base].coordinate)
                for i in range(base, total)}
        texts = {i: _text(rounds[i - base]) if kept[i] else "" for i in range(base, total)}
        words = {i: tokenize_prose(texts[i]) for i in range(max(base, indexed - 1), total)}
        for i in range(indexed, total):
            found, text = rounds[i - base], texts[i]
            if not kept[i]:
                continue
            terms = tokenize_prose(f"{date_words(found.at)}\n{dates_in(text)}") + words[i]
            around = [*words.get(i - 1, ()), *words.get(i + 1, ())]
            cursor = db.execute(
                "INSERT INTO rounds (rel, key, coordinate, number, at, host, excerpt, length, "
                "size) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (rel, key, found.coordinate, found.number, found.at, found.host,
                 " ".join(text.split())[:TEXT_CHARS], len(terms), len(terms) + len(around)))
            row = int(cursor.lastrowid or 0)
            pending.add(row, terms, around)

    def _tail(self, db: sqlite3.Connection, rel: str, key: str, conversation: str,
              pending: Pending) -> tuple[Tail, int]:
        """The rounds to read of a record, and how many of its rounds stay indexed: its tail
        from where the last refresh left a mark, when the bytes before the mark and the
        indexed rounds after it are as they were; otherwise every round, and none kept."""
        from osk.capture.raw import Mark, read_tail

        before = db.execute("SELECT indexed, resume_at, resume_round, resume_prefix, "
                            "resumed_digest FROM records WHERE rel=?", (rel,)).fetchone()
        if before is not None and before[3] is not None:
            indexed, offset, number, prefix, window = before
            tail = read_tail(self.vault, key, conversation,
                             since=Mark(offset, number, prefix))
            if tail is not None:
                seen = [r for r in tail.rounds if r.number <= indexed]
                if len(seen) == indexed - number + 1 and _digest(seen) == window:
                    return tail, indexed
        self._forget(db, rel, pending)
        whole = read_tail(self.vault, key, conversation, since=None)
        assert whole is not None  # a whole read is never refused, only raised
        return whole, 0

    # -- querying -----------------------------------------------------------------------------
    def search(self, query: str, *, k: int, visible: Callable[[str], bool],
               refresh: bool = True, skip: tuple[str, int] | None = None,
               context: float = CONTEXT_WEIGHT) -> list[RoundHit]:
        """The best ``k`` rounds for ``query`` among those of keys ``visible`` allows.
        ``skip`` = (record rel, n): leave out that record's rounds from number n on.
        ``context``: the weight of a round's neighbours' words (0: its own words only)."""
        return self._search(query, k, visible, refresh, skip, context, EXCERPT_CHARS,
                            False)[0]

    def search_with_stats(self, query: str, *, k: int, visible: Callable[[str], bool],
                          refresh: bool = True, skip: tuple[str, int] | None = None,
                          context: float = CONTEXT_WEIGHT,
                          excerpt_chars: int | None = EXCERPT_CHARS
                          ) -> tuple[list[RoundHit], RoundStats | None]:
        """``search``, with the BM25 statistics of the rounds found (None when none); each
        hit's excerpt at most ``excerpt_chars`` long, around the query's words (None: the
        kept text whole, for a caller that cuts excerpts of the hits it keeps only)."""
        return self._search(query, k, visible, refresh, skip, context, excerpt_chars, True)

    def _search(self, query: str, k: int, visible: Callable[[str], bool], refresh: bool,
                skip: tuple[str, int] | None, context: float, excerpt_chars: int | None,
                with_stats: bool) -> tuple[list[RoundHit], RoundStats | None]:
        """``search_with_stats``; the statistics only ``with_stats`` (``search`` drops them:
        a tenth of a millisecond of each of the MCP server's searches)."""
        from osk.search.expand import query_terms

        if k <= 0:
            return [], None
        if not refresh and not self.path.exists():
            return [], None
        hidden = excluded(self.vault)  # read once: the refresh and the query see the same
        if refresh:
            self.refresh(hidden=hidden)
            if self._holds_none():
                return [], None  # a vault that never captured a round opens nothing more
        terms = sorted(query_terms(query, prose=True))
        if not terms:
            return [], None
        with self._open() as db:
            known, built = self._known(db)
            keys = [key for key in known if visible(key)]
            if not keys:
                return [], None
            if built != hidden:  # not refreshed since the exclusions changed
                context = 0.0
            else:
                hidden = Excluded()
            accept = _accepting(None if len(keys) == len(known) else frozenset(keys), skip,
                                hidden)
            # one read transaction: each statement outside one takes and drops the log's read
            # lock and stats the file (three system calls; a query runs about twenty), and
            # every statement reads the same state of the index
            db.execute("BEGIN")
            try:
                rows = _best(db, terms, k, context, accept, self._top(), forward=with_stats)
                stats = _stats(db, rows, terms, query) if rows and with_stats else None
            finally:
                db.execute("COMMIT")
            hits = [RoundHit(coordinate, key, at, host, text if excerpt_chars is None else
                             excerpt(text, excerpt_chars, terms), score, slot)
                    for slot, (_, coordinate, key, at, host, text, score, _, _) in
                    enumerate(rows)]
            return hits, stats

    def warm(self) -> None:
        """Load what a query takes: its top-k (``_top``: a watched index's imports numpy, 80 ms
        of CPU a server's first search paid before) and the reader a refresh indexes new
        rounds with (the hooks capture a round every turn, so a server's search soon meets
        one)."""
        import importlib

        self._top()
        importlib.import_module("osk.capture.raw")

    def _top(self) -> Top:
        """The top-k a query takes: a watched index is a long-running process's (the MCP
        server's), whose top-k sums postings on arrays (``osk.search.round_arrays``, numpy);
        any other (a hook's, a command's) takes ``round_postings.top``, standard library
        only. The same rounds and scores either way."""
        if not self._watching:
            return top
        from osk.search.round_arrays import top as on_arrays

        return on_arrays

    def _known(self, db: sqlite3.Connection) -> tuple[list[str], Excluded]:
        """The keys of the indexed records and the exclusions the index was built against
        (its schema checked first), read again only when the file or its write-ahead log
        moved since the last read (any write by any process moves one, as ``records``
        relies on; the stats are taken before the read)."""
        stats = self._file_stats()
        if self._read is not None and self._read[0] == stats and stats[0] is not None:
            return self._read[1], self._read[2]
        self._schema(db)
        known = [key for (key,) in db.execute("SELECT DISTINCT key FROM records")]
        built = _built_against(db)
        self._read = stats, known, built
        return known, built

    # -- for the semantic channel (osk.search.round_vectors) ---------------------------------
    def records(self) -> Listed:
        """Which index this is (``built``) and (rel, key, rounds) of every indexed record
        ("" and none before the first refresh). Read again only when the file or its
        write-ahead log moved since the last read (any write by any process moves one, as
        ``refresh`` relies on); the stats are taken before the read, so a write meanwhile
        makes the next call read again."""
        stats = self._file_stats()
        if stats[0] is None:
            return "", ()
        if self._listed is not None and self._listed[0] == stats:
            return self._listed[1]
        with self._open() as db:
            self._schema(db)
            listed = _built(db), tuple(db.execute("SELECT rel, key, indexed FROM records"))
        self._listed = stats, listed
        return listed

    def kept_rounds(self, rel: str) -> tuple[str, int, list[tuple[int, str]]]:
        """Which index this is, the record's round count and its indexed rounds' (number,
        kept text), read together (a count of -1 and none when it is not indexed)."""
        with self._open() as db:
            self._schema(db)
            db.execute("BEGIN")
            try:
                row = db.execute("SELECT indexed FROM records WHERE rel=?", (rel,)).fetchone()
                rounds = list(db.execute("SELECT number, excerpt FROM rounds WHERE rel=? "
                                         "ORDER BY number", (rel,)))
                return _built(db), row[0] if row is not None else -1, rounds
            finally:
                db.execute("COMMIT")

    def holding(self) -> Any:
        """The index's lock, as a refresh takes it: what is checked under it stays so."""
        return file_lock(self.path.with_name(LOCK), timeout=5.0)

    def rounds_at(self, coordinates: Sequence[str], query: str,
                  excerpt_chars: int = EXCERPT_CHARS) -> list[RoundHit]:
        """The indexed rounds of ``coordinates`` as hits (score 0), each excerpted around the
        query's words; a coordinate not indexed gives none."""
        from osk.capture.exclusions import record_of
        from osk.search.expand import query_terms

        terms = sorted(query_terms(query, prose=True))
        found = []
        with self._open() as db:
            self._schema(db)
            for coordinate in coordinates:
                row = db.execute("SELECT coordinate, key, at, host, excerpt FROM rounds "
                                 "WHERE rel=? AND coordinate=?",
                                 (record_of(coordinate), coordinate)).fetchone()
                if row is not None:
                    _, key, at, host, text = row  # its coordinate is the one asked
                    found.append(RoundHit(coordinate, key, at, host,
                                          excerpt(text, excerpt_chars, terms), 0.0))
        return found


def _built(db: sqlite3.Connection) -> str:
    row = db.execute("SELECT value FROM meta WHERE key='built'").fetchone()
    return str(row[0]) if row is not None else ""


def _drop(db: sqlite3.Connection, rows: list[int], pending: Pending) -> None:
    """Remove rounds: their terms' counts fall at once (``Pending.drop``, the terms read from
    their forward lists); their postings stay behind, dead, their rows never reused."""
    for held in round_terms(db, rows).values():
        pending.drop((term, own > 0) for term, own, _ in held)
    for at in range(0, len(rows), MARKS):
        chunk = rows[at:at + MARKS]
        marks = ",".join("?" * len(chunk))
        db.execute(f"DELETE FROM forward WHERE row IN ({marks})", chunk)
        db.execute(f"DELETE FROM rounds WHERE row IN ({marks})", chunk)


def round_terms(db: sqlite3.Connection, rows: Sequence[int]
                ) -> dict[int, list[tuple[str, int, int]]]:
    """Each of ``rows``' terms, with its count in the round's own words and in its
    neighbours', read from their forward lists (a row not held has none)."""
    lists: dict[int, tuple[list[int], list[int], list[int]]] = {}
    for at in range(0, len(rows), MARKS):
        chunk = rows[at:at + MARKS]
        lists.update((row, terms_of(data)) for row, data in db.execute(
            f"SELECT row, data FROM forward WHERE row IN ({','.join('?' * len(chunk))})", chunk))
    wanted = sorted({ident for idents, _, _ in lists.values() for ident in idents})
    names: dict[int, str] = {}
    for at in range(0, len(wanted), MARKS):
        chunk = wanted[at:at + MARKS]
        names.update(db.execute(f"SELECT id, term FROM vocab WHERE id IN "
                                f"({','.join('?' * len(chunk))})", chunk))
    return {row: [(names[ident], own, around) for ident, own, around in zip(*found, strict=True)]
            for row, found in lists.items()}


def _text(found: Any) -> str:
    """What is indexed of a round: its person text, final answer and tool summary."""
    return "\n".join((found.user, found.assistant, *found.tools))


def _digest(rounds: Sequence[Any]) -> str:
    """What a record's indexed rounds were: their hashes, in order, as one digest."""
    return hashlib.sha256(" ".join(r.hash for r in rounds).encode()).hexdigest()


@contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[Pending]:
    """One write transaction over the index: its postings flushed, then committed; rolled
    back whole on any error."""
    with immediate(db):
        pending = Pending(db)
        yield pending
        flush(db, pending, CONTEXT_WEIGHT)


def _built_against(db: sqlite3.Connection) -> Excluded:
    """The exclusions the index was last refreshed against."""
    import json

    row = db.execute("SELECT value FROM meta WHERE key='excluded'").fetchone()
    if row is None:
        return Excluded()
    records, rounds = json.loads(row[0])
    return Excluded(frozenset(records), frozenset(rounds))


def _build_against(db: sqlite3.Connection, hidden: Excluded) -> None:
    import json

    value = json.dumps([sorted(hidden.records), sorted(hidden.rounds)])
    db.execute("INSERT OR REPLACE INTO meta VALUES ('excluded', ?)", (value,))


def _touched(before: Excluded, now: Excluded) -> frozenset[str]:
    """The records whose excluded rounds differ between ``before`` and ``now``."""
    if before == now:
        return frozenset()

    def state(hidden: Excluded, rel: str) -> tuple[bool, frozenset[str]]:
        head = f"{rel[:-3]}#"
        return rel in hidden.records, frozenset(c for c in hidden.rounds if c.startswith(head))

    return frozenset(rel for rel in before.touched() | now.touched()
                     if state(before, rel) != state(now, rel))


_ROW = "r.row, r.coordinate, r.key, r.at, r.host, r.excerpt"  # a result's columns before s


def _accepting(keys: Collection[str] | None, skip: tuple[str, int] | None,
               hidden: Excluded) -> Accept | None:
    """Which rounds a query keeps: of ``keys`` (None: any), not ``skip``'s record from its
    round number on, not excluded by ``hidden`` (by name: the index was built before it).
    None when that is every round (the top-k then asks nothing of a round's row)."""
    if keys is None and skip is None and not hidden.records and not hidden.rounds:
        return None

    def accept(key: str, rel: str, number: int, coordinate: str) -> bool:
        if keys is not None and key not in keys:
            return False
        if skip is not None and rel == skip[0] and number >= skip[1]:
            return False
        return not hidden.covers(rel, coordinate)

    return accept


def _best(db: sqlite3.Connection, terms: list[str], k: int, context: float,
          accept: Accept | None, ranked: Top = top, *, forward: bool = True
          ) -> list[tuple[Any, ...]]:
    """The ``k`` best rounds ``accept`` keeps (``ranked``: ``round_postings.top`` or the same
    on arrays), joined to their rows: (row, coordinate, key, at, host, kept text, score,
    length, forward list); without ``forward`` (what only ``_stats`` reads), the last two are
    None: a plain search reads no forward list again (0.04 ms of ten rounds at 100,000)."""
    best = ranked(db, terms, k, context, accept)
    marks = ",".join("?" * len(best))
    columns, joined = (", r.length, f.data", " JOIN forward f ON f.row = r.row") if forward \
        else (", NULL, NULL", "")
    rows = {row[0]: row for row in db.execute(
        f"SELECT {_ROW}{columns} FROM rounds r{joined} WHERE r.row IN ({marks})",
        [row for row, _ in best])}
    return [(*rows[row][:6], score, *rows[row][6:]) for row, score in best]


def _stats(db: sqlite3.Connection, rows: list[tuple[Any, ...]], terms: list[str],
           query: str) -> RoundStats:
    from osk.search.bm25 import K1, B
    from osk.search.expand import prose_names

    size, total = db.execute("SELECT rounds, length FROM totals").fetchone()
    avgdl = total / size if size else 1.0
    norms = {slot: K1 * (1 - B + B * row[7] / avgdl) for slot, row in enumerate(rows)}
    marks = ",".join("?" * len(terms))
    known = [(str(term), int(ident), int(df)) for term, ident, df in db.execute(
        f"SELECT term, id, body FROM vocab WHERE term IN ({marks})", terms)]
    # in the rounds' own words: a neighbour's do not make a term common, nor count in a hit
    dfs = {term: df for term, _, df in known}
    tfs: dict[str, dict[int, int]] = {}
    for slot, row in enumerate(rows):
        for (term, _, _), (own, _) in zip(known, counts_in(row[8], [i for _, i, _ in known])[1],
                                          strict=True):
            if own:
                tfs.setdefault(term, {})[slot] = own
    return RoundStats(int(size), K1, norms, tfs, dfs, prose_names(query))


# -- beside nodes -------------------------------------------------------------------------------
def as_hit(found: RoundHit, scope: str | None) -> Any:
    """A round as a search hit: its coordinate for title, path and id (what ``read_raw``
    takes), its date and an excerpt for summary, marked as a raw round."""
    from osk.search.ranking import Hit

    day = found.at[:10]
    return Hit(found.coordinate, found.coordinate, found.coordinate,
               f"{day} · {found.excerpt}" if day else found.excerpt, found.at, found.score,
               (MARKER,), KIND, scope)


def round_hits(index: RoundIndex, query: str, k: int, visible: Callable[[str], bool],
               scope_of: Callable[[str], str | None], meaning: Any = None, *,
               refresh: bool = True) -> list[Any]:
    """The best ``k`` rounds a session may see, as search hits. ``meaning``: the rounds'
    vectors (``osk.search.round_vectors.RoundVectors``) when the semantic channel is on and
    reads the query; then words are fused with meaning, else the rounds rank by words.
    ``refresh``: index the rounds captured since first (False: the rounds it holds, by words)."""
    if not refresh or meaning is None or not meaning.model.reads(query):
        found = index.search(query, k=k, visible=visible, refresh=refresh)
    else:
        found = meaning.search(index, query, k, visible)
    return [as_hit(hit, scope_of(hit.key)) for hit in found]


def _worth(hits: Sequence[Any]) -> list[float]:
    """Each hit's worth in its list's order: its score, or a later hit's if higher (a hit
    ranked above another is worth at least that one's score)."""
    worth: list[float] = []
    for hit in reversed(hits):
        worth.append(max(hit.score, worth[-1]) if worth else hit.score)
    return worth[::-1]


def _interleaved(nodes: Sequence[Any], rounds: Sequence[Any]) -> list[Any]:
    """Both lists in one, each keeping its own order: a round goes before a node only when it
    is worth more than that node (``_worth``). Re-sorting the nodes by score instead put a
    title asked for below a node that merely used its words more (dev set nDCG@10 0.802 ->
    0.795); re-sorting the rounds undid fusion's order, where meaning keeps the words' first
    rounds in place (LoCoMo rounds with the channel, R@5 0.762 -> 0.759)."""
    node_worth, round_worth = _worth(nodes), _worth(rounds)
    order: list[Any] = []
    taken = 0
    for place, hit in enumerate(nodes):
        while taken < len(rounds) and round_worth[taken] > node_worth[place]:
            order.append(rounds[taken])
            taken += 1
        order.append(hit)
    return order + list(rounds[taken:])


def merged(nodes: Sequence[Any], rounds: Sequence[Any], cites: Mapping[str, set[str]],
           k: int) -> list[Any]:
    """Node hits and round hits in one order, where a node that cites a round always comes
    before that round (the distilled claim before its evidence). Each keeps the order search
    gave it (a title asked for first, fusion's order), which is not always by score
    (``_interleaved``)."""
    order = _interleaved(nodes, rounds)
    placed: list[Any] = []
    waiting: dict[str, Any] = {}  # round coordinate -> its hit, until its citing node is placed
    citing = {coordinate for cited in cites.values() for coordinate in cited}
    shown_nodes = {hit.id for hit in nodes}
    for hit in order:
        if hit.space == KIND and hit.id in citing and any(
                hit.id in cites.get(node, ()) and node not in {h.id for h in placed}
                for node in shown_nodes):
            waiting[hit.id] = hit
            continue
        placed.append(hit)
        if hit.space != KIND:
            placed.extend(waiting.pop(c) for c in sorted(cites.get(hit.id, ()))
                          if c in waiting)
    placed.extend(waiting.values())
    return placed[:k]


def _reclaim(db: sqlite3.Connection) -> None:
    """Give the dropped tables' pages back to the disk. SQLite keeps a dropped table's pages
    in the file as free pages (an index of 1,000,000 rounds upgraded in place kept some
    5.8 GB), and the file, now empty, is copied by VACUUM in no time. Another connection
    writing at that moment leaves the pages for now: the new tables reuse them as they grow."""
    try:
        db.execute("VACUUM")
    except sqlite3.OperationalError:
        pass
