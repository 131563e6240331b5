"""The round index's top-k on arrays, for a long-running process (the MCP server's engine): the
same rounds, the same scores to the bit and the same order (ties by row) as
``round_postings.top``, with the postings summed by numpy instead of a loop in Python.

At a million records a query's content words sit in a fixed share of the rounds, so proving
its ten best reads tens of thousands of postings and sums thousands of rounds: in Python that
is most of the query (about 140 ns a posting, then passes over every round read). Here the
blocks are read in the pure top-k's order (the term with the most left to give first), several
to a statement in batches that double; each posting's gain is computed from its descriptor
over the whole batch and added into a slot per round row (``_Rows``: what the terms read give
the round, which terms were read for it). The k-th sum is found by a partition of the sums.
Once what is unread cannot reach it, the rounds read that still could (their sum and what the
terms not read for them could give) are narrowed by reading the rest of a term whole, for them
only, while that costs less than scoring whole the rounds it rules out; the rest are scored
whole from their forward lists by the pure top-k's own ``_finish`` (a score is FTS5's sum, in
its order), the best k first, then a few at a time while they could still reach the k-th.
A query whose terms hold a few hundred postings at most (``SMALL``: a rare word's rounds) or
more terms than a round's slot marks takes the pure top-k: the arrays' fixed costs would
weigh more there than the loop they save. One whose terms hold at most ``EVERY`` postings in
all (at 100,000 records, as many as a third of the rounds) reads them all, a statement a term,
and sums each round's score from them in the order its forward list would (``_Every``): fewer
statements and steps than the bounds take to prove what need not be read.

The bounds are the pure top-k's (a block's most, raised by ``MARGIN``) and a round is left
out only when it cannot reach the k-th, so the rounds scored whole hold every round that
ranks, and the result is the same (``tests/search/test_search_round_arrays.py``). numpy is
loaded by the server anyway (the semantic channel's vectors), never by a hook:
``osk.search.rounds`` imports this module only for a watched index.
"""

from __future__ import annotations

import math
import sqlite3
import threading
from collections.abc import Sequence
from itertools import combinations
from typing import Any

import numpy as np
import numpy.typing as npt

from osk.search.round_postings import (
    BLOCK,
    CAPPED,
    K1,
    LONGEST,
    MARGIN,
    MARKS,
    PLACES,
    Accept,
    B,
    Search,
    place,
    searching,
    term_places,
)

Rows = npt.NDArray[np.int64]
# A round's terms read are bits of a 16-bit slot: a query of more weighted terms (rare: a
# question is a handful of words) takes the pure top-k.
TERMS = 16
# A query whose terms hold fewer postings than this in all (a rare word's few rounds) takes
# the pure top-k: below it the loop costs a little less than the arrays' fixed costs. Above
# it the arrays cost less at 10,000 records as at a million, query by query, the single rare
# words of a million records' 4,000-24,000 postings by 2-5x (docs/performance.md).
SMALL = 256
# A query whose terms hold at most this many postings in all reads every one of them and
# scores each round from them (``_Every``): no block's bound, no forward list. At an agent's
# pace (bench/round_every_ab.py), at 100,000 records its top-k cost about half the top-k by
# bounds up to 8,192 postings and less up to 32,768, and more above (3.0 against 2.3 ms from
# 32,768 to 49,151); at 10,000 records less at every size asked: docs/performance.md.
EVERY = 32_768
MASKED = 8  # up to this many terms, what the terms unread give a round is looked up by mask
ASKED = 2  # rounds beyond k first asked whether kept, when looking for the k-th
FIRST = 1024  # postings read in the first batch; a batch doubles up to BATCH
BATCH = 4096
# Once nothing unread can reach the k-th, a term's rest is read whole while the rounds it
# rules out would cost more to score whole than it costs to read: a round scored whole costs
# about POSTINGS_A_ROUND postings read, a statement POSTINGS_A_STATEMENT.
POSTINGS_A_ROUND = 256
POSTINGS_A_STATEMENT = 1024
SETS = 4  # up to this many terms left, every set of them is weighed for reading whole
# Rounds whose forward lists are read in one statement when scoring them whole: the best k
# first, then this many at a time while they could still reach the k-th score found.
FINISH_CHUNK = 8


