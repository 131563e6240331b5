"""How soon a fresh `osk mcp` answers the host's handshake and its first search, at 5,000
nodes (run by hand).

Builds the search bench's synthetic vault, starts the server once so it keeps the SDK's
handshake (what every later start answers from), then spawns it ``--runs`` times and reads,
from the moment of spawn, when ``initialize``, ``tools/list`` and a first ``search`` are
answered over raw JSON-RPC on its pipes (no client library in the way). The three are sent at
once, as a host whose model searches first thing does. ``python -c pass`` is timed in the same
run, interleaved with the spawns, and the first search is also given as its multiple above
that interpreter: ``(search - python) / python``. ``--load N`` keeps N busy-loop processes
running meanwhile (started here, ended by their PIDs). Also prints what the process imports:
before the handshake (the CLI and the stdio front) and behind it (the MCP SDK with pydantic,
and the engine).

Usage: ``python bench/ready_bench.py [--size 5000] [--runs 10] [--load 0]``.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from search_bench import make_vault  # noqa: E402  (the synthetic vault the search bench uses)

from osk.hosts.connect import ReplyLines, close_server, send_message  # noqa: E402  (doctor's pipe)
from osk.store.vault import init  # noqa: E402

DEADLINE = 600.0  # the first spawn builds the index: minutes on a loaded machine
IMPORTS = {
    "before the handshake: osk.surfaces.cli, osk.surfaces.stdio, osk.store.vault":
        "import osk.surfaces.cli, osk.surfaces.stdio, osk.store.vault",
    "behind it: osk.surfaces.server (the MCP SDK, pydantic)": "import osk.surfaces.server",
    "behind it: osk.engine.core": "import osk.engine.core",
}


def spawn(vault: Path, cwd: Path, query: str) -> tuple[float, float, float]:
    """Seconds from spawn to the initialize, tools/list and first search answers."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "osk", "--vault", str(vault), "mcp"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, cwd=cwd)
    deadline = time.monotonic() + DEADLINE
    try:
        lines = ReplyLines(proc)
        send_message(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "ready-bench", "version": "1"}}})
        send_message(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        send_message(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        send_message(proc, {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                            "params": {"name": "search", "arguments": {"query": query}}})
        at: dict[object, float] = {}
        while len(at) < 3:
            answer = lines.next_answer(deadline, {1, 2, 3} - set(at))
            at[answer["id"]] = time.perf_counter() - start
            if answer["id"] == 3:
                assert answer["result"]["isError"] is False, answer  # type: ignore[index]
    finally:
        close_server(proc)
    return at[1], at[2], at[3]


ENVELOPE = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}


def learn_envelope(vault: Path, cwd: Path) -> None:
    """One envelope connection (Claude Code's generation), so the server keeps both
    generations' handshakes, as it does once `osk doctor` has connected as each host."""
    proc = subprocess.Popen([sys.executable, "-m", "osk", "--vault", str(vault), "mcp"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, cwd=cwd)
    deadline = time.monotonic() + DEADLINE
    try:
        lines = ReplyLines(proc)
        for id_, method in ((1, "server/discover"), (2, "tools/list")):
            send_message(proc, {"jsonrpc": "2.0", "id": id_, "method": method,
                                "params": {"_meta": ENVELOPE}})
            lines.response(id_, deadline)
    finally:
        close_server(proc)


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
    parser.add_argument("--load", type=int, default=0, help="busy-loop processes meanwhile")
    parser.add_argument("--first", type=int, default=0, metavar="N",
                        help="also N new empty vaults, each served for the first time (no "
                             "handshake of its own), under the same load")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        vault, paths, _ = make_vault(Path(tmp), args.size)
        query = " ".join(Path(paths[0]).stem.split()[:2])  # two words of a real title
        cwd = Path(tmp)
        first = spawn(vault, cwd, query)  # keeps the handshake, builds the index and snapshots
        learn_envelope(vault, cwd)
        loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                 for _ in range(args.load)]
        try:
            runs, python, firsts = [], [], []
            for _ in range(args.runs):  # interleaved, so both see the same load
                runs.append(spawn(vault, cwd, query))
                python.append(import_ms("pass"))
            for number in range(args.first):
                new = init(Path(tmp) / f"new-{number}", git=False).root
                firsts.append(spawn(new, cwd, query))
        finally:
            for loop in loops:
                os.kill(loop.pid, signal.SIGKILL)
                loop.wait()
        imports = {label: [import_ms(s) for _ in range(5)] for label, s in IMPORTS.items()}
    searches = [r[2] for r in runs]
    above = [(s - p) / p for s, p in zip(searches, python, strict=True)]
    print(f"osk mcp at {args.size} nodes, {args.load} busy loop(s): median of {args.runs} "
          f"spawns (wall time from spawn; the three requests sent at once)")
    print(f"  initialize answered      {ms([r[0] for r in runs])}")
    print(f"  tools/list answered      {ms([r[1] for r in runs])}")
    print(f"  first search answered    {ms(searches)}")
    print(f"  python -c pass           {ms(python)}")
    print(f"  first search above the interpreter, in python -c pass: median "
          f"{statistics.median(above):.1f}x (min {min(above):.1f}, max {max(above):.1f})")
    print(f"  the very first spawn (no handshake kept yet): tools/list {first[1] * 1000:.0f} ms, "
          f"search {first[2] * 1000:.0f} ms")
    if firsts:
        print(f"  a new vault's first spawn, median of {args.first}: initialize "
              f"{ms([r[0] for r in firsts])}, tools/list {ms([r[1] for r in firsts])}")
    print("fresh interpreters, median of 5")
    for label, values in imports.items():
        print(f"  {label:52} {ms(values)}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OSK_SEMANTIC", "0")  # the semantic channel has its own bench
    raise SystemExit(main())
