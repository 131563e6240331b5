"""The semantic channel: fusion, the vector store, and search with and without it."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from semantic_support import write_tiny_model

from osk.calls.request import NewNode
from osk.engine.core import Engine
from osk.search import ranking, semantic
from osk.search.corpus import Corpus, SearchDoc
from osk.search.expand import query_terms
from osk.search.semantic import Vectors
from osk.search.tokenize import tokenize
from osk.store.vault import DOMAIN, PERSON, SCOPE, Vault

REAL_MODEL = semantic.find_model()


@pytest.fixture
def tiny_model(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    folder = write_tiny_model(tmp_path_factory.mktemp("model"))
    monkeypatch.setenv("OSK_MODEL_DIR", str(folder))
    monkeypatch.setenv("OSK_SEMANTIC", "1")
    return folder


def tiny_store(directory: Path, folder: Path) -> Vectors:
    return Vectors(directory, semantic.english_model(folder))


def engine(vault: Vault) -> Engine:
    opened = Engine.open(vault, cwd=vault.root, scope=None)
    if not vault.abs("Domain/notes/notes.md").exists():
        write(opened, "notes", "The notes of these tests.", summary="the cluster hub")
    return opened


def write(eng: Engine, title: str, body: str, summary: str = "a note") -> None:
    eng.create_node(NewNode(title, summary, body, space="domain", cluster="notes", drafter="test"))


# -- fusion ---------------------------------------------------------------------------------
def _path_of(corpus: Corpus) -> Callable[[int], str]:
    return lambda slot: corpus.docs[slot].path


class _Docs(Corpus):
    def __init__(self, paths: dict[int, str]) -> None:
        super().__init__()
        self.docs = {slot: type("Doc", (), {"path": path})() for slot, path in paths.items()}


def test_fusion_adds_each_channel_relative_to_its_best_in_the_lexical_scores_units():
    corpus = _Docs({1: "a", 2: "b", 3: "c", 4: "d"})
    lexical = [(1, 0, 4.0, 2.0), (2, 0, 2.0, 1.0)]
    weight = ranking.SEMANTIC_WEIGHT  # coverage 0: the words explain none of the query
    semantic_order = [(3, 0.6), (2, 0.6 * 0.8), (4, 0.0)]
    fused = ranking.fuse(lexical, semantic_order, 10, _path_of(corpus), coverage=0.0)
    scores = {slot: score for slot, _, score, _ in fused}
    expected = {1: 4.0, 2: 4.0 * (0.5 + weight * 0.8), 3: 4.0 * weight, 4: 0.0}
    assert scores == pytest.approx(expected)
    # by the fused score, but words' first node keeps a place in the first two
    assert sorted(expected, key=lambda s: -expected[s]) == [3, 2, 1, 4]
    assert [slot for slot, *_ in fused] == [3, 1, 2, 4]
    assert dict((slot, bm25) for slot, *_, bm25 in fused) == {1: 2.0, 2: 1.0, 3: 0.0, 4: 0.0}
    # a query whose words match weakly keeps a low top score: the scale is the lexical one
    weak = ranking.fuse([(1, 0, 0.5, 0.5)], [(1, 0.6)], 10, _path_of(corpus), coverage=0.0)
    assert weak[0][2] == pytest.approx(0.5 * (1 + weight))
    # nothing rises above the floor: the nodes stay candidates at the lexical scores alone
    flat = ranking.fuse([(1, 0, 0.5, 0.5)], [(2, 0.0)], 10, _path_of(corpus), coverage=0.0)
    assert [(slot, score) for slot, _, score, _ in flat] == [(1, 0.5), (2, 0.0)]


def test_the_semantic_weight_falls_as_the_best_lexical_hit_covers_more_of_the_query():
    weights = [ranking.semantic_weight(c / 10) for c in range(11)]
    assert weights[0] == ranking.SEMANTIC_WEIGHT and weights[10] == 0.0
    assert all(a > b for a, b in itertools.pairwise(weights))
    assert weights[5] == pytest.approx(ranking.SEMANTIC_WEIGHT * 0.5 ** ranking.COVERAGE_POWER)
    assert ranking.semantic_weight(1.5) == 0.0  # clamped: never negative
    assert ranking.semantic_weight(-1.0) == ranking.SEMANTIC_WEIGHT


def test_a_query_its_best_lexical_hit_covers_keeps_the_lexical_order():
    """The near-title case: lexical A then its related sibling B; C and D are close in
    meaning but not what was asked. Covered in full, the words decide; covered barely, the
    meaning may lift C and D past B (with one weight for every query it always did)."""
    corpus = _Docs({1: "a", 2: "b", 3: "c", 4: "d"})
    lexical = [(1, 0, 10.0, 10.0), (2, 0, 3.0, 3.0)]
    semantic_order = [(1, 0.8), (3, 0.4), (4, 0.35), (2, 0.05)]
    covered = ranking.fuse(lexical, semantic_order, 4, _path_of(corpus), coverage=1.0)
    assert [slot for slot, *_ in covered] == [1, 2, 3, 4]
    assert [score for _, _, score, _ in covered[:2]] == pytest.approx([10.0, 3.0])
    nearly = ranking.fuse(lexical, semantic_order, 4, _path_of(corpus), coverage=0.9)
    assert [slot for slot, *_ in nearly][:2] == [1, 2]
    barely = ranking.fuse(lexical, semantic_order, 4, _path_of(corpus), coverage=0.2)
    assert [slot for slot, *_ in barely] == [1, 3, 4, 2]


def test_a_title_match_stays_first_whatever_the_semantic_channel_says():
    corpus = _Docs({1: "a", 2: "b"})
    fused = ranking.fuse([(1, 0, 5.0, 5.0), (2, 2, 0.1, 0.1)], [(1, 1.0)], 2, _path_of(corpus),
                         coverage=0.0)
    assert [(slot, tier) for slot, tier, *_ in fused] == [(2, 2), (1, 0)]


def _corpus(notes: dict[str, tuple[str, str | None, str]],
            supersedes: dict[str, str] | None = None) -> Corpus:
    """A corpus of notes path -> (space, scope, text), indexed as the index does; a note in
    ``supersedes`` names the note it replaces."""
    corpus = Corpus()
    for path, (space, scope, text) in notes.items():
        terms = tokenize(text)
        corpus.store(SearchDoc(
            path=path, id=path, title=path, summary="", updated="", space=space, scope=scope,
            trust=None, created=None, valid_from=None, valid_to=None,
            supersedes=(supersedes or {}).get(path),
            stat=(0, 0, 0), file_hash="", read_ns=0, length=len(terms), title_key=path,
            loose_key=path, content_hash=path), Counter(terms))
    return corpus


def _ranking(corpus: Corpus, scope: str | None = None) -> ranking.Ranking:
    return ranking.Ranking(corpus, scope=scope, visible=None, moment=0.0, explicit_time=False)


def test_the_floor_comes_before_locality_so_a_local_note_unlike_the_query_gets_nothing():
    corpus = _corpus({"own": (SCOPE, "game", "tick"), "person": (PERSON, None, "commit"),
                      "other": (SCOPE, "docs", "site")})
    own, person, other = (corpus.slot_of[name] for name in ("own", "person", "other"))
    floor = ranking.SEMANTIC_FLOOR
    # the own-project note is below the floor: × 2.0 would lift it past it (0.16 > 0.1), but
    # a note that is not about the question is not made about it by being local
    similarities = {own: floor * 0.8, person: floor + 0.2, other: floor + 0.1}
    order = _ranking(corpus, scope="game").semantic_order(similarities)
    assert [slot for slot, _ in order] == [person, other, own]
    assert [value for _, value in order] == pytest.approx(
        [0.2 * ranking.LOCALITY_SHARED, 0.1 * ranking.LOCALITY_OTHER, 0.0])


def test_a_node_that_supersedes_a_visible_one_is_as_close_in_meaning_as_its_predecessor():
    notes = {"old": (DOMAIN, None, "deploys go out on fridays"),
             "new": (DOMAIN, None, "deploys go out on tuesdays now"),
             "aside": (DOMAIN, None, "the office plants")}
    corpus = _corpus(notes, supersedes={"new": "old"})
    old, new, aside = (corpus.slot_of[name] for name in ("old", "new", "aside"))
    view = _ranking(corpus)
    order = view.semantic_order({old: 0.7, new: 0.3, aside: 0.5})
    demoted = ranking.VALIDITY_DEMOTION * ranking.LOCALITY_SHARED
    assert [slot for slot, _ in order] == [new, old, aside]
    assert [value for _, value in order] == pytest.approx(
        [0.6 * ranking.LOCALITY_SHARED, 0.6 * demoted, 0.4 * ranking.LOCALITY_SHARED])
    assert view.similarity(new) == pytest.approx(0.7)  # the cosine it was ranked by
    assert view.similarity(old) == pytest.approx(0.7)
    # found by meaning only through its predecessor: the successor still comes in, first
    only = _ranking(corpus).semantic_order({old: 0.7})
    assert [slot for slot, _ in only] == [new, old]
    # closer itself: it keeps its own similarity
    closer = _ranking(corpus)
    assert closer.semantic_order({old: 0.4, new: 0.8})[0][0] == new
    assert closer.similarity(new) == pytest.approx(0.8)
    assert closer.similarity(aside) == 0.0  # not given: not close


def test_a_hidden_predecessor_passes_nothing_on_to_its_successor():
    corpus = _corpus({"old": (SCOPE, "secret", "deploys go out on fridays"),
                      "new": (DOMAIN, None, "deploys go out on tuesdays now")},
                     supersedes={"new": "old"})
    old, new = corpus.slot_of["old"], corpus.slot_of["new"]
    view = ranking.Ranking(corpus, scope="game", moment=0.0, explicit_time=False,
                           visible=lambda doc: doc.scope != "secret")
    order = view.semantic_order({old: 0.9, new: 0.2})
    assert [slot for slot, _ in order] == [new]
    assert order[0][1] == pytest.approx(0.1 * ranking.LOCALITY_SHARED)
    assert view.similarity(new) == pytest.approx(0.2)


def test_coverage_is_the_share_of_the_querys_term_weight_a_note_holds():
    corpus = _corpus({"a": (DOMAIN, None, "lychee checks broken anchors in the docs"),
                      "b": (DOMAIN, None, "the docs site builds with astro"),
                      "c": (DOMAIN, None, "release notes for the game")})
    view = _ranking(corpus)
    a, b = corpus.slot_of["a"], corpus.slot_of["b"]
    assert view.coverage("lychee broken anchors", a) == pytest.approx(1.0)
    assert view.coverage("lychee broken anchors", b) == 0.0
    weights = dict(corpus.bm25.weights(query_terms("lychee docs"), ranking.IDF_FLOOR))
    docs, lychee = (weights[tokenize(word)[0]] for word in ("docs", "lychee"))
    expected = docs / (docs + lychee)
    assert view.coverage("lychee docs", b) == pytest.approx(expected)
    assert 0.0 < expected < 0.5  # the rarer word weighs more
    assert view.coverage("lychee docs", None) == 0.0  # no lexical hit at all
    assert view.coverage("zzz unknown", a) == 0.0  # no word the corpus knows


# -- the vector store -----------------------------------------------------------------------
def test_vectors_are_saved_reloaded_and_pruned(tmp_path: Path, tiny_model: Path):
    texts = {"k1": "the cache ttl", "k2": "release build", "k3": "game clock"}
    store = tiny_store(tmp_path / "vectors", tiny_model)
    assert store.catch_up(texts, texts.get, budget=None) == 0
    again = tiny_store(tmp_path / "vectors", tiny_model)
    assert all(again.has(key) for key in texts)
    near = again.nearest("the cache ttl", 2)
    assert [key for key, _ in near] == ["k1", max(["k2", "k3"], key=dict(
        again.nearest("the cache ttl", 3)).__getitem__)]
    assert near[0][1] == pytest.approx(1.0) and near[0][1] > near[1][1]
    again.forget_except({"k1"})
    reloaded = tiny_store(tmp_path / "vectors", tiny_model)
    assert reloaded.has("k1") and not reloaded.has("k2")


def test_nearest_reports_each_models_cosines_on_the_common_scale_and_asks_as_a_query(
        tmp_path: Path, tiny_model: Path):
    texts = {"k1": "the cache ttl", "k2": "release build", "k3": "game clock"}
    plain = tiny_store(tmp_path / "plain", tiny_model)
    plain.catch_up(texts, texts.get, budget=None)
    raw = dict(plain.nearest("the cache ttl", 3))
    scaled = Vectors(tmp_path / "scaled", semantic.Model(
        semantic.ENGLISH, tiny_model, "model.safetensors", scale=(4.0, -3.0)))
    scaled.catch_up(texts, texts.get, budget=None)
    assert dict(scaled.nearest("the cache ttl", 3)) == pytest.approx(
        {key: 4.0 * value - 3.0 for key, value in raw.items()})

    class Asymmetric:  # a model that embeds a question unlike a passage (as E5 does)
        def embed(self, batch: list[str]) -> np.ndarray:
            return np.eye(3, dtype=np.float32)[[int(text[-1]) for text in batch]]

        def embed_query(self, batch: list[str]) -> np.ndarray:
            return np.eye(3, dtype=np.float32)[[2] * len(batch)]

    store = tiny_store(tmp_path / "asymmetric", tiny_model)
    store._encoder = Asymmetric()
    rows = {"a": "passage 0", "b": "passage 2", "c": "passage 1"}
    store.catch_up(rows, rows.get, budget=None)
    assert [key for key, _ in store.nearest("passage 0", 3)][0] == "b"  # by embed_query


def test_a_save_cut_between_its_two_files_is_recomputed_not_trusted(
        tmp_path: Path, tiny_model: Path):
    texts = {"k1": "the cache ttl", "k2": "release build"}
    tiny_store(tmp_path / "vectors", tiny_model).catch_up(texts, texts.get, budget=None)
    keys = (tmp_path / "vectors" / "keys.json").read_text(encoding="utf-8")
    more = {**texts, "k3": "game clock"}
    tiny_store(tmp_path / "vectors", tiny_model).catch_up(more, more.get, budget=None)
    (tmp_path / "vectors" / "keys.json").write_text(keys, encoding="utf-8")  # the old names
    cut = tiny_store(tmp_path / "vectors", tiny_model)
    assert not cut.has("k1")  # the pair does not match: nothing is trusted
    assert cut.catch_up(more, more.get, budget=None) == 0 and cut.has("k3")


def test_a_text_that_is_gone_is_skipped_and_a_zero_budget_embeds_nothing(
        tmp_path: Path, tiny_model: Path):
    store = tiny_store(tmp_path / "vectors", tiny_model)
    assert store.catch_up(["gone", "k1"], {"k1": "cache"}.get, budget=0.0) == 2
    assert store.catch_up(["gone", "k1"], {"k1": "cache"}.get, budget=None) == 1  # "gone"
    assert store.has("k1") and not store.has("gone")


def test_a_paced_catch_up_rests_between_batches_and_an_unpaced_one_does_not(
        tmp_path: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch):
    rests: list[float] = []
    monkeypatch.setattr(semantic.time, "sleep", rests.append)
    texts = {f"k{i}": f"cache {i}" for i in range(20)}
    tiny_store(tmp_path / "a", tiny_model).catch_up(texts, texts.get, budget=None, batch=8)
    assert rests == []
    tiny_store(tmp_path / "b", tiny_model).catch_up(texts, texts.get, budget=None, batch=8,
                                                 pace=1.0)
    assert len(rests) == 3 and all(rest > 0 for rest in rests)  # one per batch of 8


def test_loading_a_model_holds_blas_to_one_thread_for_the_similarity_product_too(
        tiny_model: Path):
    # In fresh interpreters, with no other thread. In the suite's own, CI once read 1 right
    # after setting 2: anything in the process may hold BLAS to one thread in between (the
    # encoder does so while it embeds). The load comes before anything imports NumPy.
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if (cpus or 1) < 2:
        pytest.skip("one CPU: BLAS starts at one thread, so a limit to one cannot be seen")
    started = blas_threads_in_a_fresh_process("import numpy")
    loaded = blas_threads_in_a_fresh_process(
        "from osk.search import semantic\n"
        "assert 'numpy' not in sys.modules\n"
        f"semantic.english_model(Path({str(tiny_model)!r})).load()")
    # NumPy's wheels bring OpenBLAS: if threadpoolctl sees none, the claim is unchecked.
    assert (started, loaded) == ([2], [1])


def blas_threads_in_a_fresh_process(code: str) -> list[int]:
    """The thread counts of the BLAS pools after ``code``, BLAS started with two threads."""
    probe = "\n".join([
        "import json, sys", "from pathlib import Path",
        "import threadpoolctl  # the semantic extra installs it, as the README's test does",
        code,
        "print(json.dumps(sorted({pool['num_threads'] for pool in "
        "threadpoolctl.threadpool_info() if pool['user_api'] == 'blas'})))"])
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120, check=False,
                         env={**os.environ, "OPENBLAS_NUM_THREADS": "2"})
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


# -- search ---------------------------------------------------------------------------------
def test_search_embeds_the_nodes_and_keeps_their_vectors_as_device_state(
        vault: Vault, tiny_model: Path):
    eng = engine(vault)
    write(eng, "Cache TTL", "The cache ttl is 60 seconds.")
    write(eng, "Release", "Build the release.")
    hits = eng.search("cache ttl").hits
    assert hits and hits[0].title == "Cache TTL"
    keys = json.loads((vault.state("index", "vectors", "keys.json")).read_text("utf-8"))["keys"]
    assert len(keys) == 3  # the two notes and their cluster's hub
    assert eng.embed_nodes() == 0


def test_a_korean_query_skips_the_semantic_channel(
        vault: Vault, tiny_model: Path, monkeypatch: pytest.MonkeyPatch):
    eng = engine(vault)
    write(eng, "배포 절차", "배포는 태그를 붙여서 한다.")
    asked: list[str] = []
    original = Vectors.nearest
    monkeypatch.setattr(Vectors, "nearest",
                        lambda self, query, limit, also=(): asked.append(query) or original(
                            self, query, limit, also))
    assert [h.title for h in eng.search("배포 절차").hits][:1] == ["배포 절차"]
    eng.search("release steps")
    assert asked == ["release steps"]


def test_with_the_channel_off_no_model_is_loaded_and_nothing_is_embedded(
        vault: Vault, tiny_model: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OSK_SEMANTIC", "0")
    eng = engine(vault)
    write(eng, "Cache TTL", "The cache ttl is 60 seconds.")
    assert eng.search("cache").hits[0].title == "Cache TTL"
    assert eng.embed_nodes() == 0
    assert not vault.state("index", "vectors").exists()


def test_scope_isolation_holds_for_the_semantic_channel_too(vault: Vault, tiny_model: Path):
    from test_search_index import write_node

    from osk.search import SearchIndex
    from osk.search.ranking import scope_visibility

    write_node(vault, "Scope/alpha/Secret plan.md", "the cache ttl is 60 seconds")
    write_node(vault, "Domain/Release.md", "build the release")
    index = SearchIndex(vault)
    assert index.embed_missing(budget=None) == 0
    query = "Secret plan\nA note.\nthe cache ttl is 60 seconds\n"  # its vector, exactly
    seen_from_alpha = index.search(query, scope="alpha", visible=scope_visibility(vault,
                                                                                  "alpha"))
    assert [h.title for h in seen_from_alpha][:1] == ["Secret plan"]  # positive control
    seen_from_beta = index.search(query, scope="beta", visible=scope_visibility(vault, "beta"))
    assert [h.title for h in seen_from_beta] == ["Release"]


def test_channels_hold_both_orders_and_search_returns_their_fusion(
        vault: Vault, tiny_model: Path, monkeypatch: pytest.MonkeyPatch):
    from test_search_index import write_node

    from osk.search import SearchIndex, recall_hits
    from osk.search.expand import query_terms
    from osk.search.ranking import scope_visibility

    write_node(vault, "Scope/alpha/Secret plan.md", "the cache ttl is 60 seconds")
    write_node(vault, "Domain/Release.md", "build the release")
    write_node(vault, "Domain/Clock.md", "the game clock speed hack")
    index = SearchIndex(vault)
    assert index.embed_missing(budget=None) == 0
    query, visible = "cache release", scope_visibility(vault, "beta")
    found = index.channels(query, k=5, scope="beta", visible=visible)
    assert found.semantic is not None
    coverage = found.ranking.coverage(query, found.lexical[0][0])
    assert found.order == ranking.fuse(found.lexical, found.semantic, 5,
                                       _path_of(found.ranking.corpus),
                                       coverage)
    docs = found.ranking.corpus.docs
    assert "Secret plan" not in {docs[slot].title for slot, _ in found.semantic}  # isolation
    searched = index.search(query, k=5, scope="beta", visible=visible)
    assert [h.path for h in searched] == [docs[slot].path for slot, *_ in found.order]
    # the hook's view of the same order: one hit per slot, a lexical confidence for each
    hits = recall_hits.recalled(found.ranking, found.order, query_terms(query), None)
    assert [h.path for h in hits] == [h.path for h in searched]
    assert [h.confidence > 0 for h in hits] == [h.bm25 > 0 for h in searched]
    monkeypatch.setenv("OSK_SEMANTIC", "0")
    lexical = SearchIndex(vault).channels(query, k=5, scope="beta", visible=visible)
    assert lexical.semantic is None and lexical.order == lexical.lexical


def test_the_semantic_order_carries_the_meaning_of_every_word_candidate(
        vault: Vault, tiny_model: Path):
    """``channels`` hands fusion meaning's first ``FUSION_DEPTH`` and then the closeness of
    each of the words' candidates past them, as ``semantic_order`` scores any node."""
    from test_search_index import write_node

    from osk.search import SearchIndex

    phrases = ["the cache ttl", "release build", "game clock speed hack", "weekly routine"]
    for number in range(2 * ranking.FUSION_DEPTH):
        write_node(vault, f"Domain/Note {number}.md",
                   f"{phrases[number % 4]} {phrases[(number // 4) % 4]} entry {number}")
    index = SearchIndex(vault)
    assert index.embed_missing(budget=None) == 0
    query = "cache ttl entry"  # words and meaning share 22 of their first 30 here
    found = index.channels(query, k=10)
    assert found.semantic is not None and index.vectors is not None
    words = [slot for slot, *_ in found.lexical[:ranking.FUSION_DEPTH]]
    first = [slot for slot, _ in found.semantic[:ranking.FUSION_DEPTH]]
    past = dict(found.semantic[ranking.FUSION_DEPTH:])
    assert past and set(past) == set(words) - set(first)  # each once, none for others
    docs = found.ranking.corpus.docs
    cosines = dict(index.vectors.nearest(query, 10 * ranking.FUSION_DEPTH))
    for slot, value in past.items():  # as semantic_order scores any node
        rise = max(0.0, cosines[docs[slot].content_hash] - ranking.SEMANTIC_FLOOR)
        assert value == pytest.approx(rise * found.ranking.factor(slot)
                                      ** ranking.SEMANTIC_LOCALITY)
    assert min(value for _, value in found.semantic[:ranking.FUSION_DEPTH]) >= max(
        past.values())


