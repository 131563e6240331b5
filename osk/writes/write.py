"""The write path: the one place where node write rules live.

Every create, update and re-citation runs here (a move in ``osk.writes.moves``), under the
vault's one mutation lock, with the catalog made fresh inside the lock so another
process's write is seen (``osk.store.freshness``: a folder check on every write, a full
re-stat at most once a second, and a re-read of every file the write depends on). Each
rule is checked before anything is written; a refusal raises an ``OskError`` whose
``rule`` names the rule, and leaves the vault, its ledgers and the object store exactly
as they were. Where a node goes is ``osk.writes.placement``, what it may cite
``osk.writes.citations``, the recheck gate ``osk.writes.recheck_gate``.

Rules enforced here (each error class names its rule):

- titles are portable file names, unique vault-wide after NFC and case folding (TitleError);
- a node lands in a Space and a cluster folder; a Scope node lands in the session's scope, and
  a session bound to scope A cannot create, update or move nodes of scope B (PlacementError,
  ScopeError);
- a cluster's hub (the node titled like the cluster folder) exists before its first other
  node, and a move may not leave a cluster without its hub (HubMissing);
- citation topology (EdgeError): a Scope-A node cannot cite scope B's nodes or raw rounds; a
  Domain node cannot cite raw rounds directly; no node cites Workbench work state; node and raw
  targets must exist, file targets resolve inside the session's repository;
- a full body replacement names the file hash it replaces (StaleHash); an edit's ``old_text``
  occurs exactly once (AnchorError);
- the recheck cascade stop (CascadeStop, governance/ledgers.md rule 6): an agent may not change
  the content of a node that cites a node still awaiting recheck, nor of a node whose cited
  target's current body itself came from a recheck correction (it may re-cite it unchanged);
  and (RecheckUnread) a correction or re-citation names only target states this session has
  read.

The person's authority (protected regions, tombstones, trust, validity, audit) is enforced by
``osk.authority.protection``, ``osk.authority.tombstones``, ``osk.authority.trust``,
``osk.authority.validity`` and ``osk.authority.audit``; this module calls them at the points marked
``AUTHORITY``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace

from osk.authority import audit, mutation, protection, tombstones, trust, validity
from osk.calls.context import WriteContext
from osk.calls.request import NewNode, NodeEdit
from osk.capture import secrets
from osk.errors import (
    AnchorError,
    DiskError,
    EdgeError,
    LedgerError,
    NodeNotFound,
    OskError,
    RecheckError,
    StaleHash,
)
from osk.provenance.pairs import Candidate
from osk.provenance.rechecks import Planned
from osk.provenance.sessions import bind_line
from osk.store import clock, ids, sources
from osk.store import node as node_mod
from osk.store.catalog import Changes
from osk.store.contract import Frontmatter, validate_meta
from osk.store.edges import NodeTarget, parse_target, written
from osk.store.fsutil import sha256_text
from osk.store.locks import LockTimeout
from osk.store.node import Node
from osk.store.titles import check_portable
from osk.store.vault import SCOPE, disk_error
from osk.writes.citations import Resolved, edge_of, resolve_edges
from osk.writes.placement import (
    Place,
    Spot,
    check_hub,
    check_title_free,
    check_writable_node,
    generated_hub_summary,
    hub_body,
    hub_needed,
    node_for_write,
    resolve_place,
    spot_of,
)
from osk.writes.recheck_gate import freshen_citations, recheck_gate, unread_refusal


# -- results -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class WriteResult:
    action: str  # created | updated | unchanged | recited
    id: str
    title: str
    path: str
    hash: str  # the file hash: pass it as expect_hash to replace the whole body
    scope: str  # the session's active scope
    bound: bool  # the session key is bound to a scope
    bound_now: bool  # this call bound it
    trust: str | None
    closed: tuple[str, ...] = ()  # recheck candidates this call closed
    superseded: str | None = None  # the node whose validity this write closed
    pending: bool = False  # inside a protected region: the change waits for the person
    redactions: tuple[Redaction, ...] = ()  # what the secret filter removed from this write
    hub: str | None = None  # create: the cluster hub this call wrote first (its path)
    owed: str | None = None  # landed, but the disk refused bookkeeping osk finishes later


@dataclass(frozen=True)
class Redaction:
    kind: str
    count: int


@dataclass(frozen=True)
class Moved:
    id: str
    title: str
    before: str
    after: str


@dataclass(frozen=True)
class MoveResult:
    scope: str
    moved: tuple[Moved, ...]
    bound: bool
    bound_now: bool
    owed: str | None = None  # moved, but the disk refused bookkeeping osk finishes later


@dataclass(frozen=True)
class ReciteResult:
    scope: str
    closed: tuple[str, ...]
    nodes: tuple[str, ...]  # titles of the citing nodes re-cited


# -- the lock ------------------------------------------------------------------------------------
@contextmanager
def locked(ctx: WriteContext, *, full: bool = False) -> Iterator[None]:
    """Hold the vault mutation lock with the catalog made fresh inside it (``Freshness``;
    ``full`` stats every node file, for writes that read the whole vault, such as moves).
    Inside ``batch`` the lock is held already and the catalog fresh as of the batch's start."""
    if ctx.fresh.held:
        ctx.reload_settings()
        if full:
            ctx.keep(ctx.fresh.full())
        yield
        return
    try:
        with mutation.mutation(ctx.vault):  # readers in other processes look again
            ctx.reload_settings()
            ctx.keep(ctx.fresh.ensure(full=full))
            yield
    except LockTimeout as exc:
        raise _busy(ctx) from exc


