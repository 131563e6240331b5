"""Where a warm round query's time goes (issue 27's cost target): a kept vault's round index
asked in one process, as the MCP server (watched, a kept connection) and the prompt-submit
hook's fallback (unwatched: every record file stat-ed first) ask it.

Opens the round index of ``VAULT`` (a vault ``bench/rounds_scale.py --keep DIR`` built:
``DIR/vault-50000``), asks ``--queries`` queries of the same Zipf words as that bench once
each (their pages read), then ``--runs`` times in turn on a watched and an unwatched index,
and prints per query the CPU median and mean of each, and the SQL statements one query runs
(by their text, counted with ``set_trace_callback``). ``--profile``: the watched queries once
more under cProfile, the functions that cost the most. ``--top``: the same for
``round_postings.top`` alone (what the query costs without the refresh and the rows around).
``--counts``: what ``round_postings.top`` does a query (postings and blocks read, from
the impact orders and from fresh blocks, rounds summed and scored whole), what grows with the
rounds while its CPU does. ``--grow N``: first append N rounds of the vault's own words to
new conversations, the index caught up after every ``GROW_CHUNK`` (``rounds_scale``'s
builder), as captures grow a vault: a vault built in one go holds neither fresh blocks nor the
dead postings of a conversation's last round indexed anew, which nearly every query of a
grown vault meets.

Usage: ``nice -n 5 python bench/round_query_profile.py DIR/vault-50000 [--queries 42]
[--runs 3] [--profile]``. Run by hand, not in CI.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sqlite3
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

from search_bench import Corpus  # noqa: E402

SEED = 2027  # rounds_scale's Corpus for a vault built from nothing: the same words
GROW_CHUNK = 5000


def cpu_ms(call: Any) -> float:
    began = time.process_time()
    call()
    return (time.process_time() - began) * 1000


def statements(index: Any, query: str) -> Counter[str]:
    """The SQL one query runs on ``index``'s kept connection, by text (numbers folded)."""
    import re

    seen: Counter[str] = Counter()
    with index._open() as db:  # noqa: SLF001  (the kept connection the query will use)
        db.set_trace_callback(lambda text: seen.update([re.sub(r"\d+", "N", text)[:90]]))
        try:
            index.search(query, k=10, visible=lambda key: True)
        finally:
            db.set_trace_callback(None)
    return seen


