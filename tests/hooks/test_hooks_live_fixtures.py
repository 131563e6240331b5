"""Transcripts the real CLIs wrote in the live suite (tests/live/), read without the CLIs.

`OSK_LIVE_RECORD=1 pytest tests/live/test_live_hosts.py -k verbatim` re-records them: each
folder holds a host's own transcript of our scripted conversation and ``expected.json``, what
the suite typed and what the scripted model answered. Nothing in them is written by hand.

Format drift: a line of a kind the adapter does not know stops capture before it, logs the
host, its version and the kinds, and is captured once an adapter that knows it reads it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hookkit import FIXTURES, hook_log, make_project, run_hook, state

from osk.capture import raw
from osk.hooks.adapter_contract import HookPayload
from osk.hooks.adapters import codex, get
from osk.hooks.stop import capture_stop
from osk.hooks.transcript import read_lines
from osk.store.vault import Vault

RECORDED = {"claude": FIXTURES / "claude" / "live-2.1.332",
            "codex": FIXTURES / "codex" / "live-0.171.0"}


def expected(host: str) -> list[dict[str, str]]:
    return json.loads((RECORDED[host] / "expected.json").read_text(encoding="utf-8"))


def session_of(transcript: Path, host: str) -> str:
    first = json.loads(transcript.read_text(encoding="utf-8").splitlines()[0])
    if host == "codex":
        return first["payload"]["id"]
    return next(json.loads(line)["sessionId"] for line in
                transcript.read_text(encoding="utf-8").splitlines() if '"sessionId"' in line)


@pytest.mark.parametrize("host", ["claude", "codex"])
def test_a_recorded_transcript_parses_into_the_rounds_the_suite_played(host: str) -> None:
    adapter = get(host)
    lines = read_lines(RECORDED[host] / "transcript.jsonl", 0).lines
    rounds = adapter.parse(lines)
    assert [r.user for r in rounds] == [e["user"] for e in expected(host)]
    assert [r.texts[-1] for r in rounds] == [e["final"] for e in expected(host)]
    assert adapter.unknown(lines) == []
    assert adapter.version(lines, RECORDED[host] / "transcript.jsonl") == \
        RECORDED[host].name.removeprefix("live-")


def copy_recorded(host: str, tmp_path: Path) -> Path:
    target = tmp_path / "transcripts" / "transcript.jsonl"
    target.parent.mkdir(parents=True)
    shutil.copyfile(RECORDED[host] / "transcript.jsonl", target)
    return target


def stop_payload(host: str, transcript: Path, project: Path) -> bytes:
    return json.dumps({"session_id": session_of(transcript, host), "cwd": str(project),
                       "transcript_path": str(transcript), "hook_event_name": "Stop",
                       "stop_hook_active": False,
                       "last_assistant_message": expected(host)[-1]["final"]}).encode()


@pytest.mark.parametrize("host", ["claude", "codex"])
def test_the_stop_hook_captures_every_recorded_round_once(host: str, vault: Vault,
                                                          tmp_path: Path) -> None:
    project = make_project(tmp_path / "tidepool")
    transcript = copy_recorded(host, tmp_path)
    for _ in range(2):  # a repeated Stop captures nothing twice
        done = run_hook("stop", host, stop_payload(host, transcript, project), cwd=project)
        assert done.returncode == 0 and done.stdout == ""
    (record,) = [raw.read_record(vault, r.key, r.conversation) for r in raw.list_records(vault)]
    assert [(r.user, r.assistant) for r in record.rounds] == \
        [(e["user"], e["final"]) for e in expected(host)]
    assert hook_log(vault) == ""


def drifted(transcript: Path, round_number: int) -> int:
    """Rename the item type of the ``round_number``-th AgentMessage to one osk never saw;
    returns the byte offset of that line."""
    lines = transcript.read_bytes().splitlines(keepends=True)
    seen, offset = 0, 0
    for index, line in enumerate(lines):
        if b'"type":"AgentMessage"' in line:
            seen += 1
            if seen == round_number:
                lines[index] = line.replace(b'"type":"AgentMessage"', b'"type":"AgentNote"')
                transcript.write_bytes(b"".join(lines))
                return offset
        offset += len(line)
    raise AssertionError(f"the transcript has fewer than {round_number} agent messages")


def codex_payload(transcript: Path, project: Path) -> HookPayload:
    return HookPayload(host="codex", event="stop", session_id=session_of(transcript, "codex"),
                       cwd=project, transcript_path=transcript)


def test_drift_stops_capture_before_the_unknown_line_and_loses_nothing(
        vault: Vault, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_project(tmp_path / "tidepool")
    transcript = copy_recorded("codex", tmp_path)
    at = drifted(transcript, 5)
    done = run_hook("stop", "codex", stop_payload("codex", transcript, project), cwd=project)
    assert done.returncode == 0
    (record,) = [raw.read_record(vault, r.key, r.conversation) for r in raw.list_records(vault)]
    assert [r.user for r in record.rounds] == [e["user"] for e in expected("codex")[:4]]
    log = hook_log(vault)
    assert "format drift: codex 0.171.0" in log
    assert "event_msg/item_completed/AgentNote" in log and f"from byte {at}" in log
    saved = state(vault, "codex", session_of(transcript, "codex"))
    assert saved.offset < at and saved.drift and saved.empty_stops == 0
    # The same Stop again: still held, nothing guessed, nothing duplicated.
    second = capture_stop(vault, codex.ADAPTER, codex_payload(transcript, project))
    assert second.written == () and second.warnings
    # An osk that knows the new kind captures the rest, each round once.
    monkeypatch.setattr(codex, "_KNOWN_ITEMS", codex._KNOWN_ITEMS | {"AgentNote"})
    third = capture_stop(vault, codex.ADAPTER, codex_payload(transcript, project))
    assert third.written == (5, 6, 7, 8, 9) and third.warnings == ()
    record = raw.read_record(vault, record.key, record.conversation)
    assert [r.user for r in record.rounds] == [e["user"] for e in expected("codex")]
    assert state(vault, "codex", session_of(transcript, "codex")).drift == ""


def capture_check(vault: Vault, host: str):
    from osk.hosts import hostsetup
    from osk.hosts.doctor import HostSite, check_capture

    (check,) = check_capture(HostSite(host, hostsetup.default_context(vault.root, None), vault))
    return check


def test_doctor_reports_a_conversation_held_by_drift_with_the_fix(vault: Vault,
                                                                  tmp_path: Path) -> None:
    project = make_project(tmp_path / "tidepool")
    transcript = copy_recorded("codex", tmp_path)
    run_hook("stop", "codex", stop_payload("codex", transcript, project), cwd=project)
    assert capture_check(vault, "codex").ok is True
    drifted(transcript, 9)
    state_path = vault.state("hooks", "codex", f"{session_of(transcript, 'codex')}.json")
    state_path.unlink()  # re-read from the start: rounds 1-8 are known, round 9 drifted
    run_hook("stop", "codex", stop_payload("codex", transcript, project), cwd=project)
    check = capture_check(vault, "codex")
    assert check.ok is False
    assert "format drift: codex 0.171.0" in check.detail
    assert "event_msg/item_completed/AgentNote" in check.detail
    assert "upgrade osk" in check.fix


def test_doctor_reports_a_transcript_that_grows_while_nothing_is_recorded(
        vault: Vault, tmp_path: Path) -> None:
    """Known lines that the adapter reads as no round at all (what the old parser made of a
    0.17x rollout): every Stop moves on and records nothing, and doctor says so."""
    project = make_project(tmp_path / "tidepool")
    transcript = tmp_path / "rollout.jsonl"
    meta = {"type": "session_meta", "payload": {"id": "s-1", "cli_version": "9.9.9"}}
    transcript.write_text(json.dumps(meta) + "\n", encoding="utf-8")
    data = json.dumps({"session_id": "s-1", "cwd": str(project),
                       "transcript_path": str(transcript), "hook_event_name": "Stop"}).encode()
    for number in range(3):
        assert capture_check(vault, "codex").ok is not False
        with open(transcript, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"type": "event_msg", "payload": {
                "type": "token_count", "info": {"n": number}}}) + "\n")
        run_hook("stop", "codex", data, cwd=project)
    check = capture_check(vault, "codex")
    assert check.ok is False and "s-1: 3 Stop(s) in a row" in check.detail
