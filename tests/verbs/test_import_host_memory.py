"""`osk import --from claude-code|codex`: the hosts' own memory folders as nodes, each citing its
file at its hash; a re-run writes only what changed; secrets filtered; --dry-run writes nothing.

The folders are fixtures built from the layouts the hosts state (tests/fixtures/host_memory/
README.md says where each comes from); the command runs as a person runs it (a real process).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from writekit import make_repo

from osk.engine.core import Engine
from osk.store.vault import Vault

FIXTURES = Path(__file__).parents[1] / "fixtures" / "host_memory"
TOKEN = "ghp_Zq8vN3kLw2Rt6YxP0mJd4HsA9cEuF1bGi7Ko"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "work" / "shop")


@pytest.fixture
def claude_memory(project: Path, _isolated_home: Path) -> Path:
    folder = (_isolated_home / ".claude" / "projects"
              / re.sub(r"[^A-Za-z0-9]", "-", str(project)) / "memory")
    shutil.copytree(FIXTURES / "claude-code" / "memory", folder)
    return folder


@pytest.fixture
def codex_memory(_isolated_home: Path) -> Path:
    folder = _isolated_home / ".codex" / "memories"
    shutil.copytree(FIXTURES / "codex" / "memories", folder)
    return folder


def osk(vault: Vault, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "osk", "--vault", str(vault.root), *args],
                          cwd=cwd, capture_output=True, text=True, encoding="utf-8", timeout=120)


def imported(vault: Vault, cwd: Path, *args: str) -> list[dict]:
    done = osk(vault, cwd, "import", "--json", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def vault_text(vault: Vault) -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in vault.root.rglob("*.md")
                     if ".osk" not in p.parts)


def test_a_dry_run_shows_what_would_be_written_and_writes_nothing(vault, project,
                                                                  claude_memory):
    before = vault_text(vault)
    planned = imported(vault, project, "--from", "claude-code", "--dry-run")
    assert {p["action"] for p in planned} == {"create"}
    assert {Path(p["source"]).name for p in planned} == {
        "MEMORY.md", "feedback_use_pnpm.md", "user_role.md", "project_release_freeze.md"}
    assert all(p["path"] == "" for p in planned)
    assert vault_text(vault) == before


def test_claude_code_memories_become_nodes_in_their_scope_citing_their_files(
        vault, project, claude_memory):
    done = {Path(p["source"]).name: p for p in imported(vault, project, "--from",
                                                        "claude-code")}
    assert {p["action"] for p in done.values()} == {"create"}
    assert done["user_role.md"]["space"] == "Person"
    assert done["feedback_use_pnpm.md"]["space"] == "Scope"
    assert done["feedback_use_pnpm.md"]["scope"] == "shop"
    engine = Engine.open(vault, cwd=project)
    node = engine.read_node(done["feedback_use_pnpm.md"]["title"])
    assert node.derived_from == ("[[file:feedback_use_pnpm.md]]",)
    assert node.summary == "Install and run scripts with pnpm, never npm"
    assert "pnpm-lock.yaml" in node.text
    assert TOKEN not in vault_text(vault)  # the secret filter ran on the write


def test_a_re_run_writes_only_what_changed_and_a_changed_file_reopens_its_node(
        vault, project, claude_memory):
    imported(vault, project, "--from", "claude-code")
    again = imported(vault, project, "--from", "claude-code")
    assert {p["action"] for p in again} == {"unchanged"}

    changed = claude_memory / "project_release_freeze.md"
    changed.write_text(changed.read_text(encoding="utf-8").replace("2026-12-10", "2026-12-12"),
                       encoding="utf-8")
    title = next(p["title"] for p in again if p["source"].endswith("project_release_freeze.md"))
    report = Engine.open(vault, cwd=project).recheck()
    assert [(c.citing_title, c.target, c.reason) for c in report.candidates] == [
        (title, "[[file:project_release_freeze.md]]", "target-changed")]

    third = {Path(p["source"]).name: p["action"]
             for p in imported(vault, project, "--from", "claude-code")}
    assert third == {"MEMORY.md": "unchanged", "feedback_use_pnpm.md": "unchanged",
                     "user_role.md": "unchanged", "project_release_freeze.md": "update"}
    engine = Engine.open(vault, cwd=project)
    assert "2026-12-12" in engine.read_node(title).text
    assert engine.recheck().candidates == ()  # the update re-cited the file at its new hash


def test_codex_memories_become_domain_nodes_without_the_intermediate_stages(
        vault, project, codex_memory):
    done = imported(vault, project, "--from", "codex")
    assert sorted(Path(p["source"]).name for p in done) == ["MEMORY.md", "memory_summary.md"]
    assert {p["space"] for p in done} == {"Domain"}
    assert "ripgrep" in Engine.open(vault, cwd=project).read_node(done[0]["title"]).text
    assert {p["action"] for p in imported(vault, project, "--from", "codex")} == {"unchanged"}


def test_instructions_bring_in_the_projects_claude_md_or_agents_md(vault, project,
                                                                  codex_memory):
    (project / "AGENTS.md").write_text("# Agents\nRun `make lint` before every commit.\n",
                                       encoding="utf-8")
    done = imported(vault, project, "--from", "codex", "--instructions")
    (agents,) = [p for p in done if p["source"].endswith("AGENTS.md")]
    assert agents["space"] == "Scope" and agents["scope"] == "shop"
    node = Engine.open(vault, cwd=project).read_node(agents["title"])
    assert node.derived_from == ("[[file:AGENTS.md]]",)


def test_a_missing_memory_folder_is_named_and_nothing_is_written(vault, project):
    done = osk(vault, project, "import", "--from", "claude-code")
    assert done.returncode != 0
    assert "no claude-code memory folder at" in done.stderr and "--source" in done.stderr
