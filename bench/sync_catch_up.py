"""After `osk sync` lands another device's nodes: what the next fresh `osk search` and `osk read`
cost, with the catch-up the sync verb makes (``osk.verbs.syncing.caught_up``) and without it
(the cycle alone, ``sync_once``), side by side (issue 26 item 2: what `osk sync` lands reaches
the index without a walk on the request path).

A copy of ``VAULT`` is made a git repository and published to a bare remote; two devices clone
it ("plain" and "caught") and each records a look with an engine's search. Then, ``--rounds``
times: the first device writes ``--landed`` new node files and syncs; each device syncs (in a
child process, its CPU measured), then runs ``--searches`` fresh `osk read` and then `osk
search` processes, alternating between the two devices. Each child's CPU is measured, and
whether it opened the engine (``osk.engine.core`` imported) or answered from the stores.
Prints medians per device and step. Run by hand, not in CI (minutes at 10,000 nodes).

Usage: ``python bench/sync_catch_up.py DIR/vault-10000 [--landed 200] [--rounds 3]
[--searches 3] [--keep DIR]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale_bench import bench_folder  # noqa: E402
from vault_remote import git, published_copy  # noqa: E402

SEARCH_CHILD = """
import sys
from osk.surfaces.cli import main
code = main(["--vault", sys.argv[1], *sys.argv[2:]])
sys.stdout.flush()
print("PATH", "engine" if "osk.engine.core" in sys.modules else "store", file=sys.stderr)
sys.exit(code)
"""

SYNC_CHILD = """
import sys
from osk.store.vault import Vault
from osk.sync.cycle import sync_once
from osk.verbs import syncing
vault = Vault(__import__("pathlib").Path(sys.argv[1]))
result = syncing.once(vault) if sys.argv[2] == "caught" else sync_once(vault)
print(result.line())
"""

LOOK_CHILD = """
import sys
from osk.engine.core import Engine
Engine.open(sys.argv[1]).search("anything")
"""

WRITE_CHILD = """
import sys
from osk.store import clock
from osk.store.contract import Frontmatter
from osk.store.fsutil import atomic_write
from osk.store.ids import uuid7
from osk.store.node import render
from osk.store.vault import Vault
from osk.sync.cycle import sync_once
vault = Vault(__import__("pathlib").Path(sys.argv[1]))
first, count = int(sys.argv[2]), int(sys.argv[3])
for number in range(first, first + count):
    now = clock.now_text()
    meta = Frontmatter(id=uuid7(), created=now, updated=now, author="agent", drafter="bench",
                       summary=f"Landed note {number} about tidepool lanterns.")
    atomic_write(vault.abs(f"Domain/landed/Landed note {number}.md"),
                 render(meta, f"Tidepool lantern number {number} glows at dusk.\\n"))
print(sync_once(vault).line())
"""


def run(args: list[str], cwd: Path) -> tuple[float, str, str]:
    """A child's CPU seconds (user + system), stdout and stderr."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "OSK_SEMANTIC": "0"})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{args[:3]} failed:\n{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, done.stdout, done.stderr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("vault", type=Path)
    parser.add_argument("--landed", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--searches", type=int, default=3)
    parser.add_argument("--keep", type=Path, default=None)
    args = parser.parse_args()
    with bench_folder(args.keep, "osk-sync-bench-") as base:
        writer, remote = base / "writer", base / "remote.git"
        print(published_copy(args.vault, writer, remote), flush=True)
        devices = {}
        for name in ("plain", "caught"):
            devices[name] = base / name
            git(base, "clone", "-q", str(remote), str(devices[name]))
            cpu, _, _ = run(["-c", LOOK_CHILD, str(devices[name])], base)
            print(f"{name}: cloned, a look recorded ({cpu:.1f} s CPU)", flush=True)
        cpu_of: dict[tuple[str, str], list[float]] = {}
        paths: dict[tuple[str, str], list[str]] = {}
        for number in range(args.rounds):
            first = number * args.landed
            print(run(["-c", WRITE_CHILD, str(writer), str(first), str(args.landed)],
                      base)[1].strip(), flush=True)
            for name, device in devices.items():
                cpu, out, _ = run(["-c", SYNC_CHILD, str(device), name], base)
                cpu_of.setdefault((name, "sync"), []).append(cpu)
                print(f"  {name}: {out.strip()} ({cpu:.2f} s CPU)", flush=True)
            steps = [("read", ["read", f"Landed note {first + 1}"]),
                     ("search", ["search", "tidepool lantern dusk"])]
            for step, command in steps:
                for _ in range(args.searches):
                    for name, device in devices.items():
                        cpu, _, err = run(["-c", SEARCH_CHILD, str(device), *command], base)
                        cpu_of.setdefault((name, step), []).append(cpu)
                        paths.setdefault((name, step), []).append(err.split("PATH ")[-1].strip())
        print(f"\n{args.landed} node files landed a round, {args.rounds} rounds; CPU medians "
              f"(each step's first process after the landing apart):")
        for step in ("sync", "read", "search"):
            for name in devices:
                times = cpu_of[(name, step)]
                firsts = times[::args.searches] if step != "sync" else times
                rest = [t for i, t in enumerate(times) if i % args.searches] if step != "sync" \
                    else []
                answered = paths.get((name, step), [])
                line = f"{step:7s} {name:7s} first {statistics.median(firsts) * 1000:7.0f} ms"
                if rest:
                    line += f", later {statistics.median(rest) * 1000:6.0f} ms"
                if answered:
                    line += (f"; from the store {answered.count('store')}/{len(answered)} "
                             f"(first ones {answered[::args.searches].count('store')}/"
                             f"{len(answered[::args.searches])})")
                print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
