"""A loaded document's terms, which the index does not hold in memory (issue 26 item 1).

The index loads the postings and the records from the recall file; a document's distinct
terms, needed only to remove its postings when it changes or goes, come from the recall file
when it still holds that very version, and else from the postings themselves. Whichever way,
what is left must be exactly the postings of an index built afresh from the files.
"""

from __future__ import annotations

import json
from array import array
from pathlib import Path
from typing import Any

import pytest
from test_search_bm25 import persisted
from test_search_index import write_node

from osk.search import SearchIndex, recallfile
from osk.search.bm25 import Bm25, mean_idf
from osk.store.vault import Vault

PARAMS = {"tokenizer": 1}


def postings_by_path(index: SearchIndex) -> dict[str, dict[str, int]]:
    """Every term's postings, by path (slots differ between indexes)."""
    corpus = index._corpus
    corpus_len = len(index)  # loads it
    assert corpus_len == len(corpus.docs)
    paths = {slot: doc.path for slot, doc in corpus.docs.items()}
    held: dict[str, dict[str, int]] = {}
    for term in corpus.bm25.all_terms():
        found = {paths[slot]: tf for slot, tf in corpus.bm25.pairs(term)}
        if found:
            held[term] = found
    return held


def rebuilt(vault: Vault, tmp_path: Path) -> dict[str, dict[str, int]]:
    """The postings of an index built afresh from the same files."""
    index = SearchIndex(vault, refresh_interval=3600)
    index.rebuild()
    return postings_by_path(index)


def loaded(vault: Vault) -> SearchIndex:
    """A new process's index, loaded from the recall file, holding no terms."""
    index = SearchIndex(vault, refresh_interval=0.0)
    assert len(index) and index.load_report == "loaded"
    assert not index._corpus._doc_terms  # every document is the file's
    return index


def forbid_scan(monkeypatch: pytest.MonkeyPatch, why: str) -> None:
    """Fail the test if a document's terms are searched for in the postings."""
    def no_scan(self: Bm25, slot: int) -> list[str]:
        raise AssertionError(why)

    monkeypatch.setattr(Bm25, "terms_holding", no_scan)


@pytest.fixture
def written(vault: Vault) -> Vault:
    write_node(vault, "Domain/Crane.md", "the crane dances by the reeds at dawn")
    write_node(vault, "Domain/Heron.md", "the heron fishes in the reeds")
    write_node(vault, "Scope/app/Ibis.md", "the ibis wades where the crane dances")
    first = SearchIndex(vault, refresh_interval=3600)
    first.search("crane")
    first.flush()
    return vault


def edit(vault: Vault) -> None:
    write_node(vault, "Domain/Crane.md", "a crane now sleeps on one leg")
    vault.abs("Domain/Heron.md").unlink()


def test_a_loaded_document_changed_and_removed_leaves_the_postings_of_a_fresh_build(
        written: Vault, tmp_path: Path, monkeypatch):
    index = loaded(written)

    forbid_scan(monkeypatch, "the recall file holds this version: no pass over the postings")
    edit(written)
    assert index.refresh()
    monkeypatch.undo()
    assert postings_by_path(index) == rebuilt(written, tmp_path)
    assert [hit.title for hit in index.search("reeds")] == []
    assert [hit.title for hit in index.search("dawn")] == []


@pytest.mark.parametrize("recall", ["removed", "another version"])
def test_without_this_version_in_the_recall_file_the_terms_come_from_the_postings(
        written: Vault, tmp_path: Path, recall: str):
    index = loaded(written)
    directory = written.state("index")
    if recall == "removed":
        recallfile.remove(directory)
    else:  # another process took a change the loaded index has not seen yet
        write_node(written, "Domain/Crane.md", "a crane with other words: marsh egret")
        other = SearchIndex(written, refresh_interval=0.0)
        other.refresh()
        assert recallfile.stored_terms(directory, index.doc("Domain/Crane.md"),
                                       _params()) is None
    edit(written)
    index.refresh()
    assert postings_by_path(index) == rebuilt(written, tmp_path)


