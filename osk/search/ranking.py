"""Ranking one query over the corpus: title precedence, BM25, locality, validity, markers.

The order (weights tuned on the dev set; the figures are in docs/performance.md):

1. A query equal to a title after NFC + case folding ranks first; then a query equal to a
   title up to punctuation and spacing (titles cannot hold ``: / # ?``); then by score.
2. score = BM25 of the query's terms (function words dropped, a small cross-language
   expansion: ``expand``) over title + summary + body, × locality × validity, plus what a
   superseded node passes on to the node that supersedes it.
3. Locality: the session's own scope ×2.0, Domain and Person ×1.5, other scopes ×1.0. Only
   the ratios matter; 4:3:2 was the best of the grid tried, its neighbours scored within 0.007
   nDCG@10, and giving Domain/Person the weight of either neighbour lost 0.02.
4. Validity: a node superseded by another (whose ``supersedes`` key, or failing that its text,
   ``osk.store.edges.stated_supersedes``, names it up to punctuation and spacing, and whose
   claim has started), or past its ``valid_to``, or before its ``valid_from``, is demoted
   ×0.75 and marked ``superseded`` / ``expired`` / ``not-yet-valid``; its successor gains the
   demoted node's score, so the newer node outranks the one it replaces. With an explicit
   ``as_of`` only nodes that existed and were valid then are returned.

5. With the semantic channel on (``osk.search.semantic``) and a query the model can read
   (the multilingual model reads all; the English one skips a query with Hangul), the best
   ``FUSION_DEPTH`` of the lexical order and of the nodes by meaning are fused linearly
   (``fuse``), each channel relative to its own best for this query, and each of these
   candidates counts its value in both: a node words found that meaning ranks past its own
   first ``FUSION_DEPTH`` still counts its closeness, not none. A node's meaning counts
   by how far its cosine similarity rises above ``SEMANTIC_FLOOR``, × the factor above to the
   power ``SEMANTIC_LOCALITY`` (the floor comes first, so a project's own notes that are not
   about the question get nothing from being local); a node that supersedes a visible one is
   as close as the closer of the two, as it takes its predecessor's score in the lexical
   order. The fused score is the lexical score / the best lexical score, plus the semantic
   weight × that rise / the best rise.
   The semantic weight depends on the query: ``semantic_weight`` of how much of the query's
   term weight (count × idf, as BM25 weighs it) the best lexical hit holds (``coverage``).
   A query whose words the best hit holds in full (a title, a command, an error message) is
   answered by its words: the weight falls to 0 and the lexical order stands. A query whose
   words it barely holds (a question in other words, or in the other language) gets up to
   ``SEMANTIC_WEIGHT``. Title matches stay first. Meaning never loses what words are sure of:
   where the best lexical hit holds every query term, the weight is 0 and the lexical order
   stands; otherwise, at every depth c, the fused first c hold the lexical order's first c // 2
   (of its first ``WORDS_KEPT``): meaning reorders them and fills the rest but pushes none of
   them out. The fused score is reported in the lexical score's units (× the best lexical
   score), so a query whose words match nothing well still scores low: the top score keeps
   telling a question with an answer from one without. Chosen on the dev set against
   reciprocal-rank fusion, against a similarity on a fixed scale and against one weight for
   every query (docs/performance.md).

Isolation is not a ranking matter: ``visible`` (the caller's rule, e.g. ``scope_visibility``)
removes a node before anything else looks at it. Workbench and ``_governance`` files never
enter the corpus; ``factor`` refuses them again as a guard.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping
from itertools import islice
from typing import Any

from osk.search.corpus import Corpus, SearchDoc
from osk.search.expand import query_terms
from osk.search.tokenize import loose_key
from osk.store.fastclass import dataclass
from osk.store.titles import title_key
from osk.store.vault import SCOPE, SPACES, Vault

LOCALITY_OWN = 2.0
LOCALITY_SHARED = 1.5  # Domain and Person
LOCALITY_OTHER = 1.0
VALIDITY_DEMOTION = 0.75
IDF_FLOOR = 0.01  # ranking only: keeps a one- or two-note vault findable (see Bm25.top)
FUSION_DEPTH = 30  # how far down each channel's order fusion looks
SEMANTIC_WEIGHT = 3.5  # the semantic channel's weight for a query its words do not match at all
SEMANTIC_LOCALITY = 1.0
SEMANTIC_FLOOR = 0.1  # cosine similarity below which a node's meaning adds nothing, in any scope
COVERAGE_POWER = 2.0  # how fast the semantic weight falls as the best lexical hit covers the query
# Words' first nodes that meaning may reorder but never push out: the fused first c hold the
# lexical first c // 2 of them, at every depth c (on LoCoMo meaning pushed an evidence round
# words ranked 5th out of the top 10).
WORDS_KEPT = 5
BOUNDED_DEPTH = 64  # a bounded query's nodes that gain its commoner terms (Ranking._bounded)
# A query's candidates up to this many are sorted whole (``Ranking._candidates``): in C that
# costs less than ``heapq.nlargest``'s loop in Python for their first 32 (40 against 96 us for
# 512 random scores, 94 against 102 for 1,024), and the deeper passes where most of them are
# hidden (scope isolation) cost nothing more; past this the partial passes cost less.
SORTED_WHOLE = 1024

Visible = Callable[[SearchDoc], bool]
Markers = Callable[[list[str]], Mapping[str, Iterable[str]]]
Ranked = tuple[int, int, float, float]  # slot, title tier, final score, bm25


@dataclass(frozen=True)
class Hit:
    title: str
    path: str
    id: str
    summary: str
    updated: str
    score: float  # BM25 × locality × validity (+ inheritance); fused with meaning when on
    markers: tuple[str, ...] = ()
    space: str = ""
    scope: str | None = None
    match: str = "text"  # "title" | "title-loose" | "text"
    bm25: float = 0.0  # BM25Okapi of the query's terms alone


@dataclass(frozen=True)
class SearchResult:
    """A search's answer: ``Hit`` s, and raw rounds (``osk.search.rounds.RoundHit``) beside them.
    Kept here, not with the engine's other results, so a fresh `osk search` answered from the
    store (``osk.reads.quick_search``) imports no result type it does not return."""

    scope: str
    query: str
    hits: tuple[Any, ...]


class ScopeRule:
    """A ``visible`` rule that a node's space and scope decide alone (``sees(space, scope)``),
    as scope isolation is. Ranking asks it once for each kind of node (``Corpus.kinds``)
    instead of only for each candidate, so the postings of the kinds it hides are not summed:
    at 100,000 nodes a session that sees 3 of 10 scopes skipped 415 of a word's 598."""

    __slots__ = ("sees",)

    def __init__(self, sees: Callable[[str, str | None], bool]) -> None:
        self.sees = sees

    def __call__(self, doc: SearchDoc) -> bool:
        return self.sees(doc.space, doc.scope)


