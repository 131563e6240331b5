"""Where a node goes and which node a write means: a Space and a cluster folder, the session's
scope for a Scope node (PlacementError, ScopeError), a title free vault-wide after NFC and case
folding (TitleError), the cluster's hub before its first other node (HubMissing), and the node a
reference names as the write path must see it (fresh from disk, writable, in the session's
scope). Rules of the write path (``osk.writes.write``), which calls them under the mutation lock.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

from osk.calls.context import WriteContext
from osk.capture.secrets import check_name
from osk.errors import (
    HubMissing,
    NodeNotFound,
    OskError,
    PlacementError,
    ScopeError,
    TitleError,
)
from osk.store.node import Node
from osk.store.titles import check_portable, title_key
from osk.store.vault import SCOPE, SPACES, scope_of

_SPACE_NAMES = {s.lower(): s for s in SPACES}


@dataclass(frozen=True)
class Place:
    """Where a node goes: a Space and a cluster folder (``auth`` or ``auth/tokens``).

    A Scope node's scope is the session's; ``scope`` may repeat it but not name another.
    """

    space: str
    cluster: str
    scope: str | None = None


@dataclass(frozen=True)
class Spot:
    """A resolved place: the folder a node goes in and the cluster it belongs to."""

    space: str
    scope: str | None
    cluster: str
    folder: str
    cluster_root: str


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
        check_name("a cluster folder", part)  # a folder name: refused, never redacted
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


def space_and_scope(rel: str) -> tuple[str | None, str | None]:
    spot = spot_of(rel)
    return spot.space, spot.scope


def _visible(ctx: WriteContext, paths: list[str]) -> list[str]:
    """The paths this session may see. Where another node lives is told only when the session
    may see it: naming a path in a hidden scope, or even saying that a hidden scope holds it,
    would leak that project's notes through a refusal."""
    return [p for p in paths if ctx.session.can_see_scope(scope_of(p))]


def check_title_free(ctx: WriteContext, title: str, rel: str) -> None:
    taken = ctx.catalog.paths_with_title(title)
    if taken or ctx.vault.abs(rel).exists():
        shown = _visible(ctx, taken)
        where = ", ".join(shown) or (rel if not taken else "")
        held = f"is taken ({where})" if where else "is taken"
        raise TitleError(
            f"title {title!r} {held}; titles are unique across the whole vault after case "
            f"folding. Update that node instead, or choose a more specific title",
            title=title, paths=shown,
        )


def hub_needed(ctx: WriteContext, spot: Spot, title: str) -> bool:
    """True when ``spot``'s cluster has no hub yet and ``title`` is not the hub itself."""
    if title_key(title) == title_key(spot.cluster):
        return False  # this is the hub
    holders = ctx.catalog.paths_with_title(spot.cluster)
    return not any(rel.startswith(spot.cluster_root + "/") for rel in holders)


def check_hub(ctx: WriteContext, spot: Spot, title: str) -> None:
    if not hub_needed(ctx, spot, title):
        return
    holders = ctx.catalog.paths_with_title(spot.cluster)
    shown = _visible(ctx, holders)
    where = f"already used by {shown[0]}" if shown else "already taken"
    elsewhere = (f" The title {spot.cluster!r} is {where}, so this cluster needs another "
                 f"folder name." if holders else "")
    raise HubMissing(
        f"cluster {spot.cluster_root} has no hub yet: create the node titled "
        f"{spot.cluster!r} in {spot.cluster_root} first (it says what the cluster holds), "
        f"then {title!r}.{elsewhere}",
        cluster=spot.cluster_root, hub=spot.cluster,
    )


def generated_hub_summary(spot: Spot) -> str:
    """The summary of a hub written with its cluster's first node when none was given."""
    return f"The {spot.cluster} cluster of {spot.scope or spot.space}"


def hub_body(spot: Spot, summary: str | None) -> str:
    """The body of a hub written with its cluster's first node: the summary the agent gave,
    else a line the person replaces with what the cluster holds."""
    if summary:
        return summary.strip() + "\n"
    return (f"Nodes about {spot.cluster} are filed in this folder ({spot.cluster_root}). "
            f"osk wrote this hub with the cluster's first node: say here what the cluster "
            f"holds.\n")


def node_for_write(ctx: WriteContext, ref: str) -> Node:
    """The node ``ref`` names, re-read if its file changed, if this session may see and
    change it."""
    node = current_node(ctx, ref)
    if not ctx.session.can_see_scope(node.scope):
        raise NodeNotFound.named(ref)
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
