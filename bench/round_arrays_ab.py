"""The round index's two top-ks side by side in one process (issue 26's per-query cost at a
million records): ``round_postings.top`` (standard library, what a hook asks) against
``round_arrays.top`` (numpy, what the MCP server's watched index asks), alternated query by
query so both meet the same page cache and the same load.

Opens the round index of ``VAULT`` (a vault ``bench/rounds_scale.py --keep DIR`` built:
``DIR/vault-1000``, ``DIR/vault-100000``), asks ``--queries`` queries of that bench's Zipf
words once each way (the results must be equal: rows and scores, or it stops), then ``--runs``
times each way in turn, and prints the CPU median and mean of each and their ratio: first the
top-k alone (a read transaction on one connection), then a watched ``RoundIndex.search`` (the
server's query: refresh look, top-k, rows and excerpts) with its top-k switched. ``--index
FILE``: the top-k alone on a round index file with no vault around it.

Usage: ``python bench/round_arrays_ab.py DIR/vault-100000 [--queries 100] [--runs 3]``. Run by
hand, not in CI.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

from search_bench import Corpus  # noqa: E402

SEED = 2027  # rounds_scale's Corpus: the same words
SIDES = ("pure", "arrays")


def alternated(queries: list[str], runs: int, ask: Callable[[str, str], object]
               ) -> dict[str, list[float]]:
    """Each query asked each way, the first way changing from query to query: CPU ms."""
    for query in queries:  # each query's pages read once, and the results compared
        if ask("pure", query) != ask("arrays", query):
            raise SystemExit(f"the two top-ks differ on {query!r}")
    times: dict[str, list[float]] = {side: [] for side in SIDES}
    for run in range(runs):
        for at, query in enumerate(queries):
            for side in SIDES if (at + run) % 2 else SIDES[::-1]:
                began = time.process_time()
                ask(side, query)
                times[side].append((time.process_time() - began) * 1000)
    return times


def report(what: str, times: dict[str, list[float]]) -> None:
    pure, arrays = (statistics.median(times[side]) for side in SIDES)
    print(f"{what}: CPU median / mean, pure {pure:.3f} / {statistics.mean(times['pure']):.3f}"
          f" ms, arrays {arrays:.3f} / {statistics.mean(times['arrays']):.3f} ms "
          f"(arrays / pure {arrays / pure:.2f}; {len(times['pure'])} queries a side)",
          flush=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("vault", type=Path, nargs="?")
    parser.add_argument("--index", type=Path, help="a round index file alone: the top-k only")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    from osk.search import round_arrays, round_postings
    from osk.search.expand import query_terms
    from osk.search.rounds import CONTEXT_WEIGHT, FILE, RoundIndex
    from osk.store.vault import Vault

    corpus = Corpus(SEED)
    queries = [corpus.query() for _ in range(args.queries)]
    tops = {"pure": round_postings.top, "arrays": round_arrays.top}
    path = args.index or args.vault / ".osk" / "index" / FILE
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    db.execute("BEGIN")
    terms = {query: sorted(query_terms(query, prose=True)) for query in queries}
    report("top-k alone", alternated(queries, args.runs, lambda side, query: tops[side](
        db, terms[query], 10, CONTEXT_WEIGHT, None)))
    db.execute("COMMIT")
    db.close()
    if args.index:
        return 0
    index = RoundIndex(Vault(args.vault), watch=True)
    index.refresh()

    def search(side: str, query: str) -> list[tuple[str, float]]:
        index._top = lambda: tops[side]  # type: ignore[method-assign]  # noqa: SLF001
        return [(hit.coordinate, hit.score)
                for hit in index.search(query, k=10, visible=lambda key: True)]

    report("watched RoundIndex.search", alternated(queries, args.runs, search))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
