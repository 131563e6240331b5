"""How soon a fresh `osk mcp` answers the host's handshake, at 5,000 nodes (run by hand).

Builds the search bench's synthetic vault, starts the server once so it keeps the SDK's
handshake (what every later start answers from), then spawns it ``--runs`` times and reads,
from the moment of spawn, when ``initialize``, then ``tools/list``, then a first ``search``
are answered over raw JSON-RPC on its pipes (no client library in the way). Also prints what
the process imports: before the handshake (the CLI and the stdio front) and behind it (the MCP
SDK with pydantic, and the engine).

Usage: ``python bench/ready_bench.py [--size 5000] [--runs 10]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from search_bench import make_vault  # noqa: E402  (the synthetic vault the search bench uses)

from osk.surfaces.commands.hosts import _close, _Lines, _send  # noqa: E402  (doctor's JSON-RPC pipe)

DEADLINE = 120.0
IMPORTS = {
    "before the handshake: osk.surfaces.cli, osk.surfaces.stdio, osk.store.vault":
        "import osk.surfaces.cli, osk.surfaces.stdio, osk.store.vault",
    "behind it: osk.surfaces.server (the MCP SDK, pydantic)": "import osk.surfaces.server",
    "behind it: osk.engine": "import osk.engine",
}


def spawn(vault: Path, cwd: Path, query: str) -> tuple[float, float, float]:
    """Seconds from spawn to the initialize, tools/list and first search answers."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "osk", "--vault", str(vault), "mcp"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, cwd=cwd)
    deadline = time.monotonic() + DEADLINE
    try:
        lines = _Lines(proc)
        _send(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "ready-bench", "version": "1"}}})
        lines.response(1, deadline)
        initialized = time.perf_counter()
        _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        _send(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        listed = lines.response(2, deadline)
        assert len(listed["result"]["tools"]) == 12, listed  # type: ignore[index]
        tools = time.perf_counter()
        _send(proc, {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                     "params": {"name": "search", "arguments": {"query": query}}})
        found = lines.response(3, deadline)
        assert found["result"]["isError"] is False, found  # type: ignore[index]
        searched = time.perf_counter()
    finally:
        _close(proc)
    return initialized - start, tools - start, searched - start


def import_ms(statement: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", statement], check=True)
    return time.perf_counter() - start


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:6.0f} ms (min {min(values) * 1000:.0f}, " \
           f"max {max(values) * 1000:.0f})"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        vault, paths, _ = make_vault(Path(tmp), args.size)
        query = " ".join(Path(paths[0]).stem.split()[:2])  # two words of a real title
        cwd = Path(tmp)
        first = spawn(vault, cwd, query)  # keeps the handshake, builds the index and snapshots
        runs = [spawn(vault, cwd, query) for _ in range(args.runs)]
        python = [import_ms("pass") for _ in range(args.runs)]
        imports = {label: [import_ms(s) for _ in range(5)] for label, s in IMPORTS.items()}
    print(f"osk mcp at {args.size} nodes: median of {args.runs} spawns (wall time from spawn)")
    print(f"  initialize answered      {ms([r[0] for r in runs])}")
    print(f"  tools/list answered      {ms([r[1] for r in runs])}")
    print(f"  first search answered    {ms([r[2] for r in runs])}")
    print(f"  the very first spawn (no handshake kept yet): tools/list {first[1] * 1000:.0f} ms, "
          f"search {first[2] * 1000:.0f} ms")
    print(f"fresh interpreters, median of 5 (python -c pass: {ms(python)})")
    for label, values in imports.items():
        print(f"  {label:52} {ms(values)}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OSK_SEMANTIC", "0")  # the semantic channel has its own bench
    raise SystemExit(main())
