"""The most-cited list kept up to date by count moves equals a recount from scratch.

Fixed seed and bounded in CI; ``OSK_SCALE_TRIALS`` (tests/README.md) runs it longer by hand.
"""

from __future__ import annotations

import heapq
import os
import random

import pytest

from osk.provenance.most_cited import MostCited

SEED = 20261202
TRIALS = int(os.environ.get("OSK_SCALE_TRIALS", "40")) * 25


def _recount(counts: dict[str, int], size: int) -> list[tuple[str, int]]:
    return heapq.nsmallest(size, ((n, c) for n, c in counts.items() if c > 0),
                           key=lambda item: (-item[1], item[0]))


@pytest.mark.parametrize("size", [1, 3, 32])
def test_moves_keep_the_list_equal_to_a_recount(size: int):
    rng = random.Random(SEED + size)
    counts: dict[str, int] = {}
    top = MostCited(size)
    recounts = 0
    for step in range(TRIALS):
        node = f"n{rng.randrange(40)}"
        counts[node] = max(0, counts.get(node, 0) + rng.choice([-2, -1, -1, 1, 1, 2, 3]))
        top.moved(node, counts[node])
        if top._top is None:
            recounts += 1
        assert top.top(lambda: counts.items()) == _recount(counts, size), f"step {step}"
    # the list is kept, not recounted, on most moves (the point of it)
    assert recounts < TRIALS // 2


def test_a_move_outside_a_full_list_changes_nothing_and_a_loss_inside_recounts():
    counts = {"a": 5, "b": 4, "c": 1}
    top = MostCited(2)
    assert top.top(lambda: counts.items()) == [("a", 5), ("b", 4)]
    version = top.version
    counts["c"] = 3
    top.moved("c", 3)  # still behind b
    assert top.version == version and top._top == [("a", 5), ("b", 4)]
    counts["c"] = 6
    top.moved("c", 6)  # overtakes both
    assert top._top == [("c", 6), ("a", 5)] and top.version > version
    counts["a"] = 2
    top.moved("a", 2)  # b (4) now ranks above it: only a recount can know
    assert top._top is None
    assert top.top(lambda: counts.items()) == [("c", 6), ("b", 4)]


def test_nodes_without_citers_are_never_listed():
    counts = {"a": 1}
    top = MostCited(3)
    assert top.top(lambda: counts.items()) == [("a", 1)]
    counts["a"] = 0
    top.moved("a", 0)
    top.moved("z", 0)
    assert top.top(lambda: counts.items()) == []
