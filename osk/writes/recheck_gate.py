"""The recheck gate (governance/ledgers.md rule 6). The cascade stop (CascadeStop): an agent may
not change the content of a node that cites a node still awaiting recheck, nor of a node whose
cited target's current body itself came from a recheck correction (it may re-cite it
unchanged); and (RecheckUnread) a correction or re-citation names only target states this
session has read. Also the citations a correction freshens. Checked by the write path
(``osk.writes.write``) before anything is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from osk.calls.context import USER, WriteContext
from osk.errors import (
    CascadeStop,
    OskError,
    RecheckError,
    RecheckUnread,
)
from osk.provenance.pairs import Candidate, link_identity
from osk.store.node import Node
from osk.writes.citations import Resolved


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
        raise unread_refusal(unread)
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


def unread_refusal(unread: Sequence[Candidate]) -> RecheckUnread:
    listing = "; ".join(f"{c.id}: {c.target}" for c in unread)
    return RecheckUnread(
        f"recheck_unread: this session has not read the current state of {listing}. Read it "
        f"in full (read_node for a node, read_raw for a raw round or a file:PATH), then retry; "
        f"a re-citation records only what was actually read",
        candidates=[c.id for c in unread], code="recheck_unread",
    )
