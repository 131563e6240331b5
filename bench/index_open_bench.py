"""The engine's open and first search, then its warm searches, in fresh processes (issue 26).

What a long-running engine (``osk mcp``) pays to restore its search index, and what a search
costs once it is loaded: each run is one fresh process that opens ``Engine`` on a vault the
scale bench built (``scale_bench.py --keep DIR``), searches once (the catalog read, the index
loaded from ``.osk/index``), then runs the scale bench's queries three times back to back.
Then it updates 9 nodes it loaded (``update_node``, a word edited; each run other nodes, so
each is a version the index loaded, not one this process wrote). Prints CPU per run: the
open with the first search, the warm searches' median, and the updates' median (the first
left out: it pays the write path's imports).

``--pair PYTHON VAULT`` (twice or more) alternates interpreters and vaults run by run, so two
trees are compared in one sitting: each tree on a vault of its own (the same notes, built by
that tree), as the index format may differ between them::

    python bench/index_open_bench.py --size 10000 --runs 5 \\
        --pair ../base/.venv/bin/python DIR/base/vault-10000 \\
        --pair .venv/bin/python DIR/mine/vault-10000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent

CHILD = """
import json, os, statistics, sys, time
from pathlib import Path
os.environ["OSK_SEMANTIC"] = "0"
from osk.calls.request import NodeEdit
from osk.engine.core import Engine
root, queries, first = Path(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3])
cpu = time.process_time()
engine = Engine.open(root, cwd=root, scope="atlas", watch=True)
engine.search(queries[0])
opened = time.process_time() - cpu
warm = []
for query in queries * 3:
    cpu = time.process_time()
    engine.search(query)
    warm.append(time.process_time() - cpu)
updates = []
for rel in sorted(p for p in engine.catalog.entries if p.startswith("Domain/"))[first:first + 9]:
    body = (root / rel).read_text("utf-8").split("---", 2)[2].split()
    old = " ".join(body[:3])
    cpu = time.process_time()
    engine.update_node(Path(rel).stem, NodeEdit(old_text=old, new_text=old + " edited"))
    updates.append(time.process_time() - cpu)
print(json.dumps({"open": opened * 1000, "warm": statistics.median(warm) * 1000,
                  "update": statistics.median(updates[1:]) * 1000}))
"""


def run(python: str, vault: Path, queries: list[str], first: int) -> dict[str, float]:
    env = {key: value for key, value in os.environ.items()
           if key not in {"OSK_VAULT", "PYTHONDONTWRITEBYTECODE"}}
    argv = [os.path.abspath(python), "-c", CHILD, str(vault), json.dumps(queries), str(first)]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=vault, check=False)
    if done.returncode:
        raise SystemExit(done.stderr[-2000:])
    found: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, required=True, help="the vault's node count")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--offset", type=int, default=0,
                        help="the first Domain node updated (a later sitting: past the last's)")
    parser.add_argument("--pair", nargs=2, action="append", metavar=("PYTHON", "VAULT"),
                        required=True)
    args = parser.parse_args()
    sys.path.insert(0, str(BENCH))
    from scale_bench import queries_for  # the scale bench's queries, made here for every tree

    queries = queries_for(args.size, 7)
    results: list[list[dict[str, float]]] = [[] for _ in args.pair]
    for turn in range(args.runs):
        for number, (python, vault) in enumerate(args.pair):
            # each run updates nodes no run updated before: loaded versions, not this one's
            results[number].append(run(python, Path(vault), queries, 9 * turn + args.offset))
    for (python, vault), found in zip(args.pair, results, strict=True):
        opens = [run_["open"] for run_ in found]
        warms = [run_["warm"] for run_ in found]
        updates = [run_["update"] for run_ in found]
        print(f"{vault} ({python}): open + first search CPU median "
              f"{statistics.median(opens):.0f} ms (runs {', '.join(f'{v:.0f}' for v in opens)}); "
              f"warm Engine.search median {statistics.median(warms):.2f} ms "
              f"(runs {', '.join(f'{v:.2f}' for v in warms)}); update of a loaded node "
              f"median {statistics.median(updates):.1f} ms "
              f"(runs {', '.join(f'{v:.1f}' for v in updates)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
