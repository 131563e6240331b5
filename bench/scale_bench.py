"""The scale run (issue 26): osk beside SQLite FTS5 over the same text, from 1,000 nodes up.

For each vault size (default 1,000 and 10,000 nodes; ``--sizes 1000,10000,100000``) it builds
a synthetic vault (``search_bench.make_vault``: Zipf words, a sixth of the notes with Hangul,
Scope/Domain/Person), opens it once as a first session would (catalog and index written), and
prints, in one run:

- fresh process, ``osk search QUERY`` (the CLI, interpreter included): median wall and CPU
  over ``--runs`` processes, each with its own query, and the peak memory of one;
- fresh process, SQLite FTS5 over the same title/summary/body text: open read-only, MATCH the
  same words (OR), bm25, top 10; and ``python -c pass``, both measured in the same run;
- fresh process, ``osk read TITLE`` (the text a person reads) of ``--runs`` nodes, beside a
  fresh process fetching the same node's row from the FTS5 table by its title;
- fresh process, ``osk read TITLE --json`` (with the related nodes: the cited, the citing and
  the similar ones), beside a fresh process fetching that row and then the seven best rows
  for its title's and summary's words (the similar ones, as FTS5 would find them);
- warm search in one process through ``Engine.search`` (what ``osk mcp`` answers with):
  median wall and CPU per query, queries back to back;
- a write round through ``Engine`` (create, update, ``read_node``): median CPU of each (and of
  a catalog snapshot save after one change, what the server does every 30 s while writes
  come), the engine watching for hand edits as the MCP server's does
  (``Engine.open(watch=True)``; ``--no-watch`` for the stat sweep), the calls ``--gap`` seconds
  apart (default 0; above a second, each call makes the periodic look for hand edits, as an
  agent's calls do);
- the on-disk size of ``.osk/index`` (and of the catalog snapshot) against the FTS5 file;
- ``osk import`` of ``--import-size`` nodes (default: the vault size, capped at 10,000):
  CPU per node, wall, peak memory, and the catalog snapshot it leaves.

CPU figures are what to compare on a shared box (wall moves with the load). Run by hand, not
in CI: ``nice -n 10 python bench/scale_bench.py [--sizes 1000,10000] [--runs 7] [--keep DIR]``;
``--rounds-only`` measures the write round alone (``--real-words``: its notes written in the
corpus's own words, so their common words have long postings, as a real note's do);
``--warm-only`` the warm searches alone (``--runs`` queries, three times back to back, then
once each ``--gap`` seconds apart).
``--against DIR`` adds, interleaved with the others, a fresh ``osk search`` run from the osk
source in DIR (say a worktree of main): before and after a change in one run;
``--fresh-only`` measures the fresh processes alone. ``--engine-memory`` measures the
long-running engine's peak memory alone, on the vault ``osk import`` leaves (kept with
``--keep``, and reused by the next run).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import random
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT))

from search_bench import make_vault  # noqa: E402
from write_bench import import_lines, make_repo  # noqa: E402

FTS_CHILD = """
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
words = [w for w in sys.argv[2].split() if w]
match = " OR ".join('"' + w.replace('"', '') + '"' for w in words)
rows = db.execute("SELECT path, bm25(notes) FROM notes WHERE notes MATCH ? "
                  "ORDER BY bm25(notes) LIMIT 10", (match,)).fetchall()
print(len(rows))
"""

# A read's baseline: the same node's row fetched from the FTS5 table by its title (a phrase
# match on the title column: the table keeps no other index).
FTS_READ_CHILD = """
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
title = '"' + sys.argv[2].replace('"', '') + '"'
rows = db.execute("SELECT title, summary, body FROM notes WHERE notes MATCH ? LIMIT 1",
                  ("title : " + title,)).fetchall()
