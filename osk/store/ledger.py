"""Append-only JSON Lines ledgers with causal parents (governance/ledgers.md).

Every feature that keeps history (routing, rechecks, candidates, evictions, audit, approvals,
tombstones) appends here and nowhere else. A record names the heads it saw as ``parents``, so two
devices' appends merged by Git's union driver form a DAG whose concurrent branches the reader can
see. A *subject* (a session key, a citation pair, a candidate key) has a value per record; when
two records about one subject are concurrent and disagree, that is a fork: the reader reports it
and ``current`` refuses to choose. Any later record about the subject names every head as a
parent, so it supersedes both and the fork is closed by an explicit decision, never by a clock.

Causality is computed with vector clocks over the writing devices (each record carries its
``device``), which is linear in the ledger's length.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from _thread import allocate_lock  # threading.Lock itself, without threading's module (1 ms)
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import islice
from pathlib import Path
from typing import BinaryIO, overload

from osk.errors import LedgerError, LedgerFork
from osk.store import clock
from osk.store.fastclass import dataclass
from osk.store.fsutil import append_durably
from osk.store.ids import is_uuid7, uuid7
from osk.store.locks import file_lock
from osk.store.vault import Vault

ENVELOPE = ("id", "parents", "device", "at", "kind", "subject")
# Ledgers that only keep history: no write decides anything from them, so a damaged line in one
# is left out of the view (and reported by validate and overview), never a reason to refuse
# every write. Every other ledger decides writes (a binding, a recheck, a candidate), so a
# damaged line there is refused by name: which subject it was about cannot be known.
HISTORY_LEDGERS = frozenset({"audit", "memory"})  # memory: who wrote scope memory lines


@dataclass(frozen=True)
class Record:
    id: str
    parents: tuple[str, ...]
    device: str
    at: str
    kind: str
    subject: str
    data: Mapping[str, object]
    line: int  # 1-based line number in the file, for messages

    def to_json(self) -> str:
        body = {
            "id": self.id,
            "parents": list(self.parents),
            "device": self.device,
            "at": self.at,
            "kind": self.kind,
            "subject": self.subject,
            **self.data,
        }
        return json.dumps(body, ensure_ascii=False, sort_keys=False, separators=(",", ":"))


@dataclass(frozen=True)
class Fork:
    """Concurrent records about one subject that disagree."""

    ledger: str
    subject: str
    records: tuple[Record, ...]

    def describe(self) -> str:
        lines = ", ".join(f"{r.id} (line {r.line}, device {r.device}, {r.kind})"
                          for r in self.records)
        return f"{self.ledger}: subject {self.subject!r} has concurrent records {lines}"


@dataclass(frozen=True)
class Tip:
    """What an append needs of a ledger, and all a writer keeps of one: its newest id, its
    heads and how many records it holds, as of the file's bytes at ``key`` (size, mtime_ns,
    inode; ``digest``: blake2b of those bytes, None for a missing file). A view's records and
    clocks are for readers of history (``Ledger.read``); ``Ledger.tip`` checks every line as
    ``read`` does, but keeps none of them."""

    key: tuple[int, int, int] | None
    digest: hashlib.blake2b | None
    max_id: str | None
    heads: tuple[str, ...]
    count: int


NO_TIP = Tip(None, None, None, (), 0)


class _Growth:
    """What the views of one ledger's growth share: every record parsed so far, in file order,
    with its vector clock. Only ever appended to, so an older view reads it through its own
    length and an append costs the new records, not a copy of the ledger."""

    def __init__(self, records: list[Record]) -> None:
        self.records = records
        self.index = {r.id: i for i, r in enumerate(records)}
        self.clock: dict[str, dict[str, int]] = {}
        self.seq: dict[str, int] = {}
        self.lock = allocate_lock()  # readers in several threads may extend the same view
        self._subjects: dict[str, list[Record]] = {}
        self._grouped = 0  # records[:_grouped] are in _subjects

    def subjects(self) -> dict[str, list[Record]]:
        """Records per subject, in file order (kept up to date as the ledger grows)."""
        with self.lock:
            for record in self.records[self._grouped:]:
                self._subjects.setdefault(record.subject, []).append(record)
            self._grouped = len(self.records)
            return self._subjects

    def cut(self, count: int) -> _Growth:
        """A copy of the first ``count`` records: an older view is growing another way."""
        kept = _Growth(self.records[:count])
        kept.clock = {r.id: self.clock[r.id] for r in kept.records}
        kept.seq = {r.id: self.seq[r.id] for r in kept.records}
        return kept


class _Prefix(Sequence[Record]):
    """The first ``count`` records of a growth: what one view holds."""

    def __init__(self, items: list[Record], count: int) -> None:
        self._items, self._count = items, count

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, at: int) -> Record: ...

    @overload
    def __getitem__(self, at: slice) -> list[Record]: ...

    def __getitem__(self, at: int | slice) -> Record | list[Record]:
        if isinstance(at, slice):
            return self._items[slice(*at.indices(self._count))]
        position = at + self._count if at < 0 else at
        if not 0 <= position < self._count:
            raise IndexError("ledger record index out of range")
        return self._items[position]

    def __iter__(self) -> Iterator[Record]:
        return islice(self._items, self._count)


class _Ids(Mapping[str, Record]):
    """Record by id, as of one view."""

    def __init__(self, growth: _Growth, count: int) -> None:
        self._growth, self._count = growth, count

    def __getitem__(self, record_id: str) -> Record:
        position = self._growth.index.get(record_id)
        if position is None or position >= self._count:
            raise KeyError(record_id)
        return self._growth.records[position]

    def __contains__(self, record_id: object) -> bool:
        position = self._growth.index.get(record_id) if isinstance(record_id, str) else None
        return position is not None and position < self._count

    def __iter__(self) -> Iterator[str]:
        return (r.id for r in islice(self._growth.records, self._count))

    def __len__(self) -> int:
        return self._count


class LedgerView:
    """A parsed, structurally valid ledger with its causal order.

    Immutable to its readers: a view made later (``extended``) shares what this one parsed
    and sees more records; this one keeps seeing the ledger as it was when it was made.
    """

    def __init__(self, name: str, growth: _Growth, count: int, heads: tuple[str, ...],
                 max_id: str | None, device_counts: dict[str, int],
                 damaged: tuple[str, ...] = ()) -> None:
        self.name = name
        self.heads = heads
        self.damaged = damaged  # what was left out of a history ledger, one line each
        self._growth = growth
        self._count = count
        self._max_id = max_id
        self._device_counts = device_counts

    @property
    def records(self) -> Sequence[Record]:
        """Every record, in file order."""
        return _Prefix(self._growth.records, self._count)

    @property
    def by_id(self) -> Mapping[str, Record]:
        return _Ids(self._growth, self._count)

    @property
    def max_id(self) -> str | None:
        return self._max_id

    def extended(self, new: list[Record]) -> LedgerView | None:
        """This view plus records appended after it, or None when they need a full rebuild
        (a parent that is missing, or ids that do not grow: a merge rewrote the file)."""
        known, batch = self.by_id, set()
        heads = set(self.heads)
        max_id = self._max_id
        for record in new:
            if record.id in known or (max_id and record.id <= max_id):
                return None
            if any((p not in known and p not in batch) or p >= record.id
                   for p in record.parents):
                return None
            batch.add(record.id)
            heads.difference_update(record.parents)
            heads.add(record.id)
            max_id = record.id
        growth = self._growth
        with growth.lock:
            if len(growth.records) != self._count:  # a later view already grew from here
                growth = growth.cut(self._count)
            per_device = dict(self._device_counts)
            for record in new:
                growth.index[record.id] = len(growth.records)
                growth.records.append(record)
                _clock_one(growth, record, per_device)
            count = len(growth.records)
        return LedgerView(self.name, growth, count, tuple(sorted(heads)), max_id, per_device,
                          self.damaged)

    def is_ancestor(self, older: Record, newer: Record) -> bool:
        """True when ``older`` happened before ``newer`` (is reachable through parents)."""
        if older.id == newer.id:
            return False
        growth = self._growth
        return growth.clock[newer.id].get(older.device, 0) >= growth.seq[older.id]

    def for_subject(self, subject: str) -> list[Record]:
        found = self._growth.subjects().get(subject, [])
        return [r for r in found if self._growth.index[r.id] < self._count]

    def subjects(self) -> Iterable[str]:
        grouped = self._growth.subjects()
        with self._growth.lock:
            names = list(grouped)
        return [name for name in names if self.for_subject(name)]

    def maxima(self, subject: str) -> list[Record]:
        """The records about ``subject`` that no later record about it supersedes."""
        found: list[Record] = []
        for record in sorted(self.for_subject(subject), key=lambda r: r.id, reverse=True):
            if not any(self.is_ancestor(record, kept) for kept in found):
                found.append(record)
        return found

    def current(self, subject: str) -> Record | None:
        """The one current record about ``subject``; raises LedgerFork when branches disagree."""
        tops = self.maxima(subject)
        if not tops:
            return None
        if len(tops) > 1 and len({_value(r) for r in tops}) > 1:
            fork = Fork(self.name, subject, tuple(sorted(tops, key=lambda r: r.id)))
            raise LedgerFork(
                f"{fork.describe()}; a person must decide which holds (append a new record "
                f"for this subject, e.g. by re-running the action that wrote it)",
                fork=fork,
            )
        return tops[0]

    def forks(self) -> list[Fork]:
        """Every subject whose concurrent current records disagree."""
        result = []
        for subject in list(self.subjects()):
            tops = self.maxima(subject)
            if len(tops) > 1 and len({_value(r) for r in tops}) > 1:
                result.append(Fork(self.name, subject, tuple(sorted(tops, key=lambda r: r.id))))
        return result


def _value(record: Record) -> str:
    return json.dumps({"kind": record.kind, **record.data}, sort_keys=True, ensure_ascii=False)


class Ledger:
    """One ledger file: ``_ledger/<name>.jsonl``."""

    def __init__(self, vault: Vault, name: str) -> None:
        self.vault = vault
        self.name = name
        self.path = vault.ledger_path(name)  # checked against links at each read and append

    @functools.cached_property
    def shown(self) -> Path:
        """How messages name the ledger: inside the vault (resolved once, when first named)."""
        return Path(self.vault.rel(self.path))

    # -- reading ----------------------------------------------------------------------
    def read(self) -> LedgerView:
        """Parse and check the ledger; raise LedgerError naming the first bad line.

        Views are cached per file. When the file only grew since the cached read (same inode,
        the earlier bytes unchanged by digest), only the new lines are parsed, so a long-lived
        server pays for an append, not for re-parsing the ledger.
        """
        self.vault.inside(self.path)  # never read through a planted link
        return self._read_checked()

    def read_tipped(self) -> tuple[LedgerView, Tip | None]:
        """``read``, and the tip of the bytes the view was read from (None when the file ends
        inside a line: an append in progress, not yet a record)."""
        self.vault.inside(self.path)
        return self._read_both()

    def _read_checked(self) -> LedgerView:
        """``read`` once the path is known to stay inside the vault."""
        return self._read_both()[0]

    def _read_both(self) -> tuple[LedgerView, Tip | None]:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return _build_view(self.name, []), NO_TIP
        key = (stat.st_size, stat.st_mtime_ns, stat.st_ino)
        with _CACHE_LOCK:
            cached = _CACHE.get(self.path)
        if cached is not None and cached.key == key:
            kept = cached.view
            return kept, Tip(key, cached.digest, kept.max_id, kept.heads, len(kept.records))
        # One read of the file serves the parse and the digest the cache keeps.
        data = self.path.read_bytes()
        view = self._grown(cached, key, data) if cached is not None else None
        if view is None:
            damaged: list[str] | None = [] if self.name in HISTORY_LEDGERS else None
            view = _build_view(self.name, parse_lines(self.shown, data, damaged),
                               tuple(damaged or ()))
            if data and not data.endswith(b"\n"):
                return view, None  # an unfinished tail: do not cache a view of a moving file
        return view, self._remember(key, view, hashlib.blake2b(data[: key[0]], digest_size=16))

    def tip(self) -> Tip:
        """The ledger's tip (``Tip``), every line checked as ``read`` checks it; raise
        LedgerError naming the first bad line of a ledger that decides writes.

        Tips are cached per file: one whose file only grew since (the earlier bytes unchanged
        by digest, the new records each naming heads of what came before) costs the new lines;
        otherwise the file is read again in chunks, keeping no record."""
        self.vault.inside(self.path)  # never read through a planted link
        return self._tip_checked()

    def _tip_checked(self) -> Tip:
        """``tip`` once the path is known to stay inside the vault."""
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return NO_TIP
        key = (stat.st_size, stat.st_mtime_ns, stat.st_ino)
        with _CACHE_LOCK:
            cached = _TIPS.get(self.path)
        if cached is not None and cached.key == key:
            return cached
        grown = self.after(cached) if cached is not None else None
        if grown is not None and grown[1].key == key:
            tip = grown[1]
        else:
            tip = self._scan()
        if tip.key is not None and tip.key[0] == key[0]:  # whole lines only: cache it
            with _CACHE_LOCK:
                _TIPS[self.path] = tip
        return tip

    def _scan(self) -> Tip:
        """The tip of the whole file, read in chunks and checked line by line, keeping only
        the ids (each must be new and every parent an older record). A damaged line, or a
        parent that is not an older record, is handed to ``parse_lines`` with the whole file,
        which names it (or, in a history ledger, leaves it out)."""
        seen: set[str] = set()
        heads: set[str] = set()
        ahead: dict[str, str] = {}  # a parent not read yet -> the smallest id that names it
        max_id: str | None = None
        try:
            with open(self.path, "rb") as handle:
                now = os.fstat(handle.fileno())
                digest = hashlib.blake2b(digest_size=16)
                size = 0
                for number, raw in enumerate(_whole_lines(handle, now.st_size, digest), 1):
                    size += len(raw) + 1
                    record = _parse_line(self.shown, number, raw, seen)
                    for parent in record.parents:
                        if parent in seen:
                            if parent >= record.id:
                                raise _Irregular
                            heads.discard(parent)
                        elif ahead.get(parent, record.id) >= record.id:
                            ahead[parent] = record.id
                    if record.id not in ahead:
                        heads.add(record.id)
                    if max_id is None or record.id > max_id:
                        max_id = record.id
        except FileNotFoundError:
            return NO_TIP
        except (LedgerError, _Irregular):
            return self._tip_of_parsed()
        if any(parent not in seen or parent >= child for parent, child in ahead.items()):
            return self._tip_of_parsed()
        mtime = now.st_mtime_ns if size == now.st_size else -1
        return Tip((size, mtime, now.st_ino), digest, max_id, tuple(sorted(heads)), len(seen))

    def _tip_of_parsed(self) -> Tip:
        """The tip as ``parse_lines`` reads the whole file (which raises for a damaged ledger
        that decides writes): only for a file the line-by-line scan could not vouch for."""
        data = self.path.read_bytes()
        damaged: list[str] | None = [] if self.name in HISTORY_LEDGERS else None
        records = parse_lines(self.shown, data, damaged)
        named = {p for r in records for p in r.parents}
        whole = data[: data.rfind(b"\n") + 1]
        stat = self.path.stat()
        mtime = stat.st_mtime_ns if len(whole) == len(data) else -1
        return Tip((len(whole), mtime, stat.st_ino), hashlib.blake2b(whole, digest_size=16),
                   max((r.id for r in records), default=None),
                   tuple(sorted(r.id for r in records if r.id not in named)), len(records))

    def after(self, tip: Tip) -> tuple[list[Record], Tip] | None:
        """The records appended since ``tip`` and the tip after them, reading the bytes before
        it only to compare their digest (none of them is parsed). None when the file is not
        ``tip``'s bytes plus whole records each naming only heads of what came before (a
        merge, a rewrite, a damaged line): the caller reads the ledger whole."""
        if tip.key is None or tip.digest is None:
            return None
        size, mtime_ns, inode = tip.key
        self.vault.inside(self.path)
        try:
            with open(self.path, "rb") as handle:
                now = os.fstat(handle.fileno())
                if now.st_ino != inode or now.st_size < size or (
                        now.st_size == size and now.st_mtime_ns != mtime_ns):
                    return None
                if now.st_size == size:
                    return [], tip
                digest = _digest_of(handle, size)
                if digest.digest() != tip.digest.digest():
                    return None
                fresh = handle.read(now.st_size - size)
        except OSError:
            return None
        fresh = fresh[: fresh.rfind(b"\n") + 1]
        records = _parse_appended(self.shown, tip.count + 1, fresh)
        if records is None:
            return None
        heads, max_id = set(tip.heads), tip.max_id
        for record in records:
            if (max_id is not None and record.id <= max_id) or \
                    not heads.issuperset(record.parents):
                return None
            heads.difference_update(record.parents)
            heads.add(record.id)
            max_id = record.id
        digest.update(fresh)
        end = size + len(fresh)
        key = (end, now.st_mtime_ns if end == now.st_size else -1, inode)
        grown = Tip(key, digest, max_id, tuple(sorted(heads)), tip.count + len(records))
        if end == now.st_size:  # the file's tip now: ``tip()`` (an append's) need not read it again
            with _CACHE_LOCK:
                _TIPS[self.path] = grown
        return records, grown

    def mark(self, stat: tuple[int, int, int]) -> Mark | None:
        """The mark of the file at ``stat`` (size, mtime_ns, inode: a stat taken by the caller,
        whose view of the ledger is of exactly those bytes), or None when the file is no
        longer that one, or ``stat`` ends inside a line."""
        self.vault.inside(self.path)
        size, mtime_ns, inode = stat
        try:
            with open(self.path, "rb") as handle:
                now = os.fstat(handle.fileno())
                if (now.st_size, now.st_mtime_ns, now.st_ino) != stat:
                    return None
                handle.seek(max(0, size - MARK_WINDOW))
                data = handle.read(size - handle.tell())
        except OSError:
            return None
        if len(data) != min(size, MARK_WINDOW) or (data and not data.endswith(b"\n")):
            return None
        return Mark(size, inode, mtime_ns, _window(data))

    def read_after(self, mark: Mark) -> tuple[list[Record], Mark] | None:
        """The whole records appended since ``mark`` and the mark after them, reading only
        what follows it (and the window before it); None when the file is not ``mark``'s
        bytes plus appended lines (see ``Mark``), or a line after it is damaged: the caller
        reads the ledger whole instead (``read``), which names what is wrong."""
        self.vault.inside(self.path)  # never read through a planted link
        try:
            with open(self.path, "rb") as handle:
                now = os.fstat(handle.fileno())
                if now.st_ino != mark.inode or now.st_size < mark.size or (
                        now.st_size == mark.size and now.st_mtime_ns != mark.mtime_ns):
                    return None
                start = max(0, mark.size - MARK_WINDOW)
                handle.seek(start)
                data = handle.read(now.st_size - start)
        except OSError:
            return None
        before, fresh = data[: mark.size - start], data[mark.size - start:]
        if len(before) != mark.size - start or _window(before) != mark.window:
            return None
        whole = fresh[: fresh.rfind(b"\n") + 1]  # an unfinished last line is not yet a record
        if not whole:
            return [], mark
        records = _parse_appended(self.shown, 0, whole)  # a repeated id: the caller's check
        if records is None:
            return None
        size = mark.size + len(whole)
        tail = (before + whole)[-MARK_WINDOW:]
        mtime = now.st_mtime_ns if size == now.st_size else -1  # -1: a longer file is newer
        return records, Mark(size, mark.inode, mtime, _window(tail))

    def _grown(self, cached: _Cached, key: tuple[int, int, int],
               data: bytes) -> LedgerView | None:
        size, _, inode = key
        old_size = cached.key[0]
        if inode != cached.key[2] or size <= old_size:
            return None
        prefix = hashlib.blake2b(data[:old_size], digest_size=16)
        if prefix.digest() != cached.digest.digest():
            return None  # something before the old end changed: parse it all
        fresh = data[old_size:]
        if not fresh.endswith(b"\n"):
            return None  # a cut-short line: let the full parse name it
        # A repeat of an older id: extended refuses, the full parse names it.
        records = _parse_appended(self.shown, data[:old_size].count(b"\n") + 1, fresh)
        return None if records is None else cached.view.extended(records)

    def _remember(self, key: tuple[int, int, int], view: LedgerView,
                  digest: hashlib.blake2b) -> Tip:
        """Keep the tip of what was read for the next append, and the view itself for the
        next reader only while the file is small (``KEEP_VIEW_BYTES``): a ledger that grows
        with the vault (audit, rechecks: a record per node written) is history, read on
        demand and let go, never held for the life of the process."""
        tip = Tip(key, digest, view.max_id, view.heads, len(view.records))
        with _CACHE_LOCK:
            _TIPS[self.path] = tip
            if key[0] <= KEEP_VIEW_BYTES:
                _CACHE[self.path] = _Cached(key, digest, view)
            else:
                _CACHE.pop(self.path, None)
        return tip

    def _mend_torn_tail(self) -> None:
        """Under the ledger lock no append is in flight, so an unfinished last line is a write
        a crash cut short. A tail that is a whole record (only its newline missing) gets the
        newline; anything else is moved, byte for byte, to device state
        (``.osk/ledger-torn/``) and cut off, so the ledger is whole again and nothing is lost.
        """
        try:
            with open(self.path, "rb") as handle:  # the last byte says it all, mostly
                if handle.seek(0, os.SEEK_END) == 0:
                    return
                handle.seek(-1, os.SEEK_END)
                if handle.read(1) == b"\n":
                    return
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        if not data or data.endswith(b"\n"):
            return
        cut = data.rfind(b"\n") + 1
        tail = data[cut:]
        known = {r.id for r in parse_lines(self.shown, data,
                                           [] if self.name in HISTORY_LEDGERS else None)}
        try:
            record = _parse_line(self.path, 0, tail, set())
            whole = all(parent in known for parent in record.parents)
        except LedgerError:
            whole = False
        if whole:
            append_durably(self.path, b"\n")
            return
        aside = self.vault.state("ledger-torn", f"{self.name}-{uuid7()}.bin")
        aside.parent.mkdir(parents=True, exist_ok=True)
        aside.write_bytes(tail)
        with open(self.path, "rb+") as handle:
            handle.truncate(cut)
            handle.flush()
            os.fsync(handle.fileno())

    # -- writing ----------------------------------------------------------------------
    def _settled(self) -> Tip:
        """Under the ledger lock: the tip to append to, its file's tail made whole. A file
        whose stat is the one last read or appended here needs no look at its tail (only tips
        of files that end with a newline are cached), so a run of appends (``osk import``)
        costs one ``stat`` each here, not an open and a read."""
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return NO_TIP
        with _CACHE_LOCK:
            cached = _TIPS.get(self.path)
        if cached is not None and cached.key == (stat.st_size, stat.st_mtime_ns, stat.st_ino):
            return cached
        self._mend_torn_tail()
        return self._tip_checked()

    def append(self, kind: str, subject: str, data: Mapping[str, object] | None = None) -> Record:
        """Append one record under the ledger's lock; refuses a damaged ledger."""
        payload = dict(data or {})
        clash = set(payload) & set(ENVELOPE)
        if clash:
            raise ValueError(f"ledger data may not use envelope keys {sorted(clash)}")
        with file_lock(self.vault.lock_path(f"ledger-{self.name}")):
            self.vault.inside(self.path)  # never settle or append through a planted link
            tip = self._settled()
            record = Record(
                id=uuid7(after=tip.max_id),
                parents=tip.heads,
                device=device_id(self.vault),
                at=clock.utc_now_precise(),
                kind=kind,
                subject=subject,
                data=payload,
                line=tip.count + 1,
            )
            line = (record.to_json() + "\n").encode("utf-8")
            append_durably(self.path, line)
            stat = self.path.stat()
            self._appended(tip, record, line, (stat.st_size, stat.st_mtime_ns, stat.st_ino))
            return record

    def _appended(self, tip: Tip, record: Record, line: bytes, key: tuple[int, int, int]) -> None:
        """After an append: the cached tip (and a kept view of the same bytes) grown by it."""
        digest = tip.digest.copy() if tip.digest is not None else hashlib.blake2b(digest_size=16)
        digest.update(line)
        with _CACHE_LOCK:
            if _TIPS.get(self.path) is tip or tip.key is None:
                _TIPS[self.path] = Tip(key, digest, record.id, (record.id,), tip.count + 1)
            cached = _CACHE.get(self.path)
            if cached is None or cached.key != tip.key:
                return
        extended = cached.view.extended([record])
        if extended is not None:
            self._remember(key, extended, digest.copy())


