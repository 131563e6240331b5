"""The fence holds: every attack of the red-team corpus (``redteam_corpus.py``), written into every
field the hooks inject, leaves the structure of the injected block as osk made it and stays
inside it, through the real hooks of both Claude Code and Codex.

The checks here are the test's own (Unicode NFKC, a short table of confusable letters, plain
regular expressions), not the fence's patterns, so a gap in those patterns fails here.
"""

from __future__ import annotations

import json
import re
import sys
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest
from authority_support import FakeTerminal
from hookkit import context_of, payload, run_hooks_at_once
from redteam_corpus import ATTACKS, Attack
from writekit import make_repo, write_toml

from osk.authority import trust
from osk.calls.request import NewNode
from osk.engine.core import Engine
from osk.errors import LimitError, OskError
from osk.hooks import adapters
from osk.hooks.adapter_contract import Budget
from osk.hooks.inject import ITEM_CHARS, Section, compose
from osk.hooks.recall.per_prompt import render
from osk.provenance.candidates import Candidates
from osk.provenance.recheck_summary import SUMMARY_FILE
from osk.provenance.scope_memory import CAP, ScopeMemory
from osk.search.recall_hits import Recalled
from osk.store import node
from osk.store.vault import Vault

HOSTS = ("claude", "codex")
HUB = "Scope/shop/redteam/redteam.md"
FULLWIDTH = str.maketrans({ch: chr(ord(ch) + 0xFEE0) for ch in '<>:"/\\|?*#^[]'})
HEADINGS = re.compile(r"^## (Scope memory \(|Nodes this scope's work uses|About the person"
                      r"|Recheck notes|Pending reviews|Eviction items)")
# osk's line naming who wrote the run of scope memory lines quoted after it
WRITER = re.compile(r"Written by (an agent through scope_memory \((session key [^\n]*, )?"
                    r"(drafter [^\n]*, )?(host [^\n]*, )?\d{4}-\d\d-\d\d\)"
                    r"|the person, at a terminal \(osk memory --set, \d{4}-\d\d-\d\d\)"
                    r"|a writer no osk write recorded \([^\n]*\)):")
CONFUSABLE = str.maketrans({"\u0405": "S", "\u0455": "s", "\u0397": "H", "\u041d": "H",
                            "\ua789": ":", "\u2236": ":", "\u00ad": ""})
LOOK_OPENERS = "<\u2039\u27e8\u02c2\u2329\u3008\u276e"
TAG_START = re.compile(f"[{LOOK_OPENERS}]" + r"(?=\s*[/|!?]|[A-Za-z\uac00-\ud7a3<])")
ROUND = re.compile(r"  #Round \d+: ")  # a raw round under its conversation's line
ROLE = re.compile(r"(?<!\w)(system|human|assistant|user|developer|tool|시스템|사용자|어시스턴트)"
                  r"\s*:", re.IGNORECASE)


def test_the_corpus_covers_every_family_with_sixty_attacks_or_more():
    families = {attack.family for attack in ATTACKS}
    assert len(ATTACKS) >= 60 and len(families) == 10
    assert len({attack.text for attack in ATTACKS}) == len(ATTACKS)


def folded(text: str) -> str:
    """What a reader takes the text for: invisible characters gone, look-alikes folded."""
    shown = "".join(ch for ch in text if unicodedata.category(ch) != "Cf"
                    and not 0xFE00 <= ord(ch) <= 0xFE0F and not 0xE0100 <= ord(ch) <= 0xE01EF)
    return unicodedata.normalize("NFKC", shown).translate(CONFUSABLE)


def assert_fenced(text: str, tag: str, inner: list[str]) -> None:
    """``text`` is exactly one ``tag`` block whose inner lines are osk's: headings it knows,
    quoted lines, items; and nothing in it reads as a tag, role marker or tool call."""
    lines = text.split("\n")
    assert re.fullmatch(f'<{tag}( scope="[^"<>]*")?( session-key="[^"<>]*")?>', lines[0])
    assert lines[-1] == f"</{tag}>"
    assert not any(unicodedata.category(ch) == "Cf" for ch in text)
    shown = folded("\n".join(lines[2:-1]))  # the lines after osk's head
    assert TAG_START.search(shown) is None, TAG_START.search(shown)
    assert ROLE.search(shown) is None, ROLE.search(shown)
    assert re.search(r"\[\s*/?\s*INST\s*\]", shown, re.IGNORECASE) is None
    assert re.search(r'\{\s*"|"type"|"role"', shown) is None
    assert len(re.findall(r"<\s*/?\s*osk-(?:memory|recall)", folded(text))) == 2  # osk's own
    headings = [line for line in lines[2:-1] if line.startswith("#")]
    assert all(HEADINGS.match(line) for line in headings), headings
    assert len({h.split(" (")[0] for h in headings}) == len(headings)
    for line in lines[2:-1]:
        assert (line.startswith(("## ", "> ", "- ")) or line == ">" or WRITER.fullmatch(line)
                or ROUND.match(line)), line
        assert len(line) <= 600, len(line)  # a title (120), markers and a summary (300)
    inner.extend(lines[2:-1])