class _Rows:
    """A slot per round row, kept for the process and taken by one query at a time (``lock``;
    another query meanwhile takes the pure top-k): what the terms read give the round
    (``sums``), which terms were read for it (``masks``, a bit each), whether it can still
    reach the k-th (``alive``) and what its capped postings could give (``unsure``, made the
    first time a query reads one). A query sets back to zero the slots it touched."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sums = np.zeros(0, np.float64)
        self.masks = np.zeros(0, np.uint16)
        self.alive = np.zeros(0, np.bool_)
        self.unsure: npt.NDArray[np.float64] | None = None

    def fit(self, largest: int) -> None:
        """Room for row ``largest`` (what is held is kept: a query may be under way)."""
        if largest < len(self.sums):
            return
        size = max(largest + 1, len(self.sums) * 5 // 4)
        self.sums = _grown(self.sums, size)
        self.masks = _grown(self.masks, size)
        self.alive = _grown(self.alive, size)
        if self.unsure is not None:
            self.unsure = _grown(self.unsure, size)


def _grown(held: npt.NDArray[Any], size: int) -> npt.NDArray[Any]:
    grown = np.zeros(size, held.dtype)
    grown[:len(held)] = held
    return grown


_ROWS = _Rows()


def _gathered(slots: _Rows, name: str, rows: Rows) -> npt.NDArray[Any]:
    """``slots``' array ``name`` at ``rows``, the slots grown first if a row is beyond them
    (numpy checks every index anyway: no pass of ours for the largest)."""
    try:
        return getattr(slots, name)[rows]  # type: ignore[no-any-return]
    except IndexError:
        slots.fit(int(rows.max()))
        return getattr(slots, name)[rows]  # type: ignore[no-any-return]


_COUNTED: dict[float, npt.NDArray[np.float64]] = {}


def _counted(context: float) -> npt.NDArray[np.float64]:
    """A posting's weighted count by its descriptor's top 16 bits, NaN for a capped count,
    worked out as a round's score works it out (``Search._whole``: its count in its own
    words, then ``context`` added once for each in its neighbours', the same double): the
    same for every query at a context weight (two are asked), so a table is built once, not
    worked out a posting at a time."""
    found = _COUNTED.get(context)
    if found is None:
        table = np.empty((256, 256), np.float64)  # [own, around]: the descriptor's bits
        count = np.arange(256, dtype=np.float64)
        for around in range(256):
            table[:, around] = count
            if context:
                count = count + context
        table[CAPPED:, :] = np.nan
        if context:
            table[:, CAPPED:] = np.nan
        found = table.reshape(-1)
        if len(_COUNTED) >= 4:  # a weight asked once (a test's) does not stay
            _COUNTED.clear()
        _COUNTED[context] = found
    return found


def _gains(f: npt.NDArray[np.float64], length: npt.NDArray[Any], avgdl: float,
           weight: float) -> npt.NDArray[np.float64]:
    """What postings of weighted counts ``f`` in rounds of ``length`` give at a term's
    ``weight``: ``weight * round_postings.gain(f, length, avgdl)`` worked out operation by
    operation in its order, so each is the double a round's score adds."""
    part = length * B
    part /= avgdl
    part += 1 - B
    part *= K1
    part += f
    gains = f * (K1 + 1.0)
    gains /= part
    gains *= weight
    return gains