@dataclass(frozen=True)
class Mark:
    """How far a reader of a ledger got: the file's length, inode and mtime then, and a digest
    of the bytes just before that length (``Ledger.mark``, ``Ledger.read_after``).

    It vouches that the file still begins with those bytes without reading them: osk only
    appends, and whatever rewrites a ledger (sync's landing, Git, an editor saving) replaces the
    file, so a new inode, a shorter file, the same length with another mtime, or other bytes
    before the end all say "not a pure append". What it cannot see is an edit in place of a
    line more than ``MARK_WINDOW`` bytes before the end, made while the file also grew; the
    ledger's own readers (``Ledger.read``) compare the whole prefix."""

    size: int
    inode: int
    mtime_ns: int
    window: str  # blake2b of bytes [max(0, size - MARK_WINDOW), size)

    def to_json(self) -> list[object]:
        return [self.size, self.inode, self.mtime_ns, self.window]

    @classmethod
    def from_json(cls, value: object) -> Mark | None:
        if not isinstance(value, list) or len(value) != 4:
            return None
        size, inode, mtime_ns, window = value
        if not (isinstance(size, int) and isinstance(inode, int) and isinstance(mtime_ns, int)
                and isinstance(window, str)):
            return None
        return cls(size, inode, mtime_ns, window)


