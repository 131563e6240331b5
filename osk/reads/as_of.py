"""Reads of the vault as it stood at a date (``as_of``), as this session sees it.

``past_node``: the version of one node readers were served then; ``search_past``: a search
over every node's version of that time, ranked by those words (``osk.search.versions``). Both
read ``osk.authority.validity.as_of_view``; the caller makes its catalog fresh first. Such a read
carries no hash and does not count as reading a node for a re-citation. ``osk.engine.core`` imports
this module only for a read that names a date.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from osk.authority import validity
from osk.calls.context import WriteContext
from osk.errors import NodeNotFound
from osk.search.ranking import SearchResult
from osk.search.versions import search_versions
from osk.store.titles import title_key

if TYPE_CHECKING:
    from osk.store.node import Node

Visible = Callable[[object], bool]  # the session's scope isolation (``Engine.visible``)


def past_node(ctx: WriteContext, visible: Visible, ref: str, as_of: str) -> Node:
    """The version of node ``ref`` (title or id) readers were served at ``as_of``."""
    at = validity.parse_as_of(as_of)
    wanted = title_key(ref.strip())
    for node in validity.as_of_view(ctx.vault, ctx.catalog, at, visible).nodes:
        if node.id == ref.strip() or title_key(node.title) == wanted:
            return node
    raise NodeNotFound(
        f"no node {ref!r} stood in the vault at {as_of} as this session sees it (created "
        f"later, not valid then, or another project's); search with the same as_of to "
        f"see what did", ref=ref,
    )


def search_past(ctx: WriteContext, visible: Visible, query: str, k: int,
                as_of: str) -> SearchResult:
    """Ranked hits over the vault as it stood at ``as_of`` (``search_versions``)."""
    at = validity.parse_as_of(as_of)
    view = validity.as_of_view(ctx.vault, ctx.catalog, at, visible)
    scope = ctx.session.scope
    hits = search_versions(view.nodes, query, at=at, k=k, scope=scope, visible=visible)
    return SearchResult(scope, query, tuple(hits))
