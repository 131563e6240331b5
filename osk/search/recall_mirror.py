"""The search index's side of the recall file (``osk.search.recallfile``), its one store.

``SearchIndex`` hands each commit's changes to ``mirror``, whose transaction is the commit; a
full build streams its documents as it reads them (``start_build``, ``put``, ``end_build``:
the corpus keeps no document's terms); a load says what it read (``loaded``). While another
writer holds the file, the changes wait in a backlog for the next commit (a process that ends
with one leaves the file at the files' old stat keys: the next load's walk reads them again).

The counts of document frequencies (``recallfile.COUNTS``) go with every write and build: the
rows of the dfs the index moved since its last write there, while this index's documents are
the file's (``version``: from a build, or a load that found the file as the index, until
another process moves the file's version before this one writes again), stamped as counting
that write's version (``recallfile.COUNTED``); every row otherwise, unstamped. A load that
finds the file holding its documents and counted adopts them (``Bm25.adopt_counts``).

A failure here must not take search down. When the disk refused a commit (full, over quota,
read-only, forbidden: ``osk.store.vault.disk_error``), SQLite took none of it and the file is
whole, only behind: the changes wait in the backlog as for a busy file, and go with the
first commit the disk takes. Since the file is the index's one store, that keeps a full disk from
costing a rebuild from every node file once space is freed. Any other failure (a damaged file)
removes the file: the hooks recall nothing until the next load builds it again from the files,
and search goes on from memory.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osk.search import recallfile
from osk.store.transactions import busy
from osk.store.vault import disk_error

if TYPE_CHECKING:
    from array import array
    from collections.abc import Iterable, Mapping

    from osk.search.bm25 import Bm25
    from osk.search.corpus import Corpus, SearchDoc

log = logging.getLogger("osk.search")

# Changes kept for a file that cannot take them now (busy, or the disk refused), a few KB each;
# past this many, the file is removed (the next load builds it again) and they are let go: a
# disk that refuses the file for good (another user's file) must not grow the process forever.
BACKLOG_MOST = 10_000


class RecallMirror:
    """The recall file of one index directory, as this index last wrote it.

    ``meta`` gives the file's meta for the corpus as it stands (n, total length, the
    protection state the served versions were read under); ``bm25`` the index's postings,
    whose counts of document frequencies go with each write (``Bm25.counts_moved``).
    """

    def __init__(self, directory: Path, meta: Callable[[], dict[str, Any]],
                 bm25: Callable[[], Bm25]) -> None:
        self.directory = directory
        self.meta = meta
        self.bm25 = bm25
        # the file's version while its documents are this index's (None: not known to be)
        self.version: str | None = None
        # the file's version after this index last wrote its counts there (None: not known
        # to be), and the dfs moved since (None: not known; every row goes)
        self._last: str | None = None
        self._unwritten: set[int] | None = None
        self.written: dict[str, Any] | None = None  # the recall file's meta, as written
        self.backlog: list[list[Any]] = []  # changes a busy recall file did not take
        self.changes = 0  # documents mirrored or rebuilt by this process (counts each step)
        self._build: recallfile.RecallBuild | None = None  # a streamed build (start_build)
        self._build_failed = False
        self._refused = False  # the disk refused the last commit (logged once a streak)

    def moved(self, protection: dict[str, Any]) -> bool:
        """Whether the file's meta must be written though no document changed: the corpus's
        part (counts) moves only with documents."""
        written = self.written
        return written is None or any(written.get(key) != value
                                      for key, value in protection.items())

    def mirror(self, ops: list[list[Any]]) -> None:
        meta = self.meta()
        backlog, self.backlog = self.backlog, []
        if ops or backlog:
            self.changes += 1
            recallfile.forget_look(self.directory)
        expected = self.version
        counts, moved = self.bm25().counts_moved()
        unwritten = self._unwritten
        unwritten = None if moved is None or unwritten is None else unwritten | moved
        self._unwritten = None  # until the file has taken them
        try:
            before, self.version = recallfile.RecallWriter(self.directory).mirror(
                [*backlog, *ops], meta, expected=expected, counts=counts, moved=unwritten,
                last=self._last)
            self.written = meta
            self._last, self._unwritten = self.version, set()
            self._refused = False
            if expected is None or before != expected:
                self.version = None  # another process moved the counts since: unknown here
        except (sqlite3.Error, OSError, recallfile.Unusable) as exc:
            self.version = None
            refused = disk_error(exc, sqlite_file=recallfile.path_in(self.directory))
            waits = len(backlog) + len(ops) <= BACKLOG_MOST
            if (busy(exc) or refused is not None) and waits:  # to the next commit
                self.backlog = [*backlog, *ops]
                if refused is not None and not self._refused:
                    log.warning("the recall file stays behind until the disk takes writes "
                                "again: %s", refused)
                self._refused = refused is not None
            else:
                self.failed()

    def loaded(self, version: str | None, meta: dict[str, Any], counted: bool) -> None:
        """The index was loaded from the file at ``version`` (``recallfile.load``): its
        documents are the file's, and so are the counts of dfs when the file ``counted``
        them (the index adopted them)."""
        self.version = version
        self.written = {key: value for key, value in meta.items() if key != "schema"}
        if counted:
            self._last, self._unwritten = version, set()

    def start_build(self) -> None:
        """Start a new file that the documents of a bulk build go to as they are read."""
        self.abandon_build()
        self.changes += 1
        self._build_failed = False
        try:
            recallfile.forget_look(self.directory)
            self._build = recallfile.RecallBuild(recallfile.path_in(self.directory))
        except (sqlite3.Error, OSError):
            self._build_failed = True

    def put(self, slot: int, doc: SearchDoc, terms: Iterable[str]) -> None:
        """One document of the build (``slot``: its row)."""
        if self._build is not None:
            try:
                self._build.put(slot, doc, terms)
            except (sqlite3.Error, OSError, recallfile.Unusable):
                self._build_broke()

    def drop(self, slot: int) -> None:
        """A document put earlier in the build is not indexed after all."""
        if self._build is not None:
            try:
                self._build.drop(slot)
            except (sqlite3.Error, OSError, recallfile.Unusable):
                self._build_broke()

    def end_build(self, corpus: Corpus) -> None:
        """Write the built corpus's postings and swap the file in (or, when the build could
        not be written, remove the old file: the next load rebuilds it)."""
        meta = {} if self._build is None else self.meta()  # a pass over every term
        self._end_build(lambda build: build.finish(corpus.docs, corpus.bm25, meta), meta)

    def build_postings(self, blocks: Iterable[recallfile.Block]) -> None:
        """Insert a bulk build's postings (``RecallBuild.postings``), ahead of ``end_disk_build``;
        what a failed insert did not take of ``blocks`` is left in it."""
        if self._build is not None:
            try:
                self._build.postings(blocks)
            except (sqlite3.Error, OSError, recallfile.Unusable):
                self._build_broke()

    def end_disk_build(self, lengths: array[int], meta: dict[str, Any],
                       counts: Mapping[int, int]) -> None:
        """End a build whose postings ``build_postings`` took: the documents' lengths (by slot),
        ``meta`` and the counts of document frequencies, then the file swapped in (or the old
        one removed, as ``end_build``)."""
        self._end_build(lambda build: build.end(lengths, meta, counts), meta)

    def _end_build(self, finish: Callable[[recallfile.RecallBuild], str | None],
                   meta: dict[str, Any]) -> None:
        build, self._build = self._build, None
        self.version = None
        if build is None:
            if self._build_failed:
                self.failed()
            return
        try:
            self._built(finish(build))
            self.written = meta
        except (sqlite3.Error, OSError, recallfile.Unusable) as exc:
            if not busy(exc):  # busy: the file stays; the next load compares it
                self.failed()
        finally:
            build.abandon()

    def _built(self, version: str | None) -> None:
        """A file written whole from this index, at ``version``, with its counts (None:
        without them: the next write takes them whole)."""
        self.version = self._last = version
        self._unwritten = None

    def abandon_build(self) -> None:
        """Drop a build that will not end (its index build was interrupted)."""
        build, self._build = self._build, None
        if build is not None:
            build.abandon()

    def _build_broke(self) -> None:
        self.abandon_build()
        self._build_failed = True

    def failed(self) -> None:
        log.exception("the recall file could not be updated; removing it (rebuilt on next load)")
        self.written = self.version = None
        try:
            recallfile.forget_look(self.directory)
            recallfile.remove(self.directory)
        except OSError:  # a read-only disk: the vault cannot change under the file either
            log.warning("the recall file could not be removed; the hooks rank without it "
                        "until the disk takes writes again")

    def record_look(self, look: dict[str, Any] | None) -> None:
        """Keep ``look`` beside the file, when the file holds every change made before it."""
        try:
            if look is None or self.backlog or self.written is None:
                recallfile.forget_look(self.directory)
            else:
                recallfile.write_look(self.directory, look)
        except OSError:  # a read-only disk: no look recorded, fresh searches use the engine
            pass
