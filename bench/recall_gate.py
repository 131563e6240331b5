"""The per-prompt recall gate calibrated on enough silence: trade-off curves with confidence
intervals, floors chosen on one half and checked on the other.

Usage: ``python bench/recall_gate.py [DEV_DIR] [--locomo DIR] [--seed N] [--json]``

Prompts (each played from its ``from_scope`` through the hook's own functions, as
``bench/eval_retrieval.py`` does, in the dev set's vault built through the import path):

- answerable: the dev set's 54 queries with a grade-2 node (``../shared/eval/dev``);
- ``none``, written for this (``bench/none_prompts.jsonl``, 165 prompts in five groups: chit-chat,
  continuations such as "ok, next one", generic programming questions, questions about other
  projects, and questions about the dev set's own projects that its notes do not answer),
  plus the dev set's six ``none`` queries;
- ``none``, LoCoMo's adversarial questions (category 5 of ``../shared/eval/locomo-dev``): a
  question about someone's life asked in a coding session, where the vault holds nothing about it.

Each of the three groups is shuffled with a fixed seed and cut in two: the calibration half
chooses the floor, the check half says what it reaches. For both paths of the hook (over the
recall file, lexical; asking the MCP server, fused with the semantic channel when its model is
installed) the curve gives, per floor, the share of answerable prompts whose grade-2 node is
injected and the share of ``none`` prompts left silent, each with its 95 % Wilson interval.
The floor chosen is the lowest whose calibration ``none`` silence (written and adversarial
pooled) reaches ``SILENCE_TARGET``: answerable injection only falls as the floor rises.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import eval_retrieval  # noqa: E402  (bench/ is not a package)
import locomo  # noqa: E402

NONE_PROMPTS = ROOT / "bench" / "none_prompts.jsonl"
DEFAULT_DEV = Path("../shared/eval/dev")
SILENCE_TARGET = 0.80  # the target for none prompts left silent
Z = 1.96  # 95 %
Path_ = Callable[[float], Callable[[str], list[Any]]]  # per floor, the hits per prompt
SCOPES = ("assetctl", "arena-server", "docs-site", None)


def wilson(hits: int, n: int) -> tuple[float, float]:
    """The 95 % Wilson score interval of a share ``hits / n``."""
    if n == 0:
        return (0.0, 1.0)
    p = hits / n
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n)) / (1 + Z * Z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def adversarial(directory: Path) -> list[dict[str, Any]]:
    """LoCoMo's category-5 questions as ``none`` prompts, spread over the dev set's scopes."""
    data = locomo.load(directory, None)
    questions = [q.text for q in data.questions if q.category == 5]
    return [{"qid": f"lc-{i:03d}", "query": text, "from_scope": SCOPES[i % len(SCOPES)],
             "kind": "none", "group": "locomo-adversarial", "relevant": {}}
            for i, text in enumerate(questions)]


def halves(items: list[dict[str, Any]], seed: int) -> tuple[list[Any], list[Any]]:
    shuffled = sorted(items, key=lambda item: item["qid"])
    random.Random(seed).shuffle(shuffled)
    cut = len(shuffled) // 2
    return shuffled[:cut], shuffled[cut:]


def split(dev: Path, locomo_dir: Path, seed: int) -> dict[str, dict[str, list[Any]]]:
    """{"calibration"|"check": {"answerable"|"written"|"adversarial": prompts}}."""
    _, queries = eval_retrieval.load(dev)
    written = [json.loads(line) for line in NONE_PROMPTS.read_text(encoding="utf-8").splitlines()]
    groups = {"answerable": [q for q in queries if q["kind"] != "none"],
              "written": written + [q for q in queries if q["kind"] == "none"],
              "adversarial": adversarial(locomo_dir)}
    result: dict[str, dict[str, list[Any]]] = {"calibration": {}, "check": {}}
    for name, items in groups.items():
        result["calibration"][name], result["check"][name] = halves(items, seed)
    return result


# -- the two paths ------------------------------------------------------------------------------
def file_path(vault: Any, base: Path, prompts: list[dict[str, Any]]
              ) -> Path_:
    """Per floor, what the hook over the recall file injects for each prompt."""
    from osk.hooks.recall import per_prompt

    ranked = {q["qid"]: per_prompt.ranked(vault, _scope(vault, base, q), q["query"])
              for q in prompts}
    return lambda floor: lambda qid: per_prompt.select(vault, ranked[qid], floor=floor)


def server_answers(vault: Any, base: Path, prompts: list[dict[str, Any]]) -> dict[str, Any]:
    """Each prompt's answer from ``recall_server.answer`` (what the server's socket runs)."""
    from osk.engine.core import Engine
    from osk.search import recall_server

    index = Engine.open(vault, cwd=base / "no-project")._search_index()
    return {q["qid"]: recall_server.answer(index, vault, _scope(vault, base, q), q["query"])
            for q in prompts}


def server_path(vault: Any, answers: dict[str, Any]) -> Path_:
    """Per fused floor, what the hook asking the MCP server injects (``per_prompt.choose``)."""
    from osk.hooks.recall import per_prompt

    return lambda floor: lambda qid: per_prompt.choose(vault, answers[qid], floor=floor)


def meaning_path(vault: Any, answers: dict[str, Any]) -> Path_:
    """Per meaning floor (``per_prompt.MEANING_FLOOR``), at the hook's fused floor."""
    from osk.hooks.recall import per_prompt

    return lambda floor: lambda qid: per_prompt.choose(vault, answers[qid],
                                                   meaning=floor)


