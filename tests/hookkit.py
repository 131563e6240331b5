"""Helpers for the hook tests: payloads in the hosts' documented shapes, a real project
repository, and running ``python -m osk hook …`` as the host does (a fresh process, the payload
on stdin)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from osk.hooks.state import ConversationState
from osk.store.vault import Vault

FIXTURES = Path(__file__).parent / "fixtures" / "hosts"
CLAUDE_SESSION = "5b0c7a52-8f1e-4d7a-9a63-2c4f1e9d0b11"
CODEX_SESSION = "019a2d7a-41c4-78b1-b7cc-a45d62a89cd5"
CODEX_ROLLOUT = f"rollout-2026-03-14T09-40-00-{CODEX_SESSION}.jsonl"


def payload(host: str, name: str, **tokens: object) -> bytes:
    """A fixture payload with ``{{TOKEN}}`` placeholders filled in (JSON-escaped)."""
    text = (FIXTURES / host / f"{name}.json").read_text(encoding="utf-8")
    for token, value in tokens.items():
        text = text.replace("{{" + token.upper() + "}}", json.dumps(str(value))[1:-1])
    json.loads(text)  # a test must never send a payload it broke by accident
    return text.encode("utf-8")


def copy_fixture(host: str, name: str, target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(FIXTURES / host / name, target)
    return target


def make_project(root: Path) -> Path:
    """A git repository with one commit, as an agent's working folder."""
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
    (root / "README.md").write_text("# shop\n", encoding="utf-8")
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "first"], cwd=root, check=True)
    return root


def run_hook(event: str, host: str, stdin: bytes, *, cwd: Path,
             env: dict[str, str] | None = None,
             extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """Run one hook the way a host does. Background growth is off unless a test turns it on."""
    return subprocess.run(
        [sys.executable, "-m", "osk", "hook", event, "--host", host, *extra],
        input=stdin.decode("utf-8"), capture_output=True, text=True, cwd=cwd,
        env=_hook_env(env), timeout=60, encoding="utf-8",
    )


def run_hooks_at_once(runs: list[tuple[str, str, bytes]], *,
                      cwd: Path) -> list[tuple[int, str, str]]:
    """Run several hooks (event, host, stdin) as ``run_hook`` does, side by side; each one's
    (exit code, stdout, stderr) in order."""
    started = [subprocess.Popen(
        [sys.executable, "-m", "osk", "hook", event, "--host", host], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd, env=_hook_env(None),
        encoding="utf-8") for event, host, _ in runs]
    done = []
    for process, (_, _, stdin) in zip(started, runs, strict=True):
        out, err = process.communicate(stdin.decode("utf-8"), timeout=60)
        done.append((process.returncode, out, err))
    return done


def _hook_env(env: dict[str, str] | None) -> dict[str, str]:
    return {**os.environ, "OSK_GROWTH": "off", **(env or {})}


def state(vault: Vault, host: str, conversation: str) -> ConversationState:
    path = vault.state("hooks", host, f"{conversation}.json")
    return ConversationState.from_json(path.read_text(encoding="utf-8"))


def hook_log(vault: Vault) -> str:
    path = vault.state("logs", "hooks.log")
    return path.read_text(encoding="utf-8") if path.exists() else ""


def context_of(stdout: str, event_name: str) -> str:
    """The additionalContext of a Claude Code / Codex hook output, checking its exact shape."""
    data = json.loads(stdout)
    assert set(data) == {"hookSpecificOutput"}
    assert set(data["hookSpecificOutput"]) == {"hookEventName", "additionalContext"}
    assert data["hookSpecificOutput"]["hookEventName"] == event_name
    return str(data["hookSpecificOutput"]["additionalContext"])
