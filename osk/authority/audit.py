"""The audit log: one record per change to a node, in ``_ledger/audit.jsonl``.

Every node creation, update, move and supersession (the write path), and every approve, revert,
confirm, reject and lift (the person's verbs) appends exactly one record whose subject is the
node's id. ``before``/``after`` are file hashes (sha256 of the file text, ``Node.file_hash``) and
both texts are kept in ``_objects/``, so any recorded version can be shown again
(``osk show NODE@HASH``) and the vault can be read as it stood at a past time (``validity``).

A record also says which version readers were *served* after it: inside a protected region an
agent's edit changes the working copy but not what is served, so such a record is ``pending``
and its ``served`` is the approved version. Edits made by hand outside osk leave no record;
``osk log`` says so when a node's file no longer matches its last recorded version.

A node file's replace and its audit append are two steps, so the write path journals the
record first (``intend``: both versions stored as objects, the record in
``.osk/audit-intent.json``, not fsynced: it guards against a killed process, not a power cut),
replaces the file, then appends (``Intent.record``). A process killed in between leaves the
journal; the next write (or the next engine to open the vault)
finishes it under the mutation lock (``recover``): a record whose file now holds its ``after``
version is appended, marked ``recovered``; one whose write never landed is dropped. So a kill
can never leave a version that ``osk log`` would take for a hand edit.

A node write is one unit with its bookkeeping the same way: the journal also holds the ledger
lines the write owes after its file (``Follow``: its recheck pairs, its session's binding) and
the other files it changes (a superseded node's closing, ``Change.redo``). Once the first
record's file holds its ``after`` version the write has landed; whatever of the rest the disk
refuses then is finished by ``recover`` (each line appended once, each redo file written
from its stored object), so the call answers success. Before that point ``Intent.abandon``
takes back what the journal stored, and the call fails with nothing landed. A move
(``osk.writes.moves``: move_nodes, move_cluster) is one unit the same way: its audit records and its
session's binding are journalled before the renames, which are its commit point.

Standard library only at import time.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from osk.errors import ObjectMissing, OskError
from osk.store import clock, objects
from osk.store.fsutil import open_making_folder, replace_unsynced, sha256_bytes
from osk.store.ledger import Ledger, Record
from osk.store.vault import Vault

AUDIT = "audit"
WRITE_ACTIONS = ("create", "update", "move", "supersede")
PERSON_ACTIONS = ("approve", "revert", "confirm", "reject", "lift")
ACTIONS = WRITE_ACTIONS + PERSON_ACTIONS


@dataclass(frozen=True)
class Entry:
    """One audit record, as read back."""

    id: str
    at: str  # ledger envelope time (UTC, seconds; real clock)
    time: str  # record time in the vault's clock (minute precision; honours OSK_NOW)
    action: str
    actor: str
    node_id: str
    path: str
    before: str | None
    after: str | None
    served: str | None
    has_served: bool  # lift changes no version, so it carries no served value
    pending: bool
    detail: dict[str, object] = field(default_factory=dict)

    @classmethod
    def from_record(cls, record: Record) -> Entry:
        data = record.data

        def text(key: str) -> str | None:
            value = data.get(key)
            return value if isinstance(value, str) else None

        detail = data.get("detail")
        return cls(
            id=record.id, at=record.at, time=text("time") or record.at, action=record.kind,
            actor=text("actor") or "?", node_id=record.subject, path=text("path") or "",
            before=text("before"), after=text("after"), served=text("served"),
            has_served="served" in data, pending=bool(data.get("pending")),
            detail=dict(detail) if isinstance(detail, dict) else {},
        )

    @property
    def path_after(self) -> str:
        """Where the node is after this change (a move names it in ``detail.to``)."""
        return str(self.detail.get("to") or self.path)

    @property
    def path_before(self) -> str:
        return str(self.detail.get("from") or self.path)

    @property
    def served_before(self) -> str | None:
        """What readers were served just before this record (for reading the past)."""
        if self.action == "create":
            return None
        if self.pending or self.action == "revert":
            return self.served  # neither changes what is served
        return self.before


def record(
    vault: Vault,
    *,
    actor: str,
    action: str,
    node_id: str,
    path: str,
    before: str | None,
    after: str | None,
    detail: Mapping[str, object] | None = None,
    stored: bool = False,
) -> Entry:
    """Append one audit record. ``before``/``after`` must already be stored objects
    (``stored``: the caller stored them itself in this hold of the lock, as a write's journal
    does, so they are not looked for again).

    The write path calls this after the node file is written, under the mutation lock (through
    ``intend`` / ``Intent.record``, so a kill between the two is finished later).
    """
    if action not in ACTIONS:
        raise ValueError(f"unknown audit action {action!r}; known: {', '.join(ACTIONS)}")
    if not actor or not isinstance(actor, str):
        raise ValueError("an audit record needs an actor ('user', 'agent' or 'agent:SESSION')")
    if not node_id:
        raise ValueError("an audit record needs the node's id")
    for name, sha in (("before", before), ("after", after)):
        if sha is not None and not stored and not objects.has(vault, sha):
            raise ObjectMissing(
                f"audit {name}={sha} is not a stored object; call objects.put(vault, text) "
                f"before audit.record",
                sha=sha,
            )
    if before is None and after is None and action != "lift":
        raise ValueError(f"an audit {action} record needs a before or an after hash")
    data: dict[str, object] = {
        "actor": actor, "path": path, "before": before, "after": after,
        "time": clock.now_text(),
    }
    if action != "lift":
        served, pending = _served_after(vault, action, path, after)
        data["served"] = served
        if pending:
            data["pending"] = True
    if detail:
        data["detail"] = dict(detail)
    return Entry.from_record(Ledger(vault, AUDIT).append(action, node_id, data))


@dataclass(frozen=True)
class Change:
    """One audit record a write is about to earn (``intend`` stores its texts)."""

    actor: str
    action: str
    node_id: str
    path: str  # where the node is after the change
    before_text: str | None
    after_text: str | None
    detail: Mapping[str, object] | None = None
    redo: bool = False  # a file the write changes after its first: recover writes it if needed


@dataclass(frozen=True)
class Follow:
    """A ledger line a write owes once its first file landed (its recheck pairs, a binding)."""

    ledger: str
    kind: str
    subject: str
    data: Mapping[str, object]


@dataclass
class Intent:
    """Journalled audit records whose node writes are under way; ``record`` appends them."""

    vault: Vault
    records: list[dict[str, object]]
    stored: tuple[str, ...] = ()  # objects this journal stored that were not there before

    def record(self) -> list[Entry]:
        done = [_append(self.vault, item, stored=True) for item in self.records]
        _intent_path(self.vault).unlink(missing_ok=True)
        return done

    def landed(self) -> bool:
        """Whether the first record's file holds its ``after`` version (the write's unit)."""
        first = self.records[0]
        return _file_sha(self.vault, str(first["path"])) == first["after"]

    def abandon(self) -> None:
        """The first file did not land: take back the journal and the objects it stored, so
        the failed call leaves nothing (an object is content, but it would be synced)."""
        _intent_path(self.vault).unlink(missing_ok=True)
        for sha in self.stored:
            objects.path_of(self.vault, sha).unlink(missing_ok=True)


def intend(vault: Vault, changes: Sequence[Change], follow: Sequence[Follow] = ()) -> Intent:
    """Store every version and journal the records before any node file is replaced.

    The caller holds the vault mutation lock and replaces the files next, then calls
    ``Intent.record``; a kill in between is finished by ``recover``. ``follow``: the ledger
    lines the write appends after its first file, which ``recover`` appends if they are missing.
    """
    if _intent_path(vault).exists():  # an earlier write under this hold of the lock still owes
        recover(vault)  # its bookkeeping: finish it now rather than overwrite its journal
    since = Ledger(vault, AUDIT).tip().max_id  # first: refuses an audit ledger out of the vault
    items: list[dict[str, object]] = []
    stored: list[str] = []
    try:
        for change in changes:
            items.append({"actor": change.actor, "action": change.action,
                          "node_id": change.node_id, "path": change.path,
                          "before": _put(vault, change.before_text, stored),
                          "after": _put(vault, change.after_text, stored),
                          "detail": dict(change.detail or {}), "redo": change.redo})
        lines = [{"ledger": f.ledger, "since": Ledger(vault, f.ledger).tip().max_id,
                  "kind": f.kind, "subject": f.subject, "data": dict(f.data)} for f in follow]
        # Not fsynced: the journal is for a killed process, whose writes the page cache keeps;
        # a power cut in the window can still lose it (as before), and two fsyncs per write
        # (the file and its folder) cost more than the rest of a small write's bookkeeping.
        _journal(vault, json.dumps({"since": since, "records": items, "follow": lines}) + "\n")
    except BaseException:
        Intent(vault, items, tuple(stored)).abandon()
        raise
    return Intent(vault, items, tuple(stored))


@dataclass
class _Kept:
    """The file ``kept_journal`` keeps open: ``fd`` None once it fell back to renames."""

    fd: int | None
    name: Path


_kept: dict[Path, _Kept] = {}  # journal path -> its kept file, inside ``kept_journal``


@contextmanager
def kept_journal(vault: Vault) -> Iterator[None]:
    """Journal the writes of a block (a batch under one hold of the mutation lock: ``osk
    import``) through one file kept open in the temp folder, written in place and linked
    as the journal, instead of a new file made and renamed for each: making a file is the
    dearest step of a small write's bookkeeping (0.3-0.6 ms of CPU each on the bench box,
    a link 10 us). The journal's name holds whole text exactly while a write owes it, as
    outside the block; the kept file is named as a temp file of this process, so a kill
    leaves it for the next open's sweep."""
    path = _intent_path(vault)
    if path in _kept or not hasattr(os, "pwrite"):  # nested, or no pwrite (Windows)
        yield
        return
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL
    name = vault.temp_dir / f".{os.getpid()}.{path.name}.{os.urandom(6).hex()}.tmp"
    kept = _kept[path] = _Kept(open_making_folder(name, flags, 0o600), name)
    try:
        yield
    finally:
        del _kept[path]
        _let_go(kept)