def scope_visibility(vault: Vault, scope: str | None) -> ScopeRule | None:
    """The vault's isolation rule as a ``visible`` callback for a session bound to ``scope``.

    With ``scope_isolation`` on (the default), another scope's nodes are invisible unless the
    person listed that scope in ``shared_scopes``. A session bound to no scope sees all.
    """
    settings = vault.settings()
    if not settings.scope_isolation or scope is None:
        return None
    allowed = frozenset(title_key(name) for name in (scope, *settings.shared_scopes))
    return ScopeRule(lambda space, scope: space != SCOPE or title_key(scope or "") in allowed)


class Ranking:
    """One query's view of the corpus: who may be returned, and with what factor."""

    def __init__(self, corpus: Corpus, *, scope: str | None, visible: Visible | None,
                 moment: float, explicit_time: bool) -> None:
        self.corpus = corpus
        self.scope = scope
        self.scope_key = title_key(scope) if scope is not None else None
        self.visible = visible
        self.moment = moment
        self.explicit_time = explicit_time
        self._factors: dict[int, float] = {}
        self._pairs, self._superseded = corpus.supersession()
        self._cosines: dict[int, float] = {}

    # -- the order ----------------------------------------------------------------------------
    def rank(self, query: str, k: int, postings: int | None = None) -> list[Ranked]:
        """The best k, best first. ``postings``: rank by the query's rarest terms only, as
        many as hold at most that many postings together (``Bm25.rarest``), so the cost
        stays flat however large the corpus grows (``read_node``'s similar nodes).

        Only as many candidates as can still reach the top k are looked at (visibility,
        validity): candidates come in descending BM25 order and stop once even the largest
        factor cannot lift the next one past the k-th best final score. Nodes in a
        supersession pair are scored explicitly, so what they pass on is exact too.
        """
        corpus, factor = self.corpus, self.factor
        bm25 = corpus.bm25
        terms = query_terms(query)
        # the largest factor any node can get: its own scope's only when there is a scope,
        # and where the corpus keeps its nodes' kinds, the largest locality among them (a
        # session whose scope holds no node yet: 1.5, not 2, so a query of common words stops
        # after a few dozen candidates, where at 100,000 nodes it looked at a thousand)
        ceiling = max(LOCALITY_SHARED, LOCALITY_OTHER,
                      LOCALITY_OWN if self.scope is not None else 0.0)
        ceilings = self._ceilings()
        highest = max(ceilings[1], default=0.0) if ceilings is not None else 0.0
        if 0.0 < highest < ceiling:
            ceiling = highest
        if postings is not None:
            raw = self._bounded(terms, postings)
            terms = bm25.rarest(terms, postings)  # what a supersession pair is scored by
        else:
            raw = bm25.top(terms, k, factor=factor, max_factor=ceiling, floor=IDF_FLOOR,
                           ceilings=ceilings)
        paired = {slot for pair in self._pairs for slot in pair}.difference(raw)
        weights = bm25.weights(terms, IDF_FLOOR) if paired else []
        for slot in paired:
            score = bm25.weighed(slot, weights)
            if score:
                raw[slot] = score
        pool: dict[int, float] = {}
        # the (few) superseded nodes looked up in raw, not raw walked: raw can hold most of
        # the corpus when a query's words are common
        for slot in sorted(slot for slot in self._superseded if slot in raw):
            successor = self._current_successor(slot)
            if successor is not None and factor(slot) > 0:
                if successor not in pool:
                    pool[successor] = raw.get(successor, 0.0) * factor(successor)
                pool[successor] += raw[slot] * factor(slot)
        tiers: dict[int, int] = {}
        for tier, table, key in ((1, corpus.by_loose, loose_key(query)),
                                 (2, corpus.by_title, title_key(query.strip()))):
            for slot in table.get(key, ()) if key else ():
                if factor(slot) > 0:
                    tiers[slot] = tier
                    if slot not in raw:  # pruned from raw: first by its title, by its score
                        score = bm25.score(slot, terms, floor=IDF_FLOOR)
                        if score:
                            raw[slot] = score
                    pool.setdefault(slot, raw.get(slot, 0.0) * factor(slot))
        best = heapq.nsmallest(k, pool.values())  # a min-heap: best[0] is the k-th best
        heapq.heapify(best)
        self._candidates(raw, pool, best, k, ceiling)
        docs = corpus.docs
        order = sorted(pool, key=lambda s: (-tiers.get(s, 0), -pool[s], docs[s].path))[:k]
        if bm25.floored(terms, IDF_FLOOR):  # tiny corpus: report true BM25 scores
            raw = {s: bm25.score(s, terms) for s in order}
        return [(s, tiers.get(s, 0), pool[s], raw.get(s, 0.0)) for s in order]

    def _bounded(self, terms: dict[str, float], postings: int) -> dict[int, float]:
        """BM25 read from the postings of the query's rarest terms only (``Bm25.bounded``);
        the best ``BOUNDED_DEPTH`` of those nodes (× factor) then gain the query's commoner
        terms they hold, as if each were found once (their per-document terms: no postings)."""
        bm25 = self.corpus.bm25
        raw = bm25.bounded(terms, postings, IDF_FLOOR)
        rare = bm25.rarest(terms, postings)
        rest = dict(bm25.weights({t: c for t, c in terms.items() if t not in rare}, IDF_FLOOR))
        if rest and raw:
            factor = self.factor
            ahead = heapq.nlargest(4 * BOUNDED_DEPTH, raw, key=raw.__getitem__)
            best = sorted(ahead, key=lambda slot: -raw[slot] * factor(slot))[:BOUNDED_DEPTH]
            for slot, held in self.corpus.holding(best, rest).items():
                raw[slot] += sum(rest[term] for term in held) * bm25.saturation(slot)
        return raw

    def _candidates(self, raw: dict[int, float], pool: dict[int, float], best: list[float],
                    k: int, ceiling: float) -> None:
        """``_take`` the candidates best BM25 first, only as far as they could reach the top k.

        A raw of at most ``SORTED_WHOLE`` candidates is sorted whole, in C, at once. A larger
        one (it can hold most of the corpus when a query's words are common) is never sorted
        whole: a prefix of its order first, a four times deeper one while too few of those
        may be returned to know the k-th best, and once that is known, the rest that can
        still reach it. Either way the candidates come in the same order (``nlargest`` keeps
        equal scores in raw's order, as a stable sort does), and any order of equal scores
        gives the same top k: ``_take`` passes over a node only when k others are better."""
        if len(raw) <= SORTED_WHOLE:
            order = sorted(raw, key=raw.__getitem__, reverse=True)  # a key in C
            self._take(zip(order, map(raw.__getitem__, order), strict=True), pool, best, k,
                       ceiling)
            return
        depth = 2 * k + 16
        ahead = heapq.nlargest(depth, raw, key=raw.__getitem__)  # a key in C
        stopped = self._take([(slot, raw[slot]) for slot in ahead], pool, best, k, ceiling)
        while not stopped and len(ahead) < len(raw):
            if len(best) >= k:
                bar = best[0] / ceiling * (1 - 1e-12)
                seen = set(ahead)
                rest = sorted(((slot, score) for slot, score in raw.items()
                               if score >= bar and slot not in seen), key=_second, reverse=True)
                self._take(rest, pool, best, k, ceiling)
                return
            taken, depth = len(ahead), depth * 4
            ahead = heapq.nlargest(depth, raw, key=raw.__getitem__)
            stopped = self._take([(slot, raw[slot]) for slot in ahead[taken:]], pool, best, k,
                                 ceiling)

    def _take(self, candidates: Iterable[tuple[int, float]], pool: dict[int, float],
              best: list[float], k: int, ceiling: float) -> bool:
        """Score candidates (best BM25 first) into ``pool`` until none can reach the top k;
        True when it stopped there (no candidate with a lower score can reach it either)."""
        factor = self.factor
        for slot, score in candidates:
            if len(best) >= k and score * ceiling < best[0]:
                return True
            if slot in pool or factor(slot) <= 0:
                continue
            final = pool[slot] = score * factor(slot)
            if len(best) < k:
                heapq.heappush(best, final)
            elif final > best[0]:
                heapq.heapreplace(best, final)
        return False

    def semantic_order(self, similarities: Mapping[int, float],
                       words: Iterable[int] = ()) -> list[tuple[int, float]]:
        """Nodes that may be returned, by how far their similarity rises above
        ``SEMANTIC_FLOOR`` (0 below it) × factor ** SEMANTIC_LOCALITY, best first (at most
        ``FUSION_DEPTH``), then those of the ``words`` slots (the lexical order's candidates
        for fusion) that are not among them, in that order: ``fuse`` weighs a node words
        found by its own meaning, not as if it had none. A node below the floor stays a
        candidate that meaning adds nothing to, so the channel still answers from what the
        session may see.

        A node in force that supersedes a visible one is at least as close as its predecessor
        (it answers what the older one answered, as in ``rank``), so meaning ranks the newer
        node first too. ``similarity`` gives the cosine each entry was ranked by."""
        cosines = dict(similarities)
        for slot in self._superseded.intersection(similarities):
            successor = self._current_successor(slot) if self.factor(slot) > 0 else None
            if successor is not None:
                cosines[successor] = max(cosines.get(successor, -1.0), similarities[slot])
        self._cosines = cosines
        scored: dict[int, float] = {}
        for slot, cosine in cosines.items():
            value = self.factor(slot)
            if value > 0:
                rise = max(0.0, cosine - SEMANTIC_FLOOR)
                scored[slot] = rise * value ** SEMANTIC_LOCALITY
        best = heapq.nlargest(FUSION_DEPTH, scored.items(), key=_second)
        shown = {slot for slot, _ in best}
        return best + [(slot, scored[slot]) for slot in dict.fromkeys(words)
                       if slot in scored and slot not in shown]

    def similarity(self, slot: int) -> float:
        """The cosine similarity ``semantic_order`` ranked ``slot`` by (a successor's may be its
        predecessor's); 0.0 for a node it was not given."""
        return self._cosines.get(slot, 0.0)

    def coverage(self, query: str, slot: int | None) -> float:
        """How much of the query the node's words hold: the share of the query's term weight
        (count × idf, the weights BM25 scores with) carried by terms the node contains. 1.0
        when it holds every term; 0.0 when it holds none, and for no node at all."""
        weights = self.corpus.bm25.weights(query_terms(query), IDF_FLOOR)
        total = sum(weight for _, weight in weights)
        if slot is None or total <= 0:
            return 0.0
        held = self.corpus.holding([slot], (term for term, _ in weights))[slot]
        return sum(weight for term, weight in weights if term in held) / total

    # -- factors ------------------------------------------------------------------------------
    def factor(self, slot: int) -> float:
        """Locality × validity for a node, 0 when it must not be returned. Cached per query."""
        value = self._factors.get(slot)
        if value is None:
            value = self._factors[slot] = self._factor(slot)
        return value

    def _factor(self, slot: int) -> float:
        doc = self.corpus.docs[slot]
        if doc.space not in SPACES:  # Workbench and _governance never reach the corpus
            return 0.0
        if self.visible is not None and not self.visible(doc):
            return 0.0
        valid = _valid_at(doc, self.moment)
        if self.explicit_time and (not valid or (doc.created or 0.0) > self.moment):
            return 0.0
        value = self._locality(doc.space, doc.scope)
        if not valid or (slot in self._superseded and self._superseded_by(doc) is not None):
            value *= VALIDITY_DEMOTION
        return value

    def _locality(self, space: str, scope: str | None) -> float:
        """The locality factor of a node in ``space`` and ``scope`` (0 outside the Spaces)."""
        if space not in SPACES:
            return 0.0
        if space == SCOPE:
            own = self.scope is not None and scope is not None and (
                scope == self.scope or title_key(scope) == self.scope_key)
            return LOCALITY_OWN if own else LOCALITY_OTHER
        return LOCALITY_SHARED

    def _ceilings(self) -> tuple[list[int], list[float]] | None:
        """Per kind of node (``Corpus.kinds``) a bound on its factor: its locality (validity
        and visibility only lower it), 0 for a kind a ``ScopeRule`` hides (no node of it can
        be returned). None for a corpus that keeps no kinds (the recall file's)."""
        kinds = getattr(self.corpus, "kinds", None)
        if kinds is None:
            return None
        rule = self.visible
        sees = rule.sees if isinstance(rule, ScopeRule) else None
        return self.corpus.kind_of, [
            self._locality(space, scope) if sees is None or sees(space, scope) else 0.0
            for space, scope in kinds]

    def _superseded_by(self, doc: SearchDoc) -> int | None:
        """A node in force that names ``doc`` in its ``supersedes`` (lowest slot if several)."""
        for slot in sorted(self.corpus.successors.get(doc.loose_key, ())):
            successor = self.corpus.docs[slot]
            if successor.path == doc.path or (successor.starts or 0.0) > self.moment:
                continue
            if self.explicit_time and not _valid_at(successor, self.moment):
                continue
            return slot
        return None

    def _current_successor(self, slot: int) -> int | None:
        """The newest node in the supersession chain after ``slot`` that may be returned."""
        current, seen = slot, {slot}
        for _ in range(16):
            nxt = self._superseded_by(self.corpus.docs[current])
            if nxt is None or nxt in seen:
                break
            seen.add(nxt)
            current = nxt
        return current if current != slot and self.factor(current) > 0 else None

    # -- hits ---------------------------------------------------------------------------------
    def hits(self, ranked: list[Ranked], markers: Markers | None) -> list[Hit]:
        docs = [self.corpus.docs[slot] for slot, *_ in ranked]
        extra = markers([doc.id for doc in docs]) if markers and docs else {}
        hits = []
        for doc, (_, tier, score, bm25) in zip(docs, ranked, strict=True):
            labels = set(extra.get(doc.id, ()))
            labels.update(self.validity_markers(doc))
            hits.append(Hit(
                title=doc.title, path=doc.path, id=doc.id, summary=doc.summary,
                updated=doc.updated, score=round(score, 6), markers=tuple(sorted(labels)),
                space=doc.space, scope=doc.scope,
                match=("text", "title-loose", "title")[tier], bm25=bm25,
            ))
        return hits

    def validity_markers(self, doc: SearchDoc) -> list[str]:
        labels = []
        if doc.loose_key in self.corpus.successors and self._superseded_by(doc) is not None:
            labels.append("superseded")
        if doc.valid_to is not None and doc.valid_to <= self.moment:
            labels.append("expired")
        if doc.valid_from is not None and doc.valid_from > self.moment:
            labels.append("not-yet-valid")
        return labels


