"""How the dev figures move when each fusion constant moves ±20 % (run by hand; needs the model).

Usage: ``python bench/fusion_sensitivity.py DATASET_DIR [--step 0.2]``

Builds the vault of ``eval_retrieval.py`` once (isolation on, every node embedded), then runs
every query with the constants of ``osk.search.ranking`` as they are, and with one of them at a
time multiplied by 1 − step and 1 + step: ``SEMANTIC_WEIGHT``, ``COVERAGE_POWER``,
``SEMANTIC_FLOOR``, ``SEMANTIC_LOCALITY``. Prints nDCG@10 overall and per kind, the ``none``
kind's top-score AUC, and whether every target of issue 13 still holds against the lexical
figures of the same run (overall ≥ 0.86, paraphrase ≥ 0.65, cross_lang ≥ 0.80, ko ≥ 0.95, no
kind more than 0.01 below lexical, the AUC not below lexical). A fixed point that meets the
targets only at its exact constants is a knife edge; this says whether it is one.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

import eval_retrieval as ev  # noqa: E402  (the dev-set loader and scorer)

KINDS = ("title", "keyword", "ko", "cross_lang", "locality", "superseded", "person",
         "paraphrase")
CONSTANTS = ("SEMANTIC_WEIGHT", "COVERAGE_POWER", "SEMANTIC_FLOOR", "SEMANTIC_LOCALITY")
FLOORS = {"all": 0.86, "paraphrase": 0.65, "cross_lang": 0.80, "ko": 0.95}


def misses(result: dict[str, Any], lexical: dict[str, Any]) -> list[str]:
    """The targets a result misses, by name (empty: all met)."""
    table, plain = result["table"], lexical["table"]
    missed = [kind for kind, floor in FLOORS.items() if table[kind][0] < floor]
    missed += [f"{kind}<lex" for kind in KINDS if table[kind][0] < plain[kind][0] - 0.01]
    if result["none_auc"] < lexical["none_auc"]:
        missed.append("auc")
    return missed


def row(label: str, result: dict[str, Any], lexical: dict[str, Any] | None) -> str:
    table = result["table"]
    cells = " ".join(f"{table[kind][0]:6.3f}" for kind in ("all", *KINDS))
    verdict = "" if lexical is None else ("  all targets met" if not misses(result, lexical)
                                          else "  misses " + ", ".join(misses(result, lexical)))
    return f"{label:30} {cells}  {result['none_auc']:6.3f}{verdict}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--step", type=float, default=0.2, help="relative move (0.2: ±20 %%)")
    args = parser.parse_args()
    from osk.search import ranking

    corpus, queries = ev.load(args.dataset)
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        (base / "no-project").mkdir()
        vault, titles, _ = ev.build_vault(base, corpus, False)
        ev.set_isolation(vault, True)
        if not ev.semantic_ready(vault, base):
            raise SystemExit("the semantic channel's model is not installed (docs/search.md)")

        def measure() -> dict[str, Any]:
            return ev.score(queries, ev.run_osk(vault, base, queries, titles), corpus)

        os.environ["OSK_SEMANTIC"] = "0"
        lexical = measure()
        os.environ["OSK_SEMANTIC"] = "1"
        print(f"{'':30} " + " ".join(f"{kind[:6]:>6}" for kind in ("all", *KINDS)) + "     auc")
        print(row("lexical only", lexical, None))
        print(row("as set: " + ", ".join(f"{getattr(ranking, name):g}" for name in CONSTANTS),
                  measure(), lexical))
        for name in CONSTANTS:
            kept = getattr(ranking, name)
            for scale in (1 - args.step, 1 + args.step):
                setattr(ranking, name, kept * scale)
                try:
                    print(row(f"{name} {kept * scale:.3g}", measure(), lexical))
                finally:
                    setattr(ranking, name, kept)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
