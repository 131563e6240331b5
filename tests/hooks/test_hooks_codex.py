"""Codex CLI: the real hook command, fed a payload and rollout in Codex's shapes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hookkit import (
    CODEX_ROLLOUT,
    CODEX_SESSION,
    FIXTURES,
    context_of,
    copy_fixture,
    hook_log,
    make_project,
    payload,
    run_hook,
    state,
)

from osk.capture import raw
from osk.provenance.scope_memory import ScopeMemory
from osk.store.vault import Vault

FINAL = ("Nothing changes unless they run Node older than 22: pnpm then refuses to install "
         "(engine-strict is on in .npmrc). Everyone on 22 or newer sees no difference.")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "shop")


def stop(project: Path, rollout: Path, **overrides: object):
    data = json.loads(payload("codex", "stop", transcript=rollout, cwd=project))
    data.update(overrides)
    return run_hook("stop", "codex", json.dumps(data).encode(), cwd=project)


def record(vault: Vault) -> raw.RawRecord:
    return raw.read_record(vault, "shop", CODEX_SESSION)


def test_stop_captures_each_turn_of_the_rollout(vault, project, tmp_path):
    rollout = copy_fixture("codex", CODEX_ROLLOUT, tmp_path / "sessions" / CODEX_ROLLOUT)
    done = stop(project, rollout)
    assert (done.returncode, done.stdout) == (0, "")
    rounds = record(vault).rounds
    assert [r.user.split("\n")[0] for r in rounds] == [
        "Which package manager does this repo use, and is the lockfile current?",
        "Add an engines field so CI uses Node 22.",
        "Now run the full e2e suite.",
        "Skip e2e. What does the engines field change for developers?",
    ]
    assert [r.completion for r in rounds] == [
        "019a2d7b-0001-7c55-9e10-3f2a1b0c4d01", "019a2d7c-0002-7c55-9e10-3f2a1b0c4d02",
        "019a2d7d-0003-7c55-9e10-3f2a1b0c4d03", "019a2d7e-0004-7c55-9e10-3f2a1b0c4d04"]
    assert rounds[3].assistant == FINAL
    assert rounds[2].assistant.endswith("[interrupted by the user]")
    assert "AGENTS.md instructions" not in json.dumps([r.text for r in rounds])
    cursor = state(vault, "codex", CODEX_SESSION)
    assert cursor.offset == rollout.stat().st_size and cursor.rounds == 4
    assert hook_log(vault) == ""


def test_a_double_fired_stop_captures_each_turn_once(vault, project, tmp_path):
    rollout = copy_fixture("codex", CODEX_ROLLOUT, tmp_path / CODEX_ROLLOUT)
    stop(project, rollout)
    stop(project, rollout)
    assert len(record(vault).rounds) == 4


def test_flush_race_the_stop_payload_supplies_the_missing_final_answer(vault, project,
                                                                       tmp_path):
    lines = (FIXTURES / "codex" / CODEX_ROLLOUT).read_text(encoding="utf-8").splitlines()
    unflushed = [i for i, line in enumerate(lines)
                 if '"final_answer"' in line and "Nothing changes" in line]
    rollout = tmp_path / CODEX_ROLLOUT
    rollout.write_text("\n".join(line for i, line in enumerate(lines) if i not in unflushed)
                       + "\n", encoding="utf-8")
    stop(project, rollout)
    assert record(vault).rounds[3].assistant == FINAL
    # The late lines arrive with the next turn's task_complete for turn 4: nothing doubles.
    with open(rollout, "a", encoding="utf-8") as handle:
        for i in unflushed:
            handle.write(lines[i] + "\n")
        handle.write(json.dumps({"timestamp": "2026-03-14T09:45:00.000Z", "type": "event_msg",
                                 "payload": {"type": "task_complete",
                                             "turn_id": "019a2d7e-0004-7c55-9e10-3f2a1b0c4d04",
                                             "last_agent_message": FINAL}}) + "\n")
    stop(project, rollout)
    assert len(record(vault).rounds) == 4


def test_session_start_injects_within_codexs_budget(vault, project, tmp_path):
    memory = ScopeMemory(vault, "shop")
    memory.write(text="- Use pnpm, never npm.\n", expect_hash=memory.read()[1])
    start = payload("codex", "session_start", transcript=tmp_path / "r.jsonl", cwd=project)
    done = run_hook("session-start", "codex", start, cwd=project)
    context = context_of(done.stdout, "SessionStart")
    assert "- Use pnpm, never npm." in context and memory.read()[1][:12] in context
    assert len(context.encode("utf-8")) <= 8000


def test_prompt_submit_counts_turns_by_turn_id_and_reminds_at_turn_9(vault, project, tmp_path):
    rollout = tmp_path / "r.jsonl"
    outputs = []
    for turn in range(1, 10):
        data = payload("codex", "prompt_submit", transcript=rollout, cwd=project,
                       prompt_id=f"turn-{turn}", prompt=f"step {turn}")
        outputs.append(run_hook("prompt-submit", "codex", data, cwd=project).stdout)
    again = payload("codex", "prompt_submit", transcript=rollout, cwd=project,
                    prompt_id="turn-9", prompt="step 9")
    assert run_hook("prompt-submit", "codex", again, cwd=project).stdout == ""
    assert [n for n, out in enumerate(outputs, start=1) if out] == [9]
    reminder = context_of(outputs[8], "UserPromptSubmit")
    assert "input turn 9" in reminder and f"_raw/shop/{CODEX_SESSION}" in reminder
    assert state(vault, "codex", CODEX_SESSION).inputs == 9