@contextmanager
def batch(ctx: WriteContext) -> Iterator[None]:
    """Hold the mutation lock across several writes (``osk import``).

    The catalog is made fresh once, at the start: the folder check sees every other osk
    process's writes up to then, and none can write until the batch ends. Each write inside
    still checks every rule and re-reads the files it depends on (``freshen``); only the
    once-a-second full refresh, which exists for hand edits of other files (never serialised
    with osk's writes anyway), waits until after the batch. Keep batches short: other writers
    wait for the lock.
    """
    if ctx.fresh.held:
        yield
        return
    try:
        # one bump, at the end (readers look again); one journal file for every write inside,
        # the recheck store brought up to the ledger once
        with mutation.mutation(ctx.vault), audit.kept_journal(ctx.vault), \
                ctx.rechecks.store_at_end():
            ctx.reload_settings()
            ctx.keep(ctx.fresh.quick() if ctx.fresh.looked_fully else ctx.fresh.full())
            ctx.fresh.held = True
            try:
                yield
            finally:
                ctx.fresh.held = False
    except LockTimeout as exc:
        raise _busy(ctx) from exc


def _busy(ctx: WriteContext) -> OskError:
    return OskError(
        f"the vault is busy: another osk process has held its mutation lock "
        f"({ctx.vault.mutation_lock_path()}) for too long; retry in a moment",
    )


# -- create ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Creation:
    """A node create_node has checked and rendered, not yet written."""

    node: Node
    text: str
    spot: Spot
    edges: tuple[Resolved, ...]
    closing: object  # _prepare_supersede's
    meta: Frontmatter
    redacted: tuple[tuple[str, int], ...]


def create_node(ctx: WriteContext, new: NewNode) -> WriteResult:
    """Create ``new``; in a cluster that has no hub yet, its hub first, in the same call (from
    ``new.hub_summary``, else a generated one the person can edit). Every check of both runs
    before either is written."""
    secrets.check_title(new.title)  # before any message could echo the title
    secrets.check_name("drafter", new.drafter)
    new, redacted = _filtered(new)  # outside the lock: the filter's cost holds up no writer
    with locked(ctx):
        spot = resolve_place(ctx, Place(new.space, new.cluster, new.scope))
        hub = _hub_for(ctx, spot, new)
        made = _prepare_create(ctx, new, spot, redacted, hub_planned=hub is not None)
        # ---- every check passed: nothing was written before this line ----
        hub_result = _commit_create(ctx, hub) if hub is not None else None
        try:
            result = _commit_create(ctx, made)
        except Exception as exc:
            refused = disk_error(exc)
            if hub_result is None or refused is None:
                raise
            raise DiskError(f"{refused}. The cluster's hub {hub_result.title!r} was written; "
                            f"{made.node.title!r} was not: call create_node again then",
                            **refused.facts, hub=hub_result.path) from exc
    if hub_result is None:
        return result
    return replace(result, hub=hub_result.path, bound_now=result.bound_now or hub_result.bound_now,
                   redactions=(*hub_result.redactions, *result.redactions))


