"""Redaction by the person: `osk redact` removes a pasted secret from a raw record for good.

Raw records are append-only (governance/raw.md) and synced, so a password pasted into a
conversation would otherwise stay in every device's copy. `osk redact` is the one sanctioned
rewrite, and it is the person's (terminal only, like approve and revert): every occurrence of a
span the person types (never on the command line, where shell history would keep it) in one
round, or in every round of a record, becomes ``[REDACTED:by-person]``. A node is redacted the
same way (body and summary): through the write path as the person, so its own citations carry
forward and its audit log gains an ``update``; then every earlier version of it in
``_objects/`` that holds the span is purged (deleted, and named in the ledger).

What it keeps consistent:

- the record stays well formed: each changed round is re-framed with its new length, parts and
  hash (``raw.reframe_rounds``), and this device's capture state is rebuilt;
- every citation of a changed round was bound to the old hash, so it is now a recheck
  candidate (reason ``target-changed``): the redactions ledger names each affected pair with
  the reason ``redacted``, so a person reading ``osk candidates`` can tell why;
- the ledger (``_ledger/redactions.jsonl``, kind ``redact``, subject ``raw:<record path>`` or
  ``node:<id>``) records who redacted what and when: the record's rounds (or the node's
  versions) with their hashes before and after, the purged objects, how many spans and how
  long the span was. Never the span, nor a hash of it (a hash of a short password is a guess
  away from the password).

What it cannot do, and says: after a redaction ``remaining`` looks through every file of the
vault (device state under ``.osk/`` included, ``.git/`` aside) for the text, in content and in
file and folder names, and the person is shown each place left with why it was left:

- append-only ledger lines (the audit ledger's ``drafter``, a note, a path) are not rewritten:
  sync merges ledgers line by line, so a line changed on one device would come back from every
  other device's copy, and two lines with one id would damage the ledger. They go with the Git
  history purge, which rewrites every device's copy at once;
- a raw record's or a node's file or folder name (a conversation id, a session key, a title, a
  cluster) is what every coordinate or link of it says: osk does not rename it;
- device state is this device's only, never synced: the caches of the node files (the
  catalog snapshot, the search index, its journal, the recall file and the raw rounds'
  index, which keep the text's words) are deleted and rebuilt on the next read
  (``drop_caches``); what else holds the text there (a raw record's capture state named after
  it, receipts, logs) is named.

The old bytes also remain in Git history on every device and remote that has synced them.
``purge_instructions`` says how to remove them with `git filter-repo`; osk never rewrites
history by itself.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from osk.authority.protection import person_name
from osk.calls.request import NodeEdit
from osk.capture import raw, raw_reframe
from osk.capture.redacted_targets import LEDGER
from osk.errors import RawNotFound, RawRecordError, RedactError
from osk.provenance.rechecks import Rechecks
from osk.store.edges import RawTarget, parse_target
from osk.store.ledger import Ledger, Record
from osk.store.vault import RAW_DIR, Vault

if TYPE_CHECKING:
    from osk.store.node import Node

KIND = "by-person"  # the marker: [REDACTED:by-person]
MIN_SPAN = 4  # a shorter span would match ordinary text all over a record


@dataclass(frozen=True)
class Target:
    """A raw record and the rounds to redact (None: every round)."""

    key: str
    conversation: str
    rounds: frozenset[int] | None

    @property
    def path(self) -> str:
        return raw.RecordId(self.key, self.conversation).path

    @property
    def label(self) -> str:
        return self.path if self.rounds is None else self.coordinate(min(self.rounds))

    def coordinate(self, number: int) -> str:
        return RawTarget(self.key, self.conversation, number).coordinate


@dataclass(frozen=True)
class NodeTarget:
    """A node (title or id): its body and summary are redacted."""

    ref: str

    @property
    def label(self) -> str:
        return self.ref


@dataclass(frozen=True)
class NodeChange:
    node_id: str
    title: str
    path: str
    before: str  # file hash
    after: str | None  # file hash; None in a preview
    after_body: str | None  # body hash (what citations of the node bind to)
    spans: int
    purged: tuple[str, ...]  # versions in _objects/ that held the span (the current included)


@dataclass(frozen=True)
class Affected:
    citing_id: str
    target: str  # the pair's target key, raw:<coordinate>


@dataclass(frozen=True)
class Outcome:
    target: Target
    rounds: tuple[raw_reframe.Rewritten, ...]
    affected: tuple[Affected, ...]
    record_id: str | None  # the ledger record; None for a preview
    dropped: tuple[str, ...] = ()  # caches deleted (rebuilt on the next read)


def parse(text: str) -> Target | NodeTarget:
    """``_raw/KEY/CONV#Round N`` (one round), ``_raw/KEY/CONV`` / ``…/CONV.md`` (all rounds),
    or a node's title or id."""
    inner = text[2:-2] if text.startswith("[[") and text.endswith("]]") else text
    if not inner.startswith(f"{RAW_DIR}/"):
        return NodeTarget(inner.strip())
    if "#" in inner:
        found = parse_target(inner)
        if not isinstance(found, RawTarget):
            raise RedactError(f"{text!r} is not a raw coordinate (_raw/KEY/CONVERSATION#Round N)")
        return Target(found.key, found.conversation, frozenset({found.round}))
    try:
        record = raw.record_key_of(inner)
    except RawRecordError:
        raise RedactError(f"{text!r} names no raw record: give _raw/KEY/CONVERSATION (every "
                          f"round) or _raw/KEY/CONVERSATION#Round N (one round)") from None
    return Target(record.key, record.conversation, None)


