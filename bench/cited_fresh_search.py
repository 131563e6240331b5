"""A fresh `osk search` before and after the vault's first citation (issue 26).

A fresh search answers from the store (``osk.reads.quick_search``); its hits' ``recheck``
markers come from the rechecks table kept on disk (``osk.provenance.recheck_store``). Until
that table existed, any rechecks record (every node an agent distils cites its evidence) sent
every fresh search to the engine, which restores the whole catalog and index. For each size
this builds the search bench's synthetic vault (no node citing anything) and SQLite FTS5 over
the same text, times fresh processes (``scale_bench.fresh_searches``: ``osk search``, the FTS5
query, ``python -c pass``, interleaved; CPU is the children's rusage, medians of ``--runs``
queries, the semantic channel off), creates one node citing another through
``Engine.create_node``, and times them again, and once more with a query that finds the
citing node (whose recheck marker is then worked out: its file and the file it cites read).
``--against DIR`` also times, interleaved, a
fresh search from the osk source in DIR (a checkout of another commit: before/after in one
run).

    python bench/cited_fresh_search.py [--size 1000,5000,20000] [--runs 7] [--against DIR]
        [--keep DIR]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from scale_bench import (  # noqa: E402  (the scale run's children and FTS5)
    OSK_CHILD,
    bench_folder,
    build_fts,
    child,
    env_for_osk,
    fresh_searches,
    queries_for,
)
from search_bench import make_vault  # noqa: E402

CITING_QUERY = "note citing another"  # finds the citing node: its recheck marker is looked for
SETTLE = 2.1  # seconds: past the race window a look waits out after a write (files, folders)


def cite(vault: Path, title: str) -> None:
    from osk.calls.request import NewNode
    from osk.engine.core import Engine

    engine = Engine.open(vault, cwd=vault)
    engine.create_node(NewNode("A note citing another", "It cites a node of the corpus.",
                               "Body.", "Domain", "bench", "agent",
                               derived_from=[f"[[{title}]]"]))


def settled(vault: Path, query: str) -> None:
    """Let the files just written settle, then one search records a look that vouches for
    them (and, from this source, brings the rechecks table on disk up to the ledger)."""
    time.sleep(SETTLE)
    child([sys.executable, "-c", OSK_CHILD, str(vault), query], vault, env_for_osk())


def line(label: str, fresh: dict[str, Any]) -> str:
    wall, cpu = fresh["osk"]
    text = (f"  {label:<22} {cpu:7.1f} ms CPU {wall:7.1f} ms wall  "
            f"{fresh['from_store']}/{fresh['runs']} from the store, "
            f"{cpu / fresh['fts'][1]:.1f}x FTS5")
    if fresh["against"]:
        a_wall, a_cpu = fresh["against"]
        text += (f"\n  {'  --against':<22} {a_cpu:7.1f} ms CPU {a_wall:7.1f} ms wall  "
                 f"{fresh['against_from_store']}/{fresh['runs']} from the store, "
                 f"{a_cpu / fresh['fts'][1]:.1f}x FTS5")
    return text


def one_size(base: Path, size: int, runs: int, against: Path | None) -> None:
    vault, paths, _ = make_vault(base, size)
    fts = base / f"fts-{size}.sqlite"
    build_fts(vault, fts)
    queries = queries_for(size, runs)
    settled(vault, queries[0])  # the first process builds the index and records its look
    settled(vault, queries[0])
    before = fresh_searches(vault, fts, queries, vault, against)
    seen = next(p for p in paths if not Path(p).parts[0].startswith("Scope"))
    if not vault.joinpath("Domain", "bench", "A note citing another.md").exists():
        cite(vault, Path(seen).stem)  # a node every session sees (Domain or Person)
    settled(vault, queries[0])
    settled(vault, queries[0])
    after = fresh_searches(vault, fts, queries, vault, against)
    citing = fresh_searches(vault, fts, [CITING_QUERY] * runs, vault, against)
    python_cpu = after["python"][1]
    print(f"{size:,} nodes, fresh process CPU, median of {runs} queries:")
    print(line("no node cites anything", before))
    print(line("after one citation", after))
    print(line("... the citing node hit", citing))
    print(f"  {'FTS5 query':<22} {after['fts'][1]:7.1f} ms CPU {after['fts'][0]:7.1f} ms wall")
    print(f"  {'python -c pass':<22} {python_cpu:7.1f} ms CPU", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="5000", help="node counts, comma separated")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--against", type=Path,
                        help="also time a fresh search from the osk source in this folder")
    parser.add_argument("--keep", type=Path, help="build (or reuse) the vaults here")
    args = parser.parse_args()
    with bench_folder(args.keep, "osk-cited-") as base:
        for size in (int(s) for s in args.size.split(",")):
            one_size(base, size, args.runs, args.against)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