def _let_go(kept: _Kept) -> None:
    if kept.fd is not None:
        os.close(kept.fd)
        kept.fd = None
    kept.name.unlink(missing_ok=True)


def _journal(vault: Vault, text: str) -> None:
    """Make ``text`` the journal (there is none now: ``intend`` finished any first)."""
    path = _intent_path(vault)
    kept = _kept.get(path)
    if kept is not None and kept.fd is not None:
        data = text.encode("utf-8")
        try:
            if os.pwrite(kept.fd, data, 0) == len(data):
                os.ftruncate(kept.fd, len(data))
                os.link(kept.name, path)  # whole text before its name appears, as a rename
                return
        except OSError:
            pass  # no links here, or a disk that refused: the rest of the block renames
        _let_go(kept)
    replace_unsynced(path, text, temp_dir=vault.temp_dir)  # its temp swept by every open


def _put(vault: Vault, text: str | None, stored: list[str]) -> str | None:
    """Store ``text`` as an object; note it in ``stored`` when it was not there before."""
    if text is None:
        return None
    sha, fresh = objects.store(vault, text)
    if fresh:
        stored.append(sha)
    return sha


def recover(vault: Vault) -> list[Entry]:
    """Append the records a killed write journalled whose node file holds their ``after``
    version and that are not in the ledger yet. The caller holds the vault mutation lock."""
    journal = _intent_path(vault)
    try:
        data = json.loads(journal.read_text(encoding="utf-8"))
        since, items = data["since"], list(data["records"])
    except FileNotFoundError:
        return []
    except (ValueError, KeyError, TypeError):  # cut short while written: no file was replaced
        journal.unlink(missing_ok=True)
        return []
    if items and _file_sha(vault, str(items[0]["path"])) == items[0]["after"]:
        _finish_unit(vault, data.get("follow") or [], items)
    view = Ledger(vault, AUDIT).read()
    seen = {(r.subject, r.kind, r.data.get("after"), r.data.get("path"))
            for r in view.records if since is None or r.id > since}
    done: list[Entry] = []
    for item in items:
        if (item["node_id"], item["action"], item["after"], item["path"]) in seen:
            continue  # appended before the kill; only the journal's removal was missed
        if _file_sha(vault, str(item["path"])) != item["after"]:
            continue  # killed before the file was replaced (or removed): nothing to record
        detail = {**dict(item.get("detail") or {}), "recovered": True}
        done.append(_append(vault, {**item, "detail": detail}))
    journal.unlink(missing_ok=True)
    return done


