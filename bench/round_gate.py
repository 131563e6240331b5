"""Where per-prompt recall's fallback to raw rounds loses LoCoMo's evidence, and what its gate
trades: answers injected against adversarial questions left silent, per rule, on two halves.

Usage: ``python bench/round_gate.py [DATA_DIR] [--keep DIR] [--seed N] [--limit N] [--curve]``

The rounds vault is built as ``bench/locomo.py`` builds it (every LoCoMo session captured by
the Stop hook; ``--keep DIR`` builds it there once and reuses it). Each question is then asked
of ``osk.hooks.recall.per_prompt.decide`` (the hook's own choice, at its constants; no node in
this vault, so the rounds fallback answers) from its conversation's project, and the misses of
categories 1-4 are sorted by where the evidence was lost:

- silent: the gate showed nothing, though the evidence was among the rounds it would show;
- silent, not shown anyway: the gate showed nothing, and the evidence was not among them;
- not among the shown: the gate opened, but the evidence was ranked below the rounds shown;
- over budget: chosen by ``rounds_recalled`` but cut from the block by ``rendered`` (the
  host's budget, or the rounds' own cap ``ROUND_CHARS``).

Then each question's candidates (``per_prompt.round_candidates``, at each excerpt length of
the grid) are read once, with the written ``none`` prompts of ``bench/none_prompts.jsonl``
asked from the LoCoMo projects in turn, and every gate of a grid (``per_prompt.rounds_sure``'s
floors) is replayed over them in each layout (rounds shown, excerpt length, the rounds' block
cap; the block as ``per_prompt.rendered`` lays it out, a round counted only when it is in the
block): the share of questions of categories 1-4 whose evidence is injected, of adversarial
questions (category 5) and written ``none`` prompts left silent, and the mean characters of
the block (1-4, a silent prompt counting 0), on the calibration half and the check half (each
category shuffled with a fixed seed and cut in two; 95 % Wilson intervals). Printed: the
hook's constants replayed, the gate and layout chosen on the calibration half (``SILENCE``,
``CHARS``) with its figures on both halves, and with ``--curve`` the best gate per layout at
adversarial silence 0.5 and 0.6.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import locomo  # noqa: E402  (bench/ is not a package)
from recall_gate import wilson  # noqa: E402

UNITS = "units.json"  # beside a kept vault: each raw coordinate's LoCoMo round


def vault_for(base: Path, data: locomo.Data) -> tuple[Any, dict[str, str]]:
    """The rounds vault under ``base``: built once, reused when its units are kept there."""
    from osk.store.vault import Vault

    kept = base / UNITS
    if kept.exists():
        return Vault(base / "rounds-vault"), json.loads(kept.read_text(encoding="utf-8"))
    vault, units = locomo.capture_rounds(base, data)
    kept.write_text(json.dumps(units), encoding="utf-8")
    return vault, units


@dataclass
class Asked:
    question: locomo.Question
    injected: set[str]  # round units in the block
    returned: set[str]  # round units rounds_recalled chose (before the budget)
    chars: int
    shown_at: list[str]  # the units the gate would show if it opened


def ask(vault: Any, data: locomo.Data, units: dict[str, str]) -> list[Asked]:
    """Every question through ``decide`` as the hook runs it (no node in this vault, so the
    rounds fallback answers), and through ``rounds_recalled`` with its gate open."""
    from osk.hooks.adapters import get
    from osk.hooks.recall import per_prompt

    adapter = get("claude")
    limit = per_prompt.limit_for(vault, adapter)
    out = []
    for question in data.questions:
        scope = f"locomo-{question.conversation}"
        outcome = per_prompt.decide(vault, scope, question.text, adapter.budget, limit, {})
        opened = gate_open(lambda scope=scope, text=question.text:
                           per_prompt.rounds_recalled(vault, scope, text, {}, None))
        out.append(Asked(question, {units.get(h.id, "") for h in outcome.shown},
                         {units.get(h.id, "") for h in outcome.chosen}, len(outcome.block),
                         [units.get(h.id, "") for h in opened]))
    return out


def gate_open(call: Callable[[], list[Any]], shown: int | None = None) -> list[Any]:
    """``call`` with the rounds gate's floors at zero (and ``shown`` rounds at most, by
    default the hook's): what it would show if it opened."""
    from osk.hooks.recall import per_prompt

    names = ("ROUND_FLOOR", "ROUND_AGREEMENT", "MAX_ROUNDS")
    kept = [getattr(per_prompt, name) for name in names]
    per_prompt.ROUND_FLOOR = per_prompt.ROUND_AGREEMENT = 0.0
    per_prompt.MAX_ROUNDS = shown or kept[2]
    try:
        return call()
    finally:
        for name, value in zip(names, kept, strict=True):
            setattr(per_prompt, name, value)


