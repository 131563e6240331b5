"""The related nodes a read's first page lists, and why: the nodes it cites, the nodes citing
it, then the most similar ones. One rule for ``Engine.read_node`` and a fresh ``osk read
--json`` (``osk.reads.quick_read``), each handing in how it finds a node, its citers and the
similar ones: the engine from its catalog and index, a fresh process from the stores on disk."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

from osk.calls.results import Related
from osk.store.edges import NodeTarget, parse_target

RELATED = 6  # nodes a read lists as related
RELATED_SIMILAR = 2  # of which at least this many are similar ones, when there are any
# The similar ones are found by the rarest words of the node's title and summary, as many as
# occur in this many nodes together, and the best of those ordered by its other words too
# (``Ranking.rank``'s ``postings``): a read costs the same in a vault of any size, where a
# ranked search over every word grew with it. Measured in docs/performance.md.
RELATED_POSTINGS = 5000


class Near(Protocol):
    """What the rule reads of a node it may list (a catalog's ``Node``, a recall file's
    document)."""

    @property
    def id(self) -> str: ...

    @property
    def scope(self) -> str | None: ...


def related_nodes(node: Any, *, named: Callable[[str], Near | None],
                  citing: Callable[[], Iterable[str]],
                  similar: Callable[[str, int], Iterable[Any]],
                  shown_title: Callable[[Any], str | None],
                  can_see: Callable[[str | None], bool]) -> list[Related]:
    """Up to ``RELATED`` nodes near ``node`` (the version read): the nodes it cites
    (derived-from), the nodes citing it, then the best similar ones by a bounded search over
    its title and summary (``RELATED_POSTINGS``).

    ``named(ref)``: the node a title or id names, None when none or more than one does;
    ``citing()``: the ids of the nodes whose recorded citations name it; ``similar(query,
    k)``: the search's hits, best first; ``shown_title(other)``: the title of the version
    ``other`` serves, None when it serves none yet; ``can_see(scope)``: whether the session
    sees a node of that scope."""
    found: dict[str, Related] = {}

    def add(other: Near | None, why: str) -> None:
        if (other is None or other.id == node.id or other.id in found
                or len(found) >= RELATED or not can_see(other.scope)):
            return
        title = shown_title(other)
        if title is not None:  # a pending creation is not there yet
            found[other.id] = Related(title, other.id, why)

    for link in node.derived_from:
        target = parse_target(link)
        if isinstance(target, NodeTarget) and len(found) < RELATED:
            add(named(target.title), "cited by this node (derived-from)")
    for citing_id in sorted(citing()):
        if len(found) >= RELATED:  # a node cited by thousands looks up six of them
            break
        add(named(citing_id), "cites this node (derived-from)")
    cited = len(found)
    if cited >= RELATED:
        return list(found.values())  # no similar one could be listed
    wanted = max(RELATED_SIMILAR, RELATED - cited)
    # markers are not shown for related nodes: the ranking's own (superseded) suffice
    for hit in similar(f"{node.title} {node.field('summary')}", wanted + 1):
        if len(found) >= cited + wanted:
            break
        if "superseded" not in hit.markers:
            add(named(hit.id), f"similar: {_similar_why(hit)}")
    return list(found.values())


def _similar_why(hit: Any) -> str:
    """What a search hit for the node's own title and summary shares with it."""
    if hit.match != "text":
        return "a title like its own"
    return "shares its words" if hit.bm25 > 0 else "close in meaning (semantic search)"
