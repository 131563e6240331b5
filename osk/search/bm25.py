"""BM25 Okapi over an inverted index that changes one document at a time.

The scores are those of ``rank_bm25.BM25Okapi`` (k1 = 1.5, b = 0.75, epsilon = 0.25) on the
same token lists, including its idf floor: a term in more than half of the documents has a
negative raw idf, ``log(N - df + 0.5) - log(df + 0.5)``, and rank-bm25 replaces it with
``epsilon * average_idf``, where the average runs over the raw idf of every term in the corpus
(negative ones included). That average depends on N, so it cannot be kept as a running sum;
we keep a histogram of document frequencies (how many terms occur in exactly d documents) and
evaluate the average over its distinct d values, which are few, only when a query needs it.

Documents are small integer slots. Postings live in two layers: the *base*, three flat arrays
loaded from disk as they are (no per-entry work at load time), and *materialised* per-term
dicts, made from the base the first time a term is changed or needs random access. Adding or
removing one document touches only that document's terms: nothing is rebuilt on one change.
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence

K1 = 1.5
B = 0.75
EPSILON = 0.25

Query = Iterable[str] | Mapping[str, float]
Pairs = Iterable[tuple[int, int]]


class Bm25:
    """Postings ``term -> {slot: tf}``, document lengths, and BM25Okapi scoring."""

    def __init__(self, k1: float = K1, b: float = B, epsilon: float = EPSILON) -> None:
        self.k1, self.b, self.epsilon = k1, b, epsilon
        self.lengths: dict[int, int] = {}
        self.total_length = 0
        self._dicts: dict[str, dict[int, int]] = {}  # materialised terms shadow the base
        self._base_index: dict[str, int] = {}
        self._base_offsets = array("I", [0])
        self._base_slots = array("I")
        self._base_tfs = array("I")
        self._histogram: Counter[int] | None = None  # built on first need, then maintained
        self._average_idf: tuple[int, float] | None = None
        self._df_logs: dict[int, float] = {}  # df -> log(df + 0.5), for average_idf
        self._norms: dict[int, float] | None = None

    # -- loading and saving ------------------------------------------------------------------
    @classmethod
    def from_base(
        cls,
        terms: list[str],
        offsets: array[int],
        slots: array[int],
        tfs: array[int],
        lengths: dict[int, int],
    ) -> Bm25:
        """Adopt persisted arrays as the base layer; term ``i`` owns ``offsets[i]:offsets[i+1]``."""
        if len(offsets) != len(terms) + 1 or len(slots) != len(tfs):
            raise ValueError("postings arrays do not fit together")
        if offsets[0] != 0 or offsets[-1] != len(slots):
            raise ValueError("postings offsets do not cover the postings")
        index = cls()
        index._base_index = {term: i for i, term in enumerate(terms)}
        if len(index._base_index) != len(terms):
            raise ValueError("a term appears twice in the postings")
        index._base_offsets, index._base_slots, index._base_tfs = offsets, slots, tfs
        index.lengths = lengths
        index.total_length = sum(lengths.values())
        return index

    def to_base(self) -> tuple[list[str], array[int], array[int], array[int]]:
        """The current postings as (terms, offsets, slots, tfs), for writing to disk."""
        terms: list[str] = []
        offsets, slots, tfs = array("I", [0]), array("I"), array("I")
        base_slots, base_tfs = self._base_slots, self._base_tfs
        if base_slots.typecode != "I":
            base_slots = array("I", base_slots)
        if base_tfs.typecode != "I":  # loaded as 16-bit; extend() needs one item type
            base_tfs = array("I", base_tfs)
        for term in self.all_terms():
            before = len(slots)
            materialised = self._dicts.get(term)
            if materialised is not None:
                slots.extend(materialised.keys())
                tfs.extend(materialised.values())
            else:
                i = self._base_index[term]
                a, b = self._base_offsets[i], self._base_offsets[i + 1]
                slots.extend(base_slots[a:b])
                tfs.extend(base_tfs[a:b])
            if len(slots) > before:
                terms.append(term)
                offsets.append(len(slots))
        return terms, offsets, slots, tfs

    def all_terms(self) -> Iterable[str]:
        """Every term with postings, each once (the recall file writes them all)."""
        yield from self._base_index
        for term in self._dicts:
            if term not in self._base_index:
                yield term

    # -- postings access ---------------------------------------------------------------------
    def df(self, term: str) -> int:
        materialised = self._dicts.get(term)
        if materialised is not None:
            return len(materialised)
        i = self._base_index.get(term)
        return 0 if i is None else self._base_offsets[i + 1] - self._base_offsets[i]

    def pairs(self, term: str) -> Pairs:
        """(slot, tf) for every document holding ``term``."""
        materialised = self._dicts.get(term)
        if materialised is not None:
            return materialised.items()
        i = self._base_index.get(term)
        if i is None:
            return ()
        a, b = self._base_offsets[i], self._base_offsets[i + 1]
        return zip(self._base_slots[a:b], self._base_tfs[a:b], strict=True)

    def postings(self, term: str) -> dict[int, int]:
        """The term's postings as a dict (materialised and kept: later changes edit it)."""
        materialised = self._dicts.get(term)
        if materialised is None:
            materialised = self._dicts[term] = dict(self.pairs(term))
        return materialised

    # -- changing ----------------------------------------------------------------------------
    def add(self, slot: int, frequencies: Mapping[str, int], length: int) -> None:
        """Index a document under a free slot."""
        if slot in self.lengths:
            raise KeyError(f"slot {slot} is already indexed; remove it first")
        histogram = self._histogram
        dicts = self._dicts
        for term, tf in frequencies.items():
            docs = dicts.get(term)
            if docs is None:
                docs = self.postings(term)
            if histogram is not None:
                if docs:
                    histogram[len(docs)] -= 1
                histogram[len(docs) + 1] += 1
            docs[slot] = tf
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
        for term in terms:
            docs = self.postings(term)
            if slot not in docs:
                continue
            if histogram is not None:
                histogram[len(docs)] -= 1
            del docs[slot]
            if histogram is not None and docs:
                histogram[len(docs)] += 1
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
        histogram = self._histogram
        if histogram is None:
            histogram = self._histogram = Counter(self.df(term) for term in self.all_terms())
            histogram.pop(0, None)
        # idf(n, df) written out, with its log(df + 0.5) kept: the same sum to the bit, and
        # one log a distinct df where a write paid two and a call (2,000 dfs at 100,000 nodes)
        log, lows = math.log, self._df_logs
        total = 0.0
        terms = 0
        for df, count in histogram.items():
            if count and df:
                low = lows.get(df)
                if low is None:
                    low = lows[df] = log(df + 0.5)
                total += count * (log(n - df + 0.5) - low)
                terms += count
        value = total / terms if terms else 0.0
        self._average_idf = (n, value)
        return value

    def adopt_average_idf(self, size: int, value: float) -> None:
        """Take the mean idf computed over exactly these documents (by the writer of the
        recall file, which holds them): a pass over every term saved."""
        if size == self.size:
            self._average_idf = (size, value)

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
        ``postings`` postings together: a query bounded so that what it reads does not grow
        with the corpus (``Ranking.rank``'s ``postings``). A term found in more documents than
        the bound leaves is left out, with every term more common than it."""
        counts = query if isinstance(query, Mapping) else Counter(query)
        kept: dict[str, float] = {}
        for term in sorted((t for t, count in counts.items() if count and self.df(t)),
                           key=lambda t: (self.df(t), t)):
            postings -= self.df(term)
            if postings < 0:
                break
            kept[term] = counts[term]
        return kept

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
        norm = self.norm(slot)
        k1p1 = self.k1 + 1
        total = 0.0
        for term, weight in self.weights(query, floor):
            tf = self.postings(term).get(slot)
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
            tf = self.postings(term).get(slot)
            if tf:
                score += weight * k1p1 * tf / (tf + norm)
        return score

    def base_id(self, term: str) -> int | None:
        """The term's number in the loaded postings (and in the snapshot's per-document
        terms), None when it was not in them."""
        return self._base_index.get(term)

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
        the top ``k`` by ``score * factor(slot)`` (a factor of 0 means "never returned").

        With ``floor``, idf values below it are raised to it first, so every document that
        shares a term with the query scores above zero. This only matters in corpora of one
        or two documents, where rank-bm25's floor is itself negative and a note would not be
        found by its own words; a caller that passes a floor gets BM25 scores only when no
        weight was raised (``floored`` tells).

        Term at a time, highest weight first. Once the k-th best candidate already beats
        anything a document not seen yet could still collect from the remaining terms (their
        weights times ``k1 + 1`` times ``max_factor``), the remaining terms are only added to
        the candidates already held instead of opening every document in their long posting
        lists. Every remaining term is still added to every candidate, so scores stay exact.

        ``ceilings``: (the kind of each slot, an upper bound on ``factor`` for each kind). Until
        the lists close, a document not seen yet is opened only if its kind's bound could still
        lift it past the k-th best: where most documents belong to kinds with a lower factor
        (other scopes, say), a common term's long list adds only the few that can still win,
        and no later step walks the rest.
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
        # A non-positive weight (tiny corpora, where even the idf floor is negative) breaks
        # the bound, so such queries are scored exhaustively.
        prunable = weights[-1][1] > 0 and k > 0
        remaining = [0.0] * (len(weights) + 1)
        for i in range(len(weights) - 1, -1, -1):
            remaining[i] = remaining[i + 1] + weights[i][1] * k1p1
        acc: dict[int, float] = {}
        get = acc.get
        closed = False
        admit: list[bool] | None = None  # per kind: may a document not seen yet still win
        for i, (term, weight) in enumerate(weights):
            w = weight * k1p1
            df = self.df(term)
            if not closed and prunable and df > 4 * len(acc) and len(acc) >= k:
                kth = _kth(acc, k, lambda slot, i=i: self._rest(  # type: ignore[misc]
                    slot, acc[slot], weights[i:], base + slope * lengths[slot]) * factor(slot))
                closed = kth > remaining[i] * max_factor
                if not closed and ceilings is not None:
                    # a kind shut out here stays out: the k-th best only rises, what is left
                    # to add only falls
                    admit = [not kth > remaining[i] * bound for bound in ceilings[1]]
            if admit is not None and not closed:
                kinds = ceilings[0]  # type: ignore[index]
                for slot, tf in self.pairs(term):
                    if slot in acc:
                        acc[slot] += w * tf / (tf + (base + slope * lengths[slot]))
                    elif admit[kinds[slot]]:
                        acc[slot] = w * tf / (tf + (base + slope * lengths[slot]))
            elif closed and df <= len(acc):
                for slot, tf in self.pairs(term):
                    if slot in acc:
                        acc[slot] += w * tf / (tf + (base + slope * lengths[slot]))
            elif closed:
                docs = self.postings(term)
                for slot in acc:
                    held = docs.get(slot)
                    if held:
                        acc[slot] += w * held / (held + (base + slope * lengths[slot]))
            else:
                for slot, tf in self.pairs(term):
                    acc[slot] = get(slot, 0.0) + w * tf / (tf + (base + slope * lengths[slot]))
        return acc


def _kth(acc: dict[int, float], k: int, final: Callable[[int], float]) -> float:
    """A lower bound on the k-th largest final score among the candidates (0 if unknown):
    the k-th best ``final`` (a candidate's whole score × its factor) of the best by the
    score so far."""
    best = heapq.nlargest(4 * k + 16, acc, key=acc.__getitem__)  # a key in C: no call per item
    ranked = sorted((final(slot) for slot in best), reverse=True)
    return ranked[k - 1] if len(ranked) >= k and ranked[k - 1] > 0 else 0.0


def idf(size: int, df: int) -> float:
    """BM25's inverse document frequency of a term in ``df`` of ``size`` documents (below 0
    for a term in over half of them; ``Bm25.idf`` and the raw rounds' coverage treat that)."""
    return math.log(size - df + 0.5) - math.log(df + 0.5)
