"""The completion ids a raw record holds, as a device-state hash file of fixed-size slots.

A Stop hook asks, before every append, whether the host's completion id was captured already
(exactly-once across repeated hooks and resumed sessions). Keeping every id in the record's
JSON state made each append parse and rewrite a file that grows with the conversation; this
file answers the question with one read of a header and a few slots, and records a new id with
one slot write and one header write, whatever the conversation's length.

Layout (``.osk/raw/KEY/CONV.ids``, big-endian): a 16-byte header (magic ``OSKI``, capacity,
count, and the number of rounds the file accounts for), then ``capacity`` slots of 52 bytes:
the first 16 bytes of sha256 of the completion id, the round number (0: empty slot) and the
round's sha256. Open addressing with linear probing; the file doubles (one rewrite, so an
amortised constant per id) when it is half full.

It is a cache of facts the record holds, like the JSON state beside it: ``rounds`` in the header
must equal the rounds the state acknowledges, else the caller re-verifies the record and
rebuilds this file from it (``write_all``). Standard library only: this is on the hook path.
"""

from __future__ import annotations

import hashlib
import os
import struct
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import BinaryIO

from osk.store.fsutil import replace_unsynced

_MAGIC = b"OSKI"
_HEADER = struct.Struct(">4sIII")  # magic, capacity, count, rounds
_SLOT = struct.Struct(">16sI32s")  # id digest, round number, round hash
_FIRST_CAPACITY = 64


def _digest(completion: str) -> bytes:
    return hashlib.sha256(completion.encode("utf-8", "surrogatepass")).digest()[:16]


class CompletionIds:
    """An open index file; use as a context manager around one append (under the record lock)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: BinaryIO | None = None
        self.capacity = self.count = self.rounds = 0

    def open(self, rounds: int) -> bool:
        """Open the file; False (and nothing open) when it is missing, damaged or does not
        account for exactly ``rounds`` rounds."""
        try:
            handle = self.path.open("r+b")
        except OSError:
            return False
        try:
            head = handle.read(_HEADER.size)
            magic, capacity, count, covered = _HEADER.unpack(head)
            size = os.fstat(handle.fileno()).st_size
        except (OSError, struct.error):
            handle.close()
            return False
        if magic != _MAGIC or covered != rounds or capacity < 1 or count >= capacity \
                or size != _HEADER.size + capacity * _SLOT.size:
            handle.close()
            return False
        self._file, self.capacity, self.count, self.rounds = handle, capacity, count, covered
        return True

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> CompletionIds:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get(self, completion: str) -> tuple[int, str] | None:
        """The (round number, round hash) captured under ``completion``, or None."""
        digest = _digest(completion)
        for _, key, number, round_hash in self._probe(digest):
            if number == 0:
                return None
            if key == digest:
                return number, round_hash.hex()
        return None

    def add(self, completion: str | None, number: int, round_hash: str) -> None:
        """Account for round ``number`` (recording its completion id, when it has one)."""
        assert self._file is not None
        if completion:
            if 2 * (self.count + 1) > self.capacity:
                self._grow()
            digest = _digest(completion)
            for slot, key, found, _ in self._probe(digest):
                if found == 0 or key == digest:
                    self._write_slot(slot, digest, number, round_hash)
                    if found == 0:
                        self.count += 1
                    break
        self.rounds = number
        self._file.seek(0)
        self._file.write(_HEADER.pack(_MAGIC, self.capacity, self.count, self.rounds))
        self._file.flush()

    def _probe(self, digest: bytes) -> Iterator[tuple[int, bytes, int, bytes]]:
        assert self._file is not None
        start = int.from_bytes(digest[:8], "big") % self.capacity
        for step in range(self.capacity):
            slot = (start + step) % self.capacity
            self._file.seek(_HEADER.size + slot * _SLOT.size)
            key, number, round_hash = _SLOT.unpack(self._file.read(_SLOT.size))
            yield slot, key, number, round_hash

    def _write_slot(self, slot: int, digest: bytes, number: int, round_hash: str) -> None:
        assert self._file is not None
        self._file.seek(_HEADER.size + slot * _SLOT.size)
        self._file.write(_SLOT.pack(digest, number, bytes.fromhex(round_hash)))

    def _grow(self) -> None:
        assert self._file is not None
        self._file.seek(_HEADER.size)
        data = self._file.read(self.capacity * _SLOT.size)
        entries = [_SLOT.unpack_from(data, i * _SLOT.size) for i in range(self.capacity)]
        self._replace({e[0]: (e[1], e[2]) for e in entries if e[1]}, self.rounds,
                      self.capacity * 2)

    def _replace(self, entries: Mapping[bytes, tuple[int, bytes]], rounds: int,
                 capacity: int) -> None:
        self.close()
        write_digests(self.path, entries, rounds, capacity)
        if not self.open(rounds):
            raise OSError(f"{self.path}: the completion index just written does not read back")


def write_all(path: Path, completions: Mapping[str, tuple[int, str]], rounds: int) -> None:
    """Write the index afresh from a verified record's completions (id -> (n, hash))."""
    capacity = _FIRST_CAPACITY
    while 2 * (len(completions) + 1) > capacity:
        capacity *= 2
    entries = {_digest(c): (n, bytes.fromhex(h)) for c, (n, h) in completions.items()}
    write_digests(path, entries, rounds, capacity)


def write_digests(path: Path, entries: Mapping[bytes, tuple[int, bytes]], rounds: int,
                  capacity: int) -> None:
    slots = bytearray(capacity * _SLOT.size)
    empty = bytes(_SLOT.size)
    for digest, (number, round_hash) in entries.items():
        slot = int.from_bytes(digest[:8], "big") % capacity
        while slots[slot * _SLOT.size:(slot + 1) * _SLOT.size] != empty:
            slot = (slot + 1) % capacity
        _SLOT.pack_into(slots, slot * _SLOT.size, digest, number, round_hash)
    replace_unsynced(path, _HEADER.pack(_MAGIC, capacity, len(entries), rounds) + bytes(slots))
