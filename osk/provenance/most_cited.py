"""The few most cited nodes, kept up to date as citation counts move (pure logic, no I/O).

The hooks' summary names the ``size`` nodes with the most citers (ties by id). Counting them
from scratch passes over every cited node, which at 50,000 nodes was most of a write's CPU
time. A write moves the counts of the few nodes it cites or stops citing, and the top list is
exact after such a move unless a node inside a full list loses citers (an outsider may then
overtake it): only that case recounts, and only when the list is next asked for.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable


def _key(item: tuple[str, int]) -> tuple[int, str]:
    return (-item[1], item[0])


class MostCited:
    """The ``size`` (node id, count) pairs with the highest counts, most first, ids breaking
    ties; nodes with no citer are never listed."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._top: list[tuple[str, int]] | None = None  # None: recount when asked
        self.version = 0  # grows whenever the list may have changed

    def top(self, counts: Callable[[], Iterable[tuple[str, int]]]) -> list[tuple[str, int]]:
        """The list, recounted from ``counts`` (every node id with its count) only when a
        move could not be applied exactly."""
        if self._top is None:
            self._top = heapq.nsmallest(self.size, ((n, c) for n, c in counts() if c > 0),
                                        key=_key)
        return self._top

    def forget(self) -> None:
        """Recount on the next ask (the counts were replaced wholesale)."""
        self._top = None
        self.version += 1

    def moved(self, node_id: str, count: int) -> None:
        """``node_id`` now has ``count`` citers."""
        top = self._top
        if top is None:
            return
        at = next((i for i, (n, _) in enumerate(top) if n == node_id), None)
        full = len(top) >= self.size
        if at is not None:
            if top[at][1] == count:
                return
            if full and count < top[at][1]:
                self.forget()  # an outsider may now rank above it: only a recount knows
                return
            del top[at]
        elif count <= 0 or (full and _key((node_id, count)) > _key(top[-1])):
            return  # it stays outside the list
        if count > 0:
            top.append((node_id, count))
            top.sort(key=_key)
            del top[self.size:]
        self.version += 1