MARK_WINDOW = 4096  # bytes a mark's digest covers: several whole records, each with its own id


def _window(data: bytes) -> str:
    return hashlib.blake2b(data[-MARK_WINDOW:], digest_size=16).hexdigest()


@dataclass(frozen=True)
class _Cached:
    key: tuple[int, int, int]
    digest: hashlib.blake2b  # of the file's bytes up to key's size
    view: LedgerView


_CACHE: dict[Path, _Cached] = {}
_TIPS: dict[Path, Tip] = {}
_CACHE_LOCK = allocate_lock()
KEEP_VIEW_BYTES = 1 << 20  # a view of a longer file is not kept between reads (``_remember``)
_CHUNK = 1 << 20  # bytes a scan reads at once


class _Irregular(Exception):
    """A line the scan leaves to the full parse (``Ledger._scan``)."""


def _chunks(handle: BinaryIO, size: int) -> Iterator[bytes]:
    """The next ``size`` bytes of ``handle`` (fewer if it ends first), ``_CHUNK`` at a time."""
    left = size
    while left > 0:
        chunk = handle.read(min(_CHUNK, left))
        if not chunk:
            return
        left -= len(chunk)
        yield chunk


def _digest_of(handle: BinaryIO, size: int) -> hashlib.blake2b:
    """The digest of the next ``size`` bytes of ``handle``, never split into lines."""
    digest = hashlib.blake2b(digest_size=16)
    for chunk in _chunks(handle, size):
        digest.update(chunk)
    return digest


