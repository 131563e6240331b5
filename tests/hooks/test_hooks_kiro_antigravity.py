"""Kiro and Antigravity: what their hooks allow, through the real hook command."""

from __future__ import annotations

from pathlib import Path

import pytest
from hookkit import hook_log, make_project, payload, run_hook

from osk.hooks.rules import rules_text
from osk.hooks.state import workspace_name
from osk.provenance.scope_memory import ScopeMemory


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "shop")


def test_kiro_agent_spawn_prints_the_scope_memory_as_plain_context(vault, project):
    memory = ScopeMemory(vault, "shop")
    memory.write(text="- Deploys go through the staging branch.\n", expect_hash=memory.read()[1])
    done = run_hook("session-start", "kiro", payload("kiro", "agent_spawn", cwd=project),
                    cwd=project)
    assert done.returncode == 0
    assert done.stdout.startswith('<osk-memory scope="shop"')
    assert "- Deploys go through the staging branch." in done.stdout
    assert memory.read()[1][:12] in done.stdout and "not instructions" in done.stdout


def test_kiro_counts_prompts_per_workspace_and_a_new_agent_starts_over(vault, project):
    outputs = []
    for turn in range(1, 10):
        data = payload("kiro", "prompt_submit", cwd=project, prompt=f"step {turn}")
        outputs.append(run_hook("prompt-submit", "kiro", data, cwd=project).stdout)
    assert [n for n, out in enumerate(outputs, start=1) if out] == [9]
    assert outputs[8].startswith("[osk review reminder, input turn 9]")
    assert "[[_raw/KEY/CONVERSATION#Round N]]" in outputs[8]  # the agent names its records
    state_file = vault.state("hooks", "kiro", f"{workspace_name('kiro', project)}.json")
    assert '"inputs": 9' in state_file.read_text(encoding="utf-8")
    run_hook("session-start", "kiro", payload("kiro", "agent_spawn", cwd=project), cwd=project)
    assert '"inputs": 0' in state_file.read_text(encoding="utf-8")


def test_kiro_ide_prompt_arrives_in_the_environment(vault, project):
    done = run_hook("prompt-submit", "kiro", b"", cwd=project,
                    env={"USER_PROMPT": "what changed?"})
    assert (done.returncode, done.stdout) == (0, "")
    state_file = vault.state("hooks", "kiro", f"{workspace_name('kiro', project)}.json")
    assert '"inputs": 1' in state_file.read_text(encoding="utf-8")


def test_kiro_stop_captures_nothing_and_prints_nothing(vault, project):
    done = run_hook("stop", "kiro", payload("kiro", "stop", cwd=project), cwd=project)
    assert (done.returncode, done.stdout) == (0, "")
    assert not list(vault.raw_dir.glob("*/*.md")) and hook_log(vault) == ""


@pytest.mark.parametrize("event", ["session-start", "prompt-submit", "stop"])
def test_antigravity_hooks_accept_its_payloads_and_stay_silent(vault, project, event):
    name = "stop" if event == "stop" else "session_start"
    done = run_hook(event, "antigravity", payload("antigravity", name, cwd=project), cwd=project)
    assert (done.returncode, done.stdout) == (0, "")
    assert not list(vault.raw_dir.glob("*/*.md")) and hook_log(vault) == ""
    assert not vault.state("hooks").exists()


@pytest.mark.parametrize("host", ["kiro", "antigravity"])
def test_the_rules_text_has_the_agent_record_read_and_review(host):
    text = rules_text(host)
    for words in ("append_raw", "overview", "exactly as written", "9th, 15th",
                  "[[_raw/KEY/CONVERSATION#Round N]]", "not as instructions", "update_node"):
        assert words in text
