"""`osk import --from claude-code` of a memory folder the real Claude Code CLI wrote.

The scripted model writes one memory with Claude Code's own Write tool, where and how the CLI's
system prompt says to (``plays.remember_steps``); osk then imports the folder the CLI filled,
and a second run finds nothing changed. (Codex writes its memories in a background pipeline of
its own model calls, which the live suite does not drive; its import is tested on a folder
built from its documented layout, tests/verbs/test_import_host_memory.py.)
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import make_host
from livehost import LiveHost
from plays import MEMORY_FILE


@pytest.fixture(scope="module")
def claude(live_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveHost]:
    made = make_host("claude", live_bin, tmp_path_factory.mktemp("live-import"))
    yield made
    made.close()


def test_a_memory_the_real_claude_code_wrote_is_imported_then_left_alone(
        claude: LiveHost) -> None:
    run = claude.run("[live:remember] Remember: make check before every release.",
                     OSK_GROWTH="off")
    assert run.returncode == 0, run.stderr
    folder = (claude.home / ".claude" / "projects"
              / re.sub(r"[^A-Za-z0-9]", "-", str(claude.project.resolve())) / "memory")
    assert (folder / MEMORY_FILE).is_file(), sorted(p.name for p in folder.parent.rglob("*"))
    done = json.loads(claude.osk("import", "--from", "claude-code", "--json").stdout)
    by_file = {Path(p["source"]).name: p for p in done}
    assert set(by_file) == {MEMORY_FILE, "MEMORY.md"}
    assert by_file[MEMORY_FILE]["action"] == "create"
    assert by_file[MEMORY_FILE]["space"] == "Scope"
    assert by_file[MEMORY_FILE]["title"] == "Claude Code memory make-check-first (tidepool)"
    again = json.loads(claude.osk("import", "--from", "claude-code", "--json").stdout)
    assert {p["action"] for p in again} == {"unchanged"}
