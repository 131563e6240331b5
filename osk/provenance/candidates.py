"""Candidates: contradiction, duplication, competition and delegation-overlap between nodes.

An agent that notices two nodes disagree (or say the same thing, or compete, or delegate
overlapping work) files a candidate for a person; it never resolves one itself. A candidate is
keyed on the sha256 of its type and each party's ``id@body-hash``, so filing the same parties at
the same bytes again is a no-op, and a change to either party's body makes a new candidate.
Parties are sorted for the symmetric types, so "A contradicts B" and "B contradicts A" are one
candidate; for ``delegation-overlap`` the order carries meaning (the first party is the node whose
delegation overlaps the others) and is kept.

The body hash is used, not the file hash, because the claim lives in the body and citations bind
to body hashes too: a front-matter-only change (a trust confirmation, a moved file) does not
re-open a candidate a person already dismissed.

Records live in ``_ledger/candidates.jsonl``: ``candidate`` (filed by an agent through the
``record_candidate`` tool) and ``dismiss`` (a person's decision; no agent tool writes it: the
person runs ``osk dismiss KEY --reason TEXT`` at a terminal, which calls ``dismiss_at_terminal``).

This module is light (standard library and osk's light modules): the session-start hook lists
open candidates through ``pending_summary``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from osk.errors import CandidateError
from osk.store.fastclass import dataclass
from osk.store.fsutil import sha256_text
from osk.store.ledger import Ledger, LedgerView, Record
from osk.store.locks import file_lock
from osk.store.vault import Vault, scope_of

if TYPE_CHECKING:  # the session-start hook imports this module: no pydantic at run time
    from osk.store.node import Node

LEDGER = "candidates"
CandidateType = Literal["contradiction", "duplication", "competition", "delegation-overlap"]
TYPES: tuple[str, ...] = ("contradiction", "duplication", "competition", "delegation-overlap")
SYMMETRIC = frozenset({"contradiction", "duplication", "competition"})
MAX_PARTIES = 8
MAX_NOTE = 2000
MIN_PREFIX = 8  # hex characters of a key a person must type to name one candidate
_HEX = frozenset("0123456789abcdef")

# The open candidates last worked out per ledger file, with the view they came from (the view
# object is kept, so an identity check cannot match a different view at a reused address).
_OPEN: dict[Path, tuple[LedgerView, tuple[Candidate, ...]]] = {}

KIND_CANDIDATE = "candidate"
KIND_DISMISS = "dismiss"  # a person's decision; never written through the MCP surface


@dataclass(frozen=True)
class Party:
    """One node in a candidate, at the bytes the filer read."""

    id: str
    title: str
    path: str
    hash: str  # body hash

    @classmethod
    def of(cls, node: Node) -> Party:
        return cls(node.id, node.title, node.path, node.body_hash)

    @property
    def handle(self) -> str:
        return f"{self.id}@{self.hash}"

    def to_data(self) -> dict[str, str]:
        return {"id": self.id, "title": self.title, "path": self.path, "hash": self.hash}

    @classmethod
    def from_data(cls, data: Any) -> Party:
        return cls(str(data.get("id", "")), str(data.get("title", "")),
                   str(data.get("path", "")), str(data.get("hash", "")))


@dataclass(frozen=True)
class Candidate:
    key: str
    type: str
    parties: tuple[Party, ...]
    note: str
    actor: str
    record_id: str
    at: str
    status: Literal["open", "dismissed"]

    @classmethod
    def from_record(cls, record: Record, status: Literal["open", "dismissed"]) -> Candidate:
        data = record.data
        raw_parties = data.get("parties")
        parties = tuple(Party.from_data(p) for p in (
            raw_parties if isinstance(raw_parties, list) else ()) if isinstance(p, dict))
        return cls(
            key=record.subject, type=str(data.get("type", "")), parties=parties,
            note=str(data.get("note", "")), actor=str(data.get("actor", "")),
            record_id=record.id, at=record.at, status=status,
        )


def candidate_key(kind: str, parties: Sequence[Party]) -> str:
    """sha256 of the type and each party's ``id@hash`` (sorted where the type is symmetric)."""
    handles = [p.handle for p in parties]
    if kind in SYMMETRIC:
        handles.sort()
    return sha256_text("\n".join([kind, *handles]))


