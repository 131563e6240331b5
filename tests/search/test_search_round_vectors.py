"""The semantic channel for raw rounds (``osk.search.round_vectors``): a captured round gets
vectors kept on disk and is found by meaning through the real search, in its own project only;
an excluded round is never returned by that path and a redacted one is never ranked by the
meaning of what was redacted; with the channel off, rounds rank as they always did."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from authority_support import FakeTerminal
from hookkit import CLAUDE_SESSION, make_project
from test_search_rounds import captured
from test_semantic import engine as notes
from test_semantic import (
    tiny_model,  # noqa: F401 - the fixture (usefixtures below)
    write,
)

from osk.capture.exclusions import Excluded, excluded
from osk.engine.core import Engine
from osk.search import round_vectors, semantic
from osk.search.round_vectors import RoundVectors, fused_rounds
from osk.search.rounds import MARKER, VECTORS, RoundIndex, vectors_file
from osk.store.vault import Vault
from osk.verbs import exclusion, redaction

REAL_MODEL = semantic.find_model()
TRIP = "the zeppelin to Oslo leaves from hangar nine at dawn"
PARAPHRASE = "airship departure time norway"  # not one word of TRIP, stemmed or not
FILLER = ["we renamed the billing module", "the linter wants shorter lines",
          "coverage dropped on the parser", "merge the docs branch first"]


def talked(vault: Vault, project: Path, *users: str) -> Engine:
    engine = Engine.open(vault, cwd=project)
    for user in users:
        engine.append_raw("talk", user=user, assistant="Noted.")
    return engine


def embedded(vault: Vault, tmp_path: Path,
             *users: str) -> tuple[RoundIndex, RoundVectors, str, list[str]]:
    """One project's rounds (``talked``), indexed and embedded: the index, the vectors, the
    index's build and the records' rels."""
    talked(vault, make_project(tmp_path / "shop"), *users)
    index = RoundIndex(vault)
    index.refresh()
    meaning = RoundVectors.for_vault(vault)
    assert meaning is not None
    meaning.catch_up(index, budget=None)
    built, records = index.records()
    return index, meaning, built, [rel for rel, *_ in records]


def rounds_found(vault: Vault, project: Path, query: str) -> list[str]:
    return [hit.id for hit in Engine.open(vault, cwd=project).search(query, k=10).hits
            if MARKER in hit.markers]


@pytest.mark.usefixtures("tiny_model")
def test_a_round_captured_by_the_stop_hook_gets_vectors_kept_on_disk(vault, tmp_path):
    shop = make_project(tmp_path / "shop")
    captured(vault, shop, tmp_path)
    rel = f"_raw/shop/{CLAUDE_SESSION}.md"
    assert not vectors_file(vault, rel).exists()  # never on the capture path
    engine = Engine.open(vault, cwd=shop)
    assert engine.search("why does the checkout test fail on CI", k=5).hits
    stored = vectors_file(vault, rel)
    meaning = RoundVectors.for_vault(vault)
    assert meaning is not None and stored.exists()
    header = meaning.header(stored)
    assert header is not None and header.numbers == (1, 2, 3, 4, 5)  # the fixture's rounds
    # int8 rows with their scales: a fourth of float32's size
    width = (stored.stat().st_size - header.offset) // sum(header.passages) - 4
    assert width == 8  # the tiny model's vectors
    assert meaning.missing(RoundIndex(vault)) == 0
    before = stored.stat().st_mtime_ns
    engine.search("checkout", k=5)  # nothing new: the file is kept, not written again
    assert stored.stat().st_mtime_ns == before


@pytest.mark.skipif(REAL_MODEL is None, reason="no sentence-embedding model here")
def test_a_round_is_found_by_meaning_in_its_own_project_only(vault, tmp_path, monkeypatch):
    shop, other = make_project(tmp_path / "shop"), make_project(tmp_path / "other")
    talked(vault, shop, *FILLER, TRIP, "lunch at noon")
    monkeypatch.setenv("OSK_SEMANTIC", "0")
    assert "_raw/shop/talk#Round 5" not in rounds_found(vault, shop, PARAPHRASE)  # words alone
    monkeypatch.setenv("OSK_SEMANTIC", "1")
    assert rounds_found(vault, shop, PARAPHRASE)[:1] == ["_raw/shop/talk#Round 5"]
    assert rounds_found(vault, other, PARAPHRASE) == []  # another project never sees it
    # a fresh `osk search --semantic` (no server runs to ask) answers as the engine does
    done = subprocess.run([sys.executable, "-m", "osk", "--vault", str(vault.root), "search",
                           "--json", "--kind", "rounds", "--semantic", PARAPHRASE],
                          capture_output=True, text=True, cwd=shop, env={**os.environ})
    assert done.returncode == 0, done.stderr
    assert [hit["id"] for hit in json.loads(done.stdout)["hits"]][:1] == [
        "_raw/shop/talk#Round 5"]


@pytest.mark.usefixtures("tiny_model")
def test_an_excluded_round_is_never_returned_by_meaning_and_its_vectors_go(
        vault, tmp_path, monkeypatch):
    shop = make_project(tmp_path / "shop")
    talked(vault, shop, *FILLER, TRIP)
    asked = "speed clock game"  # no word of any round: only meaning returns rounds
    assert "_raw/shop/talk#Round 5" in rounds_found(vault, shop, asked)
    rel = "_raw/shop/talk.md"
    assert RoundVectors.for_vault(vault).header(vectors_file(vault, rel)).numbers[-1] == 5
    monkeypatch.setattr(sys, "stdin", FakeTerminal())
    exclusion.exclude(vault, "_raw/shop/talk#Round 5")
    assert not vectors_file(vault, rel).exists()  # dropped with the round's place in the index
    found = rounds_found(vault, shop, asked)
    assert found and "_raw/shop/talk#Round 5" not in found
    header = RoundVectors.for_vault(vault).header(vectors_file(vault, rel))
    assert header is not None and 5 not in header.numbers  # embedded again without it


@pytest.mark.usefixtures("tiny_model")
def test_a_round_the_index_still_holds_is_left_out_once_excluded(vault, tmp_path, monkeypatch):
    """The vectors file may hold a round excluded after it was written (another device's
    exclusion, before any refresh): the query leaves it out by name, as a neighbour too."""
    index, meaning, built, rels = embedded(vault, tmp_path, *FILLER, TRIP)
    query = meaning.query_vector("speed clock game")
    monkeypatch.setattr(round_vectors, "NEIGHBOUR_WEIGHT", 0.0)
    own = dict(meaning.nearest(query, built, rels, excluded(vault), 10))  # each round's own
    monkeypatch.setattr(round_vectors, "NEIGHBOUR_WEIGHT", 0.5)
    hidden = Excluded(rounds=frozenset({"_raw/shop/talk#Round 5"}))
    left = dict(meaning.nearest(query, built, rels, hidden, 10))
    assert set(own) - set(left) == {"_raw/shop/talk#Round 5"}
    r3, r4 = own["_raw/shop/talk#Round 3"], own["_raw/shop/talk#Round 4"]
    assert left["_raw/shop/talk#Round 4"] == pytest.approx(r4 + 0.5 * r3)  # 5 is no neighbour


@pytest.mark.usefixtures("tiny_model")
def test_meaning_gives_the_rounds_words_found_past_its_own_first_ones(vault, tmp_path):
    """``nearest`` goes on past its ``limit`` with the rounds ``also`` names (fusion's
    lexical candidates), each with the value it has in the full order, and ``fused_rounds``
    asks it for the words' rounds."""
    index, meaning, built, rels = embedded(vault, tmp_path, *FILLER, TRIP,
                                           "the billing parser broke twice")
    query = meaning.query_vector("billing parser")
    every = meaning.nearest(query, built, rels, excluded(vault), 10)
    last, middle = every[-1][0], every[len(every) // 2][0]
    got = meaning.nearest(query, built, rels, excluded(vault), 2,
                          also=[last, every[0][0], "_raw/shop/talk#Round 99", middle])
    assert got[:2] == every[:2]  # its first two, then the two asked for past them, once each
    assert sorted(got[2:]) == sorted(pair for pair in every if pair[0] in {last, middle})
    asked: list[list[str]] = []
    original = meaning.nearest
    meaning.nearest = lambda *args: asked.append(list(args[-1])) or original(*args)
    visible = lambda key: True  # noqa: E731
    words = [hit.coordinate for hit in index.search("billing module", k=30, visible=visible)]
    fused_rounds(index, meaning, "billing module", 10, visible)
    assert asked == [words]


@pytest.mark.usefixtures("tiny_model")
def test_a_search_lists_the_index_and_checks_the_vector_files_again_only_once_the_index_moved(
        vault, tmp_path, monkeypatch):
    """The listing is read again (a connection) only when the index file moved, and the
    catch-up looks at the records' files only when the listing moved; a round appended
    moves both, so it is still embedded by the next search's catch-up."""
    _, meaning, _, rels = embedded(vault, tmp_path, *FILLER)
    index = RoundIndex(vault)  # as a process that has not listed it yet
    opened: list[int] = []
    connect = index._open
    monkeypatch.setattr(index, "_open", lambda: opened.append(1) or connect())
    looked: list[Path] = []
    header = meaning.header
    monkeypatch.setattr(meaning, "header", lambda path: looked.append(path) or header(path))
    listed = index.records()
    assert index.records() is listed and len(opened) == 1
    assert meaning.catch_up(index, budget=2.0, only=frozenset(rels), listed=listed) == 0
    assert looked  # the first check against this listing reads the files' headers
    looked.clear()
    assert meaning.catch_up(index, budget=2.0, only=frozenset(rels), listed=index.records()) == 0
    assert not looked and len(opened) == 1
    talked(vault, tmp_path / "shop", "the deploy waits for the cache warmup")
    index.refresh()
    moved = index.records()
    assert len(opened) > 1 and moved != listed
    assert sum(count for *_, count in moved[1]) == len(FILLER) + 1
    assert meaning.catch_up(index, budget=None, only=frozenset(rels), listed=moved) == 0
    assert looked and meaning.missing(index) == 0


@pytest.mark.usefixtures("tiny_model")
def test_a_redacted_round_is_ranked_by_its_redacted_text_only(vault, tmp_path, monkeypatch):
    shop = make_project(tmp_path / "shop")
    engine = talked(vault, shop, "the cache ttl is 60 seconds", "a speed hack in the game")
    rel = "_raw/shop/talk.md"
    engine.search("clock", k=5)
    meaning = RoundVectors.for_vault(vault)
    old = meaning.header(vectors_file(vault, rel))
    monkeypatch.setattr("sys.stdin.isatty", lambda: True, raising=False)
    monkeypatch.setattr("osk.authority.protection.require_person", lambda *a, **k: None)
    redaction.redact(vault, redaction.parse("_raw/shop/talk"), "speed hack")
    index = RoundIndex(vault)
    index.refresh()  # as the next search does first: rebuilt (a redaction drops the index)
    built, _ = index.records()
    query = meaning.query_vector("clock")
    assert old.built != built  # the file predates this index: not used until checked again
    assert meaning.nearest(query, built, [rel], excluded(vault), 2) == []
    engine.search("clock", k=5)  # checks it, embedding again only the round that changed
    new = meaning.header(vectors_file(vault, rel))
    assert new.built == built
    first, second = slice(0, 16), slice(16, 32)  # each round's text hash, 16 characters
    assert new.texts[first] == old.texts[first] and new.texts[second] != old.texts[second]
    kept = dict(index.kept_rounds(rel)[2])
    assert "speed hack" not in kept[2]
    got = dict(meaning.nearest(query, built, [rel], excluded(vault), 2))
    vectors = meaning.model.load().embed([kept[1], kept[2]])
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    cosines = vectors @ query
    expected = cosines[1] + 0.5 * cosines[0]  # its own text's meaning, and its neighbour's
    assert abs(got["_raw/shop/talk#Round 2"] - expected) < 0.02  # int8: close, not equal


@pytest.mark.usefixtures("tiny_model")
def test_with_the_channel_off_rounds_rank_by_words_and_nothing_is_embedded(
        vault, tmp_path, monkeypatch):
    shop = make_project(tmp_path / "shop")
    talked(vault, shop, *FILLER, TRIP)
    monkeypatch.setenv("OSK_SEMANTIC", "0")
    index = RoundIndex(vault)
    words = [hit.coordinate for hit in index.search("billing parser", k=10,
                                                    visible=lambda key: True)]
    assert rounds_found(vault, shop, "billing parser") == words
    assert rounds_found(vault, shop, "speed clock game") == []  # no word: nothing
    assert not vault.state("index", VECTORS).exists()


@pytest.mark.usefixtures("tiny_model")
def test_words_first_rounds_stay_when_meaning_is_fused(vault, tmp_path):
    """The nodes' rule: the fused first c hold words' first c // 2, and a query the best
    round's words cover in full keeps the words' order."""
    shop = make_project(tmp_path / "shop")
    talked(vault, shop, *FILLER, TRIP, "the billing parser broke twice")
    index = RoundIndex(vault)
    visible = lambda key: True  # noqa: E731
    meaning = RoundVectors.for_vault(vault)
    for query in ("billing parser", "billing module renamed", "zeppelin hangar dawn"):
        words = [hit.coordinate for hit in index.search(query, k=10, visible=visible)]
        fused = [hit.coordinate for hit in fused_rounds(index, meaning, query, 10, visible)]
        for depth in range(1, len(fused) + 1):
            assert set(words[:min(depth // 2, 5)]) <= set(fused[:depth])
    covered = "zeppelin hangar dawn"
    words = [hit.coordinate for hit in index.search(covered, k=10, visible=visible)]
    fused = [hit.coordinate for hit in fused_rounds(index, meaning, covered, 10, visible)]
    assert fused[:len(words)] == words


@pytest.mark.usefixtures("tiny_model")
def test_a_query_the_best_round_covers_in_full_is_ranked_by_words_without_its_vector(
        vault, tmp_path, monkeypatch):
    """Meaning's weight is 0 there and the words fill every place: ``fuse`` would give the
    words' order whatever meaning said, so the rounds' channel does not embed the query."""
    shop = make_project(tmp_path / "shop")
    talked(vault, shop, *FILLER, TRIP, "the billing parser broke twice")
    index = RoundIndex(vault)
    visible = lambda key: True  # noqa: E731
    meaning = RoundVectors.for_vault(vault)
    asked: list[str] = []
    query_vector = meaning.query_vector
    monkeypatch.setattr(meaning, "query_vector", lambda query: asked.append(query) or
                        query_vector(query))
    words = [hit.coordinate for hit in index.search("billing parser", k=3, visible=visible)]
    assert len(words) == 3
    fused = fused_rounds(index, meaning, "billing parser", 3, visible)
    assert [hit.coordinate for hit in fused] == words and asked == []
    # more places than the words fill, or a term the best round lacks: meaning is asked
    assert len(fused_rounds(index, meaning, "billing parser", 10, visible)) > 3
    fused_rounds(index, meaning, "billing zeppelin", 3, visible)
    assert asked == ["billing parser", "billing zeppelin"]


@pytest.mark.usefixtures("tiny_model")
def test_osk_embed_embeds_the_rounds_too(vault, tmp_path):
    shop = make_project(tmp_path / "shop")
    talked(vault, shop, *FILLER)
    done = subprocess.run([sys.executable, "-m", "osk", "--vault", str(vault.root), "embed"],
                          capture_output=True, text=True, env={**os.environ}, cwd=vault.root)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith("every raw round has its vectors (")
    header = RoundVectors.for_vault(vault).header(vectors_file(vault, "_raw/shop/talk.md"))
    assert header is not None and header.numbers == (1, 2, 3, 4)


@pytest.mark.usefixtures("tiny_model")
def test_the_mcp_server_embeds_the_rounds_in_the_background_before_any_search(vault, tmp_path):
    import time

    shop = make_project(tmp_path / "shop")
    talked(vault, shop, *FILLER)
    RoundIndex(vault).refresh()  # as the Stop hook leaves it
    stored = vectors_file(vault, "_raw/shop/talk.md")
    server = subprocess.Popen([sys.executable, "-m", "osk", "mcp", "--vault", str(vault.root)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, cwd=vault.root, env={**os.environ})
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not stored.exists():  # polling, not timing
            time.sleep(0.05)
        header = RoundVectors.for_vault(vault).header(stored)
        assert header is not None and header.numbers == (1, 2, 3, 4)
    finally:
        server.stdin.close()
        server.wait(timeout=30)
        server.stdout.close()
        server.stderr.close()


@pytest.mark.usefixtures("tiny_model")
def test_a_search_embeds_its_query_once_for_the_nodes_and_the_rounds(vault, tmp_path,
                                                                     monkeypatch):
    shop = make_project(tmp_path / "shop")
    notes(vault)  # a cluster to write a node into
    engine = talked(vault, shop, *FILLER)
    write(engine, "Cache ttl", "The cache ttl is 60 seconds.")
    engine.search("billing", k=5)  # nodes and rounds embedded
    encoder = RoundVectors.for_vault(vault).model.load()  # the one every index here shares
    asked: list[list[str]] = []
    embed_query = encoder.embed_query
    monkeypatch.setattr(encoder, "embed_query", lambda texts: asked.append(texts) or
                        embed_query(texts))
    hits = engine.search("a question asked once of the nodes and the rounds", k=5).hits
    assert hits and asked == [["a question asked once of the nodes and the rounds"]]


@pytest.mark.usefixtures("tiny_model")
def test_a_failing_rounds_channel_leaves_the_rounds_ranked_by_words(vault, tmp_path,
                                                                    monkeypatch, caplog):
    shop = make_project(tmp_path / "shop")
    engine = talked(vault, shop, *FILLER)

    def broken(*args: object) -> None:
        raise RuntimeError("the model's weights are unreadable")

    monkeypatch.setattr(RoundVectors, "search", broken)
    words = [hit.coordinate for hit in RoundIndex(vault).search("billing parser", k=10,
                                                                 visible=lambda key: True)]
    found = [hit.id for hit in engine.search("billing parser", k=10).hits
             if MARKER in hit.markers]
    assert found == words and "the rounds' semantic channel failed" in caplog.text