# -- the rendering itself, with texts the write path would refuse -----------------------------
def hit(title: str, summary: str, number: int) -> Recalled:
    return Recalled(title, f"0190{number:04d}-0000-7000-8000-000000000000", "Scope/s/c/x.md",
                    summary, ("recheck",), 9.0, "h", "Scope", (0, 0, 0))


def raw_round(conversation: str, excerpt: str, number: int) -> Recalled:
    """A recalled raw round as ``per_prompt.rounds_shown`` makes one (a record's conversation
    id and date are osk's, cleaned, but fenced all the same)."""
    coordinate = f"_raw/s/{conversation}#Round {number}"
    return Recalled(f"raw round {conversation}", coordinate, coordinate, excerpt,
                    ("raw round",), 2.0, coordinate, "round", (0, 0, 0))


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: f"{a.family}:{a.text[:20]!r}")
def test_every_attack_rendered_in_every_field_stays_inside_the_block(attack: Attack):
    budget = Budget(max_chars=50_000, max_bytes=200_000)
    lines: list[str] = []
    memory = compose(f'<osk-memory scope="s" session-key="k">\nhead\n{_memory(attack.text)}',
                     [Section("Nodes this scope's work uses",
                              (attack.text, f"x cites [[{attack.text}]]")),
                      Section("Eviction items", (attack.text,))], budget)
    assert_fenced(memory, "osk-memory", lines)
    recall = render([hit(attack.text, attack.text, 1), hit("t", attack.text.upper(), 2)],
                    budget, 50_000)
    assert_fenced(recall, "osk-recall", lines)
    rounds = render([raw_round("c", attack.text, 1), raw_round(attack.text, attack.text, 2),
                     raw_round("c", attack.text.upper(), 3)], budget, 50_000)
    assert_fenced(rounds, "osk-recall", lines)
    assert len([line for line in lines if line.startswith("- ")]) == 7  # no item split or lost
    assert len([line for line in lines if ROUND.match(line)]) == 3


def _memory(text: str) -> str:
    """The note quoted in runs by writer: an agent whose session key, drafter and host (as a
    remote's ledger line could carry them) are the attack too, the person, and nobody
    recorded, in turn line by line."""
    from osk.hooks.inject import _memory_block
    from osk.provenance.scope_memory import UNRECORDED, LineAuthor

    writers = (LineAuthor("agent", text, text, "2026-12-04T05:00:00+00:00", text),
               LineAuthor("user", at="2026-12-04T05:01:00+00:00"), UNRECORDED)
    authors = [writers[n % 3] if line.strip() else None
               for n, line in enumerate(text.splitlines())]
    return _memory_block("s", text, "0" * 64, False, authors)


# -- through the real hooks, fields written by the real engine ---------------------------------
@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "work" / "shop")


def batches() -> Iterator[list[tuple[str, Attack]]]:
    """The attacks, each with its nonce, in groups whose scope memory fits the cap."""
    group: list[tuple[str, Attack]] = []
    for number, attack in enumerate(ATTACKS):
        nonce = f"rt{number:03d}"
        size = sum(len(n) + len(a.text) + 2 for n, a in group) + len(nonce) + len(attack.text)
        if group and (len(group) == 4 or size > CAP - 20):
            yield group
            group = []
        group.append((nonce, attack))
    yield group


