"""The server's round top-k with every posting of a query read (``round_arrays._Every``) against
the top-k on arrays by bounds (``round_arrays._Arrays``), by how many postings the query's terms
hold: where reading them all costs less, which sets ``round_arrays.EVERY``.

Opens the round index file of ``VAULT`` (a vault ``bench/rounds_scale.py --keep DIR`` or
``bench/rounds_grow.py`` built) read-only, asks ``--queries`` of that bench's Zipf words (seed
2027) once each way (the results must be equal: rows and scores, or it stops), then ``--runs``
times each way in turn, the first way changing from query to query, with ``--gap`` seconds of
idle before every query (1.1: an agent's pace, each query meeting the machine after an idle
second, as the server's do; 0: back to back). Each query is the top-k alone (k 8, the
neighbours' words weighed as a search weighs them, every round kept) in a read transaction on
one connection; its thread's CPU is timed. Prints, for each range of postings held, the CPU
median and mean of each way.

Usage: ``python bench/round_every_ab.py DIR/vault-10000 [--queries 40] [--runs 3] [--gap 1.1]``.
Run by hand, not in CI.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

from search_bench import Corpus  # noqa: E402

from osk.search import round_arrays  # noqa: E402
from osk.search.expand import query_terms  # noqa: E402
from osk.search.rounds import CONTEXT_WEIGHT  # noqa: E402

SEED = 2027  # rounds_scale's Corpus: the same words
K = 8  # what a search asks of the rounds
WAYS = {"bounds": 0, "every": 1 << 40}  # round_arrays.EVERY for each way
EDGES = (0, 4096, 8192, 16384, 24576, 32768, 49152, 1 << 40)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("vault", type=Path)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--gap", type=float, default=1.1)
    args = parser.parse_args()
    index = args.vault / ".osk" / "index" / "rounds.sqlite"
    db = sqlite3.connect(f"file:{index}?mode=ro", uri=True, isolation_level=None)
    corpus = Corpus(SEED)
    queries = [sorted(query_terms(corpus.query(), prose=True)) for _ in range(args.queries)]

    def ask(way: str, terms: list[str]) -> tuple[list[tuple[int, float]], float]:
        round_arrays.EVERY = WAYS[way]
        db.execute("BEGIN")
        try:
            began = time.thread_time()
            found = round_arrays.top(db, terms, K, CONTEXT_WEIGHT, None)
            return found, (time.thread_time() - began) * 1000
        finally:
            db.execute("COMMIT")

    def held(terms: list[str]) -> int:
        return sum(postings for (postings,) in db.execute(
            f"SELECT postings FROM vocab WHERE term IN ({','.join('?' * len(terms))})", terms))

    for terms in queries:  # each query's pages read once, and the results compared
        if ask("bounds", terms)[0] != ask("every", terms)[0]:
            raise SystemExit(f"the two ways differ on {terms!r}")
    timed: list[tuple[int, dict[str, float]]] = []
    for run in range(args.runs):
        for at, terms in enumerate(queries):
            spent = {}
            for way in WAYS if (at + run) % 2 else list(WAYS)[::-1]:
                time.sleep(args.gap)
                spent[way] = ask(way, terms)[1]
            timed.append((held(terms), spent))
    print(f"round top-k on {index}, CPU ms median / mean, gap {args.gap} s:")
    for low, high in zip(EDGES, EDGES[1:], strict=False):
        within = [spent for count, spent in timed if low <= count < high]
        if within:
            upto = f"{high - 1:,}" if high < EDGES[-1] else "more"
            print(f"  postings held {low:>6,}-{upto:>6}: "
                  f"{len(within):3d} queries; " + ", ".join(
                      f"{way} {statistics.median(s[way] for s in within):.3f} / "
                      f"{statistics.mean(s[way] for s in within):.3f}" for way in WAYS))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
