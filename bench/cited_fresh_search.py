"""A fresh `osk search` before and after the vault's first citation (issue 26).

A fresh search answers from the recall file only while the vault's rechecks ledger is empty
(``osk.reads.quick_search``: the ``recheck`` marker needs the rechecks table, which only the
engine builds); a node citing anything (every node an agent distils cites its evidence)
writes that ledger, and from then on every fresh search opens the engine. This builds the
search bench's synthetic vault (``--size`` nodes, none citing), times fresh ``osk search``
processes (CPU, children's rusage, median of ``--runs``, the semantic channel off), creates
one node citing another through ``Engine.create_node``, and times them again.

    python bench/cited_fresh_search.py [--size 5000] [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from scale_bench import child  # noqa: E402  (one child process's wall and CPU)
from search_bench import make_vault  # noqa: E402

SETTLE = 1.2  # seconds: past the race window the fast path waits out after a write


def fresh_cpu_ms(vault: Path, query: str, runs: int) -> float:
    env = {**os.environ, "OSK_SEMANTIC": "0"}
    argv = [sys.executable, "-m", "osk", "--vault", str(vault), "search", query]
    return statistics.median(child(argv, vault, env)[1] for _ in range(runs)) * 1e3


def cite(vault: Path, title: str) -> None:
    from osk.calls.request import NewNode
    from osk.engine.core import Engine

    engine = Engine.open(vault, cwd=vault)
    engine.create_node(NewNode("A note citing another", "It cites a node of the corpus.",
                               "Body.", "Domain", "bench", "agent",
                               derived_from=[f"[[{title}]]"]))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        vault, paths, _ = make_vault(Path(tmp), args.size)
        query = " ".join(Path(paths[0]).stem.split()[:2])
        fresh_cpu_ms(vault, query, 2)  # the first processes write the index and its look
        time.sleep(SETTLE)
        before = fresh_cpu_ms(vault, query, args.runs)
        seen = next(p for p in paths if not Path(p).parts[0].startswith("Scope"))
        cite(vault, Path(seen).stem)  # a node every session sees (Domain or Person)
        fresh_cpu_ms(vault, query, 2)
        time.sleep(SETTLE)
        after = fresh_cpu_ms(vault, query, args.runs)
        python = statistics.median(
            child([sys.executable, "-c", "pass"], vault)[1] for _ in range(args.runs)) * 1e3
    print(f"{args.size} nodes, fresh `osk search` CPU, median of {args.runs}:")
    print(f"  no node cites anything      {before:7.1f} ms")
    print(f"  after one citation          {after:7.1f} ms  ({after / before:.1f}x)")
    print(f"  python -c pass              {python:7.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
