"""BM25 scores equal rank-bm25's BM25Okapi on identical tokens, through every change."""

from __future__ import annotations

import math
import os
import random
from array import array
from collections import Counter

import pytest
from rank_bm25 import BM25Okapi

from osk.search.bm25 import Bm25, IdfShares, idf, mean_idf

TRIALS = int(os.environ.get("OSK_SEARCH_TRIALS", "25"))
TOLERANCE = 1e-9


def random_corpus(rng: random.Random, docs: int, vocabulary: int) -> list[list[str]]:
    words = [f"w{i}" for i in range(vocabulary)]
    weights = [1 / (i + 1) for i in range(vocabulary)]  # Zipf-like: some terms in most docs
    return [rng.choices(words, weights, k=rng.randint(1, 30)) for _ in range(docs)]


def build(corpus: list[list[str]]) -> Bm25:
    index = Bm25()
    for slot, tokens in enumerate(corpus):
        index.add(slot, _counts(tokens), len(tokens))
    return index


def persisted(index: Bm25) -> tuple[list[str], array[int], array[int], array[int]]:
    """The postings as the recall file holds them and ``recallfile.load`` gives them back
    (``Bm25.from_base``'s arguments but the lengths): terms sorted, each term's slots
    ascending with their counts."""
    terms: list[str] = []
    offsets, slots, tfs = array("I", [0]), array("I"), array("I")
    for term in sorted(index.all_terms()):
        held_slots, held_tfs = index.columns(term)
        if held_slots:
            terms.append(term)
            slots.extend(array("I", held_slots))
            tfs.extend(array("I", held_tfs))
            offsets.append(len(slots))
    return terms, offsets, slots, tfs


