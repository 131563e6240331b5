"""Helpers for the authority tests: node files, a stand-in for the write path, terminals.

``agent_write`` does what the write path does at its audit integration point (write the file,
then store both texts and append one audit record), so these tests exercise protection, audit,
trust, tombstones and validity before and independently of osk/writes/write.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from osk.authority import audit, tombstones
from osk.store import clock, contract, ids, node, objects
from osk.store.fsutil import atomic_write
from osk.store.vault import Vault, space_of

ROOT = Path(__file__).resolve().parents[1]


def node_text(*, body: str, summary: str = "a fact", author: str = "agent",
              node_id: str | None = None, created: str | None = None, updated: str | None = None,
              trust: str | None = None, valid_from: str | None = None,
              valid_to: str | None = None, supersedes: str | None = None) -> str:
    now = clock.now_text()
    meta = contract.Frontmatter.model_validate({
        "id": node_id or ids.uuid7(), "created": created or now, "updated": updated or now,
        "author": author, "drafter": "test-model", "summary": summary, "derived-from": [],
        "trust": trust, "valid_from": valid_from, "valid_to": valid_to,
        "supersedes": supersedes,
    })
    return node.render(meta, body)


def agent_write(vault: Vault, rel: str, text: str, *, actor: str = "agent:test",
                action: str | None = None) -> audit.Entry:
    """Write a node file the way the write path does, and audit it."""
    path = vault.abs(rel)
    before = path.read_text(encoding="utf-8") if path.is_file() else None
    parsed = node.parse(rel, text)
    tombstones.check(vault, parsed.title, parsed.body)
    atomic_write(path, text)
    return audit.record(
        vault, actor=actor, action=action or ("update" if before is not None else "create"),
        node_id=parsed.id, path=rel, after=objects.put(vault, text),
        before=objects.put(vault, before) if before is not None else None,
    )


def edit_body(vault: Vault, rel: str, new_body: str, *, keep_updated: bool = False) -> str:
    """The working text with its body replaced (front matter kept; ``updated`` set to now,
    which moves only when a minute turned since the file was written, unless kept)."""
    current = node.parse(rel, vault.abs(rel).read_text(encoding="utf-8"))
    if keep_updated:
        return node.render(current.meta, new_body)
    return node.render(current.meta.model_copy(update={"updated": clock.now_text()}), new_body)


def read(vault: Vault, rel: str) -> str:
    return vault.abs(rel).read_text(encoding="utf-8")


def space(rel: str) -> str | None:
    return space_of(rel)


class FakeTerminal:
    """A stdin that says it is a terminal: for in-process tests of the person's verbs.

    The guard itself is tested with real terminals and pipes in test_authority.py.
    """

    def isatty(self) -> bool:
        return True

    def read(self, *_: object) -> str:  # pragma: no cover - the verbs never read stdin
        return ""


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str


def osk(vault: Vault, *args: str, tty: bool = False, answer: str = "",
        timeout: float = 60.0, env: dict[str, str] | None = None) -> Run:
    """Run the real CLI in a subprocess, stdin a pipe or (``tty=True``) a real pseudo-terminal
    on which ``answer`` is already typed (what the person answers to a question)."""
    env = {**os.environ, "OSK_VAULT": str(vault.root), "PYTHONPATH": str(ROOT), **(env or {})}
    command = [sys.executable, "-m", "osk", *args]
    if not tty:
        done = subprocess.run(command, input="", capture_output=True, text=True, env=env,
                              timeout=timeout, cwd=vault.root, encoding="utf-8")
        return Run(done.returncode, done.stdout, done.stderr)
    controller, terminal = os.openpty()
    try:
        os.write(controller, answer.encode())
        done = subprocess.run(command, stdin=terminal, capture_output=True, text=True, env=env,
                              timeout=timeout, cwd=vault.root, encoding="utf-8")
    finally:
        os.close(terminal)
        os.close(controller)
    return Run(done.returncode, done.stdout, done.stderr)
