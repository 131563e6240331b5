"""The secret filter on its labelled table: recall and false positives per family, cost per KB.

Reads the generated table in ``tests/capture/secret_corpus.py`` (fake credentials of every family,
and negatives: code, lockfiles, UUIDs, SHAs, base64, prose). Prints, per family, how many samples
the filter caught (the secret gone) and how many negatives it changed, then the filter's cost
per KB of text (CPU time, the best of N passes, on documents of about 4 KB, the size of a
captured round): on the negatives (what most text is: nothing to find) and on the positives.
``--module FILE`` loads the filter from another file (an older ``osk/capture/secrets.py``, to
compare).

``--table heldout`` reads the held-out table instead (``tests/capture/secret_heldout.py``: the
families issue 25 found missed, written apart from the patterns, with negatives that share their
words).

Usage: ``python bench/secrets_bench.py [--table dev|heldout] [--runs N] [--families]
[--module FILE]``.
Targets: recall ≥ 99 %, false positives ≤ 0.5 %; the cost is recorded in docs/performance.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "capture"))

import secret_corpus  # noqa: E402
import secret_heldout  # noqa: E402
from secret_corpus import caught  # noqa: E402

import osk.capture.secrets  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="timed passes (median)")
    parser.add_argument("--families", action="store_true", help="print every family's line")
    parser.add_argument("--module", type=Path, help="load redact() from this file instead")
    parser.add_argument("--table", choices=("dev", "heldout"), default="dev",
                        help="the development table (default) or the held-out one")
    args = parser.parse_args()
    redact = load(args.module) if args.module else osk.capture.secrets.mask_secrets
    table = secret_heldout if args.table == "heldout" else secret_corpus
    samples, clean = table.positives(), table.negatives()
    hits: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for sample in samples:
        hits[sample.family][1] += 1
        hits[sample.family][0] += caught(sample, redact(sample.text).text)
    false: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for negative in clean:
        false[negative.family][1] += 1
        false[negative.family][0] += redact(negative.text).changed
    report(hits, false, args.families)
    for label, texts in (("negatives", documents([n.text for n in clean])),
                         ("positives", documents([s.text for s in samples]))):
        kb = sum(len(t.encode()) for t in texts) / 1024
        times = []
        for _ in range(args.runs):
            start = time.process_time()
            for text in texts:
                redact(text)
            times.append(time.process_time() - start)
        cost = min(times) / kb * 1e6
        print(f"cost on {label}: {cost:.1f} µs/KB ({len(texts)} documents, {kb:.0f} KB)")
    return 0


def documents(texts: list[str], size: int = 4096) -> list[str]:
    """The table's texts joined into documents of about ``size`` characters."""
    out, current = [], []
    for text in texts:
        current.append(text)
        if sum(map(len, current)) >= size:
            out.append("\n\n".join(current))
            current = []
    return out + (["\n\n".join(current)] if current else [])


def load(path: Path) -> Callable[[str], osk.capture.secrets.Masked]:
    spec = importlib.util.spec_from_file_location("secrets_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module.redact


def report(hits: dict[str, list[int]], false: dict[str, list[int]], every: bool) -> None:
    for family, (got, total) in sorted(hits.items()):
        if every or got < total:
            print(f"  recall {family:38} {got:4}/{total:<4}")
    for family, (bad, total) in sorted(false.items()):
        if every or bad:
            print(f"  false positives {family:31} {bad:4}/{total:<4}")
    got = sum(h[0] for h in hits.values())
    total = sum(h[1] for h in hits.values())
    bad = sum(f[0] for f in false.values())
    clean = sum(f[1] for f in false.values())
    print(f"families: {len(hits)}; recall {got}/{total} = {100 * got / total:.2f} %; "
          f"false positives {bad}/{clean} = {100 * bad / clean:.2f} %")


if __name__ == "__main__":
    raise SystemExit(main())
