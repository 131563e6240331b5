"""Raw rounds at scale (issue 27's cost target): what search costs when a vault holds hundreds of
thousands of captured rounds beside its nodes.

Builds the search bench's synthetic vault of ``--nodes`` nodes, a project (a git repository)
whose rounds it captures, and raw rounds up to each count of ``--rounds`` (cumulative: the
vault grows from one count to the next), ``--per-conversation`` rounds a conversation, each a
question of 10-40 and an answer of 30-120 Zipf words with its date. Rounds are appended
through ``osk.capture.raw.append_round`` with ``os.fsync`` made a no-op in this builder
process only (fsync is what a real capture pays per round; building 200,000 would otherwise
take an hour of disk waits, and nothing measured below runs in this process). At each count it
prints:

- the round index catching up with the rounds added since the last count (in process);
- fresh processes, CPU median over ``--runs``: ``osk search QUERY --kind rounds`` and
  ``osk search QUERY`` (nodes and rounds) from the project, ``python -c pass``, and a fresh
  Python process that opens an SQLite FTS5 table of the same terms (each round's and its
  neighbours', copied from the round index into ``fts5-floor-COUNT.sqlite`` beside the vault)
  read-only and answers the same words (the floor any FTS5-backed query pays);
- warm queries of the round index in one process (what the prompt-submit hook's fallback and
  the server ask), CPU median: stat-ing every record file first (as a process without a
  watch does), and with the kernel reporting changes to the raw folders (the MCP server's
  ``watch``: a query that finds none reported stats no record file);
- the round index's size on disk, and the FTS5 table's;
- with ``--import-size``, after the import (whose nodes cite one another, so the vault then
  cites), the fresh ``osk search`` again: which path answers it (the store or the engine)
  may change once a node cites.

A vault of a million records is built faster by ``bench/rounds_grow.py`` (parallel
appenders) into the same ``--keep`` directory; this then finds its rounds on disk.

Usage: ``nice -n 10 python bench/rounds_scale.py [--nodes 50000] [--rounds 20000,200000]
[--runs 7] [--keep DIR]``. Run by hand, not in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

from scale_bench import PEAK_PRINT, own_peak_kb  # noqa: E402
from search_bench import Corpus, make_vault  # noqa: E402

KEY = "tidepool"  # the project whose rounds are captured
SEED = 2027
OSK_CHILD = """
import sys
from osk.surfaces.cli import main
code = main(['--vault', sys.argv[1], 'search', sys.argv[2], '--json', *sys.argv[3:]])
sys.stdout.flush()
""" + PEAK_PRINT + """
print("PATH", "engine" if "osk.engine.core" in sys.modules else "store", file=sys.stderr)
sys.exit(code)
"""
FTS_CHILD = """
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
match = " OR ".join('"' + w + '"' for w in sys.argv[2].split())
db.execute("SELECT rowid FROM terms WHERE terms MATCH ? ORDER BY rank LIMIT 10",
           (match,)).fetchall()
if len(sys.argv) > 3:  # and the nodes' table (scale_bench.build_fts), as osk search asks both
    notes = sqlite3.connect(f"file:{sys.argv[3]}?mode=ro", uri=True)
    notes.execute("SELECT path, bm25(notes) FROM notes WHERE notes MATCH ? "
                  "ORDER BY bm25(notes) LIMIT 10", (match,)).fetchall()
"""


def cpu_of(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    """CPU ms of one child process."""
    return run_child(argv, cwd, env)[0]


def run_child(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, float]:
    """(CPU ms, peak MB or NaN when the child does not print it, wall ms) of one child."""
    cpu, peak, wall, _ = answered(argv, cwd, env)
    return cpu, peak, wall


def answered(argv: list[str], cwd: Path, env: dict[str, str]
             ) -> tuple[float, float, float, str]:
    """``run_child``'s figures and which path answered (``store``, ``engine``; ``?`` when the
    child does not say)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, check=False)
    wall = (time.perf_counter() - began) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{argv[:4]} failed: {done.stderr[-2000:]}")
    said = dict(line.split(maxsplit=1) for line in done.stderr.splitlines()
                if line.startswith(("PEAK ", "PATH ")))
    peak = int(said["PEAK"]) / 1024 if "PEAK" in said else float("nan")
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return cpu, peak, wall, said.get("PATH", "?").strip()