def test_a_pending_edit_in_a_protected_region_is_not_embedded_until_approved(
        vault: Vault, tiny_model: Path, monkeypatch: pytest.MonkeyPatch):
    import sys

    from authority_support import FakeTerminal, agent_write, edit_body, node_text

    from osk.authority import approvals
    from osk.search import SearchIndex
    from osk.search.corpus import SearchDoc
    from osk.store import node
    from osk.store.fsutil import sha256_text

    monkeypatch.setattr(sys, "stdin", FakeTerminal())
    rel = "Person/prefs/Editor.md"
    agent_write(vault, rel, node_text(body="The person edits in Helix.\n", author="user"),
                actor="user")
    approvals.protect(vault, "Person/prefs")
    agent_write(vault, rel, edit_body(vault, rel, "The person edits in Vim.\n"))

    def embedded_key() -> str:
        index = SearchIndex(vault)
        index.refresh()  # what a search does first: sees the approval
        assert index.embed_missing(budget=None) == 0
        keys = json.loads(vault.state("index", "vectors", "keys.json").read_text("utf-8"))
        (key,) = keys["keys"]
        return key

    def key_of(body: str) -> str:
        summary = node.parse(rel, vault.abs(rel).read_text("utf-8")).meta.summary
        return sha256_text(SearchDoc.content_text("Editor", summary, body))

    assert embedded_key() == key_of("The person edits in Helix.\n")  # the approved text
    approvals.approve(vault, rel)
    assert embedded_key() == key_of("The person edits in Vim.\n")


