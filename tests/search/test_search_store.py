"""The snapshot format round-trips, narrows term counts only when they fit, and refuses damage."""

from __future__ import annotations

from array import array
from pathlib import Path

import pytest

from osk.search import index_files

PARAMS = {"tokenizer": 1}


def snapshot(tf: int) -> index_files.Snapshot:
    return index_files.Snapshot(
        generation="g1", params=PARAMS, terms=["alpha", "beta"],
        docs=[["record-0"], None, ["record-2"]],
        offsets=array("I", [0, 2, 3]), slots=array("I", [0, 2, 2]), tfs=array("I", [1, tf, 3]),
        lengths=array("I", [1, 0, tf + 3]),
    )


@pytest.mark.parametrize(("tf", "code"), [(7, "B"), (300, "H"), (70_000, "I")])
def test_a_snapshot_reads_back_exactly_what_was_written(tmp_path: Path, tf: int, code: str):
    written = snapshot(tf)
    index_files.write_snapshot(tmp_path, written)
    read = index_files.read_snapshot(tmp_path, PARAMS)
    assert read.tfs.typecode == code  # counts in the narrowest type that holds them
    assert read.slots.typecode == "B"  # and so slots
    assert read.offsets.typecode == "I"
    assert list(read.tfs) == list(written.tfs)
    for name in ("generation", "terms", "docs", "offsets", "slots", "lengths"):
        assert getattr(read, name) == getattr(written, name), name


def test_arrays_narrowed_in_parts_read_back_whole(tmp_path: Path, monkeypatch):
    """The snapshot is written as it is made (``write_snapshot``): an array narrowed a few
    items at a time, and the meta a few records at a time, read back as the whole."""
    monkeypatch.setattr(index_files, "CHUNK_ITEMS", 2)
    monkeypatch.setattr(index_files, "CHUNK", 2)
    written = index_files.Snapshot(
        generation="g2", params=PARAMS, terms=["a", "b", "c"],
        docs=[["r0"], ["r1"], None, ["r3"], ["r4"]],
        offsets=array("I", [0, 3, 5, 7]), slots=array("I", [0, 1, 4, 1, 3, 0, 4]),
        tfs=array("I", [1, 2, 3, 300, 5, 6, 7]), lengths=array("I", [7, 302, 0, 5, 10]))
    size = index_files.write_snapshot(tmp_path, written)
    assert size == (tmp_path / index_files.SNAPSHOT).stat().st_size
    read = index_files.read_snapshot(tmp_path, PARAMS)
    assert (read.slots.typecode, read.tfs.typecode) == ("B", "H")
    for name in ("terms", "docs", "offsets", "slots", "tfs", "lengths"):
        assert list(getattr(read, name)) == list(getattr(written, name)), name


def test_a_snapshot_built_with_other_parameters_is_not_trusted(tmp_path: Path):
    index_files.write_snapshot(tmp_path, snapshot(7))
    with pytest.raises(index_files.Damaged, match="parameters"):
        index_files.read_snapshot(tmp_path, {"tokenizer": 2})
    with pytest.raises(index_files.Missing):
        index_files.read_snapshot(tmp_path / "elsewhere", PARAMS)


def test_a_torn_journal_line_ends_the_replay_there(tmp_path: Path):
    index_files.reset_journal(tmp_path, "g1")
    index_files.append_journal(tmp_path, [["del", "Domain/A.md"], ["del", "Domain/B.md"]])
    journal = tmp_path / index_files.JOURNAL
    journal.write_bytes(journal.read_bytes()[:-5])
    ops, unusable = index_files.read_journal(tmp_path, "g1")
    assert ops == [["del", "Domain/A.md"]] and unusable
    assert index_files.read_journal(tmp_path, "another generation") == ([], True)


def _rewritten_meta(path: Path, meta: bytes) -> None:
    """The snapshot at ``path`` with its meta section replaced (sizes and checksum made
    right), the arrays as they were."""
    import json
    import zlib

    data = path.read_bytes()
    end = data.index(b"\n", len(index_files.MAGIC))
    header = json.loads(data[len(index_files.MAGIC):end])
    arrays = data[end + 1 + header["sections"][0][2]:]
    header["sections"][0][2] = len(meta)
    header["crc32"] = zlib.crc32(meta + arrays)
    path.write_bytes(index_files.MAGIC + json.dumps(header).encode() + b"\n" + meta + arrays)


