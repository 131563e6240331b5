"""What an idle `osk sync --daemon` costs between cycles, as the vault grows: the CPU of one poll
(the daemon's look for local changes), on this tree and, with ``--against``, another one in the
same run.

A copy of ``VAULT`` is made a git repository and published to a bare remote. For each run, a
child process (osk imported from the tree under test) starts the daemon on it (an hour's
interval, ``--poll`` seconds between looks), lets its first cycle end and three more polls
pass, then measures its own CPU (with git's, its children's) over ``--seconds`` of idling. The
trees take turns, run by run. Prints each tree's median CPU a poll and, with two trees, the
ratio.

Usage: ``python bench/sync_daemon_idle.py DIR/vault-100000 [--seconds 20] [--poll 1]
[--runs 3] [--against TREE] [--keep DIR]``. Run by hand, not in CI.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from scale_bench import bench_folder  # noqa: E402
from tree_child import CHILD_CPU, run_in_tree  # noqa: E402
from vault_remote import published_copy  # noqa: E402

IDLE_CHILD = CHILD_CPU + """
import json, sys, threading, time
from pathlib import Path
from osk.engine.vaults import open_vault
from osk.sync import daemon
vault = open_vault(Path(sys.argv[1]))
seconds, poll = float(sys.argv[2]), float(sys.argv[3])
lines, stop = [], threading.Event()
thread = threading.Thread(target=daemon.daemon, args=(vault,), kwargs=dict(
    interval=3600.0, poll=poll, stop=stop, report=lines.append))
thread.start()
while not lines:
    time.sleep(0.05)
time.sleep(3 * poll)
began = cpu()
time.sleep(seconds)
spent = cpu() - began
stop.set()
thread.join()
print(json.dumps({"cpu_ms": spent * 1000, "polls": seconds / poll, "cycles": len(lines),
                  "first": lines[0]}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("vault", type=Path)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--poll", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--against", type=Path, default=None, help="another source tree")
    parser.add_argument("--keep", type=Path, default=None)
    args = parser.parse_args()
    with bench_folder(args.keep, "osk-daemon-bench-") as base:
        device = base / "device"
        if not (device / ".git").is_dir():
            print(published_copy(args.vault, device, base / "remote.git"), flush=True)
        trees = [BENCH.parent] + ([args.against.resolve()] if args.against else [])
        per_poll: dict[Path, list[float]] = {tree: [] for tree in trees}
        for run in range(args.runs):
            for tree in trees if run % 2 == 0 else trees[::-1]:
                found = run_in_tree(tree, IDLE_CHILD, str(device), str(args.seconds),
                                    str(args.poll))
                cpu = float(found["cpu_ms"]) / float(found["polls"])
                per_poll[tree].append(cpu)
                print(f"run {run + 1}, {tree}: {cpu:.1f} ms a poll ({found['first']})",
                      flush=True)
        medians = {tree: statistics.median(values) for tree, values in per_poll.items()}
        for tree, value in medians.items():
            print(f"{tree}: median {value:.1f} ms of CPU a poll ({args.runs} runs of "
                  f"{args.seconds:g} s, a poll every {args.poll:g} s)")
        if args.against:
            print(f"ratio (this tree / the other): {medians[trees[0]] / medians[trees[1]]:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