def fresh_searches(root: Path, cwd: Path, env: dict[str, str], queries: list[str]
                   ) -> dict[str, Any]:
    """A fresh ``osk search`` (nodes and rounds) of each query: CPU and wall medians, the
    largest peak, and the paths that answered."""
    runs = [answered([sys.executable, "-c", OSK_CHILD, str(root), query], cwd, env)
            for query in queries]
    return {"cpu": statistics.median(run[0] for run in runs),
            "wall": statistics.median(run[2] for run in runs),
            "peak_mb": max(run[1] for run in runs),
            "paths": ",".join(sorted({run[3] for run in runs}))}


def cites(root: Path) -> bool:
    """Whether a node of the vault cites another (its rechecks ledger holds a record)."""
    from osk.provenance.recheck_table import LEDGER
    from osk.store.vault import Vault

    ledger = Vault(root).ledger_path(LEDGER)
    return ledger.exists() and ledger.stat().st_size > 0


def project(base: Path) -> Path:
    folder = base / "work" / KEY
    if not (folder / ".git").exists():
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", "-b", "main"], cwd=folder, check=True)
        subprocess.run(["git", "-c", "user.name=bench", "-c", "user.email=bench@osk.invalid",
                        "commit", "-q", "--allow-empty", "-m", "root"], cwd=folder, check=True)
    return folder


