"""Raw rounds the person keeps out of search and recall (``osk exclude``, ``osk.verbs.exclusion``):
what is excluded, read from the ``exclusions`` ledger and kept while the ledger's file is
unchanged. The rounds' index asks it which rounds it may hold (``osk.search.rounds``), so it
sits below the search; the verbs that write the ledger sit above the engine.

Each decision is one record in ``_ledger/exclusions.jsonl`` (synced, so every device keeps the
round out; merged line by line like every ledger): kind ``exclude`` or ``include``, subject
``raw:`` and the round's coordinate (``_raw/KEY/CONV#Round N``) or the conversation's record
path (``_raw/KEY/CONV.md``). A subject is excluded while a current record about it is an
``exclude``: when two devices disagree (one excluded, one included) it stays excluded until the
person decides again. A round is excluded when it or its conversation is.

Hook path: standard library and the ledger only; one ``stat`` while the ledger is unchanged.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from osk.store.fastclass import dataclass
from osk.store.fsutil import StatKey, stat_key
from osk.store.vault import Vault

if TYPE_CHECKING:
    from osk.store.ledger import LedgerView, Record

LEDGER = "exclusions"
KIND_EXCLUDE = "exclude"
KIND_INCLUDE = "include"
PREFIX = "raw:"  # a subject: raw:<coordinate> (a round) or raw:<record path> (a conversation)


@dataclass(frozen=True)
class Excluded:
    """What search and recall leave out: conversations (record paths) and single rounds."""

    records: frozenset[str] = frozenset()  # _raw/KEY/CONV.md
    rounds: frozenset[str] = frozenset()  # _raw/KEY/CONV#Round N

    def covers(self, rel: str, coordinate: str) -> bool:
        """Is the round ``coordinate`` of the record ``rel`` excluded?"""
        return rel in self.records or coordinate in self.rounds

    def touched(self) -> frozenset[str]:
        """The record paths that hold something excluded."""
        return self.records | {record_of(c) for c in self.rounds}


@dataclass(frozen=True)
class Exclusion:
    """One current exclusion, as ``osk exclusions`` lists it."""

    target: str  # a coordinate or a record path
    reason: str
    by: str
    time: str
    forked: bool = False  # devices disagree (one excluded, one included): kept excluded


def record_of(coordinate: str) -> str:
    """The record path a round's coordinate belongs to."""
    return f"{coordinate.split('#', 1)[0]}.md"


_cache: dict[Path, tuple[StatKey, Excluded, tuple[Exclusion, ...]]] = {}


def excluded(vault: Vault) -> Excluded:
    """What is excluded now."""
    return _state(vault)[0]


def current(vault: Vault) -> tuple[Exclusion, ...]:
    """Every current exclusion, oldest first."""
    return _state(vault)[1]


def _state(vault: Vault) -> tuple[Excluded, tuple[Exclusion, ...]]:
    path = vault.ledger_path(LEDGER)
    key = stat_key(path)
    if key is None:
        return Excluded(), ()
    cached = _cache.get(path)
    if cached is not None and cached[0] == key:
        return cached[1], cached[2]
    from osk.store.ledger import Ledger  # only once there is a ledger to read

    view = Ledger(vault, LEDGER).read()
    found = [e for s in list(view.subjects()) if (e := _exclusion(view, s)) is not None]
    found.sort(key=lambda e: (e.time, e.target))
    targets = [e.target for e in found]
    state = Excluded(frozenset(t for t in targets if "#" not in t),
                     frozenset(t for t in targets if "#" in t))
    _cache[path] = (key, state, tuple(found))
    return state, tuple(found)


def _exclusion(view: LedgerView, subject: str) -> Exclusion | None:
    if not subject.startswith(PREFIX):
        return None
    tops = view.maxima(subject)
    chosen = [r for r in tops if r.kind == KIND_EXCLUDE]
    if not chosen:
        return None
    newest: Record = max(chosen, key=lambda r: r.id)
    data = newest.data
    return Exclusion(subject[len(PREFIX):], str(data.get("reason", "")),
                     str(data.get("by", "")), str(data.get("time", newest.at)),
                     forked=len({r.kind for r in tops}) > 1)