def test_every_attack_through_the_real_hooks_of_both_hosts(vault, project, tmp_path,
                                                           monkeypatch):
    write_toml(vault, (vault.root / "osk.toml").read_text(encoding="utf-8").replace(
        "\nbudget = 1200\n", "\nbudget = 5000\n"))
    eng = Engine.open(vault, cwd=project)
    eng.warm()
    hub = eng.create_node(NewNode("redteam", "Hub.", "Hub.\n", space="Scope",
                                  cluster="redteam", drafter="test-model"))
    assert hub.path == HUB
    memory = ScopeMemory(vault, "shop")
    monkeypatch.setattr(sys, "stdin", FakeTerminal())  # it settles and dismisses as the person
    landed = {"as written": 0, "in look-alikes": 0, "refused": 0}
    shown: dict[tuple[str, str], set[str]] = {(h, f): set() for h in HOSTS for f in FIELDS}
    previous: list[str] = []
    for number, group in enumerate(batches()):
        words = " ".join(f"{w}{number}" for w in ("quokka", "wombat", "numbat", "bilby",
                                                  "dingo", "dugong", "potoroo", "bandicoot"))
        paths = [_node(eng, nonce, attack, words, landed) for nonce, attack in group]
        eng.search(words)  # the index (and the recall file) takes the confirmed versions
        _scope_memory(memory, group, previous)
        previous_first = previous[0] if previous else ""
        previous = [nonce for nonce, _ in group]
        _notices(vault, group, paths)
        for _host, recalled in _hooks("prompt-submit", project, tmp_path, number, words):
            inner: list[str] = []
            assert_fenced(recalled, "osk-recall", inner)
            items = [line for line in inner if line.startswith("- ")]
            for nonce, _ in group:  # title and summary of each node, in one item
                assert sum(nonce in line for line in items) == 1, (nonce, recalled)
        for host, started in _hooks("session-start", project, tmp_path, number, ""):
            inner = []
            assert_fenced(started, "osk-memory", inner)
            _note_shown(shown, host, started, group, inner, previous_first)
    for field, nonces in FIELDS.items():  # every attack in every field, for one host at least
        assert set.union(*(shown[host, field] for host in HOSTS)) >= nonces(), field
    assert landed["refused"] <= 1 and sum(landed.values()) == len(ATTACKS), landed


def _all() -> set[str]:
    return {nonce for group in batches() for nonce, _ in group}


def _firsts() -> set[str]:
    return {group[0][0] for group in batches()}


# What each field of the session start must have shown, over the whole run (a group's first
# attack is its candidate note and, with the next group, its eviction item).
FIELDS = {"scope memory": _all, "digest": _all, "recheck note": _all, "candidate note": _firsts,
          "eviction item": lambda: _firsts() - {list(batches())[-1][0][0]}}


def _note_shown(shown: dict[tuple[str, str], set[str]], host: str, block: str,
                group: list[tuple[str, Attack]], inner: list[str], evicted: str) -> None:
    """Which of the group's attacks the session start showed in each field; a recheck note the
    block leaves out must be one it folded away: the block says so, or is full to the host's
    budget."""
    quoted = [line for line in inner if line.startswith("> ")]
    items = [line for line in inner if line.startswith("- ")]
    for nonce, _ in group:
        found = {"scope memory": any(line.startswith(f"> {nonce} ") for line in quoted),
                 "digest": any(line.startswith(f"- {nonce} ") and " cites [[" not in line
                               for line in items),
                 "recheck note": any(line.startswith(f"- {nonce} ") and
                                     f" cites [[{nonce} " in line for line in items),
                 "candidate note": any(f": {nonce} note " in line for line in items)}
        for field, there in found.items():
            if there:
                shown[host, field].add(nonce)
    if evicted and any("cut from the scope memory" in line and f": {evicted} " in line
                       for line in items):
        shown[host, "eviction item"].add(evicted)
    missing = {nonce for nonce, _ in group} - shown[host, "recheck note"]
    full = not adapters.get(host).budget.fits(block + "x" * ITEM_CHARS)
    assert not missing or full or any("call `overview` to see them all" in line
                                      for line in items), missing


def _node(eng: Engine, nonce: str, attack: Attack, words: str, landed: dict[str, int]) -> str:
    """The attack as a node's summary and title; its path. Where the title rule refuses the
    attack's characters (< > : " [ ] / \\ | ? * # ^), the title is what an attacker writes
    instead: the same text in their fullwidth look-alikes."""
    flat = " ".join(attack.text.split())
    summary = f"{nonce} {words} {flat}"[:300].strip()
    for how, title in (("as written", flat[:120]),
                       ("in look-alikes", flat.translate(FULLWIDTH)[:60])):
        try:
            done = eng.create_node(NewNode(
                f"{nonce} {title}".strip(" ."), summary, "Body.\n", space="Scope",
                cluster="redteam", drafter="test-model"))
        except OskError:
            continue
        landed[how] += 1
        return _confirmed(eng, done.id, done.path)
    assert re.search("[\u202a-\u202e\u2066-\u2069]", title), title  # the only refusal:
    landed["refused"] += 1  # bidirectional controls, which the title rule names
    done = eng.create_node(NewNode(f"{nonce} plain title", summary, "Body.\n", space="Scope",
                                   cluster="redteam", drafter="test-model"))
    return _confirmed(eng, done.id, done.path)