@pytest.mark.parametrize("lazy", [False, True])
def test_records_are_read_one_at_a_time_or_whole_from_any_layout_of_the_meta(
        tmp_path: Path, lazy: bool):
    """The reader decodes the records one at a time as the writer lays the meta out
    (``lazy``: as they are iterated), and the same JSON laid out otherwise whole."""
    import json

    written = snapshot(7)
    index_files.write_snapshot(tmp_path, written)
    path = tmp_path / index_files.SNAPSHOT
    for meta in (None, json.dumps({"docs": written.docs, "terms": written.terms}, indent=1)):
        if meta is not None:
            _rewritten_meta(path, meta.encode())
        read = index_files.read_snapshot(tmp_path, PARAMS, lazy=lazy)
        assert read.terms == written.terms
        assert isinstance(read.docs, list) is not lazy
        assert list(read.docs) == written.docs


@pytest.mark.parametrize("meta", [
    b'{"terms":["alpha","beta"],"docs":[["record-0"],null]}',  # a record short of the arrays
    b'{"terms":["alpha","beta"],"docs":[["record-0"],null,["record-2"],["more"]]}',
    b'{"terms":["alpha","beta"],"docs":[["record-0"],null,["record-2"]',  # no end
    b'{"terms":["alpha","beta"],"docs":[["record-0"] null,["record-2"]]}',
])
def test_records_that_do_not_match_the_arrays_are_damage_whether_read_lazily_or_not(
        tmp_path: Path, meta: bytes):
    index_files.write_snapshot(tmp_path, snapshot(7))
    _rewritten_meta(tmp_path / index_files.SNAPSHOT, meta)
    with pytest.raises(index_files.Damaged):
        index_files.read_snapshot(tmp_path, PARAMS)
    read = index_files.read_snapshot(tmp_path, PARAMS, lazy=True)
    with pytest.raises((index_files.Damaged, ValueError)):
        list(read.docs)


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 1 << 20])
def test_a_lazy_read_decodes_the_meta_from_the_file_a_chunk_at_a_time(
        tmp_path: Path, monkeypatch, chunk: int):
    """``lazy`` reads the meta again as its records are decoded, never its text whole: a
    chunk may end inside a record, a string or a character of several bytes."""
    monkeypatch.setattr(index_files, "CHUNK_BYTES", chunk)
    written = index_files.Snapshot(
        generation="g1", params=PARAMS, terms=["alpha", "왜가리", "beta"],
        docs=[["왜가리는 물고기를 잡는다", 1.5, None], None, [["nested", {"k": "é"}], 2]],
        offsets=array("I", [0, 1, 2, 3]), slots=array("I", [0, 2, 2]),
        tfs=array("I", [1, 2, 3]), lengths=array("I", [1, 0, 5]))
    index_files.write_snapshot(tmp_path, written)
    read = index_files.read_snapshot(tmp_path, PARAMS, lazy=True)
    assert read.terms == written.terms
    assert list(read.docs) == written.docs


def test_a_meta_that_changed_after_its_check_is_damage_at_its_last_record(
        tmp_path: Path, monkeypatch):
    """The meta is checked as the file is read, then read again as it is decoded: bytes
    that are not those the check read end the records with Damaged."""
    index_files.write_snapshot(tmp_path, index_files.Snapshot(
        generation="g1", params=PARAMS, terms=["alpha"],
        docs=[[f"record-{slot:02}"] for slot in range(50)], offsets=array("I", [0, 1]),
        slots=array("I", [0]), tfs=array("I", [1]), lengths=array("I", [1] * 50)))
    monkeypatch.setattr(index_files, "CHUNK_BYTES", 4)  # the last records not read yet
    read = index_files.read_snapshot(tmp_path, PARAMS, lazy=True)
    path = tmp_path / index_files.SNAPSHOT
    data = path.read_bytes()
    with path.open("r+b") as handle:  # the same inode, rewritten in place
        handle.write(data.replace(b"record-49", b"record-94"))
    with pytest.raises(index_files.Damaged):
        list(read.docs)
