"""The live suite's CLIs: a missing or unreachable npm is a failure that says why, never a skip
(these run without installing anything: npm is pointed at a closed port on 127.0.0.1), and
they are installed once however many test workers (pytest-xdist) ask for them at the same
moment on a fresh machine, where two `npm install`s into one folder would race (a stand-in
npm)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from livehost import BIN_ENV, live_bin_dir

ROOT = Path(__file__).resolve().parents[2]  # the checkout

# A stand-in for npm: slow enough that two callers overlap, it counts its runs and leaves
# binaries that report the wanted versions.
FAKE_NPM = """#!{python}
import sys, time
from pathlib import Path
args = sys.argv[1:]
prefix = Path(args[args.index("--prefix") + 1])
with open(prefix.parent / "npm-runs", "a") as runs:
    runs.write("run\\n")
time.sleep(1.0)
bin_dir = prefix / "node_modules" / ".bin"
bin_dir.mkdir(parents=True, exist_ok=True)
for spec in args[args.index("--prefix") + 2:]:
    package, _, version = spec.rpartition("@")
    binary = bin_dir / ("claude" if "claude" in package else "codex")
    binary.write_text("#!/bin/sh\\necho " + version + "\\n")
    binary.chmod(0o755)
"""

ASK = ("import sys; sys.path.insert(0, sys.argv[1]); import live_hosts; "
       "print(live_hosts.ensure_installed())")


def fails_with(env: dict[str, str]) -> str:
    with pytest.raises(pytest.fail.Exception) as failed:
        live_bin_dir(env)
    return str(failed.value)


def test_no_npm_on_path_fails_with_the_reason(tmp_path: Path) -> None:
    env = {"PATH": str(tmp_path / "empty"), "OSK_LIVE_CACHE": str(tmp_path / "cache"),
           "HOME": str(tmp_path)}
    assert "npm is not on PATH" in fails_with(env)


def test_an_unreachable_registry_fails_with_the_reason(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path),
           "OSK_LIVE_CACHE": str(tmp_path / "cache"),
           "npm_config_registry": "http://127.0.0.1:9/", "npm_config_fetch_retries": "0",
           "npm_config_cache": str(tmp_path / "npm-cache"), "npm_config_offline": "false"}
    message = fails_with(env)
    assert "npm install of @anthropic-ai/claude-code@" in message
    assert "is the npm registry reachable?" in message


def test_a_wrong_bin_folder_fails_with_the_reason(tmp_path: Path) -> None:
    message = fails_with({BIN_ENV: str(tmp_path), "PATH": os.environ["PATH"]})
    assert f"{BIN_ENV}={tmp_path} does not hold the host CLIs" in message
    assert "claude is missing or does not run" in message


def test_two_processes_asking_at_once_install_once(tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    npm = tools / "npm"
    npm.write_text(FAKE_NPM.format(python=sys.executable), encoding="utf-8")
    npm.chmod(0o755)
    env = {**os.environ, "OSK_LIVE_CACHE": str(tmp_path / "cache"),
           "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}"}
    env.pop("OSK_LIVE_VERSIONS", None)
    asking = [subprocess.Popen([sys.executable, "-c", ASK, str(ROOT / "scripts")], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for _ in range(2)]
    answers = [process.communicate(timeout=60) for process in asking]
    assert [process.returncode for process in asking] == [0, 0], answers
    assert answers[0][0] == answers[1][0] and answers[0][0].strip().endswith(".bin")
    assert (tmp_path / "cache" / "npm-runs").read_text(encoding="utf-8") == "run\n"
