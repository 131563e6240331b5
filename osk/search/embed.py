"""Sentence embeddings for the semantic channel: all-MiniLM-L6-v2 run with NumPy alone.

The model (a 6-layer, 384-wide BERT encoder trained for sentence similarity; Apache-2.0) is
not shipped with osk; ``osk.search.semantic.find_model`` says where it is looked for. This
module imports NumPy and is imported only when the model was found.

Why our own forward pass: the usual runtime (PyTorch via sentence-transformers) is gigabytes
and seconds of import; the encoder is small enough that NumPy, which osk already has through
rank-bm25, computes it directly. What this module does, in the order the reference
implementation does it:

1. Text → WordPiece ids (BERT's uncased tokenizer): drop control characters, put spaces around
   CJK ideographs, lowercase, strip accents (NFD, drop combining marks), split on whitespace
   and punctuation, then greedy longest-prefix matching against the vocabulary with ``##``
   continuations; a word over 100 characters or with no match is ``[UNK]``. ``[CLS] … [SEP]``,
   at most ``MAX_TOKENS`` tokens.
2. Ids → vectors: word + position + token-type embeddings, layer norm, then six encoder layers
   (12-head self-attention, residual, layer norm; GELU feed-forward, residual, layer norm).
3. Mean of the token vectors (padding excluded), scaled to unit length: cosine similarity is
   then a dot product.

Tested against vectors the reference implementation produced (tests/search/test_embed.py).
"""

from __future__ import annotations

import json
import math
import struct
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

# What the model was trained on. Its own limit, 256, costs twice as much per node for the same
# nDCG on the dev set (docs/performance.md); text past the limit is not embedded.
MAX_TOKENS = 128
_BATCH = 16
_LAYER_NORM_EPS = 1e-12
_MAX_WORD_CHARS = 100


# -- tokenizer ----------------------------------------------------------------------------
_CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
               (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def _is_cjk(code: int) -> bool:
    return any(low <= code <= high for low, high in _CJK_RANGES)


def _is_punctuation(char: str) -> bool:
    code = ord(char)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True  # BERT counts every non-alphanumeric ASCII symbol, `$` and `^` included
    return unicodedata.category(char).startswith("P")


def _normalise(text: str) -> str:
    out: list[str] = []
    for char in text:
        code = ord(char)
        if code == 0 or code == 0xFFFD:
            continue
        category = unicodedata.category(char)
        if char in "\t\n\r" or category == "Zs":
            out.append(" ")
        elif category in ("Cc", "Cf"):
            continue
        elif _is_cjk(code):
            out.append(f" {char} ")
        else:
            out.append(char)
    lowered = "".join(out).lower()
    return "".join(c for c in unicodedata.normalize("NFD", lowered)
                   if unicodedata.category(c) != "Mn")


def _words(text: str) -> list[str]:
    words: list[str] = []
    for chunk in _normalise(text).split():
        current = ""
        for char in chunk:
            if _is_punctuation(char):
                if current:
                    words.append(current)
                    current = ""
                words.append(char)
            else:
                current += char
        if current:
            words.append(current)
    return words


class WordPiece:
    """BERT's uncased WordPiece tokenizer over a ``vocab.txt`` (one token a line, id = line)."""

    def __init__(self, vocab: dict[str, int]) -> None:
        self.vocab = vocab
        self.unk, self.cls, self.sep = vocab["[UNK]"], vocab["[CLS]"], vocab["[SEP]"]
        self._cache: dict[str, list[int]] = {}

    @classmethod
    def load(cls, path: Path) -> WordPiece:
        lines = path.read_text(encoding="utf-8").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return cls({token: number for number, token in enumerate(lines)})

    def ids(self, text: str, limit: int = MAX_TOKENS) -> list[int]:
        """``[CLS]`` + the text's pieces + ``[SEP]``, cut to ``limit`` ids in all."""
        pieces: list[int] = []
        room = limit - 2
        for word in _words(text):
            pieces += self._word(word)
            if len(pieces) >= room:
                break
        return [self.cls, *pieces[:room], self.sep]

    def _word(self, word: str) -> list[int]:
        cached = self._cache.get(word)
        if cached is not None:
            return cached
        found = self._split(word)
        if len(self._cache) < 200_000:
            self._cache[word] = found
        return found

    def _split(self, word: str) -> list[int]:
        if len(word) > _MAX_WORD_CHARS:
            return [self.unk]
        found: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            piece = None
            while start < end:
                candidate = word[start:end] if start == 0 else "##" + word[start:end]
                piece = self.vocab.get(candidate)
                if piece is not None:
                    break
                end -= 1
            if piece is None:
                return [self.unk]
            found.append(piece)
            start = end
        return found


# -- the encoder ----------------------------------------------------------------------------
def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The tensors of a ``.safetensors`` file (a length-prefixed JSON header, then raw data),
    as read-only views of the memory-mapped file: only the pages used are read, and processes
    using the same model share them. ValueError naming the file when it is cut short or not
    that format."""
    kinds = {"F32": np.float32, "F16": np.float16, "I64": np.int64}
    try:
        # A plain array over the map: memmap's own subclass adds overhead to every operation.
        data = np.memmap(path, dtype=np.uint8, mode="r").view(np.ndarray)
        (size,) = struct.unpack("<Q", data[:8].tobytes())
        header = json.loads(data[8:8 + size].tobytes())
        tensors: dict[str, np.ndarray] = {}
        for name, info in header.items():
            if name == "__metadata__":
                continue
            begin, end = (8 + size + offset for offset in info["data_offsets"])
            if end > len(data):
                raise ValueError(f"{name} ends past the end of the file")
            tensors[name] = data[begin:end].view(kinds[info["dtype"]]).reshape(info["shape"])
    except (struct.error, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path} is not a complete safetensors file ({exc!r})") from None
    return tensors


@dataclass
class _Layer:
    qkv: np.ndarray  # (384, 1152): query, key and value projections side by side
    qkv_bias: np.ndarray
    out: np.ndarray
    out_bias: np.ndarray
    norm1: tuple[np.ndarray, np.ndarray]
    up: np.ndarray
    up_bias: np.ndarray
    down: np.ndarray
    down_bias: np.ndarray
    norm2: tuple[np.ndarray, np.ndarray]


def _layer_norm(x: np.ndarray, weights: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    variance = (centred * centred).mean(axis=-1, keepdims=True)
    normed: np.ndarray = centred / np.sqrt(variance + _LAYER_NORM_EPS) * weights[0] + weights[1]
    return normed


def _erf(x: np.ndarray) -> np.ndarray:
    """erf to about 1e-7 (Abramowitz & Stegun 7.1.26); NumPy has none and the model's GELU
    is the exact, erf-based one."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027
                                                                         + t * 1.061405429))))
    erf: np.ndarray = sign * (1.0 - poly * np.exp(-a * a))
    return erf


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