def misses(asked: Sequence[Asked]) -> dict[str, Any]:
    """Where each question of categories 1-4 went, as counts and shares."""
    where: Counter[str] = Counter()
    chars = silent = adversarial = 0
    for item in asked:
        chars += item.chars
        if item.question.category == 5:
            adversarial += 1
            silent += not item.injected
            continue
        evidence = item.question.evidence
        if evidence & item.injected:
            where["injected"] += 1
        elif evidence & item.returned:
            where["over budget"] += 1
        elif item.returned:
            where["not among the shown"] += 1
        elif evidence & set(item.shown_at):
            where["silent (evidence would have been shown)"] += 1
        else:
            where["silent (evidence not among the rounds anyway)"] += 1
    answerable = sum(where.values())
    return {"answerable": answerable, "where": {k: (v, v / answerable) for k, v in
                                                  where.most_common()},
            "adversarial silent": (silent, adversarial), "mean chars": chars / len(asked)}


def halves(asked: Sequence[Any], seed: int, category: Callable[[Any], int]
           ) -> tuple[list[Any], list[Any]]:
    """``asked`` shuffled with ``seed`` and cut in two, each category cut on its own."""
    first: list[Any] = []
    second: list[Any] = []
    for each in sorted({category(a) for a in asked}):
        items = [a for a in asked if category(a) == each]
        random.Random(seed + each).shuffle(items)
        first += items[:len(items) // 2]
        second += items[len(items) // 2:]
    return first, second


# -- the gate's grid ------------------------------------------------------------------------------
NONE_CATEGORY = 9  # a written ``none`` prompt (bench/none_prompts.jsonl) among the questions
FLOORS = (1.0, 1.25, 1.5)
ALONE = (0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.01)  # 1.01: no round alone opens the gate
AGREE = (2, 3, 4, 5)
AGREEMENT = tuple(x / 20 for x in range(12, 51))
SHOWN = (3, 4, 5, 6)
EXCERPTS = (80, 100, 120)
# The rounds' block at most this many characters (1,200: the default recall budget, no cap).
CAPS = (650, 700, 725, 750, 775, 800, 1200)
Gate = tuple[float, float, int, float]  # per_prompt's ROUND_FLOOR, _ALONE, _AGREE, _AGREEMENT
Layout = tuple[int, int, int]  # per_prompt's MAX_ROUNDS, ROUND_EXCERPT, ROUND_CHARS
LAYOUTS = [(shown, each, cap) for shown in SHOWN for each in EXCERPTS for cap in CAPS]


@dataclass
class Prompt:
    """One prompt's candidate rounds as the gate reads them, and what showing them costs."""

    category: int
    sure: list[float]  # each candidate's confidence, in search's order
    share: list[float]  # each candidate's coverage
    found: dict[Layout, tuple[bool, int]]  # evidence in the block, its characters


def prompts(vault: Any, data: locomo.Data, units: dict[str, str],
            nones: Sequence[str]) -> list[Prompt]:
    """Every question, and every written ``none`` prompt asked from the projects in turn, with
    the rounds ``per_prompt.round_candidates`` gives it at each excerpt length, rendered in
    each layout."""
    from osk.hooks.adapters import get
    from osk.hooks.recall import per_prompt
    from osk.search.recall_hits import confidence, coverage

    budget = get("claude").budget
    limit = per_prompt.limit_for(vault, get("claude"))
    conversations = sorted({r.conversation for r in data.rounds})
    asked = [*((q.conversation, q.text, q.category, q.evidence) for q in data.questions),
             *((conversations[i % len(conversations)], text, NONE_CATEGORY, set())
               for i, text in enumerate(nones))]
    out = []
    kept = per_prompt.ROUND_EXCERPT
    try:
        for conversation, text, category, evidence in asked:
            item = Prompt(category, [], [], {})
            for chars in EXCERPTS:
                per_prompt.ROUND_EXCERPT = chars
                found = per_prompt.round_candidates(vault, f"locomo-{conversation}", text, None)
                if found is None:
                    break
                if not item.sure:
                    item.sure = [confidence(found.stats, found.weights, r.slot)
                                 for r in found.found]
                    item.share = [coverage(found.stats, found.weights, r.slot, found.typed)
                                  for r in found.found]
                hits = gate_open(lambda found=found: per_prompt.rounds_shown(
                    found, {}), shown=max(SHOWN))
                for shown, each, cap in LAYOUTS:
                    if each != chars:
                        continue
                    block, inside = per_prompt.rendered(hits[:shown], budget, min(limit, cap))
                    item.found[(shown, each, cap)] = (
                        bool(evidence & {units.get(h.id, "") for h in inside}), len(block))
            out.append(item)
    finally:
        per_prompt.ROUND_EXCERPT = kept
    return out


def opens(item: Prompt, gate: Gate) -> bool:
    """``per_prompt.rounds_sure`` over precomputed figures (the replay of the hook's own
    constants is printed beside ``decide``'s, so the two are seen to agree)."""
    floor, alone, agree, agreement = gate
    if not any(s >= floor for s in item.sure[:agree]):
        return False
    return max(item.share[:agree]) >= alone or sum(item.share[:agree]) >= agreement


def row(items: Sequence[Prompt], gate: Gate, layout: Layout) -> dict[str, Any]:
    """Evidence injected (1-4), adversarial and written ``none`` silent, mean characters (1-4)."""
    counts = {"evidence": [0, 0], "adversarial": [0, 0], "written": [0, 0]}
    spent = 0
    for item in items:
        open_ = opens(item, gate)
        if item.category == 5 or item.category == NONE_CATEGORY:
            pair = counts["adversarial" if item.category == 5 else "written"]
            pair[0] += not open_
            pair[1] += 1
            continue
        found, cost = item.found.get(layout, (False, 0))
        counts["evidence"][0] += open_ and found
        counts["evidence"][1] += 1
        spent += cost if open_ else 0
    return {**{k: (v[0], v[1]) for k, v in counts.items()},
            "chars": spent / max(counts["evidence"][1], 1)}


def gates() -> list[Gate]:
    return [(f, a, g, t) for f in FLOORS for a in ALONE for g in AGREE for t in AGREEMENT]


class Sweep:
    """Every gate of the grid in every layout over ``items`` at once (``row``'s shares as
    arrays: gate by layout)."""

    def __init__(self, items: Sequence[Prompt]) -> None:
        import numpy as np

        self.gates = gates()
        opened = np.array([[opens(i, g) for i in items] for g in self.gates], dtype=float)
        kind = np.array([i.category for i in items])
        answerable = (kind != 5) & (kind != NONE_CATEGORY)
        found = np.array([[i.found.get(layout, (False, 0))[0] for layout in LAYOUTS]
                          for i in items], dtype=float) * answerable[:, None]
        cost = np.array([[i.found.get(layout, (False, 0))[1] for layout in LAYOUTS]
                         for i in items], dtype=float) * answerable[:, None]
        n = max(int(answerable.sum()), 1)
        self.evidence = opened @ found / n
        self.chars = opened @ cost / n
        adversarial, written = (kind == 5).astype(float), (kind == NONE_CATEGORY).astype(float)
        self.silent = 1 - opened @ adversarial / max(adversarial.sum(), 1)
        self.written = 1 - opened @ written / max(written.sum(), 1)

    def best(self, silence: float, chars: float, layouts: Sequence[int] | None = None
             ) -> tuple[Gate, Layout] | None:
        """The gate and layout with the most evidence whose adversarial silence reaches
        ``silence``, written ``none`` silence stays whole and mean characters stay within
        ``chars`` (of equal evidence, the longer excerpt, then the fewer characters)."""
        import numpy as np

        allowed = (self.silent >= silence)[:, None] & (self.written >= 1)[:, None] & (
            self.chars <= chars)
        if layouts is not None:
            allowed &= np.isin(np.arange(len(LAYOUTS)), layouts)[None, :]
        if not allowed.any():
            return None
        excerpt = np.array([layout[1] for layout in LAYOUTS], dtype=float)
        key = np.where(allowed, self.evidence * 1e6 + excerpt[None, :] * 1e3 - self.chars,
                       -np.inf)
        gate, layout = np.unravel_index(int(np.argmax(key)), key.shape)
        return self.gates[int(gate)], LAYOUTS[int(layout)]


def fmt(pair: tuple[int, int]) -> str:
    low, high = wilson(*pair)
    return f"{pair[0]}/{pair[1]} {pair[0] / max(pair[1], 1):.3f} [{low:.2f}, {high:.2f}]"


def share(pair: Any) -> float:
    return pair[0] / pair[1] if pair[1] else 1.0


SILENCE = 0.52  # the 0.50 for adversarial questions, with two points to spare
CHARS = 580  # the 600 mean characters, with a little to spare


def now() -> tuple[Gate, Layout]:
    """The hook's own gate and layout."""
    from osk.hooks.recall import per_prompt

    return ((per_prompt.ROUND_FLOOR, per_prompt.ROUND_ALONE, per_prompt.ROUND_AGREE,
             per_prompt.ROUND_AGREEMENT),
            (per_prompt.MAX_ROUNDS, per_prompt.ROUND_EXCERPT, per_prompt.ROUND_CHARS))


def fmt_row(r: dict[str, Any]) -> str:
    return (f"evidence {fmt(r['evidence'])} | adversarial silent {fmt(r['adversarial'])} | "
            f"written none silent {fmt(r['written'])} | chars {r['chars']:.0f}")


def curve(calibration: Sequence[Prompt], check: Sequence[Prompt]) -> list[str]:
    """Per layout (rounds shown, excerpt, the rounds' block cap): the most evidence a gate of
    the grid injects on the calibration half at each adversarial silence (written ``none``
    silence whole, any characters), with the same gate's figures on the check half."""
    lines = ["| rounds shown | excerpt | cap | adversarial silence at least | gate (floor, "
             "alone, agree, agreement) | calibration evidence / silence / chars | check "
             "evidence / silence / chars |", "|---|---|---|---|---|---|---|"]
    sweep = Sweep(calibration)
    for number, layout in enumerate(LAYOUTS):
        for silence in (0.5, 0.6):
            found = sweep.best(silence, float("inf"), [number])
            if found is None:
                continue
            a, b = row(calibration, found[0], layout), row(check, found[0], layout)
            lines.append(f"| {layout[0]} | {layout[1]} | {layout[2]} | {silence} | "
                         f"{found[0]} | {share(a['evidence']):.3f} / "
                         f"{share(a['adversarial']):.3f} / {a['chars']:.0f} | "
                         f"{share(b['evidence']):.3f} / {share(b['adversarial']):.3f} / "
                         f"{b['chars']:.0f} |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", nargs="?", type=Path, default=locomo.DEFAULT_DATA)
    parser.add_argument("--keep", type=Path, default=None,
                        help="build the vault here once and reuse it")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--seed", type=int, default=27)
    parser.add_argument("--curve", action="store_true",
                        help="also print the best gate per rounds shown, excerpt and silence")
    args = parser.parse_args()
    import os

    os.environ["OSK_SEMANTIC"] = "0"
    data = locomo.load(args.data, args.limit)
    nones = [json.loads(line)["query"] for line in
             (ROOT / "bench" / "none_prompts.jsonl").read_text(encoding="utf-8").splitlines()
             if line.strip()]
    with tempfile.TemporaryDirectory(prefix="osk-round-gate-") as scratch:
        base = args.keep or Path(scratch)
        base.mkdir(parents=True, exist_ok=True)
        vault, units = vault_for(base, data)
        asked = ask(vault, data, units)
        items = prompts(vault, data, units, nones)
    for half, found in zip(("all", "calibration", "check"),
                           (asked, *halves(asked, args.seed, lambda a: a.question.category)),
                           strict=True):
        result = misses(found)
        print(f"## where the evidence went, {half}: {result['answerable']} questions of "
              f"categories 1-4, adversarial silent {fmt(result['adversarial silent'])}, "
              f"mean characters {result['mean chars']:.0f}")
        for name, (count, part) in result["where"].items():
            print(f"  {name}: {count} ({part:.3f})")
    calibration, check = halves(items, args.seed, lambda i: i.category)
    current = now()
    replayed = row(items, *current)
    print(f"\n## the hook's constants {current} replayed: {fmt_row(replayed)}")
    best = Sweep(calibration).best(SILENCE, CHARS)
    print(f"## chosen on the calibration half (adversarial silent >= {SILENCE}, written none "
          f"all silent, chars <= {CHARS}): {best}")
    if best is not None:
        for half, part in (("calibration", calibration), ("check", check)):
            print(f"  {half}: {fmt_row(row(part, *best))}")
    if args.curve:
        print("\n" + "\n".join(curve(calibration, check)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
