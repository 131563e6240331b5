"""The semantic channel for raw rounds: each indexed round's vectors, and its meaning fused in.

Nodes have had a semantic channel (``osk.search.semantic``); a raw round was found by its words
only. With the channel on, every round the round index keeps (``osk.search.rounds``: the first
``TEXT_CHARS`` of its person text, final answer and tool summary) gets one vector per window of
``PASSAGE_WORDS`` words, embedded in the background as nodes are (the MCP server's catch-up
thread, ``osk embed``, and a search's own time budget), never on the capture path.

Vectors are device state in ``.osk/index/round_vectors/KEY/CONV.vec``, one file per raw record
(``rounds.vectors_file``): a JSON header line (the model, which round index it was checked
against and the record's round count there, and per round its number, text hash and passage
count), then the passages' vectors as int8 (each row scaled to its largest component, the
scales after as float32). 200,000 rounds of 512 dimensions take about 120 MB on disk (under
a third of float32) and are never in memory at once: a query reads the files of the records
the session may see, one at a time, and keeps only each round's closeness.

The round index deletes a record's file whenever it forgets a record it held (a record changed
other than by an append, as a redaction changes it; an exclusion; a record gone), so a round's
vector never outlives its place in the index; a query also leaves out any excluded round by
name. A file is written only after the index is seen, under its lock, to hold the very texts
that were embedded; it is used while the index is the one it was checked against (a rebuilt
index, after ``osk redact`` or a new schema, has the catch-up check each file's text hashes
again, re-embedding only what changed). Rounds appended since a file was written have no
meaning until the next catch-up: they are found by their words meanwhile.

A round's meaning is its closest passage's cosine, raised by ``NEIGHBOUR_WEIGHT`` × its closer
neighbour's (the round before or after it in its conversation: a question is often asked in
one round and answered in the next, as the lexical index counts neighbours' words), and fused
with the words by the nodes' own rule (``osk.search.ranking.fuse``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osk.capture.exclusions import Excluded, excluded
from osk.search.rounds import (
    EXCERPT_CHARS,
    VECTORS,
    Listed,
    RoundHit,
    RoundIndex,
    excerpt,
    vectors_in,
)
from osk.search.semantic import (
    PASSAGE_WORDS,
    Model,
    Progress,
    asked,
    enabled,
    find_model,
    give_back_freed_memory,
    windows,
)
from osk.store.fastclass import dataclass
from osk.store.fsutil import replace_unsynced
from osk.store.vault import Vault

if TYPE_CHECKING:
    import numpy as np

# A round's meaning gains this share of its closer neighbour's. On LoCoMo's development half
# (docs/performance.md): 0 -> 0.5 raised multi-hop R@10 from 0.489 to 0.509.
NEIGHBOUR_WEIGHT = 0.5
BATCH = 32  # passages per call of the encoder (sorted by length, so a batch pads little)
FORMAT = 1
HASH_CHARS = 16  # of a round's text hash kept in its file (64 bits: which vectors to reuse)
CHUNK_ROWS = 1024  # passages scored in one product by a query (2 MB as float32 at 512 wide)


@dataclass(frozen=True)
class Header:
    """What a record's vector file holds, read from its first line."""

    built: str  # the round index it was checked against (``RoundIndex.records``)
    indexed: int  # the record's round count in that index
    numbers: tuple[int, ...]  # ascending
    texts: str  # the rounds' text hashes, ``HASH_CHARS`` each, end to end (one JSON string
    # parses in a fraction of the time of a list of them: a fresh process reads every header)
    passages: tuple[int, ...]
    offset: int  # where the vectors start


# A record read for a query: its rel, header, int8 vectors and their row scales.
Stored = tuple[str, Header, "np.ndarray", "np.ndarray"]


def _text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:HASH_CHARS]


