"""Search latency on synthetic vaults, against a plain rank-bm25 rebuild, in one run.

For each vault size (default 1,000, 5,000 and 50,000 nodes) it prints:

- build: indexing the files alone (no index on disk), in process;
- cold, index on disk: a fresh ``python`` process that opens the index and answers one query
  (wall time of the whole process, interpreter start included, and the in-process part);
- cold, no index: the same with ``.osk/index`` removed first (so it builds);
- warm: median and p95 over many queries in one process (back to back, so no freshness walk);
- walk: one freshness walk (what the first search after an idle second pays for hand edits);
- change + query: one node rewritten, handed over by the catalog (``sync``), then a query;
  and a hand edit picked up by a walk, then a query;
- the same figures for rank-bm25's ``BM25Okapi`` rebuilt over the same tokens, with ratios;
- through the engine (what the MCP server and ``osk search`` answer with: catalog, freshness,
  scope isolation, markers): ``osk search QUERY`` as a fresh process (wall, CPU, peak memory)
  and warm ``Engine.search`` in one process (median, p95, CPU), queries a few milliseconds
  apart as an agent's come, so the once-a-second look for hand edits falls among them.

Usage: ``python bench/search_bench.py [--sizes 1000,5000] [--queries 200] [--keep DIR]
[--engine-only]``. Run by hand, not in CI. Targets at 5,000 nodes: warm median ≤ 5 ms, change +
query ≤ 30 ms, cold with index ≤ 300 ms, build ≤ 3 s; at 50,000: warm median ≤ 30 ms (index
and engine), a cold ``osk search`` ≤ 1.5 s, peak memory ≤ 400 MB. With ``--keep`` a vault
already built there is reused.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEED = 20261129
SCOPES = ("atlas", "beacon", "cinder", "delta", "ember", "fjord", "garnet", "harbor")


# -- synthetic vault --------------------------------------------------------------------------
def vocabulary(rng: random.Random, size: int) -> list[str]:
    consonants, vowels = "bcdfghjklmnprstvwz", "aeiou"
    words: set[str] = set()
    while len(words) < size:
        syllables = rng.randint(1, 4)
        words.add("".join(rng.choice(consonants) + rng.choice(vowels)
                          for _ in range(syllables)))
    return sorted(words)


def hangul_words(rng: random.Random, size: int) -> list[str]:
    return ["".join(chr(0xAC00 + rng.randrange(11172)) for _ in range(rng.randint(2, 4)))
            for _ in range(size)]


class Corpus:
    """Zipf-distributed words, so common terms have long postings, as in real notes."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.words = vocabulary(self.rng, 20000)
        self.rng.shuffle(self.words)  # Zipf rank is list position
        weights = [1 / (rank + 1) ** 1.05 for rank in range(len(self.words))]
        self.cumulative = list(itertools.accumulate(weights))
        self.korean = hangul_words(self.rng, 3000)

    def text(self, low: int, high: int) -> str:
        count = self.rng.randint(low, high)
        return " ".join(self.rng.choices(self.words, cum_weights=self.cumulative, k=count))

    def node(self, number: int) -> tuple[str, str]:
        rng = self.rng
        roll = rng.random()
        if roll < 0.7:
            folder = f"Scope/{rng.choice(SCOPES)}/c{rng.randrange(20)}"
        elif roll < 0.9:
            folder = f"Domain/c{rng.randrange(20)}"
        else:
            folder = f"Person/c{rng.randrange(5)}"
        title = f"{self.text(3, 6)} {number}"
        summary = self.text(8, 16)
        body = "\n\n".join(self.text(20, 60) for _ in range(rng.randint(2, 4)))
        if rng.random() < 0.15:
            body += "\n\n" + " ".join(rng.choices(self.korean, k=rng.randint(10, 40)))
        text = (
            "---\n"
            f"id: bench-{number:06d}\n"
            "created: 2026-11-29T18:00+00:00\n"
            "updated: 2026-11-29T18:00+00:00\n"
            "author: agent\n"
            "drafter: bench\n"
            f"summary: {json.dumps(summary)}\n"
            "derived-from: []\n"
            "---\n"
            f"{body}\n"
        )
        return f"{folder}/{title}.md", text

    def query(self) -> str:
        """Like a question: one or two content words (Zipf rank 100-5,000) among zero to
        three very common ones (rank < 60, in most notes), in random order."""
        rng = self.rng
        picks = [self.words[rng.randint(100, 5000)] for _ in range(rng.randint(1, 2))]
        picks += [self.words[rng.randint(0, 59)] for _ in range(rng.randint(0, 3))]
        rng.shuffle(picks)
        return " ".join(picks)