def _counts(tokens: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for token in tokens:
        counts[token] = counts.get(token, 0) + 1
    return counts


def assert_parity(ours: Bm25, slots: list[int], corpus: list[list[str]], query: list[str]):
    expected = BM25Okapi(corpus).get_scores(query)
    got = ours.scores(query)
    for slot, want in zip(slots, expected, strict=True):
        assert got.get(slot, 0.0) == pytest.approx(float(want), abs=TOLERANCE), (slot, query)


def test_scores_match_bm25okapi_on_random_corpora_including_negative_idf_terms():
    rng = random.Random(5)
    for _ in range(TRIALS):
        corpus = random_corpus(rng, rng.randint(2, 60), rng.randint(3, 40))
        index = build(corpus)
        vocabulary = sorted({t for doc in corpus for t in doc})
        query = rng.choices(vocabulary, k=rng.randint(1, 6)) + ["never-seen"]
        assert_parity(index, list(range(len(corpus))), corpus, query)


def test_a_term_in_more_than_half_the_documents_gets_the_epsilon_floor():
    corpus = [["common", "a"], ["common", "b"], ["common", "c"], ["d"]]
    index = build(corpus)
    reference = BM25Okapi(corpus)
    assert reference.idf["common"] == pytest.approx(0.25 * reference.average_idf)
    assert index.idf("common") == pytest.approx(reference.idf["common"], abs=TOLERANCE)
    assert_parity(index, [0, 1, 2, 3], corpus, ["common", "d"])


def test_a_term_in_exactly_half_the_documents_has_idf_zero_not_the_floor():
    corpus = [["half", "x"], ["half", "y"], ["z"], ["w"]]
    index = build(corpus)
    assert BM25Okapi(corpus).idf["half"] == 0.0
    assert index.idf("half") == 0.0
    assert_parity(index, [0, 1, 2, 3], corpus, ["half", "z"])


def test_a_corpus_where_every_idf_is_negative_scores_negatively_like_the_reference():
    corpus = [["only", "only"]]  # N = 1: log(0.5) - log(1.5) < 0, so the floor is negative
    index = build(corpus)
    assert index.scores(["only"])[0] < 0
    assert_parity(index, [0], corpus, ["only"])


def test_a_repeated_query_term_counts_once_per_occurrence():
    corpus = [["a", "b"], ["b", "c"], ["c", "d"], ["e"]]
    assert_parity(build(corpus), [0, 1, 2, 3], corpus, ["a", "a", "c"])


def test_scores_stay_equal_to_a_fresh_reference_after_adds_removals_and_replacements():
    rng = random.Random(11)
    for _ in range(TRIALS):
        words = [f"t{i}" for i in range(rng.randint(4, 30))]
        live: dict[int, list[str]] = {}
        index = Bm25()
        for step in range(rng.randint(5, 80)):
            action = rng.random()
            if live and action < 0.3:
                slot = rng.choice(sorted(live))
                index.remove(slot, set(live.pop(slot)))
            elif live and action < 0.5:
                slot = rng.choice(sorted(live))
                index.remove(slot, set(live[slot]))
                live[slot] = rng.choices(words, k=rng.randint(1, 20))
                index.add(slot, _counts(live[slot]), len(live[slot]))
            else:
                slot = step + 1000
                live[slot] = rng.choices(words, k=rng.randint(1, 20))
                index.add(slot, _counts(live[slot]), len(live[slot]))
        if not live:
            continue
        slots = sorted(live)
        query = rng.choices(words, k=rng.randint(1, 5))
        assert_parity(index, slots, [live[s] for s in slots], query)


def test_the_mean_idf_kept_through_changes_is_the_one_counted_afresh_to_the_bit():
    # an update keeps N and takes again only the dfs it moved (``IdfShares``); the sum is
    # rounded once, so no order of the dfs, nor any history of changes, moves its last bit
    rng = random.Random(17)
    for _ in range(TRIALS):
        vocabulary = rng.randint(3, 40)
        live = dict(enumerate(random_corpus(rng, rng.randint(2, 30), vocabulary)))
        index = build(list(live.values()))
        for step in range(rng.randint(1, 40)):
            slot = rng.choice(sorted(live))
            index.remove(slot, set(live.pop(slot)))
            # mostly put back (an update: N kept), else gone, or gone and another one added
            for again in [slot] if rng.random() < 0.6 else rng.choice(([], [100 + step])):
                live[again] = random_corpus(rng, 1, vocabulary)[0]
                index.add(again, _counts(live[again]), len(live[again]))
            if not live:
                break
            kept = index.average_idf()
            slots = rng.sample(sorted(live), len(live))
            assert kept == build([live[s] for s in slots]).average_idf()  # another order
            histogram = Counter(index.df(term) for term in index.all_terms())
            assert kept == mean_idf(len(live), dict(reversed(histogram.items())))
            reference = BM25Okapi([live[s] for s in slots]).average_idf
            assert kept == pytest.approx(reference, rel=1e-12)


def test_the_shares_of_the_mean_idf_follow_counts_that_come_and_go():
    # dfs whose count falls to 0 leave the shares' lists (the last one takes the place) and
    # may come back; N moves or stays; each call names only the dfs it moved
    rng = random.Random(23)
    for _ in range(TRIALS):
        histogram: Counter[int] = Counter()
        shares = IdfShares()
        n = rng.randint(30, 60)  # every df at most N, as in a corpus
        for _ in range(rng.randint(1, 40)):
            moved = set()
            for _ in range(rng.randint(0, 6)):
                df = rng.randint(1, 30)
                histogram[df] = max(0, histogram[df] + rng.choice((-2, -1, 1, 2)))
                moved.add(df)
            if rng.random() < 0.4:
                n = rng.randint(30, 60)
            shares.take(n, histogram, moved)
            assert shares.mean() == mean_idf(n, histogram)
            assert shares.terms == sum(histogram.values())
            # the bits of the sum written out: each part count * idf(n, df), rounded once
            kept = {df: count for df, count in histogram.items() if count}
            expected = math.fsum(count * idf(n, df) for df, count in kept.items())
            assert shares.mean() == (expected / sum(kept.values()) if kept else 0.0)


def test_scores_survive_a_round_trip_through_the_persisted_arrays_and_later_changes():
    rng = random.Random(3)
    corpus = random_corpus(rng, 40, 25)
    index = build(corpus)
    terms, offsets, slots, tfs = persisted(index)
    loaded = Bm25.from_base(terms, offsets, slots, tfs, dict(index.lengths))
    query = ["w0", "w1", "w7", "w7", "w20"]
    assert_parity(loaded, list(range(40)), corpus, query)
    loaded.remove(3, set(corpus[3]))
    corpus[3] = ["w1", "w1", "new"]
    loaded.add(3, _counts(corpus[3]), 3)
    assert_parity(loaded, list(range(40)), corpus, query + ["new"])


def test_pruned_top_k_finds_the_same_best_documents_as_scoring_everything():
    rng = random.Random(7)
    skipped = 0
    for _ in range(TRIALS):
        corpus = random_corpus(rng, rng.randint(200, 600), rng.randint(50, 300))
        index = build(corpus)
        factors = {slot: rng.choice([0.0, 1.0, 1.5, 2.0]) for slot in range(len(corpus))}
        vocabulary = sorted({t for doc in corpus for t in doc}, key=lambda t: (index.df(t), t))
        # rare terms pick the candidates; common ones are where pruning skips documents
        query = (rng.choices(vocabulary[: len(vocabulary) // 2], k=rng.randint(1, 3))
                 + rng.choices(vocabulary[-5:], k=rng.randint(1, 4)))
        k = rng.randint(1, 10)
        everything = index.scores(query)
        exhaustive = {s: v * factors[s] for s, v in everything.items()}
        pruned = index.top(query, k, factor=factors.__getitem__, max_factor=2.0)
        best = sorted((v for v in exhaustive.values() if v > 0), reverse=True)[:k]
        found = sorted((v * factors[s] for s, v in pruned.items() if v * factors[s] > 0),
                       reverse=True)[:k]
        assert found == pytest.approx(best, abs=TOLERANCE)
        for slot, value in pruned.items():  # every score handed back is exact
            assert value == pytest.approx(everything[slot], abs=TOLERANCE)
        skipped += len(pruned) < len(exhaustive)
    assert skipped > TRIALS // 5  # the pruning path really ran (about 1 trial in 3 here)


def test_ceilings_by_kind_open_fewer_documents_and_find_the_same_best_ones_exactly():
    """Documents of a kind whose factor bound cannot lift them past the k-th best are never
    opened (a common term's long list adds only the kinds that can still win), and the best
    k and every score handed back are those of scoring everything, to the bit."""
    rng = random.Random(11)
    narrower = 0
    for _ in range(TRIALS):
        corpus = random_corpus(rng, rng.randint(600, 1200), rng.randint(100, 300))
        index = build(corpus)
        bounds = [2.0, 1.5, 1.0]  # one's own scope, Domain/Person, another scope
        kind_of = [rng.choice([0, 1, 1, 2, 2, 2]) for _ in corpus]
        factors = {slot: rng.choice([0.0, bounds[kind], 0.75 * bounds[kind]])
                   for slot, kind in enumerate(kind_of)}
        vocabulary = sorted({t for doc in corpus for t in doc}, key=lambda t: (index.df(t), t))
        # a word or two of middling rarity among common ones, as a question is
        query = (rng.choices(vocabulary[len(vocabulary) // 2:-8], k=rng.randint(1, 2))
                 + rng.choices(vocabulary[-8:], k=rng.randint(2, 3)))
        k = rng.randint(1, 10)
        everything = index.scores(query)
        exhaustive = sorted((v * factors[s] for s, v in everything.items() if v * factors[s] > 0),
                            reverse=True)[:k]
        plain = index.top(query, k, factor=factors.__getitem__, max_factor=2.0)
        bounded = index.top(query, k, factor=factors.__getitem__, max_factor=2.0,
                            ceilings=(kind_of, bounds))
        found = sorted((v * factors[s] for s, v in bounded.items() if v * factors[s] > 0),
                       reverse=True)[:k]
        assert found == exhaustive
        assert all(value == everything[slot] for slot, value in bounded.items())
        assert set(bounded) <= set(plain)
        narrower += len(bounded) < len(plain)
    assert narrower > TRIALS // 5  # the ceilings really shut kinds out (1 trial in 4 here)


def test_an_empty_index_scores_nothing():
    assert Bm25().scores(["anything"]) == {}
    assert Bm25().top(["anything"], 5, factor=lambda s: 1.0, max_factor=1.0) == {}


def test_a_bounded_query_reads_only_its_rarest_terms_within_the_postings_bound():
    rng = random.Random(11)
    for _ in range(TRIALS):
        corpus = random_corpus(rng, rng.randint(100, 400), rng.randint(30, 200))
        index = build(corpus)
        query = rng.choices(sorted({t for doc in corpus for t in doc}), k=rng.randint(1, 8))
        bound = rng.randint(1, 3 * len(corpus))
        kept = index.rarest(query, bound)
        dfs = sorted(index.df(t) for t in set(query))
        assert sum(index.df(t) for t in kept) <= bound
        # the rarest first, and no term left out that the bound had room for in that order
        assert sorted(index.df(t) for t in kept) == dfs[:len(kept)]
        if len(kept) < len(dfs):
            assert sum(dfs[:len(kept) + 1]) > bound
        assert kept == {t: float(query.count(t)) for t in kept}
        got = index.bounded(query, bound)
        want = index.scores(kept)
        assert set(got) == set(want)
        for slot, value in want.items():
            assert got[slot] == pytest.approx(value, abs=TOLERANCE)


@pytest.mark.parametrize(("limit", "top"), [(None, 9), (None, 300), (None, 70_000), (7, 300)])
def test_postings_staged_in_bulk_are_those_added_one_by_one(monkeypatch, limit: int | None,
                                                             top: int):
    """``Staged`` packs a posting's tf beside its slot (a tf of 255 or more kept apart, a slot
    past the packed width turning every term into pairs: ``limit`` narrows it here); the
    index it gives holds every posting exactly, its counts in the narrowest type, and scores
    as one built a document at a time."""
    from osk.search import bm25 as bm25_mod

    if limit is not None:
        monkeypatch.setattr(bm25_mod, "_SLOT_LIMIT", limit)
    rng = random.Random(top)
    corpus = random_corpus(rng, 30, 20)
    counts = [_counts(tokens) for tokens in corpus]
    counts[4]["w1"] = top  # one large count (as many as the packed tf's width, or more)
    counts[11]["w3"] = 255
    staged, one_by_one = bm25_mod.Staged(), Bm25()
    for slot, frequencies in enumerate(counts):
        staged.add(slot, frequencies, sum(frequencies.values()))
        one_by_one.add(slot, frequencies, sum(frequencies.values()))
    built = staged.index()
    assert {built.columns(term)[1].typecode for term in built.all_terms()} == {
        "B" if top < 256 else "H" if top < 65536 else "I"}
    for term in one_by_one.all_terms():
        slots, tfs = built.columns(term)
        assert dict(zip(slots, tfs, strict=True)) == dict(one_by_one.pairs(term)), term
        assert list(slots) == sorted(slots)
    assert set(built.all_terms()) == set(one_by_one.all_terms())
    query = ["w0", "w1", "w3", "w7"]
    assert built.scores(query) == pytest.approx(one_by_one.scores(query), abs=TOLERANCE)