class RoundVectors:
    """The round vectors of one vault, for one model. Thread-safe as ``semantic.Vectors``: the
    MCP server's background catch-up and its searches share one."""

    def __init__(self, vault: Vault, model: Model) -> None:
        self.vault = vault
        self.model = model
        self._catching_up = threading.Lock()
        self._headers: dict[Path, tuple[tuple[int, int], Header | None]] = {}
        self._paths: dict[str, Path] = {}
        self._folder: Path | None = None
        self._tag = model.tag()  # a stat of the weights: once, not once a file
        self._lock = threading.Lock()
        # The index's listing at which these records' vectors were all found up to date: a
        # search's catch-up then stats no file while the index stays as it was.
        self._current: tuple[Listed, frozenset[str]] | None = None

    @classmethod
    def for_vault(cls, vault: Vault) -> RoundVectors | None:
        """The vault's round vectors, or None when the semantic channel is off."""
        if not enabled():
            return None
        model = find_model()
        return cls(vault, model) if model is not None else None

    # -- the files ----------------------------------------------------------------------------
    def file(self, rel: str) -> Path:
        """``rounds.vectors_file`` of the record, remembered (a search asks for every record's,
        and the vault's state folder is a resolved path: a ``realpath`` a record cost more
        than the scan)."""
        path = self._paths.get(rel)
        if path is None:
            if self._folder is None:
                self._folder = self.vault.state("index") / VECTORS
            path = self._paths[rel] = vectors_in(self._folder, rel)
        return path

    def header(self, path: Path) -> Header | None:
        """The file's header if it is this model's (cached by the file's stat), else None."""
        try:
            st = path.stat()
        except OSError:
            return None
        stat = (st.st_mtime_ns, st.st_size)
        with self._lock:
            cached = self._headers.get(path)
        if cached is not None and cached[0] == stat:
            return cached[1]
        found = self._read_header(path)
        with self._lock:
            self._headers[path] = (stat, found)
        return found

    def _read_header(self, path: Path) -> Header | None:
        try:
            with open(path, "rb") as handle:
                line = handle.readline()
            meta = json.loads(line)
            if (meta.get("format"), meta.get("model"), meta.get("words")) != (
                    FORMAT, self._tag, PASSAGE_WORDS):
                return None
            return Header(str(meta["built"]), int(meta["indexed"]), tuple(meta["numbers"]),
                          str(meta["texts"]), tuple(meta["passages"]), len(line))
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            return None  # none yet, another model's, or damaged: device state, recomputed

    def _matrix(self, path: Path, header: Header) -> tuple[np.ndarray, np.ndarray] | None:
        """The file's int8 vectors and their row scales, or None when cut short."""
        import numpy as np

        rows = sum(header.passages)
        try:
            with open(path, "rb") as handle:
                handle.seek(header.offset)
                data = handle.read()
        except OSError:
            return None
        if not rows or len(data) % rows or len(data) // rows - 4 <= 0:
            return None  # cut short, or damaged: the record is embedded again
        width = len(data) // rows - 4
        matrix = np.frombuffer(data, dtype=np.int8, count=rows * width).reshape(rows, width)
        scales = np.frombuffer(data, dtype=np.float32, offset=rows * width, count=rows)
        return matrix, scales

    # -- catching up --------------------------------------------------------------------------
    def stale(self, index: RoundIndex, only: Collection[str] | None = None,
              listed: Listed | None = None) -> list[tuple[str, int]]:
        """The records (of ``only``, None: all) whose vectors are missing or out of date:
        (rel, rounds indexed). ``listed``: ``index.records()`` if the caller has it."""
        built, records = listed if listed is not None else index.records()
        found = []
        for rel, _, indexed in records:
            if only is not None and rel not in only:
                continue
            header = self.header(self.file(rel))
            if header is None or header.built != built or header.indexed != indexed:
                found.append((rel, indexed))
        return found

    def missing(self, index: RoundIndex, only: Collection[str] | None = None,
                listed: Listed | None = None) -> int:
        """How many indexed rounds' records (of ``only``) lack up-to-date vectors (an upper
        bound: a record appended to counts whole)."""
        return sum(indexed for _, indexed in self.stale(index, only, listed))

    def catch_up(self, index: RoundIndex, *, budget: float | None,
                 progress: Progress | None = None, pace: float = 0.0,
                 only: Collection[str] | None = None, listed: Listed | None = None) -> int:
        """Embed the rounds of stale records (of ``only``: a search asks for the records it
        may see) within ``budget`` seconds (None: all), reusing each round's vectors whose text
        is unchanged; after a whole catch-up drop files of records the index no longer holds.
        Returns how many rounds are still in stale records. ``pace`` and the one catch-up at a
        time as in ``semantic.Vectors.catch_up``; ``listed`` as in ``stale``. Records found
        up to date against a listing stay so while the index lists the same (the index
        deletes a record's file when it forgets or changes it, and the listing moves then)."""
        current = self._current
        if listed is not None and only is not None and current is not None and \
                current[0] == listed and current[1].issuperset(only):
            return 0
        if not self._catching_up.acquire(blocking=budget is None):
            return self.missing(index, only, listed)
        try:
            return self._catch_up(index, budget, progress, pace, only, listed)
        finally:
            self._catching_up.release()

    def _catch_up(self, index: RoundIndex, budget: float | None, progress: Progress | None,
                  pace: float, only: Collection[str] | None, listed: Listed | None) -> int:
        deadline = None if budget is None else time.monotonic() + budget
        stale = self.stale(index, only, listed)
        if not stale and listed is not None and only is not None:
            self._current = listed, frozenset(only)
        total, done, left = sum(n for _, n in stale), 0, 0
        for rel, indexed in stale:
            if deadline is not None and time.monotonic() >= deadline:
                left += indexed
                continue
            self._embed_record(index, rel, pace)
            done += indexed
            if progress is not None:
                progress(done, total)
        if budget is None and only is None:
            self._drop_orphans({rel for rel, *_ in index.records()[1]})
        if done:
            give_back_freed_memory()  # the embedding's transient arrays
        return left

    def _embed_record(self, index: RoundIndex, rel: str, pace: float) -> None:
        """Embed a record's rounds (reusing vectors of unchanged texts), then write them only
        if the index, under its lock, still holds what was embedded (a redaction or an
        exclusion meanwhile deletes the file; writing after it would bring the old text back)."""
        import numpy as np

        seen = index.kept_rounds(rel)
        built, indexed, rounds = seen
        path = self.file(rel)
        old = self._reusable(path)
        texts = [_text_hash(text) for _, text in rounds]
        pieces = [windows(text) for _, text in rounds]
        wanted = [(i, j) for i, hashed in enumerate(texts) if hashed not in old
                  for j in range(len(pieces[i]))]
        fresh = self._embed([pieces[i][j] for i, j in wanted], pace)
        rows: dict[tuple[int, int], np.ndarray] = dict(zip(wanted, fresh, strict=True))
        blocks = [old[hashed] if hashed in old else
                  np.stack([rows[(i, j)] for j in range(len(pieces[i]))])
                  for i, hashed in enumerate(texts)]
        with index.holding():
            if index.kept_rounds(rel) == seen and indexed >= 0:
                self._write(path, built, indexed, [n for n, _ in rounds], texts, blocks)

    def _reusable(self, path: Path) -> dict[str, np.ndarray]:
        """Text hash -> its passages' vectors (float32) from the record's current file."""
        header = self.header(path)
        stored = self._matrix(path, header) if header is not None else None
        if header is None or stored is None:
            return {}
        matrix, scales = stored
        vectors = matrix.astype("float32") * scales[:, None] / 127.0
        found, row = {}, 0
        hashes = [header.texts[at:at + HASH_CHARS]
                  for at in range(0, len(header.texts), HASH_CHARS)]
        for hashed, count in zip(hashes, header.passages, strict=True):
            found[hashed] = vectors[row:row + count]
            row += count
        return found

    def _embed(self, texts: list[str], pace: float) -> list[np.ndarray]:
        """Unit vectors of ``texts``, in their order; embedded shortest first, ``BATCH`` at a
        time, so a batch's texts are of about one length (the encoder pads each to its
        longest)."""
        import numpy as np

        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out: list[Any] = [None] * len(texts)
        encoder = self.model.load()
        for start in range(0, len(order), BATCH):
            chosen = order[start:start + BATCH]
            began = time.monotonic()
            vectors = np.asarray(encoder.embed([texts[i] for i in chosen]), dtype=np.float32)
            vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
            if pace:
                time.sleep(pace * (time.monotonic() - began))
            for i, vector in zip(chosen, vectors, strict=True):
                out[i] = vector
        return out

    def _write(self, path: Path, built: str, indexed: int, numbers: list[int],
               texts: list[str], blocks: list[np.ndarray]) -> None:
        """One file, replaced whole (a reader sees the old one or the new one)."""
        import numpy as np

        width = blocks[0].shape[1] if blocks else 0
        matrix = np.concatenate(blocks).astype(np.float32) if blocks else np.zeros((0, width))
        scales = np.maximum(np.abs(matrix).max(axis=1), 1e-12).astype(np.float32)
        quantized = np.rint(matrix / scales[:, None] * 127.0).astype(np.int8)
        meta = {"format": FORMAT, "model": self._tag, "words": PASSAGE_WORDS,
                "built": built, "indexed": indexed, "numbers": numbers,
                "texts": "".join(texts), "passages": [len(block) for block in blocks]}
        line = json.dumps(meta, separators=(",", ":")).encode("utf-8") + b"\n"
        replace_unsynced(path, line + quantized.tobytes() + scales.tobytes())

    def _drop_orphans(self, live: set[str]) -> None:
        root = self.vault.state("index") / VECTORS
        for path in root.glob("*/*.vec") if root.is_dir() else ():
            if f"_raw/{path.parent.name}/{path.stem}.md" not in live:
                path.unlink(missing_ok=True)

    # -- reading ------------------------------------------------------------------------------
    def nearest(self, query: np.ndarray, built: str, records: Sequence[str], hidden: Excluded,
                limit: int, also: Collection[str] = ()) -> list[tuple[str, float]]:
        """The ``limit`` rounds of ``records`` (rels) closest to the query's unit vector:
        (coordinate, cosine on the model's scale + ``NEIGHBOUR_WEIGHT`` × the closer
        neighbour's), best first; then those of the coordinates ``also`` asks for (fusion's
        lexical candidates) that are not among them. Only files checked against the index
        ``built`` count; a round without vectors gives none; one ``hidden`` excludes is
        neither a result nor a neighbour."""
        import numpy as np

        rels: list[str] = []
        parts = []
        for chunk in self._stored(built, records):
            owners, numbers, values = self._closeness(chunk, query, hidden)
            parts.append((owners + len(rels), numbers, values))
            rels += [rel for rel, *_ in chunk]
        values = np.concatenate([part[2] for part in parts]) if parts else np.zeros(0)
        if not len(values) or limit <= 0:
            return []
        owners = np.concatenate([part[0] for part in parts])
        numbers = np.concatenate([part[1] for part in parts])
        # Every round as close as the limit-th one, so that ties are broken by coordinate.
        count = min(limit, len(values))
        floor = np.partition(values, len(values) - count)[len(values) - count]
        best = sorted(((float(values[at]), _coordinate(rels[owners[at]], int(numbers[at])))
                       for at in np.flatnonzero(values >= floor)), reverse=True)[:limit]
        found = {coordinate: value for value, coordinate in best}
        owner = {rel: at for at, rel in enumerate(rels)}
        span = int(numbers.max()) + 1
        wanted: dict[int, str] = {}  # each round asked for, by its record's place and number
        for coordinate in also:
            rel, number = _place(coordinate)
            if rel in owner and number < span:
                wanted[owner[rel] * span + number] = coordinate
        if wanted:  # found in one pass over every round
            keys = owners.astype(np.int64) * span + numbers
            for at in np.flatnonzero(np.isin(keys, list(wanted))):
                found.setdefault(wanted[int(keys[at])], float(values[at]))
        return list(found.items())

    def _stored(self, built: str, records: Sequence[str]) -> Iterator[list[Stored]]:
        """The vectors of ``records`` checked against the index ``built``, read a file at a
        time and handed on in chunks of about ``CHUNK_ROWS`` passages (memory stays bounded
        however many rounds a session sees)."""
        chunk: list[Stored] = []
        rows = 0
        for rel in records:
            path = self.file(rel)
            header = self.header(path)
            stored = self._matrix(path, header) if header is not None and \
                header.built == built else None
            if header is None or stored is None:
                continue
            chunk.append((rel, header, *stored))
            rows += len(stored[1])
            if rows >= CHUNK_ROWS:
                yield chunk
                chunk, rows = [], 0
        if chunk:
            yield chunk

    def _closeness(self, chunk: list[Stored], query: np.ndarray, hidden: Excluded
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per round of the chunk's records: its record (place in ``chunk``), its number and
        its closeness (``nearest``), scored in one product for the whole chunk."""
        import numpy as np

        slope, shift = self.model.scale
        headers = [header for _, header, *_ in chunk]
        matrix = np.concatenate([matrix for *_, matrix, _ in chunk])
        scales = np.concatenate([scales for *_, scales in chunk])
        cosines = (matrix @ (query / 127.0).astype(np.float32)) * scales
        passages = np.fromiter(chain.from_iterable(h.passages for h in headers), np.int64)
        own = np.maximum.reduceat(cosines, np.cumsum(passages) - passages) * slope + shift
        numbers = np.fromiter(chain.from_iterable(h.numbers for h in headers), np.int64)
        owners = np.repeat(np.arange(len(chunk)), [len(h.numbers) for h in headers])
        touched = hidden.touched()
        if touched.intersection(rel for rel, *_ in chunk):
            # an exclusion the file may predate: out by name, before neighbours are counted
            kept = np.fromiter((rel not in touched or not hidden.covers(rel, _coordinate(
                rel, n)) for rel, header, *_ in chunk for n in header.numbers), bool)
            own, numbers, owners = own[kept], numbers[kept], owners[kept]
        # round i and round i + 1 are neighbours: one number apart, in one record
        joined = (numbers[1:] == numbers[:-1] + 1) & (owners[1:] == owners[:-1])
        return owners, numbers, own + NEIGHBOUR_WEIGHT * _closer(own, joined)

    def search(self, index: RoundIndex, query: str, k: int,
               visible: Callable[[str], bool]) -> list[RoundHit]:
        """``fused_rounds`` over these vectors (what ``rounds.round_hits`` asks)."""
        return fused_rounds(index, self, query, k, visible)

    def query_vector(self, query: str) -> np.ndarray:
        """The query's unit vector (embedded as ``semantic.Vectors.nearest`` embeds it)."""
        import numpy as np

        vector = np.asarray(asked(self.model.load(), query), dtype=np.float32)
        return vector / max(float(np.linalg.norm(vector)), 1e-12)


def _coordinate(rel: str, number: int) -> str:
    """The coordinate of round ``number`` of the record ``rel`` (``_raw/KEY/CONV.md``)."""
    from osk.store.edges import RawTarget  # not at the top: a fresh `osk search` has no use

    _, key, name = rel.split("/", 2)
    return RawTarget(key, name[:-3], number).coordinate


def _place(coordinate: str) -> tuple[str, int]:
    """The record (rel) and round number a coordinate names (``_coordinate`` undone)."""
    record, _, number = coordinate.rpartition("#Round ")
    return f"{record}.md", int(number)


def _closer(own: np.ndarray, joined: np.ndarray) -> np.ndarray:
    """Per round, the closeness of its closer neighbour, the round before or after it where
    ``joined[i]`` says rounds i and i + 1 are neighbours (0 without one)."""
    import numpy as np

    before = np.full(len(own), -np.inf, dtype=own.dtype)
    after = np.full(len(own), -np.inf, dtype=own.dtype)
    before[1:][joined] = own[:-1][joined]
    after[:-1][joined] = own[1:][joined]
    closer = np.maximum(before, after)
    return np.where(np.isfinite(closer), closer, 0.0)


# -- fused with the words ---------------------------------------------------------------------
def fused_rounds(index: RoundIndex, vectors: RoundVectors, query: str, k: int,
                 visible: Callable[[str], bool]) -> list[RoundHit]:
    """The best ``k`` rounds a session may see, by words fused with meaning (``fuse``, the
    nodes' rule): the lexical order to ``FUSION_DEPTH``, and the ``FUSION_DEPTH`` rounds
    closest in meaning. Where the best round holds every query term (meaning's weight is 0)
    and the words fill the ``k`` places, ``fuse`` gives the words' order whatever meaning
    says, so the query is not embedded nor the vectors read (a quarter of LoCoMo's questions;
    docs/performance.md); what is missing is still embedded, as for any search."""
    from dataclasses import replace  # here: a fresh lexical search imports no dataclasses

    from osk.search.expand import query_terms
    from osk.search.ranking import FUSION_DEPTH, SEMANTIC_FLOOR, fuse, words_decide

    seen = functools.cache(visible)  # the routing ledger is read once a key, not a record
    words, stats = index.search_with_stats(query, k=max(k, FUSION_DEPTH), visible=seen,
                                           excerpt_chars=None)
    coverage = stats.coverage(query_terms(query), 0) if stats is not None else 0.0
    decided = words_decide(coverage, (hit.score for hit in words), k)
    coordinates = [hit.coordinate for hit in words]
    near = _meaning(index, vectors, query, seen, asked=not decided,
                    words=coordinates[:FUSION_DEPTH])
    lexical_only = set(coordinates)
    coordinates += [c for c, _ in near if c not in lexical_only]
    slot = {c: i for i, c in enumerate(coordinates)}
    lexical = [(i, 0, hit.score, hit.score) for i, hit in enumerate(words)]
    semantic = [(slot[c], max(value - SEMANTIC_FLOOR, 0.0)) for c, value in near]
    order = fuse(lexical, semantic, k, coordinates.__getitem__, coverage)
    terms = sorted(query_terms(query))
    kept = {coordinates[s] for s, *_ in order}
    found = {hit.coordinate: replace(hit, excerpt=excerpt(hit.excerpt, EXCERPT_CHARS, terms))
             for hit in words if hit.coordinate in kept}
    meaning_only = [coordinates[s] for s, *_ in order if coordinates[s] not in found]
    if meaning_only:  # rounds the words did not find: read from the index (a connection)
        found |= {hit.coordinate: hit for hit in index.rounds_at(meaning_only, query)}
    return [replace(found[coordinates[s]], score=round(score, 6)) for s, _, score, _ in order
            if coordinates[s] in found]


def _meaning(index: RoundIndex, vectors: RoundVectors, query: str,
             seen: Callable[[str], bool], *, asked: bool,
             words: Collection[str]) -> list[tuple[str, float]]:
    """The ``FUSION_DEPTH`` rounds of the keys ``seen`` allows closest to the query in
    meaning, then the meaning of the ``words`` rounds (fusion's lexical candidates) past
    them (none when not ``asked``), after embedding what is missing within the search's
    time budget (either way: later searches use them)."""
    from osk.search.index import SEMANTIC_BUDGET
    from osk.search.ranking import FUSION_DEPTH

    listed = index.records()
    built, records = listed
    rels = [rel for rel, key, _ in records if seen(key)]
    vectors.catch_up(index, budget=SEMANTIC_BUDGET, only=frozenset(rels), listed=listed)
    if not asked:
        return []
    return vectors.nearest(vectors.query_vector(query), built, rels, excluded(index.vault),
                           FUSION_DEPTH, words)
