"""What the engine hands its surfaces for a read: a node's page (``NodeRead``) and its related
nodes, a raw record's page, an append's result, search hits, the overview, the recheck
report and a scope's memory note. The write path's results are ``osk.writes.write``'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from osk.store.fastclass import dataclass

if TYPE_CHECKING:  # annotations only: a fresh `osk search` imports this module, not these
    from osk.calls.outline import Heading
    from osk.provenance.pairs import Candidate
    from osk.provenance.scope_memory import Eviction, WriteResult


@dataclass(frozen=True)
class NodeRead:
    scope: str  # the session's active scope
    id: str
    title: str
    path: str
    space: str | None
    node_scope: str | None
    summary: str
    created: str
    updated: str
    author: str
    drafter: str
    trust: str
    derived_from: tuple[str, ...]
    conflicts: tuple[str, ...]
    text: str  # this page of the body
    start: int
    end: int
    total_chars: int
    complete: bool  # the whole body was returned in this call
    next_start: int | None  # pass as start= to read on; None at the end of the page range
    hash: str | None  # file hash authorising a full replacement; only with a complete read
    outline: tuple[Heading, ...]
    section: str | None
    pending: bool  # a change waits for the person's review; the approved version is shown
    markers: tuple[str, ...]
    related: tuple[Related, ...] = ()  # citation neighbours, then the most similar nodes


@dataclass(frozen=True)
class Related:
    """A node near the one read, and why: it cites it, it is cited by it, or it is similar."""

    title: str
    id: str
    why: str


@dataclass(frozen=True)
class RawRead:
    scope: str
    coordinate: str
    kind: str  # round | record | file
    text: str
    start: int
    end: int
    total_chars: int
    complete: bool
    next_start: int | None
    hash: str | None  # the round's or file's hash (what a citation binds to)
    rounds: tuple[int, ...]  # the round(s) shown
    next_rounds: tuple[int, ...] = ()  # a cut record view: pass as rounds= to read on
    excluded: tuple[int, ...] = ()  # rounds shown that the person keeps out of recall


@dataclass(frozen=True)
class AppendResult:
    scope: str
    coordinate: str  # cite it as [[coordinate]]
    number: int
    hash: str
    duplicate: bool  # the completion was already captured: nothing written
    path: str  # the record file, vault-relative


@dataclass(frozen=True)
class ForkInfo:
    ledger: str
    subject: str
    description: str


@dataclass(frozen=True)
class Overview:
    scope: str
    session_key: str
    bound: bool
    explicit_scope: bool
    isolation: bool
    shared_scopes: tuple[str, ...]
    counts: dict[str, int]  # visible nodes per Space, plus "scope" for the active scope's
    rechecks: tuple[Candidate, ...]
    conflicts: tuple[Any, ...]  # open candidates (osk.provenance.candidates.Candidate)
    pending_evictions: tuple[Any, ...]  # osk.provenance.scope_memory.Eviction
    forks: tuple[ForkInfo, ...]
    damaged_ledgers: tuple[str, ...]
    problems: tuple[str, ...]  # unreadable node files, duplicate ids and titles
    conflict_copies: tuple[str, ...] = ()  # sync conflict copies waiting for a person to merge


@dataclass(frozen=True)
class RecheckReport:
    scope: str
    candidates: tuple[Candidate, ...]


@dataclass(frozen=True)
class MemoryNote:
    """A scope's memory note after a ``scope_memory`` call: its text and hash, the cap, what a
    replace or edit did (None for a read or a settle), and the evictions still pending."""

    text: str
    hash: str
    cap: int
    written: WriteResult | None
    pending_evictions: tuple[Eviction, ...]