def _whole_lines(handle: BinaryIO, size: int, digest: hashlib.blake2b) -> Iterator[bytes]:
    """The whole lines of the first ``size`` bytes of ``handle`` (from where it is), without
    their newlines, read in chunks; ``digest`` takes every byte up to the last newline."""
    rest = b""
    for chunk in _chunks(handle, size):
        cut = chunk.rfind(b"\n")
        if cut < 0:
            rest += chunk
            continue
        digest.update(rest)
        digest.update(chunk[: cut + 1])
        lines = (rest + chunk[: cut + 1]).split(b"\n")
        rest = chunk[cut + 1:]
        yield from lines[:-1]


def parse_lines(path: Path, data: bytes, damaged: list[str] | None = None) -> list[Record]:
    """Parse ledger bytes into records, checking the structure every append relies on.

    Bytes after the last newline are an append still in progress in another process, or one a
    crash cut short: never acknowledged, so readers leave them out (the next append settles
    them, see ``Ledger._mend_torn_tail``). A damaged line raises LedgerError naming it, unless
    ``damaged`` is a list: then the line is left out and its problem added there (a parent
    that is not in the ledger is dropped from the record that names it).
    """
    data = data[: data.rfind(b"\n") + 1]
    records: list[Record] = []
    seen: set[str] = set()
    for number, raw in enumerate(data.split(b"\n")[:-1] if data else [], start=1):
        try:
            records.append(_parse_line(path, number, raw, seen))
        except LedgerError as exc:
            if damaged is None:
                raise
            damaged.append(str(exc))
    kept = []
    for record in records:
        strays = []
        for parent in record.parents:
            if parent not in seen:
                strays.append(LedgerError(
                    f"{path}: line {record.line} names parent {parent}, which is not in the "
                    f"ledger (a line was removed?); restore it from Git history",
                    path=str(path), line=record.line,
                ))
            elif parent >= record.id:
                strays.append(LedgerError(
                    f"{path}: line {record.line} has id {record.id} not greater than its "
                    f"parent {parent}; ids must grow along parents",
                    path=str(path), line=record.line,
                ))
        if strays and damaged is None:
            raise strays[0]
        if damaged is not None:
            damaged.extend(str(e) for e in strays)
        kept.append(record if not strays else _without_parents(record, seen))
    return kept


