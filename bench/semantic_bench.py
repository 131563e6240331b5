"""What the semantic channel costs (run by hand, not in CI; needs the model, docs/search.md).

On the search bench's synthetic vault it prints: the time to embed every node (first
catch-up) and per node; then, in one process and over the same queries, the warm search
median and p95 with the channel off and on (as a ratio); and a node change followed by a
search, which re-embeds that node.

Usage: ``python bench/semantic_bench.py [--size 1000] [--queries 100]``.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from search_bench import make_vault  # noqa: E402  (the synthetic vault the search bench uses)


def timed(call) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def summary(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return f"median {statistics.median(ordered):6.1f} ms   p95 {p95:6.1f} ms"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()
    from osk.search import SearchIndex, semantic
    from osk.vault import Vault

    if semantic.find_model() is None:
        raise SystemExit("the semantic channel's model is not installed (docs/search.md)")
    rng = random.Random(11)
    with tempfile.TemporaryDirectory() as tmp:
        root, paths, _ = make_vault(Path(tmp), args.size)
        vault = Vault(root)
        queries = [" ".join(rng.sample(Path(p).stem.split(), 1)) for p in
                   rng.sample(paths, min(args.queries, len(paths)))]
        os.environ["OSK_SEMANTIC"] = "1"
        index = SearchIndex(vault)
        len(index)  # build the lexical index first: not part of the embedding time
        started = time.perf_counter()
        missing = index.embed_missing(budget=None)
        seconds = time.perf_counter() - started
        print(f"{args.size} nodes: embedded in {seconds:.1f} s "
              f"({seconds / args.size * 1000:.1f} ms a node), {missing} left")
        index.search(queries[0])
        on = [timed(lambda q=q: index.search(q)) for q in queries]
        os.environ["OSK_SEMANTIC"] = "0"
        lexical = SearchIndex(vault)
        lexical.search(queries[0])
        off = [timed(lambda q=q: lexical.search(q)) for q in queries]
        print(f"  warm search, lexical only        {summary(off)}")
        print(f"  warm search, semantic channel    {summary(on)}   "
              f"({statistics.median(on) / statistics.median(off):.1f}x)")
        changes = []
        for number in range(10):
            path = root / paths[number]
            path.write_text(path.read_text(encoding="utf-8") + f"\nchanged {number}\n",
                            encoding="utf-8")
            index.refresh()
            changes.append(timed(lambda: index.search(queries[1])))
        print(f"  one node changed, then a search  {summary(changes)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