def check_span(span: str) -> str:
    if len(span.strip()) < MIN_SPAN:
        raise RedactError(f"the text to redact must be at least {MIN_SPAN} characters (a "
                          f"shorter one would match ordinary words all over the record)")
    if "\n" in span or "\r" in span:
        raise RedactError("the text to redact must be on one line; redact each line in turn")
    return span


def preview(vault: Vault, target: Target | NodeTarget, span: str) -> Outcome | NodeOutcome:
    """What ``redact`` would change, writing nothing."""
    if isinstance(target, NodeTarget):
        return _node_preview(vault, target, check_span(span))
    rounds = _rounds(vault, target, check_span(span), dry_run=True)
    return Outcome(target, tuple(rounds), _affected(vault, target, rounds), None)


def code_of(outcome: Outcome | NodeOutcome) -> str:
    """The code the person types back to redact exactly this (``protection.confirmation_code``
    of the versions it changes)."""
    from osk.authority.protection import confirmation_code

    if isinstance(outcome, NodeOutcome):
        return confirmation_code([outcome.change.path, str(outcome.change.before)])
    return confirmation_code([outcome.target.path,
                              *(f"{r.number}:{r.before}" for r in outcome.rounds)])


def redact(vault: Vault, target: Target | NodeTarget, span: str, *,
           shown: Outcome | NodeOutcome | None = None) -> Outcome | NodeOutcome:
    """Replace the span in the record or node, then record the redaction in the ledger. The
    person's verb: refused unless stdin is a terminal (governance/authority.md rule 1).

    ``shown`` is the preview the person confirmed: if the record or node changed since (a
    round appended that holds the text, an edit), nothing is redacted.
    """
    from osk.authority.protection import require_person

    require_person("redact")
    span = check_span(span)
    now = preview(vault, target, span)
    if shown is not None and code_of(now) != code_of(shown):
        raise RedactError(f"{now.target.path if isinstance(now, Outcome) else now.change.path} "
                          f"changed since it was shown; nothing was redacted. Run `osk "
                          f"redact` again to see what it would change now")
    if isinstance(now, NodeOutcome):
        return _node_redact(vault, now, span)
    target = now.target  # a record's preview holds the record target it was given
    rounds = _rounds(vault, target, span, dry_run=False)
    affected = _affected(vault, target, rounds)
    record = Ledger(vault, LEDGER).append("redact", f"raw:{target.path}", {
        "record": target.path,
        "rounds": [{"n": r.number, "before": r.before, "after": r.after, "spans": r.spans}
                   for r in rounds],
        "length": len(span),
        "by": person_name(),
        "affected": [{"citing": a.citing_id, "target": a.target, "reason": "redacted"}
                     for a in affected],
    })
    return Outcome(target, tuple(rounds), affected, record.id, drop_caches(vault))










