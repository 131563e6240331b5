"""Recall of what was said, on LoCoMo: rounds captured by the Stop hook, searched and recalled.

Usage: ``python bench/locomo.py [DATA_DIR] [--limit N] [--holdings rounds,nodes]
[--semantic off|on|both] [--keep DIR] [--json]``

DATA_DIR (default ``../shared/eval/locomo-dev``) holds LoCoMo conversations (``26.json`` …,
see its README: CC BY-NC 4.0, read from there, never copied into this repository; tune only on
the development half). Everything goes through osk's real paths:

- rounds: each LoCoMo conversation is one project (a git repository named ``locomo-ID``, so
  its scope is ``locomo-ID``), each of its sessions one Claude Code conversation, written as a
  transcript and captured by the Stop hook (``osk.hooks.main.dispatch``, event ``stop``), each
  pair of turns one round (``Speaker: text`` for each turn, an image as its caption), the
  session's date as the round's time. All conversations share one vault.
- nodes: the same rounds imported as nodes (``osk import``'s path), one per round, in the
  same scopes, in a second vault: title ``locomo ID session S round R``, the session's date
  as the summary, the round's text as the body.

Every question is asked from its conversation's project: through ``Engine.search`` (k = 10,
as the MCP tool) and through the prompt-submit hook (``dispatch``, event ``prompt-submit``,
a fresh conversation per question, no MCP server running, so it ranks over the recall file).
A search hit counts as the round it is (a raw round hit) or stands for (a node: its round by
title, or a round its ``derived-from`` cites). Evidence: each question's ``evidence`` ids
mapped to the rounds holding them; ids that name no turn (``D``, ``D:11:26`` …) are dropped,
and a question left with none is not scored (counted in the output).

Printed per category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop; "1-4" pooled):
recall@5 and recall@10 of the evidence rounds (share of them in the top k, averaged),
nDCG@10 (binary gains), MRR@10; for the hook, the share of questions whose evidence round
(or a node that stands for it) was injected and the mean characters injected (over every
question, silent ones counting 0); for category 5 (adversarial) the share where the hook
injected nothing, and the same for the written ``none`` prompts of ``bench/none_prompts.jsonl``
(coding-session prompts no memory answers) asked from the conversations' projects in turn.
rank-bm25 (lowercase words) and, when installed, bm25s with PyStemmer's English stemmer rank
the same units (round text with its date), one index per conversation, in the same run.

With ``--semantic both``, each holding's channel is also compared with its words alone question
by question: per category and measure, the mean difference, its 95 % bootstrap interval (the
questions resampled 2,000 times, seed 28) and how many questions it raised and lowered. A
category a handful of questions move either way is within noise of its words' figure; one
whose interval lies below 0 is below it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = Path("../shared/eval/locomo-dev")  # from the repository, as the README says
K = 10
MEASURES = ("R@5", "R@10", "nDCG@10", "MRR")  # compared question by question (``paired``)
BOOTSTRAP = 2000  # resamples of the questions for a difference's interval
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop",
              5: "adversarial"}
_DIA = re.compile(r"^D(\d+):(\d+)$")
_WORD = re.compile(r"[a-z0-9]+")
_GROUP = re.compile(r"- (?:\d{4}-\d\d-\d\d )?(_raw/[^\s#]+)")  # a recall block's conversation
_ROUND = re.compile(r"  #Round (\d+)[:( ]")  # and a round of it


# -- the data -----------------------------------------------------------------------------------
@dataclass
class Round:
    conversation: str  # LoCoMo id, e.g. "26"
    session: int
    number: int  # 1-based within the session
    at: datetime
    text: str  # the round as captured: "Speaker: text" per turn
    user: str
    assistant: str

    @property
    def unit(self) -> str:
        return f"{self.conversation}/{self.session}/{self.number}"

    @property
    def title(self) -> str:
        return f"locomo {self.conversation} session {self.session} round {self.number}"


@dataclass
class Question:
    conversation: str
    text: str
    category: int
    evidence: set[str]  # round units


@dataclass
class Data:
    rounds: list[Round] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)
    dropped_ids: int = 0
    unscored: int = 0


def session_time(text: str) -> datetime:
    """LoCoMo's ``1:56 pm on 8 May, 2023``."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")


