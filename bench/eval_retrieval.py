"""Retrieval quality on a labelled set, osk against a plain rank-bm25 baseline.

Usage: ``python bench/eval_retrieval.py DATASET_DIR [--isolation on|off|both]
[--supersedes-from-text] [--keep DIR] [--json]``

DATASET_DIR holds ``corpus.jsonl`` and ``queries.jsonl`` in the format of
``../shared/eval/dev/`` (see its README). The corpus is loaded into a fresh vault through the
same path as ``osk import`` (``osk.verbs.importer``: every node written by
``Engine.create_node``). Titles are made portable first, because a title is a file name:
characters a file name or an Obsidian link cannot hold (``: / # ? "`` …) are replaced by
separators or dropped, which keeps the title's words. The importer also creates one cluster
hub per destination ("imports", "imports 2" …); hubs count as irrelevant hits.

Each query is searched by an engine opened for its ``from_scope`` (a session with no project
when it is null), ``k = 10``, through ``Engine.search`` exactly as the MCP tool does. With
``--isolation on`` (the vault default) other projects' Scope nodes are invisible to that
session; ``off`` shows the ranking's locality feature alone.

``--supersedes-from-text`` fills each node's ``supersedes`` key from a sentence at the start of
its body that names the node it replaces (``**Supersedes** "Title"`` or ``"Title" … 대체``),
standing in for the agent that would set the key when writing. Off by default: the labelled
set carries no such key, and the figures without it are the honest default.

Metrics (grades from ``relevant``; "none" queries excluded from the averages): nDCG@10 with
linear gains, Recall@5 of the grade-2 nodes, MRR@10 of the first grade-2 node; per kind; for
``locality`` also the share of queries whose top hit comes from another project, for
``superseded`` the share where the newer node outranks the older; for ``none`` the share of
queries that return any hit (a false-positive measure; neither system abstains) and the AUC of
the top hit's score as a test of "this query has an answer" (answerable against ``none``).

The semantic channel (``osk.search.semantic``) is on when its model is found on this machine
(``OSK_MODEL_DIR`` …). Then every node is embedded before the first query, and each isolation
setting is also run with the channel off (``OSK_SEMANTIC=0``), in the same run, so the two
can be compared; ``--semantic off`` runs the lexical engine only.

The baseline is rank-bm25's ``BM25Okapi`` over title + summary + body, tokenized as lowercase
ASCII words plus Hangul/kana/CJK bigrams (no stemming, no expansion), with no scope features:
the "plain BM25" line of the dataset README.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import tempfile
import time
import unicodedata
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
K = 10
_FORBIDDEN = {":": " -", "/": "-", "\\": " ", "|": "-", "?": "", "*": "", "#": "", "^": "",
              "[": "(", "]": ")", "<": "(", ">": ")", '"': "'"}
_SUPERSEDES = re.compile(
    r'^\s*\*\*(?:Supersedes\*\*\s*"(?P<en>[^"]+)"|"(?P<ko>[^"]+)"[^*\n]*대체\*\*)')


# -- loading ------------------------------------------------------------------------------------
def portable_title(title: str) -> str:
    text = unicodedata.normalize("NFC", title)
    for bad, good in _FORBIDDEN.items():
        text = text.replace(bad, good)
    text = re.sub(r"\s+", " ", text).strip().strip(".").strip()
    return text


def load(dataset: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    def read(name: str) -> list[dict[str, Any]]:
        with open(dataset / name, encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.strip()]

    return read("corpus.jsonl"), read("queries.jsonl")


def import_lines(corpus: list[dict[str, Any]], infer_supersedes: bool) -> list[str]:
    from osk.search.tokenize import loose_key

    by_loose = {loose_key(doc["title"]): portable_title(doc["title"]) for doc in corpus}
    lines = []
    for doc in corpus:
        line = {"title": portable_title(doc["title"]), "summary": doc["summary"],
                "body": doc["body"], "space": doc["space"], "scope": doc.get("scope")}
        if infer_supersedes:
            match = _SUPERSEDES.match(doc["body"])
            if match:
                target = by_loose.get(loose_key(match.group("en") or match.group("ko")))
                if target:
                    line["supersedes"] = target
        lines.append(json.dumps(line, ensure_ascii=False))
    return lines


def build_vault(base: Path, corpus: list[dict[str, Any]], infer_supersedes: bool):
    from osk.store.vault import init
    from osk.verbs.importer import Importer, read_lines

    vault = init(base / "vault", git=False)
    lines, rejected, _ = read_lines(import_lines(corpus, infer_supersedes))
    importer = Importer(vault, cwd=base / "no-project")
    report = importer.run(lines)
    importer.finish()
    problems = list(rejected) + report.rejected
    if problems:
        for item in problems:
            print(f"line {item.number}: rejected: {item.reason}", file=sys.stderr)
        raise SystemExit("the corpus did not load cleanly")
    titles = {portable_title(doc["title"]): doc["id"] for doc in corpus}
    return vault, titles, len(report.hubs)


def set_isolation(vault: Any, on: bool) -> None:
    path = vault.root / "osk.toml"
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"(?m)^scope_isolation = \w+$", f"scope_isolation = {str(on).lower()}", text)
    path.write_text(text, encoding="utf-8")


# -- running ------------------------------------------------------------------------------------
def semantic_ready(vault: Any, base: Path) -> bool:
    """Embed every node now (so no query pays for it); False when the channel is off."""
    from osk.engine.core import Engine

    index = Engine.open(vault, cwd=base / "no-project")._search_index()
    if index.vectors is None:
        return False
    started = time.perf_counter()
    index.embed_missing(budget=None)
    print(f"embedded {len(index)} nodes in {time.perf_counter() - started:.1f} s",
          file=sys.stderr)
    return True


def run_osk(vault: Any, base: Path, queries: list[dict[str, Any]], titles: dict[str, str]):
    from osk.engine.core import Engine

    engines: dict[str | None, Any] = {}
    ranked: dict[str, list[tuple[str | None, float]]] = {}
    for query in queries:
        scope = query["from_scope"]
        if scope not in engines:
            engines[scope] = Engine.open(vault, cwd=base / "no-project", scope=scope)
        hits = engines[scope].search(query["query"], k=K).hits
        ranked[query["qid"]] = [(titles.get(hit.title), hit.score) for hit in hits]
    return ranked


_PLAIN = re.compile(
    "[a-z0-9]+|[\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf"
    "\u4e00-\u9fff\uac00-\ud7a3\uf900-\ufaff\uff66-\uff9f]+")


def plain_tokens(text: str) -> list[str]:
    terms: list[str] = []
    for run in _PLAIN.findall(unicodedata.normalize("NFKC", text).lower()):
        if run.isascii() or len(run) == 1:
            terms.append(run)
        else:
            terms.extend(run[i:i + 2] for i in range(len(run) - 1))
    return terms


def run_baseline(corpus: list[dict[str, Any]], queries: list[dict[str, Any]]):
    from rank_bm25 import BM25Okapi

    bm25 = BM25Okapi([plain_tokens(f"{d['title']} {d['summary']} {d['body']}") for d in corpus])
    ranked = {}
    for query in queries:
        scores = bm25.get_scores(plain_tokens(query["query"]))
        order = sorted(range(len(corpus)), key=lambda i: -scores[i])
        ranked[query["qid"]] = [(corpus[i]["id"], float(scores[i])) for i in order
                                if scores[i] > 0][:K]
    return ranked


# -- scoring ------------------------------------------------------------------------------------
def dcg(gains: list[float]) -> float:
    return sum(gain / math.log2(rank + 2) for rank, gain in enumerate(gains))


def score(queries, ranked, corpus) -> dict[str, Any]:
    docs = {doc["id"]: doc for doc in corpus}
    per_kind: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    foreign_top, newer_first, none_hits = [], [], []
    tops: dict[bool, list[float]] = {True: [], False: []}  # answerable? -> top hit's score
    for query in queries:
        hits = [doc_id for doc_id, _ in ranked[query["qid"]]]
        relevant: dict[str, int] = query["relevant"]
        tops[query["kind"] != "none"].append(max((s for _, s in ranked[query["qid"]]),
                                                 default=0.0))
        if query["kind"] == "none":
            none_hits.append(bool(hits))
            continue
        ideal = dcg(sorted(relevant.values(), reverse=True)[:K])
        ndcg = dcg([relevant.get(h, 0) if h else 0 for h in hits]) / ideal
        answers = [d for d, g in relevant.items() if g == 2]
        recall = len([h for h in hits[:5] if h in answers]) / len(answers)
        mrr = next((1 / (i + 1) for i, h in enumerate(hits) if h in answers), 0.0)
        for kind in ("all", query["kind"]):
            per_kind[kind].append((ndcg, recall, mrr))
        if query["kind"] == "locality" and hits:
            top = docs.get(hits[0]) if hits[0] else None
            foreign_top.append(bool(top and top["space"] == "scope"
                                    and top["scope"] != query["from_scope"]))
        if query["kind"] == "superseded":
            older = [d for d, g in relevant.items() if g == 1
                     and _replaces(docs.get(answers[0], {}), docs.get(d, {}))]
            if older:
                position = {h: i for i, h in enumerate(hits) if h}
                newer_first.append(position.get(answers[0], K) < position.get(older[0], K))
    table = {kind: tuple(sum(v[i] for v in values) / len(values) for i in range(3)) + (
        len(values),) for kind, values in per_kind.items()}
    return {"table": table,
            "locality_foreign_top": _share(foreign_top),
            "superseded_newer_first": _share(newer_first),
            "none_any_hit": _share(none_hits),
            "none_auc": _auc(tops[True], tops[False])}


def _auc(answerable: list[float], unanswerable: list[float]) -> float:
    """How well the top hit's score tells an answerable query from a ``none`` one: the chance
    that a random answerable query's top score beats a random ``none`` query's (ties half)."""
    if not answerable or not unanswerable:
        return float("nan")
    wins = sum(1.0 if a > u else 0.5 if a == u else 0.0
               for a in answerable for u in unanswerable)
    return wins / (len(answerable) * len(unanswerable))


def _replaces(newer: dict[str, Any], older: dict[str, Any]) -> bool:
    match = _SUPERSEDES.match(newer.get("body", ""))
    if not match or not older:
        return False
    from osk.search.tokenize import loose_key

    return loose_key(match.group("en") or match.group("ko")) == loose_key(older["title"])


def _share(values: list[bool]) -> tuple[int, int]:
    return sum(values), len(values)


# -- per-prompt injection (osk.hooks.recall) ---------------------------------------------------
FLOORS = (0.0, 2.0, 2.5, 3.0, 3.25, 3.5, 3.75, 4.0, 4.25, 4.5, 4.75, 5.0, 6.0)
MEANING_FLOORS = (0.0, 0.3, 0.35, 0.375, 0.4, 0.45, 0.5, math.inf)  # inf: meaning never lowers


def run_injection(vault: Any, base: Path, queries: list[dict[str, Any]],
                  titles: dict[str, str]) -> dict[str, Any]:
    """Each query played as a prompt from its from_scope through the prompt-submit hook's own
    functions (rank over the recall file, select, render within the default budget), in a new
    conversation each. Returns the figures at the hook's floor and the curve over FLOORS."""
    from osk.engine.core import Engine
    from osk.hooks.adapters import get
    from osk.hooks.recall import per_prompt

    budget = get("claude").budget
    by_id: dict[str, str] = {}
    ranked: dict[str, list[Any]] = {}
    scopes: dict[str | None, str] = {}
    for query in queries:
        scope = query["from_scope"]
        if scope not in scopes:  # the session's scope as the engine resolves it
            scopes[scope] = Engine.open(vault, cwd=base / "no-project", scope=scope).scope
        hits = per_prompt.ranked(vault, scopes[scope], query["query"])
        ranked[query["qid"]] = hits
        by_id.update({hit.id: titles.get(hit.title, "") for hit in hits})

    def figures(floor: float) -> dict[str, Any]:
        return _injection_figures(
            queries, lambda qid: per_prompt.select(vault, ranked[qid], floor=floor), by_id, budget)

    return {"floor": per_prompt.FLOOR, "at_floor": figures(per_prompt.FLOOR),
            "curve": {floor: figures(floor) for floor in FLOORS}}