def test_a_damaged_model_falls_back_to_lexical_search_instead_of_failing(
        vault: Vault, tiny_model: Path, caplog: pytest.LogCaptureFixture):
    data = (tiny_model / "model.safetensors").read_bytes()
    (tiny_model / "model.safetensors").write_bytes(data[: len(data) // 2])  # cut short
    eng = engine(vault)
    write(eng, "Cache TTL", "The cache ttl is 60 seconds.")
    assert [h.title for h in eng.search("cache ttl").hits][:1] == ["Cache TTL"]
    assert "the semantic channel failed (" in caplog.text
    assert "model.safetensors is not a complete safetensors file" in caplog.text
    assert "searching lexically from now on; `osk doctor` says how to mend it" in caplog.text
    assert eng.search("cache").hits[0].title == "Cache TTL"


@pytest.mark.skipif(REAL_MODEL is None, reason="the all-MiniLM-L6-v2 files are not on this "
                                               "machine (see docs/search.md)")
def test_the_real_model_finds_a_note_asked_for_in_other_words(
        vault: Vault, monkeypatch: pytest.MonkeyPatch):
    lexical = engine(vault)
    write(lexical, "Speed hack detection", "Clients whose game clock runs fast are kicked by "
          "the server after three strikes.", summary="how speed hacks are caught")
    write(lexical, "Release checklist", "Tag the commit, build with cargo dist and upload "
          "the artifacts.", summary="how a release ships")
    write(lexical, "Unicode file names", "Normalise file names to NFC before comparing them.",
          summary="NFC for file names")
    question = "catching players who cheat by accelerating time"
    assert "Speed hack detection" not in [h.title for h in lexical.search(question).hits]
    monkeypatch.setenv("OSK_SEMANTIC", "1")
    meaning = engine(vault)
    assert meaning.embed_nodes() == 0
    assert [h.title for h in meaning.search(question).hits][:1] == ["Speed hack detection"]
    # the lexical channel still decides where the words match
    assert [h.title for h in meaning.search("cargo dist").hits][:1] == ["Release checklist"]
    assert np.isfinite([h.score for h in meaning.search(question).hits]).all()


def test_the_mcp_server_embeds_every_node_in_the_background_before_any_search(
        vault: Vault, tiny_model: Path):
    import os
    import subprocess
    import sys
    import time

    eng = engine(vault)
    for i in range(20):
        write(eng, f"Fact {i}", f"The cache ttl is {i} seconds.")
    keys = vault.state("index", "vectors", "keys.json")
    assert not keys.exists()
    server = subprocess.Popen([sys.executable, "-m", "osk", "mcp", "--vault", str(vault.root)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, cwd=vault.root, env={**os.environ})
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # polling for the file, not timing it
            if keys.exists() and len(json.loads(keys.read_text("utf-8"))["keys"]) == 21:
                break
            time.sleep(0.05)
        assert len(json.loads(keys.read_text("utf-8"))["keys"]) == 21  # 20 facts and the hub
    finally:
        server.stdin.close()
        server.wait(timeout=30)
        server.stdout.close()
        server.stderr.close()


def test_osk_embed_gives_every_node_its_vector_and_says_so(
        vault: Vault, tiny_model: Path, monkeypatch: pytest.MonkeyPatch):
    import os
    import subprocess
    import sys

    eng = engine(vault)
    for i in range(3):
        write(eng, f"Fact {i}", f"The cache ttl is {i} seconds.")

    def osk_embed() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "osk", "--vault", str(vault.root), "embed"],
                              capture_output=True, text=True, env={**os.environ}, cwd=vault.root)

    done = osk_embed()
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("every node has its vector (")
    assert "embedding: 4/4 (100%)" in done.stderr
    keys = json.loads(vault.state("index", "vectors", "keys.json").read_text("utf-8"))["keys"]
    assert len(keys) == 4
    monkeypatch.setenv("OSK_SEMANTIC", "0")
    off = osk_embed()
    assert (off.returncode, off.stdout) == (1, "")
    assert off.stderr == ("Error: the semantic channel is off (OSK_SEMANTIC=0): search ranks "
                          "by words only\n")


def test_meaning_never_pushes_words_first_nodes_out_of_the_first_k():
    """The rule that fusion never loses to words: at every depth c the fused first c hold the
    lexical order's first c // 2 (of its first ``WORDS_KEPT``), so meaning reorders and fills
    but pushes none of them out; and when the best lexical hit holds every query term the
    lexical order stands whatever meaning says."""
    k = 10
    corpus = _Docs({slot: f"n{slot:02d}" for slot in range(1, 31)})
    lexical = [(slot, 0, 10.0 - slot * 0.5, 10.0 - slot * 0.5) for slot in range(1, 11)]
    # meaning is sure of ten other nodes and of none of words' first ones
    semantic_order = [(slot, 1.0) for slot in range(11, 21)]
    fused = [slot for slot, *_ in ranking.fuse(lexical, semantic_order, k, _path_of(corpus),
                                               coverage=0.0)]
    for depth in range(1, k + 1):
        words = list(range(1, min(depth // 2, ranking.WORDS_KEPT) + 1))
        assert set(words) <= set(fused[:depth]), depth
    assert fused == [11, 1, 12, 2, 13, 3, 14, 4, 15, 5]  # meaning's best still leads
    small = [slot for slot, *_ in ranking.fuse(lexical, semantic_order, 4, _path_of(corpus),
                                               coverage=0.0)]
    assert small == [11, 1, 12, 2]
    # where words hold the query in full, their order stands
    covered = ranking.fuse(lexical, semantic_order, k, _path_of(corpus), coverage=1.0)
    assert [slot for slot, *_ in covered] == list(range(1, k + 1))


def test_a_node_words_found_counts_its_own_meaning_past_meanings_first_ones():
    """Fusion's candidates are each channel's first ``FUSION_DEPTH``, and each counts its
    value in both: a node words rank 7th that meaning ranks past its own first 30 is weighed
    by its own closeness, not as if meaning gave it none (on LoCoMo such nodes, evidence of
    "when did ..." questions, were pushed out by words' 11th-30th that meaning ranked 20th)."""
    depth, k = ranking.FUSION_DEPTH, 10
    corpus = _Docs({slot: f"n{slot:03d}" for slot in range(1, 3 * depth)})
    lexical = [(slot, 0, 10.0 - slot * 0.2, 10.0 - slot * 0.2) for slot in range(1, depth + 1)]
    # meaning's first 30: words' 11th-30th and ten nodes words did not find, all at 0.5;
    # then its values for words' 1st-10th, which it ranks past them (0.49)
    first = [(slot, 0.5) for slot in range(11, depth + 11)]
    beyond = [(slot, 0.49) for slot in range(1, 11)]
    fused = [slot for slot, *_ in ranking.fuse(lexical, first + beyond, k, _path_of(corpus),
                                               coverage=0.5)]
    assert fused == list(range(1, k + 1))  # words' first ten, close in meaning too, stay
    # without those values words' 6th-10th would count no meaning and drop out
    blind = [slot for slot, *_ in ranking.fuse(lexical, first, k, _path_of(corpus),
                                               coverage=0.5)]
    assert blind == [11, 1, 12, 2, 13, 3, 14, 4, 15, 5]
    # a node past both channels' first 30 is no candidate, whatever meaning gives it
    far = 2 * depth + 20
    outside = ranking.fuse(lexical, first + [(far, 0.5)], k, _path_of(corpus), coverage=0.0)
    assert far not in [slot for slot, *_ in outside]


def test_a_long_node_is_found_by_a_sentence_near_its_end(tmp_path: Path, tiny_model: Path):
    """One vector per passage, a node as close as its closest one: the encoder reads only the
    first pieces of a text, so a long node was seen only at its start."""
    filler = " ".join(f"step{n} of the weekly maintenance routine" for n in range(80))
    ending = "the game clock speed hack is the release build"  # the tiny model's own words
    texts = {
        "long": f"Maintenance log\nwhat the weekly routine does\n{filler}\n\n## Seasons\n{ending}",
        # nearer to the ending than the long node's first 128 pieces are (0.59 against 0.23)
        "other": "Cache notes\nrelease\nthe cache ttl is 60 seconds",
    }
    chunks = semantic.passages(texts["long"])
    assert len(chunks) > 2 and all(chunk.startswith("Maintenance log\n") for chunk in chunks)
    assert chunks[-1] == f"Maintenance log\n## Seasons {ending}"
    assert all(len(chunk.split()) <= semantic.PASSAGE_WORDS + 2 for chunk in chunks)
    store = tiny_store(tmp_path / "vectors", tiny_model)
    assert store.catch_up(texts, texts.get, budget=None) == 0
    near = store.nearest(ending, 2)
    assert [key for key, _ in near] == ["long", "other"]  # one entry per node, best passage
    reloaded = tiny_store(tmp_path / "vectors", tiny_model)
    assert reloaded.nearest(ending, 2) == near
    reloaded.forget_except({"other"})
    assert [key for key, _ in tiny_store(tmp_path / "vectors", tiny_model).nearest(ending, 5)] \
        == ["other"]


def test_a_query_the_best_node_covers_in_full_is_ranked_by_words_without_its_vector(
        vault: Vault, tiny_model: Path, monkeypatch: pytest.MonkeyPatch):
    """Meaning's weight is 0 there and the words fill the k places: ``fuse`` would give the
    words' order whatever meaning said (``ranking.words_decide``), so a search does not embed
    the query; per-prompt recall (``channels`` by default) still gets the semantic order."""
    eng = engine(vault)
    for number in range(6):
        write(eng, f"Cache note {number}", f"The cache ttl of service {number} is {number} s.")
    write(eng, "Release checklist", "Tag the commit and upload the artifacts.")
    assert eng.embed_nodes() == 0
    index = eng._search_index()
    assert index.vectors is not None
    encoder = index.vectors.encoder()
    asked: list[str] = []
    embed_query = encoder.embed_query
    monkeypatch.setattr(encoder, "embed_query", lambda texts: asked.extend(texts) or
                        embed_query(texts))
    semantic.asked.cache_clear()
    for k in (3, 5):
        full = index.channels("cache ttl", k=k)  # meaning asked, whatever the words say
        assert full.semantic and asked == ["cache ttl"]
        semantic.asked.cache_clear()  # the query's vector forgotten: a search would embed it
        hits = index.search("cache ttl", k=k)
        assert [hit.path for hit in hits] == [
            full.ranking.corpus.docs[slot].path for slot, *_ in full.order]
        assert len(hits) == k and asked == ["cache ttl"]  # not asked again
        asked.clear()
    # more places than the words fill, or a term the best node lacks: meaning is asked
    index.search("cache ttl", k=8)
    index.search("cache artifacts", k=3)
    assert asked == ["cache ttl", "cache artifacts"]
