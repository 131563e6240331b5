"""A node per-prompt recall may show, as both of its paths hand it over: the recall file's query
(``osk.hooks.recall``) and the session's MCP server over the recall channel
(``osk.hooks.recall_channel``). Standard library only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from osk.store.fastclass import dataclass

if TYPE_CHECKING:
    from osk.provenance.origin import Origin


@dataclass(frozen=True)
class Recalled:
    title: str
    id: str
    path: str
    summary: str
    markers: tuple[str, ...]
    confidence: float
    content_hash: str
    space: str
    stat: tuple[int, int, int]  # the file's stat key when the index read it
    approvals: object = None    # the approvals' generation the index served it under
    trust: str | None = None    # confirmed / inferred (osk.authority.trust)
    meant: bool = False         # the semantic order's first node (server path): not cut by
                                # recall.RELATIVE, since its confidence counts words only
    origin: Origin | None = None  # who wrote it, trust, citations, steering (when shown)
