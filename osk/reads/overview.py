"""What ``overview`` and ``recheck`` report to a session, as scope isolation lets it see them.

``visible_candidates``: the recheck candidates whose citing node the session can see, naming
only the ``next`` nodes it can see. ``overview``: the node counts per Space, those candidates,
the open conflicts among visible nodes, the scope's pending evictions, every ledger's forks and
damage, the catalog's problems, and the sync conflict copies the session may see. A damaged
ledger is reported, never raised: the overview is how a person learns of it. ``osk.engine.core``
imports this module when a session first asks, so a process that only searches never loads it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from osk.calls.context import WriteContext
from osk.calls.results import ForkInfo, Overview
from osk.errors import LedgerError, OskError
from osk.provenance import candidates, scope_memory
from osk.provenance.pairs import Candidate
from osk.store import conflict_copies
from osk.store.catalog import Catalog
from osk.store.edges import RAW_RECORD
from osk.store.ledger import Ledger
from osk.store.vault import SCOPE, SPACES, Vault, scope_of


def visible_candidates(ctx: WriteContext) -> list[Candidate]:
    """Candidates of nodes this session can see, naming only visible ``next`` nodes."""
    found = []
    for cand in ctx.rechecks.candidates(ctx.catalog):
        if not ctx.session.can_see_scope(cand.scope):
            continue
        keep = [(i, t) for i, t in zip(cand.next_ids, _titles(ctx.catalog, cand.next_ids),
                                        strict=True)
                if t is not None and ctx.session.can_see_scope(t[1])]
        found.append(replace(cand, next_ids=tuple(i for i, _ in keep),
                             next=tuple(sorted(t[0] for _, t in keep))))
    return found


def overview(ctx: WriteContext) -> Overview:
    """The vault as this session may see it: counts per Space, open recheck candidates and
    conflicts, pending evictions, ledger forks and damage, problems, sync conflict copies."""
    session = ctx.session
    counts = {space: 0 for space in SPACES}
    counts["scope"] = 0
    for node in ctx.catalog.nodes():
        if node.space in counts and session.can_see_scope(node.scope):
            counts[node.space] += 1
            if node.space == SCOPE and node.scope == session.scope:
                counts["scope"] += 1
    forks, damaged = _ledger_health(ctx.vault)
    return Overview(
        scope=session.scope, session_key=session.key.key, bound=session.bound,
        explicit_scope=session.explicit, isolation=session.isolation,
        shared_scopes=tuple(sorted(session.shared)), counts=counts,
        rechecks=tuple(visible_candidates(ctx)),
        conflicts=tuple(_open_conflicts(ctx)),
        pending_evictions=tuple(_pending_evictions(ctx)),
        forks=tuple(forks), damaged_ledgers=tuple(damaged), problems=tuple(_problems(ctx.catalog)),
        conflict_copies=tuple(_conflict_copies(ctx)),
    )


def _open_conflicts(ctx: WriteContext) -> list[Any]:
    found = []
    try:
        open_items = candidates.Candidates(ctx.vault).open()
    except LedgerError:
        return []  # listed under damaged_ledgers
    for item in open_items:
        parties = getattr(item, "parties", ())
        if all(ctx.session.can_see_scope(scope_of(getattr(p, "path", ""))) for p in parties):
            found.append(item)
    return found


def _pending_evictions(ctx: WriteContext) -> list[Any]:
    try:
        return list(scope_memory.ScopeMemory(ctx.vault, ctx.session.scope).pending_evictions())
    except LedgerError:
        return []  # listed under damaged_ledgers


def _ledger_health(vault: Vault) -> tuple[list[ForkInfo], list[str]]:
    forks: list[ForkInfo] = []
    damaged: list[str] = []
    folder = vault.ledger_dir
    for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
        try:
            view = Ledger(vault, path.stem).read()
        except LedgerError as exc:
            damaged.append(str(exc))
            continue
        damaged.extend(view.damaged)
        forks.extend(ForkInfo(f.ledger, f.subject, f.describe()) for f in view.forks())
    return forks, damaged


def _conflict_copies(ctx: WriteContext) -> list[str]:
    """Sync conflict copies this session may see (another project's stay hidden)."""
    return [rel for rel in conflict_copies.conflict_copies(ctx.vault)
            if _may_see_path(ctx, str(rel))]


def _may_see_path(ctx: WriteContext, rel: str) -> bool:
    record = RAW_RECORD.match(rel.split("#", 1)[0])
    if record:
        key = record["key"]
        if key == ctx.session.key.key:
            return True
        try:
            return ctx.session.can_see_scope(ctx.routing.scope_for(key))
        except OskError:  # a forked or damaged routing ledger: overview reports it
            return False
    return ctx.session.can_see_scope(scope_of(rel))


def _problems(catalog: Catalog) -> list[str]:
    # A conflict copy has no contract id on purpose; it is listed under conflict_copies.
    problems = [str(entry.error) for entry in catalog.entries.values()
                if entry.error is not None and not conflict_copies.is_conflict_copy(entry.path)]
    for node_id, paths in catalog.duplicate_ids().items():
        problems.append(f"id {node_id} is carried by {', '.join(paths)}")
    for _, paths in catalog.duplicate_titles().items():
        problems.append(f"one title is claimed by {', '.join(paths)}")
    return problems


def _titles(catalog: Catalog, node_ids: Sequence[str]) -> list[tuple[str, str | None] | None]:
    found: list[tuple[str, str | None] | None] = []
    for node_id in node_ids:
        try:
            node = catalog.get(node_id)
        except OskError:
            found.append(None)
            continue
        found.append((node.title, node.scope))
    return found
