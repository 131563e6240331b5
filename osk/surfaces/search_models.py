"""The result models every tool shares (``Out``, ``Item``) and ``search``'s, apart from the
argument models in ``osk.surfaces.tool_models``, which are built on the MCP SDK: so the stdio
front can answer a search that comes before the SDK is loaded (``osk.surfaces.early``) with the
very models and conversion the SDK's side uses (``search_out``). Imports pydantic, never the
SDK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from osk.surfaces.early import MAX_QUERY

if TYPE_CHECKING:
    from osk.engine.core import Engine

__all__ = ["MAX_QUERY", "HitOut", "Item", "Out", "SearchOut", "as_search_out", "search_out"]

class Out(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    scope: str = Field(description="the session's active scope")


class Item(BaseModel):
    model_config = ConfigDict(from_attributes=True)


class HitOut(Item):
    title: str
    path: str
    id: str
    summary: str
    updated: str
    score: float
    markers: list[str] = Field(description="recheck, conflict, pending, inferred, superseded…")


class SearchOut(Out):
    query: str
    hits: list[HitOut]


def search_out(engine: Engine, query: str, *, k: int, as_of: str | None, kind: str) -> SearchOut:
    """``search``'s result: the engine's hits as the tool returns them."""
    return as_search_out(engine.search(query, k=k, as_of=as_of, kind=kind))


def as_search_out(result: Any) -> SearchOut:
    """A ``SearchResult`` (the engine's, or ``osk.reads.quick_search``'s) as the tool returns it."""
    return SearchOut.model_validate(result, from_attributes=True)