def run_injection_fused(vault: Any, base: Path, queries: list[dict[str, Any]],
                        titles: dict[str, str]) -> dict[str, Any]:
    """The hook's path when the session's MCP server answers (``osk.hooks.recall.channel``): each
    prompt ranked by ``recall_server.answer``, the very function the server's socket runs
    (the index's fused order, the hook's confidence), then the hook's ``per_prompt.choose`` and
    ``render``. The curves sweep the fused floor under two gates: the best fused hit's
    confidence alone (``select``), and what the hook does (``choose``: that, or both channels
    backing the fused first node or meaning close enough at ``AGREE_FLOOR``, else the lexical
    order at ``RESCUE_FLOOR``); and, at the hook's fused floor, the meaning floor."""
    from osk.engine.core import Engine
    from osk.hooks.adapters import get
    from osk.hooks.recall import per_prompt
    from osk.search import recall_server

    budget = get("claude").budget
    index = Engine.open(vault, cwd=base / "no-project")._search_index()
    answers: dict[str, Any] = {}
    scopes: dict[str | None, str] = {}
    for query in queries:
        scope = query["from_scope"]
        if scope not in scopes:
            scopes[scope] = Engine.open(vault, cwd=base / "no-project", scope=scope).scope
        answers[query["qid"]] = recall_server.answer(index, vault, scopes[scope],
                                                      query["query"])
    by_id = {hit.id: titles.get(hit.title, "") for found in answers.values()
             for hit in (*found.hits, *found.words)}

    def figures(floor: float, gated: bool,
                meaning: float = per_prompt.MEANING_FLOOR) -> dict[str, Any]:
        def shown(qid: str) -> list[Any]:
            found = answers[qid]
            if not gated:
                return per_prompt.select(vault, found.hits, floor=floor)
            return per_prompt.choose(vault, found, floor=floor, meaning=meaning)

        return _injection_figures(queries, shown, by_id, budget)

    curves = {"confidence": {f: figures(f, False) for f in FLOORS},
              f"what the hook does: confidence, or both channels back the first node or "
              f"meaning reaches {per_prompt.MEANING_FLOOR} at {per_prompt.AGREE_FLOOR}, else the "
              f"lexical order at {per_prompt.RESCUE_FLOOR}": {f: figures(f, True) for f in FLOORS},
              f"the meaning floor (the curve's first column) at the fused floor "
              f"{per_prompt.FUSED_FLOOR}": {m: figures(per_prompt.FUSED_FLOOR, True, m)
                                        for m in MEANING_FLOORS}}
    return {"floor": per_prompt.FUSED_FLOOR, "at_floor": figures(per_prompt.FUSED_FLOOR, True),
            "curves": curves, "agree": sum(found.agree for found in answers.values()),
            "close": sum(found.closeness >= per_prompt.MEANING_FLOOR
                         for found in answers.values())}