def purged_by(vault: Vault, sha: str) -> Record | None:
    """The redaction that purged the object ``sha`` from ``_objects/``, if one did."""
    for record in Ledger(vault, LEDGER).read().records:
        purged = record.data.get("purged")
        if record.kind == "redact" and isinstance(purged, list) and sha in purged:
            return record
    return None


def _rounds(vault: Vault, target: Target, span: str, *,
            dry_run: bool) -> list[raw_reframe.Rewritten]:
    try:
        rounds = raw_reframe.reframe_rounds(vault, target.key, target.conversation,
                                            None if target.rounds is None else set(target.rounds),
                                            span, KIND, dry_run=dry_run)
    except RawNotFound as exc:
        raise RedactError(f"no raw record {target.path} in this vault") from exc
    if not rounds:
        raise RedactError(f"that text does not occur in {target.label}; nothing was changed "
                          f"(it must match exactly, case included)")
    return rounds


def _affected(vault: Vault, target: Target, rounds: list[raw_reframe.Rewritten]) -> tuple[Affected,
                                                                                         ...]:
    """Citation pairs bound to a changed round: they become recheck candidates."""
    keys = {f"raw:{target.coordinate(r.number)}" for r in rounds}
    found = [Affected(citing, key) for citing, citations in Rechecks(vault).table().items()
             for key in citations.pairs if key in keys]
    return tuple(sorted(found, key=lambda a: (a.target, a.citing_id)))


# -- nodes ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class NodeOutcome:
    target: NodeTarget
    change: NodeChange
    affected: tuple[Affected, ...]
    record_id: str | None
    dropped: tuple[str, ...] = ()  # caches deleted (rebuilt on the next read)


def _node_preview(vault: Vault, target: NodeTarget, span: str) -> NodeOutcome:
    from osk.authority import audit
    from osk.store import objects
    from osk.store.catalog import Catalog

    catalog = Catalog(vault)
    catalog.refresh()
    node = catalog.get(target.ref)
    # Every recorded version that holds the text goes, the current one included: the update
    # that redacts it leaves the current text behind as its "before" version.
    versions = [*audit.versions(audit.history(vault, node.id)), node.file_hash]
    purged = tuple(dict.fromkeys(sha for sha in versions
                                 if _holds(objects.path_of(vault, sha), span)))
    spans = node.body.count(span) + node.meta.summary.count(span) + node.meta.drafter.count(span)
    _check_node(vault, node, span, spans or len(purged))
    change = NodeChange(node.id, node.title, node.path, node.file_hash, None, None, spans,
                        purged)
    return NodeOutcome(target, change, _node_affected(vault, node.id), None)


def _check_node(vault: Vault, node: Node, span: str, found: int) -> None:
    from osk.authority import protection

    title = node.title
    if span in title:
        raise RedactError("that text is part of the node's title, which is its file name: "
                          "rename the node by hand (or move its content to a new node), then "
                          "redact what remains")
    if not found:  # neither the node nor a recorded version of it (a rerun after a crash)
        raise RedactError(f"that text does not occur in {title!r} (body or summary) nor in "
                          f"its recorded versions; nothing was changed (it must match "
                          f"exactly, case included)")
    region = protection.region_of(vault, node.path)
    if region is not None:
        raise RedactError(f"{title!r} lies in the protected region {region}, whose approved "
                          f"snapshot would keep the text: `osk unprotect {region}` first, "
                          f"redact, then protect it again")


