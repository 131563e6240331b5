"""SearchIndex: the vault's incremental, persisted search index, kept fresh without rebuilds.

Freshness. The index is a cache of the node files, validated by stat key (size, mtime_ns,
inode) the way the catalog is. Three paths keep it current:

- ``sync(catalog, changes)``: the engine hands over what its catalog just (re)read, after a
  write or its own refresh. Only those paths are touched.
- A throttled walk: ``search`` stats the Space folders at most once per ``refresh_interval``
  (1 s) and re-reads only files whose stat key changed. Any search that starts one interval
  or more after a person's hand edit, add or delete sees it, and a burst of searches stats
  nothing. We chose this over a background thread: no second thread shares the index with
  the engine, nothing runs while nobody searches (a server can sit idle all day), and the
  cost is bounded and paid where it is visible (docs/performance.md has the walk time per
  vault size).
- The mtime race: a file read less than ``RACE_WINDOW_NS`` after its mtime may be rewritten
  within the same clock tick without its stat key changing, so such an entry is re-read (and
  compared by content hash) on every walk until it is old enough, in this process and after
  a reload.

Protected regions (``osk.authority.protection``, as ``regions.Regions`` reads them): what is
indexed is what readers are served, the approved version while a change waits for review; when
the approvals ledger changes, the files in the old and new regions are read again.

Persistence: one store, the recall file under ``vault.state("index")``
(``osk.search.recallfile``), which the hooks and fresh processes query in place and this
index loads whole. Each commit writes its changes there in one SQLite transaction
(``recall_mirror``): that transaction is the commit, so there is no second copy to keep in
step, and a writer killed before it leaves the file as it was, whose stat keys then send the
first walk to the changed files. A missing, damaged or outdated file is built afresh from the
files; one the disk will not let this process open (full or read-only) is left as it is, and
the files are indexed in memory. A loaded document's terms, needed only to remove its
postings, are read from the file for that version, else found in the postings
(``Corpus.terms_of``).

Ranking is ``ranking.Ranking``; the documents and postings are ``corpus.Corpus``; what a
document keeps of a node version, and what a query may ask, is ``versions``.

The semantic channel (``semantic.Vectors``, on when its model is installed) keeps one vector
per passage of each indexed text beside this index. A search fuses it with the lexical order
after embedding what is missing for at most ``SEMANTIC_BUDGET`` seconds;
``embed_missing(budget=None)`` is the full catch-up the MCP server runs in a background
thread. If the model fails, the index logs it and searches lexically for the rest of the process.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from osk.search import recallfile
from osk.search.corpus import Corpus, SearchDoc
from osk.search.ranking import (
    FUSION_DEPTH,
    Hit,
    Markers,
    Ranked,
    Ranking,
    Visible,
    fuse,
    words_decide,
)
from osk.search.recall_mirror import RecallMirror
from osk.search.regions import Regions
from osk.search.semantic import NEAREST, Vectors
from osk.search.versions import (
    DEFAULT_K,
    PARAMS,
    checked,
    document,
    moment,
    parse_node,
    searchable_path,
    title_of,
)
from osk.store.fsutil import (
    RACE_WINDOW_NS,
    StatKey,
    collector_paused,
    sha256_text,
    stat_key,
)
from osk.store.vault import Vault

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from osk.search.bulk_build import DiskBuild
    from osk.store.catalog import Catalog, Changes, Entry
    from osk.store.node import Node

    Known = Mapping[str, Entry]  # a catalog's entries by path (``Catalog.entries``)

log = logging.getLogger("osk.search")

REFRESH_INTERVAL = 1.0  # seconds between freshness walks started by searches

SEMANTIC_BUDGET = 2.0  # seconds a search may spend embedding nodes that have no vector yet


@dataclass(frozen=True)
class Channels:
    """One query's orders (``SearchIndex.channels``); slots index ``ranking.corpus.docs``."""

    ranking: Ranking
    lexical: list[Ranked]
    semantic: list[tuple[int, float]] | None  # (slot, similarity x factor), best first
    order: list[Ranked]  # what search returns: the fused order, or the lexical one
    approvals: list[Any] | None = None  # the approvals generation served (as the recall file)