def _injection_figures(queries: list[dict[str, Any]], chosen: Callable[[str], list[Any]],
                       by_id: dict[str, str], budget: Any) -> dict[str, Any]:
    """The injection figures when ``chosen(qid)`` gives each query's hits to inject."""
    from osk.hooks.recall import per_prompt

    answered, silent, newer_first, chars, per_kind = [], [], [], [], defaultdict(list)
    for query in queries:
        shown = chosen(query["qid"])
        block, inside = per_prompt.rendered(shown, budget, per_prompt.DEFAULT_BUDGET)
        injected = [by_id.get(hit.id, "") for hit in inside]
        chars.append(len(block))
        relevant: dict[str, int] = query["relevant"]
        if query["kind"] == "none":
            silent.append(not injected)
            continue
        answers = [d for d, g in relevant.items() if g == 2]
        hit = any(a in injected for a in answers)
        answered.append(hit)
        per_kind[query["kind"]].append(hit)
        if query["kind"] == "superseded":
            position = {d: i for i, d in enumerate(injected)}
            older = [d for d, g in relevant.items() if g == 1]
            newer_first.append(hit and all(position.get(o, K) > position[answers[0]]
                                           for o in older if answers[0] in position))
    return {"answerable_injected": _share(answered), "none_silent": _share(silent),
            "superseded_newer_first": _share(newer_first),
            "mean_chars": sum(chars) / len(chars) if chars else 0.0,
            "per_kind": {kind: _share(v) for kind, v in per_kind.items()}}


