"""The adapters' transcript parsers and the offset reader, on transcripts in the hosts' shapes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hookkit import CODEX_ROLLOUT, FIXTURES

from osk.hooks.adapters import UnknownHost, get
from osk.hooks.adapters.common import merge_final
from osk.hooks.rules import is_review_turn
from osk.hooks.transcript import Line, read_lines

CLAUDE = FIXTURES / "claude" / "session.jsonl"
CODEX = FIXTURES / "codex" / CODEX_ROLLOUT


def claude_rounds(path: Path = CLAUDE):
    return get("claude").parse(read_lines(path, 0).lines)


def test_claude_rounds_are_the_persons_inputs_and_nothing_else():
    users = [r.user for r in claude_rounds()]
    assert users == [
        "Why does the checkout test fail on CI but pass locally?",
        "Find every place that formats a delivery date.",
        "/review-pr 42",
        "Rename it and push the branch.",
        "Don't push. Just add a note about the time zone to the README.",
    ]


def test_claude_sub_agent_lines_meta_lines_and_compact_summaries_stay_out_of_rounds():
    text = json.dumps([[r.user, r.texts, r.tools] for r in claude_rounds()])
    assert "Searching for formatDelivery" not in text  # sidechain
    assert "Grep" not in text                          # the sub-agent's own tool call
    assert "Caveat" not in text                        # isMeta
    assert "continued from a previous conversation" not in text  # compact summary
    assert "Review pull request 42. Check tests" not in text     # expanded command (isMeta)
    assert "system-reminder" not in text and "opened the file" not in text
    assert "Set model to" not in text                  # local command output


def test_claude_one_streamed_message_is_one_text_and_thinking_is_left_out():
    first = claude_rounds()[0]
    assert len(first.texts) == 2
    assert first.texts[0] == "Let me look at the test and the CI workflow."
    assert "local time zone" in first.texts[1] and "Fix: pin the zone" in first.texts[1]
    assert "wants to know why" not in " ".join(first.texts)


def test_claude_tool_calls_are_summarised_one_line_each():
    rounds = claude_rounds()
    assert rounds[0].tools == ("Bash: npm test -- checkout",
                               "Read: /home/dev/shop/.github/workflows/ci.yml")
    assert rounds[1].tools == ("Task: Find date formatting",)
    assert rounds[4].tools == ("Edit: /home/dev/shop/README.md",)


def test_claude_completion_ids_turn_ids_and_closing():
    rounds = claude_rounds()
    assert [r.closed for r in rounds] == [True, True, True, True, False]
    assert rounds[3].interrupted and not rounds[2].interrupted
    assert rounds[4].turn_id == "7d2c1b9a-5555-4c3e-8a2b-5f6e7d8c9a05"
    assert len({r.completion for r in rounds}) == 5
    assert rounds[0].at is not None and rounds[0].at[:10] == "2026-03-14"


def test_claude_local_command_without_an_answer_is_no_round(tmp_path: Path):
    lines = [
        {"type": "user", "uuid": "u1", "message": {"role": "user", "content":
         "<command-name>/cost</command-name>\n<command-message>cost</command-message>"}},
        {"type": "user", "uuid": "u2", "message": {"role": "user", "content":
         "<local-command-stdout>Total cost: $0.42</local-command-stdout>"}},
        {"type": "user", "uuid": "u3", "message": {"role": "user", "content": "hello"}},
    ]
    parsed = get("claude").parse([Line(i, i + 1, obj) for i, obj in enumerate(lines)])
    assert [r.user for r in parsed] == ["hello"]


def test_claude_damaged_lines_are_skipped_with_warnings():
    chunk = read_lines(FIXTURES / "claude" / "damaged.jsonl", 0)
    assert len(chunk.warnings) == 3
    assert all("skipped line at byte" in w for w in chunk.warnings)
    assert len(get("claude").parse(chunk.lines)) == 5


def codex_rounds():
    return get("codex").parse(read_lines(CODEX, 0).lines)


def test_codex_rounds_come_from_user_message_events_only():
    rounds = codex_rounds()
    assert [r.user.split("\n")[0] for r in rounds] == [
        "Which package manager does this repo use, and is the lockfile current?",
        "Add an engines field so CI uses Node 22.",
        "Now run the full e2e suite.",
        "Skip e2e. What does the engines field change for developers?",
    ]
    text = json.dumps([r.user for r in rounds])
    assert "AGENTS.md" not in text and "environment_context" not in text
    assert "turn_aborted" not in text
    assert rounds[3].user.endswith("[1 image(s) attached]")


def test_codex_turn_ids_are_completion_ids_and_the_last_turn_is_open():
    rounds = codex_rounds()
    assert [r.completion for r in rounds] == [r.turn_id for r in rounds]
    assert rounds[0].turn_id == "019a2d7b-0001-7c55-9e10-3f2a1b0c4d01"
    assert [r.closed for r in rounds] == [True, True, True, False]
    assert rounds[2].interrupted


def test_codex_answers_are_agent_messages_and_tools_are_summarised():
    rounds = codex_rounds()
    assert len(rounds[0].texts) == 2 and rounds[0].texts[1].startswith("The repo uses pnpm")
    assert rounds[0].tools == ("shell_command: ls *lock* && pnpm install --frozen-lockfile "
                               "--lockfile-only",)
    assert rounds[1].tools[0].startswith("apply_patch: *** Begin Patch")


def test_codex_rollouts_without_agent_message_events_fall_back_to_response_items():
    lines = [
        {"type": "event_msg", "payload": {"type": "task_started", "turn_id": "t1"}},
        {"type": "event_msg", "payload": {"type": "user_message", "message": "hi"}},
        {"type": "response_item", "payload": {"type": "message", "role": "assistant",
                                              "content": [{"type": "output_text", "text": "hey"}]}},
        {"type": "event_msg", "payload": {"type": "task_complete", "turn_id": "t1",
                                          "last_agent_message": "hey"}},
    ]
    (turn,) = get("codex").parse([Line(i, i + 1, o) for i, o in enumerate(lines)])
    assert turn.texts == ("hey",) and turn.closed and turn.completion == "t1"


def test_codex_turn_announced_after_its_user_message_is_still_claimed():
    lines = [
        {"type": "event_msg", "payload": {"type": "user_message", "message": "first"}},
        {"type": "turn_context", "payload": {"turn_id": "t9"}},
        {"type": "event_msg", "payload": {"type": "agent_message", "message": "ok"}},
    ]
    (turn,) = get("codex").parse([Line(i, i + 1, o) for i, o in enumerate(lines)])
    assert turn.turn_id == turn.completion == "t9"


def test_reading_stops_before_a_partial_last_line(tmp_path: Path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"a": 1}\n{"b": 2}\n{"c": ')
    chunk = read_lines(path, 0)
    assert [line.obj for line in chunk.lines] == [{"a": 1}, {"b": 2}]
    assert chunk.end == len(b'{"a": 1}\n{"b": 2}\n') and chunk.at_eof
    with open(path, "ab") as handle:
        handle.write(b'3}\n')
    again = read_lines(path, chunk.end)
    assert [line.obj for line in again.lines] == [{"c": 3}] and again.end == path.stat().st_size


def test_an_offset_past_the_end_means_the_file_was_replaced(tmp_path: Path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"a": 1}\n')
    chunk = read_lines(path, 500)
    assert chunk.start == 0 and len(chunk.lines) == 1 and "replaced" in chunk.warnings[0]


def test_a_capped_read_is_not_at_the_end_and_a_huge_line_is_stepped_over(tmp_path: Path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"a": 1}\n' + b'{"big": "' + b"x" * 100 + b'"}\n{"b": 2}\n')
    first = read_lines(path, 0, max_read=50)
    assert [line.obj for line in first.lines] == [{"a": 1}] and not first.at_eof
    second = read_lines(path, first.end, max_read=50)
    assert second.lines == () and "longer than 50 bytes" in second.warnings[0]
    third = read_lines(path, second.end, max_read=50)
    assert [line.obj for line in third.lines] == [{"b": 2}] and third.at_eof


@pytest.mark.parametrize(("texts", "final", "expected"), [
    ([], "done", ["done"]),
    (["a", "done"], "done", ["a", "done"]),
    (["a", "Added the no"], "Added the note.", ["a", "Added the note."]),
    (["a"], "b", ["a", "b"]),
    (["a", "same  text\n"], "same text", ["a", "same  text\n"]),
])
def test_the_reported_final_answer_completes_the_transcripts_texts(texts, final, expected):
    assert merge_final(list(texts), final) == expected


def test_review_turns_are_9_and_15_of_every_15():
    due = [n for n in range(1, 46) if is_review_turn(n)]
    assert due == [9, 15, 24, 30, 39, 45]


def test_an_unknown_host_is_refused_by_name():
    with pytest.raises(UnknownHost, match="claude, codex, kiro, antigravity"):
        get("cursor")