def _hub_for(ctx: WriteContext, spot: Spot, new: NewNode) -> _Creation | None:
    """The hub to write before ``new``, checked and rendered; None when the cluster has one or
    ``new`` is its hub. A hub title used elsewhere in the vault is refused (HubMissing)."""
    if not hub_needed(ctx, spot, new.title):
        return None
    if ctx.catalog.paths_with_title(spot.cluster):
        check_hub(ctx, spot, new.title)  # raises, naming where the title is used
    secrets.check_title(spot.cluster)  # the folder name becomes a title
    summary = new.hub_summary or generated_hub_summary(spot)
    hub = NewNode(spot.cluster, summary, hub_body(spot, new.hub_summary), space=spot.space,
                  cluster=spot.cluster, drafter=new.drafter, scope=new.scope)
    hub, redacted = _filtered(hub)
    return _prepare_create(ctx, hub, resolve_place(ctx, Place(hub.space, hub.cluster, hub.scope)),
                           redacted, hub_planned=False)


def _filtered(new: NewNode) -> tuple[NewNode, tuple[tuple[str, int], ...]]:
    """``new`` with the secret filter run on its summary and body (before they are hashed or
    stored), and what it removed."""
    summary, body = secrets.mask_secrets(new.summary), secrets.mask_secrets(new.body)
    return (replace(new, summary=summary.text, body=body.text),
            secrets.merged_findings(summary, body))


def _prepare_create(ctx: WriteContext, new: NewNode, spot: Spot,
                    redacted: tuple[tuple[str, int], ...], *, hub_planned: bool) -> _Creation:
    title, drafter, summary, body = new.title, new.drafter, new.summary, new.body
    title = check_portable(title)
    rel = f"{spot.folder}/{title}.md"
    sources.check_body(rel, body)
    check_title_free(ctx, title, rel)
    if not hub_planned:
        check_hub(ctx, spot, title)
    edges = resolve_edges(ctx, new.derived_from, spot, field_name="derived-from")
    conflict_edges = resolve_edges(ctx, new.conflicts, spot, field_name="conflicts")
    check_ledgers(ctx)
    _authority_content_checks(ctx, title, body, rel, new.valid_from, new.valid_to)
    now = clock.now_text()
    meta = validate_meta(rel, _drop_none({
        "id": ids.uuid7(),
        "created": now,
        "updated": now,
        "author": ctx.author,
        "drafter": drafter,
        "summary": summary,
        "derived-from": [written(e.link) for e in edges],
        "conflicts": [e.link for e in conflict_edges],
        "trust": _trust(ctx, spot.space, None, new=True),
        "valid_from": new.valid_from,
        "valid_to": new.valid_to,
        "supersedes": _supersedes_link(new.supersedes),
    }))
    text = node_mod.render(meta, body)
    return _Creation(_parse_back(rel, text), text, spot, tuple(edges),
                     _prepare_supersede(ctx, meta, new.supersedes), meta, redacted)


def _commit_create(ctx: WriteContext, made: _Creation) -> WriteResult:
    planned = ctx.rechecks.plan(None, made.node, [edge_of(e) for e in made.edges], via="create")
    landed = _land(ctx, "create", made.node, made.text, None, planned, made.spot,
                   _closing(ctx, made.closing, made.meta))
    return _result(ctx, "created", made.node, landed.bound_now, superseded=landed.superseded,
                   redacted=made.redacted, owed=landed.owed)


@dataclass(frozen=True)
class _Landed:
    bound_now: bool
    superseded: str | None
    owed: str | None