def turn_text(turn: dict[str, Any]) -> str:
    text = str(turn.get("text", "")).strip()
    caption = turn.get("blip_caption")
    if caption:
        text = f"{text} [shares an image: {caption}]".strip()
    return f"{turn['speaker']}: {text}"


def load(directory: Path, limit: int | None) -> Data:
    data = Data()
    files = sorted(directory.glob("*.json"), key=lambda p: p.stem)
    for path in files:
        conversation = path.stem
        raw = json.loads(path.read_text(encoding="utf-8"))
        where: dict[str, str] = {}  # dia_id -> round unit
        numbers = sorted(int(m.group(1)) for key in raw
                         if (m := re.fullmatch(r"session_(\d+)", key)))
        for session in numbers:
            turns = raw[f"session_{session}"]
            at = session_time(raw[f"session_{session}_date_time"])
            for start in range(0, len(turns), 2):
                pair = turns[start:start + 2]
                user, assistant = turn_text(pair[0]), (turn_text(pair[1]) if len(pair) > 1
                                                        else "")
                found = Round(conversation, session, start // 2 + 1, at,
                              f"{user}\n{assistant}".strip(), user, assistant)
                data.rounds.append(found)
                for turn in pair:
                    where[str(turn["dia_id"])] = found.unit
        for qa in raw["qa"]:
            evidence = set()
            for item in qa.get("evidence", []):
                for part in re.split(r"[;,\s]+", str(item)):
                    if not part:
                        continue
                    unit = where.get(part) if _DIA.match(part) else None
                    if unit is None:
                        data.dropped_ids += 1
                    else:
                        evidence.add(unit)
            category = int(qa["category"])
            if not evidence and category != 5:
                data.unscored += 1
                continue
            data.questions.append(Question(conversation, str(qa["question"]), category,
                                           evidence))
    if limit is not None:  # the first N questions of each conversation, for a quick run
        kept: dict[str, int] = defaultdict(int)
        chosen = []
        for question in data.questions:
            if kept[question.conversation] < limit:
                kept[question.conversation] += 1
                chosen.append(question)
        data.questions = chosen
    return data


# -- building the vaults --------------------------------------------------------------------------
def make_project(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@localhost"}
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
    (root / "README.md").write_text(f"# {root.name}\n", encoding="utf-8")
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "first"], cwd=root, check=True, env=env)
    return root


def project(base: Path, conversation: str) -> Path:
    return base / "projects" / f"locomo-{conversation}"


def transcript(rounds: list[Round], session_id: str, cwd: Path) -> str:
    """A Claude Code transcript of one session: a user entry and an assistant entry per round."""
    lines = []
    for item in rounds:
        stamp = item.at.strftime("%Y-%m-%dT%H:%M:00.000Z")
        common = {"isSidechain": False, "userType": "external", "cwd": str(cwd),
                  "sessionId": session_id, "version": "2.1.97", "timestamp": stamp}
        lines.append({**common, "type": "user", "uuid": str(uuid.uuid4()),
                      "promptId": str(uuid.uuid4()),
                      "message": {"role": "user", "content": item.user}})
        lines.append({**common, "type": "assistant", "uuid": str(uuid.uuid4()),
                      "message": {"role": "assistant", "type": "message",
                                  "content": [{"type": "text", "text": item.assistant or "…"}],
                                  "stop_reason": "end_turn"}})
    return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)


def hook(vault: Any, event: str, payload: dict[str, Any]) -> str:
    """One hook run as the host starts it, in this process (``osk hook EVENT --host claude``)."""
    from osk.hooks.main import Request, dispatch

    env = {**os.environ, "OSK_GROWTH": "off"}
    return dispatch(vault, Request(event, "claude"),  # type: ignore[arg-type]
                    json.dumps(payload).encode("utf-8"), env)


