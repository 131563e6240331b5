"""The index's one store, the recall file, loaded whole (``recallfile.load``): it gives back
exactly what was written, each array in a type wide enough for it, and refuses damage with
the reason."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from osk.search import recallfile
from osk.search.bm25 import Bm25
from osk.search.corpus import Corpus, SearchDoc

PARAMS = {"tokenizer": 1}


def doc(path: str, length: int) -> SearchDoc:
    return SearchDoc(path, f"id-{path}", path.title(), "A summary.", "2026-12-06T10:00:00Z",
                     "Domain", None, None, 1.0e9, None, None, None, (10, 20, 30), "f" * 64,
                     40, length, path, path, "c" * 64)


def written(directory: Path, postings: dict[int, dict[str, int]]) -> None:
    """A recall file holding a document a row of ``postings`` (row -> term -> count), as a
    build writes one."""
    bm25, docs = Bm25(), {}
    build = recallfile.RecallBuild(recallfile.path_in(directory))
    try:
        for row, counts in sorted(postings.items()):
            docs[row] = doc(f"doc{row}", sum(counts.values()))
            bm25.add(row, counts, docs[row].length)
            build.put(row, docs[row], counts)
        build.finish(docs, bm25, {"n": len(docs), "total_length": bm25.total_length,
                                  "params": PARAMS})
    finally:
        build.abandon()


@pytest.mark.parametrize(("rows", "tf", "slots", "tfs"), [
    ((0, 2), 7, "B", "B"),
    ((0, 300), 300, "H", "H"),
    # Rows past 65,536: a block whose base is there stores its rows counted from the 65,536
    # rows its base lies in, in 8, 16 or 32 bits (``gamma`` in each, ``delta`` in 16 bits).
    ((3, 65_541, 70_000, 140_001, 140_002, 210_000), 70_000, "I", "I"),
])
def test_the_store_loads_back_exactly_what_was_written(tmp_path: Path, rows: tuple[int, ...],
                                                       tf: int, slots: str, tfs: str):
    postings: dict[int, dict[str, int]] = {
        row: {"alpha": 1 + i, "beta": tf} if i % 2 == 0 else {"alpha": 2}
        for i, row in enumerate(rows)}
    for row in rows[1:2] if len(rows) > 2 else ():
        postings[row]["gamma"] = 3  # alone: a block of 8-bit rows above 65,536
    for row in rows[3:5] if len(rows) > 2 else ():
        postings[row]["delta"] = 4  # 16-bit rows above 131,072
    for row in rows[2::3] if len(rows) > 2 else ():
        postings[row]["epsilon"] = 5  # 32-bit rows above 65,536 (70,000 and 210,000)
    written(tmp_path, postings)
    stored = recallfile.load(tmp_path, PARAMS)
    assert [(row, held.path, held.length) for row, held in stored.docs] == [
        (row, f"doc{row}", sum(postings[row].values())) for row in rows]
    assert stored.docs[0][1] == doc(f"doc{rows[0]}", stored.docs[0][1].length)
    assert (stored.slots.typecode, stored.tfs.typecode) == (slots, tfs)  # wide enough
    assert stored.terms == sorted({term for held in postings.values() for term in held})
    for i, term in enumerate(stored.terms):
        span = slice(stored.offsets[i], stored.offsets[i + 1])
        assert list(zip(stored.slots[span], stored.tfs[span], strict=True)) == [
            (row, counts[term]) for row, counts in sorted(postings.items()) if term in counts]
    assert stored.counts is not None  # each term's df counted
    assert sum(stored.counts.values()) == len(stored.terms)
    assert stored.version is not None and stored.meta["params"] == PARAMS
    corpus = Corpus.from_store(stored)  # a row is a slot, the rows between them free
    assert {slot: held.path for slot, held in corpus.docs.items()} == {
        row: f"doc{row}" for row in rows}
    assert corpus.bm25.df("alpha") == len(rows)
    assert corpus.bm25.tf("beta", rows[0]) == tf


def test_a_store_of_other_parameters_or_none_is_refused_with_the_reason(tmp_path: Path):
    written(tmp_path, {0: {"alpha": 1}})
    with pytest.raises(recallfile.Unusable, match="parameters"):
        recallfile.load(tmp_path, {"tokenizer": 2})
    with pytest.raises(recallfile.Unusable, match="no recall file"):
        recallfile.load(tmp_path / "elsewhere", PARAMS)


@pytest.mark.parametrize(("change", "reason"), [
    ("UPDATE docs SET length = 9 WHERE row = 1", "length of row 1"),
    ("UPDATE docs SET record = 'not json' WHERE row = 0", "damaged"),
    ("UPDATE postings SET tfs = x'5a01' WHERE term = 'alpha'", "postings block"),
    ("UPDATE postings SET tfs = x'4201' WHERE term = 'beta'", "one count a row"),
    # one block a count short and the next one over: as many counts as rows in all
    ("UPDATE postings SET tfs = CASE term WHEN 'alpha' THEN x'4201' ELSE x'42010101' END",
     "one count a row"),
    ("DELETE FROM blobs", "lengths"),
    ("UPDATE dfs SET terms = -1", "counts of document frequencies"),
])
def test_a_damaged_store_is_refused_with_the_reason(tmp_path: Path, change: str, reason: str):
    written(tmp_path, {0: {"alpha": 1, "beta": 2}, 1: {"alpha": 3, "beta": 1}})
    with closing(sqlite3.connect(recallfile.path_in(tmp_path))) as db, db:
        db.execute(change)
    with pytest.raises(recallfile.Unusable, match=reason):
        recallfile.load(tmp_path, PARAMS)
