"""The round index's postings: each term's rounds in impact order, read by a top-k that stops
as soon as what it has not read cannot beat the k-th round it has.

FTS5 scored every round holding any of a query's words (a common word is in most rounds), so a
query's cost grew with the rounds. Here a term's postings are kept in blocks: a posting is a
round's row and a descriptor (its count of the term in its own words, in its neighbours' words,
and its length), and a block carries the largest counts and the shortest length of its
postings, so what any of its rounds can add to a score is bounded whatever the query weighs
the neighbours' words at and whatever the rounds' average length has become; it carries too
what its best posting gave when it was written, a far tighter bound once carried to the
average length of now (``drifted``), for a query weighing the neighbours' words no more than
the write did. A term's blocks
are kept in impact order (its best rounds first, the blocks' sizes growing along the order);
rounds added since are appended in blocks of their own ("fresh") until they are a share of the
term's postings, when the term is put in order again; meanwhile every few fresh blocks are put
in impact order among themselves (a run), runs merging two of a size into one, so a query
reads the best of each run, not every fresh block. A round removed leaves its postings
behind ("dead": a round's row is never reused) until its terms are next put in order; its
document counts are taken off at once, so the scores are those of the rounds that are there.

Scores are FTS5's ``bm25(terms, 1.0, context)`` over the same terms (k1 = 1.2, b = 0.75, an
idf of 1e-6 for a term in over half the rounds, a neighbour's word counted at the ``context``
weight, a round's length counting both its words and its neighbours'), computed in the order
FTS5 sums them. The top-k (``top``) reads the blocks of the term with the most left to give,
scores a round whole (from its forward list) only when what it could reach is not below the
k-th score, and stops when the sum of what every term could still give is below it: the same
rounds, scores and order (ties by row) as scoring every round holding a query term. A round is
scored whole from its forward list (``forward``: its terms' ids, each with its count in the
round's own words and in its neighbours'), a few binary searches, not a count in its text.

Standard library only: the prompt-submit hook queries it (``top``), as does every process
that does not watch the raw folders (a command, a hook). A long-running process (the MCP
server's engine, whose round index is watched) takes ``osk.search.round_arrays.top``
instead: the same search on numpy arrays, built on this one (``searching``, ``Search``), and
the same rounds, scores and order.
"""

from __future__ import annotations

import heapq
import math
import sqlite3
import sys
from array import array
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from itertools import chain, compress, filterfalse
from operator import add
from typing import Any

K1 = 1.2  # FTS5's bm25()
B = 0.75
IDF_FLOOR = 1e-6  # FTS5's idf for a term in over half the rounds
# Bounds are raised by this share: a round's score summed in another order may differ in its
# last bits from the bound's sum, and a bound must never fall below a score.
MARGIN = 1e-9
SLACK = 1e-12  # a bisection's bound lowered by this share: float sums in another order
BLOCK = 128  # postings in a term's first blocks of impact order, and in a fresh block
DOUBLING = 4  # later blocks of the impact order double in size every this many blocks
FRESH_SHARE = 8  # a term is put in order again when over 1/FRESH_SHARE of it is fresh
# Fresh blocks a term gathers in arrival order before they are put in impact order among
# themselves (a run): a block's bound is its best posting's, so 128 postings in arrival order
# are bounded near the term's best, and a query that reads a common word's postings below
# its best reads every such block. Runs are merged as a binary counter (two of one size make
# one of the next), so a fresh posting is rewritten a few times, not once a merge.
RUN = 8
FRESH = 1  # ``heads.fresh`` of a fresh block in arrival order (0: the term's impact order)
# A run's blocks are marked FRESH + 1 + its level: a run of level n was made of 2**n runs of
# RUN blocks (or of one larger gathering), so the runs after the impact order are in falling
# levels, and two adjacent runs of one level are the next to merge.
# Rounds scored whole from their forward lists cost about 4 us each, a posting read 0.3 us
# (POSTINGS_A_ROUND of them a round): a query scores the rounds that could still reach the
# k-th once they are at most FEW; while more, it reads on for as many postings as scoring
# them would cost, counting them again after the unread fell WIDER times further below it.
# (Counted in their text, rounds cost 10 us and this was 32; at 200,000 rounds 12 against
# 32 cut the top-k's mean 4.2 -> 3.6 ms, a FEW of 128 or 384 cost more; once a block read
# adds to the rounds that could still reach the k-th only, WIDER 1.5 against 1.25 cut it
# 2.0 -> 1.9 ms, 2.0 cost more: docs/performance.md.)
FEW = 256
WIDER = 1.5
POSTINGS_A_ROUND = 12
FINISH_CHUNK = 32  # rounds' forward lists read in one statement when scoring them whole
CAPPED = 255  # a count stored as this is at least this (its bound is BM25's supremum)
LONGEST = 0xFFFF  # a length stored as this is at least this (a bound takes it as this)
MARKS = 500  # host parameters in one IN (...)

TABLES = """
CREATE TABLE IF NOT EXISTS vocab (
    id INTEGER PRIMARY KEY, term TEXT NOT NULL UNIQUE, body INTEGER NOT NULL,
    any INTEGER NOT NULL, postings INTEGER NOT NULL, fresh INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS heads (
    term INTEGER NOT NULL, block INTEGER NOT NULL, fresh INTEGER NOT NULL,
    size INTEGER NOT NULL, fb INTEGER NOT NULL, fc INTEGER NOT NULL, least INTEGER NOT NULL,
    top REAL NOT NULL, avgdl REAL NOT NULL, context REAL NOT NULL,
    PRIMARY KEY (term, block)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS postings (place INTEGER PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS forward (row INTEGER PRIMARY KEY, data BLOB NOT NULL);
"""
# A block's head holds its largest counts and shortest length (``fb``, ``fc``, ``least``), and
# the most any of its postings gave when it was written (``top``, at the ``avgdl`` and
# ``context`` of then; BM25's supremum for a block in arrival order, not looked at): the most
# of the counts and the length come from different postings, so at a million records the first
# bound fell only 2.08 -> 1.90 along a common word's order while its postings' most fell
# 1.96 -> 1.21 (``drifted`` carries the second to the average length of now).
# A block's postings are kept at ``place(term, block)`` in a table of their own: a WITHOUT
# ROWID table of kilobyte rows took twice their size on disk, and reading the blocks' heads
# would have read their postings too.
PLACES = 1 << 24  # blocks a term may have


