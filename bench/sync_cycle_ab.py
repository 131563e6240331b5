"""A whole `osk sync` cycle (``osk.sync.cycle.sync_once``: commit, fetch, admission, rebase,
landing, push), on one or two source trees side by side, for three kinds of cycle:

- ``push``: this device wrote one node, the remote has nothing new;
- ``pull``: the remote holds ``--brought`` nodes another device wrote, this device nothing;
- ``rebase``: both, so this device's commit is rebased onto the remote's before it is pushed.

A copy of ``VAULT`` is made a git repository and published to a bare remote (its id map made
by this checkout's first cycle), and a second clone pushes the brought nodes with plain git.
Each run starts from copies of those two states, so every tree meets the same repository;
the trees take turns, the first changing from run to run. Each cycle runs in a child process
(``bench/tree_child.py``), its CPU counted with git's. Prints the median CPU and wall per kind
and tree. Run by hand, not in CI (minutes at 100,000 nodes: every run copies the vault).

Usage: ``python bench/sync_cycle_ab.py DIR/vault-10000 [--against TREE] [--kinds
push,pull,rebase] [--brought 200] [--runs 3] [--keep DIR]``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from scale_bench import bench_folder  # noqa: E402
from sync_id_check import NODE, brought_by_hand  # noqa: E402
from tree_child import CHILD_CPU, run_in_tree  # noqa: E402
from vault_remote import git, published_copy  # noqa: E402

CYCLE_CHILD = CHILD_CPU + """
import json, sys, time
from pathlib import Path
from osk.store.vault import Vault
from osk.sync.cycle import sync_once
vault = Vault(Path(sys.argv[1]))
began, clock = cpu(), time.perf_counter()
result = sync_once(vault)
print(json.dumps({"cpu_ms": (cpu() - began) * 1000,
                  "wall_ms": (time.perf_counter() - clock) * 1000,
                  "pulled": result.pulled, "pushed": result.pushed}))
"""
KINDS = ("push", "pull", "rebase")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("vault", type=Path)
    parser.add_argument("--against", type=Path, action="append", default=[],
                        help="another source tree to measure beside this checkout")
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--brought", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="work here and leave it (else a temp dir)")
    args = parser.parse_args()
    kinds = args.kinds.split(",")
    if unknown := set(kinds) - set(KINDS):
        parser.error(f"unknown kinds {sorted(unknown)}: choose from {', '.join(KINDS)}")
    trees = [BENCH.parent, *(tree.resolve() for tree in args.against)]
    with bench_folder(args.keep, "osk-sync-cycle-") as work:
        level = work / "level"
        print(published_copy(args.vault, level / "device", level / "remote.git"), flush=True)
        for repository in (level / "device", level / "remote.git"):
            git(repository, "gc", "-q")  # packed, as git's auto gc leaves a repository in use
        behind = work / "behind"
        _copy(level, behind)
        brought_by_hand(behind / "remote.git", work / "writer", args.brought)
        found: dict[tuple[str, Path], list[dict[str, float]]] = {}
        for run in range(args.runs):
            for kind in kinds:
                for tree in trees[run % len(trees):] + trees[:run % len(trees)]:
                    found.setdefault((kind, tree), []).append(
                        _cycle(work, level if kind == "push" else behind, kind, run, tree))
        print(f"a sync cycle, CPU with git's, median of {args.runs} "
              f"({args.brought} nodes brought by a pull):")
        for (kind, tree), runs in found.items():
            cpu = statistics.median(r["cpu_ms"] for r in runs)
            wall = statistics.median(r["wall_ms"] for r in runs)
            moved = f"pulled {runs[0]['pulled']} pushed {runs[0]['pushed']}"
            print(f"  {kind:<6} {tree}: CPU {cpu:7.0f} ms  wall {wall:7.0f} ms  ({moved})")
    return 0


def _cycle(work: Path, start: Path, kind: str, run: int, tree: Path) -> dict[str, float]:
    """One cycle of ``kind`` on a fresh copy of ``start``, in a child on the tree asked."""
    here = work / "run"
    shutil.rmtree(here, ignore_errors=True)
    _copy(start, here)
    if kind != "pull":
        folder = here / "device" / "Domain" / "local"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "Local note.md").write_text(
            NODE.format(id=f"00000000-0000-7000-9000-{run:012d}", number=run),
            encoding="utf-8")
    return run_in_tree(tree, CYCLE_CHILD, str(here / "device"))


def _copy(pair: Path, to: Path) -> None:
    """Copy a device and its remote (``cp -a``: a hundred thousand files), the copy's device
    pointed at the copy's remote."""
    subprocess.run(["cp", "-a", str(pair), str(to)], check=True)
    git(to / "device", "remote", "set-url", "origin", str(to / "remote.git"))


if __name__ == "__main__":
    sys.exit(main())
