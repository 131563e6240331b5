"""The cost of one raw append (what a Stop hook pays to capture a turn) as the record grows.

Appends rounds with completion ids to one record, and at each checkpoint (10, 100, 1,000,
5,000 rounds by default) times ``--samples`` further appends and the same number of repeated
(duplicate) appends of an early completion id, in process, median wall and CPU time. It also
prints the size of the record's device state and completion index.

Usage: ``python bench/capture_bench.py [--checkpoints 10,100,1000,5000] [--samples 30]``.
Run by hand, not in CI.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from osk.capture import raw  # noqa: E402
from osk.store.vault import init  # noqa: E402

KEY, CONV = "bench", "conv"


def one(vault, n: int) -> raw.RoundInput:
    return raw.RoundInput(user=f"question {n} " * 20, assistant=f"answer {n} " * 120,
                          tools=(f"Bash: ls {n}",), completion=f"msg_{n:08d}_completion",
                          host="claude")


def timed(call) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    call()
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoints", default="10,100,1000,5000")
    parser.add_argument("--samples", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="osk-capture-bench-") as base:
        vault = init(Path(base) / "vault")
        count = 0
        print(f"{'rounds':>7} {'append ms':>10} {'CPU ms':>7} {'repeat ms':>10} {'CPU ms':>7} "
              f"{'state B':>8} {'index B':>8}")
        for checkpoint in (int(c) for c in args.checkpoints.split(",")):
            while count < checkpoint:
                count += 1
                raw.append_round(vault, KEY, CONV, one(vault, count))
            appends, repeats = [], []
            for _ in range(args.samples):
                count += 1
                fresh, repeated = one(vault, count), one(vault, 3)
                appends.append(timed(lambda r=fresh: raw.append_round(vault, KEY, CONV, r)))
                repeats.append(timed(lambda r=repeated: raw.append_round(vault, KEY, CONV, r)))
            state = vault.state("raw", KEY, f"{CONV}.json").stat().st_size
            ids = vault.state("raw", KEY, f"{CONV}.ids")
            index = ids.stat().st_size if ids.exists() else 0
            print(f"{checkpoint:>7,} {statistics.median(a[0] for a in appends) * 1e3:>10.2f} "
                  f"{statistics.median(a[1] for a in appends) * 1e3:>7.2f} "
                  f"{statistics.median(r[0] for r in repeats) * 1e3:>10.2f} "
                  f"{statistics.median(r[1] for r in repeats) * 1e3:>7.2f} "
                  f"{state:>8,} {index:>8,}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
