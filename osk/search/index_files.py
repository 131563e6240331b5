"""The search index on disk: a snapshot plus an append-only journal, in device state.

Both files live in ``.osk/index/`` (never synced). They are a cache of what the node files
say: every entry carries the stat key of the file it was read from, and a loader trusts an
entry only while the file still has that stat key (see ``SearchIndex``). So a lost journal
line, a stale snapshot or a second process's concurrent write costs a re-read, never a wrong
answer, and the files need no lock.

Snapshot (``snapshot.bin``)::

    OSK-SEARCH-INDEX\\n
    {"version": 3, "params": {...}, "generation": "...", "sections": [...], "crc32": N}\\n
    <meta JSON><offsets><slots><tfs><lengths>

``meta`` is UTF-8 JSON (the vocabulary and per-document records); each term's slots are in
ascending order (version 3: a membership test is a binary search); the other sections are raw
``array`` bytes in the machine's byte order (the header names each one's type and size), so
loading them is a copy, not a parse. A document's distinct terms (needed only to remove it)
are not here: the recall file holds them (``recallfile.stored_terms``), and the journal
carries those a change looked up (``Corpus.store``). Version 2 also held them as vocabulary
numbers (40 MB of 147 at 100,000 nodes); such a snapshot is read without them.
The CRC covers every byte after the header line, so truncation and bit damage are both
caught. No pickle or marshal: nothing in these files is ever executed or trusted blindly.

Journal (``journal.jsonl``): a header line naming the snapshot generation it extends, then
one ``CRC32HEX JSON`` line per change: ``["put", record, {term: count}]``, ``["stat", path,
size, mtime_ns, inode, read_ns]``, ``["del", path]``; a put or del that replaced a version
whose terms were looked up outside the process ends with ``[content hash, length, terms]``.
A journal for another generation is ignored; replay stops at the first damaged line (a torn
append), and the index then rewrites both files.
"""

from __future__ import annotations

import json
import os
import sys
import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain
from pathlib import Path
from typing import Any, BinaryIO

from osk.search.bm25 import code_for
from osk.store.fastclass import dataclass
from osk.store.fsutil import atomic_write

FORMAT_VERSION = 3  # 2: SearchDoc.supersedes holds a loose title key; 3: no per-document terms
READABLE = (2, 3)  # a version 2 snapshot is read without its per-document terms
MAGIC = b"OSK-SEARCH-INDEX\n"
SNAPSHOT = "snapshot.bin"
JOURNAL = "journal.jsonl"
# The array sections, in file order. The postings' slots and counts are written in 8 or 16
# bits when every value fits (``narrowest``): at 10,000 nodes 16.2 MB of snapshot became 11.2
# (docs/performance.md, "The recall file packed").
_ARRAYS = ("offsets", "slots", "tfs", "lengths")
_NARROWED = ("slots", "tfs")
_DROPPED = ("doc_term_offsets", "doc_terms")  # version 2's per-document terms, not read
CODES = "BHI"  # the array types a section may have, narrowest first


class Damaged(Exception):
    """A persisted index file cannot be used; the message says why. The index rebuilds."""


class Missing(Damaged):
    """There is no persisted index yet."""


@dataclass
class Snapshot:
    generation: str
    params: dict[str, Any]
    terms: list[str]  # the vocabulary; term i owns postings offsets[i]:offsets[i + 1]
    # document records by slot, None for a free slot (read ``lazy``: an iterator of them)
    docs: Sequence[list[Any] | None] | Iterator[list[Any] | None]
    offsets: array[int]
    slots: array[int]
    tfs: array[int]
    lengths: array[int]  # by slot
    sorted_slots: bool = True  # each term's slots ascending (version 3; 2 did not promise it)


def new_generation() -> str:
    import uuid  # here: uuid imports platform, and the hooks read this package's files

    return uuid.uuid4().hex


