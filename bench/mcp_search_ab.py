"""Warm search through ``osk mcp``, server CPU a call, on two or more vaults side by side (issue
26's per-query cost at a million records against ten thousand, measured as the issue asks it:
"warm search through ``osk mcp``").

For each ``VAULT`` (and each ``--tree``: a source tree osk is imported from, by
``PYTHONPATH``; default this checkout) an ``osk mcp`` is started over stdio from the vault's project
(``DIR/work/tidepool`` beside ``DIR/vault-N``, as ``bench/rounds_scale.py --keep DIR`` leaves
it), the semantic channel off (``OSK_SEMANTIC=0``, as the scale bench), and spoken to in MCP's
stdio framing (a JSON-RPC message a line): ``initialize``, then ``tools/call`` of ``search``.
The queries are ``rounds_scale``'s Corpus words (seed 2027, as ``bench/engine_search_ab.py``).
Each is asked once of every server first (its pages read once), then ``--runs`` times, the
servers taking turns and the first changing from query to query, so every server meets the
same page cache and load. ``--gap S``: that long idle before every call (a second or more:
each search then makes the engine's periodic look for hand edits, and meets the machine as an
agent's server does, after its own idle time); 0, back to back.

``--floor``: also a stand-in server of a few lines (standard library: it reads a line, parses
it, writes an answer of a search's size) asked in the same turns, whose CPU a call is what any
Python process pays to wake, read a request and answer it at that pace: the part of a search's
server CPU that is not osk's to cut. (Here 0.48-0.51 ms a call 1.1 s apart against 0.31 back
to back; the first system call after an idle second alone took 60 us of CPU, the next ones
3-12: docs/performance.md.)

Before the queries, each server is asked for a node no vault holds, which only the SDK answers,
with the engine open: the server's start-up (the SDK's import, a second of CPU on a thread of its
own while the front already answers searches, and the engine's opening, 2.5 s at a million
records) is then over before a call is measured. It used to fall in the calls measured first: at
a million records the old way measured 7.28 / 17.68 ms (median / mean) where this one measures
5.98 / 6.21, in back-to-back runs (docs/performance.md).

A call's server CPU is the CPU time every thread of the server's process ran between the
request written and the answer read (``/proc/PID/task/*/schedstat``, nanoseconds): the whole
of what the server spends on the call, its JSON-RPC framing and the tool's arguments and
result included, as a user's machine pays it. A call during which one of its threads ended is
left out (what that thread ran since the call began is gone with it) and counted. The client's
wall time a call is printed too.

Usage: ``python bench/mcp_search_ab.py DIR/vault-100000 DIR2/vault-1000 [--tree BASE --tree .]
[--queries 100] [--runs 3] [--gap 0] [--floor]``. Run by hand, not in CI. Linux only (``/proc``).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from search_bench import Corpus, in_turns, turn_arguments  # noqa: E402

SEED = 2027  # rounds_scale's Corpus: the same words
PROTOCOL = "2025-06-18"


def ran_ns(pid: int) -> dict[int, int]:
    """Nanoseconds each live thread of ``pid`` has run on a CPU, by thread id."""
    ran = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            ran[int(task.name)] = int((task / "schedstat").read_text(encoding="ascii").split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that ended between the listing and the read
    return ran


def spent_ns(before: dict[int, int], after: dict[int, int]) -> int | None:
    """What the threads ran between two ``ran_ns`` readings (a thread started between them
    counts from 0), or None when one ended between them: what it ran since the first reading
    is gone with it (a sum over the live threads alone then fell below zero when a thread that
    had loaded the index ended mid-call)."""
    if before.keys() - after.keys():
        return None
    return sum(ns - before.get(tid, 0) for tid, ns in after.items())


# The floor's server: answers each request line with a result of a search's size (ten hits'
# worth of text and fields, about 10 KB of JSON), as osk's front writes one.
FLOOR = """
import json, os, select
pending = bytearray()
hits = [{"title": "t" * 40, "path": "p" * 60, "summary": "s" * 200, "score": 1.5}] * 10
while True:
    end = pending.find(b"\\n")
    if end < 0:
        select.select([0], [], [], 0)
        chunk = os.read(0, 65536)
        if not chunk:
            break
        pending += chunk
        continue
    message = json.loads(bytes(pending[:end]))
    del pending[:end + 1]
    if "id" in message:
        found = {"hits": hits}
        result = {"content": [{"type": "text", "text": json.dumps(found, indent=2)}],
                  "structuredContent": found, "isError": False}
        os.write(1, json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result},
                               separators=(",", ":")).encode() + b"\\n")
