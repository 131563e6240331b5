"""A whole search index written from the files straight to disk, none of it held in memory.

``osk import`` into a vault with no index yet ends by indexing every node it wrote. Built in
memory (``SearchIndex._build``), the index stood whole beside the writes' state until its
recall file was written from it: 1.8 KB a node held, 2.2 at its peak
(docs/performance.md). Here (``SearchIndex.build_on_disk``) each document goes to the new
recall file as it is read, its postings to a ``bm25.Staged`` that is written out as a
sorted run every ``RUN_POSTINGS`` postings; at the end the runs are merged term by term, in
sorted order, into the recall file's postings. What is held is a run's postings and each
document's length.

The temporary files are unnamed (``tempfile.TemporaryFile`` in the index folder): the system
removes them when they are closed, on success, on failure, or when the process is killed.
"""

from __future__ import annotations

import heapq
import os
import struct
from array import array
from collections import Counter
from collections.abc import Iterator
from itertools import groupby
from operator import itemgetter
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from osk.search import recallfile
from osk.search.bm25 import Staged

if TYPE_CHECKING:
    from osk.search.corpus import SearchDoc

# Postings staged before they are written out as a run: 4 bytes each staged (8 MB), plus each
# term's array; at 100,000 nodes of the scale bench (146 postings a node) some 7 runs.
RUN_POSTINGS = 1 << 21
READ_BYTES = 1 << 18  # read from each run at a time while merging
_HEAD = struct.Struct("<IIc")  # a run's term: its UTF-8 length, its postings, the counts' type

Run = Iterator[tuple[str, "array[int]", "array[int]"]]  # (term, slots, counts), terms sorted


class DiskBuild:
    """One bulk build's temporary files and what it counts: ``put`` each document (slots are
    given in order from 0), then ``merged`` once; ``close`` always."""

    def __init__(self, directory: Path) -> None:
        import tempfile  # here: it costs a hook 5 ms to import, and only a bulk build needs it

        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self._files: list[IO[bytes]] = []

        def temporary() -> IO[bytes]:
            handle = tempfile.TemporaryFile(dir=directory)
            self._files.append(handle)
            return handle

        self._runs = temporary()  # the runs one after another
        self._run_ends = [0]
        self._staged = Staged()
        self.lengths = array("I")  # by slot
        self.paths: set[str] = set()
        self._tfs_code = "B"  # the widest a run's counts needed
        self._histogram: Counter[int] = Counter()  # terms by document frequency (``merged``)

    def __len__(self) -> int:
        return len(self.lengths)

    def put(self, doc: SearchDoc, frequencies: dict[str, int]) -> int:
        """Add a document, not seen before in this build; returns its slot."""
        if doc.path in self.paths:
            raise ValueError(f"{doc.path} is already in this build")
        slot = len(self.lengths)
        self.lengths.append(doc.length)
        self.paths.add(doc.path)
        self._staged.add(slot, frequencies, doc.length)
        if self._staged.postings >= RUN_POSTINGS:
            self._write_run()
        return slot

    def _write_run(self) -> None:
        staged, self._staged = self._staged, Staged()
        self._tfs_code = max(self._tfs_code, staged.tf_code, key="BHI".index)
        out = self._runs
        for term, slots, tfs in staged.drain():
            name = term.encode("utf-8")
            out.write(_HEAD.pack(len(name), len(slots), tfs.typecode.encode("ascii")))
            out.write(name)
            out.write(memoryview(slots).cast("B"))
            out.write(memoryview(tfs).cast("B"))
        self._run_ends.append(out.tell())

    def merged(self) -> Iterator[recallfile.Block]:
        """Every term's postings, terms in sorted order, as the recall file's blocks."""
        if self._staged.postings or len(self._run_ends) == 1:
            self._write_run()
        self._runs.flush()
        tfs_code = self._tfs_code
        fd = self._runs.fileno()
        runs = [_read_run(fd, start, end)
                for start, end in zip(self._run_ends, self._run_ends[1:], strict=False)]
        merged = heapq.merge(*runs, key=itemgetter(0))  # equal terms in run order: slots rise
        for term, parts in groupby(merged, key=itemgetter(0)):
            slots, tfs = array("I"), array(tfs_code)
            for _, run_slots, run_tfs in parts:
                slots.extend(run_slots)
                if run_tfs.typecode == tfs_code:
                    tfs.extend(run_tfs)
                else:
                    tfs.fromlist(run_tfs.tolist())
            self._histogram[len(slots)] += 1
            yield from recallfile.blocks(term, slots, tfs)

    def meta(self) -> dict[str, Any]:
        """The recall file's counts (``SearchIndex._recall_meta``'s): after ``merged``."""
        return {"n": len(self.lengths), "total_length": sum(self.lengths)}

    def df_counts(self) -> Counter[int]:
        """How many terms occur in exactly d documents, by d: after ``merged``."""
        return self._histogram

    def close(self) -> None:
        """Let every temporary file go (the system removes them)."""
        files, self._files = self._files, []
        for handle in files:
            handle.close()


def _read_run(fd: int, start: int, end: int) -> Run:
    """One run's terms from the runs file, read ``READ_BYTES`` at a time."""
    buffer, at, position = b"", 0, start

    def take(count: int) -> bytes:
        nonlocal buffer, at, position
        while len(buffer) - at < count:
            part = os.pread(fd, max(READ_BYTES, count), position)
            if not part or position >= end:
                raise ValueError("a run of the bulk build is truncated")
            part = part[:end - position]
            position += len(part)
            buffer, at = buffer[at:] + part, 0
        taken = buffer[at:at + count]
        at += count
        return taken

    while position < end or at < len(buffer):
        length, count, code = _HEAD.unpack(take(_HEAD.size))
        term = take(length).decode("utf-8")
        slots, tfs = array("I"), array(code.decode("ascii"))
        slots.frombytes(take(count * slots.itemsize))
        tfs.frombytes(take(count * tfs.itemsize))
        yield term, slots, tfs