def capture_rounds(base: Path, data: Data) -> tuple[Any, dict[str, str]]:
    """The rounds vault: every session captured by the Stop hook. Returns the vault and each
    raw coordinate's round unit."""
    from osk.capture import raw
    from osk.hooks.state import conversation_name
    from osk.store.vault import init

    vault = init(base / "rounds-vault", git=False)
    by_session: dict[tuple[str, int], list[Round]] = defaultdict(list)
    for item in data.rounds:
        by_session[(item.conversation, item.session)].append(item)
    for conversation in sorted({r.conversation for r in data.rounds}):
        make_project(project(base, conversation))
    units: dict[str, str] = {}
    sessions: dict[str, tuple[str, int]] = {}  # raw record conversation name -> session
    for (conversation, session), rounds in sorted(by_session.items()):
        cwd = project(base, conversation)
        session_id = str(uuid.uuid4())
        sessions[conversation_name(session_id)] = (conversation, session)
        path = base / "transcripts" / f"{session_id}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(transcript(rounds, session_id, cwd), encoding="utf-8")
        hook(vault, "stop", {"session_id": session_id, "transcript_path": str(path),
                             "cwd": str(cwd), "hook_event_name": "Stop",
                             "stop_hook_active": False,
                             "last_assistant_message": rounds[-1].assistant or "…"})
    for record in raw.list_records(vault):
        found = raw.read_record(vault, record.key, record.conversation)
        session = sessions[record.conversation]
        for turn in found.rounds:
            units[turn.coordinate] = f"{session[0]}/{session[1]}/{turn.number}"
    captured = len(units)
    if captured != len(data.rounds):
        raise SystemExit(f"captured {captured} rounds of {len(data.rounds)}")
    return vault, units


def import_nodes(base: Path, data: Data) -> tuple[Any, dict[str, str]]:
    """The nodes vault: one node per round, imported in its conversation's scope."""
    from osk.store.vault import init
    from osk.verbs.importer import Importer, read_lines

    vault = init(base / "nodes-vault", git=False)
    lines = [json.dumps({"title": r.title, "summary": date_words(r.at), "body": r.text,
                         "space": "scope", "scope": f"locomo-{r.conversation}"},
                        ensure_ascii=False) for r in data.rounds]
    parsed, rejected, _ = read_lines(lines)
    importer = Importer(vault, cwd=base / "no-project")
    report = importer.run(parsed)
    importer.finish()
    if rejected or report.rejected:
        raise SystemExit(f"import rejected {len(rejected) + len(report.rejected)} lines")
    return vault, {r.title: r.unit for r in data.rounds}


def channels(semantic: str, holding: str, vault: Any, base: Path) -> Iterable[str]:
    """The runs for one holding, each a label suffix, with ``OSK_SEMANTIC`` set for it while
    the caller asks (a generator: walk it, never list it first). With the channel, every node
    (or raw round) is embedded first, and the rate printed."""
    if semantic == "off":
        yield ""
        return
    from osk.engine.core import Engine

    os.environ["OSK_SEMANTIC"] = "1"
    engine = Engine.open(vault, cwd=base / "no-project")
    index = engine._search_index()
    if index.vectors is None:
        raise SystemExit("--semantic: no semantic model here (pip install .[semantic])")
    started, cpu = time.perf_counter(), time.process_time()
    if holding == "nodes":
        index.embed_missing(budget=None)
        count, rows = f"{len(index)} nodes", len(index.vectors._rows)  # a vector per passage
    else:
        engine.embed_rounds()
        count, rows = round_passages(engine)
    cpu = time.process_time() - cpu
    print(f"embedded {count}, {rows} passages in {time.perf_counter() - started:.1f}"
          f" s ({cpu:.1f} s CPU, {rows / cpu:.0f} passages per CPU-second)", file=sys.stderr)
    yield ", semantic channel"
    if semantic == "both":
        os.environ["OSK_SEMANTIC"] = "0"
        yield ", words only"
    os.environ["OSK_SEMANTIC"] = "0"


