"""The live suite's CLIs: a missing or unreachable npm is a failure that says why, never a skip
(these run without installing anything: npm is pointed at a closed port on 127.0.0.1)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from livehost import BIN_ENV, live_bin_dir


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