def _without_parents(record: Record, seen: set[str]) -> Record:
    """``record`` keeping only the parents that are older records of the ledger."""
    parents = tuple(p for p in record.parents if p in seen and p < record.id)
    return Record(record.id, parents, record.device, record.at, record.kind, record.subject,
                  record.data, record.line)


def foreign_line_problems(name: str, known: bytes, incoming: bytes) -> list[str]:
    """What is wrong with the lines ``incoming`` (a ledger's bytes another device wrote) adds
    to ``known`` (the bytes this device agreed on): each new line must be a record (a JSON
    object with the envelope, a UUIDv7 id seen once) whose parents are in the ledger and
    older than it. One problem per bad line, naming it by ``name`` and line number. Lines
    already known are not checked again (only their ids are read), so a sync pays for what
    it brings, not for the ledger's length."""
    already = set(known.splitlines())
    seen: set[str] = set()
    fresh: list[tuple[int, bytes]] = []
    kept: set[bytes] = set()
    for number, raw in enumerate(incoming.splitlines(), start=1):
        if raw in already:
            kept.add(raw)
            record_id = _known_id(raw)
            if record_id:
                seen.add(record_id)
        else:
            fresh.append((number, raw))
    shown = Path(name)
    problems: list[str] = _removed(name, already - kept, incoming)
    records: list[Record] = []
    for number, raw in fresh:
        try:
            records.append(_parse_line(shown, number, raw, seen))
        except LedgerError as exc:
            problems.append(str(exc))
    for record in records:
        strays = [p for p in record.parents if p not in seen or p >= record.id]
        if strays:
            problems.append(f"{name}: line {record.line} names parent {strays[0]}, which is "
                            f"not an older record of the ledger")
    return problems