def round_passages(engine: Any) -> tuple[str, int]:
    """How many raw rounds have vectors, and how many passages they are."""
    from osk.search.rounds import vectors_file

    rounds, meaning = engine._rounds_channel()
    headers = [meaning.header(vectors_file(engine.vault, rel))
               for rel, *_ in rounds.records()[1]]
    return (f"{sum(len(h.numbers) for h in headers if h)} rounds",
            sum(sum(h.passages) for h in headers if h))


def date_words(at: datetime) -> str:
    return f"{at.day} {at:%B %Y}"


# -- asking -------------------------------------------------------------------------------------
@dataclass
class Answered:
    ranked: list[str]  # round units, best first (k at most)
    injected: set[str] | None = None  # round units the hook injected
    chars: int = 0


class Resolver:
    """Hits and injected items to round units: a raw coordinate, or a node's title/id."""

    def __init__(self, units: dict[str, str]) -> None:
        self.units = units  # coordinate or node title -> unit
        self.by_id: dict[str, str] = {}

    def of_hit(self, hit: Any) -> str | None:
        coordinate = getattr(hit, "coordinate", None)
        if coordinate:
            return self.units.get(coordinate)
        unit = self.units.get(hit.title)
        if unit is not None and getattr(hit, "id", None):
            self.by_id[hit.id] = unit
        return unit

    def of_block(self, block: str) -> set[str]:
        """The units a block names, read as an agent reads it: a raw round's coordinate is its
        conversation's path (the line ``- DATE _raw/KEY/CONV`` above it) with its own
        ``#Round N``."""
        found = set()
        for coordinate in coordinates(block):
            if coordinate in self.units:
                found.add(self.units[coordinate])
        for node_id in re.findall(r"\(id ([0-9a-f-]{36})", block):
            unit = self.by_id.get(node_id)
            if unit is not None:
                found.add(unit)
        return found


def coordinates(block: str) -> list[str]:
    """The raw coordinates of a recall block, in its order (``per_prompt.rendered``'s lines)."""
    out, path = [], None
    for line in block.splitlines():
        if (head := _GROUP.fullmatch(line)) is not None:
            path = head.group(1)
        elif (one := _ROUND.match(line)) is not None and path is not None:
            out.append(f"{path}#Round {one.group(1)}")
        else:
            path = None
    return out


def ask_osk(vault: Any, base: Path, data: Data, resolver: Resolver,
            with_hook: bool) -> list[Answered]:
    from osk.engine.core import Engine

    engines: dict[str, Any] = {}
    answers = []
    for question in data.questions:
        cwd = project(base, question.conversation)
        if question.conversation not in engines:
            cwd.mkdir(parents=True, exist_ok=True)
            if not (cwd / ".git").exists():
                make_project(cwd)
            engines[question.conversation] = Engine.open(vault, cwd=cwd)
        hits = engines[question.conversation].search(question.text, k=K).hits
        ranked = [unit for hit in hits if (unit := resolver.of_hit(hit)) is not None]
        answer = Answered(ranked)
        if with_hook:
            block = injected(vault, cwd, question.text)
            answer.injected, answer.chars = resolver.of_block(block), len(block)
        answers.append(answer)
    return answers


def injected(vault: Any, cwd: Path, prompt: str) -> str:
    """What the prompt-submit hook adds to the model's context for ``prompt``."""
    session_id = str(uuid.uuid4())
    output = hook(vault, "prompt-submit", {
        "session_id": session_id, "transcript_path": str(cwd / f"{session_id}.jsonl"),
        "cwd": str(cwd), "prompt_id": str(uuid.uuid4()), "permission_mode": "default",
        "hook_event_name": "UserPromptSubmit", "prompt": prompt, "source": "user"})
    if not output:
        return ""
    context = json.loads(output)["hookSpecificOutput"]["additionalContext"]
    match = re.search(r"<osk-recall>.*?</osk-recall>", context, re.S)
    return match.group(0) if match else ""