"""


class Server:
    """One ``osk mcp`` on one vault, asked one call at a time."""

    def __init__(self, vault: Path, cwd: Path, tree: Path, *, floor: bool = False) -> None:
        self.vault, self.tree = vault, tree
        env = {k: v for k, v in os.environ.items() if k != "OSK_VAULT"}
        env["OSK_SEMANTIC"] = "0"
        env["PYTHONPATH"] = str(tree)
        argv = [sys.executable, "-c", FLOOR] if floor else \
            [sys.executable, "-m", "osk", "--vault", str(vault), "mcp"]
        self.process = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)
        self.ids = 0
        began = time.perf_counter()
        self.call("initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                 "clientInfo": {"name": "mcp_search_ab", "version": "0"}})
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        if not floor:
            self.settle()
        print(f"osk mcp of {tree} on {vault}: initialized in "
              f"{time.perf_counter() - began:.1f} s wall", flush=True)
        self.cpu: list[float] = []
        self.wall: list[float] = []
        self.lost = 0  # calls during which a thread ended (their CPU is unknown: left out)

    def settle(self) -> None:
        """Return once the server has loaded the MCP SDK and opened its engine: a
        ``read_node`` of a name no node has (an error result, nothing written) is the SDK's to
        answer, from the engine. The front answers a search before either is ready, and their
        work on threads of their own would otherwise be counted in the calls measured first."""
        self.call("tools/call", {"name": "read_node",
                                 "arguments": {"node": "mcp-search-ab-no-such-node"}})

    def _send(self, message: dict[str, Any]) -> None:
        given: IO[str] | None = self.process.stdin
        assert given is not None
        given.write(json.dumps(message) + "\n")
        given.flush()

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send a request and read lines until its answer (a notification is skipped)."""
        self.ids += 1
        self._send({"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params})
        out: IO[str] | None = self.process.stdout
        assert out is not None
        while True:
            line = out.readline()
            if not line:
                raise SystemExit(f"osk mcp on {self.vault} stopped")
            found: dict[str, Any] = json.loads(line)
            if found.get("id") == self.ids:
                if "error" in found:
                    raise SystemExit(f"osk mcp on {self.vault}: {found['error']}")
                return found

    def search(self, query: str, *, keep: bool) -> None:
        """Ask ``query`` of the search tool; its server CPU and wall kept when ``keep``."""
        before, began = ran_ns(self.process.pid), time.perf_counter()
        found = self.call("tools/call", {"name": "search", "arguments": {"query": query}})
        wall = time.perf_counter() - began
        cpu = spent_ns(before, ran_ns(self.process.pid))
        if found["result"].get("isError"):
            raise SystemExit(f"search {query!r} on {self.vault}: {found['result']}")
        if not keep:
            return
        if cpu is None:
            self.lost += 1
        else:
            self.cpu.append(cpu / 1e6)
            self.wall.append(wall * 1000)

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=60)


def middle(values: list[float]) -> str:
    return f"{statistics.median(values):7.3f} / {statistics.mean(values):7.3f}"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("vault", type=Path, nargs="+", help="vaults (first: the larger)")
    parser.add_argument("--tree", type=Path, action="append",
                        help="a source tree to import osk from (repeat; default: this one)")
    parser.add_argument("--floor", action="store_true",
                        help="also a stand-in server that only reads and answers a line")
    turn_arguments(parser)
    args = parser.parse_args()
    corpus = Corpus(SEED)
    queries = [corpus.query() for _ in range(args.queries)]
    servers = [Server(vault.resolve(), vault.resolve().parent / "work" / "tidepool",
                      tree.resolve()) for vault in args.vault
               for tree in args.tree or [BENCH.parent]]
    floor = Server(Path("floor"), BENCH, BENCH.parent, floor=True) if args.floor else None
    everyone = servers + ([floor] if floor is not None else [])
    try:
        for query in queries:
            for server in everyone:
                server.search(query, keep=False)
        in_turns(queries, args.runs, args.gap,
                 [functools.partial(server.search, keep=True) for server in everyone])
    finally:
        for server in everyone:
            server.close()
    print(f"search through osk mcp, ms a call, median / mean ({args.queries * args.runs} calls "
          f"a server, gap {args.gap} s):")
    for server in servers:
        lost = f"; {server.lost} left out: a thread ended during them" if server.lost else ""
        print(f"  {server.tree.name[-12:]:>12s} {server.vault.name:>14s}: server CPU "
              f"{middle(server.cpu)}, client wall {middle(server.wall)}{lost}")
    if floor is not None:
        print(f"  {'floor':>27s}: server CPU {middle(floor.cpu)}, client wall "
              f"{middle(floor.wall)} (a stand-in that only reads and answers the line)")
    for tree in {server.tree for server in servers}:
        first, *rest = [server for server in servers if server.tree == tree]
        for server in rest:
            print(f"  {tree.name[-12:]:>12s} {first.vault.name} / {server.vault.name}: server "
                  f"CPU median {statistics.median(first.cpu) / statistics.median(server.cpu):.2f}x"
                  f", mean {statistics.mean(first.cpu) / statistics.mean(server.cpu):.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
