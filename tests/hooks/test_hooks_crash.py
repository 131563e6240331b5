"""Capture survives being killed at any moment, and a lost cursor never duplicates a round."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hookkit import make_project, run_hook

from osk.capture import raw

SESSION = "crash-7f0e2d1c"
TURNS = 120


def turn(number: int) -> str:
    lines = [
        {"type": "user", "uuid": f"u{number}", "promptId": f"p{number}", "isSidechain": False,
         "timestamp": "2026-03-14T10:00:00.000Z",
         "message": {"role": "user", "content": f"question {number}: " + "why? " * 40}},
        {"type": "assistant", "uuid": f"a{number}", "isSidechain": False,
         "message": {"id": f"m{number}", "role": "assistant", "content": [
             {"type": "text", "text": f"answer {number}: " + "because. " * 80}]}},
    ]
    return "".join(json.dumps(line) + "\n" for line in lines)


def stop_payload(project: Path, transcript: Path) -> bytes:
    return json.dumps({"session_id": SESSION, "transcript_path": str(transcript),
                       "cwd": str(project), "hook_event_name": "Stop",
                       "prompt_id": f"p{TURNS}", "stop_hook_active": False,
                       "last_assistant_message": f"answer {TURNS}: " + "because. " * 80}).encode()


def numbers(vault) -> list[int]:
    record = raw.read_record(vault, "shop", SESSION)
    return [int(r.user.split(":")[0].split()[1]) for r in record.rounds]


@pytest.mark.crash
def test_a_stop_hook_killed_at_random_moments_still_captures_each_round_once(vault, tmp_path):
    project = make_project(tmp_path / "shop")
    transcript = tmp_path / "t.jsonl"
    transcript.write_text("".join(turn(n) for n in range(1, TURNS + 1)), encoding="utf-8")
    data = stop_payload(project, transcript)
    env = {**os.environ, "OSK_GROWTH": "off"}
    rng = random.Random(20261129)
    trials = int(os.environ.get("OSK_CRASH_TRIALS", "6"))
    for _ in range(trials):
        process = subprocess.Popen(
            [sys.executable, "-m", "osk", "hook", "stop", "--host", "claude"],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            cwd=project, env=env)
        assert process.stdin is not None
        process.stdin.write(data)
        process.stdin.close()
        time.sleep(rng.uniform(0.0, 0.4))  # the kill point, not a wait for a condition
        process.kill()
        process.wait(timeout=30)
    finished = run_hook("stop", "claude", data, cwd=project)
    assert finished.returncode == 0
    assert numbers(vault) == list(range(1, TURNS + 1))
    assert raw.read_record(vault, "shop", SESSION).damaged == ()


def test_a_lost_cursor_re_reads_the_transcript_without_duplicating(vault, tmp_path):
    project = make_project(tmp_path / "shop")
    transcript = tmp_path / "t.jsonl"
    transcript.write_text("".join(turn(n) for n in range(1, 11)), encoding="utf-8")
    data = json.loads(stop_payload(project, transcript))
    data.update(prompt_id="p10", last_assistant_message=None)
    run_hook("stop", "claude", json.dumps(data).encode(), cwd=project)
    vault.state("hooks", "claude", f"{SESSION}.json").unlink()
    with open(transcript, "a", encoding="utf-8") as handle:
        handle.write(turn(11))
    data.update(prompt_id="p11")
    run_hook("stop", "claude", json.dumps(data).encode(), cwd=project)
    assert numbers(vault) == list(range(1, 12))
