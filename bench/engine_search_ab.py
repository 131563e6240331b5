"""Warm ``Engine.search`` as ``osk mcp`` answers it, part by part (issue 26's per-query cost at
a million records: the nodes channel and the raw rounds channel together), on one or more
source trees side by side.

For each ``--tree`` (default: this checkout) a child process opens the server's engine on
``VAULT`` (``Engine.open(..., watch=True)``, the semantic channel off as in
``bench/rounds_scale.py``) from the vault's project (``DIR/work/tidepool`` beside
``DIR/vault-N``, or ``--cwd``) and answers queries sent to it one by one. The queries are
``rounds_scale``'s Corpus words (seed 2027, as ``bench/round_arrays_ab.py``). Each is asked
once of every tree first (the hits must be equal: ids, scores, markers, or it stops), then
``--runs`` times, the trees taking turns and the first changing from query to query, so every
tree meets the same page cache and load. ``--gap S``: that long between one query and the
next (a second or more: each search makes the engine's periodic look for hand edits, as an
agent's calls do); 0, back to back.

Each search's CPU time is split by the function it was spent in (its own time, not its
callees'):

- node look: ``Engine._fresh`` and ``Engine._sync_index`` (the catalog's look for changes);
- nodes: ``SearchIndex.search`` (the nodes' ranking), markers apart (``Engine.markers``);
- round look: ``RoundIndex.refresh`` (the raw folders' look);
- round top-k: the round index's top-k (``rounds._best``);
- round rest: ``RoundIndex._search`` around it and ``round_hits`` (rows, excerpts, hits);
- cited + fusion: ``Engine._cited_rounds`` and ``merged``;
- other: the rest of ``Engine.search``.

Prints, per tree, the CPU median and mean of the whole search and of each part, and with two
trees the second's over the first's. With two vaults (``VAULT VAULT2``, one tree each), every
tree answers on both, all taking turns, and the hits are compared within each vault: the two
sizes measured in the same minutes, which a shared machine's load otherwise moves between
runs. Run it on a copy of a vault (the engine writes its look files and catches the indexes
up).

Usage: ``python bench/engine_search_ab.py DIR/vault-100000 [DIR2/vault-1000] [--tree BASE
--tree .] [--queries 100] [--runs 3] [--gap 0]``. Run by hand, not in CI.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from search_bench import Corpus, in_turns, turn_arguments  # noqa: E402

SEED = 2027  # rounds_scale's Corpus: the same words
PARTS = ("node look", "nodes", "markers", "round look", "round top-k", "round rest",
         "cited + fusion", "other")

# The child: opens the engine, then for each query line read prints one JSON line (its CPU
# split by part, and the hits). Standard library and osk only: it runs on any tree.
CHILD = r'''
import json, os, sys, time
os.environ["OSK_SEMANTIC"] = "0"
from pathlib import Path
import osk
from osk.engine import core
from osk.search import rounds
from osk.search.index import SearchIndex

spent, stack = {}, []
clock = time.process_time

def timed(owner, name, part):
    inner = getattr(owner, name)
    def wrapper(*args, **kwargs):
        began = clock()
        stack.append(0.0)
        try:
            return inner(*args, **kwargs)
        finally:
            took = clock() - began
            nested = stack.pop()
            spent[part] = spent.get(part, 0.0) + took - nested
            if stack:
                stack[-1] += took
    setattr(owner, name, wrapper)

for owner, name, part in [
        (core.Engine, "_fresh", "node look"), (core.Engine, "_sync_index", "node look"),
        (SearchIndex, "search", "nodes"), (core.Engine, "markers", "markers"),
        (rounds.RoundIndex, "refresh", "round look"), (rounds, "_best", "round top-k"),
        (rounds.RoundIndex, "_search", "round rest"), (core, "round_hits", "round rest"),
        (core.Engine, "_cited_rounds", "cited + fusion"), (core, "merged", "cited + fusion"),
        (core.Engine, "search", "other")]:
    timed(owner, name, part)

began = time.perf_counter()
engine = core.Engine.open(Path(sys.argv[1]), cwd=Path(sys.argv[2]), watch=True)
print(json.dumps({"osk": osk.__file__, "open_s": time.perf_counter() - began}), flush=True)
for line in sys.stdin:
    query = line.rstrip("\n")
    spent.clear()
    began = clock()
    found = engine.search(query)
    took = clock() - began
    hits = [[hit.id, hit.path, repr(hit.score), list(hit.markers)] for hit in found.hits]
    print(json.dumps({"cpu": took, "parts": spent, "hits": hits}), flush=True)
'''


class Tree:
    """One tree's child: its engine open, answering one query at a time."""

    def __init__(self, tree: Path, vault: Path, cwd: Path) -> None:
        self.vault = vault
        env = {k: v for k, v in os.environ.items() if k != "OSK_VAULT"}
        env["PYTHONPATH"] = str(tree)
        env["OSK_SEMANTIC"] = "0"
        self.tree = tree
        self.child = subprocess.Popen([sys.executable, "-c", CHILD, str(vault), str(cwd)],
                                      cwd=tree, env=env, stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True)
        opened = self._line()
        print(f"{tree} on {vault.name}: osk from {opened['osk']}, engine open in "
              f"{opened['open_s']:.1f} s wall", flush=True)
        self.times: list[float] = []
        self.parts: dict[str, list[float]] = {part: [] for part in PARTS}

    def _line(self) -> dict[str, Any]:
        out: IO[str] | None = self.child.stdout
        assert out is not None
        line = out.readline()
        if not line:
            raise SystemExit(f"the child on {self.tree} stopped")
        found: dict[str, Any] = json.loads(line)
        return found

    def ask(self, query: str, *, keep: bool) -> list[Any]:
        """The query's hits; its CPU kept when ``keep``."""
        given: IO[str] | None = self.child.stdin
        assert given is not None
        given.write(query + "\n")
        given.flush()
        found = self._line()
        if keep:
            self.times.append(found["cpu"] * 1000)
            for part in PARTS:
                self.parts[part].append(found["parts"].get(part, 0.0) * 1000)
        hits: list[Any] = found["hits"]
        return hits

    def close(self) -> None:
        if self.child.stdin is not None:
            self.child.stdin.close()
        self.child.wait()


