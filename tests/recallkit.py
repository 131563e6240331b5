"""What the recall tests of several wings share: a project with an engine whose index keeps the
recall file, a fact to recall, a node written the way an agent writes one, and the hooks run
as a host runs them (``prompt``, ``start``), with the recall log read back (``recall_log``) and
the raw rounds a block names read off it (``rounds_in``)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hookkit import context_of, payload, run_hook
from writekit import make_repo

from osk.calls.request import NewNode
from osk.engine.core import Engine
from osk.errors import NodeNotFound
from osk.store.vault import Vault

FACT = ("Release tags are signed with minisign",
        "Every release tag is signed with minisign; the public key lives in docs/KEY.",
        "We sign release tags with minisign; the public key is in docs/KEY.\n\nBODY-SECRET-WORDS")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "work" / "shop")


@pytest.fixture
def eng(vault: Vault, project: Path) -> Engine:
    engine = Engine.open(vault, cwd=project)
    engine.warm()  # as the MCP server does: the index (and its recall file) is held from now on
    return engine


def write(eng: Engine, title: str, summary: str, body: str, *, space: str = "Scope",
          cluster: str = "release", scope: str | None = None) -> str:
    try:
        eng.read_node(cluster)
    except NodeNotFound:  # every cluster opens with its hub
        eng.create_node(NewNode(cluster, "Hub.", "Hub.\n", space=space, cluster=cluster,
                                drafter="test-model", scope=scope))
    done = eng.create_node(NewNode(title, summary, body, space=space, cluster=cluster,
                                   drafter="test-model", scope=scope))
    return done.id


def prompt(host: str, project: Path, text: str, turn: str, tmp_path: Path) -> str:
    data = payload(host, "prompt_submit", transcript=tmp_path / "t.jsonl", cwd=project,
                   prompt_id=turn, prompt=text)
    done = run_hook("prompt-submit", host, data, cwd=project)
    assert done.returncode == 0, done.stderr
    assert "failed" not in done.stderr, done.stderr
    return context_of(done.stdout, "UserPromptSubmit") if done.stdout else ""


def start(host: str, project: Path, tmp_path: Path, source: str = "startup") -> str:
    data = json.loads(payload(host, "session_start", transcript=tmp_path / "t.jsonl",
                              cwd=project))
    done = run_hook("session-start", host, json.dumps({**data, "source": source}).encode(),
                    cwd=project)
    assert done.returncode == 0 and "failed" not in done.stderr, done.stderr
    return context_of(done.stdout, "SessionStart")


def recall_log(vault: Vault, cwd: Path, *extra: str) -> list[dict]:
    """``osk recall log --json``: every receipt, newest last."""
    done = subprocess.run([sys.executable, "-m", "osk", "--vault", str(vault.root), "recall", "log",
                           "--json", "--limit", "100", *extra],
                          cwd=cwd, capture_output=True, text=True, encoding="utf-8", timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def rounds_in(block: str) -> list[str]:
    """The raw coordinates a recall block names, read as an agent reads them: each round's
    ``#Round N`` after the path on its conversation's line (``- DATE _raw/KEY/CONV``) above."""
    found, path = [], ""
    for line in block.splitlines():
        if line.startswith("- "):
            path = line.split(" ")[-1]
        elif (named := re.match(r"  #Round (\d+)", line)) is not None:
            found.append(f"{path}#Round {named.group(1)}")
    return found