def _holds(path: os.PathLike[str], span: str) -> bool:
    try:
        with open(path, "rb") as handle:
            return span.encode("utf-8") in handle.read()
    except FileNotFoundError:
        return False


def _node_redact(vault: Vault, shown: NodeOutcome, span: str) -> NodeOutcome:
    from osk.capture.secrets import marker
    from osk.engine.core import Engine
    from osk.store import objects
    from osk.store.fsutil import fsync_dir

    found = shown.change
    engine = Engine.open(vault, cwd=vault.root, scope=_scope_of(found.path), actor="user")
    node = engine.catalog.get(found.node_id)
    gone = marker(KIND)
    summary = node.meta.summary.replace(span, gone)
    drafter = node.meta.drafter.replace(span, gone)
    after_hash = node.file_hash
    if found.spans:  # else a rerun after a crash: only the purge was left to do
        after_hash = engine.update_node(
            found.node_id, NodeEdit(body=node.body.replace(span, gone), expect_hash=found.before,
                     summary=summary if summary != node.meta.summary else None,
                     drafter=drafter if drafter != node.meta.drafter else None)).hash
    for sha in found.purged:  # earlier versions that hold the text: gone from _objects/
        path = objects.path_of(vault, sha)
        path.unlink(missing_ok=True)
        fsync_dir(path.parent)
    after = engine.catalog.get(found.node_id)
    change = NodeChange(found.node_id, found.title, found.path, found.before, after_hash,
                        engine.rechecks.hasher.body_hash(after), found.spans, found.purged)
    record = Ledger(vault, LEDGER).append("redact", f"node:{found.node_id}", {
        "node": found.node_id, "path": found.path, "before": found.before,
        "after": change.after, "after_body": change.after_body, "spans": found.spans,
        "purged": list(found.purged), "length": len(span), "by": person_name(),
        "affected": [{"citing": a.citing_id, "target": a.target, "reason": "redacted"}
                     for a in shown.affected],
    })
    return NodeOutcome(shown.target, change, shown.affected, record.id, drop_caches(vault))


def _scope_of(rel: str) -> str | None:
    from osk.store.vault import scope_of

    return scope_of(rel)


def _node_affected(vault: Vault, node_id: str) -> tuple[Affected, ...]:
    key = f"node:{node_id}"
    found = [Affected(citing, key) for citing, citations in Rechecks(vault).table().items()
             if key in citations.pairs]
    return tuple(sorted(found, key=lambda a: a.citing_id))


@dataclass(frozen=True)
class Remaining:
    """A place in the vault that still holds the text after a redaction."""

    path: str  # vault-relative, with ``/``
    line: int | None  # the first line that holds it; None when it is in the path's name
    place: str  # a key of ``WHY_LEFT``


WHY_LEFT = {
    "name": "in a file or folder name (a title, a cluster, a raw record's conversation id or "
            "session key): every link or coordinate of it says that name, so osk does not "
            "rename it; rename or remove it by hand (git mv / git rm), then re-cite",
    "ledger": "in an append-only ledger line: not rewritten, because sync merges ledgers "
              "line by line and a changed line would come back from every other device's "
              "copy; the Git history purge below rewrites every copy at once",
    "header": "in the redacted file outside what osk redact rewrites (a raw record's front "
              "matter or a round's header: host, completion id; a node's links): edit it "
              "by hand, or leave it to the Git history purge",
    "raw": "in another raw record: redact it there too (osk redact _raw/KEY/CONVERSATION)",
    "node": "in another node file (its front matter or body): redact that node too",
    "object": "in a stored version in _objects/ that no node's audit history names: delete "
              "it by hand after checking it is no node's version",
    "state": "in this device's state under .osk/ (never synced: receipts, logs, a raw "
             "record's capture state named after it): delete or edit it by hand",
    "other": "in a file osk does not manage: edit it by hand",
}


