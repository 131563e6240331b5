"""The package type-checks: mypy, configured in pyproject.toml ([tool.mypy]: strict, the whole
``osk`` package), finds nothing. A reader's editor and the checker follow every call, a tool's
runner into the engine included."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_mypy_finds_nothing_in_the_package():
    result = subprocess.run(
        [sys.executable, "-m", "mypy"],  # the files and flags come from pyproject.toml
        cwd=ROOT, capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
