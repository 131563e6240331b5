"""The page of a node a read returns: ``Engine.read_node`` and a fresh ``osk read``
(``osk.reads.quick_read``) both cut it here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from osk.calls.outline import outline_of, section_span
from osk.calls.results import NodeRead, Related
from osk.errors import OskError
from osk.store.edges import as_link

if TYPE_CHECKING:
    from osk.store.node import Node

PAGE_CHARS = 4000  # a read returns at most this many body characters


def node_page(scope: str, node: Node, shown: Node, section: str | None, start: int | None,
              length: int | None, *, markers: tuple[str, ...] = (),
              whole_hash: str | None = None, related: tuple[Related, ...] = ()) -> NodeRead:
    """One page of ``shown`` (the version served) of ``node`` (the file's identity) for a
    session in ``scope``, with ``markers`` and ``related``. Its hash is ``whole_hash``
    when the page is the whole body (a reader whose one page is the whole read), else None:
    a reader that counts pages adds what this read earns."""
    body = shown.body
    outline = outline_of(body)
    lo, hi, label = section_span(outline, body, section)
    begin = lo + max(0, start or 0)
    if begin > hi:
        raise OskError(f"start {start} is past the end ({hi - lo} characters)", start=start)
    size = PAGE_CHARS if length is None else max(1, min(int(length), PAGE_CHARS))
    end = min(hi, begin + size)
    complete = begin == 0 and end == len(body)
    return NodeRead(
        scope=scope, id=node.id, title=node.title, path=node.path, space=node.space,
        node_scope=node.scope, summary=shown.field("summary"), created=shown.field("created"),
        updated=shown.field("updated"), author=shown.field("author"),
        drafter=shown.field("drafter"), trust=shown.trust_state,
        derived_from=tuple(map(as_link, shown.derived_from)),
        conflicts=tuple(shown.field("conflicts", ())), text=body[begin:end], start=begin, end=end,
        total_chars=len(body), complete=complete,
        next_start=(end - lo) if end < hi else None,
        hash=whole_hash if complete else None, outline=outline,
        section=label, pending=False, markers=markers, related=related,
    )