def print_injection(result: dict[str, Any], title: str) -> None:
    def pct(pair: tuple[int, int]) -> str:
        return f"{pair[0]}/{pair[1]} ({100 * pair[0] / pair[1]:.0f} %)" if pair[1] else "-"

    at = result["at_floor"]
    print(f"\n== per-prompt injection ({title}, default budget), floor {result['floor']}")
    print(f"answerable queries whose grade-2 node is injected  {pct(at['answerable_injected'])}")
    print(f"none queries with nothing injected                 {pct(at['none_silent'])}")
    print(f"superseded: newer injected above the older         "
          f"{pct(at['superseded_newer_first'])}")
    print(f"mean injected characters per prompt                {at['mean_chars']:.0f}")
    print("by kind: " + ", ".join(f"{k} {v[0]}/{v[1]}" for k, v in sorted(at["per_kind"].items())))
    if "agree" in result:
        from osk.hooks.recall import per_prompt
        from osk.search import recall_server

        print(f"prompts where both channels back the fused order's first node (each has it "
              f"in its first {recall_server.AGREE_DEPTH}): {result['agree']}; where meaning's "
              f"first node is at least {per_prompt.MEANING_FLOOR} close: {result['close']}")
    for gate, curve in result.get("curves", {"confidence": result.get("curve")}).items():
        print(f"gate: {gate}")
        print_curve(curve)