class Candidates:
    """The candidates ledger of one vault."""

    def __init__(self, vault: Vault) -> None:
        self.vault = vault
        self.ledger = Ledger(vault, LEDGER)

    # -- writing ------------------------------------------------------------------------
    def record(self, kind: str, parties: Sequence[Node | Party], note: str = "",
               *, actor: str = "agent") -> tuple[Candidate, bool]:
        """File a candidate; returns it and whether it is new.

        Re-filing the same type and parties at the same body hashes returns the existing
        candidate (open or dismissed) and writes nothing.
        """
        resolved = _checked(kind, [p if isinstance(p, Party) else Party.of(p) for p in parties])
        note = _checked_note(note)
        key = candidate_key(kind, resolved)
        stored = resolved if kind not in SYMMETRIC else sorted(resolved, key=lambda p: p.handle)
        # A lock of our own around check-then-append, so two sessions filing the same candidate
        # at once write it once. (Ledger.append takes the ledger's own lock inside.)
        with file_lock(self.vault.lock_path(f"{LEDGER}-record")):
            view = self.ledger.read()
            existing = _latest(view, key)
            if existing is not None:
                return existing, False
            record = self.ledger.append(KIND_CANDIDATE, key, {
                "type": kind,
                "parties": [p.to_data() for p in stored],
                "note": note,
                "actor": actor,
            })
        return Candidate.from_record(record, "open"), True

    def dismiss(self, key: str, reason: str, *, actor: str = "user") -> Candidate:
        """A person's decision that a candidate needs no action. Never reachable through MCP.

        This is the ledger operation; it does not check for a terminal. The person's verb is
        ``dismiss_at_terminal`` (``osk dismiss``), and the MCP surface lint keeps every
        ``dismiss`` out of the server.
        """
        with file_lock(self.vault.lock_path(f"{LEDGER}-record")):
            view = self.ledger.read()
            found = _latest(view, key)
            if found is None:
                raise CandidateError(
                    f"no candidate with key {key}; list open candidates with `osk candidates`",
                    key=key,
                )
            if found.status == "dismissed":
                raise CandidateError(
                    f"candidate {key[:12]} is already dismissed; `osk candidates --all` shows it",
                    key=key,
                )
            self.ledger.append(KIND_DISMISS, key, {"reason": reason, "actor": actor})
        return replace(found, status="dismissed")

    # -- reading ------------------------------------------------------------------------
    def all(self) -> list[Candidate]:
        return self._all_of(self.ledger.read())

    @staticmethod
    def _all_of(view: LedgerView) -> list[Candidate]:
        found = [_latest(view, subject) for subject in list(view.subjects())]
        return sorted((c for c in found if c is not None), key=lambda c: c.record_id)

    def open(self) -> list[Candidate]:
        """Candidates no person has dismissed, oldest first.

        Remembered per ledger view: ``Ledger.read`` hands back the same view object while the
        file is unchanged (and a new one after any change), so a process that asks twice for
        the same bytes, such as the session-start hook listing the scope and then Domain and
        Person, works out each candidate's status once.
        """
        view = self.ledger.read()
        cached = _OPEN.get(self.ledger.path)
        if cached is not None and cached[0] is view:
            return list(cached[1])
        found = [c for c in self._all_of(view) if c.status == "open"]
        _OPEN[self.ledger.path] = (view, tuple(found))
        return found

    def open_party_ids(self) -> set[str]:
        """Ids of every node that is a party to an open candidate (search's ``conflict`` marker)."""
        return {party.id for candidate in self.open() for party in candidate.parties}


def find(vault: Vault, prefix: str) -> Candidate:
    """The one candidate (open or dismissed) whose key starts with ``prefix``.

    A person types a key from ``osk candidates``; at least ``MIN_PREFIX`` hex characters, so a
    short prefix cannot name a different candidate filed later by accident.
    """
    wanted = prefix.strip().lower()
    if len(wanted) < MIN_PREFIX or not set(wanted) <= _HEX:
        raise CandidateError(
            f"{prefix!r} is not a candidate key: give at least {MIN_PREFIX} hex characters of "
            f"it (`osk candidates` lists the keys)",
            key=prefix,
        )
    matches = [c for c in Candidates(vault).all() if c.key.startswith(wanted)]
    if not matches:
        raise CandidateError(
            f"no candidate key starts with {wanted!r}; `osk candidates --all` lists them",
            key=wanted,
        )
    if len(matches) > 1:
        raise CandidateError(
            f"{len(matches)} candidate keys start with {wanted!r}; give more of the key",
            key=wanted,
        )
    return matches[0]


