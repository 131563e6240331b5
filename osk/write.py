"""The write path: the one place where node write rules live.

Every create, update, re-citation and move runs here, under the vault's one mutation lock, with
the catalog made fresh inside the lock so another process's write is seen (``osk.store.freshness``:
a folder check on every write, a full re-stat at most once a second, and a re-read of every file
the write depends on). Each rule is checked before anything is written; a refusal raises an
``OskError`` whose ``rule`` names the rule, and leaves the vault, its ledgers and the object
store exactly as they were.

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

import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from osk.authority import audit, mutation, protection, tombstones, trust, validity
from osk.capture import secrets
from osk.context import USER, WriteContext
from osk.errors import (
    AnchorError,
    CascadeStop,
    EdgeError,
    HubMissing,
    NodeNotFound,
    OskError,
    PlacementError,
    RecheckError,
    RecheckUnread,
    ScopeError,
    StaleHash,
    TitleError,
)
from osk.provenance.rechecks import Candidate, Edge, TargetRef, link_identity
from osk.request import NewNode, NodeEdit
from osk.store import clock, ids, sources
from osk.store import node as node_mod
from osk.store.catalog import Changes
from osk.store.contract import Frontmatter, validate_meta
from osk.store.edges import FileTarget, NodeTarget, RawTarget, Target, parse_target
from osk.store.fsutil import fsync_dir, sha256_bytes, sha256_text
from osk.store.locks import LockTimeout
from osk.store.node import Node
from osk.store.titles import check_portable, title_key
from osk.store.vault import DOMAIN, SCOPE, SPACES, WORKBENCH, Vault, scope_of

_SPACE_NAMES = {s.lower(): s for s in SPACES}


# -- results -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Place:
    """Where a node goes: a Space and a cluster folder (``auth`` or ``auth/tokens``).

    A Scope node's scope is the session's; ``scope`` may repeat it but not name another.
    """

    space: str
    cluster: str
    scope: str | None = None


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


@dataclass(frozen=True)
class ReciteResult:
    scope: str
    closed: tuple[str, ...]
    nodes: tuple[str, ...]  # titles of the citing nodes re-cited


@dataclass(frozen=True)
class Spot:
    """A resolved place: the folder a node goes in and the cluster it belongs to."""

    space: str
    scope: str | None
    cluster: str
    folder: str
    cluster_root: str


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
        with mutation.mutation(ctx.vault):  # one bump, at the end: readers look again
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
def create_node(ctx: WriteContext, new: NewNode) -> WriteResult:
    title, summary, body, drafter = new.title, new.summary, new.body, new.drafter
    place = Place(new.space, new.cluster, new.scope)
    derived_from, conflicts = new.derived_from, new.conflicts
    valid_from, valid_to, supersedes = new.valid_from, new.valid_to, new.supersedes
    secrets.check_title(title)  # before any message could echo the title
    filtered_summary, filtered_body = secrets.redact(summary), secrets.redact(body)
    summary, body = filtered_summary.text, filtered_body.text  # redacted before hashed or stored
    with locked(ctx):
        title = check_portable(title)
        spot = resolve_place(ctx, place)
        rel = f"{spot.folder}/{title}.md"
        sources.check_body(rel, body)
        check_title_free(ctx, title, rel)
        check_hub(ctx, spot, title)
        edges = resolve_edges(ctx, derived_from, spot, field_name="derived-from")
        conflict_edges = resolve_edges(ctx, conflicts, spot, field_name="conflicts")
        check_ledgers(ctx)
        _authority_content_checks(ctx, title, body, rel, valid_from, valid_to)
        now = clock.now_text()
        meta = validate_meta(rel, _drop_none({
            "id": ids.uuid7(),
            "created": now,
            "updated": now,
            "author": ctx.author,
            "drafter": drafter,
            "summary": summary,
            "derived-from": [e.link for e in edges],
            "conflicts": [e.link for e in conflict_edges],
            "trust": _trust(ctx, spot.space, None, new=True),
            "valid_from": valid_from,
            "valid_to": valid_to,
            "supersedes": _supersedes_link(supersedes),
        }))
        text = node_mod.render(meta, body, _file_roots(edges))
        new = _parse_back(rel, text)
        closing = _prepare_supersede(ctx, meta, supersedes)
        # ---- every check passed: nothing was written before this line ----
        intent = _intend(ctx, "create", new, before_text=None, after_text=text)
        ctx.vault.write_file(ctx.vault.abs(rel), text)
        ctx.note(added=[rel])
        ctx.rechecks.after_write(None, new, [_edge(e) for e in edges], via="create")
        bound_now = bind_if_first(ctx, spot)
        intent.record()
        superseded = _close_supersede(ctx, closing, meta, new)
        return _result(ctx, "created", new, bound_now, superseded=superseded,
                       redacted=secrets.merged_findings(filtered_summary, filtered_body))


# -- update ------------------------------------------------------------------------------------
def update_node(ctx: WriteContext, ref: str, edit: NodeEdit) -> WriteResult:
    body, expect_hash, summary = edit.body, edit.expect_hash, edit.summary
    old_text, new_text, drafter = edit.old_text, edit.new_text, edit.drafter
    derived_from, conflicts, recheck_of = edit.derived_from, edit.conflicts, edit.recheck_of
    valid_from, valid_to, supersedes = edit.valid_from, edit.valid_to, edit.supersedes
    with locked(ctx):
        node = node_for_write(ctx, ref)
        # A change already waiting for the person's review was never shown to this agent
        # (readers are served the approved version), so refuse plainly now rather than with
        # an anchor or hash error against a working copy it never saw.
        _check_not_pending(ctx, node.path)
        # The secret filter runs on the body as it will be stored (an edit's new_text, and any
        # secret an older filter let through), before it is hashed, cited or written.
        filtered_body = secrets.redact(_new_body(node, body, expect_hash, old_text, new_text))
        filtered_summary = secrets.redact(summary or "")
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
            "derived-from": None if derived_from is None else [e.link for e in edges],
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
                                  meta_changes.get("valid_from", node.meta.valid_from),
                                  meta_changes.get("valid_to", node.meta.valid_to),
                                  protected_checked=True)
        data = {**current, **meta_changes, "updated": clock.now_text(), "author": ctx.author,
                "trust": _trust(ctx, node.space, node.meta.trust_state, new=False)}
        meta = validate_meta(node.path, _drop_none(data))
        text = node_mod.render(meta, new_body, _file_roots(edges))
        new = _parse_back(node.path, text)
        closing = _prepare_supersede(ctx, meta, supersedes) if supersedes else None
        # ---- every check passed: nothing was written before this line ----
        intent = _intend(ctx, "update", new, before_text=node.text, after_text=text)
        ctx.vault.write_file(ctx.vault.abs(node.path), text)
        ctx.note(changed=[node.path])
        ctx.rechecks.after_write(node, new, [_edge(e) for e in edges], corrected=corrections,
                                 via="update")
        bound_now = bind_if_first(ctx, spot)
        intent.record()
        superseded = _close_supersede(ctx, closing, meta, new)
        closed = tuple(sorted(c for c in recheck_of))
        return _result(ctx, "updated", new, bound_now, closed=closed, superseded=superseded,
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
def recheck_gate(ctx: WriteContext, node: Node, recheck_of: list[str], changes_content: bool,
                 edges: Sequence[Resolved]) -> dict[str, str]:
    """Apply the cascade stop and the read-before-recite rule; return the corrections.

    The returned mapping (target key -> the target state the session read) is what a
    correction binds to. Refuses before anything is written.
    """
    if not recheck_of and not changes_content:
        return {}
    freshen_citations(ctx, [node.id], hops=2)
    candidates = ctx.rechecks.candidates(ctx.catalog)
    mine = {c.id: c for c in candidates if c.citing_id == node.id}
    unknown = [cid for cid in recheck_of if cid not in mine]
    if unknown:
        listing = ", ".join(f"{c.id} ({c.target})" for c in mine.values()) or "none"
        raise RecheckError(
            f"{', '.join(unknown)} is not an open recheck candidate of {node.title!r} (its open "
            f"candidates: {listing}); call overview for the current list",
            unknown=unknown, title=node.title,
        )
    if changes_content and ctx.actor != USER:
        _cascade_stop(node, candidates, mine)
    kept_keys = {e.target.key for e in edges if e.target is not None}
    kept_links = {link_identity(e.link) for e in edges}
    corrections: dict[str, str] = {}
    unread: list[Candidate] = []
    for cid in recheck_of:
        cand = mine[cid]
        if cand.target_key not in kept_keys and link_identity(cand.target) not in kept_links:
            continue  # corrected by dropping the citation: nothing to bind
        if cand.current_hash is None:
            raise RecheckError(
                f"{cand.target} no longer exists, so {node.title!r} cannot keep citing it; "
                f"remove the citation (derived_from without it) or cite another source",
                candidate=cid,
            )
        if ctx.reads.has_read(cand.target_key, cand.current_hash):
            corrections[cand.target_key] = cand.current_hash
        else:
            unread.append(cand)
    if unread:
        raise _unread(unread)
    return corrections


def freshen_citations(ctx: WriteContext, citing_ids: Iterable[str], *, hops: int) -> None:
    """Re-read the node files a recheck decision about ``citing_ids`` reads, if they changed:
    the citing nodes, the nodes they cite and, with ``hops=2``, the nodes those cite (a
    cited node's own candidates decide the cascade stop). Raw records and project files are
    stat-ed by ``Rechecks.candidates`` itself."""
    wanted = set(citing_ids)
    frontier = set(wanted)
    for _ in range(hops):
        step: set[str] = set()
        for node_id in frontier:
            citations = ctx.rechecks.citations(node_id)
            for pair in citations.pairs.values() if citations else ():
                if pair.target.kind == "node":
                    step.add(pair.target.key[len("node:"):])
        frontier = step - wanted
        wanted |= step
    paths = []
    for node_id in sorted(wanted):
        try:
            paths.append(ctx.catalog.get(node_id).path)
        except OskError:
            continue  # gone or ambiguous: the candidates say so
    ctx.freshen(paths)


def _cascade_stop(node: Node, candidates: Sequence[Candidate],
                  mine: dict[str, Candidate]) -> None:
    upstream = [c for c in candidates if node.id in c.next_ids]
    if upstream:
        first = upstream[0]
        raise CascadeStop(
            f"{node.title!r} cites {first.citing_title!r}, which itself awaits recheck "
            f"(candidate {first.id}: its source {first.target} changed). Resolve "
            f"{first.citing_title!r} first; a change here would run ahead of it. If "
            f"{node.title!r} must change anyway, ask the person to edit it",
            candidates=[c.id for c in upstream], title=node.title,
        )
    cascading = [c for c in mine.values() if c.cascade]
    if cascading:
        first = cascading[0]
        raise CascadeStop(
            f"{node.title!r} cites {first.target}, whose current text is itself a recheck "
            f"correction (candidate {first.id}, cascade). Corrections do not cascade "
            f"automatically: re-cite it unchanged if {node.title!r} still holds "
            f"(update_node with recheck_of and no changes), otherwise ask the person to review",
            candidates=[c.id for c in cascading], title=node.title,
        )


def _unread(unread: Sequence[Candidate]) -> RecheckUnread:
    listing = "; ".join(f"{c.id}: {c.target}" for c in unread)
    return RecheckUnread(
        f"recheck_unread: this session has not read the current state of {listing}. Read it "
        f"in full (read_node for a node, read_raw for a raw round or a file:PATH), then retry; "
        f"a re-citation records only what was actually read",
        candidates=[c.id for c in unread], code="recheck_unread",
    )


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
        raise _unread(unread)
    check_ledgers(ctx)
    titles = []
    for node_id, readings in by_node.items():
        citing = ctx.catalog.get(node_id)
        ctx.rechecks.recite(citing, readings)
        titles.append(citing.title)
    return ReciteResult(ctx.session.scope, tuple(c.id for c in chosen), tuple(sorted(titles)))


# -- moves ---------------------------------------------------------------------------------------
def move_nodes(ctx: WriteContext, refs: Sequence[str], place: Place) -> MoveResult:
    """Move nodes to another folder. Titles do not change, so every ``[[Title]]`` link still
    finds its node; ledgers name nodes by id, so citations and candidates follow too."""
    with locked(ctx, full=True):  # the topology check reads every node's citations
        spot = resolve_place(ctx, place)
        plan: dict[str, tuple[Node, str]] = {}
        for ref in refs:
            node = node_for_write(ctx, ref)
            target = f"{spot.folder}/{node.title}.md"
            if target != node.path:
                plan[node.id] = (node, target)
        if not refs:
            raise PlacementError("name at least one node to move")
        _check_move_targets(ctx, plan)
        final = _final_paths(ctx, plan)
        _check_move_hubs(ctx, plan, final)
        _check_move_topology(ctx, plan, final)
        check_ledgers(ctx)
        _check_protected_moves(ctx, plan)
        # ---- every check passed: nothing was written before this line ----
        intent = _intend_moves(ctx, plan)
        done: list[tuple[str, str]] = []
        try:
            for node, target in plan.values():
                _rename(ctx.vault, node.path, target)
                done.append((node.path, target))
        except OSError:
            for source, target in reversed(done):
                _rename(ctx.vault, target, source)
            raise
        for node, _ in plan.values():
            _prune_empty(ctx.vault, PurePosixPath(node.path).parent)
        return _after_move(ctx, plan, spot, intent)


def move_cluster(ctx: WriteContext, cluster: str, *, space: str, to_space: str) -> MoveResult:
    """Move a whole cluster folder (hub, nodes, attachments) to another Space, keeping its name.

    Scope clusters move from and to the session's scope.
    """
    with locked(ctx, full=True):  # the topology check reads every node's citations
        name = check_portable(cluster)
        source = resolve_place(ctx, Place(space, name))
        target = resolve_place(ctx, Place(to_space, name))
        if source.cluster_root == target.cluster_root:
            raise PlacementError(f"cluster {name!r} is already in {source.cluster_root}")
        source_dir = ctx.vault.abs(source.cluster_root)
        if not source_dir.is_dir():
            raise PlacementError(
                f"there is no cluster folder {source.cluster_root}; overview lists the clusters",
                path=source.cluster_root,
            )
        if ctx.vault.abs(target.cluster_root).exists():
            raise PlacementError(
                f"{target.cluster_root} already exists; a cluster moves only to a free place",
                path=target.cluster_root,
            )
        prefix = source.cluster_root + "/"
        plan = {node.id: (node, target.cluster_root + "/" + node.path[len(prefix):])
                for node in ctx.catalog.nodes() if node.path.startswith(prefix)}
        for node, _ in plan.values():
            check_writable_node(ctx, node)
        final = _final_paths(ctx, plan)
        _check_move_topology(ctx, plan, final)
        check_ledgers(ctx)
        _check_protected_moves(ctx, plan)
        # ---- every check passed: nothing was written before this line ----
        intent = _intend_moves(ctx, plan)
        others = [rel for rel in ctx.catalog.entries if rel.startswith(prefix)
                  and all(rel != n.path for n, _ in plan.values())]
        destination = ctx.vault.abs(target.cluster_root)
        destination.parent.mkdir(parents=True, exist_ok=True)
        os.rename(source_dir, destination)
        fsync_dir(source_dir.parent)
        fsync_dir(destination.parent)
        for rel in others:  # unreadable node files move with their folder
            ctx.note(added=[target.cluster_root + "/" + rel[len(prefix):]], removed=[rel])
        return _after_move(ctx, plan, target, intent)


def _intend_moves(ctx: WriteContext, plan: dict[str, tuple[Node, str]]) -> audit.Intent:
    return audit.intend(ctx.vault, [
        _change(ctx, "move", node, before_text=node.text, after_text=node.text, path=target,
                detail={"from": node.path, "to": target})
        for node, target in plan.values()])


def _after_move(ctx: WriteContext, plan: dict[str, tuple[Node, str]], spot: Spot,
                intent: audit.Intent) -> MoveResult:
    moved = []
    for node, target in plan.values():
        ctx.note(added=[target], removed=[node.path])
        moved.append(Moved(node.id, node.title, node.path, target))
    intent.record()
    bound_now = bind_if_first(ctx, spot) if plan else False
    return MoveResult(ctx.session.scope, tuple(moved), ctx.session.bound, bound_now)


def _check_move_targets(ctx: WriteContext, plan: dict[str, tuple[Node, str]]) -> None:
    for node, target in plan.values():
        if ctx.vault.abs(target).exists():
            raise PlacementError(
                f"cannot move {node.title!r} to {target}: a file is already there",
                path=target,
            )


def _check_protected_moves(ctx: WriteContext, plan: dict[str, tuple[Node, str]]) -> None:
    # AUTHORITY: moves in or out of protected regions
    for node, target in plan.values():
        protection.check_move(ctx.vault, node.path, target)


def _final_paths(ctx: WriteContext, plan: dict[str, tuple[Node, str]]) -> dict[str, str]:
    final = {n.id: n.path for n in ctx.catalog.nodes()}
    final.update({node_id: target for node_id, (_, target) in plan.items()})
    return final


def _check_move_hubs(ctx: WriteContext, plan: dict[str, tuple[Node, str]],
                     final: dict[str, str]) -> None:
    titles = {n.id: n.title for n in ctx.catalog.nodes()}
    by_root: dict[str, list[str]] = {}
    for node_id, rel in final.items():
        root = cluster_root(rel)
        if root is not None:
            by_root.setdefault(root, []).append(node_id)
    touched = {cluster_root(t) for _, t in plan.values()}
    touched |= {cluster_root(n.path) for n, _ in plan.values()}
    for root in sorted(r for r in touched if r is not None):
        members = by_root.get(root, [])
        if not members:
            continue
        hub_name = PurePosixPath(root).name
        if any(title_key(titles[m]) == title_key(hub_name) for m in members):
            continue
        had_hub = any(title_key(n.title) == title_key(hub_name) and cluster_root(n.path) == root
                      for n in ctx.catalog.nodes())
        arriving = [plan[m][0].title for m in members if m in plan]
        if had_hub:
            raise HubMissing(
                f"this move takes hub {hub_name!r} out of {root} while other nodes stay; move "
                f"the whole cluster with move_cluster, or move the other nodes first",
                cluster=root,
            )
        if arriving:
            raise HubMissing(
                f"{root} has no hub (a node titled {hub_name!r}); create it before moving "
                f"{', '.join(repr(t) for t in arriving)} there",
                cluster=root,
            )


def _check_move_topology(ctx: WriteContext, plan: dict[str, tuple[Node, str]],
                         final: dict[str, str]) -> None:
    """Every citation from or to a moved node must still be allowed where the nodes end up."""
    by_title = {title_key(n.title): n for n in ctx.catalog.nodes()}
    moved_keys = {title_key(n.title) for n, _ in plan.values()}
    for citing in ctx.catalog.nodes():
        citing_moved = citing.id in plan
        for link in (*citing.meta.derived_from, *citing.meta.conflicts):
            try:
                target = parse_target(link)
            except OskError:
                continue
            if isinstance(target, NodeTarget):
                cited = by_title.get(title_key(target.title))
                if cited is None or not (citing_moved or title_key(target.title) in moved_keys):
                    continue
                check_topology(_where(final[citing.id]), "node", _where(final[cited.id]),
                               citing=citing.title, link=link, moving=True)
            elif isinstance(target, RawTarget) and citing_moved:
                raw_scope = ctx.routing.scope_for(target.key)
                check_topology(_where(final[citing.id]), "raw", (None, raw_scope),
                               citing=citing.title, link=link, moving=True)


def _rename(vault: Vault, source: str, target: str) -> None:
    destination = vault.abs(target)
    destination.parent.mkdir(parents=True, exist_ok=True)
    os.rename(vault.abs(source), destination)
    fsync_dir(destination.parent)
    fsync_dir(vault.abs(source).parent)


def _prune_empty(vault: Vault, folder: PurePosixPath) -> None:
    """Remove folders a move emptied, up to (not including) the Space or scope folder."""
    parts = folder.parts
    floor = 2 if parts[:1] == (SCOPE,) else 1
    while len(folder.parts) > floor:
        try:
            os.rmdir(vault.abs(folder.as_posix()))
        except OSError:
            return
        folder = folder.parent


# -- places, titles, hubs --------------------------------------------------------------------------
def resolve_place(ctx: WriteContext, place: Place) -> Spot:
    space = _SPACE_NAMES.get(place.space.strip().lower()) if isinstance(place.space, str) else None
    if space is None:
        raise PlacementError(
            f"space {place.space!r} is not one of {', '.join(SPACES)}", space=place.space,
        )
    parts = [p for p in place.cluster.strip().strip("/").split("/")] if place.cluster else []
    if not parts or any(not p for p in parts):
        raise PlacementError(
            f"cluster {place.cluster!r}: a node goes in a cluster folder, e.g. 'auth' or "
            f"'auth/tokens'", cluster=place.cluster,
        )
    for part in parts:
        try:
            check_portable(part)
        except TitleError as exc:
            raise PlacementError(f"cluster folder {part!r}: {exc}", cluster=place.cluster) \
                from None
    scope: str | None = None
    if space == SCOPE:
        scope = ctx.session.scope
        if place.scope is not None and title_key(place.scope) != title_key(scope):
            raise ScopeError(
                f"this session writes to scope {scope!r}; it cannot place a node in scope "
                f"{place.scope!r}. Each project keeps its own scope",
                scope=scope, wanted=place.scope,
            )
        base = f"{SCOPE}/{scope}"
    else:
        if place.scope is not None:
            raise PlacementError(f"only Scope nodes have a scope; {space} nodes are shared "
                                 f"by every project", space=space)
        base = space
    return Spot(space, scope, parts[0], f"{base}/{'/'.join(parts)}", f"{base}/{parts[0]}")


def spot_of(rel: str) -> Spot:
    parts = PurePosixPath(rel).parts
    space = parts[0]
    depth = 2 if space == SCOPE else 1
    scope = parts[1] if space == SCOPE and len(parts) > 2 else None
    folder = "/".join(parts[:-1])
    cluster = parts[depth] if len(parts) > depth + 1 else ""
    root = "/".join(parts[:depth + 1]) if cluster else folder
    return Spot(space, scope, cluster, folder, root)


def cluster_root(rel: str) -> str | None:
    spot = spot_of(rel)
    return spot.cluster_root if spot.cluster else None


def _where(rel: str) -> tuple[str | None, str | None]:
    spot = spot_of(rel)
    return spot.space, spot.scope


def check_title_free(ctx: WriteContext, title: str, rel: str) -> None:
    taken = ctx.catalog.paths_with_title(title)
    if taken or ctx.vault.abs(rel).exists():
        # Where the other node lives is told only when this session may see it: naming a path
        # in a hidden scope would leak that project's notes through a refusal.
        shown = [p for p in taken if ctx.session.can_see_scope(scope_of(p))]
        where = ", ".join(shown) or (rel if not taken else "")
        held = f"is taken ({where})" if where else "is taken by a node in a scope this " \
            "session cannot see"
        raise TitleError(
            f"title {title!r} {held}; titles are unique across the whole vault after case "
            f"folding. Update that node instead, or choose a more specific title",
            title=title, paths=shown,
        )


def check_hub(ctx: WriteContext, spot: Spot, title: str) -> None:
    if title_key(title) == title_key(spot.cluster):
        return  # this is the hub
    holders = ctx.catalog.paths_with_title(spot.cluster)
    if any(rel.startswith(spot.cluster_root + "/") for rel in holders):
        return
    elsewhere = (f" The title {spot.cluster!r} is already used by {holders[0]}, so this "
                 f"cluster needs another folder name." if holders else "")
    raise HubMissing(
        f"cluster {spot.cluster_root} has no hub yet: create the node titled "
        f"{spot.cluster!r} in {spot.cluster_root} first (it says what the cluster holds), "
        f"then {title!r}.{elsewhere}",
        cluster=spot.cluster_root, hub=spot.cluster,
    )


def node_for_write(ctx: WriteContext, ref: str) -> Node:
    """The node ``ref`` names, re-read if its file changed, if this session may see and
    change it."""
    node = current_node(ctx, ref)
    if not ctx.session.can_see_scope(node.scope):
        raise NodeNotFound(
            f"no node with id or title {ref!r}; search first, then use a returned title or id",
            ref=ref,
        )
    check_writable_node(ctx, node)
    return node


def current_node(ctx: WriteContext, ref: str) -> Node:
    """The node ``ref`` (title or id) names, with its file's current bytes.

    Titles are file names, so a title lookup is exact after the lock's folder check; an id is
    in the file's bytes, so an id that a person wrote into an existing file by hand in the
    last second is found by a full refresh before ``ref`` is declared unknown.
    """
    try:
        node = ctx.catalog.get(ref)
    except NodeNotFound:
        ctx.keep(ctx.fresh.full())
        node = ctx.catalog.get(ref)
    except OskError:
        ctx.freshen(ctx.catalog.paths_with_title(ref))  # a broken file may be fixed by now
        node = ctx.catalog.get(ref)
    ctx.freshen([node.path])
    return ctx.catalog.get(ref)


def check_writable_node(ctx: WriteContext, node: Node) -> None:
    if node.space == SCOPE and node.scope is not None \
            and title_key(node.scope) != title_key(ctx.session.scope):
        raise ScopeError(
            f"{node.title!r} belongs to scope {node.scope!r}; this session writes to scope "
            f"{ctx.session.scope!r} and cannot change another project's nodes",
            title=node.title, scope=node.scope, session_scope=ctx.session.scope,
        )


# -- edges -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Resolved:
    link: str
    target: TargetRef | None
    current_hash: str | None


def _file_roots(edges: Sequence[Resolved]) -> dict[str, str]:
    """The worktree folder each resolved file citation points into, for the sources section."""
    return {e.link: e.target.root for e in edges
            if e.target is not None and e.target.kind == "file" and e.target.root}


def _edge(resolved: Resolved) -> Edge:
    return Edge(resolved.link, resolved.target, resolved.current_hash)


def resolve_edges(ctx: WriteContext, links: Sequence[str], spot: Spot, *, field_name: str,
                  citing_id: str | None = None, known: Sequence[str] = ()) -> list[Resolved]:
    """Parse, resolve and check every link; ``known`` links may dangle (the node had them)."""
    known_ids = {link_identity(k) for k in known}
    result: list[Resolved] = []
    seen: set[str] = set()
    for text in links:
        target = parse_target(text)
        resolved = _resolve(ctx, target, spot, field_name=field_name, citing_id=citing_id,
                            tolerate=link_identity(target.link) in known_ids)
        identity = link_identity(resolved.link)
        if identity in seen:
            continue
        seen.add(identity)
        result.append(resolved)
    return result


def _resolve(ctx: WriteContext, target: Target, spot: Spot, *, field_name: str,
             citing_id: str | None, tolerate: bool) -> Resolved:
    if field_name == "conflicts" and not isinstance(target, NodeTarget):
        raise EdgeError(f"conflicts names other nodes ([[Title]]), not {target.link}",
                        link=target.link)
    if isinstance(target, NodeTarget):
        return _resolve_node(ctx, target, spot, citing_id=citing_id, tolerate=tolerate)
    if isinstance(target, RawTarget):
        return _resolve_raw(ctx, target, spot, tolerate=tolerate)
    if tolerate and citing_id is not None:
        kept = _kept_file_pair(ctx, citing_id, target)
        if kept is not None:
            return kept
    return _resolve_file(ctx, target, tolerate=tolerate)


def _kept_file_pair(ctx: WriteContext, citing_id: str, target: FileTarget) -> Resolved | None:
    """A file citation the node already has stays bound to the project it was made in, even
    when another project's session updates the node (a Domain node, say)."""
    citations = ctx.rechecks.citations(citing_id)
    for pair in citations.pairs.values() if citations else ():
        if pair.target.kind == "file" and pair.target.link == target.link:
            current = ctx.rechecks.hasher.file_hash(pair.target)
            known = None if current == ctx.rechecks.hasher.UNVERIFIABLE else current
            return Resolved(target.link, pair.target, known)
    return None


def _resolve_node(ctx: WriteContext, target: NodeTarget, spot: Spot, *, citing_id: str | None,
                  tolerate: bool) -> Resolved:
    if PurePosixPath(target.title).parts[:1] == (WORKBENCH,) or _in_workbench(ctx, target.title):
        raise _workbench(target.link)
    try:
        cited = ctx.catalog.get(target.title)
        ctx.freshen([cited.path])  # the citation binds to the cited body as it is now
        cited = ctx.catalog.get(target.title)
    except NodeNotFound:
        if tolerate:
            return Resolved(target.link, None, None)
        raise EdgeError(
            f"{target.link}: no node has that title; search for the node you mean and cite its "
            f"exact title", link=target.link,
        ) from None
    if not ctx.session.can_see_scope(cited.scope):
        raise EdgeError(
            f"{target.link}: no node has that title in the scopes this session can see",
            link=target.link,
        )
    if citing_id is not None and cited.id == citing_id:
        raise EdgeError(f"{target.link}: a node cannot cite itself", link=target.link)
    check_topology((spot.space, spot.scope), "node", (cited.space, cited.scope),
                   link=target.link)
    body_hash = ctx.rechecks.hasher.body_hash(cited)
    ref = TargetRef(f"node:{cited.id}", "node", f"[[{cited.title}]]")
    return Resolved(ref.link, ref, body_hash)


def _resolve_raw(ctx: WriteContext, target: RawTarget, spot: Spot, *, tolerate: bool) -> Resolved:
    raw_scope = ctx.routing.scope_for(target.key)
    check_topology((spot.space, spot.scope), "raw", (None, raw_scope), link=target.link)
    if not (target.key == ctx.session.key.key or ctx.session.can_see_scope(raw_scope)):
        raise EdgeError(f"{target.link}: no such raw record in the scopes this session can see",
                        link=target.link)
    current = ctx.rechecks.hasher.raw_hash(target)
    if current is None and not tolerate:
        raise EdgeError(
            f"{target.link}: there is no round {target.round} in {target.record_path}; cite a "
            f"round that exists (read_raw shows a record's rounds)", link=target.link,
        )
    ref = TargetRef(f"raw:{target.coordinate}", "raw", target.link)
    return Resolved(target.link, ref if current is not None else None, current)


def _resolve_file(ctx: WriteContext, target: FileTarget, *, tolerate: bool) -> Resolved:
    root = ctx.session.repo_root
    if root is None:
        raise EdgeError(
            f"{target.link}: this session works in no Git repository, so there is no project "
            f"folder to resolve file citations against", link=target.link,
        )
    path = (root / target.path).resolve()
    base = root.resolve()
    if base not in path.parents and path != base:
        raise EdgeError(f"{target.link}: resolves outside the project folder {base}",
                        link=target.link)
    if _inside(path, ctx.vault.root / WORKBENCH):
        raise _workbench(target.link)
    if PurePosixPath(target.path).parts[:1] == (".git",):
        raise EdgeError(f"{target.link}: git internals are not citable", link=target.link)
    if not path.is_file():
        if tolerate:
            return Resolved(target.link, None, None)
        raise EdgeError(f"{target.link}: no such file in {base}", link=target.link)
    ref = TargetRef(f"file:{ctx.session.key.key}:{target.path}", "file", target.link, str(base))
    return Resolved(target.link, ref, sha256_bytes(path.read_bytes()))


def check_topology(where: tuple[str | None, str | None], kind: str,
                   cited: tuple[str | None, str | None], *, citing: str | None = None,
                   link: str, moving: bool = False) -> None:
    """Citation topology (raises EdgeError): may a node at ``where`` (Space, scope) cite a
    ``kind`` ("node" or "raw") target at ``cited`` (Space, scope; a raw record's scope is its
    session key's scope)? The validators apply the same rule to existing nodes."""
    space, scope = where
    cited_space, cited_scope = cited
    who = f"{citing!r}" if citing else "this node"
    when = " after this move" if moving else ""
    if kind == "raw":
        if space == DOMAIN:
            raise EdgeError(
                f"{link}: {who} would be a Domain node citing a raw round directly{when}. "
                f"Domain knowledge rests on distilled nodes: cite the Scope node that holds "
                f"what the round established", link=link, topology="domain-raw",
            )
        if space == SCOPE and title_key(scope or "") != title_key(cited_scope or ""):
            raise EdgeError(
                f"{link}: {who} would be a node of scope {scope!r} citing a raw record of "
                f"scope {cited_scope!r}{when}; a project cites only its own conversations",
                link=link, topology="cross-scope-raw",
            )
    elif space == SCOPE and cited_space == SCOPE \
            and title_key(scope or "") != title_key(cited_scope or ""):
        raise EdgeError(
            f"{link}: {who} would be a node of scope {scope!r} citing a node of scope "
            f"{cited_scope!r}{when}; a project cites only its own nodes, Domain and Person",
            link=link, topology="cross-scope-node",
        )


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True


def _in_workbench(ctx: WriteContext, title: str) -> bool:
    """Whether a title that is no node names a file in Workbench (work state, never cited)."""
    if ctx.catalog.paths_with_title(title):
        return False
    base = ctx.vault.root / WORKBENCH
    if not base.is_dir():
        return False
    wanted = title_key(title)
    for _, _, files in os.walk(base):
        if any(name.endswith(".md") and title_key(name[:-3]) == wanted for name in files):
            return True
    return False


def _workbench(link: str) -> EdgeError:
    return EdgeError(
        f"{link}: Workbench holds transit and work state, which no node cites; cite the node or "
        f"raw round the work came from", link=link,
    )


# -- ledgers, binding, authority -------------------------------------------------------------------
def check_ledgers(ctx: WriteContext) -> None:
    """Refuse now, before a node is written, if a ledger this write appends to is damaged or
    the session's binding is forked (LedgerError / LedgerFork name the line or the records)."""
    ctx.routing.scope_for(ctx.session.key.key)
    ctx.rechecks.check_readable()
    ctx.ledger("audit").read()


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
    if not supersedes:
        return None
    # AUTHORITY: supersession closes the old node's validity
    closing = validity.prepare_close(ctx.vault, ctx.catalog, supersedes=_supersedes_link(
        supersedes), start=validity.start_of(meta), new_id=meta.id, actor=ctx.actor)
    old = ctx.catalog.by_path(closing.path)
    if old is not None:
        if not ctx.session.can_see_scope(old.scope):
            raise NodeNotFound(f"supersedes names {supersedes!r}, which is not a node this "
                               f"session can see", ref=supersedes)
        check_writable_node(ctx, old)
    return closing


def _close_supersede(ctx: WriteContext, closing: object, meta: Frontmatter,
                     new: Node) -> str | None:
    if closing is None:
        return None
    done = validity.close_superseded(
        ctx.vault, ctx.catalog, supersedes=meta.supersedes or "", start=validity.start_of(meta),
        actor=ctx.audit_actor, new_id=new.id, new_title=new.title,
    )
    if done.after_text is not None:
        ctx.seen.append(Changes(changed=(done.path,)))
    return str(done.title)


def _intend(ctx: WriteContext, action: str, node: Node, *, before_text: str | None,
            after_text: str | None) -> audit.Intent:
    """Journal one audit record before the node file is replaced (``audit.intend``)."""
    return audit.intend(ctx.vault, [_change(ctx, action, node, before_text=before_text,
                                            after_text=after_text)])


def _change(ctx: WriteContext, action: str, node: Node, *, before_text: str | None,
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
            redacted: tuple[tuple[str, int], ...] = ()) -> WriteResult:
    return WriteResult(action, node.id, node.title, node.path, sha256_text(node.text),
                       ctx.session.scope, ctx.session.bound, bound_now, node.meta.trust_state,
                       closed, superseded, _is_pending(ctx, node.path),
                       tuple(Redaction(kind, count) for kind, count in redacted))


__all__ = [
    "check_topology",
    "MoveResult",
    "Moved",
    "Place",
    "ReciteResult",
    "WriteContext",
    "WriteResult",
    "create_node",
    "move_cluster",
    "move_nodes",
    "recite",
    "update_node",
]
