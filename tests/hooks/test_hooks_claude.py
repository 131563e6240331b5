"""Claude Code: the real hook command, fed a payload and transcript in Claude Code's shapes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hookkit import (
    CLAUDE_SESSION,
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

FINAL = ("Added a note under \"Testing\" in README.md: dates are formatted in UTC, so tests do "
         "not depend on the machine's time zone.")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "shop")


def stop(vault: Vault, project: Path, transcript: Path, **overrides: object):
    data = json.loads(payload("claude", "stop", transcript=transcript, cwd=project))
    data.update(overrides)
    return run_hook("stop", "claude", json.dumps(data).encode(), cwd=project)


def record(vault: Vault) -> raw.RawRecord:
    return raw.read_record(vault, "shop", CLAUDE_SESSION)


def test_stop_captures_every_round_of_the_transcript_into_the_raw_record(vault, project,
                                                                         tmp_path):
    transcript = copy_fixture("claude", "session.jsonl", tmp_path / "t.jsonl")
    done = stop(vault, project, transcript)
    assert (done.returncode, done.stdout) == (0, "")
    rounds = record(vault).rounds
    assert [r.user for r in rounds] == [
        "Why does the checkout test fail on CI but pass locally?",
        "Find every place that formats a delivery date.",
        "/review-pr 42",
        "Rename it and push the branch.",
        "Don't push. Just add a note about the time zone to the README.",
    ]
    assert rounds[4].assistant == FINAL
    assert rounds[0].tools == ("Bash: npm test -- checkout",
                               "Read: /home/dev/shop/.github/workflows/ci.yml")
    assert rounds[3].assistant.endswith("[interrupted by the user]")
    assert "Searching for formatDelivery" not in json.dumps([r.text for r in rounds])
    assert all(r.host == "claude" and r.intact for r in rounds)
    assert hook_log(vault) == ""


def test_the_cursor_stops_before_the_line_the_host_is_still_writing(vault, project, tmp_path):
    transcript = copy_fixture("claude", "session.jsonl", tmp_path / "t.jsonl")
    stop(vault, project, transcript)
    data = transcript.read_bytes()
    cursor = state(vault, "claude", CLAUDE_SESSION)
    assert cursor.offset == data.rfind(b"\n") + 1 < len(data)
    assert cursor.rounds == 5 and cursor.record == f"_raw/shop/{CLAUDE_SESSION}"
    partial = data[cursor.offset:]
    line = json.dumps({"parentUuid": partial.split(b'"')[3].decode(), "isSidechain": False,
                       "type": "system", "subtype": "stop_hook_summary"},
                      separators=(",", ":")).encode()
    assert line.startswith(partial)
    with open(transcript, "ab") as handle:  # the host finishes the line it was writing
        handle.write(line[len(partial):] + b"\n")
    again = stop(vault, project, transcript)
    assert again.returncode == 0 and len(record(vault).rounds) == 5
    assert state(vault, "claude", CLAUDE_SESSION).offset == transcript.stat().st_size


def test_a_double_fired_stop_captures_each_round_once(vault, project, tmp_path):
    transcript = copy_fixture("claude", "session.jsonl", tmp_path / "t.jsonl")
    stop(vault, project, transcript)
    second = stop(vault, project, transcript)
    assert (second.returncode, second.stdout) == (0, "")
    assert len(record(vault).rounds) == 5
    assert state(vault, "claude", CLAUDE_SESSION).answers == 5


def test_growth_hears_of_a_stop_once_and_not_of_a_double_fire(vault, project, tmp_path):
    transcript = copy_fixture("claude", "session.jsonl", tmp_path / "t.jsonl")
    data = payload("claude", "stop", transcript=transcript, cwd=project)
    tools = tmp_path / "bin"  # git, but no `claude` to fork a review with
    tools.mkdir()
    (tools / "git").symlink_to(shutil.which("git"))
    on = {"OSK_GROWTH": "on", "PATH": str(tools)}
    for _ in range(2):
        done = run_hook("stop", "claude", data, cwd=project, env=on)
        assert (done.returncode, done.stdout) == (0, "")
    counter = vault.state("growth", "conversations", "claude", f"{CLAUDE_SESSION}.json")
    assert json.loads(counter.read_text(encoding="utf-8"))["answers"] == 1


def test_flush_race_the_payload_completes_the_answer_and_the_next_stop_does_not_duplicate(
        vault, project, tmp_path):
    full = (FIXTURES / "claude" / "session.jsonl").read_bytes().split(b"\n")
    complete = full[:-1]
    transcript = tmp_path / "t.jsonl"
    # Stop fires before the final assistant line of turn 5 is written.
    transcript.write_bytes(b"\n".join(complete[:-1]) + b"\n")
    stop(vault, project, transcript)
    assert record(vault).rounds[4].assistant == FINAL
    # The host flushes the late line, then a sixth turn happens and stops.
    next_turn = [
        {"type": "user", "uuid": "u-6", "promptId": "p-6", "isSidechain": False,
         "timestamp": "2026-03-14T09:40:00.000Z",
         "message": {"role": "user", "content": "Thanks. Open a PR for it."}},
        {"type": "assistant", "uuid": "a-6", "isSidechain": False,
         "message": {"id": "msg_6", "role": "assistant",
                     "content": [{"type": "text", "text": "Opened PR 43."}]}},
    ]
    with open(transcript, "ab") as handle:
        handle.write(complete[-1] + b"\n")
        handle.write(b"".join(json.dumps(x).encode() + b"\n" for x in next_turn))
    stop(vault, project, transcript, prompt_id="p-6", last_assistant_message="Opened PR 43.")
    rounds = record(vault).rounds
    assert [r.user for r in rounds][4:] == [
        "Don't push. Just add a note about the time zone to the README.",
        "Thanks. Open a PR for it."]
    assert rounds[4].assistant == FINAL and rounds[5].assistant == "Opened PR 43."


def test_a_turn_whose_input_is_not_flushed_yet_is_caught_up_on_the_next_stop(vault, project,
                                                                              tmp_path):
    lines = (FIXTURES / "claude" / "session.jsonl").read_bytes().split(b"\n")[:-1]
    cut = next(i for i, line in enumerate(lines) if b"Don't push." in line)
    transcript = tmp_path / "t.jsonl"
    transcript.write_bytes(b"\n".join(lines[:cut]) + b"\n")
    stop(vault, project, transcript)  # the payload names turn 5; the file ends in turn 4
    assert [r.number for r in record(vault).rounds] == [1, 2, 3, 4]
    transcript.write_bytes(b"\n".join(lines) + b"\n")
    stop(vault, project, transcript)
    rounds = record(vault).rounds
    assert len(rounds) == 5 and rounds[4].assistant == FINAL


def test_malformed_and_truncated_lines_are_skipped_with_a_warning_in_the_hook_log(
        vault, project, tmp_path):
    transcript = copy_fixture("claude", "damaged.jsonl", tmp_path / "t.jsonl")
    done = stop(vault, project, transcript)
    assert (done.returncode, done.stdout) == (0, "")
    assert len(record(vault).rounds) == 5
    log = hook_log(vault)
    assert log.count("warning:") == 3 and "skipped line at byte" in log


def test_sub_agent_stops_and_stop_hooks_inside_a_sub_agent_capture_nothing(vault, project,
                                                                           tmp_path):
    transcript = copy_fixture("claude", "session.jsonl", tmp_path / "t.jsonl")
    done = stop(vault, project, transcript, agent_id="a3f9c2d", agent_type="Explore")
    assert done.returncode == 0 and not (vault.raw_dir / "shop").exists()


def test_session_start_injects_the_scope_memory_with_its_hash_then_a_pointer(vault, project,
                                                                             tmp_path):
    memory = ScopeMemory(vault, "shop")
    memory.write(text="- Dates are formatted in UTC everywhere.\n", expect_hash=memory.read()[1])
    text, digest = memory.read()
    start = payload("claude", "session_start", transcript=tmp_path / "t.jsonl", cwd=project)
    first = run_hook("session-start", "claude", start, cwd=project)
    context = context_of(first.stdout, "SessionStart")
    assert "Dates are formatted in UTC everywhere." in context
    assert digest[:12] in context and "not instructions" in context
    assert 'session-key="shop"' in context
    resumed = json.loads(start)
    resumed["source"] = "resume"
    second = run_hook("session-start", "claude", json.dumps(resumed).encode(), cwd=project)
    pointer = context_of(second.stdout, "SessionStart")
    assert "Dates are formatted" not in pointer and "unchanged" in pointer
    resumed["source"] = "compact"  # the earlier note may have been summarised away
    third = run_hook("session-start", "claude", json.dumps(resumed).encode(), cwd=project)
    assert "Dates are formatted in UTC everywhere." in context_of(third.stdout, "SessionStart")


def test_prompt_submit_reminds_at_input_turns_9_and_15_only(vault, project, tmp_path):
    outputs = []
    for turn in range(1, 17):
        data = payload("claude", "prompt_submit", transcript=tmp_path / "t.jsonl", cwd=project,
                       prompt_id=f"p-{turn}", prompt=f"question {turn}")
        done = run_hook("prompt-submit", "claude", data, cwd=project)
        assert done.returncode == 0
        outputs.append(done.stdout)
    assert [n for n, out in enumerate(outputs, start=1) if out] == [9, 15]
    reminder = context_of(outputs[8], "UserPromptSubmit")
    assert "input turn 9" in reminder
    assert f"[[_raw/shop/{CLAUDE_SESSION}#Round 1]]" in reminder
    for words in ("One claim per node", "summary line", "Search first", "update_node"):
        assert words in reminder
    assert state(vault, "claude", CLAUDE_SESSION).inputs == 16


def test_machine_injected_and_double_fired_prompts_are_not_input_turns(vault, project,
                                                                       tmp_path):
    base = json.loads(payload("claude", "prompt_submit", transcript=tmp_path / "t.jsonl",
                              cwd=project, prompt_id="p-1", prompt="hi"))
    run_hook("prompt-submit", "claude", json.dumps(base).encode(), cwd=project)
    run_hook("prompt-submit", "claude", json.dumps(base).encode(), cwd=project)  # double fire
    woken = {**base, "prompt_id": "p-2", "source": "loop_wakeup"}
    run_hook("prompt-submit", "claude", json.dumps(woken).encode(), cwd=project)
    assert state(vault, "claude", CLAUDE_SESSION).inputs == 1


def test_the_reminder_cites_the_rounds_already_captured(vault, project, tmp_path):
    transcript = copy_fixture("claude", "session.jsonl", tmp_path / "t.jsonl")
    stop(vault, project, transcript)
    path = vault.state("hooks", "claude", f"{CLAUDE_SESSION}.json")
    saved = json.loads(path.read_text(encoding="utf-8"))
    saved["inputs"] = 8
    path.write_text(json.dumps(saved), encoding="utf-8")
    data = payload("claude", "prompt_submit", transcript=transcript, cwd=project,
                   prompt_id="p-9", prompt="next")
    reminder = context_of(run_hook("prompt-submit", "claude", data, cwd=project).stdout,
                          "UserPromptSubmit")
    assert "rounds 1-5 are recorded so far" in reminder
    assert f"[[_raw/shop/{CLAUDE_SESSION}#Round 5]]" in reminder
