"""The codebase stays ruff-clean (the rules live in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ruff_finds_nothing_in_the_project():
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "osk", "tests", "bench", "scripts"],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
