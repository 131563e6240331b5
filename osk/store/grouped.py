"""Values grouped by key, where most keys have one value (a title's document, a cited node's
citer): that one kept as itself, a set only for a key several share."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import Generic, TypeVar

Value = TypeVar("Value", int, str)  # hashable, and never a set itself


class Grouped(Generic[Value]):
    """The values under each key, answered as a dict of sets would answer. A set for every
    key cost 49 MB of the search corpus's two title tables at 100,000 nodes, and a fifth of
    the recheck table's memory (``osk.provenance.recheck_table``)."""

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held: dict[str, Value | set[Value]] = {}

    def get(self, key: str, default: Collection[Value] = ()) -> Collection[Value]:
        """The values under ``key`` (not to be changed by the caller)."""
        held = self._held.get(key)
        if held is None:
            return default
        return held if isinstance(held, set) else (held,)

    def add(self, key: str, value: Value) -> None:
        held = self._held.get(key)
        if held is None or held == value:
            self._held[key] = value
        elif isinstance(held, set):
            held.add(value)
        else:
            self._held[key] = {held, value}

    def discard(self, key: str, value: Value) -> None:
        held = self._held.get(key)
        if held is None:
            return
        if not isinstance(held, set):
            if held == value:
                del self._held[key]
            return
        held.discard(value)
        if len(held) == 1:
            self._held[key] = next(iter(held))

    def count(self, key: str) -> int:
        return len(self.get(key))

    def __contains__(self, key: object) -> bool:
        return key in self._held

    def keys(self) -> list[str]:
        return list(self._held)

    def counts(self) -> Iterator[tuple[str, int]]:
        """Every key with how many values it holds."""
        return ((key, len(held) if isinstance(held, set) else 1)
                for key, held in self._held.items())