def remaining(vault: Vault, span: str, done: str | None = None) -> tuple[Remaining, ...]:
    """Every place under the vault that still holds ``span``: file and folder names, and the
    bytes of every file (``.git/`` aside: history is the purge's). ``done`` is the file just
    redacted: what it still holds is outside what a redaction rewrites. Read-only."""
    needle = span.encode("utf-8")
    found: list[Remaining] = []
    root = vault.root
    for folder, dirs, files in os.walk(root):
        base = Path(folder).relative_to(root).as_posix()
        if base == ".":
            dirs[:] = [d for d in dirs if d != ".git"]
            base = ""
        dirs.sort()
        for name in sorted(dirs) + sorted(files):
            if span in name:
                rel = f"{base}/{name}".lstrip("/")
                found.append(Remaining(rel, None, "state" if rel.startswith(".osk/") else "name"))
        for name in sorted(files):
            rel = f"{base}/{name}".lstrip("/")
            line = _line_holding(Path(folder) / name, needle)
            if line is not None:
                place = "header" if rel == done and span not in rel else _place_of(rel, span)
                found.append(Remaining(rel, line, place))
    return tuple(found)


# Device-state caches of the node files (each module says: delete it and the next load reads
# every file again). A redaction deletes them all: the index keeps a text's words, not the
# text, so a byte search would miss them, and a rebuild after a rare redaction is cheap. (The
# index's snapshot and journal are an older osk's, removed on the index's next load.)
CACHES = (".osk/catalog/snapshot.json", ".osk/index/snapshot.bin", ".osk/index/journal.jsonl",
          ".osk/index/recall.sqlite", ".osk/index/recall.sqlite-wal",
          ".osk/index/recall.sqlite-shm", ".osk/index/rounds.sqlite",
          ".osk/index/rounds.sqlite-wal", ".osk/index/rounds.sqlite-shm")


def drop_caches(vault: Vault) -> tuple[str, ...]:
    """Delete the caches of the node files; they are rebuilt from the vault when next read."""
    dropped = []
    for rel in CACHES:
        path = vault.root / rel
        if path.exists():
            path.unlink(missing_ok=True)
            dropped.append(rel)
    return tuple(dropped)


def _line_holding(path: Path, needle: bytes) -> int | None:
    try:
        data = path.read_bytes()
    except OSError:  # a socket, a file gone meanwhile: nothing to read
        return None
    at = data.find(needle)
    return None if at < 0 else data.count(b"\n", 0, at) + 1


def _place_of(rel: str, span: str) -> str:
    if span in rel:  # a record's front matter repeats the id its name was made from
        return "name"
    top = rel.split("/", 1)[0]
    return {"_ledger": "ledger", "_raw": "raw", "_objects": "object", ".osk": "state"}.get(
        top, "node" if rel.endswith(".md") else "other")


def purge_instructions(vault: Vault, where: str) -> str:
    """How to remove the old bytes from Git history: printed, never run."""
    return (
        f"The old bytes are still in Git history ({where}: every commit that synced it, "
        f"on every device and remote). osk never rewrites history itself. To purge them, on one "
        f"device with every other device synced and stopped:\n"
        f"  1. pip install git-filter-repo; cd {vault.root}\n"
        f"  2. with an editor (not echo: shell history would keep it), write one line to "
        f"/tmp/osk-redact.txt: the exact text, then ==>[REDACTED:by-person]\n"
        f"  3. git filter-repo --replace-text /tmp/osk-redact.txt --force, then delete that "
        f"file\n"
        f"  4. git push --force to the remote (git filter-repo removes the origin remote: add it "
        f"back with git remote add origin URL)\n"
        f"  5. on every other device: move its vault aside and clone the rewritten remote afresh "
        f"(a device that syncs its old clone brings the old commits back)\n"
        f"Any other copy (a fork, a backup, the host's own transcript files) keeps the text: "
        f"rotate the secret as well."
    )


__all__ = ["KIND", "LEDGER", "WHY_LEFT", "NodeOutcome", "NodeTarget", "Outcome", "Remaining",
           "Target", "parse", "preview", "purge_instructions", "redact", "remaining"]
