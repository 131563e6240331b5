"""Helpers for the sync tests: devices cloned from one bare remote, and writes to make on them."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from osk.store import clock
from osk.store.contract import Frontmatter
from osk.store.fsutil import append_durably, atomic_write
from osk.store.ids import uuid7
from osk.store.node import parse, render
from osk.store.vault import Vault, init
from osk.sync.cycle import sync_once


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True,
                          text=True, encoding="utf-8").stdout


def make_devices(base: Path, count: int) -> tuple[Path, list[Vault]]:
    """A bare remote and ``count`` vaults syncing with it (the first made by `osk init`)."""
    remote = base / "remote.git"
    git(base, "init", "-q", "--bare", "-b", "main", str(remote))
    first = init(base / "dev1")
    git(first.root, "remote", "add", "origin", str(remote))
    sync_once(first)
    devices = [first]
    for number in range(2, count + 1):
        git(base, "clone", "-q", str(remote), str(base / f"dev{number}"))
        devices.append(Vault((base / f"dev{number}").resolve()))
    return remote, devices


def write_node(vault: Vault, rel: str, body: str, node_id: str | None = None) -> str:
    now = clock.now_text()
    meta = Frontmatter(id=node_id or uuid7(), created=now, updated=now, author="agent",
                       drafter="test-model", summary="A node written by a sync test.")
    atomic_write(vault.abs(rel), render(meta, body))
    return meta.id


def edit_node(vault: Vault, rel: str, body: str) -> None:
    node = parse(rel, vault.abs(rel).read_text(encoding="utf-8"))
    atomic_write(vault.abs(rel), render(node.meta, body))


def body_of(vault: Vault, rel: str) -> str:
    return parse(rel, vault.abs(rel).read_text(encoding="utf-8")).body


def append_raw(vault: Vault, key: str, conversation: str, line: str) -> None:
    append_durably(vault.raw_dir / key / f"{conversation}.md", (line + "\n").encode("utf-8"))


def tracked(vault: Vault) -> dict[str, bytes]:
    """Every tracked file's bytes as the working tree holds them."""
    paths = [p for p in git(vault.root, "ls-files", "-z").split("\0") if p]
    return {p: vault.abs(p).read_bytes() for p in paths}


def head(vault: Vault) -> str:
    return git(vault.root, "rev-parse", "HEAD").strip()


def assert_settled(vault: Vault) -> None:
    """On its branch, nothing in progress, nothing uncommitted, no conflict markers, no debris."""
    git_dir = vault.root / ".git"
    for leftover in ("rebase-merge", "rebase-apply", "MERGE_HEAD", "CHERRY_PICK_HEAD",
                     "index.lock"):
        assert not (git_dir / leftover).exists(), leftover
    assert git(vault.root, "symbolic-ref", "--short", "HEAD").strip() == "main"
    assert git(vault.root, "status", "--porcelain") == ""
    assert git(vault.root, "rev-list", "--merges", "HEAD") == ""  # history stays linear
    for rel, data in tracked(vault).items():
        assert b"<<<<<<<" not in data and b">>>>>>>" not in data, rel
    for debris in ("scratch", "landing.json", "cycle.json"):
        assert not vault.state("sync", debris).exists(), debris


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.02)
