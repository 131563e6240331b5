"""What a new process pays before its first answer, at 5,000 nodes (run by hand, not in CI).

Prints the median wall time over several fresh processes of:

- `osk search QUERY` from the CLI (interpreter, imports, catalog restore, index load, query),
  with its CPU time and the load average beside it (target: 250 ms wall with bytecode cached;
  run it without ``PYTHONDONTWRITEBYTECODE``);
- the same with the catalog snapshot removed first (every node file read and parsed);
- in process: `Engine.open` and the first `Engine.search` separately;
- an `osk mcp` server from spawn to its first search result over stdio (the MCP SDK import
  alone is most of it; hosts start the server with the session, before the first question),
  lexical and then with the semantic channel on (where its model is installed, the first
  search waits for the model to load).

Usage: ``python bench/cold_bench.py [--size 5000] [--runs 5]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from search_bench import make_vault  # noqa: E402  (the synthetic vault the search bench uses)

IN_PROCESS = """
import sys, time
t0 = time.perf_counter()
from pathlib import Path
from osk.engine.core import Engine
t1 = time.perf_counter()
engine = Engine.open(sys.argv[1], cwd=Path(sys.argv[2]), scope=sys.argv[3])
t2 = time.perf_counter()
engine.search(sys.argv[4])
t3 = time.perf_counter()
print(t1 - t0, t2 - t1, t3 - t2)
"""

MCP_FIRST = """
import os, sys, time, anyio
t0 = time.perf_counter()
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

async def main():
    # The client passes the server only a few safe variables unless told: hand it OSK_SEMANTIC.
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "osk", "--vault", sys.argv[1], "mcp"],
                                   cwd=sys.argv[2], env={**os.environ, "OSK_SEMANTIC": sys.argv[4]})
    start = time.perf_counter()
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                ready = time.perf_counter()
                await session.call_tool("search", {"query": sys.argv[3]})
                done = time.perf_counter()
    print(ready - start, done - ready)

anyio.run(main)
"""


def median_ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.0f} ms"


def wall(args: list[str], env: dict[str, str] | None = None) -> float:
    return timed(args, env)[0]


def timed(args: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """A fresh process's wall time and CPU time (user + system)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(args, check=True, capture_output=True, env=env)
    took = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return took, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    # The lexical index's figures: the semantic channel has its own bench (semantic_bench.py).
    os.environ["OSK_SEMANTIC"] = "0"
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        vault, paths, _ = make_vault(Path(tmp), args.size)
        query = " ".join(Path(paths[0]).stem.split()[:2])  # two words of a real title
        scope = "atlas"
        cwd = Path(tmp)
        cli = [sys.executable, "-m", "osk", "--vault", str(vault), "search", query,
               "--scope", scope]
        subprocess.run(cli, check=True, capture_output=True)  # builds index and snapshot
        cli_runs = [timed(cli) for _ in range(args.runs)]
        warm_cli = [took for took, _ in cli_runs]
        load = os.getloadavg()[0]
        snapshot = vault / ".osk" / "catalog" / "snapshot.json"
        no_snapshot = []
        for _ in range(args.runs):
            snapshot.unlink(missing_ok=True)
            no_snapshot.append(wall(cli))
        subprocess.run(cli, check=True, capture_output=True)
        parts = []
        for _ in range(args.runs):
            out = subprocess.run([sys.executable, "-c", IN_PROCESS, str(vault), str(cwd), scope,
                                  query], check=True, capture_output=True, text=True).stdout
            parts.append([float(x) for x in out.split()])
        mcp: dict[str, list[list[float]]] = {"0": [], "1": []}  # OSK_SEMANTIC off / on
        for _ in range(max(3, args.runs // 2)):
            for semantic, runs in mcp.items():
                done = subprocess.run([sys.executable, "-c", MCP_FIRST, str(vault), str(cwd),
                                       query, semantic], capture_output=True, text=True)
                if done.returncode:
                    raise SystemExit(f"the MCP measurement failed:\n{done.stderr[-2000:]}")
                runs.append([float(x) for x in done.stdout.split()])
        python = [wall([sys.executable, "-c", "pass"]) for _ in range(args.runs)]
    bytecode = "off" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "on"
    print(f"{args.size} nodes, median of {args.runs} fresh processes (bytecode cache {bytecode}, "
          f"load average {load:.1f})")
    print(f"  python -c pass                          {median_ms(python)}")
    print(f"  osk search (CLI), snapshots on disk     {median_ms(warm_cli)} "
          f"(CPU {median_ms([cpu for _, cpu in cli_runs])}; target 250 ms)")
    print(f"  osk search (CLI), no catalog snapshot   {median_ms(no_snapshot)}")
    print(f"  in process: import osk.engine.core           {median_ms([p[0] for p in parts])}")
    print(f"  in process: Engine.open                 {median_ms([p[1] for p in parts])}")
    print(f"  in process: first search                {median_ms([p[2] for p in parts])}")
    lexical, semantic = mcp["0"], mcp["1"]
    print(f"  osk mcp: spawn to initialized           {median_ms([m[0] for m in lexical])}")
    print(f"  osk mcp: first search call              {median_ms([m[1] for m in lexical])}")
    print(f"  … with the semantic channel (model load) {median_ms([m[1] for m in semantic])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