def _land(ctx: WriteContext, action: str, node: Node, text: str, before: Node | None,
          planned: Planned | None, spot: Spot, closing: validity.Closing | None) -> _Landed:
    """Write ``node`` and what it owes (its recheck pairs, the session's binding, a superseded
    node's closing, the audit records) as one unit: all of it is journalled first
    (``audit.intend``), then the node file, the unit's commit. A failure before the file
    landed takes the journal back and fails the call with nothing written; a disk that refuses
    what follows is answered with success and ``owed``, and the journal has the rest written
    by the next osk process to take the vault's lock (opening the vault does)."""
    changes = [audit_change(ctx, action, node, before_text=None if before is None else before.text,
                            after_text=text)]
    closes = closing is not None and closing.after_text is not None
    if closing is not None and closes:
        changes.append(validity.closing_change(closing, ctx.audit_actor, node.id, node.title,
                                               redo=True))
    follow = [*([audit.Follow(*planned.line())] if planned is not None else []),
              *owed_binding(ctx, spot)]
    intent = audit.intend(ctx.vault, changes, follow)
    try:
        ctx.vault.write_file(ctx.vault.abs(node.path), text)
    except BaseException:
        if not intent.landed():
            intent.abandon()
            raise
    if before is None:
        ctx.note(added=[node.path], written=node)
    else:
        ctx.note(changed=[node.path], written=node)
    # ---- the unit landed: what follows is journalled, so a refusal now leaves it owed ----
    bound: list[bool] = []

    def follows() -> None:
        if planned is not None:
            ctx.rechecks.record(planned)
        bound.append(bind_if_first(ctx, spot))
        if closing is not None and closing.after_text is not None:
            ctx.vault.write_file(ctx.vault.abs(closing.path), closing.after_text)
            ctx.catalog.note_written(closing.path)
            ctx.seen.append(Changes(changed=(closing.path,)))
        intent.record()

    owed = finish_landed(f"{node.title!r} was written", follows)
    bound_now = bool(bound and bound[0])
    return _Landed(bound_now, None if closing is None else closing.title, owed)


def finish_landed(landed: str, follows: Callable[[], None]) -> str | None:
    """Run what a landed unit owes after its commit point (its journal holds all of it): a
    disk that refuses any of it is answered with the ``owed`` text (``landed`` says what is on
    disk), not an error, since the next osk process to take the lock finishes it."""
    try:
        follows()
    except Exception as exc:
        refused = disk_error(exc)
        if refused is None:
            raise
        where = refused.facts.get("path") or "the vault"
        return (f"{landed}, but the disk refused what follows it ({refused.facts.get('cause')}, "
                f"at {where}): its audit record, recheck pairs and binding wait in .osk/, and "
                f"the next osk call on this vault writes them once the disk takes writes again")
    return None


def owed_binding(ctx: WriteContext, spot: Spot) -> list[audit.Follow]:
    """The session's binding as a line the unit owes (``bind_if_first``), when it binds."""
    if not _binds(ctx, spot):
        return []
    return [audit.Follow(*bind_line(ctx.session.key.key, ctx.session.scope))]


def _binds(ctx: WriteContext, spot: Spot) -> bool:
    """Whether this write binds the session key (``bind_if_first``), decided before it."""
    if spot.space != SCOPE or ctx.session.bound or ctx.session.explicit:
        return False
    return ctx.routing.scope_for(ctx.session.key.key) is None


def _closing(ctx: WriteContext, checked: object, meta: Frontmatter) -> validity.Closing | None:
    """The superseded node's close, planned under the lock as the audit actor makes it
    (``_prepare_supersede`` checked it already)."""
    if checked is None:
        return None
    return validity.prepare_close(ctx.vault, ctx.catalog, supersedes=meta.supersedes or "",
                                  start=validity.start_of(meta), new_id=meta.id,
                                  actor=ctx.audit_actor)