def constant_path(vault: Any, answers: dict[str, Any], name: str) -> Path_:
    """Per value of the gate's constant ``name`` (``AGREE_FLOOR``, ``RESCUE_FLOOR``), at the
    hook's other floors: the constant is set where the gate reads it, for the call only."""
    from osk.hooks.recall import per_prompt

    def chosen(value: float) -> Callable[[str], list[Any]]:
        def hits(qid: str) -> list[Any]:
            kept = getattr(per_prompt, name)
            setattr(per_prompt, name, value)
            try:
                return per_prompt.choose(vault, answers[qid])
            finally:
                setattr(per_prompt, name, kept)
        return hits
    return chosen


_SCOPES: dict[Any, str | None] = {}


def _scope(vault: Any, base: Path, prompt: dict[str, Any]) -> str | None:
    from osk.engine.core import Engine

    wanted = prompt["from_scope"]
    if wanted not in _SCOPES:
        _SCOPES[wanted] = Engine.open(vault, cwd=base / "no-project", scope=wanted).scope
    return _SCOPES[wanted]


def curve(path: Path_, halfset: dict[str, list[Any]],
          titles: dict[str, str], floors: tuple[float, ...]) -> dict[float, dict[str, Any]]:
    """Per floor: answerable injected, written and adversarial ``none`` silent, (hits, n)."""
    from osk.hooks.adapters import get

    budget = get("claude").budget
    out: dict[float, dict[str, Any]] = {}
    for floor in floors:
        chosen = path(floor)
        by_id = {hit.id: titles.get(hit.title, "") for items in halfset.values()
                 for prompt in items for hit in chosen(prompt["qid"])}
        row = {}
        for name, prompts in halfset.items():
            figures = eval_retrieval._injection_figures(prompts, chosen, by_id, budget)
            row[name] = figures["none_silent" if name != "answerable" else "answerable_injected"]
        written, adversarial_ = row["written"], row["adversarial"]
        row["none"] = (written[0] + adversarial_[0], written[1] + adversarial_[1])
        out[floor] = row
    return out


def chosen_floor(calibration: dict[float, dict[str, Any]]) -> float | None:
    """The lowest floor at which, on the calibration half, each group of ``none`` prompts
    (written, adversarial) is silent at least ``SILENCE_TARGET`` of the time with 95 %
    confidence (the Wilson interval's lower bound): the point estimate alone picked a floor
    whose check half fell 11 points short. None when no floor of the grid reaches it."""
    for floor, row in sorted(calibration.items()):
        if all(wilson(*row[group])[0] >= SILENCE_TARGET for group in ("written", "adversarial")):
            return floor
    return None


def fmt(pair: tuple[int, int]) -> str:
    low, high = wilson(*pair)
    share = pair[0] / pair[1] if pair[1] else 0.0
    return f"{pair[0]:>3}/{pair[1]:<3} {share:5.1%} [{low:4.0%}, {high:4.0%}]"


def render(name: str, current: float, curves: dict[str, dict[float, Any]]) -> str:
    floor = chosen_floor(curves["calibration"])
    lines = [f"## {name} (the hook's now: {current:g}; chosen on calibration: {floor})",
             "| half | floor | answerable injected | none silent (written) | "
             "none silent (LoCoMo adversarial) | none silent (pooled) |",
             "|---|---|---|---|---|---|"]
    for half, rows in curves.items():
        for each, row in rows.items():
            mark = " ←" if each == floor else (" (now)" if each == current else "")
            lines.append(f"| {half} | {each:g}{mark} | {fmt(row['answerable'])} | "
                         f"{fmt(row['written'])} | {fmt(row['adversarial'])} | "
                         f"{fmt(row['none'])} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dev", type=Path, nargs="?", default=DEFAULT_DEV)
    parser.add_argument("--locomo", type=Path, default=locomo.DEFAULT_DATA)
    parser.add_argument("--seed", type=int, default=28)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    from osk.hooks.recall import per_prompt

    halfsets = split(args.dev, args.locomo, args.seed)
    sizes = {half: {k: len(v) for k, v in groups.items()} for half, groups in halfsets.items()}
    print(f"prompts per half: {sizes}", file=sys.stderr)
    corpus, _ = eval_retrieval.load(args.dev)
    floors = eval_retrieval.FLOORS
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        (base / "no-project").mkdir()
        vault, titles, _ = eval_retrieval.build_vault(base, corpus, False)
        every = [q for groups in halfsets.values() for items in groups.values() for q in items]
        paths = {"recall file (lexical), floor": (per_prompt.FLOOR, floors,
                                                  file_path(vault, base, every))}
        if eval_retrieval.semantic_ready(vault, base):
            os.environ["OSK_SEMANTIC"] = "1"
            answers = server_answers(vault, base, every)
            paths["MCP server (fused), fused floor"] = (per_prompt.FUSED_FLOOR, floors,
                                                        server_path(vault, answers))
            paths["MCP server (fused), meaning floor at the fused floor"] = (
                per_prompt.MEANING_FLOOR, eval_retrieval.MEANING_FLOORS,
                meaning_path(vault, answers))
            for constant in ("AGREE_FLOOR", "RESCUE_FLOOR"):
                paths[f"MCP server (fused), {constant} at the other floors"] = (
                    getattr(per_prompt, constant), floors + (8.0, 10.0, math.inf),
                    constant_path(vault, answers, constant))
        for name, (current, grid, path) in paths.items():
            results[name] = (current, {half: curve(path, groups, titles, grid)
                                       for half, groups in halfsets.items()})
    if args.json:
        print(json.dumps({name: {"now": now, "chosen": chosen_floor(curves["calibration"]),
                                 "curves": curves} for name, (now, curves) in results.items()},
                         indent=2, default=str))
        return 0
    for name, (current, curves) in results.items():
        print(render(name, current, curves) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
