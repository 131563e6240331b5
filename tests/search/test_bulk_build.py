"""The index built straight to disk (``SearchIndex.build_on_disk``, the end of ``osk import``
on a vault with no index yet): the recall file the build in memory writes, the look recorded
with it, and nothing left behind when it fails."""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from test_search_index import write_node

from osk.search import SearchIndex, bulk_build, recallfile
from osk.search.versions import PARAMS
from osk.store.catalog import Catalog
from osk.store.vault import Vault

WORDS = ("heron", "walrus", "tide", "kelp", "ice", "narwhal", "reef", "gull", "storm", "shoal")


def notes(vault: Vault, count: int) -> None:
    """``count`` nodes sharing words unevenly, one word 300 times in one (a count past the
    one byte ``bm25.Staged`` packs), and one file that is not a valid node."""
    for i in range(count):
        words = " ".join(WORDS[(i * j) % len(WORDS)] for j in range(1, 3 + i % 7))
        write_node(vault, f"Domain/sea/Note {i:03d}.md", f"{words} n{i:03d}", summary=f"Sea {i}.")
    write_node(vault, "Domain/sea/Loud.md", " ".join(["storm"] * 300))
    (vault.root / "Domain/sea/Broken.md").write_text("no front matter here\n", encoding="utf-8")


def postings(stored: recallfile.Stored) -> dict[str, tuple[list[int], list[int]]]:
    offsets = stored.offsets
    return {term: (list(stored.slots[offsets[i]:offsets[i + 1]]),
                   list(stored.tfs[offsets[i]:offsets[i + 1]]))
            for i, term in enumerate(stored.terms)}


def recall_rows(directory: Path) -> tuple[list[tuple[object, ...]], ...]:
    with closing(sqlite3.connect(recallfile.path_in(directory))) as db:
        return (db.execute("SELECT * FROM postings ORDER BY term, first").fetchall(),
                db.execute("SELECT row, path, file_hash, content_hash, length, terms, id "
                           "FROM docs ORDER BY row").fetchall(),
                db.execute("SELECT * FROM blobs ORDER BY name").fetchall(),
                db.execute(f"SELECT * FROM {recallfile.COUNTS} ORDER BY df").fetchall())


def without_read_time(stored: recallfile.Stored) -> list[tuple[int, list[object]]]:
    return [(row, doc.record()[:16] + doc.record()[17:]) for row, doc in stored.docs]


def test_an_index_built_on_disk_is_the_one_the_build_in_memory_writes(
        vault: Vault, monkeypatch: pytest.MonkeyPatch):
    notes(vault, 60)
    monkeypatch.setattr(bulk_build, "RUN_POSTINGS", 40)  # many runs; a term spans several
    directory = vault.state("index")
    assert SearchIndex(vault).build_on_disk({}, None)
    on_disk, disk_rows = recallfile.load(directory, PARAMS), recall_rows(directory)
    disk_meta = recallfile.RecallWriter(directory).meta()
    loaded = SearchIndex(vault)
    assert len(loaded) == 61 and loaded.load_report == "loaded"  # not the broken file
    hits = [(hit.path, hit.bm25) for hit in loaded.search("storm heron n007", k=20)]
    loaded.rebuild()  # in memory, as ``osk reindex``
    in_memory = recallfile.load(directory, PARAMS)
    assert postings(on_disk) == postings(in_memory)
    assert without_read_time(on_disk) == without_read_time(in_memory)
    assert list(on_disk.lengths) == list(in_memory.lengths)
    assert (on_disk.slots.typecode, on_disk.tfs.typecode) == ("B", "H")  # loaded narrow
    assert disk_rows == recall_rows(directory)
    memory_meta = recallfile.RecallWriter(directory).meta()
    assert {key: disk_meta[key] for key in ("n", "total_length", "params")} == \
        {key: memory_meta[key] for key in ("n", "total_length", "params")}
    # both count the dfs of the documents they hold (the counts compared with the rows)
    for meta in (disk_meta, memory_meta):
        assert meta[recallfile.COUNTED] == meta[recallfile.VERSION]
    assert hits and hits == [(hit.path, hit.bm25) for hit in loaded.search("storm heron n007",
                                                                           k=20)]


def test_the_look_recorded_with_a_build_on_disk_names_the_files_it_could_not_index(
        vault: Vault):
    notes(vault, 5)
    catalog = Catalog(vault)
    catalog.refresh()
    look = {"seen_ns": 1, "folders": {}}
    assert SearchIndex(vault).build_on_disk(catalog.entries, look)
    broken = catalog.entries["Domain/sea/Broken.md"]
    assert recallfile.read_look(vault.state("index")) == {
        **look, "others": {"Domain/sea/Broken.md": list(broken.stat)}}


def test_a_build_on_disk_leaves_an_index_already_there_alone(vault: Vault):
    notes(vault, 3)
    SearchIndex(vault).refresh()  # built in memory and written
    stored = recallfile.path_in(vault.state("index"))
    before = stored.read_bytes()
    assert not SearchIndex(vault).build_on_disk({}, None)
    assert stored.read_bytes() == before


def held_in(directory: Path) -> list[str]:
    """The files under ``directory`` this process still has open (removed ones included)."""
    fds = Path("/proc/self/fd")
    links = [os.readlink(fd) for fd in fds.iterdir() if fd.is_symlink()] if fds.is_dir() else []
    return [link for link in links if link.startswith(str(directory))]


def test_a_build_on_disk_that_fails_leaves_no_index_and_no_temporary_file(
        vault: Vault, monkeypatch: pytest.MonkeyPatch):
    notes(vault, 20)
    monkeypatch.setattr(bulk_build, "RUN_POSTINGS", 10)

    def broken(*args: object, **kwargs: object) -> int:
        raise RuntimeError("the disk went away")

    monkeypatch.setattr(recallfile.RecallBuild, "end", broken)
    directory = vault.state("index")
    with pytest.raises(RuntimeError, match="disk went away"):
        SearchIndex(vault).build_on_disk({}, None)
    assert sorted(path.name for path in directory.iterdir()) == []
    assert held_in(directory) == []
    monkeypatch.undo()
    index = SearchIndex(vault)
    assert len(index) == 21 and index.load_report == "built: no index on disk"