def place(term: int, block: int) -> int:
    if block >= PLACES:
        raise ValueError(f"term {term} has more than {PLACES} blocks")
    return term * PLACES + block


def term_places(term: int) -> tuple[int, int]:
    """The range of a term's places, for a BETWEEN."""
    return term * PLACES, term * PLACES + PLACES - 1
NAMES = ("vocab", "heads", "postings", "forward")


def gain(f: float, length: float, avgdl: float) -> float:
    """BM25's saturation of a weighted count ``f`` in a round of ``length``, as FTS5 writes it."""
    return (f * (K1 + 1.0)) / (f + K1 * (1 - B + B * length / avgdl))


def drifted(top: float, avgdl: float, now: float) -> float:
    """The most a posting can give at the average length ``now`` (before the idf), if it gave
    at most ``top`` at ``avgdl`` (at a context weight not below the one asked: a larger
    count gives more). ``1/gain - 1/(K1 + 1)`` is the length's part over the count:
    ``K1 * (1 - B + B * length / avgdl) / (f * (K1 + 1))``, which falls at most in the ratio
    of the two lengths when the average grows, and does not fall when it shrinks."""
    if top <= 0.0:
        return 0.0
    part = (1.0 / top - 1.0 / (K1 + 1.0)) * min(1.0, avgdl / now)
    return 1.0 / (1.0 / (K1 + 1.0) + part)


def reach(desc: int, context: float, avgdl: float) -> float:
    """The most a posting (or a block, by its largest counts and shortest length) can give
    before the idf: exact counts give the gain itself, a capped count BM25's supremum."""
    own, around = desc >> 24, (desc >> 16) & 0xFF
    if own >= CAPPED or (context and around >= CAPPED):
        return K1 + 1.0
    f = own + context * around
    return gain(f, desc & 0xFFFF, avgdl) if f else 0.0


def idf(size: int, df: int) -> float:
    value = math.log((size - df + 0.5) / (df + 0.5))
    return value if value > 0.0 else IDF_FLOOR


# -- a round's forward list ----------------------------------------------------------------------
# A round's row in ``forward``: its length (its words and its neighbours') and how many terms it
# holds (two native 32-bit words), its terms' vocabulary ids in ascending order (32 bits each),
# then each term's count in the round's own words, then in its neighbours', every count in the
# narrowest of 1, 2 or 4 bytes that holds the round's largest (exact: a query scores from them).
WIDTHS = ((0xFF, "B"), (0xFFFF, "H"), (0xFFFFFFFF, "I"))


def forward(length: int, idents: list[int], own: list[int], around: list[int]) -> bytes:
    """A round's forward list from its length, its terms' ids in ascending order and each
    one's counts in the round's own words (``own``) and its neighbours' (``around``)."""
    largest = max(max(own, default=0), max(around, default=0))
    code = next(code for top, code in WIDTHS if largest <= top)
    return b"".join((array("I", (length, len(idents))).tobytes(), array("I", idents).tobytes(),
                     array(code, own).tobytes(), array(code, around).tobytes()))


def _unpacked(data: bytes) -> tuple[int, int, memoryview, memoryview]:
    """A forward list's length, term count, ids and counts (own, then neighbours')."""
    view = memoryview(data)
    length, many = view[:8].cast("I")
    held = view[8:8 + 4 * many].cast("I")
    rest = view[8 + 4 * many:]
    width = len(rest) // (2 * many) if many else 1
    counts = rest.cast("B") if width == 1 else rest.cast("H") if width == 2 else rest.cast("I")
    return length, many, held, counts


def counts_in(data: bytes, idents: Sequence[int]) -> tuple[int, list[tuple[int, int]]]:
    """A round's length, and the (own, neighbours') counts of each of ``idents`` (0, 0 for a
    term it does not hold), read from its forward list by binary search."""
    length, many, held, counts = _unpacked(data)
    if not many:
        return length, [(0, 0)] * len(idents)
    found = []
    for ident in idents:
        at = bisect_left(held, ident)
        found.append((counts[at], counts[many + at]) if at < many and held[at] == ident
                     else (0, 0))
    return length, found


def terms_of(data: bytes) -> tuple[list[int], list[int], list[int]]:
    """A round's terms' ids and each one's counts in its own words and its neighbours', read
    from its forward list whole."""
    _, many, held, counts = _unpacked(data)
    return held.tolist(), counts[:many].tolist(), counts[many:].tolist()