def print_curve(curve: dict[float, Any]) -> None:
    print(f"{'floor':>6} {'answerable':>11} {'none silent':>12} {'mean chars':>11} "
          f"{'newer first':>12}")
    for floor, figures in curve.items():
        a, n = figures["answerable_injected"], figures["none_silent"]
        s = figures["superseded_newer_first"]
        print(f"{floor:>6g} {a[0]:>5}/{a[1]:<5} {n[0]:>6}/{n[1]:<5} "
              f"{figures['mean_chars']:11.0f} {s[0]:>6}/{s[1]:<5}")


def print_report(label: str, result: dict[str, Any], baseline: dict[str, Any]) -> None:
    print(f"\n== {label}")
    print(f"{'kind':12} {'n':>3}  {'nDCG@10':>8} {'R@5':>6} {'MRR@10':>7}   "
          f"{'bm25 nDCG':>9} {'R@5':>6} {'MRR@10':>7}")
    kinds = ["all"] + sorted(k for k in result["table"] if k != "all")
    for kind in kinds:
        ours, theirs = result["table"][kind], baseline["table"][kind]
        print(f"{kind:12} {ours[3]:3}  {ours[0]:8.3f} {ours[1]:6.3f} {ours[2]:7.3f}   "
              f"{theirs[0]:9.3f} {theirs[1]:6.3f} {theirs[2]:7.3f}")
    for key, text in (("locality_foreign_top", "locality: top hit from another project"),
                      ("superseded_newer_first", "superseded: newer node above the older"),
                      ("none_any_hit", "none: queries returning any hit")):
        a, b = result[key], baseline[key]
        print(f"{text:44} osk {a[0]}/{a[1]}   bm25 {b[0]}/{b[1]}")
    print(f"{'none: top-score AUC (answerable vs none)':44} osk {result['none_auc']:.3f}   "
          f"bm25 {baseline['none_auc']:.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", type=Path, help="folder with corpus.jsonl and queries.jsonl")
    parser.add_argument("--isolation", choices=("on", "off", "both"), default="both")
    parser.add_argument("--supersedes-from-text", action="store_true",
                        help="fill supersedes from 'Supersedes \"Title\"' sentences")
    parser.add_argument("--keep", type=Path, help="build the vault here and keep it")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--semantic", choices=("auto", "off"), default="auto",
                        help="auto: with and without the semantic channel when its model is "
                             "found; off: lexical only")
    args = parser.parse_args()
    if args.semantic == "off":
        os.environ["OSK_SEMANTIC"] = "0"
    sys.path.insert(0, str(ROOT))
    corpus, queries = load(args.dataset)
    with tempfile.TemporaryDirectory() as scratch:
        base = args.keep or Path(scratch)
        base.mkdir(parents=True, exist_ok=True)
        (base / "no-project").mkdir(exist_ok=True)
        vault, titles, hubs = build_vault(base, corpus, args.supersedes_from_text)
        print(f"loaded {len(corpus)} nodes (+{hubs} cluster hubs) through the import path",
              file=sys.stderr)
        baseline = score(queries, run_baseline(corpus, queries), corpus)
        results = {}
        settings = {"on": [True], "off": [False], "both": [True, False]}[args.isolation]
        channels = [True, False] if semantic_ready(vault, base) else [False]
        for isolation in settings:
            set_isolation(vault, isolation)
            for semantic in channels:
                os.environ["OSK_SEMANTIC"] = "1" if semantic else "0"
                label = f"isolation {'on' if isolation else 'off'}"
                label += ", semantic channel" if semantic else ", lexical only"
                results[label] = score(queries, run_osk(vault, base, queries, titles), corpus)
        set_isolation(vault, True)
        injection = run_injection(vault, base, queries, titles)
        fused = None
        if channels == [True, False]:
            os.environ["OSK_SEMANTIC"] = "1"
            fused = run_injection_fused(vault, base, queries, titles)
    if args.json:
        print(json.dumps({"baseline": baseline, **results, "injection": injection,
                          "injection_fused": fused}, indent=2, default=str))
        return 0
    for label, result in results.items():
        extra = ", supersedes from text" if args.supersedes_from_text else ""
        print_report(f"osk ({label}{extra}) vs plain rank-bm25", result, baseline)
    print_injection(injection, "prompt-submit hook over the recall file, lexical")
    if fused is not None:
        print_injection(fused, "prompt-submit hook asking the MCP server, fused")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