def dismiss_at_terminal(vault: Vault, prefix: str, *, reason: str) -> Candidate:
    """The person's verb: dismiss one open candidate (refused unless stdin is a terminal).

    No audit record: the audit ledger records changes to nodes, and a dismissal changes none.
    The ``dismiss`` record itself carries the person's reason, actor and time.
    """
    from osk.authority import protection  # light, but only the person's verb needs it

    protection.require_person("dismiss")
    if not reason.strip():
        raise CandidateError("say why the candidate needs no action: --reason TEXT")
    found = find(vault, prefix)
    if found.status == "dismissed":
        raise CandidateError(
            f"candidate {found.key[:12]} is already dismissed; `osk candidates --all` shows it",
            key=found.key,
        )
    return Candidates(vault).dismiss(found.key, reason.strip(), actor="user")


def pending_summary(vault: Vault, scope: str) -> list[str]:
    """One line per open candidate for session-start injection.

    ``scope`` names a project: candidates with a party in that scope. ``""``: candidates whose
    parties are all Domain or Person nodes (they concern every project), so a candidate is
    listed once per session, never twice.
    """
    lines = []
    for candidate in Candidates(vault).open():
        scopes = {scope_of(p.path) for p in candidate.parties}
        if (scope in scopes) if scope else scopes <= {None}:
            lines.append(describe(candidate))
    return lines


def describe(candidate: Candidate) -> str:
    titles = " / ".join(f"[[{p.title}]]" for p in candidate.parties)
    note = f": {candidate.note}" if candidate.note else ""
    return (f"{candidate.type} between {titles}{note} "
            f"(candidate {candidate.key[:12]}, filed by {_filer(candidate.actor)}, for the "
            f"person to decide)")


def _filer(actor: str) -> str:
    """Who filed a candidate, in words (its note is theirs)."""
    return {"agent": "an agent (record_candidate)", "user": "the person"}.get(
        actor, "a writer the record does not name")


def _latest(view: LedgerView, key: str) -> Candidate | None:
    """The candidate filed under ``key`` and its status.

    A candidate stays open unless every concurrent latest record about it is a dismissal: when
    two devices disagree, showing it to the person again is the safe side.
    """
    records = view.for_subject(key)
    filed = [r for r in records if r.kind == KIND_CANDIDATE]
    if not filed:
        return None
    tops = view.maxima(key)
    dismissed = bool(tops) and all(r.kind == KIND_DISMISS for r in tops)
    first = min(filed, key=lambda r: r.id)
    return Candidate.from_record(first, "dismissed" if dismissed else "open")


def _checked(kind: str, parties: list[Party]) -> list[Party]:
    if kind not in TYPES:
        raise CandidateError(
            f"candidate type {kind!r} is not one of {', '.join(TYPES)}; pick the one that fits",
            type=kind,
        )
    if len(parties) < 2:
        raise CandidateError(
            f"a {kind} candidate needs at least two different nodes (got {len(parties)}); "
            f"name every node involved",
            type=kind,
        )
    if len(parties) > MAX_PARTIES:
        raise CandidateError(
            f"a candidate names at most {MAX_PARTIES} nodes (got {len(parties)}); "
            f"file the strongest pairs separately",
            type=kind,
        )
    ids = [p.id for p in parties]
    if len(set(ids)) != len(ids):
        twice = sorted({i for i in ids if ids.count(i) > 1})
        raise CandidateError(
            f"node(s) {', '.join(twice)} named more than once; a candidate is between "
            f"different nodes",
            type=kind,
        )
    return parties


def _checked_note(note: str) -> str:
    """The note as the ledger keeps it: capped, then secret-filtered (the ledger is synced)."""
    from osk.capture.secrets import mask_secrets

    if len(note) > MAX_NOTE:
        raise CandidateError(
            f"the note is {len(note)} characters; keep it under {MAX_NOTE} and say only what "
            f"the person needs to decide",
        )
    return mask_secrets(note.strip()).text