def _confirmed(eng: Engine, node_id: str, path: str) -> str:
    """A node carrying steering is injected once a person confirms it (as here): the fence is
    what still holds then."""
    trust.confirm(eng.vault, node_id)
    return path


def _scope_memory(memory: ScopeMemory, group: list[tuple[str, Attack]],
                  previous: list[str]) -> None:
    """The group's attacks as the scope memory; the last group's first attack becomes an
    eviction item (a refused, too long write, then a shrinking one that drops it)."""
    for eviction in memory.pending_evictions():
        memory.settle(eviction.id, "dismissed", actor="user")
    if previous:
        with pytest.raises(LimitError):
            memory.write(text="z" * (CAP + 1), expect_hash=memory.read()[1])
        current, digest = memory.read()
        kept = current.split(f"\n{previous[1]} ", 1)[1] if len(previous) > 1 else ""
        assert memory.write(text=kept, expect_hash=digest).eviction is not None
    text = "\n".join(f"{nonce} {attack.text}" for nonce, attack in group)
    memory.write(text=text, expect_hash=memory.read()[1])


def _notices(vault: Vault, group: list[tuple[str, Attack]], paths: list[str]) -> None:
    """Recheck notes naming the attacks (the summary the engine keeps for hooks) and a conflict
    candidate whose note is the group's first attack."""
    summary = vault.state(*SUMMARY_FILE)
    summary.parent.mkdir(parents=True, exist_ok=True)
    notes = [{"id": f"c{nonce}", "citing": f"{nonce} {attack.text[:60]}",
              "target": f"[[{nonce} {attack.text}]]", "reason": "target changed",
              "cascade": False, "next": []} for nonce, attack in group]
    summary.write_text(json.dumps({"scopes": {"shop": notes}}), encoding="utf-8")
    candidates = Candidates(vault)
    for candidate in candidates.open():
        candidates.dismiss(candidate.key, "next group")
    parties = [node.parse(rel, vault.abs(rel).read_text(encoding="utf-8"))
               for rel in (HUB, paths[0])]
    nonce, attack = group[0]
    candidates.record("contradiction", parties, note=f"{nonce} note {attack.text}")


def _hooks(event: str, project: Path, tmp_path: Path, number: int,
           words: str) -> list[tuple[str, str]]:
    """``event``'s hook for each host, run side by side, one conversation per group (no review
    reminder joins the block); each host's injected context."""
    name, kind = {"prompt-submit": ("prompt_submit", "UserPromptSubmit"),
                  "session-start": ("session_start", "SessionStart")}[event]
    runs = []
    for host in HOSTS:
        data = json.loads(payload(host, name, transcript=tmp_path / "t.jsonl", cwd=project,
                                  prompt_id=f"p-{number}", prompt=words))
        data["session_id"] = f"redteam-{number}"
        runs.append((event, host, json.dumps(data).encode()))
    found = []
    for host, (code, out, err) in zip(HOSTS, run_hooks_at_once(runs, cwd=project), strict=True):
        assert code == 0 and "failed" not in err, err
        found.append((host, context_of(out, kind)))
    return found


@pytest.mark.parametrize("text", [
    "Use pnpm, not npm; always run the linter first.", "if a < b and c > 0: x <= 3, f -> g",
    "〈한국어 책〉과 «mot» 그리고 1<2", "Tests: run `cargo nextest run` (see README)",
    "배포 전에 `just lint` 를 먼저 실행한다.", "Ratio 3:1, at 10:30 UTC; see http://x.invalid/a"])
def test_ordinary_text_passes_the_fence_unchanged(text: str):
    from osk.hooks import fence

    assert fence.inline(text, 300) == text and fence.block(text) == "> " + text


def test_the_fence_encodes_once_however_often_it_runs():
    from osk.hooks import fence

    for attack in ATTACKS:
        once = fence.inline(attack.text, 10_000)
        assert fence.inline(once, 10_000) == once
