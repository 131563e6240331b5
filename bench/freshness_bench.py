"""What exact freshness costs a read: the vault generation check, at 5,000 nodes by default.

On the synthetic vault of ``search_bench.py`` (same corpus and seed) it opens one ``Engine``
(as an MCP server does), turns its once-a-second walk off so only the generation decides, and
prints:

- the generation check alone (``Freshness.behind``: one ``stat``);
- warm ``Engine.search`` median and p95 with the check, and with it skipped, the two variants
  interleaved query by query so machine load touches both alike;
- a read after another osk process wrote (a bump): the folder check plus the query.

Usage: ``python bench/freshness_bench.py [--size 5000] [--queries 2000] [--keep DIR]``. Run by
hand, not in CI. Bar (issue 10): the check may not move the warm median by more than 0.1 ms.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from search_bench import make_vault, ms, percentile  # noqa: E402  (the shared vault)


def us(seconds: float) -> str:
    return f"{seconds * 1e6:8.1f} µs"


def bench(base: Path, size: int, queries: int) -> None:
    from osk.engine import core as engine_mod
    from osk.engine.core import Engine
    from osk.store import generation
    from osk.store.freshness import Freshness

    root, _paths, corpus = make_vault(base, size)
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"== {size:,} nodes; load average {load}")
    engine_mod.REFRESH_SECONDS = float("inf")  # the generation alone decides
    engine = Engine.open(root, cwd=base)
    engine._search_index().refresh_interval = float("inf")
    query_list = [corpus.query() for _ in range(queries)]
    for query in query_list[:200]:  # first touches of each term's postings
        engine.search(query)

    checks = []
    for _ in range(queries):
        t = time.perf_counter()
        engine._ctx.fresh.behind()
        checks.append(time.perf_counter() - t)

    behind = Freshness.behind
    with_check, without = [], []
    for number, query in enumerate(query_list):
        order = ((False, with_check), (True, without))
        for skip, into in order if number % 2 else order[::-1]:  # neither always goes first
            Freshness.behind = (lambda self: False) if skip else behind  # type: ignore[method-assign]
            t = time.perf_counter()
            engine.search(query)
            into.append(time.perf_counter() - t)
    Freshness.behind = behind  # type: ignore[method-assign]
    paired = statistics.median(a - b for a, b in zip(with_check, without, strict=True))

    after_write = []
    for query in query_list[:200]:
        generation.bump(engine.vault)  # what another process's write leaves
        t = time.perf_counter()
        engine.search(query)
        after_write.append(time.perf_counter() - t)

    folders = len(engine._ctx.fresh._folders)
    print(f"generation check alone, median        {us(statistics.median(checks))}")
    print(f"warm search median, with the check    {ms(statistics.median(with_check))}")
    print(f"warm search median, check skipped     {ms(statistics.median(without))}")
    print(f"  difference of the medians           "
          f"{us(statistics.median(with_check) - statistics.median(without))}")
    print(f"  median of the paired differences    {us(paired)}")
    print(f"warm search p95, with / skipped       {ms(percentile(with_check, 0.95))} "
          f"{ms(percentile(without, 0.95))}")
    print(f"search after another process wrote   {ms(statistics.median(after_write))} "
          f"(folder check of {folders} folders + query)")


def main() -> int:
    os.environ["OSK_SEMANTIC"] = "0"  # the check is the same with either channel
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=5000)
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--keep", type=Path, help="build the vault here and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        base = args.keep or Path(scratch)
        base.mkdir(parents=True, exist_ok=True)
        bench(base, args.size, args.queries)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
