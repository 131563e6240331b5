"""BM25 Okapi over an inverted index that changes one document at a time.

The scores are those of ``rank_bm25.BM25Okapi`` (k1 = 1.5, b = 0.75, epsilon = 0.25) on the
same token lists, including its idf floor: a term in more than half of the documents has a
negative raw idf, ``log(N - df + 0.5) - log(df + 0.5)``, and rank-bm25 replaces it with
``epsilon * average_idf``, where the average runs over the raw idf of every term in the corpus
(negative ones included). That average depends on N, so it cannot be kept as a running sum;
we keep a histogram of document frequencies (how many terms occur in exactly d documents) and
evaluate the average over its distinct d values, which are few (``IdfShares``: a change that
keeps N takes again only the values of the d it moved).

Documents are small integer slots. Postings live in two layers: the *base*, three flat arrays
loaded from disk as they are (no per-entry work at load time; each term's slots ascending, so a
posting is found by binary search), and an *overlay* of what changed since: the postings added
per term, and the slots whose base postings no longer count (a removed document's; its slot may
be taken again, its new postings then in the overlay). Adding or removing one document touches
only that document's terms, and only the overlay: nothing is rebuilt on one change, and no
term's base list is copied into a dict (a long-running server that wrote its common words into
notes held each such list again as a dict, some 60 bytes a posting: 456 -> 1,041 MB after 40
notes of 50 common words each at 100,000 nodes).
"""

from __future__ import annotations

import heapq
import math
import sys
from array import array
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import chain, repeat
from operator import add, mul, sub
from typing import TypeVar

K1 = 1.5
B = 0.75
EPSILON = 0.25

# A term with at least this many postings keeps its impact order in a long-lived index
# (``Bm25._impacts_of``). The order is made once (0.6 ms for 1,024 postings) and kept, while
# a list walked whole costs about 0.5 us a posting on every query that needs it: at 100,000
# nodes a warm search's median fell 0.3 ms from 4,096 (docs/performance.md), for 1,113
# ordered lists (8 bytes a posting, 49 MB were every one asked) against 291 (37 MB).
IMPACT_MIN = 1024
# Bounds on what terms can add are raised by this share: a document's score summed in another
# order may differ in its last bits, and a bound must never fall below a score.
MARGIN = 1e-9

Query = Iterable[str] | Mapping[str, float]
Pairs = Iterable[tuple[int, int]]
_T = TypeVar("_T")