def cpu(values: list[float]) -> str:
    return f"{statistics.median(values):7.3f} / {statistics.mean(values):7.3f}"


def report(trees: list[Tree]) -> None:
    print(f"CPU ms, median / mean ({len(trees[0].times)} searches a tree):")
    print(f"{'':16s}" + "".join(f"{(tree.tree.name + ' ' + tree.vault.name)[-18:]:>20s}"
                                for tree in trees)
          + ("    ratio (median)" if len(trees) == 2 else ""))
    rows = [("Engine.search", [tree.times for tree in trees])]
    rows += [(part, [tree.parts[part] for tree in trees]) for part in PARTS]
    for name, columns in rows:
        line = f"{name:16s}" + "".join(f"{cpu(values):>20s}" for values in columns)
        if len(columns) == 2 and statistics.median(columns[0]) > 0:
            line += f"    {statistics.median(columns[1]) / statistics.median(columns[0]):5.2f}"
        print(line, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("vault", type=Path, nargs="+", help="one vault, or two (sizes)")
    parser.add_argument("--tree", type=Path, action="append",
                        help="a source tree to import osk from (repeat; default: this one)")
    parser.add_argument("--cwd", type=Path, help="where the session works (default: the "
                        "vault's project, DIR/work/tidepool)")
    turn_arguments(parser)
    args = parser.parse_args()
    corpus = Corpus(SEED)
    queries = [corpus.query() for _ in range(args.queries)]
    trees = [Tree(tree.resolve(), vault, args.cwd or vault.resolve().parent / "work" /
                  "tidepool") for vault in args.vault for tree in args.tree or [BENCH.parent]]
    try:
        for query in queries:  # each query's pages read once, and the trees' hits compared
            answers: dict[Path, list[Any]] = {}
            for tree in trees:
                hits = tree.ask(query, keep=False)
                if answers.setdefault(tree.vault, hits) != hits:
                    raise SystemExit(f"the trees' hits differ on {query!r} in {tree.vault}")
        in_turns(queries, args.runs, args.gap,
                 [functools.partial(tree.ask, keep=True) for tree in trees])
        report(trees)
    finally:
        for tree in trees:
            tree.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
