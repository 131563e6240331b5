"""Shared helpers for the write-path tests (sessions, write, rechecks, engine).

Imported by those test modules; fixtures defined here are re-exported by importing them.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from osk.calls.request import NewNode
from osk.engine.core import Engine
from osk.store.vault import Vault


def git(cwd: Path, *args: str) -> str:
    result = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return result.stdout.strip()


def make_repo(path: Path, *, files: dict[str, str] | None = None, commit: bool = True) -> Path:
    """A real git repository with one commit (unless ``commit`` is False)."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    for rel, text in (files or {"README.md": f"{path.name}\n"}).items():
        target = path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    if commit:
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", "first")
    return path


def snapshot(vault: Vault) -> dict[str, bytes]:
    """Every byte of the vault that a write could change (device state and .git excluded)."""
    found: dict[str, bytes] = {}
    for path in sorted(vault.root.rglob("*")):
        rel = path.relative_to(vault.root).as_posix()
        if rel.split("/")[0] in {".osk", ".git"}:
            continue
        found[rel + ("/" if path.is_dir() else "")] = b"" if path.is_dir() else path.read_bytes()
    return found


def write_toml(vault: Vault, text: str) -> None:
    (vault.root / "osk.toml").write_text(text, encoding="utf-8")


@contextmanager
def sqlite_disk_full(name: str) -> Iterator[None]:
    """While inside: an SQLite file called ``name`` opened for writing cannot grow by a page
    (``PRAGMA max_page_count``), so a change that needs one fails as on a full disk, with
    SQLite's own error and its own handling of the transaction ("database or disk is full").
    A real full disk needs a small file system mounted, which takes root."""
    real = sqlite3.connect

    def connect(*args: object, **kwargs: object) -> sqlite3.Connection:
        db = real(*args, **kwargs)  # type: ignore[arg-type]
        if os.path.basename(os.fspath(args[0])) == name:  # type: ignore[arg-type]
            pages = db.execute("PRAGMA page_count").fetchone()[0]
            db.execute(f"PRAGMA max_page_count = {max(pages, 1)}")  # 0 would leave no limit
        return db

    sqlite3.connect = connect  # type: ignore[assignment]
    try:
        yield
    finally:
        sqlite3.connect = real


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "work" / "proj", files={
        "README.md": "proj\n", "src/app.py": "print('hello')\n",
    })


@pytest.fixture
def eng(vault: Vault, repo: Path) -> Engine:
    return Engine.open(vault, cwd=repo)


@pytest.fixture
def hub(eng: Engine) -> str:
    """The hub of cluster ``auth`` in the session's scope."""
    eng.create_node(NewNode("auth", "How this project authenticates", "The auth cluster.\n",
                            space="Scope", cluster="auth", drafter="test-model"))
    return "auth"


def create(eng: Engine, title: str, *, cluster: str = "auth", space: str = "Scope",
           body: str | None = None, derived_from: tuple[str, ...] = (),
           summary: str | None = None):
    return eng.create_node(NewNode(title, summary or f"About {title}", body or f"{title} body.\n",
                                   space=space, cluster=cluster, drafter="test-model",
                                   derived_from=derived_from))



def import_command(vault: Vault, lines: Path) -> list[str]:
    """``osk import LINES`` into ``vault`` as a person runs it."""
    return [sys.executable, "-m", "osk", "--vault", str(vault.root), "import", str(lines)]


def killed_imports(command: list[str], seed: int, latest: float) -> Iterator[int]:
    """Run ``command`` (an ``osk import``) and kill it (SIGKILL) at a seeded random moment up
    to ``latest`` seconds after its first progress line, ``OSK_CRASH_TRIALS`` times (3 in CI);
    yields each trial's number after its kill, for the caller's checks."""
    rng = random.Random(seed)
    for trial in range(int(os.environ.get("OSK_CRASH_TRIALS", "3"))):
        child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 env={**os.environ, "OSK_SEMANTIC": "0"})
        assert child.stderr is not None
        child.stderr.readline()  # the first progress line: the import is under way
        time.sleep(rng.uniform(0.0, latest))
        child.send_signal(signal.SIGKILL)
        child.communicate(timeout=60)
        yield trial