# -- writing -------------------------------------------------------------------------------------
class Pending:
    """What one refresh changes in the postings, written together by ``flush``: each term's
    document counts (in rounds' own words, in any of their words) and its new postings."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        # term -> [rounds gained holding it in their own words, in any, its new postings
        # as (row << 32 | descriptor)]
        self.terms: dict[str, list[Any]] = {}
        self.ids: dict[str, int] = {}  # term -> its vocabulary id (a new term's row made)

    def ident(self, term: str) -> int:
        """``term``'s vocabulary id; a term new to the index gets its row now (its counts are
        written by ``flush``), so a round's forward list can name it."""
        found = self.ids.get(term)
        if found is None:
            row = self.db.execute("SELECT id FROM vocab WHERE term=?", (term,)).fetchone()
            found = self.ids[term] = int(row[0]) if row is not None else int(self.db.execute(
                "INSERT INTO vocab (term, body, any, postings, fresh) VALUES (?, 0, 0, 0, 0)",
                (term,)).lastrowid or 0)
        return found

    def _of(self, term: str) -> list[Any]:
        entry = self.terms.get(term)
        if entry is None:
            entry = self.terms[term] = [0, 0, array("Q")]
        return entry

    def add(self, row: int, own: Sequence[str], around: Sequence[str]) -> None:
        """A round's postings and its forward list. A descriptor is the term's count in the
        round's own words (bits 24-31), in its neighbours' (16-23), each at most ``CAPPED``,
        and the round's length (its words and its neighbours', 0-15), at most ``LONGEST``."""
        base = (row << 32) | min(len(own) + len(around), LONGEST)
        mine, theirs = Counter(own), Counter(around)
        ids, ident = self.ids, self.ident
        held = sorted([(ids.get(term) or ident(term), term)  # ids start at 1
                       for term in mine.keys() | theirs.keys()])
        self.db.execute("INSERT INTO forward VALUES (?, ?)", (row, forward(
            len(own) + len(around), [i for i, _ in held], [mine.get(t, 0) for _, t in held],
            [theirs.get(t, 0) for _, t in held])))
        terms = self.terms
        for term, count in mine.items():  # the hot loop of a rebuild: no calls in it
            more = theirs.get(term, 0)
            entry = terms.get(term)
            if entry is None:
                entry = terms[term] = [0, 0, array("Q")]
            entry[0] += 1
            entry[1] += 1
            entry[2].append(base | (count if count < CAPPED else CAPPED) << 24
                            | (more if more < CAPPED else CAPPED) << 16)
        for term, more in theirs.items():
            if term not in mine:
                entry = terms.get(term)
                if entry is None:
                    entry = terms[term] = [0, 0, array("Q")]
                entry[1] += 1
                entry[2].append(base | (more if more < CAPPED else CAPPED) << 16)

    def drop(self, held: Iterable[tuple[str, bool]]) -> None:
        """A round removed: the document counts of the terms it ``held`` (each with whether
        in its own words) fall (its postings stay, dead)."""
        for term, own in held:
            entry = self._of(term)
            entry[0] -= own
            entry[1] -= 1

    def postings(self, term: str) -> tuple[array[int], array[int]]:
        """A term's new postings as (rows, descriptors)."""
        both = array("I")
        both.frombytes(self.terms[term][2].tobytes())
        low, high = both[0::2], both[1::2]
        return (high, low) if sys.byteorder == "little" else (low, high)


def flush(db: sqlite3.Connection, pending: Pending, context: float) -> None:
    """Write ``pending`` (inside the caller's transaction, after its rounds' rows): a term's
    postings are put in order by what they give at the weight ``context`` (the one queries
    ask with) and the rounds' average length now."""
    if not pending.terms:
        return
    size, total = db.execute("SELECT rounds, size FROM totals").fetchone()
    avgdl = total / size if size else 1.0
    terms = sorted(pending.terms)
    known: dict[str, tuple[int, int, int, int, int]] = {}
    for at in range(0, len(terms), MARKS):
        chunk = terms[at:at + MARKS]
        known.update((row[0], row[1:]) for row in db.execute(
            "SELECT term, id, body, any, postings, fresh FROM vocab WHERE term IN "
            f"({','.join('?' * len(chunk))})", chunk))
    for term in terms:
        body, any_ = pending.terms[term][:2]
        rows, descs = pending.postings(term)
        if term not in known:
            cursor = db.execute("INSERT INTO vocab (term, body, any, postings, fresh) "
                                "VALUES (?, 0, 0, 0, 0)", (term,))
            known[term] = (int(cursor.lastrowid or 0), 0, 0, 0, 0)
        ident, had_body, had_any, postings, fresh = known[term]
        if had_any + any_ <= 0:  # no round holds it any more: its postings are all dead
            db.execute("DELETE FROM vocab WHERE id=?", (ident,))
            db.execute("DELETE FROM heads WHERE term=?", (ident,))
            db.execute("DELETE FROM postings WHERE place BETWEEN ? AND ?", term_places(ident))
            continue
        postings, fresh = postings + len(rows), fresh + len(rows)
        if rows and (fresh * FRESH_SHARE > postings or postings <= BLOCK * DOUBLING):
            # a live round holds one posting of each term it holds (``any`` counts them), so
            # a term has dead postings only while it holds more postings than that
            dead = postings > had_any + any_
            postings, fresh = _reorder(db, ident, rows, descs, context, avgdl, dead), 0
        elif rows:
            _append(db, ident, rows, descs, context, avgdl)
        db.execute("UPDATE vocab SET body=?, any=?, postings=?, fresh=? WHERE id=?",
                   (had_body + body, had_any + any_, postings, fresh, ident))


def _write(db: sqlite3.Connection, term: int, block: int, fresh: int, rows: array[int],
           descs: array[int], top: float, avgdl: float, context: float) -> None:
    """A block and its head; ``top``: the most one of its postings gives at ``avgdl`` and
    ``context`` (``K1 + 1`` when not known)."""
    fb = max(descs) >> 24  # the own count is a descriptor's top byte
    fc = max(map((0xFF << 16).__and__, descs)) >> 16
    least = min(map(0xFFFF.__and__, descs))
    db.execute("INSERT OR REPLACE INTO heads VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
               (term, block, fresh, len(rows), fb, fc, least, top, avgdl, context))
    db.execute("INSERT OR REPLACE INTO postings VALUES (?, ?)",
               (place(term, block), rows.tobytes() + descs.tobytes()))


def _decode(data: bytes) -> tuple[array[int], array[int]]:
    both = array("I")
    both.frombytes(data)
    half = len(both) // 2
    return both[:half], both[half:]


