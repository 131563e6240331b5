"""Moves: nodes to another folder (``move_nodes``) and a whole cluster to another Space
(``move_cluster``). Titles do not change, so every ``[[Title]]`` link still finds its node, and
ledgers name nodes by id; a move may not leave a cluster without its hub (HubMissing), nor
break the citation topology (``osk.writes.citations``) or a protected region. Under the write path's
lock, with its audit and binding (``osk.writes.write``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import PurePosixPath

from osk.authority import audit, protection
from osk.calls.context import WriteContext
from osk.errors import (
    HubMissing,
    OskError,
    PlacementError,
)
from osk.store.edges import NodeTarget, RawTarget, parse_target
from osk.store.fsutil import fsync_dir
from osk.store.node import Node
from osk.store.titles import check_portable, title_key
from osk.store.vault import SCOPE, Vault
from osk.writes.citations import check_topology
from osk.writes.placement import (
    Place,
    Spot,
    check_writable_node,
    cluster_root,
    node_for_write,
    resolve_place,
    space_and_scope,
)
from osk.writes.write import (
    Moved,
    MoveResult,
    audit_change,
    bind_if_first,
    check_ledgers,
    finish_landed,
    locked,
    owed_binding,
)


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
        intent = _intend_moves(ctx, plan, spot)
        done: list[tuple[str, str]] = []
        try:
            for node, target in plan.values():
                _rename(ctx.vault, node.path, target)
                done.append((node.path, target))
        except OSError:
            for source, target in reversed(done):
                _rename(ctx.vault, target, source)
            intent.abandon()
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
        intent = _intend_moves(ctx, plan, target)
        others = [rel for rel in ctx.catalog.entries if rel.startswith(prefix)
                  and all(rel != n.path for n, _ in plan.values())]
        destination = ctx.vault.abs(target.cluster_root)
        try:
            destination.parent.mkdir(parents=True, exist_ok=True)
            os.rename(source_dir, destination)
        except OSError:
            intent.abandon()
            raise
        fsync_dir(source_dir.parent)
        fsync_dir(destination.parent)
        for rel in others:  # unreadable node files move with their folder
            ctx.note(added=[target.cluster_root + "/" + rel[len(prefix):]], removed=[rel])
        return _after_move(ctx, plan, target, intent)


def _intend_moves(ctx: WriteContext, plan: dict[str, tuple[Node, str]],
                  spot: Spot) -> audit.Intent:
    """Journal the move's records and the binding it owes: the renames are its commit point
    (``osk.writes.write.finish_landed``), so a refusal after them still answers success."""
    return audit.intend(ctx.vault, [
        audit_change(ctx, "move", node, before_text=node.text, after_text=node.text, path=target,
                     detail={"from": node.path, "to": target})
        for node, target in plan.values()], owed_binding(ctx, spot) if plan else [])


def _after_move(ctx: WriteContext, plan: dict[str, tuple[Node, str]], spot: Spot,
                intent: audit.Intent) -> MoveResult:
    moved = []
    for node, target in plan.values():
        ctx.note(added=[target], removed=[node.path])
        moved.append(Moved(node.id, node.title, node.path, target))
    bound: list[bool] = []

    def follows() -> None:
        bound.append(bind_if_first(ctx, spot) if plan else False)
        intent.record()

    owed = finish_landed(f"{len(moved)} node(s) moved", follows)
    return MoveResult(ctx.session.scope, tuple(moved), ctx.session.bound,
                      bool(bound and bound[0]), owed)


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
                check_topology(space_and_scope(final[citing.id]), "node",
                               space_and_scope(final[cited.id]), citing=citing.title, link=link,
                               moving=True)
            elif isinstance(target, RawTarget) and citing_moved:
                raw_scope = ctx.routing.scope_for(target.key)
                check_topology(space_and_scope(final[citing.id]), "raw", (None, raw_scope),
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