def _finish_unit(vault: Vault, follow: Sequence[Mapping[str, Any]],
                 items: Sequence[Mapping[str, object]]) -> None:
    """A write whose first file landed: append the ledger lines it owed that are not there
    yet, and write the other files it changes that still hold their ``before`` version."""
    for line in follow:
        ledger = Ledger(vault, str(line["ledger"]))
        since = line.get("since")
        if not any(r.kind == line["kind"] and r.subject == line["subject"]
                   and r.data == line["data"]
                   for r in ledger.read().records if since is None or r.id > since):
            ledger.append(str(line["kind"]), str(line["subject"]), dict(line["data"]))
    for item in items[1:]:
        after = item.get("after")
        if item.get("redo") and isinstance(after, str) \
                and _file_sha(vault, str(item["path"])) == item.get("before"):
            vault.write_file(vault.abs(str(item["path"])), objects.get(vault, after))


def _append(vault: Vault, item: Mapping[str, object], *, stored: bool = False) -> Entry:
    def text(key: str) -> str | None:
        value = item.get(key)
        return value if isinstance(value, str) else None

    detail = item.get("detail")
    return record(vault, actor=str(item["actor"]), action=str(item["action"]),
                  node_id=str(item["node_id"]), path=str(item["path"]), before=text("before"),
                  after=text("after"), detail=detail if isinstance(detail, Mapping) else None,
                  stored=stored)