def _reorder(db: sqlite3.Connection, term: int, rows: array[int], descs: array[int],
             context: float, avgdl: float, dead: bool) -> int:
    """Put a term's live postings (its blocks' and the new ``rows``) in impact order, in
    blocks growing along it; returns how many there are. ``dead``: whether some of its
    postings are a removed round's (only then are the rounds looked up)."""
    every, marks = array("I"), array("I")
    for (data,) in db.execute("SELECT data FROM postings WHERE place BETWEEN ? AND ?",
                              term_places(term)):
        held, described = _decode(data)
        every.extend(held)
        marks.extend(described)
    every.extend(rows)
    marks.extend(descs)
    order = _impact_order(marks, context, avgdl)
    if dead:
        live = _alive(db, every)
        order = [i for i in order if every[i] in live]
    db.execute("DELETE FROM heads WHERE term=?", (term,))
    db.execute("DELETE FROM postings WHERE place BETWEEN ? AND ?", term_places(term))
    _write_order(db, term, 0, 0, every, marks, order, context, avgdl)
    return len(order)


def _impact_order(marks: Sequence[int], context: float, avgdl: float) -> list[int]:
    """The positions of descriptors ``marks``, the one that can give the most first (ties in
    their order)."""
    worth = {desc: reach(desc, context, avgdl) for desc in set(marks)}
    keys = [worth[desc] for desc in marks]
    return sorted(range(len(marks)), key=keys.__getitem__, reverse=True)