# -- update ------------------------------------------------------------------------------------
def update_node(ctx: WriteContext, ref: str, edit: NodeEdit) -> WriteResult:
    body, expect_hash, summary = edit.body, edit.expect_hash, edit.summary
    old_text, new_text, drafter = edit.old_text, edit.new_text, edit.drafter
    derived_from, conflicts, recheck_of = edit.derived_from, edit.conflicts, edit.recheck_of
    valid_from, valid_to, supersedes = edit.valid_from, edit.valid_to, edit.supersedes
    secrets.check_name("drafter", drafter)
    with locked(ctx):
        node = node_for_write(ctx, ref)
        # A change already waiting for the person's review was never shown to this agent
        # (readers are served the approved version), so refuse plainly now rather than with
        # an anchor or hash error against a working copy it never saw.
        _check_not_pending(ctx, node.path)
        # The secret filter runs on the body as it will be stored (an edit's new_text, and any
        # secret an older filter let through), before it is hashed, cited or written.
        filtered_body = secrets.mask_secrets(_new_body(node, body, expect_hash, old_text, new_text))
        filtered_summary = secrets.mask_secrets(summary or "")
        new_body = filtered_body.text
        sources.check_body(node.path, new_body)
        summary = None if summary is None else filtered_summary.text
        spot = spot_of(node.path)
        links = list(node.meta.derived_from) if derived_from is None else list(derived_from)
        clinks = list(node.meta.conflicts) if conflicts is None else list(conflicts)
        edges = resolve_edges(ctx, links, spot, field_name="derived-from",
                              citing_id=node.id, known=node.meta.derived_from)
        conflict_edges = resolve_edges(ctx, clinks, spot, field_name="conflicts",
                                       citing_id=node.id, known=node.meta.conflicts)
        meta_changes = _drop_none({  # links not given are kept exactly as the file has them
            "summary": summary,
            "derived-from": None if derived_from is None else [written(e.link) for e in edges],
            "conflicts": None if conflicts is None else [e.link for e in conflict_edges],
            "drafter": drafter,
            "valid_from": valid_from,
            "valid_to": valid_to,
            "supersedes": _supersedes_link(supersedes),
        })
        current = node.meta.model_dump(by_alias=True)
        content_changes = new_body != node.body or any(
            current.get(k) != v for k, v in meta_changes.items())
        corrections = recheck_gate(ctx, node, list(recheck_of), content_changes, edges)
        if not content_changes:
            if recheck_of:  # no change: the agent re-cites the named candidates unchanged
                recited = _recite_locked(ctx, list(recheck_of))
                return _result(ctx, "recited", node, False, closed=recited.closed)
            return _result(ctx, "unchanged", node, False)
        check_ledgers(ctx)
        _authority_content_checks(ctx, node.title, new_body, node.path,
                                  node.meta.valid_from if valid_from is None else valid_from,
                                  node.meta.valid_to if valid_to is None else valid_to,
                                  protected_checked=True)
        data = {**current, **meta_changes, "updated": clock.now_text(), "author": ctx.author,
                "trust": _trust(ctx, node.space, node.meta.trust_state, new=False)}
        meta = validate_meta(node.path, _drop_none(data))
        text = node_mod.render(meta, new_body)
        new = _parse_back(node.path, text)
        closing = _prepare_supersede(ctx, meta, supersedes) if supersedes else None
        # ---- every check passed: nothing was written before this line ----
        planned = ctx.rechecks.plan(node, new, [edge_of(e) for e in edges], corrected=corrections,
                                    via="update")
        landed = _land(ctx, "update", new, text, node, planned, spot,
                       _closing(ctx, closing, meta))
        closed = tuple(sorted(c for c in recheck_of))
        return _result(ctx, "updated", new, landed.bound_now, closed=closed,
                       superseded=landed.superseded, owed=landed.owed,
                       redacted=secrets.merged_findings(filtered_summary, filtered_body))


def _new_body(node: Node, body: str | None, expect_hash: str | None, old_text: str | None,
              new_text: str | None) -> str:
    if body is not None and (old_text is not None or new_text is not None):
        raise AnchorError(
            "give either body (with expect_hash) to replace the whole body, or old_text and "
            "new_text to edit one passage, not both",
        )
    if expect_hash is not None and expect_hash != node.file_hash:
        raise StaleHash(
            f"{node.title!r} changed since you read it (expected hash {expect_hash[:12]}…, "
            f"it is now {node.file_hash[:12]}…); read it again with read_node and redo the "
            f"change on the current text",
            expected=expect_hash, actual=node.file_hash, title=node.title,
        )
    if body is not None:
        if expect_hash is None:
            raise StaleHash(
                f"replacing the whole body of {node.title!r} needs expect_hash: the hash "
                f"read_node returned with a full read, so a change made since cannot be "
                f"overwritten unseen. Read the node in full, then retry with that hash",
                expected=None, actual=node.file_hash, title=node.title,
            )
        return body
    if old_text is None and new_text is None:
        return node.body
    if old_text is None or new_text is None:
        raise AnchorError("an edit needs both old_text (the passage to replace, exactly as "
                          "it appears) and new_text")
    count = _occurrences(node.body, old_text)
    if count != 1:
        what = "does not occur" if count == 0 else f"occurs {count} times"
        raise AnchorError(
            f"old_text {what} in {node.title!r}; it must occur exactly once. "
            + ("Copy it exactly from read_node" if count == 0
               else "Include more surrounding text so it is unique"),
            occurrences=count, title=node.title,
        )
    return node.body.replace(old_text, new_text, 1)