# -- snapshot -------------------------------------------------------------------------------
def write_snapshot(directory: Path, snapshot: Snapshot) -> int:
    """Write the snapshot atomically; returns its size in bytes. The body is made twice, in
    parts, and never held whole: once for the header's sizes and checksum, once as it is
    written (the meta encoded ``CHUNK`` records at a time, each array its own bytes or
    narrowed ``CHUNK_ITEMS`` at a time). At 100,000 nodes the meta whole, the arrays'
    copies and narrowed copies raised an import's end by some 1.3 KB a node; encoding the
    meta again costs about 5 us a node."""
    codes = [narrowest_code(getattr(snapshot, name)) if name in _NARROWED
             else getattr(snapshot, name).typecode for name in _ARRAYS]
    return write_sections(directory, snapshot.generation, snapshot.params, codes,
                          lambda: _body(snapshot, codes))


Body = Iterator[tuple[int, bytes | memoryview]]  # a part of the body, with its section


def write_sections(directory: Path, generation: str, params: dict[str, Any], codes: list[str],
                   body: Callable[[], Body]) -> int:
    """Write a snapshot whose body ``body()`` gives in parts, in file order, each with its
    section's number (0: the meta, then ``_ARRAYS`` in ``codes``' types): called twice, once
    for the header's sizes and checksum, once as it is written. Returns the size in bytes."""
    sizes, crc = [0] * (1 + len(_ARRAYS)), 0
    for section, part in body():
        sizes[section] += len(part)
        crc = zlib.crc32(part, crc)
    header = {
        "version": FORMAT_VERSION,
        "params": params,
        "generation": generation,
        "byteorder": sys.byteorder,
        "sizes": {code: array(code).itemsize for code in "HI"},
        "sections": [["meta", "json", sizes[0]]] + [
            [name, code, size] for name, code, size in zip(_ARRAYS, codes, sizes[1:],
                                                            strict=True)],
        "crc32": crc,
    }
    head = MAGIC + json.dumps(header, separators=(",", ":")).encode("ascii") + b"\n"
    atomic_write(directory / SNAPSHOT, chain([head], (part for _, part in body())))
    return len(head) + sum(sizes)


CHUNK = 1000  # document records encoded together (``write_snapshot``)
CHUNK_ITEMS = 1 << 16  # array items narrowed together


def _body(snapshot: Snapshot, codes: list[str]) -> Body:
    """The snapshot's body in parts, each with its section's number (0: the meta)."""
    for part in _meta_parts(snapshot):
        yield 0, part
    for section, (name, code) in enumerate(zip(_ARRAYS, codes, strict=True), start=1):
        values = getattr(snapshot, name)
        if values.typecode == code:
            yield section, memoryview(values).cast("B")  # its own bytes, not a copy
            continue
        for start in range(0, len(values), CHUNK_ITEMS):
            yield section, array(code, values[start:start + CHUNK_ITEMS]).tobytes()


def _meta_parts(snapshot: Snapshot) -> Iterator[bytes]:
    """``{"terms": [...], "docs": [...]}`` as one ``json.dumps`` of it writes it, in parts."""
    docs = snapshot.docs
    if not isinstance(docs, Sequence):
        raise TypeError("a snapshot read lazily is not written back")

    def records(docs: Sequence[list[Any] | None]) -> Iterator[bytes]:
        for start in range(0, len(docs), CHUNK):
            chunk = _dumps([docs[slot] for slot in range(start, min(start + CHUNK, len(docs)))])
            yield (b"," if start else b"") + chunk[1:-1]

    return meta_parts(snapshot.terms, records(docs))


def meta_parts(terms: list[str], records: Iterable[bytes]) -> Iterator[bytes]:
    """The meta section in parts: ``records`` are the documents' records, by slot, as
    ``record_bytes`` encodes them, joined by commas (in parts of any size)."""
    yield _TERMS_AT.encode() + _dumps(terms) + _DOCS_AT.encode()
    yield from records
    yield b"]}"


def record_bytes(record: list[Any] | None) -> bytes:
    """One document's record as the meta holds it."""
    return _dumps(record)


