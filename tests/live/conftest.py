"""Fixtures of the live suite: the pinned host CLIs (installed once) and live hosts.

The environment is read when this file is imported, before the shared autouse fixture points
HOME at a temporary folder, so the CLI cache is the machine's (one install serves every run).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from livehost import LiveHost, live_bin_dir
from plays import Play

MACHINE_ENV = dict(os.environ)
MODELS = {"claude": "claude-opus-5-5", "codex": "gpt-5.1-codex"}


@pytest.fixture(scope="session")
def live_bin() -> Path:
    return live_bin_dir(MACHINE_ENV)


def make_host(name: str, bin_dir: Path, root: Path) -> LiveHost:
    host = LiveHost(name, bin_dir, root, Play(MODELS[name]))
    host.setup()
    return host


@pytest.fixture(scope="module", params=["claude", "codex"])
def host(request: pytest.FixtureRequest, live_bin: Path,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveHost]:
    """One set-up host per module and host name: tests of a module share its sessions."""
    made = make_host(request.param, live_bin, tmp_path_factory.mktemp(f"live-{request.param}"))
    yield made
    made.close()
