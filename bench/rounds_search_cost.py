"""What a search of raw rounds costs with the semantic channel on, beside words alone.

Usage: ``python bench/rounds_search_cost.py [DATA_DIR] [--questions 120] [--runs 2]
[--profile]`` (run by hand, not in CI; needs the ``semantic`` extra).

Captures the LoCoMo conversations of ``DATA_DIR`` (default ``../shared/eval/locomo-dev``) as
raw rounds through the Stop hook (``bench/locomo.py``'s vault), embeds every round, then asks
``Engine.search(question, kind="rounds")`` of the first ``--questions`` questions, each from
its conversation's project (a session sees that conversation's rounds), on warm engines: the
words-only engine and the channel's engine asked in turn, question by question, ``--runs``
times. Prints the CPU median and p90 per search of each and their ratio, then the channel's
query embedding alone (``semantic.asked``, not cached). ``--profile``: the channel's searches
once more under cProfile, the functions that cost the most.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

import locomo  # noqa: E402  (the LoCoMo loader and the rounds vault the recall bench uses)


def cpu_ms(call: Any, *args: Any, **options: Any) -> float:
    began = time.process_time()
    call(*args, **options)
    return (time.process_time() - began) * 1000


def spread(values: list[float]) -> str:
    ordered = sorted(values)
    return (f"median {statistics.median(ordered):.1f} ms, "
            f"p90 {ordered[int(len(ordered) * 0.9)]:.1f} ms")


def engines(vault: Any, base: Path, conversations: set[str]) -> dict[str, Any]:
    """A warm engine per conversation, opened with ``OSK_SEMANTIC`` as it is now."""
    from osk.engine.core import Engine

    opened = {}
    for conversation in sorted(conversations):
        opened[conversation] = Engine.open(vault, cwd=locomo.project(base, conversation))
    return opened


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", nargs="?", type=Path, default=Path("../shared/eval/locomo-dev"))
    parser.add_argument("--questions", type=int, default=120)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    data = locomo.load(args.data, None)
    questions = [q for q in data.questions if q.category in locomo.CATEGORIES][:args.questions]
    conversations = {q.conversation for q in questions}
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        vault, _ = locomo.capture_rounds(base, data)
        # Each engine decides at its first search whether the channel is on: warm each set
        # (indexes opened, the model loaded) while OSK_SEMANTIC says what it should be.
        os.environ["OSK_SEMANTIC"] = "0"
        words = engines(vault, base, conversations)
        for q in questions:
            words[q.conversation].search(q.text, kind="rounds")
        os.environ["OSK_SEMANTIC"] = "1"
        meaning = engines(vault, base, conversations)
        cpu = time.process_time()
        next(iter(meaning.values())).embed_rounds()
        print(f"embedded every round in {time.process_time() - cpu:.1f} s CPU", flush=True)
        for q in questions:
            meaning[q.conversation].search(q.text, kind="rounds")
        ask = [(q.text, words[q.conversation], meaning[q.conversation]) for q in questions]
        from osk.search import semantic

        for run in range(args.runs):
            off, on = [], []
            for text, plain, fused in ask:  # in turn, so that the box's load falls on both
                off.append(cpu_ms(plain.search, text, kind="rounds"))
                semantic.asked.cache_clear()  # each question as if asked for the first time
                on.append(cpu_ms(fused.search, text, kind="rounds"))
            print(f"run {run + 1}: words {spread(off)}; channel on {spread(on)}; ratio of "
                  f"medians {statistics.median(on) / statistics.median(off):.2f}", flush=True)
        encoder = semantic.find_model().load()  # type: ignore[union-attr]
        query = [cpu_ms(encoder.embed_query, [text]) for text, *_ in ask]
        print(f"query embedding alone: {spread(query)}")
        if args.profile:
            profile = cProfile.Profile()
            profile.enable()
            for text, _, fused in ask:
                semantic.asked.cache_clear()
                fused.search(text, kind="rounds")
            profile.disable()
            pstats.Stats(profile).sort_stats("cumulative").print_stats(45)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