def _occurrences(text: str, needle: str) -> int:
    """Occurrences of ``needle`` in ``text``, overlapping ones included (0 for empty)."""
    if not needle:
        return 0
    count, start = 0, text.find(needle)
    while start != -1:
        count += 1
        start = text.find(needle, start + 1)
    return count


# -- rechecks ------------------------------------------------------------------------------------
def recite(ctx: WriteContext, candidate_ids: Sequence[str]) -> ReciteResult:
    """Close candidates by re-citing their targets unchanged, at the states this session read."""
    with locked(ctx):
        return _recite_locked(ctx, list(candidate_ids))


def _recite_locked(ctx: WriteContext, candidate_ids: list[str]) -> ReciteResult:
    candidates = {c.id: c for c in ctx.rechecks.candidates(ctx.catalog)}
    named = [candidates[cid].citing_id for cid in candidate_ids if cid in candidates]
    if named:  # a re-citation records the target states as they are now: re-read first
        freshen_citations(ctx, named, hops=1)
        candidates = {c.id: c for c in ctx.rechecks.candidates(ctx.catalog)}
    unknown = [cid for cid in candidate_ids if cid not in candidates]
    if unknown:
        raise RecheckError(
            f"{', '.join(unknown)}: no open recheck candidate with that id (it may be closed "
            f"already); call overview for the current list",
            unknown=unknown,
        )
    chosen = [candidates[cid] for cid in dict.fromkeys(candidate_ids)]
    by_node: dict[str, dict[str, str]] = {}
    unread: list[Candidate] = []
    for cand in chosen:
        citing = node_for_write(ctx, cand.citing_id)
        if cand.current_hash is None:
            raise RecheckError(
                f"{cand.target} no longer exists, so {cand.citing_title!r} cannot re-cite it "
                f"unchanged; remove the citation or cite another source (update_node)",
                candidate=cand.id,
            )
        if not ctx.reads.has_read(cand.target_key, cand.current_hash):
            unread.append(cand)
            continue
        by_node.setdefault(citing.id, {})[cand.target_key] = cand.current_hash
    if unread:
        raise unread_refusal(unread)
    check_ledgers(ctx)
    titles = []
    for node_id, readings in by_node.items():
        citing = ctx.catalog.get(node_id)
        ctx.rechecks.recite(citing, readings)
        titles.append(citing.title)
    return ReciteResult(ctx.session.scope, tuple(c.id for c in chosen), tuple(sorted(titles)))


# -- ledgers, binding, authority -------------------------------------------------------------------
def check_ledgers(ctx: WriteContext) -> None:
    """Refuse now, before a node is written, if a ledger this write appends to is damaged or
    the session's binding is forked (LedgerError / LedgerFork name the line or the records)."""
    # A damaged line in the audit ledger (history) is left out and blocks nothing; these two
    # decide every write, and which subject a damaged line was about cannot be known.
    for check, decides in ((lambda: ctx.routing.scope_for(ctx.session.key.key),
                            "which scope each session writes to"),
                           (ctx.rechecks.check_readable, "what every write's citations owe")):
        try:
            check()
        except LedgerError as exc:
            raise LedgerError(
                f"{exc}. That ledger decides {decides}, and which one the damaged line was "
                f"about cannot be read, so writes wait until a person repairs it (restore the "
                f"line from Git history: docs/FORMAT.md, Ledgers)", **exc.facts) from exc
    ctx.ledger("audit").tip()  # refuses an audit ledger out of the vault; keeps no record