print(len(rows))
"""

# A read with its related nodes: the row, then its title's and summary's words OR'd, the best
# seven by bm25 (what a similar-node search is in FTS5's own terms).
FTS_RELATED_CHILD = FTS_READ_CHILD.replace('print(len(rows))', """
words = f"{rows[0][0]} {rows[0][1]}".split()
match = " OR ".join('"' + w.replace('"', '') + '"' for w in words)
near = db.execute("SELECT path FROM notes WHERE notes MATCH ? ORDER BY bm25(notes) LIMIT 7",
                  (match,)).fetchall()
print(len(rows), len(near))
""")


def own_peak_kb() -> int:
    """This process's peak resident memory in KB. Not ru_maxrss: a child that subprocess
    starts by vfork reports there its parent's peak when that is larger (Linux carries the
    old memory map's high-water mark across exec), so a bench that holds a large vault in
    process would see its own size in every child. VmHWM is the process's own."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    import resource
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


# What a child runs last: its own peak as "PEAK <KB>" on stderr (``peak_mb`` reads it).
PEAK_PRINT = ("\n" + inspect.getsource(own_peak_kb)
              + "\nprint('PEAK', own_peak_kb(), file=sys.stderr)\n")


OSK_CHILD = """
import sys
from osk.surfaces.cli import main
code = main(["--vault", sys.argv[1], "search", sys.argv[2], "--json"])
sys.stdout.flush()
""" + PEAK_PRINT + """
print("PATH", "engine" if "osk.engine.core" in sys.modules else "store", file=sys.stderr)
sys.exit(code)
"""


READ_CHILD = OSK_CHILD.replace('"search", sys.argv[2], "--json"', '"read", sys.argv[2]')
JSON_READ_CHILD = OSK_CHILD.replace('"search", sys.argv[2]', '"read", sys.argv[2]')


# -- measuring a child -------------------------------------------------------------------------
def child(argv: list[str], cwd: Path, env: dict[str, str] | None = None
          ) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """(wall s, CPU s, result) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{argv[:4]} failed: {done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done


def medians(samples: list[tuple[float, float]]) -> tuple[float, float]:
    return (statistics.median(w for w, _ in samples) * 1000,
            statistics.median(c for _, c in samples) * 1000)


def peak_mb(stderr: str) -> float:
    for line in stderr.splitlines():
        if line.startswith("PEAK "):
            return int(line.split()[1]) / 1024
    return float("nan")


def env_for_osk() -> dict[str, str]:
    # Lexical only: the semantic channel's model load is measured by semantic_bench. Bytecode
    # written and read, as an installed osk runs (a shell that sets PYTHONDONTWRITEBYTECODE would
    # otherwise have every child compile what changed since the last install from source).
    dropped = {"OSK_VAULT", "PYTHONDONTWRITEBYTECODE"}
    return {**{k: v for k, v in os.environ.items() if k not in dropped}, "OSK_SEMANTIC": "0"}


# -- FTS5 over the same text -------------------------------------------------------------------
def build_fts(root: Path, target: Path) -> float:
    """An FTS5 table of every node's path, title, summary and body; returns the seconds."""
    from osk.store.catalog import walk_nodes
    from osk.store.node import parse

    started = time.perf_counter()
    target.unlink(missing_ok=True)
    db = sqlite3.connect(target)
    db.execute("CREATE VIRTUAL TABLE notes USING fts5(path UNINDEXED, title, summary, body)")
    rows = []
    for rel, _ in walk_nodes_of(root, walk_nodes):
        node = parse(rel, (root / rel).read_text(encoding="utf-8"))
        rows.append((rel, node.title, node.meta.summary, node.body))
    db.executemany("INSERT INTO notes VALUES (?, ?, ?, ?)", rows)
    db.commit()
    db.execute("INSERT INTO notes(notes) VALUES ('optimize')")
    db.commit()
    db.close()
    return time.perf_counter() - started


