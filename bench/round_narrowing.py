"""Why a million records' round top-k reads a common word whole, and what skipping that gives.

The server's top-k (``osk.search.round_arrays``) reads blocks in impact order until nothing
unread can reach the k-th score, then narrows the rounds read that still could by reading the
rest of a word whole for them (``_Arrays._narrow``). At a million records that read is most of
the query's postings. This bench asks, for each query that narrows:

- how many rounds could reach the k-th when the narrowing starts, at the threshold known then
  and at the true k-th score (the result's last): whether a better threshold would spare it;
- how many of the latter hold a word the narrowing reads: what knowing only which rounds hold a
  word (a bitmap a word) would leave to score whole;
- how many are left once it has read.

Then the same queries with the narrowing replaced by a top-k that is not exact: the ``--keep``
rounds with the best bounds scored whole, the rest left out. It prints how many queries give
the same ten rounds in the same order, the share of the exact ten found, and the round
channel's CPU a query either way (back to back, each query asked once before it is timed).

Usage: ``python bench/round_narrowing.py DIR/vault-100000 [--queries 40] [--keep 64 256]``
on a vault ``bench/rounds_scale.py --keep DIR`` built. Run by hand, not in CI.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

from search_bench import Corpus  # noqa: E402

SEED = 2027  # rounds_scale's Corpus: the vault's own words
K = 10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("vault", type=Path)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--keep", type=int, nargs="*", default=[64, 256])
    args = parser.parse_args()
    os.environ["OSK_SEMANTIC"] = "0"  # the words' channel alone

    import numpy as np

    from osk.engine import core
    from osk.search import round_arrays

    arrays: Any = round_arrays._Arrays  # noqa: SLF001  (the step measured is private)
    exact_narrow = arrays._narrow
    seen: dict[str, Any] = {}
    keep: list[int | None] = [None]  # None: the exact narrowing

    def narrow(search: Any, threshold: float) -> list[tuple[int, float]]:
        reaching, most = search._reach([lst.left for lst in search.lists], threshold)
        if keep[0] is not None:
            if len(reaching) > keep[0]:
                reaching = reaching[np.argpartition(-most, keep[0])[:keep[0]]]
            return search._finish(reaching.tolist())  # type: ignore[no-any-return]
        masks = search.rows.masks[reaching].copy()
        finish = search._finish
        this: dict[str, Any] = {}  # this narrowing's (a query may narrow more than once)

        def finished(rows: list[int]) -> list[tuple[int, float]]:
            this.setdefault("read", search.rows.masks[reaching] != masks)
            this.setdefault("left", len(rows))
            return finish(rows)  # type: ignore[no-any-return]

        search._finish = finished
        found: list[tuple[int, float]] = exact_narrow(search, threshold)
        if len(found) >= search.k and "read" in this and "true" not in seen:
            able = most >= found[-1][1] * (1 - 1e-9)
            seen.update(then=len(reaching), true=int(able.sum()),
                        holding=int(this["read"][able].sum()), left=this["left"])
        return found

    arrays._narrow = narrow
    engine = core.Engine.open(args.vault, cwd=args.vault.parent / "work" / "tidepool",
                              watch=True)
    corpus = Corpus(SEED)
    queries = [corpus.query() for _ in range(args.queries)]

    def ranked(query: str) -> list[tuple[str, float]]:
        return [(hit.path, round(hit.score, 9)) for hit in engine._round_hits(query, K)]

    def timed(query: str) -> tuple[list[tuple[str, float]], float]:
        """The query's ten and its CPU in ms, asked once before (its pages read)."""
        ranked(query)
        seen.clear()
        began = time.process_time()
        found = ranked(query)
        return found, (time.process_time() - began) * 1000

    counts: list[tuple[int, int, int, int]] = []
    exact: dict[str, list[tuple[str, float]]] = {}
    exact_ms = []
    for query in queries:
        exact[query], spent_ms = timed(query)
        exact_ms.append(spent_ms)
        if "true" in seen:
            counts.append((seen["then"], seen["true"], seen["holding"], seen["left"]))
    print(f"{len(counts)} of {len(queries)} queries narrow; rounds a query "
          "(median, mean, least, most):")
    names = ("able to reach the k-th when it narrows", "  the same, at the true k-th",
             "  of those, holding a word it reads", "left once it has read")
    for at, name in enumerate(names):
        values = [row[at] for row in counts]
        print(f"  {name}: {statistics.median(values):.0f}, {statistics.mean(values):.0f}, "
              f"{min(values)}, {max(values)}")
    print(f"exact: {statistics.median(exact_ms):.2f} ms median, "
          f"{statistics.mean(exact_ms):.2f} mean a query")
    for many in args.keep:
        keep[0] = many
        same, share, spent = 0, 0.0, []
        for query in queries:
            found, spent_ms = timed(query)
            spent.append(spent_ms)
            same += found == exact[query]
            share += len(set(found) & set(exact[query])) / max(1, len(exact[query]))
        print(f"the {many} best bounds scored whole, no narrowing: the same ten in the same "
              f"order {same}/{len(queries)}, share of the exact ten {share / len(queries):.3f}, "
              f"{statistics.median(spent):.2f} ms median, {statistics.mean(spent):.2f} mean")


if __name__ == "__main__":
    main()