def bind_if_first(ctx: WriteContext, spot: Spot) -> bool:
    """Bind the session key to its scope on its first successful write into a Scope.

    A session opened with an explicit scope (``--scope``) acts for that scope without
    touching the routing ledger: the override is the caller's, not the project's.
    """
    if spot.space != SCOPE or ctx.session.bound or ctx.session.explicit:
        return False
    made = ctx.routing.bind(ctx.session.key.key, ctx.session.scope)
    ctx.session = replace(ctx.session, bound=True)
    return made


def _authority_content_checks(ctx: WriteContext, title: str, body: str, rel: str,
                              valid_from: str | None, valid_to: str | None, *,
                              protected_checked: bool = False) -> None:
    tombstones.check(ctx.vault, title, body)  # AUTHORITY: a rejected claim is not written again
    if not protected_checked:
        _check_not_pending(ctx, rel)
    validity.check_interval(valid_from, valid_to)  # AUTHORITY: valid_from <= valid_to


def _check_not_pending(ctx: WriteContext, rel: str) -> None:
    protection.check_writable(ctx.vault, rel)  # AUTHORITY: one pending change per protected file


def _is_pending(ctx: WriteContext, rel: str) -> bool:
    """Whether ``rel`` now waits for the person's review (a write inside a protected region)."""
    return protection.is_pending(ctx.vault, rel)


def _trust(ctx: WriteContext, space: str | None, current: str | None, *, new: bool) -> str | None:
    # AUTHORITY: the trust state an agent's or person's write gets
    if new:
        return str(trust.trust_for_new(space, ctx.actor))
    return str(trust.trust_for_update(space, ctx.actor, current))


def _prepare_supersede(ctx: WriteContext, meta: Frontmatter, supersedes: str | None) -> object:
    link = _supersedes_link(supersedes)
    if link is None:
        return None
    # AUTHORITY: supersession closes the old node's validity
    closing = validity.prepare_close(ctx.vault, ctx.catalog, supersedes=link,
                                     start=validity.start_of(meta), new_id=meta.id,
                                     actor=ctx.actor)
    old = ctx.catalog.by_path(closing.path)
    if old is not None:
        if not ctx.session.can_see_scope(old.scope):
            raise NodeNotFound(f"supersedes names {supersedes!r}, which is not a node this "
                               f"session can see", ref=supersedes)
        check_writable_node(ctx, old)
    return closing


def audit_change(ctx: WriteContext, action: str, node: Node, *, before_text: str | None,
                 after_text: str | None, path: str | None = None,
                 detail: dict[str, object] | None = None) -> audit.Change:
    """One audit record; ``path`` is where the node is after the change (a move's target)."""
    # AUTHORITY: one audit record per node mutation
    info = {"session": ctx.session.key.key, "drafter": node.meta.drafter, **(detail or {})}
    return audit.Change(ctx.audit_actor, action, node.id, path or node.path, before_text,
                        after_text, info)


# -- small helpers ---------------------------------------------------------------------------------
def _drop_none(data: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in data.items() if v is not None}


def _supersedes_link(value: str | None) -> str | None:
    if not value:
        return None
    target = parse_target(value)
    if not isinstance(target, NodeTarget):
        raise EdgeError(f"supersedes names a node ([[Title]]), not {value!r}", link=value)
    return target.link


def _parse_back(rel: str, text: str) -> Node:
    """The node exactly as a reader will parse it: the contract is checked on what is written."""
    return node_mod.parse(rel, text)


def _result(ctx: WriteContext, action: str, node: Node, bound_now: bool, *,
            closed: tuple[str, ...] = (), superseded: str | None = None,
            redacted: tuple[tuple[str, int], ...] = (), owed: str | None = None) -> WriteResult:
    return WriteResult(action, node.id, node.title, node.path, sha256_text(node.text),
                       ctx.session.scope, ctx.session.bound, bound_now, node.meta.trust_state,
                       closed, superseded, _is_pending(ctx, node.path),
                       tuple(Redaction(kind, count) for kind, count in redacted), owed=owed)


__all__ = [
    "MoveResult",
    "Moved",
    "ReciteResult",
    "WriteContext",
    "WriteResult",
    "create_node",
    "recite",
    "update_node",
]