class Encoder:
    """all-MiniLM-L6-v2: text in, unit-length 384-dimensional float32 vectors out."""

    def __init__(self, folder: Path) -> None:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        self.heads = int(config["num_attention_heads"])
        self.width = int(config["hidden_size"])
        self.folder = folder
        self.tokenizer = WordPiece.load(folder / "vocab.txt")
        weights = read_safetensors(folder / "model.safetensors")
        self._load(weights, int(config["num_hidden_layers"]))

    def _load(self, w: dict[str, Any], layers: int) -> None:
        def get(name: str) -> np.ndarray:
            for key in (name, f"bert.{name}"):
                if key in w:
                    return np.ascontiguousarray(w[key], dtype=np.float32)
            raise KeyError(f"{self.folder / 'model.safetensors'} has no tensor {name}")

        self.words = get("embeddings.word_embeddings.weight")
        self.positions = get("embeddings.position_embeddings.weight")
        self.token_type = get("embeddings.token_type_embeddings.weight")[0]
        self.norm = (get("embeddings.LayerNorm.weight"), get("embeddings.LayerNorm.bias"))
        self.layers: list[_Layer] = []
        for n in range(layers):
            p = f"encoder.layer.{n}."
            att = p + "attention."
            self.layers.append(_Layer(
                qkv=np.concatenate([get(f"{att}self.{part}.weight").T
                                    for part in ("query", "key", "value")], axis=1),
                qkv_bias=np.concatenate([get(f"{att}self.{part}.bias")
                                         for part in ("query", "key", "value")]),
                # Transposed copies: a transposed view costs a fifth more per query (measured).
                out=get(f"{att}output.dense.weight").T.copy(),
                out_bias=get(f"{att}output.dense.bias"),
                norm1=(get(f"{att}output.LayerNorm.weight"), get(f"{att}output.LayerNorm.bias")),
                up=get(f"{p}intermediate.dense.weight").T.copy(),
                up_bias=get(f"{p}intermediate.dense.bias"),
                down=get(f"{p}output.dense.weight").T.copy(),
                down_bias=get(f"{p}output.dense.bias"),
                norm2=(get(f"{p}output.LayerNorm.weight"), get(f"{p}output.LayerNorm.bias")),
            ))

    def embed(self, texts: list[str]) -> np.ndarray:
        """One unit-length row per text (float32); texts of similar length share a batch."""
        token_ids = [self.tokenizer.ids(text) for text in texts]
        result = np.zeros((len(texts), self.width), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(token_ids[i]))
        for start in range(0, len(order), _BATCH):
            chosen = order[start:start + _BATCH]
            result[chosen] = self._encode([token_ids[i] for i in chosen])
        return result

    def embed_query(self, texts: list[str]) -> np.ndarray:
        """A question is embedded as any other text (the model is symmetric)."""
        return self.embed(texts)

    def _encode(self, batch: list[list[int]]) -> np.ndarray:
        length = max(len(ids) for ids in batch)
        ids = np.zeros((len(batch), length), dtype=np.int64)
        mask = np.zeros((len(batch), length), dtype=np.float32)
        for row, values in enumerate(batch):
            ids[row, :len(values)] = values
            mask[row, :len(values)] = 1.0
        x = self.words[ids] + self.positions[:length] + self.token_type
        x = _layer_norm(x, self.norm)
        bias = ((1.0 - mask) * -1e9)[:, None, None, :]  # padding takes no attention
        for layer in self.layers:
            x = self._layer(x, layer, bias)
        pooled = (x * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit: np.ndarray = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return unit

    def _layer(self, x: np.ndarray, layer: _Layer, bias: np.ndarray) -> np.ndarray:
        batch, length, width = x.shape
        size = width // self.heads
        qkv = x @ layer.qkv + layer.qkv_bias
        qkv = qkv.reshape(batch, length, 3, self.heads, size).transpose(2, 0, 3, 1, 4)
        query, key, value = qkv[0], qkv[1], qkv[2]
        scores = query @ key.transpose(0, 1, 3, 2) / math.sqrt(size) + bias
        scores -= scores.max(axis=-1, keepdims=True)
        weights = np.exp(scores)
        weights /= weights.sum(axis=-1, keepdims=True)
        context = (weights @ value).transpose(0, 2, 1, 3).reshape(batch, length, width)
        x = _layer_norm(context @ layer.out + layer.out_bias + x, layer.norm1)
        hidden = _gelu(x @ layer.up + layer.up_bias)
        return _layer_norm(hidden @ layer.down + layer.down_bias + x, layer.norm2)
