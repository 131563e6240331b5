"""What the semantic channel costs (run by hand, not in CI; needs the model, docs/search.md).

On the search bench's synthetic vault it prints: which model, the time to embed every node
(first catch-up), per node and nodes a second; the query's own embedding; then, in one process
and over the same queries, the warm search median and p95 with the channel off and on (as a
ratio); a node change followed by a search, which re-embeds that node; and with ``--mcp`` the
same queries as ``search`` tool calls to a real ``osk mcp`` server over stdio (the vectors
already on disk; the first call, which loads the model, not counted), with the channel off and
on, and the server's resident memory after them (its peak too: the background catch-up runs
in it).

Usage: ``python bench/semantic_bench.py [--size 1000] [--queries 100] [--mcp]``.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from search_bench import make_vault  # noqa: E402  (the synthetic vault the search bench uses)


def timed(call) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def summary(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return f"median {statistics.median(ordered):6.1f} ms   p95 {p95:6.1f} ms"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--mcp", action="store_true", help="also time searches over MCP")
    args = parser.parse_args()
    from osk.search import SearchIndex, semantic
    from osk.store.vault import Vault

    model = semantic.find_model()
    if model is None:
        raise SystemExit("the semantic channel's model is not installed (docs/search.md)")
    print(f"model: {model.name} ({model.folder})")
    rng = random.Random(11)
    with tempfile.TemporaryDirectory() as tmp:
        root, paths, _ = make_vault(Path(tmp), args.size)
        vault = Vault(root)
        queries = [" ".join(rng.sample(Path(p).stem.split(), 1)) for p in
                   rng.sample(paths, min(args.queries, len(paths)))]
        os.environ["OSK_SEMANTIC"] = "1"
        index = SearchIndex(vault)
        len(index)  # build the lexical index first: not part of the embedding time
        started, cpu = time.perf_counter(), time.process_time()
        missing = index.embed_missing(budget=None)
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        print(f"{args.size} nodes: embedded in {seconds:.1f} s "
              f"({seconds / args.size * 1000:.1f} ms a node, {args.size / seconds:.0f} nodes/s), "
              f"{missing} left; CPU time {cpu / args.size * 1000:.1f} ms a node")
        assert index.vectors is not None
        encoder = index.vectors.encoder()
        own = [timed(lambda q=q: encoder.embed([q])) for q in queries]
        print(f"  a query's embedding              {summary(own)}")
        index.search(queries[0])
        on = [timed(lambda q=q: index.search(q)) for q in queries]
        os.environ["OSK_SEMANTIC"] = "0"
        lexical = SearchIndex(vault)
        lexical.search(queries[0])
        off = [timed(lambda q=q: lexical.search(q)) for q in queries]
        print(f"  warm search, lexical only        {summary(off)}")
        print(f"  warm search, semantic channel    {summary(on)}   "
              f"({statistics.median(on) / statistics.median(off):.1f}x)")
        changes = []
        for number in range(10):
            path = root / paths[number]
            path.write_text(path.read_text(encoding="utf-8") + f"\nchanged {number}\n",
                            encoding="utf-8")
            index.refresh()
            changes.append(timed(lambda: index.search(queries[1])))
        print(f"  one node changed, then a search  {summary(changes)}")
        if args.mcp:
            index.flush()
            for channel in ("0", "1"):
                os.environ["OSK_SEMANTIC"] = channel
                calls, memory = anyio.run(over_mcp, root, queries)
                label = "on " if channel == "1" else "off"
                print(f"  search over MCP, channel {label}     {summary(calls)}; the server "
                      f"holds {memory[0]:.0f} MB resident (peak {memory[1]:.0f} MB; "
                      f"{memory[2]:.0f} MB anonymous, {memory[3]:.0f} MB of files)")
    return 0


def server_memory() -> tuple[float, float, float, float]:
    """Resident, peak resident, anonymous and file-backed resident MB of this process's ``osk
    mcp`` child (read from /proc). The model's piece table and the saved vectors are mapped
    from files: their pages count among the file-backed ones, which the system may drop."""
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines()
                          if ":" in line)
            command = (status.parent / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if int(fields["PPid"]) == os.getpid() and b"mcp" in command:
            return tuple(int(fields[name].split()[0]) / 1024  # type: ignore[return-value]
                         for name in ("VmRSS", "VmHWM", "RssAnon", "RssFile"))
    return (0.0, 0.0, 0.0, 0.0)


async def over_mcp(root: Path, queries: list[str]
                   ) -> tuple[list[float], tuple[float, float, float, float]]:
    """Each query as a ``search`` tool call to one ``osk mcp`` server (ms per call), and the
    server's memory after them (``server_memory``)."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "osk", "--vault", str(root), "mcp"],
                                   cwd=str(root), env=dict(os.environ))
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                await session.call_tool("search", {"query": queries[0]})  # loads the model
                times = []
                for query in queries:
                    started = time.perf_counter()
                    await session.call_tool("search", {"query": query})
                    times.append((time.perf_counter() - started) * 1000)
                memory = server_memory()
    return times, memory


if __name__ == "__main__":
    raise SystemExit(main())
