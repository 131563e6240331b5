"""Scope memory: one shared note per scope, capped at 1,500 characters after the secret filter.

The note (``_memory/<scope>.md``) is what every session of a scope sees first: the session-start
hook injects it with its hash. The cap is the point. A write whose result would be longer is
refused, never truncated, and the refusal tells the agent to distil the detail into a node and
keep a pointer here. The first shrinking write after such a refusal records the lines it removes
in the evictions ledger *before* the file changes, so nothing squeezed out by the cap is lost:
the evicted lines stay pending until they are settled (distilled into a node, or dismissed by a
person at a terminal: ``osk settle ID --dismissed``). Ordinary cleanup, with no refusal before
it, is not recorded; Git history has it.

Who wrote each line is kept in the ``memory`` ledger: every write through osk (an agent's
``scope_memory`` call, with its session key, drafter and host; the person's
``osk memory --set`` at a terminal) appends, before the note changes, the hashes of the lines
it added. A line of the note that no record names was written outside osk (a hand edit, by the
person or anyone with the files, or before osk kept this record): ``line_authors`` says so
rather than guess.

A refusal leaves the vault untouched. This device remembers it in device state
(``.osk/scope-memory/<scope>.refused``), which is never synced: a refusal on one device and the
shrinking write on another are not linked.

Writes are either a full replacement naming the ``expect_hash`` of the version read, or edits,
each replacing an anchor that occurs exactly once. This module is on the hook path: standard
library (and osk's light modules) only.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import field, replace
from pathlib import Path

from osk.errors import AnchorError, LimitError, ScopeError, StaleHash
from osk.provenance.sessions import checked_scope_name
from osk.store import clock
from osk.store.fastclass import dataclass
from osk.store.fsutil import atomic_write, sha256_text
from osk.store.ids import uuid7
from osk.store.ledger import Ledger, LedgerView, Record
from osk.store.locks import file_lock
from osk.store.vault import Vault

CAP = 1500
AUTHORS = "memory"  # the ledger of who wrote which lines
KIND_WRITE = "write"
EVICTIONS = "evictions"
KIND_EVICT = "evict"
KIND_SETTLE = "settle"
SETTLEMENTS = ("distilled", "dismissed")
MIN_PREFIX = 8  # characters of an eviction id a person must type to name one


@dataclass(frozen=True)
class Edit:
    """Replace ``old_text`` (which must occur exactly once) with ``new_text``."""

    old_text: str
    new_text: str


@dataclass(frozen=True)
class Eviction:
    id: str  # the ledger subject
    scope: str
    lines: tuple[str, ...]
    at: str
    record_id: str
    before_hash: str
    after_hash: str

    @classmethod
    def from_record(cls, record: Record) -> Eviction:
        data = record.data
        lines = data.get("lines", [])
        return cls(
            id=record.subject, scope=str(data.get("scope", "")),
            lines=tuple(str(x) for x in lines) if isinstance(lines, list) else (),
            at=record.at, record_id=record.id,
            before_hash=str(data.get("before_hash", "")),
            after_hash=str(data.get("after_hash", "")),
        )


@dataclass(frozen=True)
class Author:
    """Who writes the note: ``agent`` (through ``scope_memory``; its session key and the model
    that drafted, as it names itself) or ``user`` (the person, at a terminal)."""

    actor: str
    session: str = ""
    drafter: str = ""
    host: str = ""


@dataclass(frozen=True)
class LineAuthor:
    """Who wrote one line, as the ``memory`` ledger says (``actor`` "" : no record names it)."""

    actor: str
    session: str = ""
    drafter: str = ""
    at: str = ""
    host: str = ""


UNRECORDED = LineAuthor("")


def describe_author(who: LineAuthor, shown: Callable[[str], str] = str) -> str:
    """Who wrote a line, in words; ``shown`` encodes what an agent gave (its session key and
    drafter) where the text is injected."""
    day = who.at[:10]
    if who.actor == "agent":
        parts = [f"session key {shown(who.session)}" if who.session else "",
                 f"drafter {shown(who.drafter)}" if who.drafter else "",
                 f"host {shown(who.host)}" if who.host else "", day]
        return f"an agent through scope_memory ({', '.join(p for p in parts if p)})"
    if who.actor == "user":
        return f"the person, at a terminal (osk memory --set, {day})"
    return ("a writer no osk write recorded (a hand edit, by the person or anyone with the "
            "files, or a line older than osk's record of who writes)")


@dataclass(frozen=True)
class WriteResult:
    scope: str
    text: str
    hash: str
    chars: int
    cap: int
    changed: bool
    redactions: tuple[tuple[str, int], ...] = ()
    eviction: Eviction | None = None
    notes: tuple[str, ...] = field(default=())


class ScopeMemory:
    """The memory note of one scope."""

    def __init__(self, vault: Vault, scope: str) -> None:
        self.vault = vault
        self.scope = checked_scope_name(scope)
        self.path = vault.memory_dir / f"{self.scope}.md"

    # -- reading ------------------------------------------------------------------------
    def read(self) -> tuple[str, str]:
        """The note's text and its hash (the hash of "" when there is no note yet)."""
        try:
            text = self.vault.inside(self.path).read_text(encoding="utf-8")
        except FileNotFoundError:
            text = ""
        return text, sha256_text(text)

    def pending_evictions(self) -> list[Eviction]:
        return pending_evictions(self.vault, self.scope)

    # -- writing ------------------------------------------------------------------------
    def write(self, *, text: str | None = None, expect_hash: str | None = None,
              edits: Sequence[Edit] = (), author: Author | None = None) -> WriteResult:
        """Replace the note (``text`` + ``expect_hash``) or apply unique-anchor ``edits``;
        ``author``: who writes, recorded with the lines this write adds (``memory`` ledger).

        Refuses (writing nothing to the vault) a stale hash, a missing or ambiguous anchor, a
        drafter or host that is not a plain name or holds a secret, and a result over the cap
        after the secret filter.
        """
        if (text is None) == (not edits):
            raise AnchorError(
                "give either the full new text (with expect_hash) or a list of edits, not both "
                "and not neither"
            )
        if author is not None:
            author = _checked_author(author)
        with file_lock(self.vault.lock_path(f"memory-{self.scope}")):
            current, current_hash = self.read()
            if expect_hash is not None and expect_hash != current_hash:
                raise StaleHash(
                    f"scope memory for {self.scope!r} changed since you read it "
                    f"(expected {expect_hash[:12]}…, now {current_hash[:12]}…); read it again "
                    f"and redo your change on the current text",
                    expected=expect_hash, actual=current_hash,
                )
            if text is None:
                proposed = apply_edits(current, edits, self.scope)
            elif expect_hash is None:
                raise StaleHash(
                    f"replacing the whole scope memory for {self.scope!r} needs expect_hash, the "
                    f"hash you got when you read it (it is {current_hash} now if you have read "
                    f"the current text); or send edits with unique anchors instead",
                    expected=None, actual=current_hash,
                )
            else:
                proposed = text
            filtered, redactions = _mask_secrets(proposed)
            if len(filtered) > CAP:
                self._remember_refusal(len(filtered), current_hash)
                raise LimitError(
                    f"scope memory for {self.scope!r} would be {len(filtered):,} characters after "
                    f"the secret filter; the cap is {CAP:,}. Nothing was written. Distil the "
                    f"detail into a node (create_node), keep a one-line pointer to it here, and "
                    f"write a note of at most {CAP:,} characters",
                    size=len(filtered), cap=CAP, scope=self.scope,
                )
            eviction = None
            if len(filtered) < len(current) and self._refused_before():
                eviction = self._record_eviction(current, filtered, current_hash)
            changed = filtered != current
            if changed:
                if author is not None:  # first: a line on disk never lacks its record
                    self._record_author(author, current, filtered)
                self.vault.write_file(self.path, filtered)
            if len(filtered) < len(current):
                self._forget_refusal()
        return WriteResult(
            scope=self.scope, text=filtered, hash=sha256_text(filtered), chars=len(filtered),
            cap=CAP, changed=changed, redactions=tuple(redactions), eviction=eviction,
        )

    def settle(self, eviction_id: str, how: str, *, node: str | None = None,
               actor: str = "agent") -> None:
        """Mark an eviction settled: ``distilled`` into ``node``, or ``dismissed``."""
        if how not in SETTLEMENTS:
            raise ScopeError(f"settle an eviction as one of {SETTLEMENTS}, not {how!r}")
        if how == "distilled" and not node:
            raise ScopeError("an eviction settled as distilled must name the node that now "
                             "holds its lines")
        # Our own lock around check-then-append, so one eviction is settled once.
        with file_lock(self.vault.lock_path(f"{EVICTIONS}-settle")):
            pending = {e.id for e in self.pending_evictions()}
            if eviction_id not in pending:
                raise ScopeError(
                    f"no pending eviction {eviction_id!r} in scope {self.scope!r}; the pending "
                    f"ones are listed by overview and `osk evictions`",
                    eviction=eviction_id,
                )
            if how == "dismissed":
                # Dropping evicted lines unread is the person's decision (governance/scopes.md).
                from osk.authority import protection

                protection.require_person("settle")
            Ledger(self.vault, EVICTIONS).append(KIND_SETTLE, eviction_id, {
                "scope": self.scope, "how": how, "node": node, "actor": actor,
            })

    # -- the refusal marker (device state) ----------------------------------------------
    @property
    def _marker(self) -> Path:
        return self.vault.state("scope-memory", f"{self.scope}.refused")

    def _remember_refusal(self, size: int, base_hash: str) -> None:
        atomic_write(self._marker, json.dumps(
            {"at": clock.now_text(), "size": size, "cap": CAP, "base": base_hash}) + "\n")

    def _refused_before(self) -> bool:
        return self._marker.exists()

    def _forget_refusal(self) -> None:
        self._marker.unlink(missing_ok=True)

    def _record_author(self, author: Author, before: str, after: str) -> None:
        added = removed_lines(after, before)  # the lines of ``after`` that ``before`` lacks
        Ledger(self.vault, AUTHORS).append(KIND_WRITE, f"scope:{self.scope}", {
            "scope": self.scope, "actor": author.actor, "session": author.session,
            "drafter": author.drafter, "host": author.host, "after_hash": sha256_text(after),
            "lines": sorted({line_hash(line) for line in added}),
        })

    def line_authors(self, text: str) -> list[LineAuthor | None]:
        """Who wrote each line of ``text`` (this scope's note): the latest ``memory`` record
        that added that line, ``UNRECORDED`` when none did, None for a blank line."""
        latest: dict[str, LineAuthor] = {}
        for record in Ledger(self.vault, AUTHORS).read().for_subject(f"scope:{self.scope}"):
            lines, data = record.data.get("lines"), record.data
            who = LineAuthor(str(data.get("actor") or ""), str(data.get("session") or ""),
                             str(data.get("drafter") or ""), record.at,
                             str(data.get("host") or ""))
            for digest in lines if isinstance(lines, list) else ():
                known = latest.get(str(digest))
                if known is None or known.at <= who.at:
                    latest[str(digest)] = who
        return [None if not line.strip() else latest.get(line_hash(line), UNRECORDED)
                for line in text.splitlines()]

    def _record_eviction(self, before: str, after: str, before_hash: str) -> Eviction | None:
        removed = removed_lines(before, after)
        if not removed:
            return None
        # a hand edit may have put a secret in the note
        lines, _ = _mask_secrets("\n".join(removed))
        record = Ledger(self.vault, EVICTIONS).append(KIND_EVICT, uuid7(), {
            "scope": self.scope,
            "lines": lines.split("\n"),
            "before_hash": before_hash,
            "after_hash": sha256_text(after),
        })
        return Eviction.from_record(record)