def grow(root: Path, corpus: Corpus, have: int, want: int, per_conversation: int) -> None:
    """Append rounds ``have`` .. ``want`` - 1 (fsync off in this process: see the docstring)."""
    from osk.capture import raw
    from osk.store.vault import Vault

    vault, real_fsync = Vault(root), os.fsync
    os.fsync = lambda fd: None  # type: ignore[assignment]
    try:
        for number in range(have, want):
            day = 1 + (number // per_conversation) % 28
            round_ = raw.RoundInput(user=corpus.text(10, 40), assistant=corpus.text(30, 120),
                                    host="claude", completion=f"c-{number}",
                                    at=f"2026-0{1 + number % 9}-{day:02d}T10:00+00:00")
            raw.append_round(vault, KEY, f"conv-{number // per_conversation:05d}", round_)
    finally:
        os.fsync = real_fsync


def fts5_floor(index: Path, floor: Path) -> Path:
    """An FTS5 table of the round index's terms (built once a round count)."""
    import sqlite3

    if floor.exists():
        return floor
    building = floor.with_suffix(".part")
    building.unlink(missing_ok=True)
    from osk.search.rounds import round_terms

    with sqlite3.connect(building) as db, closing(
            sqlite3.connect(f"file:{index}?mode=ro", uri=True)) as source:
        db.execute("CREATE VIRTUAL TABLE terms USING fts5(body, context, "
                   "tokenize = 'unicode61 remove_diacritics 0')")
        rows = [row for (row,) in source.execute("SELECT row FROM forward")]
        for at in range(0, len(rows), 5000):  # each round's terms as text: BM25 reads counts
            db.executemany("INSERT INTO terms (rowid, body, context) VALUES (?, ?, ?)", [
                (row, *(" ".join(term for term, *counts in held for _ in range(counts[side]))
                        for side in (0, 1)))
                for row, held in round_terms(source, rows[at:at + 5000]).items()])
    with sqlite3.connect(building) as db:
        db.execute("VACUUM")
    building.rename(floor)
    return floor


def catch_up(root: Path) -> float:
    """CPU seconds of the round index catching up, in this process (the builder's)."""
    from osk.search.rounds import RoundIndex
    from osk.store.vault import Vault

    started = time.process_time()
    RoundIndex(Vault(root)).refresh(timeout=3600)
    return time.process_time() - started


def measure(root: Path, cwd: Path, corpus: Corpus, runs: int, notes: Path | None = None
            ) -> dict[str, Any]:
    from osk.search.rounds import FILE, RoundIndex
    from osk.store.vault import Vault

    index = RoundIndex(Vault(root))
    started = time.process_time()
    index.refresh(timeout=3600)
    caught_up = time.process_time() - started
    queries = [corpus.query() for _ in range(runs * 3)]
    watched = RoundIndex(Vault(root), watch=True)
    watched.refresh()
    warm: list[float] = []
    warm_watched: list[float] = []
    pair = ((warm, index), (warm_watched, watched))
    for number, query in enumerate(queries):  # each first every other query: same page cache
        for times, which in pair if number % 2 else pair[::-1]:
            began = time.process_time()
            which.search(query, k=10, visible=lambda key: True)
            times.append((time.process_time() - began) * 1000)
    env = {k: v for k, v in os.environ.items() if k not in {"OSK_VAULT", "PYTHONDONTWRITEBYTECODE"}}
    env["OSK_SEMANTIC"] = "0"
    rounds = index.records()[1]
    floor = fts5_floor(root / ".osk" / "index" / FILE,
                       root.parent / f"fts5-floor-{sum(count for _, _, count in rounds)}.sqlite")
    py, db = sys.executable, str(floor)
    both = [db, str(notes)] if notes else [db]
    rows: dict[str, list[float]] = {"rounds": [], "all": [], "fts": [], "fts_all": [],
                                    "python": [], "all_wall": []}
    peaks, paths = [], set()
    cpu_of([py, "-c", OSK_CHILD, str(root), "warm up"], cwd, env)
    for query in queries[:runs]:
        rows["rounds"].append(cpu_of([py, "-c", OSK_CHILD, str(root), query, "--kind",
                                      "rounds"], cwd, env))
        cpu, peak, wall, path = answered([py, "-c", OSK_CHILD, str(root), query], cwd, env)
        rows["all"].append(cpu)
        rows["all_wall"].append(wall)
        peaks.append(peak)
        paths.add(path)
        rows["fts"].append(cpu_of([py, "-c", FTS_CHILD, db, query], cwd, env))
        rows["fts_all"].append(cpu_of([py, "-c", FTS_CHILD, db, query, *both[1:]], cwd, env))
        rows["python"].append(cpu_of([py, "-c", "pass"], cwd, env))
    found = {name: statistics.median(values) for name, values in rows.items()}
    found["peak_mb"] = max(peaks)
    found["paths"] = ",".join(sorted(paths))  # type: ignore[assignment]
    found["warm"] = statistics.median(warm)
    found["warm_watched"] = statistics.median(warm_watched)
    found["caught_up"] = caught_up
    index_dir = root / ".osk" / "index"
    found["size_mb"] = sum(p.stat().st_size for p in index_dir.glob(FILE + "*")) / 1e6
    found["index_mb"] = sum(p.stat().st_size for p in index_dir.iterdir() if p.is_file()) / 1e6
    found["fts_mb"] = floor.stat().st_size / 1e6
    found["fts_all_mb"] = found["fts_mb"] + (notes.stat().st_size / 1e6 if notes else 0.0)
    return found


def server(root: Path, cwd: Path, queries: list[str], gap: float, writes: int
           ) -> dict[str, float]:
    """Warm searches (nodes and rounds) and a write round through one watched Engine, as
    ``osk mcp`` answers them, in a child process of its own so its peak memory is the
    server's (one engine, as ``osk mcp`` holds): its JSON."""
    argv = [sys.executable, str(Path(__file__)), "--server", str(root), str(cwd),
            "--gap", str(gap), "--writes", str(writes), "--queries", "\t".join(queries)]
    env = {k: v for k, v in os.environ.items() if k != "OSK_VAULT"}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the server child failed: {done.stderr[-3000:]}")
    found: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return found


def serve(root: Path, cwd: Path, queries: list[str], gap: float, writes: int) -> None:
    """The ``--server`` child: prints one JSON line."""
    from scale_bench import warm_and_writes, warm_searches

    os.environ["OSK_SEMANTIC"] = "0"
    from osk.engine.core import Engine

    engine = Engine.open(root, cwd=cwd, watch=True)
    warm_searches(engine, ["warm up", *queries])  # each query's postings once, as a server has
    back = [cpu * 1000 for _, cpu in warm_searches(engine, queries * 3)]
    apart = [cpu * 1000 for _, cpu in warm_searches(engine, queries, gap)]
    # the same engine writes: a server is one engine, and its peak is what the issue bounds
    found = warm_and_writes(root, queries, writes, gap=gap, cwd=cwd, scope=None, engine=engine)
    found.update(back=statistics.median(back), back_mean=statistics.mean(back),
                 back_max=max(back), apart=statistics.median(apart),
                 apart_mean=statistics.mean(apart), apart_max=max(apart),
                 peak_mb=own_peak_kb() / 1024)
    print(json.dumps(found))


def import_into(root: Path, base: Path, count: int) -> dict[str, float]:
    """``osk import`` of ``count`` new nodes into this vault: CPU a node, wall, peak."""
    from write_bench import import_lines, make_repo

    folder = base / f"import-{time.time_ns()}"
    folder.mkdir(parents=True)
    source = folder / "nodes.jsonl"
    tag = folder.name.removeprefix("import-")  # titles no earlier import into it took
    lines = []
    for line in import_lines(count):
        node = json.loads(line)
        node["title"] = f"{tag} {node['title']}"
        if "derived_from" in node:
            node["derived_from"] = [f"{tag} {title}" for title in node["derived_from"]]
        lines.append(json.dumps(node))
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    work = make_repo(folder / "work")
    env = {k: v for k, v in os.environ.items() if k not in {"OSK_VAULT", "PYTHONDONTWRITEBYTECODE"}}
    env["OSK_SEMANTIC"] = "0"
    child = ("import sys\nfrom osk.surfaces.cli import main\n"
             "code = main(sys.argv[1:])\nsys.stdout.flush()\n" + PEAK_PRINT + "sys.exit(code)")
    began = time.perf_counter()
    cpu, peak, _ = run_child([sys.executable, "-c", child, "--vault", str(root), "import",
                           str(source), "--json"], work, env)
    return {"count": count, "cpu_ms_per_node": cpu / count, "peak_mb": peak,
            "wall_s": time.perf_counter() - began}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=50000)
    parser.add_argument("--rounds", default="20000,200000", help="cumulative round counts")
    parser.add_argument("--per-conversation", type=int, default=400)
    parser.add_argument("--step", type=int, default=50000,
                        help="rounds appended between two catch-ups of the round index")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--gap", type=float, default=1.1,
                        help="seconds between the server's calls at an agent's pace")
    parser.add_argument("--writes", type=int, default=6, help="write rounds through the server")
    parser.add_argument("--no-server", action="store_true", help="no warm engine, no writes")
    parser.add_argument("--import-size", type=int, default=0,
                        help="after the last count, `osk import` this many nodes into the vault")
    parser.add_argument("--keep", type=Path, help="build (or reuse) the vault here")
    parser.add_argument("--server", nargs=2, type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--queries", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.server:
        serve(*args.server, args.queries.split("\t"), args.gap, args.writes)
        return 0
    base = args.keep or Path(tempfile.mkdtemp(prefix="osk-rounds-"))
    base.mkdir(parents=True, exist_ok=True)
    root, _, _ = make_vault(base, args.nodes)
    cwd = project(base)
    env = {**os.environ, "OSK_SEMANTIC": "0"}
    began = time.perf_counter()  # the node index, as a first session builds it
    subprocess.run([sys.executable, "-m", "osk", "--vault", str(root), "search", "first"],
                   cwd=cwd, env=env, stdout=subprocess.DEVNULL, check=True)
    print(f"{args.nodes:,} nodes; node index built in {time.perf_counter() - began:.1f} s",
          flush=True)
    from scale_bench import build_fts

    notes = base / f"fts-{args.nodes}.sqlite"
    if not notes.exists():
        build_fts(root, notes)
    have = _rounds_on_disk(root)
    corpus = Corpus(SEED + have)  # a kept vault grows on with words its rounds have not had
    # Queries are of the words a vault built from nothing holds: a kept vault's next corpus
    # shares few of them with it, and its queries found next to nothing.
    asking = Corpus(SEED)
    counts = [int(count) for count in args.rounds.split(",")]
    for want in counts:
        began, cpu = time.perf_counter(), 0.0
        while have < want:  # in steps, each caught up as capture's refreshes would
            step = min(want, have + args.step)
            grow(root, corpus, have, step, args.per_conversation)
            cpu += catch_up(root)
            have = step
        builder = own_peak_kb() / 1024
        print(f"\n== {want:,} rounds beside {args.nodes:,} nodes ({want + args.nodes:,} records; "
              f"grown in {time.perf_counter() - began:.0f} s wall, the round index catching up "
              f"{cpu:.0f} s CPU, builder peak {builder:.0f} MB) ==", flush=True)
        found = measure(root, cwd, asking, args.runs, notes)
        print(f"fresh `osk search --kind rounds`     {found['rounds']:8.0f} ms CPU\n"
              f"fresh `osk search` (nodes and rounds) {found['all']:7.0f} ms CPU, "
              f"{found['all_wall']:.0f} ms wall, peak {found['peak_mb']:.0f} MB "
              f"(answered by: {found['paths']}; the vault cites: {cites(root)})\n"
              f"fresh FTS5 query of the round index   {found['fts']:7.0f} ms CPU "
              f"(rounds / FTS5 {found['rounds'] / found['fts']:.1f}x)\n"
              f"fresh FTS5 query, rounds and nodes    {found['fts_all']:7.0f} ms CPU "
              f"(all / FTS5 {found['all'] / found['fts_all']:.1f}x)\n"
              f"python -c pass                        {found['python']:7.0f} ms CPU\n"
              f"warm round-index query                {found['warm']:7.1f} ms CPU\n"
              f"warm round-index query, watched       {found['warm_watched']:7.1f} ms CPU\n"
              f"round index on disk                   {found['size_mb']:7.0f} MB "
              f"(FTS5 table of the same terms {found['fts_mb']:.0f} MB)\n"
              f".osk/index on disk                    {found['index_mb']:7.0f} MB "
              f"(FTS5 of rounds and nodes {found['fts_all_mb']:.0f} MB)", flush=True)
        if not args.no_server:
            queries = [asking.query() for _ in range(args.runs)]
            got = server(root, cwd, queries, args.gap, args.writes)
            print(f"warm Engine.search (nodes and rounds), CPU median / mean / max: back to "
                  f"back {got['back']:.1f} / {got['back_mean']:.1f} / {got['back_max']:.1f} ms; "
                  f"{args.gap:g} s apart {got['apart']:.1f} / {got['apart_mean']:.1f} / "
                  f"{got['apart_max']:.1f} ms\n"
                  f"write round ({args.gap:g} s apart) CPU: create {got['create_cpu_ms']:.1f}, "
                  f"update {got['update_cpu_ms']:.1f}, read_node {got['read_cpu_ms']:.1f} ms; "
                  f"server peak {got['peak_mb']:.0f} MB", flush=True)
    if args.import_size:
        got = import_into(root, base, args.import_size)
        print(f"`osk import` of {got['count']:,} nodes into it: {got['cpu_ms_per_node']:.2f} ms "
              f"CPU a node, {got['wall_s']:.0f} s wall, peak {got['peak_mb']:.0f} MB", flush=True)
        env = {k: v for k, v in os.environ.items()
               if k not in {"OSK_VAULT", "PYTHONDONTWRITEBYTECODE"}}
        env["OSK_SEMANTIC"] = "0"
        queries = [asking.query() for _ in range(args.runs)]
        fresh_searches(root, cwd, env, ["warm up"])
        after = fresh_searches(root, cwd, env, queries)
        print(f"after the import (the vault cites: {cites(root)}): fresh `osk search` "
              f"{after['cpu']:.0f} ms CPU, {after['wall']:.0f} ms wall, peak "
              f"{after['peak_mb']:.0f} MB (answered by: {after['paths']})", flush=True)
    return 0


def _rounds_on_disk(root: Path) -> int:
    """Rounds already captured (a kept vault grows from there)."""
    folder = root / "_raw" / KEY
    return sum(path.read_text(encoding="utf-8").count("\n## Round ")
               for path in folder.glob("*.md")) if folder.exists() else 0


if __name__ == "__main__":
    raise SystemExit(main())
