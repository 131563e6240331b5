"""The CLI surface: exit codes and the one place errors are mapped."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from osk.cli import main


def test_init_creates_a_vault_and_says_how_to_use_it(tmp_path: Path, capsys):
    assert main(["init", str(tmp_path / "v")]) == 0
    out = capsys.readouterr().out
    assert out == (f"Created vault {tmp_path / 'v'}\n"
                   f"Use it with: export OSK_VAULT={tmp_path / 'v'}\n")


def test_an_osk_error_prints_one_error_line_and_returns_its_exit_code(tmp_path: Path, capsys):
    main(["init", str(tmp_path / "v")])
    capsys.readouterr()
    assert main(["init", str(tmp_path / "v")]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"Error: {tmp_path / 'v'} is already an osk vault; nothing changed\n"


def test_version_and_python_dash_m_work(tmp_path: Path):
    from osk import __version__

    result = subprocess.run([sys.executable, "-m", "osk", "--version"], capture_output=True,
                            text=True, check=True)
    assert result.stdout == f"osk {__version__}\n"


@pytest.mark.parametrize("command", ["validate", "search"])
def test_commands_that_need_a_vault_say_how_to_find_one(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
):
    monkeypatch.chdir(tmp_path)
    args = [command] + (["query"] if command == "search" else [])
    assert main(args) == 2
    assert "no osk vault found" in capsys.readouterr().err
