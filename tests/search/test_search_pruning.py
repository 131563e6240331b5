"""Pruned ranking returns exactly what scoring every document returns: the same top k, the
same scores to the bit, the same order among equal scores, with scope isolation, locality (a
session whose own scope holds no node too), validity (expired, not yet valid, an explicit
moment), supersession and title matches applied after BM25, and through adds, replacements and
removals that leave a term's impact order (``Bm25._impacts_of``) with fresh and stale entries."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from osk.search import bm25 as bm25_module
from osk.search import ranking as ranking_module
from osk.search.bm25 import Bm25
from osk.search.corpus import Corpus, SearchDoc
from osk.search.expand import query_terms
from osk.search.ranking import Ranking, ScopeRule, Visible
from osk.search.tokenize import loose_key, tokenize
from osk.store.titles import title_key
from osk.store.vault import DOMAIN, PERSON, SCOPE

SEED = 26
CORPORA = 3  # each: queries, then a burst of changes, then the queries again
QUERIES = 40
DOCS = 1500
KINDS = ((SCOPE, "atlas"), (SCOPE, "harbor"), (SCOPE, "delta"), (DOMAIN, None), (PERSON, None))
NOW = 1_000_000.0


def vocabulary(rng: random.Random, size: int) -> list[str]:
    """Made-up words that the tokenizer and the query's terms keep as they are."""
    words: list[str] = []
    while len(words) < size:
        word = "".join(rng.choice("bdfgklmnprstvz") + rng.choice("aeiou")
                       for _ in range(rng.randint(2, 4)))
        if word not in words and tokenize(word) == [word] and query_terms(word) == {word: 1.0}:
            words.append(word)
    return words