def grow_by(root: Path, count: int) -> None:
    """Append ``count`` rounds of the vault's first words, catching the index up after every
    ``GROW_CHUNK``."""
    from rounds_scale import catch_up, grow

    from osk.search.rounds import RoundIndex
    from osk.store.vault import Vault

    catch_up(root)
    have = sum(indexed for _, _, indexed in RoundIndex(Vault(root)).records()[1])
    corpus = Corpus(SEED)
    for at in range(have, have + count, GROW_CHUNK):
        grow(root, corpus, at, min(at + GROW_CHUNK, have + count), 400)
        print(f"grown to {min(at + GROW_CHUNK, have + count):,} rounds, the index caught up "
              f"in {catch_up(root):.1f} s CPU", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("vault", type=Path)
    parser.add_argument("--queries", type=int, default=42)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--top", action="store_true")
    parser.add_argument("--counts", action="store_true")
    parser.add_argument("--grow", type=int, default=0, help="rounds to append first")
    args = parser.parse_args()
    from osk.search.rounds import RoundIndex
    from osk.store.vault import Vault

    if args.grow:
        grow_by(args.vault, args.grow)

    corpus = Corpus(SEED)
    queries = [corpus.query() for _ in range(args.queries)]
    watched, plain = RoundIndex(Vault(args.vault), watch=True), RoundIndex(Vault(args.vault))
    for query in queries:  # each query's pages once, as a server has
        watched.search(query, k=10, visible=lambda key: True)
        plain.search(query, k=10, visible=lambda key: True)
    times: dict[str, list[float]] = {"watched": [], "unwatched": []}
    for run in range(args.runs):
        for number, query in enumerate(queries):  # each first every other query
            pair = [("watched", watched), ("unwatched", plain)]
            for name, index in pair if (number + run) % 2 else pair[::-1]:
                times[name].append(cpu_ms(
                    lambda i=index, q=query: i.search(q, k=10, visible=lambda key: True)))
    for name, values in times.items():
        print(f"{name:10} warm round query CPU median {statistics.median(values):.2f} ms, "
              f"mean {statistics.mean(values):.2f} ms ({len(values)} queries)")
    counted = Counter[str]()
    for query in queries:
        counted.update(statements(watched, query))
    print(f"SQL statements a watched query, mean {sum(counted.values()) / len(queries):.1f}:")
    for text, many in counted.most_common(12):
        print(f"  {many / len(queries):7.1f}  {text}")
    if args.profile:
        profile = cProfile.Profile()
        profile.enable()
        for query in queries:
            watched.search(query, k=10, visible=lambda key: True)
        profile.disable()
        pstats.Stats(profile).sort_stats("tottime").print_stats(30)
    if args.top:
        from osk.search.expand import query_terms
        from osk.search.round_postings import top
        from osk.search.rounds import CONTEXT_WEIGHT

        db = sqlite3.connect(watched.path)
        asked = [sorted(query_terms(query, prose=True)) for query in queries]
        spent = [cpu_ms(lambda t=terms: top(db, t, 10, CONTEXT_WEIGHT,
                                            lambda *_: True)) for terms in asked * args.runs]
        print(f"round_postings.top alone: CPU median {statistics.median(spent):.2f} ms, "
              f"mean {statistics.mean(spent):.2f} ms")
    if args.counts:
        print_counts(watched.path, queries)
    return 0


def print_counts(path: Path, queries: list[str]) -> None:
    """Per query, mean and median: postings and blocks ``top`` reads (in impact order / in a
    fresh block), rounds it sums, rounds it scores whole from their forward lists."""
    from osk.search import round_postings
    from osk.search.expand import query_terms
    from osk.search.rounds import CONTEXT_WEIGHT

    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    db.execute("BEGIN")
    fresh = set(db.execute("SELECT term, block FROM heads WHERE fresh > 0"))
    seen: Counter[str] = Counter()
    take, finish = round_postings.Search._take, round_postings.Search._finish  # noqa: SLF001

    def counted_take(search: Any, i: int) -> None:
        lst = search.lists[i]
        _, block, size = lst.bounds[lst.at]
        where = "fresh" if (lst.term, block) in fresh else "ordered"
        seen.update({f"{where} postings": size, f"{where} blocks": 1})
        take(search, i)

    def counted_finish(search: Any, rows: list[int]) -> Any:
        found = finish(search, rows)
        seen.update({"rounds summed": len(search.sums), "rounds scored whole": len(search.exact)})
        return found

    round_postings.Search._take = counted_take  # type: ignore[method-assign,assignment]  # noqa: SLF001
    round_postings.Search._finish = counted_finish  # type: ignore[method-assign,assignment]  # noqa: SLF001
    per: dict[str, list[int]] = {}
    names = ("ordered postings", "fresh postings", "ordered blocks", "fresh blocks",
             "rounds summed", "rounds scored whole")
    try:
        for query in queries:
            seen.clear()
            round_postings.top(db, sorted(query_terms(query, prose=True)), 10, CONTEXT_WEIGHT,
                               None)
            for name in names:
                per.setdefault(name, []).append(seen[name])
    finally:
        round_postings.Search._take = take  # type: ignore[method-assign]  # noqa: SLF001
        round_postings.Search._finish = finish  # type: ignore[method-assign]  # noqa: SLF001
        db.execute("COMMIT")
    print("what top() does a query (mean / median):")
    for name in names:
        values = per[name]
        print(f"  {name:20} {statistics.mean(values):9.1f} / {statistics.median(values):9.1f}")


if __name__ == "__main__":
    raise SystemExit(main())