def turn_arguments(parser: argparse.ArgumentParser) -> None:
    """``--queries``, ``--runs`` and ``--gap`` of a bench whose askers take turns (``in_turns``)."""
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--gap", type=float, default=0.0)


def in_turns(queries: list[str], runs: int, gap: float,
             askers: list[Callable[[str], object]]) -> None:
    """Ask every query of every asker ``runs`` times, the askers taking turns and the first
    changing from query to query, so each meets the same page cache and the same load.
    ``gap``: that many seconds of idle before every call, so each asker is asked as one
    agent's server is, after its own idle time (asked right after another asker instead, a
    call ran on a core the other had just kept busy: 2.9 against 3.3 ms of server CPU a
    search at 100,000 records, docs/performance.md)."""
    for run in range(runs):
        for at, query in enumerate(queries):
            turn = (at + run) % len(askers)
            for ask in askers[turn:] + askers[:turn]:
                time.sleep(gap)
                ask(query)


def make_vault(base: Path, size: int) -> tuple[Path, list[str], Corpus]:
    sys.path.insert(0, str(ROOT))
    from osk.store.vault import init

    root = base / f"vault-{size}"
    corpus = Corpus(SEED + size)
    done = root / ".osk" / "bench-complete"
    if done.exists():  # built by an earlier run with --keep: the same nodes, regenerated
        return root, [corpus.node(number)[0] for number in range(size)], Corpus(SEED + size)
    if root.exists():
        shutil.rmtree(root)
    init(root, git=False)
    paths = []
    for number in range(size):
        rel, text = corpus.node(number)
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        paths.append(rel)
    done.parent.mkdir(parents=True, exist_ok=True)
    done.write_text("", encoding="utf-8")
    return root, paths, Corpus(SEED + size)


# -- fresh-process measurements ----------------------------------------------------------------
CHILD_OSK = """
import json, sys, time
t0 = time.perf_counter()
from osk.search import SearchIndex
from osk.store.vault import Vault
index = SearchIndex(Vault(__import__("pathlib").Path(sys.argv[1])))
hits = index.search(sys.argv[2])
print(json.dumps({"in_process": time.perf_counter() - t0, "hits": len(hits),
                  "report": index.load_report}))
"""

CHILD_BM25 = """
import json, sys, time
from pathlib import Path
t0 = time.perf_counter()
import numpy as np
from rank_bm25 import BM25Okapi
from osk.store import node as node_mod
from osk.search.tokenize import tokenize
root = Path(sys.argv[1])
docs, corpus = [], []
for space in ("Scope", "Domain", "Person"):
    for path in sorted((root / space).rglob("*.md")):
        rel = path.relative_to(root).as_posix()
        n = node_mod.parse(rel, path.read_text(encoding="utf-8"))
        docs.append(rel)
        corpus.append(tokenize(n.title) + tokenize(n.meta.summary) + tokenize(n.body))
bm25 = BM25Okapi(corpus)
scores = bm25.get_scores(tokenize(sys.argv[2]))
top = [docs[i] for i in np.argsort(scores)[::-1][:8]]
print(json.dumps({"in_process": time.perf_counter() - t0, "hits": len(top)}))
"""


def fresh_process(child: str, root: Path, query: str) -> tuple[float, dict]:
    """Wall time of a fresh process; its CPU time (user + system) goes in ``result["cpu"]``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", child, str(root), query], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["cpu"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, result


CHILD_CLI = """
import json, resource, sys
from osk.surfaces.cli import main
code = main(["--vault", sys.argv[1], "search", sys.argv[2], "--json"])
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"in_process": 0.0, "code": code,
                  "peak_mb": peak / (1 << 20 if sys.platform == "darwin" else 1 << 10)}))