@dataclass
class Refreshed:
    """What one freshness walk changed (vault-relative paths)."""

    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.added or self.changed or self.removed)


class SearchIndex:
    """The search index of one vault. Cheap to construct; loads on first use."""

    def __init__(self, vault: Vault, *, refresh_interval: float = REFRESH_INTERVAL) -> None:
        self.vault = vault
        self.directory = vault.state("index")
        self.refresh_interval = refresh_interval
        self.load_report = ""  # how the last load went: loaded / built / rebuilt: reason
        self._root = str(vault.root)
        self._lock = threading.RLock()
        self._loaded = False
        self._memories = 0  # how many times the documents in memory were started afresh
        self._reset_memory()
        self.vectors = Vectors.for_index(self.directory)  # None: the semantic channel is off

    def _reset_memory(self) -> None:
        self._memories += 1
        self._corpus = self._with_stored_terms(Corpus())
        self._rejects: dict[str, tuple[StatKey, int]] = {}  # unusable files: stat, read time
        self._regions = Regions(self.vault)
        self._last_walk = -math.inf
        self._pending: list[list[Any]] = []
        self._content_slots: tuple[int, dict[str, int]] = (-1, {})
        self._embedded_version = -1  # the corpus version at which every node had a vector
        self._look: dict[str, Any] | None = None  # the engine's last look (note_look)
        self._look_changes = 0  # the recall file's change count when it was recorded
        self._look_kept = False  # the last look handed over was the one on file (note_look)
        self._newest_ns = -1  # the newest mtime of an indexed file (-1: not counted yet)
        self._recall = RecallMirror(self.directory, self._recall_meta,
                                    lambda: self._corpus.bm25)
        self._look_path = self.directory / recallfile.LOOK
        self._file_look: tuple[StatKey, dict[str, Any] | None] | None = None  # by its stat
        self._same_as: tuple[dict[str, Any], dict[str, Any]] | None = None  # (_saw_same)
        self._building = False  # a bulk build: documents go to the new recall file as read
        self._disk: DiskBuild | None = None  # a build straight to disk (``build_on_disk``)

    # -- public API ---------------------------------------------------------------------------
    def sync(self, catalog: Catalog, changes: Changes) -> None:
        """Apply what the catalog just read: added/changed paths re-index, removed ones go.

        Every sync also checks the approvals (one stat), since an approval changes what is
        served without changing a file.
        """
        with self._lock:
            self._ensure_loaded()
            now = time.time_ns()
            for rel in (*changes.added, *changes.changed):
                if not searchable_path(rel):
                    continue
                entry = catalog.entries.get(rel)
                if entry is None or entry.node is None:
                    self._drop(rel)
                    continue
                doc = self._corpus.get(rel)  # a catalog's first refresh reports all as added
                if doc is not None and doc.stat == entry.stat and not doc.racy:
                    continue
                self._put_node(entry.node, entry.stat, now)
            for rel in changes.removed:
                self._drop(rel)
            if self._last_walk > -math.inf:  # else the first search walks and checks
                # an approval changes no node file
                for rel in self._regions.moved(self._corpus.slot_of, self._rejects):
                    self._reread(rel, now)
            self._commit()

    def note_look(self, look: dict[str, Any] | None) -> None:
        """Keep beside the recall file what the engine's last look saw (``Freshness.look``),
        with the unindexed node files (invalid ones) it holds at their stats: a fresh
        process (``osk.reads.quick_search``) that finds the vault still so answers from this
        store without a look of its own. Call it only when every change that look found
        has been handed over (``sync``/``reconcile``). None: no such promise."""
        with self._lock:
            self._ensure_loaded()
            self._commit()
            held = self._look if self._look is not None else self._look_on_file()
            if (look is not None and isinstance(held, dict)
                    and self._recall.changes == self._look_changes
                    and self._saw_same(look, held)
                    and self._newest() < int(held["seen_ns"]) - RACE_WINDOW_NS):
                # Nothing was mirrored since the look on file, which saw the same and already
                # vouches for every file: keep it (a process that finds all current writes
                # nothing). A look too soon after a file's change is replaced by a later one.
                self._look_kept = True
                return
            self._look_kept = False
            self._recall.record_look(look)
            self._look, self._look_changes = look, self._recall.changes

    def at_rest(self) -> bool:
        """Whether a look that found no change would change nothing here: the last look
        handed over was kept as the one on file (``note_look``: it vouches for every file, and
        nothing was mirrored since; a look on file another process recorded, while its file
        has not moved), nothing waits to be committed or mirrored, and the approvals have not
        moved (``Regions.unmoved``)."""
        with self._lock:
            return (self._look_kept and not self._pending and not self._recall.backlog
                    and self._recall.changes == self._look_changes
                    and (self._look is not None or self._file_look is not None
                         and stat_key(self._look_path) == self._file_look[0])
                    and self._regions.unmoved())

    def _saw_same(self, look: dict[str, Any], held: dict[str, Any]) -> bool:
        """Whether ``look`` saw what ``held`` saw (all but the moment each began). The last
        ``held`` found equal is kept with what it saw: the engine hands over the same folder
        stats (the same objects) until a folder is listed anew, so against it the comparison
        stops at identity, where comparing with a look decoded from file goes through every
        folder's stat (200 folders at 100,000 nodes) on every call at an agent's pace."""
        seen = _beside_seen(look)
        if self._same_as is not None and self._same_as[0] is held:
            return seen == self._same_as[1]  # equal to it exactly when equal to ``held``
        same = seen == _beside_seen(held)
        self._same_as = (held, seen) if same else None
        return same

    def _look_on_file(self) -> dict[str, Any] | None:
        """The look recorded beside the recall file (``recallfile.read_look``), read again
        only when the file's stat moved (it is replaced whole, or removed): a server at an
        agent's pace compares a look with it on nearly every call."""
        key = stat_key(self._look_path)
        if key is not None and self._file_look is not None and self._file_look[0] == key:
            return self._file_look[1]
        found = recallfile.read_look(self.directory)
        self._file_look = None if key is None else (key, found)
        return found

    def _newest(self) -> int:
        """The newest mtime among indexed files (counted once, then kept by each change)."""
        if self._newest_ns < 0:
            self._newest_ns = max((doc.stat[1] for doc in self._corpus.docs.values()), default=0)
        return self._newest_ns

    def refresh(self) -> Refreshed:
        """Walk the Spaces now and re-read whatever changed on disk."""
        with self._lock:
            self._ensure_loaded()
            result = self._walk_and_reconcile()
            self._commit()
            return result

    def reconcile(self, catalog: Catalog) -> Refreshed:
        """``refresh`` against the stats the catalog holds for every node file, instead of a
        walk of its own: the engine's catalog has just looked at them (a stat of every file
        is 0.35-0.9 s at 50,000 nodes; this costs a dictionary pass)."""
        with self._lock:
            self._ensure_loaded(catalog.entries)
            result = self._walk_and_reconcile(
                {rel: entry.stat for rel, entry in catalog.entries.items()}, catalog.entries)
            self._commit()
            return result

    def search(
        self,
        query: str,
        *,
        k: int = DEFAULT_K,
        scope: str | None = None,
        visible: Visible | None = None,
        markers: Markers | None = None,
        as_of: str | datetime | None = None,
        postings: int | None = None,
    ) -> list[Hit]:
        """Ranked hits for ``query`` (the order is described in ``osk.search.ranking``).

        ``scope``: the session's scope (locality). ``visible(doc)``: False hides a node (scope
        isolation). ``markers(ids)``: extra markers per node id (recheck, conflict, …).
        ``as_of``: only nodes that existed and were valid then (a date or a timestamp).
        ``postings``: words rank by the query's rarest terms only, as many as hold at most
        that many postings together (``Ranking.rank``): a cost that stays flat with the vault.
        """
        query, k = checked(query, k)
        with self._lock:
            ranked = self.channels(query, k=k, scope=scope, visible=visible, as_of=as_of,
                                   postings=postings, meaning_if_needed=True)
            return ranked.ranking.hits(ranked.order, markers)

    def channels(self, query: str, *, k: int, scope: str | None = None,
                 visible: Visible | None = None, as_of: str | datetime | None = None,
                 fresh_within: float | None = None, postings: int | None = None,
                 meaning_if_needed: bool = False) -> Channels:
        """What ``search`` ranks by, before hits are made: the ranking (visibility, locality,
        validity), the lexical order, the semantic order when the channel is on and reads the
        query (None otherwise), and the best ``k`` of their fusion (``order``). Per-prompt
        recall asked of the MCP server (``osk.search.recall_server``) ranks from here, so it ranks
        exactly as ``search`` does. ``fresh_within``: walk for changes made elsewhere when the
        last walk is older than that many seconds (default: the index's refresh interval).
        ``postings``: as in ``search``. ``meaning_if_needed``: where the words decide the first
        ``k`` whatever meaning says (``ranking.words_decide``), the query is not embedded nor
        the vectors scanned (the semantic order is then empty; what is missing is still
        embedded); per-prompt recall asks for the semantic order whatever the words say."""
        when = moment(as_of)
        interval = self.refresh_interval if fresh_within is None else fresh_within
        with self._lock:
            self._ensure_loaded()
            if time.monotonic() - self._last_walk >= interval:
                self._walk_and_reconcile()
                self._commit()
            ranking = Ranking(self._corpus, scope=scope, visible=visible, moment=when,
                              explicit_time=as_of is not None)
            approvals = self._regions.served_approvals()
            if self.vectors is None or not self.vectors.model.reads(query):
                lexical = ranking.rank(query, k, postings)
                return Channels(ranking, lexical, None, lexical, approvals)
            # the words' first k alone when they may decide (``rank``'s k best are the first
            # k of its deeper order, and fusion orders by the same key)
            depth = max(k, FUSION_DEPTH)
            lexical = ranking.rank(query, k if meaning_if_needed else depth, postings)
            coverage = ranking.coverage(query, lexical[0][0] if lexical else None)
            asked = not (meaning_if_needed and words_decide(
                coverage, (final for _, _, final, _ in lexical), k))
            if asked and len(lexical) == k < depth:  # fusion looks deeper than the words' k
                lexical = ranking.rank(query, depth, postings)
            try:
                semantic = self._semantic(ranking, query, asked, lexical)
            except Exception as exc:  # a damaged model must not take search down: lexical
                log.exception("the semantic channel failed (%s); searching lexically from now "
                              "on; `osk doctor` says how to mend it", exc)
                self.vectors = None
                return Channels(ranking, lexical, None, lexical[:k], approvals)
            return Channels(ranking, lexical, semantic,
                            fuse(lexical, semantic, k, self._path_of, coverage), approvals)

    def _semantic(self, ranking: Ranking, query: str, asked: bool,
                  lexical: list[Ranked]) -> list[tuple[int, float]]:
        """The semantic order (empty when not ``asked``), after embedding what is missing,
        with the meaning of the words' candidates for fusion after it (``fuse``)."""
        assert self.vectors is not None
        version = self._corpus.version
        if self._embedded_version != version:  # nothing changed since all had vectors: skip
            if self.embed_missing(budget=SEMANTIC_BUDGET) == 0:
                self._embedded_version = version
        if not asked:
            return []
        slots = self._slots_by_content()
        # Locality and validity reorder these only within a factor of about 1.3 (see
        # SEMANTIC_LOCALITY), and hidden nodes drop out: look well past FUSION_DEPTH.
        words = [slot for slot, *_ in lexical[:FUSION_DEPTH]]
        docs = self._corpus.docs
        near = self.vectors.nearest(query, NEAREST, [docs[slot].content_hash for slot in words])
        return ranking.semantic_order({slots[key]: value for key, value in near
                                       if key in slots}, words)

    def _path_of(self, slot: int) -> str:
        return self._corpus.docs[slot].path

    def _slots_by_content(self) -> dict[str, int]:
        """Content hash -> slot, rebuilt only when the corpus changed."""
        version = self._corpus.version
        if self._content_slots[0] != version:
            self._content_slots = (version, {doc.content_hash: slot
                                             for slot, doc in self._corpus.docs.items()})
        return self._content_slots[1]

    def embed_missing(self, *, budget: float | None,
                      progress: Callable[[int, int], None] | None = None,
                      pace: float = 0.0) -> int:
        """Give indexed nodes without a vector one, within ``budget`` seconds (None: all);
        return how many still lack one. A no-op (0) when the semantic channel is off.
        ``pace`` as in ``Vectors.catch_up``."""
        if self.vectors is None:
            return 0
        with self._lock:
            self._ensure_loaded()
            wanted = {doc.content_hash: doc.path for doc in self._corpus.docs.values()}
        missing = self.vectors.catch_up(wanted, lambda key: self._content(wanted[key], key),
                                        budget=budget, progress=progress, pace=pace)
        if not missing and budget is None:
            self.vectors.forget_except(set(wanted))
        return missing

    def missing_vectors(self) -> int:
        """How many indexed nodes have no vector (0 when the semantic channel is off)."""
        if self.vectors is None:
            return 0
        with self._lock:
            self._ensure_loaded()
            keys = [doc.content_hash for doc in self._corpus.docs.values()]
        return self.vectors.count_missing(keys)

    def _content(self, rel: str, content_hash: str) -> str | None:
        """The indexed text of ``rel`` if it still hashes to ``content_hash``, else None."""
        try:
            with open(os.path.join(self._root, rel), encoding="utf-8") as handle:
                node = parse_node(rel, handle.read())
        except (OSError, UnicodeDecodeError):
            return None
        served = self._regions.served(rel, node) if node is not None else None
        if served is None:
            return None
        text = SearchDoc.content_text(title_of(rel), served.meta.summary, served.body)
        return text if sha256_text(text) == content_hash else None

    def flush(self) -> None:
        """Commit what waits (a bulk import calls this at its end)."""
        with self._lock:
            if self._loaded:
                self._commit()

    def build_on_disk(self, known: Known, look: dict[str, Any] | None) -> bool:
        """Index every file straight to disk, holding none of the index (``bulk_build``:
        ``osk import``'s end on a vault with no index yet, where the index built in memory
        stood beside the writes' state), and record ``look`` with it as ``note_look`` does
        (with the files ``known`` holds and the index does not). The index is loaded from
        disk on its next use, as a new process loads it. False, and nothing done, when an
        index is on disk or in memory already (``known``: as in ``reconcile``)."""
        from osk.search.bulk_build import DiskBuild

        with self._lock:
            if self._loaded or recallfile.path_in(self.directory).exists():
                return False
            self._reset_memory()
            disk = self._disk = DiskBuild(self.directory)
            self._recall.start_build()
            try:
                self._build_on_disk(disk, known)
            except BaseException:
                self._recall.abandon_build()
                raise
            finally:
                self._disk = None
                disk.close()
            if look is not None and len(known) != len(disk):
                look["others"] = {rel: list(known[rel].stat)
                                  for rel in sorted(known.keys() - disk.paths)}
            self._recall.record_look(look)
            self._reset_memory()  # the next use loads what was written, as a new process
            return True

    def _build_on_disk(self, disk: DiskBuild, known: Known) -> None:
        now = time.time_ns()
        for rel, stat in _walk(self.vault):
            self._read_file(rel, stat, None, now, known)
        self._recall.build_postings(disk.merged())
        self._recall.end_disk_build(disk.lengths, {**disk.meta(), **self._recall_protection()},
                                    disk.df_counts())

    def rebuild(self, progress: Callable[[int, int], None] | None = None) -> None:
        """Forget everything persisted and index the files again (``progress(done, total)``
        after each file)."""
        with self._lock:
            self._reset_memory()
            self._build("rebuilt: requested", progress)
            self._loaded = True

    def __len__(self) -> int:
        with self._lock:
            self._ensure_loaded()
            return len(self._corpus)

    @property
    def version(self) -> tuple[int, int]:
        """Changes whenever the indexed documents change (loaded, rebuilt, or one changed)."""
        with self._lock:
            self._ensure_loaded()
            return self._memories, self._corpus.version

    def unindexed(self, paths: AbstractSet[str]) -> list[str]:
        """Those of ``paths`` the index holds no document for, sorted (a set difference)."""
        with self._lock:
            self._ensure_loaded()
            return sorted(paths - self._corpus.slot_of.keys())

    def doc(self, path: str) -> SearchDoc | None:
        with self._lock:
            self._ensure_loaded()
            return self._corpus.get(path)

    # -- loading ------------------------------------------------------------------------------
    def _ensure_loaded(self, known: Known | None = None) -> None:
        """Load the recall file, or build it from the files (``known``: what a catalog read
        of them, used instead of reading a file again where it vouches for the bytes)."""
        if self._loaded:
            return
        if not recallfile.path_in(self.directory).exists():
            self._build("built: no index on disk", known=known)
        else:
            try:
                with collector_paused():
                    stored = recallfile.load(self.directory, PARAMS)
                    self._corpus = self._with_stored_terms(Corpus.from_store(stored, known))
            except recallfile.Refused as exc:  # the disk, not the file: the file is left be,
                self._reset_memory()  # and this process's commits reach it as the disk allows
                self._build(f"built in memory: {exc}", known=known, to_file=False)
            except (recallfile.Unusable, ValueError) as exc:
                # (ValueError: postings that do not fit together, ``Bm25.from_base``)
                self._reset_memory()
                self._build(f"rebuilt: {exc}", known=known)
            else:
                self._recall.loaded(stored.version, stored.meta, stored.counts is not None)
                self.load_report = "loaded"
        _retire(self.directory)
        self._loaded = True

    def _build(self, report: str, progress: Callable[[int, int], None] | None = None, *,
               known: Known | None = None, to_file: bool = True) -> None:
        """Index every file afresh, in bulk: the postings staged compactly
        (``Corpus.stage``) and each document written to a new recall file as it is read
        (``RecallMirror.start_build``), swapped in whole at the end, so the memory a build
        needs is about what a loaded index holds. ``to_file``: False, in memory only (the
        recall file is left as it is)."""
        now = time.time_ns()
        # Listed whole only to report progress against the total (a path and stat a node).
        files = _walk(self.vault) if progress is None else list(_walk(self.vault))
        total = len(files) if isinstance(files, list) else 0
        self._corpus.stage()
        if to_file:
            self._recall.start_build()
        self._building = True
        try:
            for done, (rel, stat) in enumerate(files, start=1):
                self._read_file(rel, stat, None, now, known)
                if progress is not None:
                    progress(done, total)
        except BaseException:
            self._recall.abandon_build()
            raise
        finally:
            self._building = False
            self._corpus.staged()
        self._last_walk = time.monotonic()
        self._pending.clear()
        self._recall.end_build(self._corpus)
        self.load_report = report

    def _with_stored_terms(self, corpus: Corpus) -> Corpus:
        """``corpus`` finding a loaded document's terms in the recall file, for this version of
        it only (``recallfile.stored_terms``)."""
        corpus.stored_terms = lambda doc: recallfile.stored_terms(self.directory, doc, PARAMS)
        return corpus

    # -- persistence --------------------------------------------------------------------------
    def _commit(self) -> None:
        """Write pending changes to the recall file (or, while another writer holds it, leave
        them in its backlog for the next commit)."""
        if self._pending:
            ops, self._pending = self._pending, []
            self._recall.mirror(ops)
        elif self._recall.backlog or self._recall.moved(self._recall_protection()):
            self._recall.mirror([])  # only the protection state moved, or a backlog waits

    # -- the recall file (osk.search.recall_mirror) ----------------------------------------------
    def _recall_meta(self) -> dict[str, Any]:
        bm25 = self._corpus.bm25
        return {"n": bm25.size, "total_length": bm25.total_length,
                **self._recall_protection()}

    def _recall_protection(self) -> dict[str, Any]:
        """The part of the recall file's meta that moves without a change of the corpus (the
        params: a file written before they were recorded gets them with the next commit)."""
        return {"approvals": self._regions.served_approvals(),
                "regions": list(self._regions.regions), "params": PARAMS}

    # -- freshness ----------------------------------------------------------------------------
    def _walk_and_reconcile(self, files: dict[str, StatKey] | None = None,
                            known: Known | None = None) -> Refreshed:
        result = Refreshed()
        now = time.time_ns()
        started = time.monotonic()  # an edit made while we walk may be missed: count from here
        corpus = self._corpus
        seen: dict[str, StatKey] = dict(_walk(self.vault)) if files is None else files
        forced = self._regions.moved(corpus.slot_of, self._rejects)
        for rel, stat in seen.items():
            doc = corpus.get(rel)
            if doc is None:
                rejected = self._rejects.get(rel)
                if (rejected is not None and rejected[0] == stat and not _racy(*rejected)
                        and rel not in forced):
                    continue
                if self._read_file(rel, stat, None, now, known):
                    result.added.append(rel)
            elif doc.stat != stat or doc.racy or rel in forced:
                before = doc.file_hash
                if not self._read_file(rel, stat, None if rel in forced else doc, now, known):
                    result.removed.append(rel)
                elif corpus.get(rel).file_hash != before:  # type: ignore[union-attr]
                    result.changed.append(rel)
        for rel in [rel for rel in corpus.slot_of if rel not in seen]:
            self._drop(rel)
            result.removed.append(rel)
        for rel in [rel for rel in self._rejects if rel not in seen]:
            del self._rejects[rel]
        self._last_walk = started
        return result

    def _reread(self, rel: str, now: int) -> None:
        try:
            st = os.stat(os.path.join(self._root, rel))
        except FileNotFoundError:
            self._drop(rel)
            return
        self._read_file(rel, (st.st_size, st.st_mtime_ns, st.st_ino), None, now)

    def _read_file(self, rel: str, stat: StatKey, previous: SearchDoc | None, now: int,
                   known: Known | None = None) -> bool:
        """(Re)index one file; False when it is gone or not a valid node (then unindexed).
        ``known``: a catalog's entries; one that read this file at this stat, past the race
        window, with its text still held, is indexed as read there (``osk import`` ends by
        indexing what it wrote: no file is read or parsed a second time); one whose text it
        let go (``Node.let_text_go``) is read, and not parsed when the bytes have its hash."""
        entry = None if known is None else known.get(rel)
        if entry is not None and entry.stat == stat:  # the catalog's strings, not the walk's
            rel, stat = entry.path, entry.stat
        if (entry is not None and entry.node is not None and entry.node.text_held
                and entry.stat == stat and not _racy(stat, entry.read_at_ns)):
            self._put_node(entry.node, stat, entry.read_at_ns, force=previous is None)
            return rel in self._corpus.slot_of
        try:
            with open(os.path.join(self._root, rel), encoding="utf-8") as handle:
                text = handle.read()
        except FileNotFoundError:
            self._drop(rel)
            return False
        except (OSError, UnicodeDecodeError):
            self._reject(rel, stat, now)
            return False
        file_hash = sha256_text(text)
        if previous is not None and previous.file_hash == file_hash:
            previous.stat, previous.read_ns = stat, now
            self._newest_ns = max(self._newest_ns, stat[1]) if self._newest_ns >= 0 else -1
            self._pending.append(["stat", rel, *stat, now])
            return True
        held = None if entry is None else entry.node
        # A node whose text the catalog let go: the same bytes need no parse (and the document
        # keeps the catalog's string of the hash, not a second one).
        if held is not None and held.file_hash == file_hash:
            file_hash = held.file_hash
            node: Node | None = held.with_text(text)
        else:
            node = parse_node(rel, text)
        if node is None:
            self._reject(rel, stat, now)
            return False
        self._put_node(node, stat, now, file_hash, force=previous is None)
        return rel in self._corpus.slot_of

    def _reject(self, rel: str, stat: StatKey, now: int) -> None:
        self._drop(rel)
        self._rejects[rel] = (stat, now)

    # -- changing the index ---------------------------------------------------------------------
    def _put_node(self, node: Node, stat: StatKey, read_ns: int, file_hash: str = "",
                  *, force: bool = False) -> None:
        rel = node.path
        file_hash = file_hash or node.file_hash
        current = self._corpus.get(rel)
        if current is not None and not force and current.file_hash == file_hash:
            if current.stat != stat or current.read_ns != read_ns:
                current.stat, current.read_ns = stat, read_ns
                self._newest_ns = max(self._newest_ns, stat[1]) if self._newest_ns >= 0 else -1
                self._pending.append(["stat", rel, *stat, read_ns])
            return
        served = self._regions.served(rel, node)
        if served is None:  # readers must treat it as absent for now
            self._reject(rel, stat, read_ns)
            return
        self._rejects.pop(rel, None)
        doc, frequencies = document(rel, served, stat, file_hash, read_ns)
        if self._disk is not None:  # a build straight to disk: nothing kept here
            self._recall.put(self._disk.put(doc, frequencies), doc, frequencies)
            return
        self._corpus.store(doc, frequencies)
        self._newest_ns = max(self._newest_ns, stat[1]) if self._newest_ns >= 0 else -1
        if self._building:
            self._recall.put(self._corpus.slot_of[rel], doc, frequencies)
        else:
            self._pending.append(["put", doc.record(), dict(frequencies)])

    def _drop(self, rel: str) -> None:
        slot = self._corpus.slot_of.get(rel)
        removed = self._corpus.remove(rel)
        if removed and self._building and slot is not None:
            self._recall.drop(slot)
        elif removed:
            self._pending.append(["del", rel])


# -- helpers ------------------------------------------------------------------------------------
def _walk(vault: Vault) -> Iterator[tuple[str, StatKey]]:
    """The catalog's traversal (imported here: osk.store.catalog loads pydantic via
    osk.store.node)."""
    from osk.store.catalog import walk_nodes

    return walk_nodes(vault)


# What the index kept on disk before the recall file was its one store (a snapshot and a
# journal of changes, 107 MB beside the recall file's 174 at 100,000 nodes): removed once the
# recall file is loaded or built.
_RETIRED = ("snapshot.bin", "journal.jsonl")


def _retire(directory: Path) -> None:
    for name in _RETIRED:
        try:
            (directory / name).unlink(missing_ok=True)
        except OSError:  # a read-only disk: nothing reads them
            pass


def _beside_seen(look: dict[str, Any]) -> dict[str, Any]:
    """A look without the moment it began (``note_look`` compares what two looks saw)."""
    return {key: value for key, value in look.items() if key != "seen_ns"}


def _racy(stat: StatKey, read_ns: int) -> bool:
    return read_ns - stat[1] < RACE_WINDOW_NS