def _params() -> dict[str, Any]:
    from osk.search.versions import PARAMS as params

    return params


@pytest.mark.parametrize("code", ["B", "H", "I"])
def test_a_documents_terms_found_in_the_postings_are_exactly_those_holding_it(code: str):
    # In 16 bits, 0x0102 then 0x0301 are the bytes 02 01 01 03: slot 0x0101 lies across the
    # two, a match that names no posting (alpha does not hold it).
    a, b, c = (2, 3, 1) if code == "B" else (0x0102, 0x0301, 0x0101)
    terms = ["alpha", "beta", "gamma", "delta"]
    lists = [[a, b], [c], [c, a], [c]]
    slots = array(code, [slot for found in lists for slot in found])
    offsets = array("I", [0, 2, 3, 5, 6])
    bm25 = Bm25.from_base(terms, offsets, slots, array("I", [1] * 6), {a: 1, b: 1, c: 1})
    assert sorted(bm25.terms_holding(c)) == ["beta", "delta", "gamma"]
    assert sorted(bm25.terms_holding(a)) == ["alpha", "gamma"]
    assert bm25.terms_holding(b) == ["alpha"]
    assert bm25.terms_holding(7) == []
    bm25.remove(c, ["beta", "gamma", "delta"])  # its base postings are dead from now on
    assert bm25.terms_holding(c) == []
    bm25.add(c, {"beta": 2}, 2)  # the slot taken again: its terms are the overlay's alone
    assert bm25.terms_holding(c) == ["beta"]
    assert [bm25.tf(term, c) for term in terms] == [0, 2, 0, 0]
    assert [bm25.df(term) for term in terms] == [2, 1, 1, 0]


@pytest.mark.parametrize("in_order", [True, False])
def test_membership_is_answered_from_the_postings_given_back_in_order(
        in_order: bool):
    # A bulk build's slots may come out of order (a slot freed and taken again): they are put
    # in order once, and given back in order.
    terms = ["alpha", "beta"]
    slots = array("I", [1, 4, 9] if in_order else [9, 1, 4]) + array("I", [4])
    tfs = array("I", [1, 2, 3, 5])
    bm25 = Bm25.from_base(terms, array("I", [0, 3, 4]), slots, tfs, {1: 3, 4: 9, 9: 3},
                          sorted_slots=in_order)
    for term in terms:
        for slot in range(12):
            assert bm25.holds(term, slot) == (slot in dict(bm25.pairs(term))), (term, slot)
    bm25.add(0, {"beta": 7}, 7)  # a reused low slot lands after the others in the dict
    assert bm25.holds("beta", 0) and not bm25.holds("alpha", 0)
    written, offsets, out_slots, out_tfs = persisted(bm25)
    for i, term in enumerate(written):
        run = list(out_slots[offsets[i]:offsets[i + 1]])
        assert run == sorted(run), term
        assert dict(zip(run, out_tfs[offsets[i]:offsets[i + 1]], strict=True)) == dict(
            bm25.pairs(term))


