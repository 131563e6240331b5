"""What ``read_node``'s related nodes cost and how they change with the postings bound (issue 26).

Two parts, lexical channel (``OSK_SEMANTIC=0``), in one process each:

- cost: for each synthetic vault size (``search_bench.make_vault``; default 1,000, 10,000 and
  20,000 nodes), ``read_node`` of a fixed sample of the corpus's nodes that the session (scope
  ``atlas``) may see, back to back through one ``Engine``: median CPU per read. The first
  read of the run is left out (it pays imports).
- agreement on real text: the LoCoMo dev turns (``../shared/eval/locomo-dev``, one node per
  turn of four words or more, each conversation its own scope) and the dev corpus
  (``../shared/eval/dev``) imported as nodes; for a fixed sample of nodes, the similar nodes
  ``read_node`` lists with each postings bound against those of an unbounded ranked search
  (what it listed before the bound): identical lists, the same first node, nodes kept.

Run by hand, not in CI: ``nice -n 10 python bench/related_bench.py [--sizes 1000,10000,20000]
[--bounds 1000,2000,5000] [--keep DIR]``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT))
os.environ["OSK_SEMANTIC"] = "0"

import eval_retrieval  # noqa: E402
from search_bench import make_vault  # noqa: E402

SAMPLE = 40
REAL_SAMPLE = 150


def read_cost(root: Path) -> tuple[float, int]:
    """Median CPU ms of read_node over the sample, and how many reads it counted."""
    from osk.engine.core import Engine
    from osk.errors import NodeNotFound

    engine = Engine.open(root, cwd=root, scope="atlas")
    engine.search("warm up")
    ids = sorted(entry.node.id for entry in engine.catalog.entries.values()
                 if entry.node is not None)
    times = []
    for node_id in random.Random(7).sample(ids, min(SAMPLE, len(ids))):
        started = time.process_time()
        try:
            engine.read_node(node_id)
        except NodeNotFound:
            continue  # another scope's node: invisible to this session
        times.append(time.process_time() - started)
    return statistics.median(times[1:]) * 1000, len(times) - 1


def real_corpus(locomo: Path, dev: Path) -> list[dict[str, Any]]:
    corpus, _ = eval_retrieval.load(dev)
    for path in sorted(locomo.glob("*.json")):
        conversation = json.loads(path.read_text(encoding="utf-8"))
        for key, turns in conversation.items():
            if not re.fullmatch(r"session_\d+", key):
                continue
            for turn in turns:
                words = re.sub(r"[^A-Za-z0-9 ']", " ", turn["text"]).split()
                if len(words) >= 4:
                    turn_id = turn["dia_id"].replace(":", "-")
                    corpus.append({"id": f"{path.stem}-{turn_id}",
                                   "title": f"{path.stem} {turn_id} {' '.join(words[:7])}",
                                   "summary": " ".join(words[:20]), "body": turn["text"],
                                   "space": "scope", "scope": f"talk{path.stem}"})
    return corpus


def agreement(base: Path, bounds: list[int], locomo: Path, dev: Path) -> None:
    import osk.calls.related
    from osk.engine.core import Engine

    vault, _, _ = eval_retrieval.build_vault(base, real_corpus(locomo, dev), False)
    engine = Engine.open(vault, cwd=base / "no-project", scope="talk41")
    ids = sorted(entry.node.id for entry in engine.catalog.entries.values()
                 if entry.node is not None and entry.node.scope in ("talk41", None))
    sample = random.Random(5).sample(ids, min(REAL_SAMPLE, len(ids)))
    print(f"\nreal text: {len(engine.catalog.entries):,} nodes, {len(sample)} read")

    def similar(bound: int | None) -> dict[str, list[str]]:
        osk.calls.related.RELATED_POSTINGS = bound  # type: ignore[assignment]
        return {node_id: [r.id for r in engine.read_node(node_id).related
                          if r.why.startswith("similar")] for node_id in sample}

    full = similar(None)
    listed = sum(map(len, full.values()))
    for bound in bounds:
        got = similar(bound)
        same = sum(got[n] == full[n] for n in sample)
        first = sum(bool(got[n]) and bool(full[n]) and got[n][0] == full[n][0] for n in sample)
        kept = sum(len(set(got[n]) & set(full[n])) for n in sample)
        print(f"bound {bound:>6,}: identical lists {same}/{len(sample)}, same first "
              f"{first}/{len(sample)}, similar nodes kept {kept}/{listed}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,20000")
    parser.add_argument("--bounds", default="500,1000,2000,5000")
    parser.add_argument("--locomo", type=Path, default=ROOT.parent / "shared/eval/locomo-dev")
    parser.add_argument("--dev", type=Path, default=ROOT.parent / "shared/eval/dev")
    parser.add_argument("--keep", type=Path, help="build (or reuse) the synthetic vaults here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="osk-related-") as scratch:
        base = args.keep or Path(scratch)
        base.mkdir(parents=True, exist_ok=True)
        for size in (int(s) for s in args.sizes.split(",") if s):
            root, _, _ = make_vault(base, size)
            cpu, reads = read_cost(root)
            print(f"{size:>7,} nodes: read_node {cpu:.1f} ms CPU (median of {reads})",
                  flush=True)
        if args.locomo.is_dir() and args.dev.is_dir():
            real = base / "real"
            shutil.rmtree(real, ignore_errors=True)
            real.mkdir()
            agreement(real, [int(b) for b in args.bounds.split(",")], args.locomo, args.dev)
    return 0

if __name__ == "__main__":
    raise SystemExit(main())
