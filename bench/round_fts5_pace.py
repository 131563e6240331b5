"""What an exact BM25 index pays for the same round queries as the vault grows: SQLite FTS5 over
the round index's terms beside the server's round top-k (``round_arrays.top``), both warm, both
at an agent's pace, vault by vault.

For each ``VAULT`` (one ``bench/rounds_scale.py --keep DIR`` or ``bench/rounds_grow.py`` built),
the FTS5 table of its rounds' terms (each round's own words and its neighbours', as
``rounds_scale.fts5_floor`` copies them; built beside the vault as ``fts5-rounds.sqlite`` when
absent, which takes minutes at a million records) and the round index are opened read-only on
kept connections. ``--queries`` of the scale bench's Zipf words (seed 2027) are asked once each
way (FTS5: the query's terms OR-ed, ``ORDER BY bm25(terms, 1.0, CONTEXT_WEIGHT)``, k rows; osk:
the top-k alone, every round kept, in a read transaction), then ``--runs`` times each way in turn,
the first way changing from query to query, with ``--gap`` seconds of idle before every query
(1.1: each query meets the machine after an idle second, as the server's do). Each query's
thread CPU is timed. Prints, per vault, the CPU median and mean of each way, and how many of
osk's rounds FTS5 returned too (its scores are the same formula over the same counts; rounds
tied at the k-th may differ). Then each vault's medians against the first vault's.

Usage: ``python bench/round_fts5_pace.py DIR/vault-1000 DIR/vault-100000 [--queries 40]
[--runs 2] [--gap 1.1]``. Run by hand, not in CI.
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

from rounds_scale import fts5_floor  # noqa: E402
from search_bench import Corpus  # noqa: E402

from osk.search import round_arrays  # noqa: E402
from osk.search.expand import query_terms  # noqa: E402
from osk.search.rounds import CONTEXT_WEIGHT  # noqa: E402

SEED = 2027  # rounds_scale's Corpus: the same words
K = 8  # what a search asks of the rounds


class Pair:
    """One vault's two kept connections and the queries' timings."""

    def __init__(self, vault: Path) -> None:
        index = vault / ".osk" / "index" / "rounds.sqlite"
        floor = fts5_floor(index, vault.parent / "fts5-rounds.sqlite")
        self.name = vault.name
        self.osk = sqlite3.connect(f"file:{index}?mode=ro", uri=True, isolation_level=None)
        self.fts5 = sqlite3.connect(f"file:{floor}?mode=ro", uri=True)
        self.rounds = self.osk.execute("SELECT rounds FROM totals").fetchone()[0]
        self.spent: dict[str, list[float]] = {"fts5": [], "osk": []}
        self.same = 0

    def ask(self, way: str, terms: list[str]) -> tuple[list[int], float]:
        if way == "fts5":
            match = " OR ".join(f'"{term}"' for term in terms)
            began = time.thread_time()
            found = [row for (row,) in self.fts5.execute(
                "SELECT rowid FROM terms WHERE terms MATCH ? "
                f"ORDER BY bm25(terms, 1.0, {CONTEXT_WEIGHT}) LIMIT {K}", (match,))]
            return found, (time.thread_time() - began) * 1000
        self.osk.execute("BEGIN")
        try:
            began = time.thread_time()
            best = round_arrays.top(self.osk, terms, K, CONTEXT_WEIGHT, None)
            return [row for row, _ in best], (time.thread_time() - began) * 1000
        finally:
            self.osk.execute("COMMIT")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("vaults", type=Path, nargs="+")
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--gap", type=float, default=1.1)
    args = parser.parse_args()
    pairs = [Pair(vault) for vault in args.vaults]
    corpus = Corpus(SEED)
    queries = [sorted(query_terms(corpus.query(), prose=True)) for _ in range(args.queries)]
    for pair in pairs:  # each query's pages read once, and the rounds compared
        for terms in queries:
            ours, theirs = pair.ask("osk", terms)[0], pair.ask("fts5", terms)[0]
            pair.same += len(set(ours) & set(theirs))
    for run in range(args.runs):
        for at, terms in enumerate(queries):
            for pair in pairs:
                for way in ("fts5", "osk") if (at + run) % 2 else ("osk", "fts5"):
                    time.sleep(args.gap)
                    pair.spent[way].append(pair.ask(way, terms)[1])
    print(f"round queries warm, thread CPU ms median / mean, k {K}, gap {args.gap} s, "
          f"{args.queries} queries x {args.runs}:")
    for pair in pairs:
        print(f"  {pair.name} ({pair.rounds:,} rounds): " + ", ".join(
            f"{way} {statistics.median(times):.3f} / {statistics.mean(times):.3f}"
            for way, times in pair.spent.items())
            + f"; FTS5 returned {pair.same} of osk's rounds")
    first = pairs[0]
    for pair in pairs[1:]:
        print(f"  {pair.name} against {first.name}: " + ", ".join(
            f"{way} {statistics.median(pair.spent[way]) / statistics.median(times):.2f}x"
            for way, times in first.spent.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