def round_floor_table(vault: Any, data: Data, units: dict[str, str]) -> str:
    """How the rounds fallback's gate trades answers for silence: the hook's own
    ``osk.hooks.recall.per_prompt.rounds_recalled`` asked every question at each pair of floors (its
    confidence floor and the agreement its first rounds' shares must add up to), the rest of
    recall as it is (``bench/round_gate.py`` replays a finer grid on two halves)."""
    from osk.hooks.recall import per_prompt

    kept = per_prompt.ROUND_FLOOR, per_prompt.ROUND_AGREEMENT
    lines = [f"rounds fallback by gate (now confidence {kept[0]}, agreement {kept[1]}, "
             f"alone {per_prompt.ROUND_ALONE}; at most {per_prompt.MAX_ROUNDS} rounds):",
             " confidence  agreement  evidence (1-4)  adversarial silent  rounds shown"]
    try:
        for gate in ((0.0, 0.0), (1.25, 1.5), (1.25, 1.8), (1.25, 2.0), (1.25, 2.25),
                     (1.25, 2.5), (1.5, 2.25), (2.0, 2.25)):
            per_prompt.ROUND_FLOOR, per_prompt.ROUND_AGREEMENT = gate
            hit, answerable, silent, adversarial, shown = 0, 0, 0, 0, 0
            for question in data.questions:
                chosen = per_prompt.rounds_recalled(vault, f"locomo-{question.conversation}",
                                                    question.text, {}, None)
                shown += len(chosen)
                if question.category == 5:
                    adversarial += 1
                    silent += not chosen
                else:
                    answerable += 1
                    hit += bool(question.evidence & {units.get(c.id) for c in chosen})
            lines.append(f" {gate[0]:10}  {gate[1]:9}  {hit / max(answerable, 1):14.3f}  "
                         f"{silent / max(adversarial, 1):18.3f}  "
                         f"{shown / len(data.questions):12.2f}")
    finally:
        per_prompt.ROUND_FLOOR, per_prompt.ROUND_AGREEMENT = kept
    return "\n".join(lines)


def written_none(vault: Any, base: Path, data: Data) -> dict[str, float]:
    """The share of ``bench/none_prompts.jsonl``'s prompts (coding-session prompts no memory
    answers) the hook leaves silent when asked from these conversations' projects in turn."""
    prompts = [json.loads(line)["query"] for line in
               (ROOT / "bench" / "none_prompts.jsonl").read_text(encoding="utf-8").splitlines()
               if line.strip()]
    conversations = sorted({r.conversation for r in data.rounds})
    silent = sum(not injected(vault, project(base, conversations[i % len(conversations)]), text)
                 for i, text in enumerate(prompts))
    return {"silent": silent / len(prompts), "n": len(prompts)}


# -- baselines ----------------------------------------------------------------------------------
def plain_words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def unit_text(item: Round) -> str:
    return f"{date_words(item.at)}\n{item.text}"


def ask_bm25(data: Data, rank: Callable[[list[Round]], Callable[[str], list[int]]]
             ) -> list[Answered]:
    """One index per conversation over its rounds; ``rank(rounds)`` builds a query function."""
    by_conversation: dict[str, list[Round]] = defaultdict(list)
    for item in data.rounds:
        by_conversation[item.conversation].append(item)
    rankers = {conv: (rounds, rank(rounds)) for conv, rounds in by_conversation.items()}
    answers = []
    for question in data.questions:
        rounds, query = rankers[question.conversation]
        answers.append(Answered([rounds[i].unit for i in query(question.text)]))
    return answers


def rank_bm25(rounds: list[Round]) -> Callable[[str], list[int]]:
    from rank_bm25 import BM25Okapi

    index = BM25Okapi([plain_words(unit_text(r)) for r in rounds])

    def query(text: str) -> list[int]:
        scores = index.get_scores(plain_words(text))
        order = sorted(range(len(rounds)), key=lambda i: -scores[i])
        return [i for i in order if scores[i] > 0][:K]

    return query


