"""Citation topology (EdgeError): every link a node cites, resolved to its target and the
target's current hash. A Scope-A node cannot cite scope B's nodes or raw rounds; a Domain node
cannot cite raw rounds directly; no node cites Workbench work state; node and raw targets must
exist, file targets resolve inside the session's repository. Rules of the write path
(``osk.writes.write``); a move checks the same topology (``osk.writes.moves``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from osk.calls.context import WriteContext
from osk.capture.secrets import check_name
from osk.errors import (
    EdgeError,
    NodeNotFound,
)
from osk.provenance.pairs import TargetRef, link_identity
from osk.provenance.rechecks import Edge
from osk.store.edges import (
    FileTarget,
    NodeTarget,
    RawTarget,
    Target,
    in_git_folder,
    parse_target,
)
from osk.store.fsutil import sha256_bytes
from osk.store.titles import title_key
from osk.store.vault import DOMAIN, SCOPE, WORKBENCH
from osk.writes.placement import (
    Spot,
)


# -- edges -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Resolved:
    link: str
    target: TargetRef | None
    current_hash: str | None


def edge_of(resolved: Resolved) -> Edge:
    return Edge(resolved.link, resolved.target, resolved.current_hash)


def resolve_edges(ctx: WriteContext, links: Sequence[str], spot: Spot, *, field_name: str,
                  citing_id: str | None = None, known: Sequence[str] = ()) -> list[Resolved]:
    """Parse, resolve and check every link; ``known`` links may dangle (the node had them)."""
    known_ids = {link_identity(k) for k in known}
    result: list[Resolved] = []
    seen: set[str] = set()
    for text in links:
        target = parse_target(text)
        if isinstance(target, FileTarget) and link_identity(target.link) not in known_ids:
            _check_file_path(target, field_name)
        resolved = _resolve(ctx, target, spot, field_name=field_name, citing_id=citing_id,
                            tolerate=link_identity(target.link) in known_ids)
        identity = link_identity(resolved.link)
        if identity in seen:
            continue
        seen.add(identity)
        result.append(resolved)
    return result


def _check_file_path(target: FileTarget, field_name: str) -> None:
    """A cited path is kept as it is (front matter, the rechecks ledger): one holding a secret
    is refused, and Git's own folder is not evidence (its config may hold a token)."""
    check_name(f"the {field_name} path", target.path)
    if in_git_folder(target.path):
        raise EdgeError(f"{target.link} lies under .git/, Git's own files; cite project files",
                        link=target.link)


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