@pytest.mark.parametrize("seed", [3, 11, 29])
def test_changes_over_a_loaded_base_answer_as_postings_held_whole(seed: int):
    # A loaded base then documents removed, added and their slots taken again (the overlay):
    # every count, list and statistic is that of a plain term -> {slot: tf} model of them.
    import random

    rng = random.Random(seed)
    vocabulary = [f"t{n}" for n in range(12)]
    model: dict[int, dict[str, int]] = {
        slot: {term: rng.randint(1, 3) for term in rng.sample(vocabulary, rng.randint(1, 5))}
        for slot in range(40)}
    terms = sorted({term for held in model.values() for term in held})
    offsets, slots, tfs = array("I", [0]), array("I"), array("I")
    for term in terms:
        for slot in sorted(model):
            if term in model[slot]:
                slots.append(slot)
                tfs.append(model[slot][term])
        offsets.append(len(slots))
    bm25 = Bm25.from_base(terms, offsets, slots, tfs, {s: len(h) for s, h in model.items()})
    bm25.average_idf()  # the histogram kept from here on, through every change
    for _ in range(200):
        slot = rng.randrange(50)
        if slot in model and rng.random() < 0.6:
            bm25.remove(slot, list(model.pop(slot)))
        elif slot not in model:
            held = {term: rng.randint(1, 4) for term in rng.sample(vocabulary, rng.randint(1, 5))}
            bm25.add(slot, held, len(held))
            model[slot] = held
    for term in vocabulary:
        expected = {slot: held[term] for slot, held in model.items() if term in held}
        assert bm25.df(term) == len(expected)
        assert dict(bm25.pairs(term)) == expected
        assert {slot: bm25.tf(term, slot) for slot in range(50) if bm25.tf(term, slot)} == expected
        columns = bm25.columns(term)
        assert list(zip(*columns, strict=True)) == sorted(expected.items())
    for slot, held in model.items():
        assert sorted(bm25.terms_holding(slot)) == sorted(held)
    fresh = Bm25.from_base(*persisted(bm25), {s: len(h) for s, h in model.items()})
    assert fresh.average_idf() == pytest.approx(bm25.average_idf(), rel=1e-12)
    assert all(dict(fresh.pairs(term)) == dict(bm25.pairs(term)) for term in vocabulary)


def test_a_bulk_builds_unordered_slots_are_ordered_once_on_load():
    bm25 = Bm25.from_base(["alpha", "beta"], array("I", [0, 3, 4]), array("I", [5, 1, 3, 2]),
                          array("I", [1, 2, 3, 4]), {1: 1, 2: 1, 3: 1, 5: 1},
                          sorted_slots=False)
    assert [bm25.tf("alpha", slot) for slot in (1, 3, 5)] == [2, 3, 1]
    assert list(zip(*bm25.columns("alpha"), strict=True)) == [(1, 2), (3, 3), (5, 1)]


def counts_on_disk(vault: Vault) -> tuple[str, str | None, dict[int, int]]:
    """(the recall file's version, the version its counts of dfs count, those counts)."""
    import sqlite3

    with sqlite3.connect(recallfile.path_in(vault.state("index"))) as db:
        meta = {key: json.loads(value) for key, value in db.execute(
            "SELECT key, value FROM meta WHERE key IN (?, ?)",
            (recallfile.VERSION, recallfile.COUNTED))}
        counts = dict(db.execute(f"SELECT df, terms FROM {recallfile.COUNTS}"))
    return meta[recallfile.VERSION], meta.get(recallfile.COUNTED), counts


def counted(index: SearchIndex) -> dict[int, int]:
    """The counts of dfs of an index's postings counted afresh, none empty."""
    bm25 = index._corpus.bm25
    fresh = Bm25.from_base(*persisted(bm25), dict(bm25.lengths)).df_counts()
    return {df: terms for df, terms in fresh.items() if terms}


def kept_on_disk(vault: Vault, index: SearchIndex, *, stamped: bool = True) -> None:
    """The recall file's counts are those of ``index`` counted afresh, the mean idf summed
    from them has the bits of the index's own, and they are stamped as counting the file's
    version (``stamped``) or not."""
    version, stamp, counts = counts_on_disk(vault)
    assert counts == counted(index)
    bm25 = index._corpus.bm25
    assert mean_idf(bm25.size, counts) == bm25.average_idf()
    assert (stamp == version) is stamped


