"""The person's verbs, one call each: what `osk protect`, `osk approve`, `osk review`, `osk log`,
`osk confirm`, `osk reject`, `osk candidates`, `osk memory`, `osk settle`, … run. The command
module parses, makes one call here and renders what comes back.

This module composes and holds no rule: each deciding verb is refused off a terminal by the wing
that owns it (``protection.require_person`` inside ``approvals``, ``trust``, ``tombstones``,
``candidates``, ``scope_memory``); the checks made here before asking the person anything are
the same calls, made earlier so nothing is shown to a caller who may not decide.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from osk.authority import approvals, audit, mutation, protection, tombstones, trust
from osk.authority.protection import Change
from osk.calls.request import NodeEdit
from osk.engine.core import Engine
from osk.engine.vaults import open_vault
from osk.errors import NodeNotFound, ObjectMissing, OskError
from osk.provenance import candidates as candidate_ledger
from osk.provenance import pairs, scope_memory
from osk.provenance.candidates import Candidate, Candidates
from osk.provenance.rechecks import Rechecks
from osk.provenance.sessions import checked_scope_name, open_session
from osk.store import objects
from osk.store.catalog import Catalog
from osk.store.fsutil import sha256_text
from osk.store.node import title_from_path
from osk.store.titles import title_key
from osk.store.vault import Vault
from osk.verbs import review
from osk.verbs.redaction import purged_by
from osk.verbs.review import NewWrite

Where = Vault | str | os.PathLike[str] | None  # a vault, or what `--vault` names (None: find it)


def at_terminal(action: str) -> None:
    """Refuse ``action`` unless the person is at a terminal: for a command that asks the person
    something first (the verb checks again when it decides)."""
    protection.require_person(action)


# -- protected regions ------------------------------------------------------------------------
def protect(where: Where, path: str, cwd: Path) -> approvals.Protected:
    vault = open_vault(where)
    return approvals.protect(vault, approvals.vault_path(vault, path, cwd))


def unprotect(where: Where, path: str, cwd: Path) -> str:
    vault = open_vault(where)
    return approvals.unprotect(vault, approvals.vault_path(vault, path, cwd))


@dataclass(frozen=True)
class Proposal:
    """What `osk approve` / `osk revert` would decide, shown before the person types ``code``
    back (``protection.changes_code``: made from exactly these changes)."""

    verb: str
    path: str
    changes: list[Change]
    sizes: list[tuple[int, int]]  # (lines added, lines removed) per change
    code: str
    past: str  # "approved" / "reverted", for "nothing was …"


def approve(where: Where, path: str, cwd: Path,
            agree: Callable[[Proposal], bool]) -> list[Change] | None:
    """The changes under ``path`` made the approved version if ``agree`` (the person, shown
    the proposal) says so; None when not."""
    return _decided("approve", where, path, cwd, agree)


def revert(where: Where, path: str, cwd: Path,
           agree: Callable[[Proposal], bool]) -> list[Change] | None:
    """The working copy under ``path`` returned to the approved snapshot if ``agree`` says so."""
    return _decided("revert", where, path, cwd, agree)


def _decided(verb: str, where: Where, path: str, cwd: Path,
             agree: Callable[[Proposal], bool]) -> list[Change] | None:
    vault = open_vault(where)
    rel = approvals.vault_path(vault, path, cwd)
    protection.require_person(verb)  # before showing anything
    shown = approvals.to_approve(vault, rel) if verb == "approve" else \
        approvals.to_revert(vault, rel)
    sizes = [_size(protection.diff(vault, change)) for change in shown]
    proposal = Proposal(verb, rel, shown, sizes, protection.changes_code(shown),
                        approvals.PAST[verb])
    if not agree(proposal):
        return None
    decide = approvals.approve if verb == "approve" else approvals.revert
    return decide(vault, rel, shown=shown)


def _size(diff: str) -> tuple[int, int]:
    body = diff.splitlines()[2:]  # past the two file header lines
    return sum(line.startswith("+") for line in body), sum(line.startswith("-") for line in body)


@dataclass(frozen=True)
class Pending:
    """The pending changes in protected regions (``osk review``), each with its diff."""

    changes: list[Change]
    diffs: list[str]
    protected: bool  # any region protected at all


def pending(where: Where, path: str | None, cwd: Path) -> Pending:
    vault = open_vault(where)
    under = approvals.vault_path(vault, path, cwd) if path else None
    changes = protection.pending(vault, under)
    return Pending(changes, [protection.diff(vault, c) for c in changes],
                   bool(changes) or bool(protection.regions(vault)))


# -- review of what agents wrote --------------------------------------------------------------
def new_writes(where: Where, *, deciding: bool) -> list[NewWrite]:
    """Each node agents wrote since the person's last review; ``deciding``: the person is about
    to keep or reject them, which only a terminal may."""
    vault = open_vault(where)
    writes = review.new_writes(vault)
    if deciding:
        protection.require_person("review --new")
    return writes


def keep(where: Where, write: NewWrite) -> None:
    review.keep(open_vault(where), write)


def edit(where: Where, write: NewWrite, cwd: Path,
         revise: Callable[[str], str | None]) -> bool:
    """The node's whole body through ``revise`` (the person's editor; None: it failed and
    nothing changes), written as the person's and kept."""
    vault = open_vault(where)
    engine = Engine.open(vault, cwd=cwd, scope=write.scope, actor="user")
    page = engine.read_node(write.node_id)
    text = page.text
    while page.next_start is not None:  # every page read: the read that authorises a rewrite
        page = engine.read_node(write.node_id, start=page.next_start)
        text += page.text
    body = revise(text)
    if body is None:
        return False
    if body != text:
        engine.update_node(write.node_id, NodeEdit(body=body, expect_hash=page.hash))
    review.keep_current(vault, write.node_id)
    return True