def bm25s_stemmed(rounds: list[Round]) -> Callable[[str], list[int]]:
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    index = bm25s.BM25()
    index.index(bm25s.tokenize([unit_text(r) for r in rounds], stopwords="en", stemmer=stemmer,
                               show_progress=False), show_progress=False)

    def query(text: str) -> list[int]:
        tokens = bm25s.tokenize([text], stopwords="en", stemmer=stemmer, show_progress=False)
        if not tokens.vocab:
            return []
        found, scores = index.retrieve(tokens, k=min(K, len(rounds)), show_progress=False)
        return [int(i) for i, s in zip(found[0], scores[0], strict=True) if s > 0]

    return query


def bm25s_available() -> bool:
    try:
        import bm25s  # noqa: F401
        import Stemmer  # noqa: F401
    except ImportError:
        return False
    return True


# -- scoring ------------------------------------------------------------------------------------
def scores(question: Question, answer: Answered) -> dict[str, float]:
    ranked = answer.ranked[:K]
    relevant = question.evidence
    gains = [1.0 if unit in relevant else 0.0 for unit in ranked]
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(relevant), K)))
    dcg = sum(g / math.log2(i + 2) for i, g in enumerate(gains))
    first = next((i for i, g in enumerate(gains) if g), None)
    result = {
        "R@5": len(relevant.intersection(ranked[:5])) / len(relevant),
        "R@10": len(relevant.intersection(ranked)) / len(relevant),
        "nDCG@10": dcg / ideal,
        "MRR": 0.0 if first is None else 1 / (first + 1),
    }
    if answer.injected is not None:
        result["hook"] = float(bool(relevant & answer.injected))
        result["chars"] = float(answer.chars)
    return result


def table(data: Data, answers: list[Answered]) -> dict[str, dict[str, float]]:
    rows: dict[str, list[dict[str, float]]] = defaultdict(list)
    silent: list[float] = []
    for question, answer in zip(data.questions, answers, strict=True):
        if question.category == 5:
            if answer.injected is not None:
                silent.append(float(answer.chars == 0))
            continue
        measured = scores(question, answer)
        rows[CATEGORIES[question.category]].append(measured)
        rows["1-4"].append(measured)
    out = {name: {metric: sum(r[metric] for r in items) / len(items) for metric in items[0]}
           | {"n": len(items)} for name, items in rows.items() if items}
    if silent:
        out["adversarial"] = {"silent": sum(silent) / len(silent), "n": len(silent)}
    return out


