"""What `osk sync` pays to check what a remote brings (osk.sync.admission) on a long ledger.

Builds an audit ledger of N records (as osk writes them), then times the ledger-line check of a
remote that appended one record (``foreign_line_problems``: new lines parsed in full, lines
already known read only for their ids). Prints the median of several runs per size, in ms.

Usage: ``python bench/sync_admission_bench.py [--sizes 10000,50000] [--runs 5]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from osk.store.ids import uuid7  # noqa: E402
from osk.store.ledger import foreign_line_problems  # noqa: E402


def ledger(count: int) -> tuple[bytes, str]:
    lines, previous = [], None
    for _ in range(count):
        record_id = uuid7(after=previous)
        lines.append(json.dumps({
            "id": record_id, "parents": [previous] if previous else [], "device": "a1b2c3d4e5f6",
            "at": "2026-11-29T18:02:00.123456Z", "kind": "update",
            "subject": "0193a3c2-6f1e-7b2a-9c4d-5e6f7a8b9c0d", "path": "Scope/proj/auth/x.md",
            "hash": "a" * 64}, separators=(",", ":")))
        previous = record_id
    return ("\n".join(lines) + "\n").encode(), str(previous)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,50000")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    for size in (int(s) for s in args.sizes.split(",")):
        known, last = ledger(size)
        brought = json.dumps({"id": uuid7(after=last), "parents": [last], "device": "f6e5d4c3b2a1",
                              "at": "2026-11-29T18:03:00Z", "kind": "update", "subject": "s"})
        incoming = known + (brought + "\n").encode()
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            problems = foreign_line_problems("_ledger/audit.jsonl", known, incoming)
            times.append(time.perf_counter() - start)
            assert problems == [], problems
        print(f"audit ledger of {size:,} records ({len(known) / 1e6:.1f} MB), one line brought: "
              f"{statistics.median(times) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