def test_the_recall_files_counts_of_dfs_follow_every_write(
        written: Vault, monkeypatch: pytest.MonkeyPatch):
    """Every write changes the rows of the dfs it moved: a hand edit and a removal, a create,
    an update. A load that finds the file holding its documents takes the counts from it (no
    pass over every term). An index another process wrote past since its own last write
    writes them whole (its counts, as its n) and stamps them as counting no version: its
    documents may not be the file's; its next write moves only the rows it moved again."""
    with monkeypatch.context() as forbidden:
        forbidden.setattr(Bm25, "all_terms", lambda self: pytest.fail("counted afresh"))
        index = loaded(written)
        assert index._corpus.bm25._histogram is not None  # adopted from the file
        edit(written)
        assert index.refresh()
    kept_on_disk(written, index)
    write_node(written, "Domain/Stork.md", "a stork nests on the roof")
    assert index.refresh()
    kept_on_disk(written, index)
    write_node(written, "Domain/Stork.md", "a stork nests on the old roof by the reeds")
    assert index.refresh()
    kept_on_disk(written, index)
    other = SearchIndex(written, refresh_interval=0.0)  # another process, writing next
    assert len(other)
    write_node(written, "Domain/Egret.md", "an egret stands still")
    assert other.refresh()
    kept_on_disk(written, other)
    write_node(written, "Domain/Egret.md", "an egret stands very still")
    written.abs("Domain/Stork.md").unlink()
    assert index.refresh()  # takes both the egret's and its edit: its counts are exact ...
    kept_on_disk(written, index, stamped=False)  # ... but it cannot know that
    written_rows: list[int] = []
    real = recallfile._set_counts
    monkeypatch.setattr(recallfile, "_set_counts", lambda db, counts, moved: (
        written_rows.append(-1 if moved is None else len(set(moved))),
        real(db, counts, moved))[1])
    write_node(written, "Domain/Ibis.md", "an ibis")
    assert index.refresh()
    kept_on_disk(written, index, stamped=False)
    assert written_rows and -1 not in written_rows  # the rows it moved, not every one


def test_a_bulk_build_and_a_rebuild_write_the_counts_of_dfs_of_their_documents(
        written: Vault):
    recallfile.remove(written.state("index"))
    built = SearchIndex(written, refresh_interval=0.0)
    assert len(built) and built.load_report.startswith("built")
    kept_on_disk(written, built)
    rebuilt = SearchIndex(written, refresh_interval=0.0)
    rebuilt.rebuild()  # ``osk reindex``
    kept_on_disk(written, rebuilt)
    built = SearchIndex(written, refresh_interval=0.0)
    assert len(built) and built.load_report == "loaded"
    write_node(written, "Domain/Stork.md", "a stork nests on the roof")
    assert built.refresh()
    kept_on_disk(written, built)


def test_the_mean_idf_has_the_same_bits_in_whatever_order_the_counts_are_held():
    """``mean_idf`` sums exactly rounded: a fresh search moves the counts on disk in another
    order than an index counting its terms afresh holds them."""
    import random

    rng = random.Random(7)
    pairs = [(df, rng.randint(1, 5000)) for df in rng.sample(range(1, 60000), 1500)]
    means = set()
    for _ in range(5):
        rng.shuffle(pairs)
        means.add(mean_idf(100000, dict(pairs)))
    assert len(means) == 1


def test_a_write_that_moves_no_documents_terms_keeps_the_version(written: Vault):
    """A version the file holds stored again (a server taking a hand edit a fresh engine
    already wrote) moves no count of dfs: the version, and the counts stamped with it, stay;
    a term gained moves it."""
    index = loaded(written)
    writer = recallfile.RecallWriter(written.state("index"))
    doc = index.doc("Domain/Crane.md")
    assert doc is not None
    slot = index._corpus.slot_of[doc.path]
    frequencies = {term: index._corpus.bm25.tf(term, slot)
                   for term in index._corpus.terms_of(slot)}
    meta = writer.meta()
    before, after = writer.mirror([["put", doc.record(), frequencies]], meta)
    assert before is not None and after == before
    before, after = writer.mirror([["put", doc.record(), {**frequencies, "stork": 1}]], meta)
    assert after != before