def _file_sha(vault: Vault, rel: str) -> str | None:
    try:
        return sha256_bytes(vault.abs(rel).read_bytes())
    except (OSError, OskError):
        return None


def _intent_path(vault: Vault) -> Path:
    return vault.audit_intent_path()


def _served_after(vault: Vault, action: str, path: str, after: str | None) -> tuple[
    str | None, bool
]:
    if action in PERSON_ACTIONS:
        return after, False
    from osk.authority import protection

    current = protection.state(vault)
    if current.region_of(path) is None:
        return after, False
    approved = current.approved_sha(path)
    return approved, approved != after


# -- reading ----------------------------------------------------------------------------------
def entries(vault: Vault) -> list[Entry]:
    """Every audit record in causal (id) order."""
    view = Ledger(vault, AUDIT).read()
    return [Entry.from_record(r) for r in sorted(view.records, key=lambda r: r.id)]


def history(vault: Vault, node_id: str) -> list[Entry]:
    """A node's records, oldest first."""
    view = Ledger(vault, AUDIT).read()
    return [Entry.from_record(r) for r in sorted(view.for_subject(node_id), key=lambda r: r.id)]


def by_node(vault: Vault) -> dict[str, list[Entry]]:
    grouped: dict[str, list[Entry]] = {}
    for entry in entries(vault):
        grouped.setdefault(entry.node_id, []).append(entry)
    return grouped


def versions(entries_of_node: list[Entry]) -> list[str]:
    """Every version hash a node's history names, oldest first, each once."""
    seen: list[str] = []
    for entry in entries_of_node:
        for sha in (entry.before, entry.after):
            if sha and sha not in seen:
                seen.append(sha)
    return seen