def paired(data: Data, channel: list[Answered], words: list[Answered]) -> str:
    """Per category and measure, the channel's answers against the words' alone, question by
    question: the mean difference, its 95 % bootstrap interval, and questions up / down."""
    rows: dict[str, list[dict[str, float]]] = defaultdict(list)
    for question, one, other in zip(data.questions, channel, words, strict=True):
        if question.category == 5:
            continue
        mine, theirs = scores(question, one), scores(question, other)
        moved = {metric: mine[metric] - theirs[metric] for metric in MEASURES}
        rows[CATEGORIES[question.category]].append(moved)
        rows["1-4"].append(moved)
    draw = random.Random(28)
    lines = ["| category | " + " | ".join(MEASURES) + " |", "|---|" + "---|" * len(MEASURES)]
    for row in ["1-4", "multi-hop", "temporal", "open-domain", "single-hop"]:
        cells = []
        for metric in MEASURES:
            moved = [item[metric] for item in rows.get(row, [])]
            if not moved:
                continue
            means = sorted(sum(draw.choices(moved, k=len(moved))) / len(moved)
                           for _ in range(BOOTSTRAP))
            low, high = means[int(BOOTSTRAP * 0.025)], means[int(BOOTSTRAP * 0.975) - 1]
            up, down = sum(x > 0 for x in moved), sum(x < 0 for x in moved)
            cells.append(f"{sum(moved) / len(moved):+.4f} [{low:+.3f}, {high:+.3f}] "
                         f"{up}/{down}")
        if cells:
            lines.append(f"| {row} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def render(name: str, result: dict[str, dict[str, float]]) -> str:
    order = ["1-4", "multi-hop", "temporal", "open-domain", "single-hop"]
    lines = [f"## {name}", "| category | n | R@5 | R@10 | nDCG@10 | MRR | hook evidence | "
             "hook chars |", "|---|---|---|---|---|---|---|---|"]
    for row in order:
        if row not in result:
            continue
        r = result[row]
        hook_cells = (f"{r['hook']:.3f} | {r['chars']:.0f}" if "hook" in r else "- | -")
        lines.append(f"| {row} | {r['n']:.0f} | {r['R@5']:.3f} | {r['R@10']:.3f} | "
                     f"{r['nDCG@10']:.3f} | {r['MRR']:.3f} | {hook_cells} |")
    if "written none" in result:
        lines.append(f"written none prompts (bench/none_prompts.jsonl): hook silent for "
                     f"{result['written none']['silent']:.3f} of "
                     f"{result['written none']['n']:.0f}")
    if "adversarial" in result:
        lines.append(f"adversarial (category 5): hook silent for "
                     f"{result['adversarial']['silent']:.3f} of {result['adversarial']['n']:.0f}")
    return "\n".join(lines)


# -- main ---------------------------------------------------------------------------------------
def main(argv: Iterable[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", nargs="?", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--limit", type=int, default=None,
                        help="ask only the first N questions of each conversation")
    parser.add_argument("--holdings", default="rounds,nodes")
    parser.add_argument("--keep", type=Path, default=None, help="build the vaults here")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--floors", action="store_true",
                        help="also print the rounds fallback's answers and silence by floor")
    parser.add_argument("--semantic", choices=("off", "on", "both"), default="off",
                        help="each vault asked with the semantic channel (every node or "
                             "round embedded first), without it, or both in the same vault")
    args = parser.parse_args(list(argv) if argv is not None else None)
    os.environ["OSK_SEMANTIC"] = "0"  # lexical unless --semantic: the targets are lexical
    if not sorted(args.data.glob("*.json")):
        raise SystemExit(f"{args.data}: no LoCoMo conversations (*.json) there")
    data = load(args.data, args.limit)
    scored = sum(q.category != 5 for q in data.questions)
    print(f"{args.data}: {len({r.conversation for r in data.rounds})} conversations, "
          f"{len(data.rounds)} rounds, {len(data.questions)} questions ({scored} of "
          f"categories 1-4); evidence ids dropped (name no turn): {data.dropped_ids}; "
          f"questions left without evidence: {data.unscored}", file=sys.stderr)
    results: dict[str, dict[str, dict[str, float]]] = {}
    comparisons: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="osk-locomo-") as scratch:
        base = args.keep or Path(scratch)
        holdings = [h.strip() for h in args.holdings.split(",") if h.strip()]
        for holding in holdings:
            started = time.perf_counter()
            build = capture_rounds if holding == "rounds" else import_nodes
            vault, units = build(base, data)
            built = time.perf_counter() - started
            asked: dict[str, list[Answered]] = {}
            for channel in channels(args.semantic, holding, vault, base):
                answers = asked[channel] = ask_osk(vault, base, data, Resolver(units),
                                                   with_hook=True)
                results[f"osk, {holding}{channel}"] = table(data, answers)
                results[f"osk, {holding}{channel}"]["written none"] = written_none(vault, base,
                                                                                    data)
            if len(asked) == 2:  # --semantic both: the channel against its words alone
                comparisons[holding] = paired(data, *asked.values())
            if holding == "rounds" and args.floors:
                print(round_floor_table(vault, data, units), file=sys.stderr)
            print(f"osk {holding}: built in {built:.1f} s, asked in "
                  f"{time.perf_counter() - started - built:.1f} s", file=sys.stderr)
    results["rank-bm25"] = table(data, ask_bm25(data, rank_bm25))
    if bm25s_available():
        results["bm25s + English stemmer"] = table(data, ask_bm25(data, bm25s_stemmed))
    if args.json:
        print(json.dumps(results, indent=1))
        return
    for name, result in results.items():
        print(render(name, result) + "\n")
    for holding, compared in comparisons.items():
        print(f"## osk, {holding}: semantic channel minus words only, per question (mean "
              f"[95 % bootstrap interval] questions up/down)\n{compared}\n")


if __name__ == "__main__":
    main()