def _removed(name: str, missing: set[bytes], incoming: bytes) -> list[str]:
    """A record whose id no longer occurs at all: a ledger only grows (a line rewritten in
    place, keeping its id, is a person's redaction and passes)."""
    gone = {record_id for raw in missing if (record_id := _known_id(raw))}
    if gone:
        gone -= {_known_id(raw) for raw in incoming.splitlines()}
    if not gone:
        return []
    return [f"{name}: {len(gone)} record(s) removed (e.g. id {min(gone)}); a ledger only "
            f"grows, and records that name them as parents would read as damaged"]


_LEADING_ID = re.compile(rb'^\{"id":"([0-9a-f-]{36})"')  # how Record.to_json starts a line


def _known_id(raw: bytes) -> str | None:
    """The id of a line already accepted: read from its start when osk wrote it, else parsed."""
    found = _LEADING_ID.match(raw)
    if found:
        return found.group(1).decode("ascii")
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    value = obj.get("id") if isinstance(obj, dict) else None
    return value if isinstance(value, str) else None


def _parse_appended(path: Path, first: int, whole: bytes) -> list[Record] | None:
    """The records of ``whole`` (lines each ending in a newline, appended after what a reader
    already holds), numbered from ``first``; None when a line is damaged or repeats another's
    id: the caller then reads the ledger whole, which names what is wrong (or, in a history
    ledger, leaves the line out)."""
    seen: set[str] = set()
    try:
        return [_parse_line(path, first + offset, raw, seen)
                for offset, raw in enumerate(whole.split(b"\n")[:-1])]
    except LedgerError:
        return None