def _capped(f: npt.NDArray[np.float64], length: npt.NDArray[Any]
            ) -> npt.NDArray[np.bool_] | None:
    """Which postings hold a capped count (NaN in ``f``, ``_counted``) or length, whose gain
    only a forward list knows; None when none does (two reductions, no mask built)."""
    if len(f) and (math.isnan(f.max()) or length.max() >= LONGEST):
        return np.isnan(f) | (length >= LONGEST)
    return None


def _decoded(blobs: list[bytes]) -> tuple[Rows, npt.NDArray[np.uint32]]:
    """The rows and descriptors of a term's blocks (each block its rows, then as many
    descriptors)."""
    views = [(memoryview(data), len(data) // 2) for data in blobs]  # slices without copies
    rows = np.frombuffer(b"".join(view[:half] for view, half in views), np.uint32)
    descs = np.frombuffer(b"".join(view[half:] for view, half in views), np.uint32)
    return rows.astype(np.intp), descs


def top(db: sqlite3.Connection, terms: Sequence[str], k: int, context: float,
        accept: Accept | None) -> list[tuple[int, float]]:
    """``round_postings.top``, summed on arrays (the same result). A query while another
    holds the rows' slots (another thread) takes the pure top-k."""
    if not _ROWS.lock.acquire(blocking=False):
        search = searching(db, terms, k, context, accept)
        return search.run() if search is not None else []
    try:
        search = searching(db, terms, k, context, accept, _kind)
        return search.run() if search is not None else []
    finally:
        _ROWS.lock.release()


def _kind(*args: Any) -> Search:
    """The search for ``Search``'s arguments: the pure one when the query's terms hold fewer
    than ``SMALL`` postings in all (numpy's fixed costs then weigh more than the loop it
    saves) or are more than a round's slot can mark; every posting read (``_Every``) when
    they hold at most ``EVERY``; else the top-k on arrays."""
    lists = args[3]
    held = sum(lst.postings for lst in lists)
    if len(lists) > TERMS or held < SMALL:
        return Search(*args)
    if held <= EVERY:
        return _Every(*args)
    return _Arrays(*args)


class _Arrays(Search):
    """One query's top-k on ``_ROWS``: ``Search``'s order of reading and bounds, its
    ``_know`` (whether ``accept`` keeps a round), ``_load`` (a term's heads) and ``_finish``
    (the last rounds scored whole); the sums, the k-th and the rounds that can still reach
    it on arrays."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.rows = _ROWS
        self.touched: list[Rows] = []  # the rows summed, each once (set back after)
        self.reaching: Rows | None = None  # once nothing unread can reach: those that can
        self.flagged: Rows | None = None  # the rows marked ``alive``
        self.capped = False  # whether a capped posting was read (``unsure`` then counts)
        self.terms = {lst.term: at for at, lst in enumerate(self.lists)}
        self.rests: dict[tuple[float, ...], npt.NDArray[np.float64]] = {}  # ``_rest``'s
        self.unread: npt.NDArray[np.float64] | None = None  # ``_rest``'s terms by mask

    def run(self) -> list[tuple[int, float]]:
        try:
            return self._run()
        finally:
            self._clear()

    def _run(self) -> list[tuple[int, float]]:
        threshold = -math.inf  # the k-th sum when last looked at: it only rises
        limit = FIRST
        while True:
            left, unread, i = self._turn()
            if i < 0:
                return self._finish(self._reach(left, self._threshold())[0].tolist())
            if threshold <= unread < self.most:  # only then can a sum be above all unread
                threshold = self._threshold()
            if unread < threshold:
                return self._narrow(threshold)
            # a batch ends where the k-th can next be worth looking at: below the largest sum
            # (none can be above all unread before), then below the k-th
            self._read(self._pick(threshold if unread < self.most else self.most, limit))
            limit = min(2 * limit, BATCH)

    def _narrow(self, threshold: float) -> list[tuple[int, float]]:
        """No round unread can reach ``threshold`` now: of the rounds read, those that still
        could are narrowed by reading the rest of some terms whole (for them only) while that
        costs less than scoring the rounds it would rule out, then scored whole."""
        lists = self.lists
        while True:
            left = [lst.left for lst in lists]
            reaching, most = self._reach(left, threshold)
            terms = self._worth_reading(reaching, most, left, threshold)
            if not terms:
                return self._finish(reaching.tolist())
            unloaded = [lists[j] for j in terms if lists[j].bounds is None]
            if unloaded:  # their heads first (what they could give may fall with them)
                for lst in unloaded:
                    self._load(lst)
                continue
            self._keep(reaching)
            picked = []
            for j in terms:
                lst = lists[j]
                assert lst.bounds is not None
                picked += [(j, block, size) for _, block, size in lst.bounds[lst.at:]]
                lst.at = len(lst.bounds)
            self._read(picked)
            threshold = max(threshold, self._threshold())

    def _worth_reading(self, reaching: Rows, most: npt.NDArray[np.float64], left: list[float],
                       threshold: float) -> tuple[int, ...]:
        """The terms whose rests, read whole, rule out the most rounds for what they cost
        (``POSTINGS_A_ROUND`` postings a round scored whole, ``POSTINGS_A_STATEMENT`` a
        statement), if any are worth it (else none): a round that does not hold them is ruled
        out once what they could still give is no longer counted for it. Sets of terms are
        weighed when no one term is: a rare word read whole leaves its rounds each able to
        reach the k-th with any two of the others, so no one of them rules any out (``SETS``:
        up to how many terms left every set is weighed; beyond, the cheapest ones together).
        A term whose heads are unread is returned alone as soon as they could be worth their
        statement (what it could give may fall with them); in a set, it costs all it holds.
        ``most``: what each of ``reaching`` could score (``_bounds``)."""
        if len(reaching) <= self.k:
            return ()
        masks = self.rows.masks[reaching]
        open_ = [j for j, value in enumerate(left) if value]
        cuts = {j: left[j] * (1 + MARGIN) * ((masks & np.uint16(1 << j)) == 0) for j in open_}

        def ruled_out(terms: tuple[int, ...]) -> int:
            """The rounds that could not reach once ``terms`` give nothing more unread."""
            cut = cuts[terms[0]]
            for j in terms[1:]:
                cut = cut + cuts[j]
            return len(reaching) - int(np.count_nonzero(most - cut >= threshold))

        ruled = len(reaching) * POSTINGS_A_ROUND  # what scoring all of them whole costs
        best = 0
        chosen: tuple[int, ...] = ()
        costs: dict[int, int] = {}
        for j in open_:
            gain = ruled_out((j,)) * POSTINGS_A_ROUND
            if gain - POSTINGS_A_STATEMENT <= best:
                continue
            if self.lists[j].bounds is None:  # its heads, one statement, may lower what it
                return (j,)  # could give
            costs[j] = self._cost(j)
            if gain - costs[j] > best:
                best, chosen = gain - costs[j], (j,)
        if chosen or len(open_) < 2:
            return chosen
        # no term alone is worth it: terms together may be (a statement each at least)
        costs = {j: costs[j] if j in costs else self._cost(j) for j in open_}
        for terms in _sets(sorted(open_, key=costs.__getitem__)):
            cost = sum(costs[j] for j in terms)
            if ruled - cost <= best:  # not worth it even if it ruled out every round
                continue
            worth = ruled_out(terms) * POSTINGS_A_ROUND - cost
            if worth > best:
                best, chosen = worth, terms
        return chosen

    def _cost(self, term: int) -> int:
        """What reading the rest of ``term`` costs, in postings (its heads first if unread:
        every posting it holds, in blocks of at least ``BLOCK``)."""
        lst = self.lists[term]
        if lst.bounds is None:
            return lst.postings + POSTINGS_A_STATEMENT * (2 + lst.postings // (BLOCK * MARKS))
        unread = lst.bounds[lst.at:]
        return sum(size for _, _, size in unread) + POSTINGS_A_STATEMENT * (
            1 + len(unread) // MARKS)

    def _pick(self, stop: float, limit: int) -> list[tuple[int, int, int]]:
        """The next blocks in the pure top-k's order (the term with the most left first), as
        (term, block, size), up to ``limit`` postings, or until what is unread falls below
        ``stop`` or a term's heads are to be read first; at least one."""
        lists = self.lists
        picked: list[tuple[int, int, int]] = []
        many = 0
        while True:
            left = [lst.left for lst in lists]
            i = max(range(len(lists)), key=left.__getitem__)
            lst = lists[i]
            if lst.bounds is None or not left[i] or (picked and many >= limit):
                return picked
            _, block, size = lst.bounds[lst.at]
            lst.at += 1
            picked.append((i, block, size))
            many += size
            if sum(left) - left[i] + lst.left < stop:
                return picked

    def _read(self, picked: list[tuple[int, int, int]]) -> None:
        """Read the ``picked`` blocks (a statement for up to ``MARKS``) and add each term's
        postings at once."""
        places = [place(self.lists[i].term, block) for i, block, _ in picked]
        found: dict[int, list[bytes]] = {}
        for at in range(0, len(places), MARKS):
            chunk = places[at:at + MARKS]
            for where, data in self.db.execute(
                    f"SELECT place, data FROM postings WHERE place IN "
                    f"({','.join('?' * len(chunk))})", chunk):
                found.setdefault(self.terms[where // PLACES], []).append(data)
        for i, blobs in found.items():
            self._add(i, *_decoded(blobs))

    def _add(self, i: int, read: Rows, descs: npt.NDArray[np.uint32]) -> None:
        """Add what term ``i`` gives each of the rows ``read`` (``_gain`` of its descriptor at the
        term's weight; a capped one counts its most in ``unsure``), to the rounds that can
        still reach only once those are known. A term holds one posting a round, so a row is
        once in ``read``."""
        if not len(read):
            return
        slots = self.rows
        rows = read
        if self.reaching is not None:
            wanted = _gathered(slots, "alive", rows)
            rows, descs = rows[wanted], descs[wanted]
            if not len(rows):
                return
        masks = _gathered(slots, "masks", rows)  # the slots grown to hold them first
        weight = self.lists[i].weight
        f = _counted(self.context)[descs >> 16]  # NaN where capped
        length = descs & 0xFFFF
        gains = _gains(f, length, self.avgdl, weight)
        chosen = None if self.context else f > 0  # a neighbour's word alone gives nothing then
        capped = _capped(f, length)
        if capped is not None:
            gains[capped] = 0.0
            if slots.unsure is None:
                slots.unsure = np.zeros(len(slots.sums), np.float64)
            slots.unsure[rows[capped]] += weight * (K1 + 1.0) * (1 + MARGIN)
            self.capped = True
            if chosen is not None:
                chosen |= capped
        if chosen is not None and not chosen.all():
            rows, gains, masks = rows[chosen], gains[chosen], masks[chosen]
        self.touched.append(rows[masks == 0])
        slots.masks[rows] = masks | np.uint16(1 << i)
        sums = slots.sums[rows]
        sums += gains
        slots.sums[rows] = sums
        if len(sums):
            self.most = max(self.most, float(sums.max()))

    def _pool(self) -> Rows:
        """The rounds that may reach: those still able to once known, else every round read."""
        if self.reaching is not None:
            return self.reaching
        if len(self.touched) != 1:
            self.touched = [np.concatenate(self.touched) if self.touched
                            else np.zeros(0, np.int64)]
        return self.touched[0]

    def _threshold(self) -> float:
        """The k-th largest sum of rounds kept (lowered by ``MARGIN``), -inf if fewer: the
        best k + ``ASKED`` rounds read asked whether kept (where a round's row is asked for,
        its forward list is read), then 4k, then all while too few are."""
        pool, want = self._pool(), self.k
        sums = self.rows.sums[pool]
        for many in (want + ASKED, 4 * want, len(pool)):
            if many < len(pool):
                at = np.argpartition(sums, len(pool) - many)[len(pool) - many:]
                at = at[np.argsort(-sums[at], kind="stable")]
            else:
                at = np.argsort(-sums, kind="stable")
            found = self._kth_of(pool[at].tolist(), lambda row: float(self.rows.sums[row]))
            if found is not None:
                return found
            if many >= len(pool):
                break
        return -math.inf

    def _bounds(self, rows: Rows, left: list[float]) -> npt.NDArray[np.float64]:
        """The most each of ``rows`` could score: its sum, what the terms not read for it
        could still give (worked out once per set of terms read, a mask, when the query's
        terms are few) and what its capped postings could, raised by ``MARGIN`` once more
        (the sums' order)."""
        slots = self.rows
        most = slots.sums.take(rows)
        masks = slots.masks.take(rows)
        if len(left) <= MASKED:
            most += self._rest(left).take(masks.astype(np.intp))
        else:
            for j, value in enumerate(left):
                if value:
                    most = most + value * ((masks & np.uint16(1 << j)) == 0)
        if self.capped:
            assert slots.unsure is not None
            most = most + slots.unsure[rows]
        return most * (1 + MARGIN)

    def _rest(self, left: list[float]) -> npt.NDArray[np.float64]:
        """What the terms not read for a round could still give, by its mask: a product of
        ``left`` and which terms each mask has not read (a few terms, so at most a few
        hundred masks; worked out once per query)."""
        key = tuple(left)
        found = self.rests.get(key)
        if found is None:
            if self.unread is None:
                masks = np.arange(1 << len(left))
                bits = np.arange(len(left))[:, np.newaxis]
                self.unread = ((masks >> bits) & 1 == 0).astype(np.float64)
            found = self.rests[key] = np.array(left, np.float64) @ self.unread
        return found

    def _reach(self, left: list[float], threshold: float
               ) -> tuple[Rows, npt.NDArray[np.float64]]:
        """The rounds read whose most (``_bounds``) is not below ``threshold``, and their
        most."""
        pool = self._pool()
        most = self._bounds(pool, left)
        able = most >= threshold
        return pool[able], most[able]

    def _keep(self, reaching: Rows) -> None:
        """From now on blocks add to ``reaching`` only."""
        alive = self.rows.alive
        if self.flagged is not None:
            alive[self.flagged] = False
        alive[reaching] = True
        self.reaching = self.flagged = reaching

    def _most(self, rows: list[int]) -> dict[int, float]:
        at = np.array(rows, np.int64)
        return dict(zip(rows, self._bounds(at, [lst.left for lst in self.lists]).tolist(),
                        strict=True))

    def _chunk(self, at: int) -> int:
        return self.k if not at else FINISH_CHUNK

    def _clear(self) -> None:
        """Set back the slots this query touched."""
        slots = self.rows
        if self.flagged is not None:
            slots.alive[self.flagged] = False
        if self.touched:
            touched = np.concatenate(self.touched)
            slots.sums[touched] = 0.0
            slots.masks[touched] = 0
            if self.capped:
                assert slots.unsure is not None
                slots.unsure[touched] = 0.0


def _held(key: str, rel: str, number: int, coordinate: str) -> bool:
    """Keeps every round still held (``Search._ask``: a row gone is not)."""
    return True


def _sets(terms: list[int]) -> list[tuple[int, ...]]:
    """The sets of two or more of ``terms`` (cheapest first) ``_Arrays._worth_reading``
    weighs once no term alone is worth reading: every one when they are at most ``SETS``,
    else each run of the cheapest."""
    if len(terms) <= SETS:
        return [chosen for size in range(2, len(terms) + 1)
                for chosen in combinations(terms, size)]
    return [tuple(terms[:size]) for size in range(2, len(terms) + 1)]


class _Every(Search):
    """One query's top-k from every posting of its terms (at most ``EVERY``), a statement a
    term. Each round's score is summed from its postings term by term in the query's order,
    each posting's part the double ``Search._whole`` adds (``_counted``, ``_gains``): the
    scores of the rounds scored whole from their forward lists, to the bit. Only a round with
    a capped posting (a count or length past what a posting holds) is scored from its forward
    list. No block's heads are read and no bound is kept: where the postings are few, reading
    them all cost less than the statements and steps that prove which need not be read."""

    def run(self) -> list[tuple[int, float]]:
        slots = _ROWS
        counts = _counted(self.context)
        scored: list[Rows] = []  # the rows given a score, each once (set back after)
        capped: list[Rows] = []
        try:
            for lst in self.lists:
                rows, descs = _decoded([data for (data,) in self.db.execute(
                    "SELECT data FROM postings WHERE place BETWEEN ? AND ?",
                    term_places(lst.term))])
                if not len(rows):
                    continue
                f = counts[descs >> 16]  # NaN where capped
                length = descs & 0xFFFF
                # two reductions when no posting is capped or gives nothing (NaN fails the first)
                if not (f.min() > 0.0 and length.max() < LONGEST):
                    given = f > 0  # a neighbour's word alone gives nothing at context 0
                    odd = _capped(f, length)
                    if odd is not None:
                        capped.append(rows[odd])
                        given &= ~odd
                    rows, f, length = rows[given], f[given], length[given]
                # every posting here gives more than 0 (a count above 0, a weight above 0), so
                # a round whose sum is still 0 is met for the first time: no mask kept
                sums = _gathered(slots, "sums", rows)
                scored.append(rows[sums == 0.0])
                sums += _gains(f, length, self.avgdl, lst.weight)
                slots.sums[rows] = sums
            if capped:
                self._score_whole(np.unique(np.concatenate(capped)), scored)
            if len(scored) > 1:
                scored[:] = [np.concatenate(scored)]
            rows = scored[0] if scored else np.zeros(0, np.intp)
            return self._best(rows, slots.sums[rows])
        finally:
            for rows in scored:
                slots.sums[rows] = 0.0

    def _score_whole(self, capped: Rows, scored: list[Rows]) -> None:
        """Give each round of a capped posting its score from its forward list instead (a row
        gone has none: it keeps what its other postings gave, and is not kept)."""
        self._score(capped.tolist())
        exact = self.exact
        held = [row for row in capped.tolist() if row in exact]
        if not held:
            return
        slots, rows = _ROWS, np.array(held, np.intp)
        scored.append(rows[_gathered(slots, "sums", rows) == 0.0])
        slots.sums[rows] = [exact[row] for row in held]

    def _best(self, rows: Rows, scores: npt.NDArray[np.float64]) -> list[tuple[int, float]]:
        """The ``k`` best of ``rows`` that are kept, best first, ties by row: the best k (and
        ``ASKED`` more when whether they are kept is asked) and every round tied with the
        last of them, then four times as many while too few are kept."""
        want = self.k
        many = want + ASKED if self.asks else want
        while True:
            if many < len(rows):
                at = np.argpartition(scores, len(rows) - many)[len(rows) - many:]
                at = np.flatnonzero(scores >= scores[at].min())
            else:
                at = np.arange(len(rows))
            order = at[np.lexsort((rows[at], -scores[at]))]
            best = list(zip(rows[order].tolist(), scores[order].tolist(), strict=True))
            if not self.asks:
                return best[:want]
            self._ask([row for row, _ in best if row not in self.kept],
                      self.accept or _held)
            kept = [(row, score) for row, score in best if self.kept[row]]
            if len(kept) >= want or len(at) == len(rows):
                return kept[:want]
            many *= 4
