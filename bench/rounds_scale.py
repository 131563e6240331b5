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
- the round index's size on disk, and the FTS5 table's.

Usage: ``nice -n 10 python bench/rounds_scale.py [--nodes 50000] [--rounds 20000,200000]
[--runs 7] [--keep DIR]``. Run by hand, not in CI.
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

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

from search_bench import Corpus, make_vault  # noqa: E402

KEY = "tidepool"  # the project whose rounds are captured
SEED = 2027
OSK_CHILD = ("import sys; from osk.surfaces.cli import main; "
             "sys.exit(main(['--vault', sys.argv[1], 'search', sys.argv[2], '--json', "
             "*sys.argv[3:]]))")
FTS_CHILD = """
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
match = " OR ".join('"' + w + '"' for w in sys.argv[2].split())
db.execute("SELECT rowid FROM terms WHERE terms MATCH ? ORDER BY rank LIMIT 10",
           (match,)).fetchall()
"""


def cpu_of(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    """CPU ms of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000


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
    with sqlite3.connect(building) as db:
        db.execute("CREATE VIRTUAL TABLE terms USING fts5(body, context, "
                   "tokenize = 'unicode61 remove_diacritics 0')")
        db.execute("ATTACH DATABASE ? AS round_index", (f"file:{index}?mode=ro",))
        db.execute("INSERT INTO terms (rowid, body, context) "
                   "SELECT row, body, context FROM round_index.terms")
    with sqlite3.connect(building) as db:
        db.execute("VACUUM")
    building.rename(floor)
    return floor


def measure(root: Path, cwd: Path, corpus: Corpus, runs: int) -> dict[str, float]:
    from osk.search.rounds import FILE, RoundIndex
    from osk.store.vault import Vault

    index = RoundIndex(Vault(root))
    started = time.process_time()
    index.refresh(timeout=600)
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
    rows: dict[str, list[float]] = {"rounds": [], "all": [], "fts": [], "python": []}
    cpu_of([py, "-c", OSK_CHILD, str(root), "warm up"], cwd, env)
    for query in queries[:runs]:
        rows["rounds"].append(cpu_of([py, "-c", OSK_CHILD, str(root), query, "--kind",
                                      "rounds"], cwd, env))
        rows["all"].append(cpu_of([py, "-c", OSK_CHILD, str(root), query], cwd, env))
        rows["fts"].append(cpu_of([py, "-c", FTS_CHILD, db, query], cwd, env))
        rows["python"].append(cpu_of([py, "-c", "pass"], cwd, env))
    found = {name: statistics.median(values) for name, values in rows.items()}
    found["warm"] = statistics.median(warm)
    found["warm_watched"] = statistics.median(warm_watched)
    found["caught_up"] = caught_up
    found["size_mb"] = sum(p.stat().st_size for p in (root / ".osk" / "index").glob(
        FILE + "*")) / 1e6
    found["fts_mb"] = floor.stat().st_size / 1e6
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=50000)
    parser.add_argument("--rounds", default="20000,200000", help="cumulative round counts")
    parser.add_argument("--per-conversation", type=int, default=400)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--keep", type=Path, help="build (or reuse) the vault here")
    args = parser.parse_args()
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
    corpus, have = Corpus(SEED), _rounds_on_disk(root)
    for want in (int(count) for count in args.rounds.split(",")):
        began = time.perf_counter()
        grow(root, corpus, have, want, args.per_conversation)
        print(f"\n== {want:,} rounds beside {args.nodes:,} nodes (appended {want - have:,} in "
              f"{time.perf_counter() - began:.0f} s) ==", flush=True)
        have = want
        found = measure(root, cwd, corpus, args.runs)
        print(f"round index catching up (in process) {found['caught_up']:8.1f} s CPU\n"
              f"fresh `osk search --kind rounds`     {found['rounds']:8.0f} ms CPU\n"
              f"fresh `osk search` (nodes and rounds) {found['all']:7.0f} ms CPU\n"
              f"fresh FTS5 query of the round index   {found['fts']:7.0f} ms CPU "
              f"(rounds / FTS5 {found['rounds'] / found['fts']:.1f}x)\n"
              f"python -c pass                        {found['python']:7.0f} ms CPU\n"
              f"warm round-index query                {found['warm']:7.1f} ms CPU\n"
              f"warm round-index query, watched       {found['warm_watched']:7.1f} ms CPU\n"
              f"round index on disk                   {found['size_mb']:7.0f} MB "
              f"(FTS5 table of the same terms {found['fts_mb']:.0f} MB)", flush=True)
    return 0


def _rounds_on_disk(root: Path) -> int:
    """Rounds already captured (a kept vault grows from there)."""
    folder = root / "_raw" / KEY
    return sum(path.read_text(encoding="utf-8").count("\n## Round ")
               for path in folder.glob("*.md")) if folder.exists() else 0


if __name__ == "__main__":
    raise SystemExit(main())
