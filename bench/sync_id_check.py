"""What a pull's checks cost before anything lands (``osk.sync.admission.admit``), the
duplicate-id check most of all, on one or two source trees side by side.

A copy of ``VAULT`` is made a git repository and published to a bare remote; a second clone
writes ``--brought`` new node files and pushes them with plain git, and the device fetches
them without landing. Then, ``--runs`` times, each tree (taking turns, the first changing from
run to run) checks that same fetch in a child process, its CPU measured with git's:

- ``kept``: with the device's map of node files to ids as the last pull leaves it (the ids
  of the device's own tree, made by the tree measured; ``osk.sync.node_ids``), so only the
  brought files are new;
- ``none``: without the map, as on a device's first pull (a tree that keeps no map checks the
  same way in both).

Prints the median CPU and wall per tree and state. Run by hand, not in CI (minutes at 100,000
nodes: the copy and its publication).

Usage: ``python bench/sync_id_check.py DIR/vault-10000 [--against TREE] [--brought 200]
[--runs 3] [--keep DIR]``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from scale_bench import bench_folder  # noqa: E402
from tree_child import CHILD_CPU, run_in_tree  # noqa: E402
from vault_remote import git, published_copy  # noqa: E402

CHECK_CHILD = CHILD_CPU + """
import json, sys, time
from pathlib import Path
from osk.store.vault import Vault
from osk.sync import admission
from osk.sync.cycle_state import Cycle, SyncResult
from osk.sync.gitrepo import open_repo
vault = Vault(Path(sys.argv[1]))
with open_repo(vault.root) as repo:
    cycle = Cycle(vault, repo, "origin", "main", None, "bench", SyncResult("origin", "main"))
    local, upstream = repo.sha("HEAD"), repo.sha("origin/main")
    began, clock = cpu(), time.perf_counter()
    admission.admit(cycle, local, upstream)
    print(json.dumps({"cpu_ms": (cpu() - began) * 1000,
                      "wall_ms": (time.perf_counter() - clock) * 1000}))
"""

# The map as the last pull leaves it: the ids of the device's own tree, made by the tree
# measured (the text map of blobs before the SQLite file held the tree: either is asked).
KEEP_CHILD = """
import json, sys
from pathlib import Path
from osk.store.vault import Vault
from osk.sync.gitrepo import open_repo
from osk.sync.node_ids import carried_ids
vault = Vault(Path(sys.argv[1]))
with open_repo(vault.root) as repo:
    try:
        carried_ids(vault, repo, "HEAD", ())
    except TypeError:
        carried_ids(vault, repo, "HEAD")
print(json.dumps({"primed": True}))
"""
# The files either kind of map is kept in, in device state.
MAPS = ("node-ids", "node-ids.sqlite")

NODE = """---
id: {id}
created: 2026-12-07T09:00+00:00
updated: 2026-12-07T09:00+00:00
author: agent
drafter: bench
summary: "Brought note {number} about tidepool lanterns."
derived-from: []
---
Tidepool lantern number {number} glows at dusk.
"""


def brought_by_hand(remote: Path, writer: Path, count: int) -> None:
    """Clone ``remote`` to ``writer``, write ``count`` new node files and push them."""
    git(remote.parent, "clone", "-q", str(remote), str(writer))
    folder = writer / "Domain" / "brought"
    folder.mkdir(parents=True, exist_ok=True)
    for number in range(count):
        (folder / f"Brought note {number}.md").write_text(
            NODE.format(id=f"00000000-0000-7000-8000-{number:012d}", number=number),
            encoding="utf-8")
    git(writer, "add", "-A")
    git(writer, "-c", "user.name=bench", "-c", "user.email=bench@localhost", "commit", "-q",
        "-m", f"{count} brought nodes")
    git(writer, "push", "-q", "origin", "main")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("vault", type=Path)
    parser.add_argument("--against", type=Path, action="append", default=[],
                        help="another source tree to measure beside this checkout")
    parser.add_argument("--brought", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="work here and leave it (else a temp dir)")
    args = parser.parse_args()
    here = BENCH.parent
    trees = [here, *(tree.resolve() for tree in args.against)]
    with bench_folder(args.keep, "osk-id-check-") as work:
        device, remote = work / "device", work / "remote.git"
        print(published_copy(args.vault, device, remote))
        brought_by_hand(remote, work / "writer", args.brought)
        git(device, "fetch", "-q", "origin")
        state_dir = device / ".osk" / "sync"
        for number, tree in enumerate(trees):
            _clear(state_dir)
            print(f"map kept by {tree}:", run_in_tree(tree, KEEP_CHILD, str(device)),
                  flush=True)
            _copy_maps(state_dir, work / f"kept-{number}")
        found: dict[tuple[Path, str], list[dict[str, float]]] = {}
        for run in range(args.runs):
            for state in ("kept", "none"):
                order = trees[run % len(trees):] + trees[:run % len(trees)]
                for tree in order:
                    _clear(state_dir)
                    if state == "kept":
                        _copy_maps(work / f"kept-{trees.index(tree)}", state_dir)
                    found.setdefault((tree, state), []).append(
                        run_in_tree(tree, CHECK_CHILD, str(device)))
        print(f"the checks of a pull bringing {args.brought} nodes, median of {args.runs}:")
        for (tree, state), runs in found.items():
            cpu = statistics.median(r["cpu_ms"] for r in runs)
            wall = statistics.median(r["wall_ms"] for r in runs)
            print(f"  {tree} map {state:<5} CPU {cpu:8.0f} ms  wall {wall:8.0f} ms")
    return 0


def _clear(state_dir: Path) -> None:
    for name in MAPS:
        (state_dir / name).unlink(missing_ok=True)


def _copy_maps(source: Path, target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    for name in MAPS:
        if (source / name).exists():
            shutil.copy(source / name, target / name)


if __name__ == "__main__":
    sys.exit(main())
