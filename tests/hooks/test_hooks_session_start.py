"""Session-start injection: recheck notes, evictions and folding to the host's budget."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hookkit import context_of, copy_fixture, make_project, payload, run_hook

from osk.capture.raw import list_records
from osk.errors import LimitError
from osk.hooks.adapter_contract import Budget
from osk.hooks.inject import Section, compose
from osk.provenance.recheck_summary import SUMMARY_FILE
from osk.provenance.scope_memory import ScopeMemory
from osk.provenance.sessions import Routing
from osk.store.edges import raw_record


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "shop")


def start(project: Path, tmp_path: Path, host: str = "claude") -> str:
    data = payload(host, "session_start", transcript=tmp_path / "t.jsonl", cwd=project)
    done = run_hook("session-start", host, data, cwd=project)
    assert done.returncode == 0, done.stderr
    return context_of(done.stdout, "SessionStart")


def test_recheck_notes_and_eviction_items_follow_the_scope_memory(vault, project, tmp_path):
    memory = ScopeMemory(vault, "shop")
    memory.write(text="x" * 1400 + "\n- keep me\n", expect_hash=memory.read()[1])
    with pytest.raises(LimitError):
        memory.write(text="y" * 1600, expect_hash=memory.read()[1])
    memory.write(text="- keep me\n", expect_hash=memory.read()[1])  # shrinks: an eviction
    summary = vault.state(*SUMMARY_FILE)
    summary.parent.mkdir(parents=True, exist_ok=True)
    summary.write_text(json.dumps({"scopes": {"shop": [
        {"id": "c1", "citing": "Checkout dates are UTC", "target": "[[Date formatting]]",
         "reason": "target changed", "cascade": False, "next": []}]}}), encoding="utf-8")
    context = start(project, tmp_path)
    order = [context.index(s) for s in ("## Scope memory (shop", "## Recheck notes",
                                        "## Eviction items")]
    assert order == sorted(order)
    assert "Checkout dates are UTC cites [[Date formatting]]: target changed" in context
    assert "1 line(s) cut from the scope memory" in context


def test_an_unbound_key_is_told_where_its_first_node_will_bind_it(vault, project, tmp_path):
    context = start(project, tmp_path)
    assert "not bound yet" in context and "by default to shop" in context
    Routing(vault).bind("shop", "webshop")
    bound = start(project, tmp_path, host="codex")
    assert 'scope="webshop"' in bound and "not bound yet" not in bound


def test_folding_keeps_within_the_budget_and_counts_what_it_left_out():
    budget = Budget(max_chars=700, max_bytes=10_000)
    sections = [Section("Recheck notes", tuple(f"node {n} cites a changed target" for n in
                                              range(40))),
                Section("Eviction items", ("one evicted line",))]
    text = compose("<osk-memory>\n## Scope memory (s, hash 0)\nnote", sections, budget)
    assert len(text) <= 700 and text.endswith("</osk-memory>")
    assert "## Recheck notes (40)" in text and "more; call `overview` to see them all" in text
    shown = text.count("cites a changed target")
    assert 0 < shown < 40 and f"… {40 - shown} more" in text


def test_folding_measures_bytes_too():
    budget = Budget(max_chars=10_000, max_bytes=300)
    text = compose("<osk-memory>", [Section("Notes", tuple("ü" * 40 for _ in range(10)))],
                   budget)
    assert len(text.encode("utf-8")) <= 300 and "more; call `overview`" in text


def test_a_domain_recheck_note_is_shown_once_in_a_scoped_session(vault, project, tmp_path):
    summary = vault.state(*SUMMARY_FILE)
    summary.parent.mkdir(parents=True, exist_ok=True)
    summary.write_text(json.dumps({"scopes": {
        "shop": [{"id": "c1", "citing": "Checkout dates are UTC", "target": "[[Dates]]",
                  "reason": "target changed", "cascade": False, "next": []}],
        "": [{"id": "c2", "citing": "Retry with backoff", "target": "[[Patterns]]",
              "reason": "target changed", "cascade": False, "next": []}],
    }}), encoding="utf-8")
    context = start(project, tmp_path)
    assert ("## Recheck notes (osk's own, from its rechecks ledger): re-read each target, "
            "then re-cite or correct (2)") in context
    assert context.count("Retry with backoff cites [[Patterns]]") == 1


@pytest.mark.parametrize(("host", "transcript"), [
    ("claude", "session.jsonl"),
    ("codex", "rollout-2026-03-14T09-40-00-019a2d7a-41c4-78b1-b7cc-a45d62a89cd5.jsonl")])
def test_the_block_names_the_raw_record_its_conversation_is_captured_in(
        vault, project, tmp_path, host, transcript):
    """Issue 24 item 5: the coordinate a node cites for a round of this conversation is told,
    and it is the one the Stop hook's capture then writes."""
    path = copy_fixture(host, transcript, tmp_path / "sessions" / transcript)
    data = payload(host, "session_start", transcript=path, cwd=project)
    started = run_hook("session-start", host, data, cwd=project)
    context = context_of(started.stdout, "SessionStart")
    [cited] = re.findall(r"\[\[(_raw/[^\]#]+)#Round N\]\]", context)
    stopped = run_hook("stop", host, payload(host, "stop", transcript=path, cwd=project),
                       cwd=project)
    assert stopped.returncode == 0, stopped.stderr
    [record] = list_records(vault)
    assert cited == raw_record(record.key, record.conversation)
    assert (vault.root / f"{cited}.md").is_file()


def test_a_section_none_of_whose_items_fits_is_left_out_heading_and_all():
    budget = Budget(max_chars=80, max_bytes=10_000)  # the heading fits; no item, no count
    text = compose("<osk-memory>\nhead", [Section("Recheck notes", ("x" * 200, "y" * 200))],
                   budget)
    assert "## Recheck notes" not in text and text.endswith("</osk-memory>")