def apply_edits(text: str, edits: Sequence[Edit], scope: str) -> str:
    for number, edit in enumerate(edits, start=1):
        if not edit.old_text:
            raise AnchorError(f"edit {number}: old_text is empty; quote the exact text to replace "
                              f"(to write the first note, send the full text with expect_hash)")
        count = text.count(edit.old_text)
        if count != 1:
            where = "does not occur" if count == 0 else f"occurs {count} times"
            raise AnchorError(
                f"edit {number}: old_text {edit.old_text[:60]!r} {where} in the scope memory "
                f"for {scope!r}; read the note again and quote a passage that occurs exactly once",
                occurrences=count,
            )
        text = text.replace(edit.old_text, edit.new_text, 1)
    return text


def line_hash(line: str) -> str:
    """How the ``memory`` ledger names a line: 16 hex digits of its sha256, spaces at its ends
    ignored (the note shows no text, only whose a line is)."""
    return sha256_text(line.strip())[:16]


DRAFTER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,79}")


def _checked_author(author: Author) -> Author:
    """The drafter and host must be plain names (shown to every later session, outside the
    quoted note) holding no secret (``secrets.check_name``); a session key that holds one is
    recorded by its hash, as the hooks name such a conversation."""
    from osk.capture import secrets

    if author.actor not in ("agent", "user"):
        raise ValueError(f"a scope memory author is 'agent' or 'user', not {author.actor!r}")
    for what, name in (("drafter", author.drafter), ("host", author.host)):
        if name and not DRAFTER.fullmatch(name):
            raise ScopeError(f"{what} must be a plain name (letters, digits and . _ : / @ + -, "
                             f"at most 80 characters), as every later session is shown it",
                             argument=what)
        secrets.check_name(what, name)
    # not the agent's to change
    if author.session and secrets.mask_secrets(author.session).findings:
        return replace(author, session=f"key-{sha256_text(author.session)[:12]}")
    return author