# -- audit ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class History:
    entries: list[audit.Entry]
    note: str  # a node's file changed or removed outside osk since its last record; or ""


def history(where: Where, node: str | None, limit: int) -> History:
    """The audit records of one node (by id or title) or of the vault, newest ``limit``."""
    vault = open_vault(where)
    # a write killed before its record: finished, not shown as a hand edit
    mutation.finish_killed_audit(vault)
    note = ""
    if node:
        _, items = _node_history(vault, node)
        note = _drift_note(vault, items)
    else:
        items = audit.entries(vault)
    return History(items[-limit:] if limit > 0 else items, note)


def version(where: Where, ref: str) -> str:
    """The text of a recorded version, ``NODE@HASH`` (a hash prefix of 6 or more)."""
    vault = open_vault(where)
    name, sep, prefix = ref.rpartition("@")
    if not sep or not name or len(prefix) < 6:
        raise OskError("give NODE@HASH with at least 6 characters of the hash "
                       "(`osk log NODE` lists them)")
    _, items = _node_history(vault, name)
    matches = [sha for sha in audit.versions(items) if sha.startswith(prefix.lower())]
    if len(matches) != 1:
        raise NodeNotFound(
            f"{'no' if not matches else len(matches)} recorded version(s) of {name!r} start "
            f"with {prefix!r}; `osk log {name}` lists its versions", ref=ref,
        )
    try:
        return objects.get(vault, matches[0])
    except ObjectMissing:
        record = purged_by(vault, matches[0])
        if record is None:
            raise
        raise ObjectMissing(f"version {matches[0][:12]} of {name!r} was purged by osk redact "
                            f"on {record.at} (_ledger/redactions.jsonl {record.id}): it held "
                            f"a text the person removed", sha=matches[0]) from None


def _node_history(vault: Vault, ref: str) -> tuple[str, list[audit.Entry]]:
    """Audit entries of a node named by id or title (a rejected node is found by either)."""
    grouped = audit.by_node(vault)
    if ref in grouped:
        return ref, grouped[ref]
    catalog = Catalog(vault)
    catalog.refresh()
    try:
        found = catalog.get(ref)
    except OskError:
        found = None
    if found is not None:
        return found.id, grouped.get(found.id, [])
    wanted = title_key(ref)
    ids = {nid for nid, items in grouped.items()
           for e in items if e.path and title_key(title_from_path(e.path_after)) == wanted}
    if len(ids) == 1:
        node_id = ids.pop()
        return node_id, grouped[node_id]
    raise NodeNotFound(
        f"no node or audit history for {ref!r}" if not ids else
        f"{ref!r} names {len(ids)} different nodes in the audit log; use an id",
        ref=ref,
    )