class Bm25:
    """Postings ``term -> {slot: tf}``, document lengths, and BM25Okapi scoring."""

    KEEPS_IMPACTS = True  # long lists get an impact order on first need (``_impacts_of``)

    def __init__(self, k1: float = K1, b: float = B, epsilon: float = EPSILON) -> None:
        self.k1, self.b, self.epsilon = k1, b, epsilon
        self.lengths: dict[int, int] = {}
        self.total_length = 0
        self._added: dict[str, dict[int, int]] = {}  # postings added since the base, by term
        self._dead: set[int] = set()  # slots whose base postings no longer count (removed)
        self._dead_df: dict[str, int] = {}  # term -> how many of its base postings are dead
        self._base_index: dict[str, int] = {}
        self._base_terms: list[str] = []  # the base's vocabulary by number
        self._base_offsets = array("I", [0])
        self._base_slots = array("I")
        self._base_tfs = array("I")
        self._histogram: Counter[int] | None = None  # built on first need, then maintained
        self._average_idf: tuple[int, float] | None = None
        self._shares: IdfShares | None = None  # what average_idf summed last, kept
        self._moved_dfs: set[int] = set()  # dfs whose count moved since (add, remove)
        self._unwritten: set[int] | None = None  # ... since ``counts_moved`` (None: all)
        self._norms: dict[int, float] | None = None
        self._impacts: dict[str, _Impacts] = {}  # long lists in impact order (``top``)

    # -- loading and saving ------------------------------------------------------------------
    @classmethod
    def from_base(
        cls,
        terms: list[str],
        offsets: array[int],
        slots: array[int],
        tfs: array[int],
        lengths: dict[int, int],
        sorted_slots: bool = True,
    ) -> Bm25:
        """Adopt persisted arrays as the base layer; term ``i`` owns ``offsets[i]:offsets[i+1]``
        (``sorted_slots``: each term's slots ascending, as the recall file holds them; a bulk
        build's whose slots came out of order, ``Staged.index``, are put in order here, once)."""
        if len(offsets) != len(terms) + 1 or len(slots) != len(tfs):
            raise ValueError("postings arrays do not fit together")
        if offsets[0] != 0 or offsets[-1] != len(slots):
            raise ValueError("postings offsets do not cover the postings")
        index = cls()
        index._base_index = {term: i for i, term in enumerate(terms)}
        if len(index._base_index) != len(terms):
            raise ValueError("a term appears twice in the postings")
        index._base_terms = terms
        if not sorted_slots:
            slots, tfs = _ascending(offsets, slots, tfs)
        index._base_offsets, index._base_slots, index._base_tfs = offsets, slots, tfs
        index.lengths = lengths
        index.total_length = sum(lengths.values())
        return index

    def all_terms(self) -> Iterable[str]:
        """Every term with postings, each once (the recall file writes them all)."""
        yield from self._base_index
        for term in self._added:
            if term not in self._base_index:
                yield term

    # -- postings access ---------------------------------------------------------------------
    def df(self, term: str) -> int:
        i = self._base_index.get(term)
        base = 0 if i is None else self._base_offsets[i + 1] - self._base_offsets[i]
        added = self._added.get(term)
        return base - self._dead_df.get(term, 0) + (len(added) if added else 0)

    def pairs(self, term: str) -> Pairs:
        """(slot, tf) for every document holding ``term``: the base's live postings (slots
        ascending), then those added since."""
        i = self._base_index.get(term)
        base: Pairs = ()
        if i is not None:
            a, b = self._base_offsets[i], self._base_offsets[i + 1]
            base = zip(self._base_slots[a:b], self._base_tfs[a:b], strict=True)
            if self._dead_df.get(term):
                dead = self._dead
                base = ((slot, tf) for slot, tf in base if slot not in dead)
        added = self._added.get(term)
        return chain(base, added.items()) if added else base

    def columns(self, term: str) -> tuple[array[int], array[int]]:
        """The term's (slots ascending, their counts): slices of the base where nothing
        changed the term since (no pass in Python)."""
        i = self._base_index.get(term)
        if i is not None and term not in self._added and not self._dead_df.get(term):
            a, b = self._base_offsets[i], self._base_offsets[i + 1]
            return self._base_slots[a:b], self._base_tfs[a:b]
        pairs = sorted(self.pairs(term))
        return array("I", [slot for slot, _ in pairs]), array("I", [tf for _, tf in pairs])

    def tf(self, term: str, slot: int) -> int:
        """How often the document in ``slot`` holds ``term`` (0: not at all): the overlay's
        count, else a binary search of the term's base slots (no list is copied to ask)."""
        added = self._added.get(term)
        if added is not None:
            held = added.get(slot)
            if held is not None:
                return held
        if slot in self._dead:
            return 0
        i = self._base_index.get(term)
        if i is None:
            return 0
        end = self._base_offsets[i + 1]
        at = bisect_left(self._base_slots, slot, self._base_offsets[i], end)
        return self._base_tfs[at] if at < end and self._base_slots[at] == slot else 0

    def holds(self, term: str, slot: int) -> bool:
        """Whether ``term``'s postings hold ``slot``."""
        return self.tf(term, slot) > 0

    # -- changing ----------------------------------------------------------------------------
    def add(self, slot: int, frequencies: Mapping[str, int], length: int) -> None:
        """Index a document under a free slot."""
        if slot in self.lengths:
            raise KeyError(f"slot {slot} is already indexed; remove it first")
        histogram = self._histogram
        moved, unwritten = self._moved_dfs, self._unwritten
        for term, tf in frequencies.items():
            if histogram is not None:
                df = self.df(term)
                if df:
                    histogram[df] -= 1
                histogram[df + 1] += 1
                moved.update((df, df + 1))
                if unwritten is not None:
                    unwritten.update((df, df + 1))
            added = self._added.get(term)
            if added is None:
                added = self._added[term] = {}
            added[slot] = tf
            impacts = self._impacts.get(term)
            if impacts is not None:
                impacts.fresh.append(slot)
                if len(impacts.fresh) > max(64, self.df(term) // 8):  # ordered afresh if needed
                    del self._impacts[term]
        self.lengths[slot] = length
        self.total_length += length
        self._changed()

    def remove(self, slot: int, terms: Iterable[str]) -> None:
        """Drop a document; ``terms`` are its distinct terms (the caller keeps them)."""
        length = self.lengths.pop(slot, None)
        if length is None:
            return
        self.total_length -= length
        histogram = self._histogram
        moved, unwritten = self._moved_dfs, self._unwritten
        in_base = slot not in self._dead  # else its base postings are already dead
        for term in terms:
            df = self.df(term)
            added = self._added.get(term)
            if added is not None and slot in added:
                del added[slot]
                if not added:
                    del self._added[term]
            elif in_base and self.tf(term, slot):
                self._dead_df[term] = self._dead_df.get(term, 0) + 1
            else:
                continue
            if histogram is not None:
                histogram[df] -= 1
                if df > 1:
                    histogram[df - 1] += 1
                moved.update((df, df - 1))
                if unwritten is not None:
                    unwritten.update((df, df - 1))
        self._dead.add(slot)
        self._changed()

    def _changed(self) -> None:
        self._average_idf = None
        self._norms = None

    # -- statistics --------------------------------------------------------------------------
    @property
    def size(self) -> int:
        return len(self.lengths)

    def average_idf(self) -> float:
        """Mean raw idf over all terms, as rank-bm25 computes it for its epsilon floor."""
        n = self.size
        cached = self._average_idf
        if cached is not None and cached[0] == n:
            return cached[1]
        value = self._idf_shares(n).mean()
        self._average_idf = (n, value)
        return value

    def df_counts(self) -> Counter[int]:
        """How many terms occur in exactly d documents, by d (what ``average_idf`` sums):
        counted once over every term, then kept through each change."""
        histogram = self._histogram
        if histogram is None:
            histogram = self._histogram = Counter(self.df(term) for term in self.all_terms())
            histogram.pop(0, None)
            self._unwritten = None
        return histogram

    def counts_moved(self) -> tuple[Counter[int], set[int] | None]:
        """The counts of dfs (``df_counts``) and the dfs whose count moved since the last
        call (None: not known, the counts were counted afresh since): what the recall file's
        table of them takes with a write (``recallfile.RecallWriter.mirror``)."""
        histogram = self.df_counts()
        moved, self._unwritten = self._unwritten, set()
        return histogram, moved

    def adopt_counts(self, histogram: Counter[int]) -> None:
        """Take the counts of dfs of exactly these documents (the recall file's, which holds
        them): a pass over every term saved (``df_counts``), and the next ``counts_moved``
        names only the dfs moved from here."""
        histogram.pop(0, None)
        self._histogram, self._unwritten = histogram, set()
        self._shares, self._moved_dfs, self._average_idf = None, set(), None

    def _idf_shares(self, n: int) -> IdfShares:
        """What ``average_idf`` sums, kept: a search with a floored word after each write
        asks the mean, and a sum over every distinct df cost 0.5 ms at 100,000 nodes (1,900
        of them). A change that keeps the number of documents (an update) takes again only
        the parts of the dfs it moved (``add`` and ``remove`` name them); a create or a
        removal, which moves N, takes them all again, in one pass in C (``mean_idf`` is the
        same sum made once)."""
        if self._histogram is None or self._shares is None:
            self._shares = IdfShares()
        self._shares.take(n, self.df_counts(), self._moved_dfs)
        self._moved_dfs = set()
        return self._shares

    def floored(self, query: Query, floor: float) -> bool:
        """Whether ``floor`` raises the idf of any known term of ``query``."""
        terms = query.keys() if isinstance(query, Mapping) else set(query)
        return any(self.df(term) and self.idf(term) < floor for term in terms)

    def idf(self, term: str) -> float:
        df = self.df(term)
        if not df:
            return 0.0
        raw = idf(self.size, df)
        return self.epsilon * self.average_idf() if raw < 0 else raw

    def norms(self) -> dict[int, float]:
        """``k1 * (1 - b + b * dl / avgdl)`` per document, recomputed after a change."""
        norms = self._norms
        if norms is None:
            base, slope = self._norm_line()
            norms = self._norms = {slot: base + slope * dl for slot, dl in self.lengths.items()}
        return norms

    # -- scoring -----------------------------------------------------------------------------
    def weights(self, query: Query, floor: float | None = None) -> list[tuple[str, float]]:
        """Distinct known query terms with ``count * idf``, largest first.

        rank-bm25 adds a term's contribution once per occurrence in the query, so a repeated
        query term weighs its count times. A mapping gives each term its (possibly
        fractional) count directly, which is how query expansion adds terms at lower weight.
        ``floor`` raises any idf below it (see ``top``).
        """
        counts = query if isinstance(query, Mapping) else Counter(query)
        pairs = [(term, count * (self.idf(term) if floor is None else max(self.idf(term), floor)))
                 for term, count in counts.items() if count and self.df(term)]
        pairs.sort(key=lambda pair: -pair[1])
        return pairs

    def rarest(self, query: Query, postings: int) -> dict[str, float]:
        """The query's known terms (with their counts), rarest first, as many as hold at most
        ``postings`` postings together (``rarest``)."""
        return rarest(query, self.df, postings)

    def scores(self, query: Query) -> dict[int, float]:
        """BM25 score of every document sharing a term with the query (others score 0)."""
        base, slope = self._norm_line()
        lengths = self.lengths
        k1p1 = self.k1 + 1
        acc: dict[int, float] = {}
        get = acc.get
        for term, weight in self.weights(query):
            w = weight * k1p1
            for slot, tf in self.pairs(term):
                acc[slot] = get(slot, 0.0) + w * tf / (tf + (base + slope * lengths[slot]))
        return acc

    def score(self, slot: int, query: Query, floor: float | None = None) -> float:
        """The BM25 score of one document (0.0 when it shares no term with the query)."""
        return self.weighed(slot, self.weights(query, floor))

    def weighed(self, slot: int, weights: Sequence[tuple[str, float]]) -> float:
        """``score`` by the query's ``weights`` (``weights(query, floor)``), worked out once for
        many documents: the weights cost more than a document's score."""
        norm = self.norm(slot)
        k1p1 = self.k1 + 1
        total = 0.0
        for term, weight in weights:
            tf = self.tf(term, slot)
            if tf:
                total += weight * k1p1 * tf / (tf + norm)
        return total

    def norm(self, slot: int) -> float:
        """One document's ``norms()`` entry, without the table (rebuilt after every change)."""
        base, slope = self._norm_line()
        return base + slope * self.lengths[slot]

    def _norm_line(self) -> tuple[float, float]:
        """``norms()``'s line: a document's entry is base + slope × its length."""
        avgdl = self.total_length / self.size if self.size else 1.0
        return self.k1 * (1 - self.b), (self.k1 * self.b / avgdl if avgdl else 0.0)

    def bounded(self, query: Query, postings: int, floor: float | None = None
                ) -> dict[int, float]:
        """Exact BM25 of the query's rarest terms (``rarest``) for every document holding one:
        at most ``postings`` postings read, whatever the corpus's size."""
        k1p1 = self.k1 + 1
        acc: dict[int, float] = {}
        get = acc.get
        base, slope = self._norm_line()
        lengths = self.lengths
        for term, weight in self.weights(self.rarest(query, postings), floor):
            w = weight * k1p1
            for slot, tf in self.pairs(term):
                acc[slot] = get(slot, 0.0) + w * tf / (tf + base + slope * lengths[slot])
        return acc

    def saturation(self, slot: int) -> float:
        """What a term found once in the document adds per unit of its weight."""
        return (self.k1 + 1) / (1 + self.norm(slot))

    def _rest(self, slot: int, score: float, weights: list[tuple[str, float]],
              norm: float) -> float:
        """``score`` with the document's share of each of ``weights`` added, as ``top`` adds
        them (the same sums in the same order): its whole score, read by random access."""
        k1p1 = self.k1 + 1
        for term, weight in weights:
            tf = self.tf(term, slot)
            if tf:
                score += weight * k1p1 * tf / (tf + norm)
        return score

    def terms_holding(self, slot: int) -> list[str]:
        """Every term whose postings hold ``slot``: a document's distinct terms found from the
        postings alone, for one whose terms are kept nowhere else (``Corpus.terms_of``). The
        loaded slots are compared in numpy, in place (3 ms for 10 million postings, where a
        search of their bytes took 48), each match named by its term's range, and the terms
        added since (the base postings of a slot that was removed are dead)."""
        import numpy as np  # here: only a document's removal may need it, never a hook

        found = [term for term, docs in self._added.items() if slot in docs]
        base, offsets, vocabulary = self._base_slots, self._base_offsets, self._base_terms
        if not base or slot >= 1 << 8 * base.itemsize or slot in self._dead:
            return found
        at = np.flatnonzero(np.frombuffer(base, dtype=base.typecode) == slot)
        numbers = np.searchsorted(np.frombuffer(offsets, dtype=offsets.typecode), at,
                                  side="right") - 1
        found.extend(map(vocabulary.__getitem__, numbers.tolist()))
        return found

    def top(
        self,
        query: Query,
        k: int,
        *,
        factor: Callable[[int], float],
        max_factor: float,
        floor: float | None = None,
        ceilings: tuple[Sequence[int], Sequence[float]] | None = None,
    ) -> dict[int, float]:
        """Exact BM25 scores of a set of documents that holds every document that can reach
        the top ``k`` by ``score * factor(slot)`` (a factor of 0 means "never returned"); every
        other document's ``score * factor`` is below the k-th best's, never equal to it.

        With ``floor``, idf values below it are raised to it first, so every document that
        shares a term with the query scores above zero. This only matters in corpora of one
        or two documents, where rank-bm25's floor is itself negative and a note would not be
        found by its own words; a caller that passes a floor gets BM25 scores only when no
        weight was raised (``floored`` tells).

        Term at a time, highest weight first, each candidate's score summed in that order (the
        same sums as scoring every document). Once k candidates are held, a lower bound on the
        k-th best final score is taken from the leading candidates' whole scores (random
        access), and a document not seen yet is opened only if its share of this term plus
        the most the terms after it can add (``_reach``: for a long list, the largest share
        any of its documents gets) times its kind's factor bound could still pass it: one not
        opened at its first term cannot pass it later either (the bound only falls, the k-th
        best only rises), so every candidate's score is whole. A long list is walked in its
        impact order (``_Impacts``) and left where its shares fall short, so a common word's
        postings are read only as far as they can still change the top k; the candidates
        already held gain it by random access.

        ``ceilings``: (the kind of each slot, an upper bound on ``factor`` for each kind), so a
        document of a kind with a lower factor (other scopes, say) needs a larger score; a kind
        bounded at 0 (hidden from the session) is never summed.
        """
        weights = self.weights(query, floor)
        if not weights:
            return {}
        # A document's norm is computed where it is used (as ``norms()`` would hold it, to the
        # bit): the table is rebuilt after every change, a pass over every document that the
        # first search after a write would pay whatever its query.
        base, slope = self._norm_line()
        lengths = self.lengths
        k1p1 = self.k1 + 1
        acc: dict[int, float] = {}
        # A non-positive weight (tiny corpora, where even the idf floor is negative) breaks
        # the bounds, so such queries are scored exhaustively.
        prunable = weights[-1][1] > 0 and k > 0
        reach = [0.0] * (len(weights) + 1)  # at most what terms i.. add to one document
        for i in range(len(weights) - 1, -1, -1):
            share = weights[i][1] * k1p1 * self._reach(
                weights[i][0], base, slope, ceilings[0] if ceilings is not None else ())
            reach[i] = reach[i + 1] + share * (1 + MARGIN)
        kth = 0.0  # a lower bound on the k-th best final score (0: none known yet)
        for i, (term, weight) in enumerate(weights):
            w = weight * k1p1
            if (prunable and len(acc) >= k and self.df(term) > 4 * len(acc)
                    and not reach[i] * max_factor < kth):
                kth = max(kth, _kth(acc, k, lambda slot, i=i, acc=acc: self._rest(  # type: ignore[misc]
                    slot, acc[slot], weights[i:], base + slope * lengths[slot]) * factor(slot),
                    ceilings))
                if kth > 0.0:  # a candidate that cannot pass it with all that is left goes
                    acc = _within(acc, kth, reach[i], ceilings, max_factor)
            if not acc and prunable and self.df(term) > 4 * _depth(k):
                kth = self._seed(term, weights, k, (base, slope), factor, ceilings)
            if kth <= 0.0:
                self._add_all(term, w, acc, (base, slope), ceilings)
                continue
            if reach[i] * max_factor < kth:  # no document not seen yet can pass it
                self._add_to_held(term, w, acc, base, slope)
            else:
                self._open(term, w, acc, (base, slope, reach[i + 1], kth, max_factor),
                           ceilings)
        return _within(acc, kth, 0.0, ceilings, max_factor) if kth > 0.0 else acc

    def _seed(self, term: str, weights: list[tuple[str, float]], k: int,
              line: tuple[float, float], factor: Callable[[int], float],
              ceilings: tuple[Sequence[int], Sequence[float]] | None) -> float:
        """A lower bound on the k-th best final score before a query's first term is summed
        (0: none): the k-th best whole score × factor among the first postings of each run of
        the term's impact order, a few dozen documents read by random access. Without it the
        first term's every posting was summed, and its candidates all ranked: a query of one
        word the nodes know, in 5,000 of 100,000 of them, took 3-9 ms. The runs of a kind
        bounded at 0 (hidden from the session) are passed over: their final scores are 0."""
        impacts = self._impacts_of(term, ceilings[0] if ceilings is not None else ())
        if impacts is None:
            return 0.0
        base, slope = line
        lengths, tf_of, depth = self.lengths, self.tf, _depth(k)
        bounds = ceilings[1] if ceilings is not None and impacts.by_kind else ()
        picked: dict[int, None] = {}  # a slot once, whatever runs hold it
        for tf, kind, slots, dls in impacts.runs:
            if bounds and not bounds[kind]:
                continue
            for slot, dl in zip(slots[:k], dls[:k], strict=True):
                if lengths.get(slot) == dl and tf_of(term, slot) == tf:
                    picked[slot] = None
            if len(picked) >= depth:
                break
        return _kth_final(picked, k, lambda slot: self._rest(
            slot, 0.0, weights, base + slope * lengths[slot]) * factor(slot))

    def _add_all(self, term: str, w: float, acc: dict[int, float], line: tuple[float, float],
                 ceilings: tuple[Sequence[int], Sequence[float]] | None) -> None:
        """Add ``term``'s share (``w`` = its weight × (k1 + 1)) to every document holding it,
        those of a kind bounded at 0 in ``ceilings`` left out: no factor makes them returned,
        and under scope isolation they are most of a list (a hidden posting costs a look at
        its kind, where one summed cost its length, a sum and a candidate more to rank)."""
        base, slope = line
        lengths = self.lengths
        get = acc.get
        pairs: Iterable[tuple[int, int]] = self.pairs(term)
        if ceilings is not None and not all(ceilings[1]):
            kinds, bounds = ceilings
            pairs = ((slot, tf) for slot, tf in pairs if bounds[kinds[slot]])
        for slot, tf in pairs:
            acc[slot] = get(slot, 0.0) + w * tf / (tf + (base + slope * lengths[slot]))

    def _add_to_held(self, term: str, w: float, acc: dict[int, float], base: float,
                     slope: float) -> None:
        """The candidates in ``acc`` that hold ``term`` gain its share (``w`` = its weight ×
        (k1 + 1)): by its postings when fewer than the candidates, else by random access."""
        lengths = self.lengths
        if self.df(term) <= len(acc):
            for slot, tf in self.pairs(term):
                if slot in acc:
                    acc[slot] += w * tf / (tf + (base + slope * lengths[slot]))
            return
        tf_of = self.tf
        for slot in acc:
            held = tf_of(term, slot)
            if held:
                acc[slot] += w * held / (held + (base + slope * lengths[slot]))

    def _open(self, term: str, w: float, acc: dict[int, float],
              bar: tuple[float, float, float, float, float],
              ceilings: tuple[Sequence[int], Sequence[float]] | None) -> None:
        """Add ``term``'s share to the candidates in ``acc`` holding it, and open the other
        documents holding it whose share, with ``after`` (what the later terms can add at
        most), times their kind's factor bound, is not below ``kth``. ``bar``: (base, slope,
        after, kth, the largest factor)."""
        base, slope, after, kth, most = bar
        lengths = self.lengths
        kinds, bounds = ceilings if ceilings is not None else ((), ())
        impacts = self._impacts_of(term, kinds)
        if impacts is None:  # every posting, in one pass
            for slot, tf in self.pairs(term):
                share = w * tf / (tf + (base + slope * lengths[slot]))
                if slot in acc:
                    acc[slot] += share
                elif not (share + after) * (bounds[kinds[slot]] if bounds else most) < kth:
                    acc[slot] = share
            return
        self._add_to_held(term, w, acc, base, slope)
        tf_of = self.tf
        for tf, kind, slots, dls in impacts.runs:
            run_bound = bounds[kind] if bounds and impacts.by_kind else most
            for slot, dl in zip(slots, dls, strict=True):
                share = w * tf / (tf + (base + slope * dl))
                if (share + after) * run_bound < kth:
                    break  # the rest of this run is longer: a smaller share
                if (slot not in acc and lengths.get(slot) == dl and tf_of(term, slot) == tf
                        and not (share + after) * (bounds[kinds[slot]] if bounds else most)
                        < kth):
                    acc[slot] = share
        for slot in impacts.fresh:  # a slot reused since is here, whatever run it was in
            held = tf_of(term, slot)
            if held and slot not in acc:
                share = w * held / (held + (base + slope * lengths[slot]))
                if not (share + after) * (bounds[kinds[slot]] if bounds else most) < kth:
                    acc[slot] = share

    def _reach(self, term: str, base: float, slope: float, kinds: Sequence[int]) -> float:
        """At most what one occurrence-weighted unit of ``term`` gives any document holding it,
        tf / (tf + norm): the largest among its postings when the term's impact order is kept
        (``_impacts_of``), else 1 (which no document reaches)."""
        impacts = self._impacts_of(term, kinds)
        if impacts is None:
            return 1.0
        lengths = self.lengths
        best = max((tf / (tf + (base + slope * dls[0])) for tf, _, _, dls in impacts.runs),
                   default=0.0)
        for slot in impacts.fresh:
            tf = self.tf(term, slot)
            if tf:
                best = max(best, tf / (tf + (base + slope * lengths[slot])))
        return min(best, 1.0)

    def _impacts_of(self, term: str, kinds: Sequence[int] = ()) -> _Impacts | None:
        """The term's impact order, made on first need when its list is long and this index
        lives on (``KEEPS_IMPACTS``), by the documents' ``kinds`` (slot -> kind) when given;
        kept through writes (``add`` notes each new posting)."""
        impacts = self._impacts.get(term)
        if impacts is None and self.KEEPS_IMPACTS and self.df(term) >= IMPACT_MIN:
            impacts = self._impacts[term] = _Impacts(self.pairs(term), self.lengths, kinds)
        return impacts


class IdfShares:
    """Each distinct df's share of the mean idf (its count times idf(n, df)) at one ``n``,
    kept between calls: ``take`` makes again only what changed, ``mean`` sums them.

    The dfs, their counts, the logs of (df + 0.5) and the shares are parallel lists (a df
    whose count falls to 0 gives its place to the last one), so that when ``n`` moves (a
    create) every share is made again in one pass of ``map`` in C: 0.37 ms for the 1,900 dfs
    of 100,000 nodes, where a loop in Python took 0.58 ms."""

    def __init__(self) -> None:
        self.n = -1
        self.terms = 0
        self._at: dict[int, int] | None = {}  # df -> its place in the lists (None: not yet)
        self._dfs: list[float] = []
        self._counts: list[int] = []
        self._lows: list[float] = []  # log(df + 0.5)
        self._shares: list[float] = []  # count * idf(n, df)

    def take(self, n: int, histogram: Mapping[int, int], moved: Iterable[int]) -> None:
        """The shares for ``n`` documents, where ``moved`` names every df whose count in
        ``histogram`` changed since the last call (the first reads them all). Each share is
        idf(n, df) written out, to the bit: (n + 0.5) - df is exact below 2**52."""
        if self.n < 0:
            self._fill(histogram)
            moved = []
        else:
            moved = list(moved)
        for df in moved:
            self._count(df, histogram.get(df, 0))
        dfs, counts, lows, log = self._dfs, self._counts, self._lows, math.log
        if n != self.n:
            self.n = n
            highs = map(log, map(sub, repeat(n + 0.5), dfs))
            self._shares = list(map(mul, counts, map(sub, highs, lows)))
        else:
            shares, at = self._shares, self._at or {}  # placed by ``_count`` when moved
            for df in moved:
                i = at.get(df)
                if i is not None:
                    shares[i] = counts[i] * (log(n + 0.5 - dfs[i]) - lows[i])
        self.terms = sum(counts)

    def _fill(self, histogram: Mapping[int, int]) -> None:
        """Every df's place from ``histogram`` at once, in passes of ``map`` in C, the dfs'
        places (``_at``) found when first asked. A mean made once (``mean_idf``: a reader's
        for a word in over half the documents, 1,869 dfs at 100,000 nodes) cost 0.83 ms with
        the dfs placed one by one (``_count``), 0.74 as a loop that summed them, 0.64 so."""
        dfs, counts = list(histogram.keys()), list(histogram.values())
        if 0 in counts or 0 in dfs:  # a df no term has now (a Counter keeps it at 0)
            held = [(df, count) for df, count in histogram.items() if count and df]
            dfs, counts = [df for df, _ in held], [count for _, count in held]
        self._at = None
        self._dfs = list(map(float, dfs))
        self._counts = counts
        self._lows = list(map(math.log, map(add, self._dfs, repeat(0.5))))
        self._shares = [0.0] * len(self._dfs)  # made by ``take``: n moved

    def _count(self, df: int, count: int) -> None:
        at = self._at
        if at is None:
            at = self._at = {int(held): i for i, held in enumerate(self._dfs)}
        i = at.get(df)
        if count and df:
            if i is not None:
                self._counts[i] = count
                return
            at[df] = len(self._dfs)
            self._dfs.append(float(df))
            self._counts.append(count)
            self._lows.append(math.log(df + 0.5))
            self._shares.append(0.0)  # made by ``take``, which names this df
        elif i is not None:
            del at[df]
            for column in (self._dfs, self._lows, self._shares):
                _drop_at(column, i)
            _drop_at(self._counts, i)
            if i < len(self._dfs):
                at[int(self._dfs[i])] = i

    def mean(self) -> float:
        return math.fsum(self._shares) / self.terms if self.terms else 0.0


def _drop_at(column: list[_T], i: int) -> None:
    """Take item ``i`` out of ``column``, the last item taking its place."""
    last = column.pop()
    if i < len(column):
        column[i] = last


def mean_idf(n: int, histogram: Mapping[int, int]) -> float:
    """The mean raw idf of the terms counted in ``histogram`` (df -> how many terms), in ``n``
    documents: ``IdfShares``'s sum, made once. The parts are summed exactly rounded
    (``math.fsum``), so the same counts give the same bits in any order: an index counting
    its terms afresh, one keeping the counts through its changes, a bulk build, and a fresh
    search moving the counts on disk for a file changed by hand (``recallfile.RecallCorpus``)
    each hold them in another order."""
    shares = IdfShares()
    shares.take(n, histogram, ())
    return shares.mean()


CODES = "BHI"  # the array types postings are stored in, narrowest first


def code_for(top: int) -> str:
    """The narrowest array type (of ``CODES``) that holds every count up to ``top``: how a
    loaded index, the recall file's blocks and a bulk build each store their arrays."""
    return next(code for code in CODES if top < 1 << 8 * array(code).itemsize)


def narrowest(values: array[int]) -> array[int]:
    """``values`` in the narrowest array type that holds them all: a pass in C to find out,
    a copy only when it is another type."""
    code = code_for(max(values, default=0))
    return values if values.typecode == code else array(code, values)


class Staged:
    """Postings of a bulk build (a whole index read from the files), where ``Bm25.add`` keeps
    a dict entry and an int object a posting (about 100 bytes: 4.9 KB a node of an import's
    10,000): each term's postings appended to one flat array, a posting 4 bytes, its slot in
    the low 24 bits and its tf in the high 8 (255: the tf is in ``_large``). ``index`` turns
    them into a ``Bm25`` whose base holds them, slots and tfs apart as one loaded from disk,
    the tfs in the narrowest type (at 100,000 nodes, 146 postings a node: 8 bytes a posting
    staged, then held, were 0.6 KB a node more while staged, 0.4 held after).

    A slot past 24 bits (16.7 million documents) turns every array into (slot, tf) pairs,
    8 bytes a posting."""

    def __init__(self) -> None:
        self._pairs: dict[str, array[int]] = {}  # term -> packed postings (or slot, tf, ...)
        self._large: dict[str, dict[int, int]] = {}  # term -> {slot: a tf of 255 or more}
        self._packed = True
        self._top_tf = 0
        self.lengths: dict[int, int] = {}
        self._last = -1
        self._ascending = True  # every term's slots ascending (slots came in order)
        self.postings = 0  # how many are staged (``bulk_build`` writes a run past a bound)

    def add(self, slot: int, frequencies: Mapping[str, int], length: int) -> None:
        if slot in self.lengths:
            raise KeyError(f"slot {slot} is already indexed; remove it first")
        if slot >= _SLOT_LIMIT and self._packed:
            self._unpack()
        pairs, packed, large = self._pairs, self._packed, self._large
        for term, tf in frequencies.items():
            held = pairs.get(term)
            if held is None:
                held = pairs[term] = array("I")
            if not packed:
                held.append(slot)
                held.append(tf)
            elif tf < _TF_ESCAPE:
                held.append(tf << _SLOT_BITS | slot)
            else:
                held.append(_TF_ESCAPE << _SLOT_BITS | slot)
                large.setdefault(term, {})[slot] = tf
        self._top_tf = max(self._top_tf, *frequencies.values()) if frequencies else self._top_tf
        self.postings += len(frequencies)
        self.lengths[slot] = length
        self._ascending = self._ascending and slot > self._last
        self._last = max(self._last, slot)

    def _unpack(self) -> None:
        """Every term's packed postings as (slot, tf) pairs, from now on."""
        for term, packed in self._pairs.items():
            pairs, large = array("I"), self._large.pop(term, {})
            for value in packed:
                slot, tf = value & _SLOT_MASK, value >> _SLOT_BITS
                pairs.append(slot)
                pairs.append(large[slot] if tf == _TF_ESCAPE else tf)
            self._pairs[term] = pairs
        self._packed = False

    @property
    def tf_code(self) -> str:
        """The narrowest array type that holds every staged count."""
        return code_for(self._top_tf)

    def index(self) -> Bm25:
        """The staged postings as a ``Bm25``'s base (each term's array let go once copied,
        so the two forms are never both whole in memory)."""
        terms = list(self._pairs)
        offsets, slots, tfs = array("I", [0]), array("I"), array(self.tf_code)
        for term in terms:
            self._take(term, slots, tfs)
            offsets.append(len(slots))
        return Bm25.from_base(terms, offsets, slots, tfs, self.lengths, self._ascending)

    def drain(self) -> Iterator[tuple[str, array[int], array[int]]]:
        """Each term's (slots, counts in ``tf_code``), terms in sorted order, each term let go
        as it is given: a run that ``bulk_build`` writes to disk."""
        for term in sorted(self._pairs):
            slots, tfs = array("I"), array(self.tf_code)
            self._take(term, slots, tfs)
            yield term, slots, tfs

    def _take(self, term: str, slots: array[int], tfs: array[int]) -> None:
        """Append ``term``'s postings to ``slots`` and ``tfs`` and let its array go."""
        held = self._pairs.pop(term)
        if not self._packed:
            slots.extend(held[0::2])
            tfs.fromlist(held[1::2].tolist())  # another item type than the pairs'
            return
        start = len(slots)
        self._split(held, slots, tfs)
        large = self._large.pop(term, None)
        if large:
            for at in range(start, len(slots)):
                if tfs[at] == _TF_ESCAPE:
                    tfs[at] = large[slots[at]]

    @staticmethod
    def _split(packed: array[int], slots: array[int], tfs: array[int]) -> None:
        """Append ``packed``'s slots and tfs, by slices of its bytes (in C, not a posting at a
        time): the tf is each item's high byte."""
        raw = bytearray(memoryview(packed).cast("B"))
        high = _HIGH_BYTE
        counts = bytes(raw[high::4])
        raw[high::4] = bytes(len(counts))  # the slot is what is left
        slots.frombytes(raw)
        if tfs.typecode == "B":
            tfs.frombytes(counts)
        else:
            tfs.extend(counts)


_SLOT_BITS = 24
_SLOT_LIMIT = 1 << _SLOT_BITS
_SLOT_MASK = _SLOT_LIMIT - 1
_TF_ESCAPE = 255  # a tf this large or larger is kept apart (``Staged._large``)
_HIGH_BYTE = 3 if sys.byteorder == "little" else 0  # where a 4-byte item keeps its high byte


class _Impacts:
    """One term's postings in impact order: a run for each tf and kind of document (its
    locality's, ``Bm25.top``'s ceilings), each run's documents shortest first. A document's
    share of the term, tf / (tf + norm), falls with its length whatever the average length, so
    each run stays in order as the corpus changes; across runs the order is not fixed, so
    each run is walked until its shares, at its kind's factor bound, fall short. Postings
    added since it was made are ``fresh`` (walked whole); one removed or changed since is told
    by its tf or length no longer matching (a slot reused since is in ``fresh``)."""

    __slots__ = ("by_kind", "fresh", "runs")

    def __init__(self, pairs: Pairs, lengths: Mapping[int, int], kinds: Sequence[int]) -> None:
        groups: dict[tuple[int, int], list[int]] = {}
        for slot, tf in pairs:
            key = (tf, kinds[slot] if kinds else 0)
            group = groups.get(key)
            if group is None:
                group = groups[key] = []
            group.append(slot)
        self.by_kind = bool(kinds)
        self.runs: list[tuple[int, int, array[int], array[int]]] = []
        for tf, kind in sorted(groups, reverse=True):
            slots = sorted(groups[tf, kind], key=lengths.__getitem__)
            self.runs.append((tf, kind, array("I", slots),
                              array("I", [lengths[s] for s in slots])))
        self.fresh: list[int] = []


def _within(acc: dict[int, float], kth: float, after: float,
            ceilings: tuple[Sequence[int], Sequence[float]] | None, most: float
            ) -> dict[int, float]:
    """The candidates whose score, with ``after`` more, times their kind's factor bound (or
    ``most``) is not below ``kth``. One left out cannot come back: a term after this point
    opens a document only if its share with what follows it passes, and that is less."""
    kinds, bounds = ceilings if ceilings is not None else ((), ())
    if not bounds:
        return {slot: score for slot, score in acc.items() if not (score + after) * most < kth}
    return {slot: score for slot, score in acc.items()
            if not (score + after) * bounds[kinds[slot]] < kth}


def _kth(acc: dict[int, float], k: int, final: Callable[[int], float],
         ceilings: tuple[Sequence[int], Sequence[float]] | None) -> float:
    """A lower bound on the k-th largest final score among the candidates (0 if unknown):
    the k-th best ``final`` (a candidate's whole score × its factor) of the best by the
    score so far, times its kind's factor bound when ``ceilings`` are known (a candidate
    of another scope rarely has a final score to match one of the session's own)."""
    depth = _depth(k)
    if ceilings is None:
        best = heapq.nlargest(depth, acc, key=acc.__getitem__)  # a key in C: no call per item
    else:
        kinds, bounds = ceilings
        best = heapq.nlargest(depth, acc, key=lambda slot: acc[slot] * bounds[kinds[slot]])
    return _kth_final(best, k, final)


def _depth(k: int) -> int:
    """How many documents are scored whole for a lower bound on the k-th best final score."""
    return 4 * k + 16


def _kth_final(slots: Iterable[int], k: int, final: Callable[[int], float]) -> float:
    """The k-th largest ``final`` of ``slots`` (0 if fewer, or not positive): a real
    document's final score, so a lower bound on the k-th best of any larger set."""
    ranked = sorted(map(final, slots), reverse=True)
    return ranked[k - 1] if len(ranked) >= k and ranked[k - 1] > 0 else 0.0


def rarest(query: Query, df: Callable[[str], int], postings: int) -> dict[str, float]:
    """The query's terms (with their counts) found in ``df(term)`` documents, rarest first, as
    many as hold at most ``postings`` postings together: a query bounded so that what it reads
    does not grow with the corpus (``Ranking.rank``'s ``postings``). A term found in more
    documents than the bound leaves is left out, with every term more common than it."""
    counts = query if isinstance(query, Mapping) else Counter(query)
    kept: dict[str, float] = {}
    for term in sorted((t for t, count in counts.items() if count and df(t)),
                       key=lambda t: (df(t), t)):
        postings -= df(term)
        if postings < 0:
            break
        kept[term] = counts[term]
    return kept


def idf(size: int, df: int) -> float:
    """BM25's inverse document frequency of a term in ``df`` of ``size`` documents (below 0
    for a term in over half of them; ``Bm25.idf`` and the raw rounds' coverage treat that)."""
    return math.log(size - df + 0.5) - math.log(df + 0.5)


def _ascending(offsets: array[int], slots: array[int], tfs: array[int]
               ) -> tuple[array[int], array[int]]:
    """The postings with each term's slots put in ascending order (``from_base``)."""
    ordered_slots, ordered_tfs = array(slots.typecode), array(tfs.typecode)
    for i in range(len(offsets) - 1):
        a, b = offsets[i], offsets[i + 1]
        pairs = sorted(zip(slots[a:b], tfs[a:b], strict=True))
        ordered_slots.extend(slot for slot, _ in pairs)
        ordered_tfs.extend(tf for _, tf in pairs)
    return ordered_slots, ordered_tfs