def _parse_line(path: Path, number: int, raw: bytes, seen: set[str]) -> Record:
    def bad(why: str) -> LedgerError:
        return LedgerError(f"{path}: line {number} is damaged: {why}", path=str(path), line=number)

    try:
        obj = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise bad(f"not a JSON object ({exc})") from exc
    if not isinstance(obj, dict):
        raise bad("not a JSON object")
    missing = [key for key in ENVELOPE if key not in obj]
    if missing:
        raise bad(f"missing {missing}")
    record_id, parents = obj["id"], obj["parents"]
    if not isinstance(record_id, str) or not is_uuid7(record_id):
        raise bad(f"id {record_id!r} is not a UUIDv7")
    if record_id in seen:
        raise bad(f"id {record_id} appears twice")
    if not isinstance(parents, list) or not all(isinstance(p, str) for p in parents):
        raise bad("parents must be a list of ids")
    for key in ("device", "at", "kind", "subject"):
        if not isinstance(obj[key], str):
            raise bad(f"{key} must be a string")
    seen.add(record_id)
    data = {k: v for k, v in obj.items() if k not in ENVELOPE}
    return Record(record_id, tuple(parents), obj["device"], obj["at"], obj["kind"],
                  obj["subject"], data, number)


def _build_view(name: str, records: list[Record], damaged: tuple[str, ...] = ()) -> LedgerView:
    growth = _Growth(records)
    named = {p for r in records for p in r.parents}
    heads = tuple(sorted(r.id for r in records if r.id not in named))
    per_device: dict[str, int] = {}
    for record in sorted(records, key=lambda r: r.id):  # ids grow along parents: topological
        _clock_one(growth, record, per_device)
    max_id = max(growth.index) if records else None
    return LedgerView(name, growth, len(records), heads, max_id, per_device, damaged)


def _clock_one(growth: _Growth, record: Record, per_device: dict[str, int]) -> None:
    """The vector clock of ``record``: the merge of its parents' clocks, plus its own step."""
    merged: dict[str, int] = {}
    for parent in record.parents:
        for device, count in growth.clock[parent].items():
            if count > merged.get(device, 0):
                merged[device] = count
    seq = per_device.get(record.device, 0) + 1
    per_device[record.device] = seq
    merged[record.device] = seq
    growth.clock[record.id] = merged
    growth.seq[record.id] = seq


def device_id(vault: Vault) -> str:
    """This device's id, kept in device state (never synced, so every clone gets its own)."""
    path = vault.state("device-id")
    try:
        value = path.read_text(encoding="utf-8").strip()
        if value:
            return value
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    value = os.urandom(6).hex()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return path.read_text(encoding="utf-8").strip()
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(value + "\n")
    return value