def semantic_weight(coverage: float) -> float:
    """The semantic channel's weight for a query whose best lexical hit holds ``coverage`` of
    its term weight: ``SEMANTIC_WEIGHT`` × (1 − coverage) ** ``COVERAGE_POWER``. The more of
    the question its words already explain, the less the meaning of other notes may reorder
    the answer (module docstring, item 5)."""
    uncovered = 1.0 - min(max(coverage, 0.0), 1.0)
    return SEMANTIC_WEIGHT * float(uncovered ** COVERAGE_POWER)  # float ** float may be complex


def words_decide(coverage: float, finals: Iterable[float], k: int) -> bool:
    """Whether ``fuse`` gives the words' order whatever meaning says, so the query need not be
    embedded nor the vectors scanned: meaning's weight is 0 (the best lexical hit holds every
    query term: ``coverage`` 1) and at least ``k`` of the words' first ``FUSION_DEPTH`` hits
    score above 0 (``finals``: the lexical order's final scores). A hit meaning alone adds
    then scores 0 and comes after them, and meaning lifts none of the words' own."""
    return semantic_weight(coverage) == 0 and sum(
        1 for final in islice(finals, FUSION_DEPTH) if final > 0) >= k


def fuse(lexical: list[Ranked], semantic: list[tuple[int, float]], k: int,
         name: Callable[[int], str], coverage: float) -> list[Ranked]:
    """The best k of both channels: the lexical score over the query's best, plus
    ``semantic_weight(coverage)`` × the semantic value (``Ranking.semantic_order``) over the
    best one's (each 0 to 1); reported × the best lexical score (see the module's item 5).
    The candidates are the first ``FUSION_DEPTH`` of each order, and each counts its value in
    both: ``semantic`` is meaning's order, best first, and may go on with the values of the
    lexical candidates past its first ``FUSION_DEPTH`` (a candidate it gives none for has
    meaning 0; on LoCoMo that cliff let nodes words ranked 11th-30th push out evidence words
    ranked 7th that meaning ranked 40th). ``name``: what orders equal scores (a node's path;
    a raw round's coordinate, for the rounds' channel, ``osk.search.round_vectors``, fuses
    by this rule too)."""
    fused: dict[int, float] = {}
    tiers: dict[int, int] = {}
    bm25: dict[int, float] = {}
    top = max((final for _, _, final, _ in lexical), default=0.0) or 1.0
    for slot, tier, final, lexical_bm25 in lexical[:FUSION_DEPTH]:
        fused[slot] = final / top
        tiers[slot], bm25[slot] = tier, lexical_bm25
    for slot, _ in semantic[:FUSION_DEPTH]:
        fused.setdefault(slot, 0.0)
    weight = semantic_weight(coverage)
    best = max((value for _, value in semantic), default=0.0)
    for slot, value in semantic:
        if slot in fused and best > 0:
            fused[slot] += weight * max(value, 0.0) / best
    def key(slot: int) -> tuple[int, float, str]:
        return (-tiers.get(slot, 0), -fused[slot], name(slot))

    ranked = sorted(fused, key=key)
    words = [slot for slot, *_ in lexical[:WORDS_KEPT]]
    order: list[int] = []
    for depth in range(1, min(k, len(ranked)) + 1):  # at each depth, words' first depth // 2
        owed = next((slot for slot in words[:depth // 2] if slot not in order), None)
        order.append(owed if owed is not None else next(s for s in ranked if s not in order))
    return [(s, tiers.get(s, 0), fused[s] * top, bm25.get(s, 0.0)) for s in order]


def _valid_at(doc: SearchDoc, moment: float) -> bool:
    if doc.valid_from is not None and doc.valid_from > moment:
        return False
    return not (doc.valid_to is not None and doc.valid_to <= moment)


def _second(item: tuple[int, float]) -> float:
    return item[1]