def _write_order(db: sqlite3.Connection, term: int, first: int, fresh: int, every: array[int],
                 marks: array[int], order: list[int], context: float, avgdl: float) -> None:
    """Write the postings (``every``, ``marks``) in ``order`` (``_impact_order``'s at
    ``context`` and ``avgdl``) as the term's blocks from block ``first`` on, growing along the
    order (``BLOCK``, doubling every ``DOUBLING`` blocks), each marked ``fresh``: a block's
    first posting gives the most of it."""
    at, block = 0, 0
    while at < len(order):
        size = BLOCK << (block // DOUBLING)
        chunk = order[at:at + size]
        _write(db, term, first + block, fresh, array("I", [every[i] for i in chunk]),
               array("I", [marks[i] for i in chunk]), reach(marks[chunk[0]], context, avgdl),
               avgdl, context)
        at, block = at + size, block + 1


def _alive(db: sqlite3.Connection, rows: Sequence[int]) -> set[int]:
    """Which of ``rows`` are rounds still held (the others are dead postings')."""
    wanted, alive = sorted(set(rows)), set[int]()
    for at in range(0, len(wanted), MARKS):
        chunk = wanted[at:at + MARKS]
        alive.update(row for (row,) in db.execute(
            f"SELECT row FROM rounds WHERE row IN ({','.join('?' * len(chunk))})", chunk))
    return alive


def _append(db: sqlite3.Connection, term: int, rows: array[int], descs: array[int],
            context: float, avgdl: float) -> None:
    """Add postings to the term's open fresh block, then to new ones (``heads.fresh`` 1: in
    arrival order); once ``RUN`` such blocks are gathered, they are put in impact order among
    themselves as a run, which merges with the runs before it of its size (``_merge``)."""
    last = db.execute("SELECT block, fresh, size FROM heads WHERE term=? ORDER BY block DESC "
                      f"LIMIT {RUN}", (term,)).fetchall()
    block = 0 if not last else last[0][0] + 1
    gathered = next((at for at, (_, fresh, _) in enumerate(last) if fresh != FRESH),
                    len(last))
    if last and last[0][1] == FRESH and last[0][2] < BLOCK:
        (data,) = db.execute("SELECT data FROM postings WHERE place=?",
                             (place(term, last[0][0]),)).fetchone()
        held, described = _decode(data)
        rows, descs = held + rows, described + descs
        block, gathered = last[0][0], gathered - 1
    for at in range(0, len(rows), BLOCK):  # in arrival order: their most not looked for
        _write(db, term, block, FRESH, rows[at:at + BLOCK], descs[at:at + BLOCK], K1 + 1.0,
               avgdl, context)
        block, gathered = block + 1, gathered + 1
    if gathered >= RUN:
        _merge(db, term, block, context, avgdl)


def _merge(db: sqlite3.Connection, term: int, end: int, context: float, avgdl: float) -> None:
    """Put the term's fresh blocks in arrival order (the last before block ``end``) in impact
    order as a run, and merge it with the run before it while that one is of its level."""
    heads = db.execute("SELECT block, fresh, size FROM heads WHERE term=? AND block >= "
                       "(SELECT coalesce(max(block) + 1, 0) FROM heads WHERE term=? AND fresh=0)"
                       " ORDER BY block", (term, term)).fetchall()
    runs: list[tuple[int, int, int]] = []  # (level, first block, postings) of each run
    for number, fresh, size in heads:
        if runs and runs[-1][0] == fresh and fresh > FRESH:
            runs[-1] = (fresh, runs[-1][1], runs[-1][2] + size)
        elif fresh > FRESH:
            runs.append((fresh, number, size))
    first = next(number for number, fresh, _ in heads if fresh == FRESH)
    level = FRESH + 1
    while runs and runs[-1][0] <= level:  # a carry: the run before is of this level or less
        level, first = max(level, runs[-1][0]) + 1, runs.pop()[1]
    every, marks = array("I"), array("I")
    for (data,) in db.execute("SELECT data FROM postings WHERE place BETWEEN ? AND ?",
                              (place(term, first), place(term, end - 1))):
        held, described = _decode(data)
        every.extend(held)
        marks.extend(described)
    db.execute("DELETE FROM heads WHERE term=? AND block >= ?", (term, first))
    db.execute("DELETE FROM postings WHERE place BETWEEN ? AND ?",
               (place(term, first), place(term, end - 1)))
    _write_order(db, term, first, level, every, marks, _impact_order(marks, context, avgdl),
                 context, avgdl)


# -- querying ------------------------------------------------------------------------------------
Accept = Callable[[str, str, int, str], bool]  # (key, rel, number, coordinate) -> kept


class _List:
    """One query term's blocks, best bound first. Its heads are read only when the top-k
    first reads the term (``Search._load``): until then every posting of it is bounded by
    BM25's supremum at its weight. A word in most rounds (an idf at its floor) holds
    hundreds of blocks (two thirds of the heads a query read at a million records) and is
    seldom read at all."""

    def __init__(self, term: int, weight: float, postings: int) -> None:
        self.term, self.weight = term, weight
        self.postings = postings  # how many it holds: the most a query reads of it
        self.bounds: list[tuple[float, int, int]] | None = None  # None: heads not read yet
        self.at = 0

    def load(self, bounds: list[tuple[float, int, int]]) -> None:
        self.bounds = sorted(bounds, reverse=True)

    @property
    def next_size(self) -> int:
        bounds = self.bounds
        return bounds[self.at][2] if bounds is not None and self.at < len(bounds) else 0

    @property
    def left(self) -> float:
        """The most an unread posting of this term can give."""
        bounds = self.bounds
        if bounds is None:
            return self.weight * (K1 + 1.0) * (1 + MARGIN)
        return bounds[self.at][0] if self.at < len(bounds) else 0.0


def top(db: sqlite3.Connection, terms: Sequence[str], k: int, context: float,
        accept: Accept | None) -> list[tuple[int, float]]:
    """The ``k`` best (row, score) of the rounds ``accept`` keeps (None: every round held),
    best first (ties by row): those ``bm25(terms, 1.0, context)`` ranks first over every
    round holding a term (in its own words only when ``context`` is 0)."""
    search = searching(db, terms, k, context, accept)
    return search.run() if search is not None else []


def searching(db: sqlite3.Connection, terms: Sequence[str], k: int, context: float,
              accept: Accept | None, kind: Callable[..., Search] | None = None
              ) -> Search | None:
    """``top``'s search made ready (None: nothing can be found): the query terms' weights and
    lists, the rounds' average length. ``kind`` makes it from ``Search``'s arguments (the
    server's top-k on arrays, ``osk.search.round_arrays``, picks its own or this one)."""
    size, total = db.execute("SELECT rounds, size FROM totals").fetchone()
    if not size or k <= 0 or not terms:
        return None
    avgdl = total / size
    column = "any" if context else "body"
    found: dict[str, tuple[int, int, int]] = {}
    dead = False  # whether a query term holds a removed round's postings
    for term, ident, df, held, live in db.execute(
            f"SELECT term, id, {column}, postings, any FROM vocab WHERE term IN "
            f"({','.join('?' * len(terms))})", list(terms)):
        found[term] = ident, df, held
        dead = dead or held > live  # a live round holds one posting of each term it holds
    weights = [(term, idf(size, found[term][1])) for term in terms
               if term in found and found[term][1] > 0]
    if not weights:
        return None
    idents = [found[term][0] for term, _ in weights]
    lists = [_List(found[term][0], weight, found[term][2]) for term, weight in weights]
    kept = _kept(context, avgdl)
    return (kind or Search)(db, weights, idents, lists, k, context, avgdl, accept,
                             accept is not None or dead, kept)


class Search:
    """One query's top-k. Postings are read a block at a time, from the term with the most
    left to give; each adds what its term gives a round (exact from its descriptor, but
    summed in another order: a lower bound within ``MARGIN``) to the round's sum. A round
    can reach at most its sum plus what the terms not yet read for it could still give.
    Once what no round read could reach is below the k-th sum of rounds ``accept`` keeps,
    only the rounds that could reach it (few) are scored whole from their forward lists.

    From then on no round not read can reach it, and a round that could not stays so (its
    bound only falls, the k-th only rises): a block read then adds to the rounds that still
    could only (``alive``, picked from the block in C, the rest of it skipped). How many of
    them still could is then counted by a bisection in each group of them by the terms read
    (``_count``), not by a pass over them all: they are listed only to be scored.
    The k-th sum is looked for among the rounds at or above it when last found and those a
    block has raised to it since (``hot``), not among every round read. Whether a round is
    kept is asked of its row only when ``accept`` may refuse it or a query term holds a
    removed round's postings (``asks``), a batch of rows to a statement."""

    def __init__(self, db: sqlite3.Connection, weights: list[tuple[str, float]],
                 idents: list[int], lists: list[_List], k: int, context: float, avgdl: float,
                 accept: Accept | None, asks: bool, kept: _Kept) -> None:
        self.db, self.lists, self.k = db, lists, k
        self.idents = idents  # each weighted term's vocabulary id
        self.weights = [weight for _, weight in weights]  # and its weight, in the same order
        self.context, self.avgdl, self.accept = context, avgdl, accept
        self.sums: dict[int, float] = {}  # row -> what the terms read for it give
        self.read: dict[int, int] = {}  # row -> the terms read for it (a bit each)
        self.unsure: dict[int, float] = {}  # row -> the most its capped postings give
        self.kept: dict[int, bool] = {}  # row -> whether ``accept`` keeps it (and it is held)
        self.asks = asks  # whether a round's row is asked for (else every round read is kept)
        self.most = 0.0  # the largest sum
        self.kth = -math.inf  # the k-th largest sum of rounds kept, when last found
        self.hot: list[int] = []  # every round with a sum not below it (and some below)
        # Once what is unread is below the k-th, the rounds that could still reach it: no
        # other round can, so a block read from then on adds to these only.
        self.alive: set[int] | None = None
        # The rounds of ``alive`` by the terms read for them (a mask each), each group's sums
        # in ascending order, as they were when ``alive`` was made: how many still reach is
        # counted by a bisection a group (``_count``), not by a pass over every round.
        self.groups: list[tuple[int, list[float], list[int]]] = []
        self.origin: dict[int, tuple[float, int]] = {}  # row -> (sum, mask) then, if read since
        self.exact: dict[int, float] = {}  # row -> its score, of rounds scored whole
        self.gains = kept.postings  # desc -> what a posting gives before the idf
        self.reaches = kept.heads  # desc -> a block's most before the idf

    def run(self) -> list[tuple[int, float]]:
        lists = self.lists
        threshold = -math.inf  # the k-th sum when last looked at: it only rises
        gap = 0.0  # how far the unread fell below it when the rounds were counted
        budget: int | None = None  # postings still worth reading instead of scoring
        while True:
            left, unread, i = self._turn()
            if i < 0:
                return self._finish(self._reaching(left, self._threshold()))
            if threshold <= unread < self.most:  # only then can a sum be above all unread
                threshold = self._threshold()
            spent = budget is not None and lists[i].next_size > budget
            if unread < threshold and (threshold - unread > gap * WIDER or spent):
                # the rounds that could reach it are counted again once the gap widened
                gap = threshold - unread
                threshold = self._threshold()
                # once alive, they are listed only when few enough to be scored
                if self.alive is None or spent or self._count(left, threshold) <= max(
                        self.k, FEW):
                    reaching = self._reaching(left, threshold)
                    if len(reaching) <= max(self.k, FEW) or spent:
                        return self._finish(reaching)
                    self._keep_alive(reaching)
                    if budget is None:  # read on while it costs less than scoring them
                        budget = len(reaching) * POSTINGS_A_ROUND
            if budget is not None:
                budget -= lists[i].next_size
            self._take(i)

    def _turn(self) -> tuple[list[float], float, int]:
        """What each term could still give, their sum, and the term with the most (-1: none
        has any left); its heads are read first, so a term is read from its best block."""
        lists = self.lists
        while True:
            left = [lst.left for lst in lists]
            unread = sum(left)
            if not unread:
                return left, unread, -1
            i = max(range(len(lists)), key=left.__getitem__)
            if lists[i].bounds is not None:
                return left, unread, i
            self._load(lists[i])

    def _load(self, lst: _List) -> None:
        """Read a term's heads: each block's bound, the lesser of what its largest counts
        and shortest length could give (``reach``) and what its best posting gave when it
        was written, at the average length of now (``drifted``; at a context weight not
        above that of then), at the term's weight."""
        reaches, context, avgdl, weight = self.reaches, self.context, self.avgdl, lst.weight
        bounds = []
        for block, many, fb, fc, least, top, then, weighed in self.db.execute(
                "SELECT block, size, fb, fc, least, top, avgdl, context FROM heads "
                "WHERE term=?", (lst.term,)):
            desc = (fb << 24) | (fc << 16) | least
            most = reaches.get(desc)
            if most is None:
                most = reach(desc, context, avgdl)
                if len(reaches) < GAINS_KEPT:
                    reaches[desc] = most
            if top < most and context <= weighed:
                most = min(most, drifted(top, then, avgdl))
            bounds.append((weight * most * (1 + MARGIN), block, many))
        lst.load(bounds)

    def _take(self, i: int) -> None:
        """Read the next block of term ``i`` (its heads read: ``_load``)."""
        lst = self.lists[i]
        assert lst.bounds is not None
        _, block, _ = lst.bounds[lst.at]
        lst.at += 1
        (data,) = self.db.execute("SELECT data FROM postings WHERE place=?",
                                  (place(lst.term, block),)).fetchone()
        rows, descs = _decode(data)
        pairs: Iterable[tuple[int, int]] = zip(rows, descs, strict=True)
        if self.alive is not None:  # found in C: the rounds of the block that could reach
            chosen = list(map(self.alive.__contains__, rows))
            if not any(chosen):
                return
            pairs = list(zip(compress(rows, chosen), compress(descs, chosen), strict=True))
            origin, sums, read = self.origin, self.sums, self.read
            for row, _ in pairs:  # each touched round's state when the groups were made
                if row not in origin:
                    origin[row] = (sums.get(row, 0.0), read.get(row, 0))
        context, avgdl, weight, bit = self.context, self.avgdl, lst.weight, 1 << i
        gains = self.gains
        sums, read, unsure = self.sums, self.read, self.unsure
        most, hot = self.most, self.hot.append
        cut = self.kth if self.kth > -math.inf else math.inf  # none before a k-th is found
        for row, desc in pairs:
            value = gains.get(desc, -1.0)
            if value == -1.0:
                value = _gain(desc, context, avgdl)
                if len(gains) < GAINS_KEPT:
                    gains[desc] = value
            if value is None:  # a capped count or length: at most the supremum
                unsure[row] = unsure.get(row, 0.0) + weight * (K1 + 1.0) * (1 + MARGIN)
                value = 0.0
            elif not value:
                continue  # only in its neighbours' words, asked in a round's own
            total = sums.get(row, 0.0) + weight * value
            sums[row] = total
            read[row] = read.get(row, 0) | bit
            if total >= cut:
                hot(row)
            if total > most:
                most = total
        self.most = most

    def _know(self, rows: Collection[int]) -> None:
        """Find whether ``accept`` keeps each of ``rows`` not known yet (a row gone, a dead
        posting's, is not kept), in as few statements as there are ``MARKS`` of them. With
        nothing to refuse, a round is kept when it is held: its forward list is read for
        that, and it is scored whole at once (``exact``), so the list's page is read once."""
        kept, accept = self.kept, self.accept
        unknown = [row for row in rows if row not in kept]
        if not self.asks:
            kept.update(dict.fromkeys(unknown, True))
            return
        if accept is None:
            kept.update(dict.fromkeys(unknown, False))
            self._score(unknown)
            kept.update(dict.fromkeys(self.exact.keys() & unknown, True))
            return
        self._ask(unknown, accept)

    def _ask(self, rows: list[int], accept: Accept) -> None:
        """Whether ``accept`` keeps each of ``rows``, asked of their rows in ``rounds`` (a row
        gone is not kept), as few statements as there are ``MARKS`` of them."""
        kept = self.kept
        for at in range(0, len(rows), MARKS):
            chunk = rows[at:at + MARKS]
            kept.update(dict.fromkeys(chunk, False))
            for row, *found in self.db.execute(
                    "SELECT row, key, rel, number, coordinate FROM rounds WHERE row IN "
                    f"({','.join('?' * len(chunk))})", chunk):
                kept[row] = accept(*found)

    def _score(self, rows: list[int]) -> None:
        """Score whole those of ``rows`` not scored yet (``exact``; a row gone has no forward
        list, so none)."""
        exact, whole = self.exact, self._whole
        new = [row for row in rows if row not in exact]
        for at in range(0, len(new), MARKS):
            chunk = new[at:at + MARKS]
            exact.update((row, whole(data)) for row, data in self.db.execute(
                f"SELECT row, data FROM forward WHERE row IN ({','.join('?' * len(chunk))})",
                chunk))

    def _threshold(self) -> float:
        """The k-th largest sum of rounds kept (lowered by ``MARGIN``), -inf if fewer. Sums
        only grow, so only those not below the last k-th are looked at: those found so when
        last looked and those a block has raised to it since (``hot``)."""
        sums, want, last = self.sums, self.k, self.kth
        if last == -math.inf:
            pool = list(sums)
        else:
            hot = set(self.hot)
            pool = list(compress(hot, map(last.__le__, map(sums.__getitem__, hot))))
        for many in (4 * want, len(pool)):
            found = self._kth_of(heapq.nlargest(many, pool, key=sums.__getitem__),
                                 sums.__getitem__)
            if found is not None:
                self.hot = pool
                return found
            if many >= len(pool):
                break
        return -math.inf

    def _kth_of(self, best: list[int], sum_of: Callable[[int], float]) -> float | None:
        """The k-th sum (``sum_of``) of the rounds of ``best`` (in falling sums) that
        ``accept`` keeps, raised to the k-th score of those scored whole and lowered by
        ``MARGIN``; None while fewer are kept."""
        want = self.k
        self._know(best)
        kept = [row for row in best if self.kept[row]]
        if len(kept) < want:
            return None
        self.kth = sum_of(kept[want - 1])
        if len(self.exact) >= want:  # rounds kept, scored whole: a k-th at least
            return max(self.kth, heapq.nlargest(want, self.exact.values())[-1]) * (1 - MARGIN)
        return self.kth * (1 - MARGIN)

    def _above(self, least: float) -> list[int]:
        """The rounds whose sum is not below ``least``, filtered in C: no loop in Python."""
        sums = self.sums
        return list(compress(sums, map(least.__le__, sums.values())))

    def _reaching(self, left: list[float], threshold: float) -> list[int]:
        """The rounds read whose sum and what their unread terms could give is not below
        ``threshold``: among those whose sum and all that is unread reach it, what the terms
        not read for a round could give is worked out once per set of terms read (a mask),
        so the rounds are filtered in C (``compress``), not in a loop in Python. Once
        ``alive`` is known, they are taken from its groups (``_grouped``)."""
        sums, read, unsure = self.sums, self.read, self.unsure
        floor = threshold / (1 + MARGIN)
        if self.alive is None:
            # the rounds that could still reach it are nearly all near it
            near = self._above(floor - sum(left))
            masks = list(map(read.__getitem__, near))
            rest = {mask: sum(v for j, v in enumerate(left) if not mask >> j & 1)
                    for mask in set(masks)}
            reaching = list(compress(near, map(floor.__le__, map(
                add, map(sums.__getitem__, near), map(rest.__getitem__, masks)))))
        else:
            reaching = self._grouped(left, floor, None)
        if unsure:  # few: a capped count or length, at most the supremum more
            chosen, alive = set(reaching), self.alive
            for row, most in unsure.items():
                if alive is not None and row not in alive:
                    continue
                mask = read.get(row, 0)
                more = sum(v for j, v in enumerate(left) if not mask >> j & 1)
                if row not in chosen and (
                        sums.get(row, 0.0) + more + most) * (1 + MARGIN) >= threshold:
                    reaching.append(row)
        return reaching

    def _keep_alive(self, reaching: list[int]) -> None:
        """From now on blocks add to ``reaching`` only. They are grouped by the terms read
        for them, each group in the order of their sums (those with capped postings left
        out: ``unsure`` is looked at whole), so those that could still reach a threshold are
        a tail of each group, found by bisection, not by a pass over them all: once alive, a
        query's rounds mostly stay so while the blocks that could drop them are read."""
        self.alive = set(reaching)
        sums, read, unsure = self.sums, self.read, self.unsure
        by_mask: dict[int, list[int]] = {}
        for row in reaching:
            if row not in unsure:
                by_mask.setdefault(read[row], []).append(row)
        self.groups = []
        for mask, rows in by_mask.items():
            rows.sort(key=sums.__getitem__)
            self.groups.append((mask, list(map(sums.__getitem__, rows)), rows))
        self.origin = {}

    def _grouped(self, left: list[float], floor: float, count: list[int] | None
                 ) -> list[int]:
        """The rounds of ``alive`` (none with capped postings) whose sum and what their
        unread terms could give may reach ``floor`` (a few at the bound more, never fewer).
        A round not read since the groups were made is in its group's tail; one read since
        (``origin``) is taken out of it and looked at as it is now. With ``count`` given,
        only how many is found (added to it), none listed."""
        sums, read, unsure, origin = self.sums, self.read, self.unsure, self.origin
        rests: dict[int, tuple[float, float]] = {}

        def rest(mask: int) -> tuple[float, float]:
            """What the terms not read for a round of ``mask`` could give, and the sum such
            a round needs to reach ``floor`` (lowered a little: a superset, never fewer)."""
            found = rests.get(mask)
            if found is None:
                more = sum(v for j, v in enumerate(left) if not mask >> j & 1)
                found = rests[mask] = more, floor - more - (abs(floor) + more) * SLACK
            return found

        cuts = [(rows, bisect_left(found, rest(mask)[1])) for mask, found, rows in self.groups]
        now = [row for row in origin
               if row not in unsure and sums[row] + rest(read[row])[0] >= floor]
        if count is not None:
            stale = sum(was >= rest(mask)[1] for row, (was, mask) in origin.items()
                        if row not in unsure)
            count[0] += sum(len(rows) - at for rows, at in cuts) - stale + len(now)
            return []
        reaching = list(chain.from_iterable(rows[at:] for rows, at in cuts))
        if origin:
            reaching = list(filterfalse(origin.__contains__, reaching))
        reaching.extend(now)
        return reaching

    def _count(self, left: list[float], threshold: float) -> int:
        """How many of ``alive`` could still reach ``threshold`` (at least as many as
        ``_reaching`` finds): each group's tail and those read since, those with capped
        postings all counted."""
        count = [len(self.unsure)]
        self._grouped(left, threshold / (1 + MARGIN), count)
        return count[0]

    def _most(self, rows: list[int]) -> dict[int, float]:
        """The most each of ``rows`` could score: its sum, what the terms not read for it could
        still give and what its capped postings could (each raised by ``MARGIN`` once more,
        for the sums' order)."""
        sums, read, unsure = self.sums, self.read, self.unsure
        left = [lst.left for lst in self.lists]
        masks = [read.get(row, 0) for row in rows]
        rest = {mask: sum(v for j, v in enumerate(left) if not mask >> j & 1)
                for mask in set(masks)}
        return {row: (sums.get(row, 0.0) + rest[mask] + unsure.get(row, 0.0)) * (1 + MARGIN)
                for row, mask in zip(rows, masks, strict=True)}

    def _finish(self, rows: list[int]) -> list[tuple[int, float]]:
        """Score ``rows`` whole from their forward lists, the one that could reach the most
        first, until the next could not reach the k-th score of those ``accept`` keeps (ties
        by row, so one that could reach it exactly is scored): the best k it keeps. A row
        gone (a dead posting's) gives nothing."""
        most = self._most(rows)
        order = sorted(rows, key=most.__getitem__, reverse=True)
        best: list[tuple[float, int]] = []  # the k best (score, -row) kept, a heap: worst first
        k, kept, exact = self.k, self.kept, self.exact
        at = 0
        while at < len(order):
            chunk = order[at:at + self._chunk(at)]
            at += len(chunk)
            if len(best) == k and most[chunk[0]] < best[0][0]:
                break
            self._know(chunk)
            self._score([row for row in chunk if kept[row]])
            for row in chunk:
                if len(best) == k and most[row] < best[0][0]:
                    break  # in order: no later row could either
                value = exact.get(row) if kept[row] else None
                if value is None:
                    continue
                item = (value, -row)
                if len(best) < k:
                    heapq.heappush(best, item)
                elif item > best[0]:
                    heapq.heapreplace(best, item)
        return [(-row, value) for value, row in sorted(best, reverse=True)]

    def _chunk(self, at: int) -> int:
        """How many rounds ``_finish`` scores in one statement from the ``at``-th on."""
        return FINISH_CHUNK

    def _whole(self, data: bytes) -> float:
        """A round's score from its forward list, summed as FTS5 sums it: per query term in
        order (its idf, its counts in the round's own words and its neighbours'), 1.0 an
        occurrence in its own words, then ``context`` for each among its neighbours'; the
        round's length counts both."""
        length, many, held, counts = _unpacked(data)
        total, context, avgdl = 0.0, self.context, self.avgdl
        for ident, weight in zip(self.idents, self.weights, strict=True):
            at = bisect_left(held, ident)
            if at < many and held[at] == ident:
                f = float(counts[at])
                if context:
                    for _ in range(counts[many + at]):
                        f += context
                if f:
                    total += weight * gain(f, length, avgdl)
        return total


def _gain(desc: int, context: float, avgdl: float) -> float | None:
    """What a posting gives its round before the idf (None: a capped count or length,
    unknown)."""
    own, around, length = desc >> 24, (desc >> 16) & 0xFF, desc & 0xFFFF
    if own >= CAPPED or (context and around >= CAPPED) or length >= LONGEST:
        return None
    f = own + context * around
    return gain(f, length, avgdl) if f else 0.0


class _Kept:
    """What a descriptor gives before the idf, for one context weight and average length:
    a posting's (``_gain``) and a block's most (``reach`` of its head). Kept between queries
    (a long-running process asks the same ones again; a block's descriptors are mostly new to
    it, and a term appended to has hundreds of blocks) until either moves (a round added
    moves the average length); at most ``GAINS_KEPT`` of each."""

    def __init__(self) -> None:
        self.postings: dict[int, float | None] = {}
        self.heads: dict[int, float] = {}


_KEPT: dict[tuple[float, float], _Kept] = {}
GAINS_KEPT = 1 << 16


def _kept(context: float, avgdl: float) -> _Kept:
    """What is kept for ``context`` and ``avgdl`` (anything kept for others is dropped)."""
    found = _KEPT.get((context, avgdl))
    if found is None:
        _KEPT.clear()
        found = _KEPT[(context, avgdl)] = _Kept()
    return found
