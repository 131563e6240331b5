"""Hooks fail open: any error is one line in the hook log, exit 0, and nothing on stdout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hookkit import CLAUDE_SESSION, copy_fixture, hook_log, make_project, payload, run_hook

from osk.hooks import growth
from osk.hooks.forks import GROWTH_FORK_ENV
from osk.hooks.main import Request, parse_args

HEAVY = {"pydantic", "yaml", "mcp", "git", "rank_bm25", "numpy", "click"}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "shop")


@pytest.mark.parametrize("event", ["session-start", "prompt-submit", "stop"])
def test_a_payload_that_is_not_json_is_logged_and_the_turn_goes_on(vault, project, event):
    done = run_hook(event, "claude", b"{not json", cwd=project)
    assert (done.returncode, done.stdout) == (0, "")
    log = hook_log(vault)
    said = "failed: ValueError: the hook payload on stdin is not JSON text (Expecting"
    assert log.count("\n") == 1 and f"claude {event}: {said}" in log
    assert said in done.stderr


def test_a_missing_transcript_is_logged_and_nothing_is_written(vault, project, tmp_path):
    data = payload("claude", "stop", transcript=tmp_path / "gone.jsonl", cwd=project)
    done = run_hook("stop", "claude", data, cwd=project)
    assert (done.returncode, done.stdout) == (0, "")
    assert "FileNotFoundError" in hook_log(vault)
    assert not list(vault.raw_dir.glob("*/*.md"))


def test_a_damaged_raw_record_is_refused_logged_and_the_cursor_stays(vault, project, tmp_path):
    transcript = copy_fixture("claude", "session.jsonl", tmp_path / "t.jsonl")
    data = payload("claude", "stop", transcript=transcript, cwd=project)
    run_hook("stop", "claude", data, cwd=project)
    record = vault.raw_dir / "shop" / f"{CLAUDE_SESSION}.md"
    record.write_text(record.read_text(encoding="utf-8").replace("Round 2", "Round 9"),
                      encoding="utf-8")
    state_path = vault.state("hooks", "claude", f"{CLAUDE_SESSION}.json")
    before = json.loads(state_path.read_text(encoding="utf-8"))
    with open(transcript, "a", encoding="utf-8") as handle:
        handle.write("\n" + json.dumps({"type": "user", "uuid": "u-late", "message": {
            "role": "user", "content": "one more"}}) + "\n")
    done = run_hook("stop", "claude", data, cwd=project)
    assert (done.returncode, done.stdout) == (0, "")
    assert "RawRecordError" in hook_log(vault)
    assert json.loads(state_path.read_text(encoding="utf-8"))["offset"] == before["offset"]


def test_damaged_hook_state_is_replaced_and_capture_goes_on(vault, project, tmp_path):
    transcript = copy_fixture("claude", "session.jsonl", tmp_path / "t.jsonl")
    state_path = vault.state("hooks", "claude", f"{CLAUDE_SESSION}.json")
    state_path.parent.mkdir(parents=True)
    state_path.write_text('{"offset": "twelve", "rounds": 3}', encoding="utf-8")
    done = run_hook("stop", "claude", payload("claude", "stop", transcript=transcript,
                                              cwd=project), cwd=project)
    assert (done.returncode, done.stdout) == (0, "")
    assert "unreadable (offset should be int, not str); started it afresh" in hook_log(vault)
    assert json.loads(state_path.read_text(encoding="utf-8"))["rounds"] == 5


def test_without_a_vault_the_hook_says_so_on_stderr_and_exits_0(tmp_path, project):
    env = {k: v for k, v in os.environ.items() if k != "OSK_VAULT"}
    done = subprocess.run([sys.executable, "-m", "osk", "hook", "stop", "--host", "claude"],
                          input="{}", capture_output=True, text=True, cwd=project, env=env,
                          timeout=60)
    assert (done.returncode, done.stdout) == (0, "")
    assert "VaultNotFound" in done.stderr


@pytest.mark.parametrize("argv", [["stop"], ["stop", "--host", "cursor"], ["begin", "--host",
                                  "claude"], ["stop", "--host", "claude", "--verbose"]])
def test_a_misconfigured_hook_command_exits_0_with_the_usage_on_stderr(vault, project, argv):
    done = subprocess.run([sys.executable, "-m", "osk", "hook", *argv], input="{}",
                          capture_output=True, text=True, cwd=project, timeout=60)
    assert (done.returncode, done.stdout) == (0, "")
    assert "usage: osk hook" in done.stderr


def test_inside_a_growth_fork_the_hooks_neither_capture_count_nor_inject(vault, project,
                                                                         tmp_path):
    assert GROWTH_FORK_ENV == growth.ENV_FORK
    transcript = copy_fixture("claude", "session.jsonl", tmp_path / "t.jsonl")
    fork = {GROWTH_FORK_ENV: "1"}
    for event, name, extra in (("stop", "stop", {}), ("session-start", "session_start", {}),
                               ("prompt-submit", "prompt_submit",
                                {"prompt_id": "p", "prompt": "hi"})):
        data = payload("claude", name, transcript=transcript, cwd=project, **extra)
        done = run_hook(event, "claude", data, cwd=project, env=fork)
        assert (done.returncode, done.stdout) == (0, "")
    assert not list(vault.raw_dir.glob("*/*.md")) and not vault.state("hooks").exists()


def test_hook_arguments_parse_in_both_spellings():
    assert parse_args(["stop", "--host=codex", "--vault", "/v", "--dry-run"]) == Request(
        "stop", "codex", "/v", True)


def test_a_dry_run_resolves_everything_and_writes_nothing(vault, project, tmp_path):
    transcript = copy_fixture("claude", "session.jsonl", tmp_path / "t.jsonl")
    for event, name in (("stop", "stop"), ("session-start", "session_start")):
        data = payload("claude", name, transcript=transcript, cwd=project)
        done = run_hook(event, "claude", data, cwd=project, extra=("--dry-run",))
        assert done.returncode == 0 and hook_log(vault) == ""
    assert not list(vault.raw_dir.glob("*/*.md"))
    assert not vault.state("hooks").exists()
    assert not vault.ledger_path("routing").exists()  # not even the session key's name claim


def test_the_hook_entry_imports_nothing_heavy():
    code = "import sys, osk.hooks.main; print(*sys.modules)"
    out = subprocess.check_output([sys.executable, "-c", code], text=True)
    assert not set(out.split()) & HEAVY


COMPILES = """
import re, sys
compiled = []
original = re.compile
def counting(source, flags=0):
    compiled.append(sys._getframe(1).f_globals["__name__"])
    return original(source, flags)