"""


def bench_engine(root: Path, query_list: list[str], runs: int) -> dict[str, float]:
    """``osk search`` from a fresh process, and warm searches through one ``Engine``."""
    from osk.engine.core import Engine
    from osk.store.vault import Vault

    figures: dict[str, float] = {}
    fresh_process(CHILD_CLI, root, query_list[0])  # the catalog snapshot, as a first run saves
    colds = [fresh_process(CHILD_CLI, root, query_list[i]) for i in range(runs)]
    assert all(c[1]["code"] == 0 for c in colds), colds
    figures["cli_cold"] = statistics.median(c[0] for c in colds)
    figures["cli_cold_cpu"] = statistics.median(c[1]["cpu"] for c in colds)
    figures["cli_peak_mb"] = max(c[1]["peak_mb"] for c in colds)
    engine = Engine.open(Vault(root), cwd=root)
    for query in query_list[:20]:
        engine.search(query)
    timings, cpus = [], []
    for query in query_list:
        time.sleep(0.005)  # an agent's queries come apart: the periodic look falls among them
        t, c = time.perf_counter(), time.process_time()
        engine.search(query)
        timings.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    figures["engine_warm_median"] = statistics.median(timings)
    figures["engine_warm_p95"] = percentile(timings, 0.95)
    figures["engine_warm_cpu_median"] = statistics.median(cpus)
    figures["engine_peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rows = [("osk search QUERY, fresh process (wall)", figures["cli_cold"]),
            ("  CPU time", figures["cli_cold_cpu"]),
            ("warm Engine.search median", figures["engine_warm_median"]),
            ("warm Engine.search p95", figures["engine_warm_p95"]),
            ("warm Engine.search median CPU time", figures["engine_warm_cpu_median"])]
    for label, value in rows:
        print(f"{label:54} {ms(value)}")
    print(f"{'peak memory of osk search (max of the runs)':54} {figures['cli_peak_mb']:8.0f} MB")
    return figures


# -- in-process measurements ------------------------------------------------------------------
def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.1f} ms"


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def bench_size(base: Path, size: int, queries: int, runs: int,
               engine_only: bool = False) -> dict[str, float]:
    from osk.search import SearchIndex
    from osk.search.tokenize import tokenize
    from osk.store.catalog import Catalog, Changes
    from osk.store.fsutil import atomic_write
    from osk.store.vault import Vault

    started = time.perf_counter()
    root, paths, corpus = make_vault(base, size)
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"\n== {size:,} nodes (vault written in {time.perf_counter() - started:.1f} s; "
          f"load average {load})")
    vault = Vault(root)
    figures: dict[str, float] = {}
    query_list = [corpus.query() for _ in range(queries)]
    if engine_only:
        SearchIndex(vault, refresh_interval=3600).flush()  # loaded, or built once and saved
        return bench_engine(root, query_list, runs)

    shutil.rmtree(vault.state("index"), ignore_errors=True)
    started, cpu = time.perf_counter(), time.process_time()
    index = SearchIndex(vault, refresh_interval=3600)
    len(index)
    figures["build"] = time.perf_counter() - started
    figures["build_cpu"] = time.process_time() - cpu
    snapshot = vault.state("index", "recall.sqlite").stat().st_size

    colds = [fresh_process(CHILD_OSK, root, query_list[i]) for i in range(runs)]
    figures["cold_index"] = statistics.median(c[0] for c in colds)
    figures["cold_index_in_process"] = statistics.median(c[1]["in_process"] for c in colds)
    figures["cold_index_cpu"] = statistics.median(c[1]["cpu"] for c in colds)
    assert all(c[1]["report"] == "loaded" for c in colds), colds

    cold_builds = []
    for i in range(max(1, runs // 3)):
        shutil.rmtree(vault.state("index"), ignore_errors=True)
        cold_builds.append(fresh_process(CHILD_OSK, root, query_list[i])[0])
    figures["cold_no_index"] = statistics.median(cold_builds)

    index = SearchIndex(vault, refresh_interval=3600)
    index.search(query_list[0])
    for query in query_list[:20]:  # first touches of each term's postings
        index.search(query)
    timings = []
    cpu = time.process_time()
    for query in query_list:
        t = time.perf_counter()
        index.search(query)
        timings.append(time.perf_counter() - t)
    figures["warm_cpu_mean"] = (time.process_time() - cpu) / len(query_list)
    figures["warm_median"] = statistics.median(timings)
    figures["warm_p95"] = percentile(timings, 0.95)

    walks = []
    for _ in range(5):
        t = time.perf_counter()
        index.refresh()
        walks.append(time.perf_counter() - t)
    figures["walk"] = statistics.median(walks)

    catalog = Catalog(vault)
    catalog.refresh()
    rng = random.Random(SEED)
    changes, index_part = [], []
    for i in range(21):
        rel = rng.choice(paths)
        text = vault.abs(rel).read_text(encoding="utf-8") + f"\nedited {corpus.text(5, 10)}\n"
        t = time.perf_counter()
        atomic_write(vault.abs(rel), text)
        catalog.note_written(rel)
        t_index = time.perf_counter()
        index.sync(catalog, Changes(changed=(rel,)))
        index.search(query_list[i])
        done = time.perf_counter()
        changes.append(done - t)
        index_part.append(done - t_index)
    figures["change_sync"] = statistics.median(changes)
    figures["change_sync_index"] = statistics.median(index_part)

    hand = []
    for i in range(11):
        rel = rng.choice(paths)
        text = vault.abs(rel).read_text(encoding="utf-8") + f"\nhand {corpus.text(5, 10)}\n"
        vault.abs(rel).write_text(text, encoding="utf-8")
        t = time.perf_counter()
        index.refresh()
        index.search(query_list[i])
        hand.append(time.perf_counter() - t)
    figures["change_hand"] = statistics.median(hand)
    index.flush()

    # rank-bm25 over the same tokens, rebuilt the way the reference rebuilds on a change
    import numpy as np
    from rank_bm25 import BM25Okapi

    from osk.store import node as node_mod

    docs = [index.doc(rel) for rel in catalog.entries]
    texts = {}
    for rel in catalog.entries:
        n = catalog.by_path(rel)
        texts[rel] = tokenize(n.title) + tokenize(n.meta.summary) + tokenize(n.body)
    order = list(texts)
    started = time.perf_counter()
    bm25 = BM25Okapi([texts[rel] for rel in order])
    figures["bm25_build_tokens_only"] = time.perf_counter() - started
    timings = []
    for query in query_list[: max(20, queries // 4)]:
        t = time.perf_counter()
        scores = bm25.get_scores(tokenize(query))
        [order[i] for i in np.argsort(scores)[::-1][:8]]
        timings.append(time.perf_counter() - t)
    figures["bm25_warm_median"] = statistics.median(timings)
    figures["bm25_warm_p95"] = percentile(timings, 0.95)
    rebuilds = []
    for i in range(3):
        rel = rng.choice(order)
        t = time.perf_counter()
        n = node_mod.parse(rel, vault.abs(rel).read_text(encoding="utf-8"))
        texts[rel] = tokenize(n.title) + tokenize(n.meta.summary) + tokenize(n.body)
        bm25 = BM25Okapi([texts[r] for r in order])
        scores = bm25.get_scores(tokenize(query_list[i]))
        [order[j] for j in np.argsort(scores)[::-1][:8]]
        rebuilds.append(time.perf_counter() - t)
    figures["bm25_change"] = statistics.median(rebuilds)
    bm25_colds = [fresh_process(CHILD_BM25, root, query_list[i])
                  for i in range(max(1, runs // 3))]
    figures["bm25_cold"] = statistics.median(c[0] for c in bm25_colds)
    figures["bm25_cold_cpu"] = statistics.median(c[1]["cpu"] for c in bm25_colds)
    del docs
    report(size, figures, snapshot)
    figures.update(bench_engine(root, query_list, runs))
    return figures


def report(size: int, f: dict[str, float], snapshot: int) -> None:
    rows = [
        ("build index from the files (in process)", f["build"], None),
        ("  CPU time", f["build_cpu"], None),
        ("cold first query, index on disk (process wall)", f["cold_index"], f["bm25_cold"]),
        ("  of which in process (imports, load, walk, query)", f["cold_index_in_process"], None),
        ("  CPU time of the whole process", f["cold_index_cpu"], f["bm25_cold_cpu"]),
        ("cold first query, no index (process wall)", f["cold_no_index"], f["bm25_cold"]),
        ("warm query median", f["warm_median"], f["bm25_warm_median"]),
        ("warm query p95", f["warm_p95"], f["bm25_warm_p95"]),
        ("warm query mean CPU time", f["warm_cpu_mean"], None),
        ("freshness walk (stat every node file)", f["walk"], None),
        ("one change (write + sync) + query", f["change_sync"], f["bm25_change"]),
        ("  of which sync + query (the index's part)", f["change_sync_index"], None),
        ("one hand edit (walk) + query", f["change_hand"], f["bm25_change"]),
    ]
    print(f"index on disk (recall.sqlite): {snapshot / 1e6:.1f} MB; rank-bm25 construction "
          f"from tokens alone: {ms(f['bm25_build_tokens_only'])}")
    print(f"{'measure':54} {'osk':>11} {'rank-bm25':>11} {'ratio':>8}")
    for label, ours, theirs in rows:
        if theirs is None:
            print(f"{label:54} {ms(ours)}")
        else:
            print(f"{label:54} {ms(ours)} {ms(theirs)} {theirs / ours:7.1f}x")


def main() -> int:
    # The lexical index's figures: the semantic channel has its own bench (semantic_bench.py).
    os.environ["OSK_SEMANTIC"] = "0"
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,5000,50000",
                        help="comma-separated node counts (default 1000,5000,50000)")
    parser.add_argument("--queries", type=int, default=200, help="warm queries per size")
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per cold figure")
    parser.add_argument("--keep", type=Path, help="build the vaults here and keep them; a vault "
                        "already there is reused (e.g. /tmp/osk-bench-cache/search)")
    parser.add_argument("--engine-only", action="store_true",
                        help="only the figures through the engine (osk search, Engine.search)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    sizes = [int(part) for part in args.sizes.split(",") if part.strip()]
    with tempfile.TemporaryDirectory() as scratch:
        base = args.keep or Path(scratch)
        base.mkdir(parents=True, exist_ok=True)
        for size in sizes:
            bench_size(base, size, args.queries, args.runs, args.engine_only)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