def walk_nodes_of(root: Path, walk_nodes: Any) -> Any:
    from osk.store.vault import Vault

    return walk_nodes(Vault(root))


def size_of(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# -- the run -----------------------------------------------------------------------------------
def fresh_searches(root: Path, fts: Path, queries: list[str], cwd: Path,
                   against: Path | None = None) -> dict[str, Any]:
    """Fresh ``osk search QUERY --json`` processes, each beside a fresh FTS5 query of the
    same words and ``python -c pass``."""
    return fresh_pairs(OSK_CHILD, FTS_CHILD, root, fts, queries, cwd, against, bare=True)


def fresh_reads(root: Path, fts: Path, titles: list[str], cwd: Path,
                against: Path | None = None) -> dict[str, Any]:
    """Fresh ``osk read TITLE`` processes (the text a person reads), each beside a fresh
    process fetching the node's row from FTS5 by its title."""
    return fresh_pairs(READ_CHILD, FTS_READ_CHILD, root, fts, titles, cwd, against)


def fresh_json_reads(root: Path, fts: Path, titles: list[str], cwd: Path,
                     against: Path | None = None) -> dict[str, Any]:
    """Fresh ``osk read TITLE --json`` processes (the related nodes listed), each beside a
    fresh process fetching the row and the seven best rows for its words from FTS5."""
    return fresh_pairs(JSON_READ_CHILD, FTS_RELATED_CHILD, root, fts, titles, cwd, against)


def fresh_pairs(osk_child: str, fts_child: str, root: Path, fts: Path, asked: list[str],
                cwd: Path, against: Path | None, *, bare: bool = False) -> dict[str, Any]:
    """Medians of fresh osk processes (``osk_child``), one for each of ``asked``, each beside
    a fresh FTS5 process (``fts_child``) asked the same (and ``python -c pass`` with
    ``bare``); ``against``: the osk processes from that source too, interleaved."""
    py = sys.executable
    env = env_for_osk()
    osk, sql, python, peaks, paths = [], [], [], [], []
    other: list[tuple[float, float]] = []
    other_env = {**env, "PYTHONPATH": str(against)} if against else env
    child([py, "-c", osk_child, str(root), asked[0]], cwd, env)  # bytecode, page cache
    if against:
        child([py, "-c", osk_child, str(root), asked[0]], cwd, other_env)
    for one in asked:
        if against:
            wall, cpu, done = child([py, "-c", osk_child, str(root), one], cwd, other_env)
            other.append((wall, cpu))
            paths.append("other " + ("store" if "PATH store" in done.stderr else "engine"))
        wall, cpu, done = child([py, "-c", osk_child, str(root), one], cwd, env)
        osk.append((wall, cpu))
        peaks.append(peak_mb(done.stderr))
        paths.append("store" if "PATH store" in done.stderr else "engine")
        wall, cpu, _ = child([py, "-c", fts_child, str(fts), one], cwd)
        sql.append((wall, cpu))
        if bare:
            wall, cpu, _ = child([py, "-c", "pass"], cwd)
            python.append((wall, cpu))
    return {"osk": medians(osk), "fts": medians(sql),
            "python": medians(python) if python else None,
            "peak_mb": max(peaks), "from_store": paths.count("store"), "runs": len(asked),
            "against": medians(other) if other else None,
            "against_from_store": paths.count("other store")}


def titles_for(root: Path, count: int) -> list[str]:
    """``count`` Domain node titles of the vault (any session sees them), the same ones in
    every run (seeded)."""
    from osk.store.catalog import walk_nodes
    from osk.store.node import title_from_path

    every = sorted(rel for rel, _ in walk_nodes_of(root, walk_nodes)  # seen from any scope
                   if rel.startswith("Domain/") and "/_" not in rel)
    return [title_from_path(rel) for rel in random.Random(26).sample(every, count)]


def warm_and_writes(root: Path, queries: list[str], rounds: int, *, gap: float = 0.0,
                    watch: bool = True, words: Any = None, cwd: Path | None = None,
                    scope: str | None = "atlas", engine: Any = None) -> dict[str, float]:
    """Warm searches and write rounds through one Engine in this process (lexical).
    ``words``: a ``search_bench.Corpus`` whose words the written notes carry (40-80 of them,
    as the vault's own notes do); without it, words no synthetic note holds. ``cwd`` and
    ``scope``: the session's (default the vault root, scope atlas; ``rounds_scale`` opens it
    in the project whose rounds it captured, so searches rank those rounds too). ``engine``:
    one already open (a server's), used instead of opening another."""
    os.environ["OSK_SEMANTIC"] = "0"
    from osk.calls.request import NewNode, NodeEdit
    from osk.engine.core import Engine

    if engine is None:
        engine = Engine.open(root, cwd=cwd or root, scope=scope, watch=watch)
    scope = engine.scope
    engine.search("warm up")
    searches = warm_searches(engine, queries * 3)
    calls: dict[str, list[tuple[float, float]]] = {"create": [], "update": [], "read": []}
    tag = f"{time.time_ns() % 10**9}"
    cluster = f"bench{tag}"
    engine.create_node(NewNode(cluster, "What the scale bench writes", "Its write rounds.\n",
                               space="scope", cluster=cluster, drafter="bench", scope=scope))
    for number in range(rounds):
        title = f"scale bench {tag} note {number}"
        text = words.text(40, 80) + " " if words is not None else ""
        steps = (
            ("create", lambda t=title, n=number, w=text: engine.create_node(NewNode(
                t, "A node the scale bench writes", f"{w}Written by round {n}. Marker x{n}.\n",
                space="scope", cluster=cluster, drafter="bench", scope=scope))),
            ("update", lambda t=title, n=number: engine.update_node(t, NodeEdit(
                old_text=f"Marker x{n}.", new_text=f"Marker x{n} edited."))),
            ("read", lambda t=title: engine.read_node(t)),
        )
        for name, call in steps:
            time.sleep(gap)
            wall, cpu = time.perf_counter(), time.process_time()
            call()
            calls[name].append((time.perf_counter() - wall, time.process_time() - cpu))
    saves = []
    for rel in list(engine.catalog.entries)[:4]:  # one change each, as a write leaves it
        engine.catalog.note_written(rel)
        wall, cpu = time.perf_counter(), time.process_time()
        engine.catalog.save_snapshot()
        saves.append((time.perf_counter() - wall, time.process_time() - cpu))
    result = {"warm_ms": medians(searches)[0], "warm_cpu_ms": medians(searches)[1],
              "save_cpu_ms": medians(saves[1:])[1]}  # the first encodes every entry
    for name, samples in calls.items():
        result[f"{name}_cpu_ms"] = medians(samples[1:])[1]  # the first pays the write imports
    return result


def warm_searches(engine: Any, queries: list[str], gap: float = 0.0
                  ) -> list[tuple[float, float]]:
    """(wall s, CPU s) of ``engine.search`` for each query, ``gap`` seconds apart."""
    samples = []
    for query in queries:
        time.sleep(gap)
        wall, cpu = time.perf_counter(), time.process_time()
        engine.search(query)
        samples.append((time.perf_counter() - wall, time.process_time() - cpu))
    return samples


def warm_only(root: Path, size: int, runs: int, gap: float, watch: bool) -> None:
    """Warm searches alone (lexical): back to back, and ``gap`` seconds apart when given,
    where each call makes the periodic look for hand edits, as an agent's calls do."""
    child([sys.executable, "-c", OSK_CHILD, str(root), "first"], root, env_for_osk())
    os.environ["OSK_SEMANTIC"] = "0"
    from osk.engine.core import Engine

    engine = Engine.open(root, cwd=root, scope="atlas", watch=watch)
    queries = queries_for(size, runs)
    warm_searches(engine, ["warm up", *queries])  # each query's postings once, as a server has
    line = f"{size:>7,} nodes, warm Engine.search CPU: back to back " + cpu_summary(
        warm_searches(engine, queries * 3))
    if gap:
        line += f"; {gap:g} s apart " + cpu_summary(warm_searches(engine, queries, gap))
    print(line, flush=True)


def cpu_summary(samples: list[tuple[float, float]]) -> str:
    cpus = [cpu * 1000 for _, cpu in samples]
    return (f"median {statistics.median(cpus):.1f} ms, mean {statistics.mean(cpus):.1f} ms, "
            f"max {max(cpus):.1f} ms")


def rounds_only(root: Path, size: int, rounds: int, gap: float, watch: bool,
                real_words: bool = False) -> None:
    from search_bench import SEED, Corpus

    child([sys.executable, "-c", OSK_CHILD, str(root), "first"], root, env_for_osk())
    words = Corpus(SEED + size + 1) if real_words else None
    got = warm_and_writes(root, ["warm"], rounds, gap=gap, watch=watch, words=words)
    print(f"{size:>7,} nodes, calls {gap:g} s apart, {'watched' if watch else 'stat sweep'}"
          f"{', notes of the corpus words' if real_words else ''}: "
          f"create {got['create_cpu_ms']:.1f} ms, update {got['update_cpu_ms']:.1f} ms, "
          f"read_node {got['read_cpu_ms']:.1f} ms CPU; catalog snapshot save "
          f"{got['save_cpu_ms']:.0f} ms CPU", flush=True)


def bench_import(base: Path, size: int, *, keep: bool = False) -> dict[str, float]:
    """``osk import`` of ``size`` nodes into a new vault (``keep``: left in ``base``)."""
    folder = base / f"import-{size}"
    shutil.rmtree(folder, ignore_errors=True)
    from osk.store.vault import init

    vault = init(folder / "vault", git=False)
    source = folder / "nodes.jsonl"
    source.write_text("\n".join(import_lines(size)) + "\n", encoding="utf-8")
    work = make_repo(folder / "work")
    argv = [sys.executable, "-c",
            "import sys\nfrom osk.surfaces.cli import main\n"
            "code = main(sys.argv[1:])\nsys.stdout.flush()\n" + PEAK_PRINT + "sys.exit(code)",
            "--vault", str(vault.root), "import", str(source), "--json"]
    wall, cpu, done = child(argv, work, env_for_osk())
    report = json.loads(done.stdout)
    snapshot = vault.state("catalog", "snapshot.json")
    result = {"size": size, "wall_s": wall, "cpu_ms_per_node": cpu * 1000 / size,
              "peak_mb": peak_mb(done.stderr), "created": len(report["created"]),
              "catalog_bytes": snapshot.stat().st_size if snapshot.exists() else 0}
    if not keep:
        shutil.rmtree(folder, ignore_errors=True)
    return result


ENGINE_CHILD = """
import json, sys, time
from pathlib import Path
from osk.engine.core import Engine

def hwm():
    with open("/proc/self/status", encoding="ascii") as status:
        return next(int(line.split()[1]) // 1024 for line in status if line.startswith("VmHWM:"))

root = Path(sys.argv[1])
engine = Engine.open(root, cwd=root, watch=True)
opened = hwm()
engine.warm()
warm, cpu = hwm(), time.process_time()
for query in sys.argv[2:]:
    engine.search(query)
print(json.dumps({"open": opened, "warm": warm, "searched": hwm(), "warm_cpu_s": cpu}))
"""


def engine_memory(base: Path, size: int, queries: list[str]) -> dict[str, float]:
    """The long-running engine's peak memory (VmHWM, MB) on the vault ``osk import`` of
    ``size`` nodes leaves (every node citing another, as an agent's distilled notes do):
    after ``Engine.open(watch=True)``, after ``warm()`` (what ``osk mcp`` does before its
    handshake), and after a search for each of ``queries``; a child process each."""
    vault = base / f"import-{size}" / "vault"
    if not (vault / ".osk").is_dir():
        bench_import(base, size, keep=True)
    _, _, done = child([sys.executable, "-c", ENGINE_CHILD, str(vault), *queries], vault,
                       env_for_osk())
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def queries_for(size: int, count: int) -> list[str]:
    from search_bench import SEED, Corpus

    corpus = Corpus(SEED + size)
    rng = random.Random(size)
    corpus.rng = rng
    return [corpus.query() for _ in range(count)]


def report_read(got: dict[str, Any], label: str, baseline: str, ratio: str) -> None:
    """A fresh read's rows: its medians (and those from ``--against``), then its FTS5
    baseline's, with the CPU ratio."""
    r_w, r_c = got["osk"]
    t_w, t_c = got["fts"]
    print(f"{label:22s}{r_w:7.0f} ms wall {r_c:7.0f} ms CPU   peak {got['peak_mb']:.0f} MB, "
          f"{got['from_store']}/{got['runs']} answered from the store")
    if got["against"]:
        a_w, a_c = got["against"]
        print(f"  ... from --against  {a_w:7.0f} ms wall {a_c:7.0f} ms CPU   "
              f"{got['against_from_store']}/{got['runs']} from the store")
    print(f"{baseline:22s}{t_w:7.0f} ms wall {t_c:7.0f} ms CPU   "
          f"({ratio}/FTS5 CPU {r_c / t_c:.1f}x)")


def report(size: int, fresh: dict[str, Any], warm: dict[str, float] | None, sizes: dict[str, int],
           imported: dict[str, float] | None, reads: dict[str, Any] | None = None,
           related: dict[str, Any] | None = None) -> None:
    o_w, o_c = fresh["osk"]
    f_w, f_c = fresh["fts"]
    p_w, p_c = fresh["python"]
    print(f"\n== {size:,} nodes ==")
    print(f"fresh `osk search`    {o_w:7.0f} ms wall {o_c:7.0f} ms CPU   "
          f"peak {fresh['peak_mb']:.0f} MB, {fresh['from_store']}/{fresh['runs']} answered "
          f"from the store")
    if fresh["against"]:
        a_w, a_c = fresh["against"]
        print(f"  ... from --against  {a_w:7.0f} ms wall {a_c:7.0f} ms CPU   "
              f"{fresh['against_from_store']}/{fresh['runs']} from the store "
              f"(osk/FTS5 CPU {a_c / f_c:.1f}x)")
    print(f"fresh FTS5 query      {f_w:7.0f} ms wall {f_c:7.0f} ms CPU   "
          f"(osk/FTS5 CPU {o_c / f_c:.1f}x)")
    print(f"python -c pass        {p_w:7.0f} ms wall {p_c:7.0f} ms CPU")
    if reads:
        report_read(reads, "fresh `osk read`", "fresh FTS5 row", "osk read")
    if related:
        report_read(related, "fresh `osk read --json`", "fresh FTS5 row + near",
                    "osk read --json")
    if warm:
        print(f"warm Engine.search    {warm['warm_ms']:7.1f} ms wall "
              f"{warm['warm_cpu_ms']:7.1f} ms CPU")
        print(f"write round CPU       create {warm['create_cpu_ms']:.1f} ms, update "
              f"{warm['update_cpu_ms']:.1f} ms, read_node {warm['read_cpu_ms']:.1f} ms")
    print(f"on disk               .osk/index {sizes['index'] / 1e6:.1f} MB, catalog snapshot "
          f"{sizes['catalog'] / 1e6:.1f} MB, FTS5 {sizes['fts'] / 1e6:.1f} MB "
          f"(index/FTS5 {sizes['index'] / sizes['fts']:.2f}x)")
    if imported:
        print(f"osk import {imported['size']:,}        {imported['cpu_ms_per_node']:.2f} ms CPU a "
              f"node, {imported['wall_s']:.1f} s wall, peak {imported['peak_mb']:.0f} MB, "
              f"{imported['created']:,} created, catalog snapshot left "
              f"{imported['catalog_bytes']:,} bytes")
    sys.stdout.flush()



@contextmanager
def bench_folder(keep: Path | None, prefix: str) -> Iterator[Path]:
    """Where a bench builds its vaults: ``keep`` (made if missing, left as it is after, so a
    later run reuses what it built), or a temporary folder removed at the end."""
    base = keep or Path(tempfile.mkdtemp(prefix=prefix))
    base.mkdir(parents=True, exist_ok=True)
    try:
        yield base
    finally:
        if keep is None:
            shutil.rmtree(base, ignore_errors=True)

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=12, help="write rounds per size")
    parser.add_argument("--import-size", type=int, default=None)
    parser.add_argument("--no-import", action="store_true")
    parser.add_argument("--keep", type=Path, help="build (or reuse) the vaults here")
    parser.add_argument("--gap", type=float, default=0.0, help="seconds between write calls")
    parser.add_argument("--no-watch", action="store_true", help="the stat sweep, no watch")
    parser.add_argument("--rounds-only", action="store_true", help="the write round alone")
    parser.add_argument("--real-words", action="store_true",
                        help="the write round's notes carry 40-80 of the corpus's own words")
    parser.add_argument("--fresh-only", action="store_true", help="the fresh processes alone")
    parser.add_argument("--against", type=Path,
                        help="also a fresh search from the osk source in this folder")
    parser.add_argument("--warm-only", action="store_true",
                        help="warm searches alone (--gap: also that many seconds apart)")
    parser.add_argument("--engine-memory", action="store_true",
                        help="the engine's peak memory on the vault an import leaves, alone")
    args = parser.parse_args()
    with bench_folder(args.keep, "osk-scale-") as base:
        for size in (int(s) for s in args.sizes.split(",")):
            if args.engine_memory:
                got = engine_memory(base, size, queries_for(size, 5))
                print(f"{size:>7,} imported nodes, engine VmHWM after open {got['open']} MB, "
                      f"warm {got['warm']} MB, 5 searches {got['searched']} MB; CPU to the end "
                      f"of warm {got['warm_cpu_s']:.1f} s", flush=True)
                continue
            root, _, _ = make_vault(base, size)
            if args.rounds_only:
                rounds_only(root, size, args.rounds, args.gap, not args.no_watch,
                            args.real_words)
                continue
            if args.warm_only:
                warm_only(root, size, args.runs, args.gap, not args.no_watch)
                continue
            fts = base / f"fts-{size}.sqlite"
            seconds = build_fts(root, fts)
            print(f"\n{size:,} nodes built; FTS5 indexed in {seconds:.1f} s", flush=True)
            started = time.perf_counter()
            child([sys.executable, "-c", OSK_CHILD, str(root), "first"], root, env_for_osk())
            print(f"first `osk search` (catalog and index built): "
                  f"{time.perf_counter() - started:.1f} s", flush=True)
            queries = queries_for(size, args.runs)
            fresh = fresh_searches(root, fts, queries, root, args.against)
            titles = titles_for(root, args.runs)
            reads = fresh_reads(root, fts, titles, root, args.against)
            related = fresh_json_reads(root, fts, titles, root, args.against)
            sizes = {"index": size_of(root / ".osk" / "index"),
                     "catalog": size_of(root / ".osk" / "catalog"), "fts": size_of(fts)}
            warm = None if args.fresh_only else warm_and_writes(root, queries, args.rounds)
            imported = None
            if not (args.no_import or args.fresh_only):
                imported = bench_import(base, args.import_size or min(size, 10000))
            report(size, fresh, warm, sizes, imported, reads, related)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