class Vault:
    """A corpus of random documents, and the changes a vault's writes make to it."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.words = vocabulary(rng, 240)
        self.zipf = [1 / (i + 1) for i in range(len(self.words))]
        self.corpus = Corpus()
        self.tokens: dict[str, list[str]] = {}
        self.serial = 0
        for _ in range(DOCS):
            self.put(self.new_path())

    def new_path(self) -> str:
        self.serial += 1
        space, scope = self.rng.choice(KINDS)
        folder = f"{space}/{scope}" if scope else space
        return f"{folder}/note {self.serial}.md"

    def put(self, path: str) -> None:
        rng = self.rng
        if self.tokens and rng.random() < 0.25:  # a copy of another's words: equal scores
            tokens = list(self.tokens[rng.choice(sorted(self.tokens))])
        else:
            tokens = rng.choices(self.words, self.zipf, k=rng.randint(2, 60))
            if rng.random() < 0.2:  # one word many times: a high tf
                tokens += [rng.choice(self.words)] * rng.randint(2, 9)
        self.tokens[path] = tokens
        space = path.split("/", 1)[0]
        scope = path.split("/")[1] if space == SCOPE else None
        title = " ".join(tokens[:2])
        kind = rng.random()
        others = sorted(self.tokens)
        supersedes = loose_key(" ".join(self.tokens[rng.choice(others)][:2])) \
            if kind < 0.05 else None
        self.corpus.store(SearchDoc(
            path=path, id=path, title=title, summary="", updated="", space=space, scope=scope,
            trust=None, created=NOW - rng.randint(0, 1000),
            valid_from=NOW + 50 if 0.05 <= kind < 0.08 else None,
            valid_to=NOW - 10 if 0.08 <= kind < 0.16 else None,
            supersedes=supersedes, stat=(0, 0, 0), file_hash="", read_ns=0,
            length=len(tokens), title_key=title_key(title), loose_key=loose_key(title),
            content_hash=path), Counter(tokens))

    def change(self, count: int) -> None:
        for _ in range(count):
            roll = self.rng.random()
            if roll < 0.4:
                self.put(self.new_path())
            elif roll < 0.75:
                self.put(self.rng.choice(sorted(self.tokens)))
            else:
                path = self.rng.choice(sorted(self.tokens))
                self.corpus.remove(path)
                del self.tokens[path]

    def query(self) -> str:
        rng = self.rng
        if rng.random() < 0.1:  # a title asked for
            return " ".join(self.tokens[rng.choice(sorted(self.tokens))][:2])
        bm25 = self.corpus.bm25
        known = sorted({t for tokens in self.tokens.values() for t in tokens},
                       key=lambda t: (bm25.df(t), t))
        # a rare word or two among common ones, as a question is: where the bounds decide
        rare = rng.choices(known[: len(known) // 2], k=rng.randint(0, 2))
        common = rng.choices(known[-40:], k=rng.randint(1, 4))
        return " ".join(rng.sample(rare + common, len(rare + common)) or known[-1:])


def exhaustive_top(self: Bm25, query: Any, k: int, *, factor: Callable[[int], float],
                   max_factor: float, floor: float | None = None,
                   ceilings: Any = None) -> dict[int, float]:
    """Every document holding a query term, scored in the order ``top`` sums (no pruning)."""
    base, slope = self._norm_line()
    acc: dict[int, float] = {}
    for term, weight in self.weights(query, floor):
        w = weight * (self.k1 + 1)
        for slot, tf in self.pairs(term):
            acc[slot] = acc.get(slot, 0.0) + w * tf / (tf + (base + slope * self.lengths[slot]))
    return acc


def rankings(corpus: Corpus, rng: random.Random, *, by_kind: bool) -> Ranking:
    """A random session's ranking; ``by_kind``: its isolation as a ``ScopeRule`` (whose hidden
    kinds ``Bm25.top`` never sums), else as a rule of each document."""
    # "tidepool": a session whose own scope holds no node, so no node reaches its locality
    scope = rng.choice(["atlas", "harbor", "tidepool", None])
    visible: Visible | None = None
    if scope is not None and rng.random() < 0.5:  # scope isolation: another scope is hidden
        visible = lambda doc: doc.space != SCOPE or doc.scope == scope  # noqa: E731
        if by_kind:
            visible = ScopeRule(lambda space, scope_: space != SCOPE or scope_ == scope)
    explicit = rng.random() < 0.2
    return Ranking(corpus, scope=scope, visible=visible, moment=NOW, explicit_time=explicit)


@pytest.mark.parametrize("impact_min", [24, None])
def test_pruned_ranking_equals_scoring_every_document(monkeypatch: pytest.MonkeyPatch,
                                                      impact_min: int | None):
    """With impact orders for the lists of this corpus's common words (24: as long lists are
    at 100,000 nodes), and with none (a process that reads the recall file for one query)."""
    if impact_min is None:
        monkeypatch.setattr(Bm25, "KEEPS_IMPACTS", False)
    else:
        monkeypatch.setattr(bm25_module, "IMPACT_MIN", impact_min)
    rng = random.Random(SEED)
    opened = {"pruned": 0, "every": 0}
    top, ceilings, sorted_whole = Bm25.top, Ranking._ceilings, ranking_module.SORTED_WHOLE

    def counting(name: str, scorer: Callable[..., dict[int, float]]) -> Callable[..., Any]:
        def counted(self: Bm25, *args: Any, **kwargs: Any) -> dict[int, float]:
            found = scorer(self, *args, **kwargs)
            opened[name] += len(found)
            return found
        return counted

    walked = {"calls": 0, "opened": 0}  # documents opened from a list walked by its bounds
    walk = Bm25._open

    def watched(self: Bm25, term: str, w: float, acc: dict[int, float], *args: Any) -> None:
        held = len(acc)
        walk(self, term, w, acc, *args)
        walked["calls"] += 1
        walked["opened"] += len(acc) - held

    monkeypatch.setattr(Bm25, "_open", watched)
    compared = 0
    for _ in range(CORPORA):
        vault = Vault(rng)
        for burst in range(2):
            if burst:
                vault.change(300)
            for _ in range(QUERIES):
                query, k = vault.query(), rng.choice([1, 3, 10, 30])
                state = rng.getstate()
                monkeypatch.setattr(Bm25, "top", counting("pruned", top))
                pruned = rankings(vault.corpus, rng, by_kind=True).rank(query, k)
                rng.setstate(state)  # the same session for both
                monkeypatch.setattr(Bm25, "top", counting("every", exhaustive_top))
                # no kind's bound either: every candidate is looked at while any node could
                # still reach the top k with the largest locality there is; and the candidates
                # taken by partial passes, never sorted whole
                monkeypatch.setattr(Ranking, "_ceilings", lambda self: None)
                monkeypatch.setattr(ranking_module, "SORTED_WHOLE", 0)
                every = rankings(vault.corpus, rng, by_kind=False).rank(query, k)
                monkeypatch.setattr(Ranking, "_ceilings", ceilings)
                monkeypatch.setattr(ranking_module, "SORTED_WHOLE", sorted_whole)
                assert pruned == every, (query, k)
                compared += bool(every)
        # impact orders were walked where kept, and never made where not
        assert bool(vault.corpus.bm25._impacts) == (impact_min is not None)
    assert compared > CORPORA * QUERIES  # most queries found something to compare
    assert opened["pruned"] < opened["every"] * 3 // 4  # and pruning left documents unread
    # the walks by the bounds really ran and opened documents (not only the lists closed)
    assert walked["calls"] > CORPORA * QUERIES // 4 and walked["opened"] > 1000


def test_a_kind_the_session_cannot_see_is_never_summed():
    """A ``ScopeRule`` bounds a hidden scope's factor at 0, so ``Bm25.top`` sums none of its
    postings, even for a list it walks whole; the ranking is the one a rule of each document
    gives."""
    rng = random.Random(SEED)
    vault = Vault(rng)
    corpus = vault.corpus
    own = lambda doc: doc.space != SCOPE or doc.scope == "atlas"  # noqa: E731
    rule = ScopeRule(lambda space, scope: space != SCOPE or scope == "atlas")
    plain = Ranking(corpus, scope="atlas", visible=own, moment=NOW, explicit_time=False)
    by_kind = Ranking(corpus, scope="atlas", visible=rule, moment=NOW, explicit_time=False)
    kinds, bounds = by_kind._ceilings() or ((), ())
    hidden = {slot for slot, doc in corpus.docs.items() if not own(doc)}
    assert hidden and all(bounds[kinds[slot]] == 0 for slot in hidden)
    bm25 = corpus.bm25
    # the commonest word with no impact order: its list is walked whole
    common = max((term for term in bm25.all_terms() if bm25.df(term) < bm25_module.IMPACT_MIN),
                 key=bm25.df)
    found = {}
    for ranking in (plain, by_kind):
        found[ranking] = bm25.top({common: 1.0}, 10, factor=ranking.factor, max_factor=2.0,
                                  ceilings=ranking._ceilings())
    assert hidden & found[plain].keys()  # a rule of each document: they are summed
    assert not hidden & found[by_kind].keys()
    assert {slot: score for slot, score in found[plain].items() if slot not in hidden} \
        == found[by_kind]
    for query in (common, vault.query(), vault.query()):
        assert by_kind.rank(query, 10) == plain.rank(query, 10)