def _dumps(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def narrowest(values: array[int]) -> array[int]:
    """``values`` in the narrowest array type (of ``CODES``) that holds them all: a pass in C
    to find out, a copy only when it is another type."""
    code = narrowest_code(values)
    return values if values.typecode == code else array(code, values)


def narrowest_code(values: array[int]) -> str:
    """The type ``narrowest`` gives ``values``."""
    return code_for(max(values, default=0))


def read_snapshot(directory: Path, params: dict[str, Any], *, lazy: bool = False) -> Snapshot:
    """Read and check the snapshot; raise Missing or Damaged (with the reason) otherwise.

    Read a section at a time, each array straight into its own (``array.fromfile``), the
    checksum kept as it goes: the file read whole (127 MB at 100,000 nodes) was held beside
    its meta's copy, that copy's decoded text and the decoded records. ``lazy``: the
    document records are decoded one at a time as ``docs`` is iterated, once (a damaged one
    raises Damaged or ValueError there), so a reader that keeps part of each record never
    holds every record whole (at 100,000 nodes 1.1 KB a record, 22 MB of them their lists),
    nor the meta's text: it is read again a chunk at a time as it is decoded (``_Stream``),
    where its text whole (53 MB at 100,000 nodes) was the load's peak above what it keeps."""
    try:
        handle = open(directory / SNAPSHOT, "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        raise Missing("no index on disk") from None
    except OSError as exc:
        raise Damaged(f"unreadable ({exc})") from None
    with handle:
        try:
            return _read(handle, params, lazy)
        except OSError as exc:
            raise Damaged(f"unreadable ({exc})") from None


def _read(handle: BinaryIO, params: dict[str, Any], lazy: bool) -> Snapshot:
    if handle.read(len(MAGIC)) != MAGIC:
        raise Damaged("not an osk search index (bad magic)")
    line = handle.readline(HEADER_LIMIT)
    if not line.endswith(b"\n"):
        raise Damaged("header is truncated")
    try:
        header = json.loads(line)
    except ValueError:
        raise Damaged("header is not JSON") from None
    if not isinstance(header, dict):
        raise Damaged("header is not an object")
    if header.get("version") not in READABLE:
        raise Damaged(f"format version {header.get('version')!r}, expected {FORMAT_VERSION}")
    if header.get("params") != params:
        raise Damaged("built with other tokenizer or ranking parameters")
    if (header.get("byteorder") != sys.byteorder
            or header.get("sizes") != {code: array(code).itemsize for code in "HI"}):
        raise Damaged("written on a machine with another byte order or integer size")
    sections: Any = header.get("sections")  # any JSON: a wrong shape is Damaged below
    expected = ["meta", *_ARRAYS] + (list(_DROPPED) if header["version"] == 2 else [])
    try:
        names = [section[0] for section in sections]
        sizes = [int(section[2]) for section in sections]
        codes = [section[1] for section in sections]
    except (TypeError, IndexError, KeyError, ValueError):
        raise Damaged("the header's section list is malformed") from None
    body = os.fstat(handle.fileno()).st_size - handle.tell()
    if names != expected or sum(sizes) != body or min(sizes) < 0:
        raise Damaged("sections do not add up to the file size (truncated?)")
    meta_at = handle.tell()
    text: str | None = None
    if lazy:  # read again as it is decoded (``_streamed``)
        crc = meta_crc = _crc_of(handle, sizes[0])
    else:
        raw = handle.read(sizes[0])
        crc = meta_crc = zlib.crc32(raw)
        try:  # parsed once the checksum vouches for it
            text = raw.decode("utf-8")
        except ValueError:
            text = None
        del raw
    arrays = []
    for code, size in zip(codes[1:1 + len(_ARRAYS)], sizes[1:1 + len(_ARRAYS)], strict=True):
        if code not in CODES:
            raise Damaged(f"unknown array type {code!r}")
        values = array(code)
        if size % values.itemsize:
            raise Damaged("an array section has a partial item")
        try:
            values.fromfile(handle, size // values.itemsize)
        except EOFError:
            raise Damaged("sections do not add up to the file size (truncated?)") from None
        crc = zlib.crc32(values, crc)
        arrays.append(values)
    for skipped in iter(lambda: handle.read(CHUNK_BYTES), b""):  # version 2's dropped ones
        crc = zlib.crc32(skipped, crc)
    if crc != header.get("crc32"):
        raise Damaged("checksum mismatch")
    if lazy:
        return _streamed(header, handle, (meta_at, sizes[0], meta_crc), arrays)
    return _decode(header, text, arrays, lazy)


def _crc_of(handle: BinaryIO, size: int) -> int:
    """The CRC of the next ``size`` bytes, read a chunk at a time."""
    crc, left = 0, size
    while left:
        chunk = handle.read(min(left, CHUNK_BYTES))
        if not chunk:
            raise Damaged("sections do not add up to the file size (truncated?)")
        crc, left = zlib.crc32(chunk, crc), left - len(chunk)
    return crc


def _streamed(header: dict[str, Any], handle: BinaryIO, meta: tuple[int, int, int],
              arrays: list[array[int]]) -> Snapshot:
    """The snapshot whose meta (at, size, CRC) is decoded from the file as ``docs`` is
    iterated, through a handle of its own (closed with the last record). The bytes read
    again must have the CRC the whole file's check read them with, or the last record
    raises Damaged. A meta laid out otherwise than ``_meta_parts`` writes it is read whole."""
    at, size, crc = meta
    own = open(os.dup(handle.fileno()), "rb", buffering=0)  # noqa: SIM115 - closed with the last record
    try:
        own.seek(at)
        stream = _Stream(own, size)
        if stream.literal(_TERMS_AT):
            terms = stream.value()
            if stream.literal(_DOCS_AT):
                if not isinstance(terms, list):
                    raise Damaged("metadata does not match the arrays")
                docs = _streamed_docs(own, stream, len(arrays[3]), crc)
                offsets, slots, tfs, lengths = arrays
                return Snapshot(str(header.get("generation")), header["params"], terms, docs,
                                offsets, slots, tfs, lengths, header["version"] >= 3)
        own.seek(at)
        whole = b"".join(iter(lambda: own.read(size - own.tell() + at), b""))[:size]
        own.close()
    except ValueError:
        own.close()
        raise Damaged("metadata is not the expected JSON") from None
    except BaseException:
        own.close()
        raise
    try:
        text: str | None = whole.decode("utf-8") if zlib.crc32(whole) == crc else None
    except ValueError:
        text = None
    return _decode(header, text, arrays, True)


def _streamed_docs(own: BinaryIO, stream: _Stream, count: int, crc: int
                   ) -> Iterator[list[Any] | None]:
    """``count`` records from ``stream``, then the meta's end (``_records`` over a stream)."""
    with own:
        for number in range(count):
            if number and not stream.literal(","):
                raise Damaged("metadata does not match the arrays")
            yield stream.value()
        if stream.rest() != "]}" or stream.crc != crc:
            raise Damaged("metadata does not match the arrays")


class _Stream:
    """JSON values decoded in order from the next ``size`` bytes of a file, read a chunk at
    a time: what is held is the value being decoded and a chunk."""

    def __init__(self, handle: BinaryIO, size: int) -> None:
        import codecs

        self._handle, self._left = handle, size
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self._text, self._at = "", 0
        self.crc = 0  # of the bytes read so far

    def _more(self, want: int) -> bool:
        """Read up to ``want`` more bytes onto what is left to decode; False at the end."""
        if not self._left:
            return False
        try:
            chunk = self._handle.read(min(self._left, want))
        except OSError as exc:
            raise Damaged(f"unreadable ({exc})") from None
        if not chunk:
            raise Damaged("sections do not add up to the file size (truncated?)")
        self._left -= len(chunk)
        self.crc = zlib.crc32(chunk, self.crc)
        self._text = self._text[self._at:] + self._utf8.decode(chunk, final=not self._left)
        self._at = 0
        return True

    def value(self) -> Any:
        """The next JSON array or object (the meta's values end with a bracket, so a value
        decoded from what is read so far is the whole of it); ValueError if none is there."""
        want = CHUNK_BYTES
        while True:
            try:
                value, self._at = _DECODER.raw_decode(self._text, self._at)
                return value
            except ValueError:
                if not self._more(want):
                    raise
                want *= 2  # a long value: each retry decodes it from its start again

    def literal(self, text: str) -> bool:
        """Whether ``text`` comes next (taken if so)."""
        while len(self._text) - self._at < len(text) and self._more(CHUNK_BYTES):
            pass
        if self._text.startswith(text, self._at):
            self._at += len(text)
            return True
        return False

    def rest(self) -> str:
        """What is left of the section (a few bytes where it is whole)."""
        while self._more(CHUNK_BYTES):
            pass
        return self._text[self._at:]


HEADER_LIMIT = 1 << 20  # a header line is a few hundred bytes
CHUNK_BYTES = 1 << 20  # what a skipped section is read by


def _decode(header: dict[str, Any], text: str | None, arrays: list[array[int]],
            lazy: bool) -> Snapshot:
    offsets, slots, tfs, lengths = arrays
    try:
        if text is None:
            raise ValueError("not UTF-8")
        terms, records = _meta(text, len(lengths))
        docs: Sequence[list[Any] | None] | Iterator[list[Any] | None] = \
            records if lazy else list(records)
    except (ValueError, KeyError, TypeError):
        raise Damaged("metadata is not the expected JSON") from None
    if not isinstance(terms, list):
        raise Damaged("metadata does not match the arrays")
    return Snapshot(str(header.get("generation")), header["params"], terms, docs,
                    offsets, slots, tfs, lengths, header["version"] >= 3)


_DECODER = json.JSONDecoder()
_TERMS_AT = '{"terms":'  # the meta as ``_meta_parts`` writes it
_DOCS_AT = ',"docs":['


def _meta(text: str, count: int) -> tuple[Any, Iterator[list[Any] | None]]:
    """The meta's vocabulary and its ``count`` document records, decoded one at a time as
    they are iterated where the meta is laid out as ``_meta_parts`` writes it; any other
    layout of the same JSON is decoded whole."""
    if text.startswith(_TERMS_AT):
        terms, at = _DECODER.raw_decode(text, len(_TERMS_AT))
        if text.startswith(_DOCS_AT, at):
            return terms, _records(text, at + len(_DOCS_AT), count)
    meta = json.loads(text)
    terms, docs = meta["terms"], meta["docs"]
    if not isinstance(docs, list) or len(docs) != count:
        raise Damaged("metadata does not match the arrays")
    return terms, iter(docs)


def _records(text: str, at: int, count: int) -> Iterator[list[Any] | None]:
    """``count`` records from ``text[at:]``, then the meta's end; the text is let go with
    the last."""
    decode = _DECODER.raw_decode
    for number in range(count):
        if number:
            if text[at:at + 1] != ",":
                raise Damaged("metadata does not match the arrays")
            at += 1
        record, at = decode(text, at)
        yield record
    if text[at:] != "]}":
        raise Damaged("metadata does not match the arrays")


# -- journal --------------------------------------------------------------------------------
def reset_journal(directory: Path, generation: str) -> None:
    head = json.dumps({"journal": FORMAT_VERSION, "generation": generation}) + "\n"
    atomic_write(directory / JOURNAL, head.encode("ascii"))


def append_journal(directory: Path, ops: list[list[Any]]) -> None:
    """Append change records in one write. Not fsynced: losing the tail costs a re-read."""
    lines = []
    for op in ops:
        text = json.dumps(op, ensure_ascii=False, separators=(",", ":"))
        lines.append(f"{zlib.crc32(text.encode('utf-8')):08x} {text}\n")
    payload = "".join(lines).encode("utf-8")
    fd = os.open(directory / JOURNAL, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, payload)
    finally:
        os.close(fd)


def read_journal(directory: Path, generation: str) -> tuple[list[list[Any]], bool]:
    """The journal's records for ``generation`` and whether anything in it was unusable."""
    try:
        raw = (directory / JOURNAL).read_bytes()
    except FileNotFoundError:
        return [], True
    lines = raw.split(b"\n")
    try:
        head = json.loads(lines[0])
    except ValueError:
        return [], True
    if not isinstance(head, dict) or head.get("generation") != generation:
        return [], True
    ops: list[list[Any]] = []
    for line in lines[1:]:
        if not line:
            continue
        crc, _, text = line.partition(b" ")
        try:
            if int(crc, 16) != zlib.crc32(text):
                return ops, True
            op = json.loads(text)
        except ValueError:
            return ops, True
        if not isinstance(op, list) or not op:
            return ops, True
        ops.append(op)
    return ops, not raw.endswith(b"\n")
