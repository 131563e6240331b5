"""What a new process's catalog costs on a large vault: restoring it from the snapshot, its
first save (what every engine that finds a change since the last snapshot makes: a server at
its first look after a change, `osk sync`'s catch-up, a command after a hand edit) and a
second save, on this tree and, with ``--against``, another one in the same run.

Each run is a child process (osk imported from the tree under test) that refreshes a
``Catalog`` of ``VAULT`` with its save held back, then saves twice, each marked as changed,
and prints the CPU of each step. The trees take turns, run by run. The vault is only read
(and its snapshot rewritten, with the same entries); run it on a copy you keep for benches.

Usage: ``python bench/catalog_first_save.py VAULT [--runs 5] [--against TREE]``. Run by
hand, not in CI.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from tree_child import run_in_tree  # noqa: E402

STEPS = ("restore", "first save", "second save")

CHILD = """
import json, sys, time
from pathlib import Path
from osk.engine.vaults import open_vault
from osk.store.catalog import Catalog
vault = open_vault(Path(sys.argv[1]))
Catalog.save_if_due = lambda self: None  # the refresh's own save held back, to time it apart
catalog = Catalog(vault)
spent = {}
began = time.process_time()
catalog.refresh()
spent["restore"] = time.process_time() - began
for step in ("first save", "second save"):
    catalog._dirty = True
    began = time.process_time()
    catalog.save_snapshot()
    spent[step] = time.process_time() - began
print(json.dumps({"entries": len(catalog.entries), **spent}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("vault", type=Path)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--against", type=Path, default=None, help="another source tree")
    args = parser.parse_args()
    trees = [BENCH.parent] + ([args.against.resolve()] if args.against else [])
    spent: dict[Path, dict[str, list[float]]] = {tree: {step: [] for step in STEPS}
                                                 for tree in trees}
    for number in range(args.runs):
        for tree in trees if number % 2 == 0 else trees[::-1]:
            found = run_in_tree(tree, CHILD, str(args.vault))
            for step in STEPS:
                spent[tree][step].append(found[step] * 1000)
            print(f"run {number + 1}, {tree}: {found['entries']} entries; " + ", ".join(
                f"{step} {found[step] * 1000:.0f} ms" for step in STEPS), flush=True)
    print(f"CPU ms, median (min-max) of {args.runs} runs:")
    for step in STEPS:
        line = f"{step:12s}" + "".join(
            f"  {tree.name}: {statistics.median(spent[tree][step]):6.0f} "
            f"({min(spent[tree][step]):.0f}-{max(spent[tree][step]):.0f})" for tree in trees)
        if args.against:
            first, second = (statistics.median(spent[tree][step]) for tree in trees)
            line += f"  ratio {first / second:.2f}"
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