def removed_lines(before: str, after: str) -> list[str]:
    """Non-blank lines of ``before`` missing from ``after`` (counting repeats)."""
    remaining = Counter(line for line in after.splitlines() if line.strip())
    removed = []
    for line in before.splitlines():
        if not line.strip():
            continue
        if remaining[line] > 0:
            remaining[line] -= 1
        else:
            removed.append(line)
    return removed


def pending_evictions(vault: Vault, scope: str | None = None) -> list[Eviction]:
    """Evictions not yet settled, oldest first (every scope when ``scope`` is None)."""
    view = Ledger(vault, EVICTIONS).read()
    found = []
    for subject in list(view.subjects()):
        eviction = _pending(view, subject)
        if eviction is not None and (scope is None or eviction.scope == scope):
            found.append(eviction)
    return sorted(found, key=lambda e: e.record_id)


def find_pending(vault: Vault, prefix: str) -> Eviction:
    """The one pending eviction, in any scope, whose id starts with ``prefix`` (8+ chars)."""
    wanted = prefix.strip().lower()
    if len(wanted) < MIN_PREFIX:
        raise ScopeError(
            f"give at least {MIN_PREFIX} characters of the eviction id (`osk evictions` lists "
            f"them), not {prefix!r}",
            eviction=prefix,
        )
    matches = [e for e in pending_evictions(vault) if e.id.lower().startswith(wanted)]
    if len(matches) != 1:
        raise ScopeError(
            f"no pending eviction id starts with {wanted!r}; `osk evictions` lists them"
            if not matches else
            f"{len(matches)} pending evictions start with {wanted!r}; give more of the id",
            eviction=wanted,
        )
    return matches[0]


def dismiss_at_terminal(vault: Vault, prefix: str) -> Eviction:
    """The person's verb: settle one pending eviction as dismissed (terminal only)."""
    from osk.authority import protection  # light, but only the person's verb needs it

    protection.require_person("settle")
    found = find_pending(vault, prefix)
    ScopeMemory(vault, found.scope).settle(found.id, "dismissed", actor="user")
    return found


def _pending(view: LedgerView, subject: str) -> Eviction | None:
    records = view.for_subject(subject)
    evicts = [r for r in records if r.kind == KIND_EVICT]
    if not evicts:
        return None
    if any(r.kind == KIND_SETTLE for r in view.maxima(subject)):
        return None
    return Eviction.from_record(min(evicts, key=lambda r: r.id))


def _mask_secrets(text: str) -> tuple[str, list[tuple[str, int]]]:
    # Imported here so that importing this module never fails while the filter is absent in a
    # partial checkout; a write without the filter would be worse than no write, so it raises.
    from osk.capture.secrets import mask_secrets

    result = mask_secrets(text)
    return result.text, [(str(kind), int(count)) for kind, count in result.findings]