re.compile = counting
from osk.capture.secrets import mask_secrets
from osk.capture.steering import steering
from osk.hooks import fence
def lazily():  # the detectors' and the steering check's patterns compiled so far
    return compiled.count("osk.capture.patterns") + compiled.count("osk.capture.secret_detectors")
assert not mask_secrets("ok, next one please").changed
assert fence.block("why did we decide lozezu for the cart?").startswith("> why")
print(lazily())
fence.block("다음 것도 부탁해")  # beyond ASCII: the full look-alike pattern
print(lazily())
print(mask_secrets("password = 'Hq7v-93xWm2k'").findings)
print(steering("Human: hi\\nAssistant: ok"))
"""


def test_a_plain_text_compiles_none_of_the_filters_patterns():
    """Every hook imports the secret filter and the fence; a detector's patterns are compiled
    when its needle first occurs, the steering check's when a node is checked, the full
    look-alike pattern for the first text beyond ASCII (about 20 ms a hook on import)."""
    out = subprocess.check_output([sys.executable, "-c", COMPILES], text=True).splitlines()
    assert out[:2] == ["0", "1"]
    assert "password" in out[2]
    assert out[3] == "('role marker',)"


def test_running_all_three_hooks_imports_nothing_heavy(vault, project, tmp_path):
    """The whole hook path, engine modules included, as one process runs it."""
    transcript = copy_fixture("claude", "session.jsonl", tmp_path / "t.jsonl")
    payloads = {
        "session-start": payload("claude", "session_start", transcript=transcript, cwd=project),
        "prompt-submit": payload("claude", "prompt_submit", transcript=transcript, cwd=project,
                                 prompt_id="p", prompt="hi"),
        "stop": payload("claude", "stop", transcript=transcript, cwd=project),
    }
    script = "\n".join([
        "import io, json, sys",
        "from osk.hooks.main import run",
        f"payloads = {json.dumps({k: v.decode() for k, v in payloads.items()})}",
        "for event, data in payloads.items():",
        "    sys.stdin = io.TextIOWrapper(io.BytesIO(data.encode()))",
        "    assert run([event, '--host', 'claude']) == 0",
        "print(' '.join(sys.modules), file=sys.stderr)",
    ])
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=project, env={**os.environ, "OSK_GROWTH": "off"}, timeout=60)
    assert done.returncode == 0, done.stderr
    loaded = set(done.stderr.split())
    assert "osk.capture.raw" in loaded and "osk.hooks.inject" in loaded
    assert not loaded & HEAVY
    assert hook_log(vault) == ""
