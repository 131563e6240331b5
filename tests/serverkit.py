"""The real ``osk mcp`` process as the stdio tests of several wings drive it with the official
``mcp`` client: its parameters, a call that must succeed (``ok``), a git project to run it in,
a hub node's arguments, and the vault's files before and after (``snapshot``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import mcp
import pytest
from mcp import StdioServerParameters

from osk.store.vault import Vault

HUB = {"title": "cache", "summary": "What we know about the cache", "body": "The cache hub.\n",
       "space": "scope", "cluster": "cache", "drafter": "test-model"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "work" / "app"
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=path, check=True)
    subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "root"], cwd=path, check=True)
    return path


def params(vault: Vault, cwd: Path) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if k != "OSK_VAULT"}
    return StdioServerParameters(command=sys.executable,
                                 args=["-m", "osk", "mcp", "--vault", str(vault.root)],
                                 env=env, cwd=str(cwd))


def snapshot(root: Path) -> dict[str, bytes]:
    found = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in {".osk", ".git"}]
        for name in files:
            path = Path(folder) / name
            found[str(path.relative_to(root))] = path.read_bytes()
    return found


async def ok(client: mcp.Client, name: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(name, args)
    assert not result.is_error, result.content[0].text
    assert result.structured_content is not None
    return result.structured_content
