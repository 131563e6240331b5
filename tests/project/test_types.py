"""The package type-checks: mypy, configured in pyproject.toml ([tool.mypy]: strict, the whole
``osk`` package), finds nothing. A reader's editor and the checker follow every call, a tool's
runner into the engine included."""

from __future__ import annotations

import inspect
import subprocess
import sys
import typing
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_mypy_finds_nothing_in_the_package():
    result = subprocess.run(
        [sys.executable, "-m", "mypy"],  # the files and flags come from pyproject.toml
        cwd=ROOT, capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_tool_runner_takes_the_engine_and_its_own_arguments_model():
    # What lets the checker (and a reader's editor) follow each MCP tool into the engine.
    from osk.engine.core import Engine
    from osk.surfaces import server

    for spec in server.SPECS:
        hints = typing.get_type_hints(spec.run, {**vars(server), "Engine": Engine})
        engine, args = list(inspect.signature(spec.run).parameters)
        assert (hints[engine], hints[args]) == (Engine, spec.args), spec.name
