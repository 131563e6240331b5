"""Write latency through the real MCP server (`osk mcp` over stdio), on synthetic vaults.

For each vault size (default 1,000 and 5,000 nodes) it builds a vault by writing node files
directly (``osk.store.node.render`` + ``atomic_write``: the write path would take minutes), with a
rechecks ledger holding the citation pairs of every node (each cites the node before it, and
every tenth Scope node a raw round too), lets an in-process engine load the catalog and build
the search index once (as the first session on a device would), then starts the real
``osk mcp`` server as a host does and drives it with the official ``mcp`` client. It prints
the median, p95 and maximum wall time, seen by the client, of:

- ``create_node`` with one ``derived-from`` citation of an existing node;
- ``update_node`` with an anchored edit (``old_text`` -> ``new_text``) of an existing node;
- ``search`` with a two-word query;

each over ``--calls`` calls (default 50) after a few warm-up calls, interleaved so that machine
load touches all three alike. ``--profile`` also runs the same writes in process under cProfile
and prints the top functions by cumulative time.

Usage: ``python bench/write_bench.py [--sizes 1000,5000] [--calls 50] [--keep DIR]
[--profile]``. Run by hand, not in CI. Target at 5,000 nodes: create_node and update_node
≤ 50 ms (issue 5, "Speed"); neither may rebuild the search index.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import os
import pstats
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from osk.calls.request import NewNode, NodeEdit  # noqa: E402
from osk.store import clock, contract, ids  # noqa: E402
from osk.store import node as node_mod  # noqa: E402
from osk.store.fsutil import atomic_write, sha256_text  # noqa: E402
from osk.store.vault import Vault, init  # noqa: E402

SEED = 20261130
SCOPE = "benchproj"
PER_CLUSTER = 100
WARMUP = 3


# -- synthetic vault ------------------------------------------------------------------------------
def vocabulary(rng: random.Random, size: int) -> list[str]:
    consonants, vowels = "bcdfghjklmnprstvwz", "aeiou"
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(consonants) + rng.choice(vowels)
                          for _ in range(rng.randint(2, 4))))
    return sorted(words)


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "-c", "user.name=bench", "-c", "user.email=bench@example.invalid", "commit", "-q",
        "--allow-empty", "-m", "root")
    return path


def make_vault(base: Path, size: int) -> tuple[Vault, Path, list[str]]:
    """A vault with ``size`` nodes: 4/5 in this project's scope, 1/5 in Domain.

    Every cluster has its hub; every other node cites the node before it, and every tenth
    Scope node also cites a raw round (20 records of 10 rounds). The rechecks ledger records
    all those pairs, as the write path would have.
    """
    rng = random.Random(SEED + size)
    words = vocabulary(rng, 3000)
    vault = init(base / "vault")
    repo = make_repo(base / "work" / SCOPE)
    rounds = capture_rounds(vault, rng, words)
    now = clock.now_text()
    titles: list[str] = []
    previous: node_mod.Node | None = None
    pairs: list[tuple[node_mod.Node, list[tuple[str, str, str, str]]]] = []
    for number in range(size):
        cluster = f"c{number // PER_CLUSTER:03d}"
        domain = cluster[-1] in "04"
        folder = f"Domain/{cluster}" if domain else f"Scope/{SCOPE}/{cluster}"
        hub = number % PER_CLUSTER == 0
        title = cluster if hub else f"{cluster} note {number:05d} {rng.choice(words)}"
        body = " ".join(rng.choice(words) for _ in range(rng.randint(60, 220))) + \
            f"\n\nMarker m{number:05d}.\n"
        cites: list[tuple[str, str, str, str]] = []  # (key, kind, link, target hash)
        if not hub and previous is not None:
            cites.append((f"node:{previous.id}", "node", f"[[{previous.title}]]",
                          sha256_text(previous.body)))
        if not hub and not domain and number % 10 == 3:
            coordinate, digest = rounds[number % len(rounds)]
            cites.append((f"raw:{coordinate}", "raw", f"[[{coordinate}]]", digest))
        rel = f"{folder}/{title}.md"
        meta = contract.validate_meta(rel, {
            "id": ids.uuid7(), "created": now, "updated": now, "author": "agent",
            "drafter": "bench", "summary": " ".join(rng.choice(words) for _ in range(8)),
            "derived-from": [link for _, _, link, _ in cites], "conflicts": [],
        })
        text = node_mod.render(meta, body)
        atomic_write(vault.abs(rel), text)
        previous = node_mod.parse(rel, text)
        titles.append(title)
        if cites:
            pairs.append((previous, cites))
    write_rechecks(vault, pairs)
    return vault, repo, titles


def capture_rounds(vault: Vault, rng: random.Random, words: list[str]) -> list[tuple[str, str]]:
    """Raw rounds to cite: (coordinate, hash)."""
    from osk.capture import raw

    found = []
    for conversation in range(20):
        for _ in range(10):
            ref = raw.append_round(vault, SCOPE, f"conv-{conversation:02d}", raw.RoundInput(
                user=" ".join(rng.choice(words) for _ in range(20)),
                assistant=" ".join(rng.choice(words) for _ in range(80))))
            found.append((ref.coordinate, ref.hash))
    return found


def write_rechecks(vault: Vault,
                   pairs: list[tuple[node_mod.Node, list[tuple[str, str, str, str]]]]) -> None:
    """The rechecks ledger the write path would have left: one record per citing node, each
    naming the one before as its parent (written in one go; appending one by one is slow)."""
    from osk.store.ledger import Record, device_id

    device, lines, parent = device_id(vault), [], None
    for line, (citing, cites) in enumerate(pairs, start=1):
        record = Record(
            id=ids.uuid7(after=parent), parents=(parent,) if parent else (), device=device,
            at=clock.utc_now_precise(), kind="pairs", subject=f"citing:{citing.id}",
            data={"citing": citing.id, "title": citing.title, "via": "create",
                  "corrected": None,
                  "pairs": [{"target": key, "kind": kind, "link": link, "root": None,
                             "citing_hash": sha256_text(citing.body), "target_hash": digest,
                             "via": "create"} for key, kind, link, digest in cites]},
            line=line)
        lines.append(record.to_json() + "\n")
        parent = record.id
    atomic_write(vault.ledger_path("rechecks"), "".join(lines))


def warm_up_vault(vault: Vault, repo: Path) -> float:
    """Load the catalog and build the search index once, as a first session would."""
    from osk.engine.core import Engine

    started = time.perf_counter()
    engine = Engine.open(vault, cwd=repo)
    engine.search("marker")
    engine._search_index().flush()
    return time.perf_counter() - started


# -- the calls ------------------------------------------------------------------------------------
class Plan:
    """The arguments of every timed call, made in advance so each call is new work."""

    def __init__(self, titles: list[str], calls: int, tag: str) -> None:
        rng = random.Random(SEED)
        # Every fourth note only: an edit makes its citer (the next note) a recheck candidate,
        # and the cascade stop would then refuse an edit of the note after that.
        notes = [t for t in titles if " note " in t and int(t.split()[2]) % 4 == 0
                 and t.startswith(("c001", "c002", "c003", "c005", "c006"))]
        self.targets = rng.sample(notes, WARMUP + calls)
        self.tag = tag
        self.count = WARMUP + calls

    def create(self, number: int) -> dict[str, Any]:
        cited = self.targets[number]
        return {"title": f"bench {self.tag} created {number:04d}", "summary": "A bench node",
                "body": f"Created by the write bench, call {number}.\n", "space": "scope",
                "cluster": "c001", "drafter": "bench", "derived_from": [f"[[{cited}]]"]}

    def update(self, number: int) -> dict[str, Any]:
        title = self.targets[number]
        marker = f"Marker m{int(title.split()[2]):05d}."
        return {"node": title, "old_text": marker, "new_text": f"{marker} Edited {self.tag}."}

    @staticmethod
    def search(number: int) -> dict[str, Any]:
        return {"query": f"marker m{number * 37 % 1000:05d}"}


async def drive_server(vault: Vault, repo: Path, plan: Plan) -> dict[str, list[float]]:
    import mcp
    from mcp import StdioServerParameters

    env = {k: v for k, v in os.environ.items() if k != "OSK_VAULT"}
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "osk", "mcp", "--vault", str(vault.root)],
                                   env=env, cwd=str(repo))
    times: dict[str, list[float]] = {"create_node": [], "update_node": [], "search": []}
    async with mcp.Client(params, mode="legacy") as client:
        for number in range(plan.count):
            for name, args in (("create_node", plan.create(number)),
                               ("update_node", plan.update(number)),
                               ("search", plan.search(number))):
                started = time.perf_counter()
                result = await client.call_tool(name, args)
                took = time.perf_counter() - started
                if result.is_error:
                    raise SystemExit(f"{name} failed: {result.content[0].text}")
                if number >= WARMUP:
                    times[name].append(took)
    return times


def profile_in_process(vault: Vault, repo: Path, plan: Plan, top: int) -> str:
    """The same writes through ``Engine`` in this process, under cProfile."""
    from osk.engine.core import Engine

    engine = Engine.open(vault, cwd=repo)
    engine.search("marker")
    profiler = cProfile.Profile()
    for number in range(plan.count):
        create = plan.create(number)
        update = plan.update(number)
        profiler.enable()
        engine.create_node(NewNode(create.pop("title"), create.pop("summary"), create.pop("body"),
                                   **create))
        engine.update_node(update.pop("node"), NodeEdit(**update))
        profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(top)
    return out.getvalue()


# -- osk import ---------------------------------------------------------------------------------
IMPORT_SCOPES = ("alpha", "beta", "gamma", "delta")


def import_lines(size: int) -> list[str]:
    """JSON Lines for ``osk import``: 7/10 Scope nodes over four projects, 2/10 Domain, 1/10
    Person, clusters of 100, every node citing the one before it in its destination."""
    rng = random.Random(SEED - size)
    words = vocabulary(rng, 3000)
    lines, last = [], {}
    for number in range(size):
        kind = number % 10
        space = "scope" if kind < 7 else "domain" if kind < 9 else "person"
        scope = IMPORT_SCOPES[number % len(IMPORT_SCOPES)] if space == "scope" else None
        where = (space, scope)
        title = f"import {number:06d} {rng.choice(words)} {rng.choice(words)}"
        line = {"title": title, "summary": " ".join(rng.choice(words) for _ in range(8)),
                "body": " ".join(rng.choice(words) for _ in range(rng.randint(60, 220))),
                "space": space, "cluster": f"{scope or space} {number // 1000:03d}"}
        if scope:
            line["scope"] = scope
        if where in last:
            line["derived_from"] = [last[where]]
        last[where] = title
        lines.append(json.dumps(line))
    return lines


def bench_import(base: Path, size: int) -> dict[str, Any]:
    """``osk import`` of ``size`` nodes into a new vault, as a person runs it."""
    folder = base / f"import-{size}-{int(time.time())}"
    vault = init(folder / "vault")
    source = folder / "nodes.jsonl"
    source.write_text("\n".join(import_lines(size)) + "\n", encoding="utf-8")
    work = make_repo(folder / "work")
    env = {k: v for k, v in os.environ.items() if k != "OSK_VAULT"}
    started, cpu = time.perf_counter(), os.times()
    run = subprocess.run([sys.executable, "-m", "osk", "--vault", str(vault.root), "import",
                          str(source), "--json"], cwd=work, env=env, capture_output=True,
                         text=True)
    took, after = time.perf_counter() - started, os.times()
    if run.returncode != 0:
        raise SystemExit(f"osk import failed: {run.stderr[-2000:]}")
    report = json.loads(run.stdout)
    child_cpu = (after.children_user - cpu.children_user) + \
        (after.children_system - cpu.children_system)
    print(f"\nosk import of {size:,} nodes: {took:.1f} s wall, {child_cpu:.1f} s CPU, "
          f"{len(report['created'])} created, {len(report['hubs'])} hubs, "
          f"{len(report['rejected'])} rejected", flush=True)
    shutil.rmtree(folder, ignore_errors=True)
    return {"import": size, "seconds": took, "cpu_seconds": child_cpu,
            "created": len(report["created"]), "rejected": len(report["rejected"])}


def cpu_in_process(vault: Vault, repo: Path, plan: Plan) -> dict[str, dict[str, float]]:
    """The same calls through ``Engine`` in this process: median wall and CPU time per call.
    CPU time moves far less than wall time with the load other processes put on the box."""
    from osk.engine.core import Engine

    engine = Engine.open(vault, cwd=repo)
    engine.search("marker")
    times: dict[str, list[tuple[float, float]]] = {"create_node": [], "update_node": [],
                                                   "search": []}
    for number in range(plan.count):
        create, update = plan.create(number), plan.update(number)
        calls = (("create_node", engine.create_node,
                  (create.pop("title"), create.pop("summary"), create.pop("body")), create),
                 ("update_node", engine.update_node, (update.pop("node"),), update),
                 ("search", engine.search, (), plan.search(number)))
        for name, method, args, kwargs in calls:
            wall, cpu = time.perf_counter(), time.process_time()
            method(*args, **kwargs)
            if number >= WARMUP:
                times[name].append((time.perf_counter() - wall, time.process_time() - cpu))
    return {name: {"median_ms": statistics.median(w for w, _ in values) * 1000,
                   "cpu_median_ms": statistics.median(c for _, c in values) * 1000}
            for name, values in times.items()}


# -- reporting ------------------------------------------------------------------------------------
def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def summary(times: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    return {name: {"median_ms": statistics.median(values) * 1000,
                   "p95_ms": percentile(values, 0.95) * 1000, "max_ms": max(values) * 1000,
                   "calls": len(values)}
            for name, values in times.items()}


def cached_vault(base: Path, size: int) -> tuple[Vault, Path, list[str], float]:
    """The vault of ``size`` nodes under ``base``, built (and warmed) only when missing.

    A vault built once is reused as it is: each run's writes stay in it, under titles tagged
    with the run's start time, so a later run of the same size pays only for its own calls.
    """
    folder = base / f"n{size}"
    ready = folder / "titles.json"
    if ready.exists():
        from osk.store.vault import locate

        titles = json.loads(ready.read_text(encoding="utf-8"))
        return locate(folder / "vault"), folder / "work" / SCOPE, titles, 0.0
    shutil.rmtree(folder, ignore_errors=True)
    started = time.perf_counter()
    vault, repo, titles = make_vault(folder, size)
    built = time.perf_counter() - started
    print(f"{size:,} nodes: vault written in {built:.1f} s, first engine load + index build "
          f"{warm_up_vault(vault, repo):.1f} s", flush=True)
    ready.write_text(json.dumps(titles), encoding="utf-8")
    return vault, repo, titles, built


def bench_size(base: Path, size: int, calls: int, profile: bool, top: int,
               in_process: bool = False) -> dict[str, Any]:
    vault, repo, titles, built = cached_vault(base, size)
    if in_process:
        figures = cpu_in_process(vault, repo, Plan(titles, calls, f"cpu {int(time.time())}"))
        load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
        print(f"\n{size:,} nodes, {calls} calls each through Engine in process (load {load}):")
        for name, values in figures.items():
            print(f"  {name:<12} median {values['median_ms']:7.1f} ms, "
                  f"CPU {values['cpu_median_ms']:7.1f} ms")
        return {"size": size, **figures}
    loaded = warm_up_vault(vault, repo)
    tag = f"mcp {int(time.time())}"
    figures = summary(asyncio.run(drive_server(vault, repo, Plan(titles, calls, tag))))
    print(f"\n{size:,} nodes (vault written in {built:.1f} s, 0: reused; engine load before "
          f"the server {loaded:.1f} s), {calls} timed calls each through `osk mcp`:")
    print(f"  {'tool':<12} {'median ms':>10} {'p95 ms':>8} {'max ms':>8}")
    for name, values in figures.items():
        print(f"  {name:<12} {values['median_ms']:>10.1f} {values['p95_ms']:>8.1f} "
              f"{values['max_ms']:>8.1f}")
    if profile:
        print(profile_in_process(vault, repo, Plan(titles, calls, f"prof {int(time.time())}"), top))
    return {"size": size, **figures}


def main() -> int:
    # Writes without the semantic channel's background embedding competing for the CPU (its
    # cost is measured by semantic_bench.py; writes themselves never embed).
    os.environ["OSK_SEMANTIC"] = "0"
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,5000")
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--keep", type=Path, help="build the vaults here and keep them; a "
                        "vault already there is reused (e.g. /tmp/osk-bench-cache/write)")
    parser.add_argument("--profile", action="store_true", help="also profile in process")
    parser.add_argument("--top", type=int, default=35, help="profile rows to print")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    parser.add_argument("--in-process", action="store_true", help="time the calls through "
                        "Engine in this process (wall and CPU) instead of the MCP server")
    parser.add_argument("--imports", default="", help="also time `osk import` of these sizes "
                        "(e.g. 5000,50000), each into a new vault")
    args = parser.parse_args()
    os.environ.setdefault("OSK_NOW", "2026-11-30T09:00+00:00")
    base = args.keep or Path(tempfile.mkdtemp(prefix="osk-write-bench-"))
    base.mkdir(parents=True, exist_ok=True)
    os.environ["HOME"] = str(base / "home")  # the session's device caches stay in the bench
    results = []
    try:
        for size in (int(s) for s in args.sizes.split(",") if s):
            results.append(bench_size(base, size, args.calls, args.profile, args.top,
                                      args.in_process))
        for size in (int(s) for s in args.imports.split(",") if s):
            results.append(bench_import(base, size))
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
    if args.json:
        print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