def _drift_note(vault: Vault, items: list[audit.Entry]) -> str:
    """Say so when a node's file no longer matches its last recorded version."""
    if not items or items[-1].after is None:
        return ""
    last = items[-1]
    rel = last.path_after
    path = vault.abs(rel)
    if not path.is_file():
        return f"Note: {rel} no longer exists; it was removed outside osk."
    if sha256_text(path.read_text(encoding="utf-8")) != last.after:
        return (f"Note: {rel} differs from its last recorded version; it was changed "
                f"outside osk (by hand), which the audit log does not record.")
    return ""


# -- trust and tombstones ---------------------------------------------------------------------
def confirm(where: Where, node: str) -> trust.Confirmed:
    return trust.confirm(open_vault(where), node)


@dataclass(frozen=True)
class Rejected:
    tombstone: tombstones.Tombstone
    left: tombstones.Aftermath  # the nodes carrying the same claim, and those citing it


def reject(where: Where, node: str, reason: str) -> Rejected:
    vault = open_vault(where)
    tomb = tombstones.reject(vault, node, reason=reason)
    return Rejected(tomb, tombstones.aftermath(vault, tomb))


def tombstones_of(where: Where, *, lifted: bool) -> list[tombstones.Tombstone]:
    """The active tombstones; ``lifted``: the lifted ones too."""
    vault = open_vault(where)
    return tombstones.all_tombstones(vault) if lifted else tombstones.active(vault)


def lift(where: Where, key: str, reason: str) -> tombstones.Tombstone:
    return tombstones.lift(open_vault(where), key, reason=reason)


# -- candidates and evictions -----------------------------------------------------------------
@dataclass(frozen=True)
class Waiting:
    """What agents left for the person: conflict candidates and corrections stopped at a
    cascade (governance/ledgers.md rule 6)."""

    conflicts: list[Candidate]
    cascades: list[pairs.Candidate]  # a recheck candidate stopped at a cascade


def waiting(where: Where, *, dismissed: bool) -> Waiting:
    """The open conflict candidates (``dismissed``: the dismissed ones too) and the cascades."""
    vault = open_vault(where)
    store = Candidates(vault)
    return Waiting(store.all() if dismissed else store.open(), Rechecks(vault).cascades())


def dismiss(where: Where, key: str, reason: str) -> Candidate:
    return candidate_ledger.dismiss_at_terminal(open_vault(where), key, reason=reason)


def evictions(where: Where, scope: str | None) -> list[scope_memory.Eviction]:
    """Scope-memory lines squeezed out by the cap and not yet settled (one scope or all)."""
    wanted = checked_scope_name(scope) if scope else None
    return scope_memory.pending_evictions(open_vault(where), wanted)


def settle_dismissed(where: Where, eviction: str) -> scope_memory.Eviction:
    return scope_memory.dismiss_at_terminal(open_vault(where), eviction)


@dataclass(frozen=True)
class Memory:
    """A scope's memory note, each line with who wrote it (described), after any ``--set``."""

    scope: str
    lines: list[tuple[str, str | None]]
    hash: str
    written: scope_memory.WriteResult | None  # what `--set` did; None without it


def memory(where: Where, cwd: Path, scope: str | None, set_from: Path | None) -> Memory:
    """The note of ``scope`` (default: the working folder's session's); ``set_from``: first
    replace it with that file's text, recorded as the person's."""
    vault = open_vault(where)
    name = scope or open_session(vault, cwd).scope
    note = scope_memory.ScopeMemory(vault, name)
    written = None
    if set_from is not None:
        protection.require_person("memory --set")  # the note is recorded as the person's
        _, current = note.read()
        written = note.write(text=set_from.read_text(encoding="utf-8"), expect_hash=current,
                             author=scope_memory.Author("user"))
    text, digest = note.read()
    lines = [(line, None if who is None else scope_memory.describe_author(who))
             for line, who in zip(text.splitlines(), note.line_authors(text), strict=True)]
    return Memory(name, lines if text.strip() else [], digest, written)
