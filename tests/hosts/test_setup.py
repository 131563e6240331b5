"""`osk setup HOST` on temporary home directories: install, re-install, remove, preserve."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import tomllib
from pathlib import Path

import pytest

from osk.errors import SetupError
from osk.hosts import hostsetup
from osk.store.vault import Vault
from osk.surfaces.cli import main

HOSTS = hostsetup.HOSTS

# What a user's machine already holds before osk setup: real-looking settings with their own
# formatting (4-space indents, compact lines, no final newline) that must survive byte for byte.
USER_FILES: dict[str, dict[str, str]] = {
    "claude": {
        ".claude.json": (
            '{"numStartups": 42, "theme": "dark", "projects": {"/somewhere/else": '
            '{"allowedTools": [], "mcpServers": {}}}, "mcpServers": {"github": '
            '{"type": "http", "url": "https://example.invalid/mcp"}}}'
        ),
        ".claude/settings.json": (
            "{\n"
            '    "model": "opus",\n'
            '    "permissions": {"allow": ["Bash(npm test:*)"], "deny": []},\n'
            '    "hooks": {\n'
            '        "Stop": [\n'
            '            {"hooks": [{"type": "command", "command": "notify-send done"}]}\n'
            "        ]\n"
            "    }\n"
            "}\n"
        ),
    },
    "codex": {
        ".codex/config.toml": (
            'model = "gpt-5.2"\n'
            'approval_policy = "on-request"\n'
            "\n"
            "# servers I use every day\n"
            "[mcp_servers.docs]\n"
            'command = "docs-mcp"\n'
            'args = ["--port", "0"]\n'
            "\n"
            '[hooks.state."user:Stop:0"]\n'
            'trusted_hash = "sha256:abc"'
        ),
        ".codex/hooks.json": (
            '{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]}}\n'
        ),
    },
    "kiro": {
        ".kiro/settings/mcp.json": (
            '{\n\t"mcpServers": {\n\t\t"fetch": {"command": "uvx", "args": ["mcp-fetch"]}\n\t}\n}'
        ),
        ".kiro/steering/style.md": "---\ninclusion: always\n---\nUse tabs.\n",
    },
    "antigravity": {
        ".gemini/antigravity/mcp_config.json": '{"mcpServers": {"x": {"command": "x"}}}\n',
        ".gemini/GEMINI.md": "# My rules\n\nAnswer briefly.",
    },
}

PROJECT_FILES: dict[str, dict[str, str]] = {
    "claude": {".claude/settings.local.json": '{"permissions": {"allow": ["Read(*)"]}}\n'},
    "codex": {".codex/config.toml": 'sandbox_mode = "workspace-write"\n'},
    "kiro": {".kiro/steering/product.md": "# Product\n"},
    "antigravity": {".agents/rules/team.md": "Be kind.\n"},
}


@pytest.fixture
def home(_isolated_home: Path) -> Path:
    return _isolated_home


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


def seed(home: Path, project: Path, host: str) -> None:
    for base, files in ((home, USER_FILES[host]), (project, PROJECT_FILES[host])):
        for rel, text in files.items():
            path = base / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(text.encode("utf-8"))
    if host == "claude":  # Claude Code keeps a local-scope entry for the project already
        claude_json = home / ".claude.json"
        data = claude_json.read_text(encoding="utf-8")
        claude_json.write_text(data.replace(
            '"projects": {', f'"projects": {{{json.dumps(str(project))}: '
                             f'{{"allowedTools": [], "mcpServers": {{}}}}, ', 1),
            encoding="utf-8")


def snapshot(*roots: Path) -> dict[str, bytes | None]:
    """Every file and folder under the roots (osk's own ~/.osk excluded): path -> bytes."""
    found: dict[str, bytes | None] = {}
    for root in roots:
        for path in sorted(root.rglob("*")):
            rel = str(path)
            if "/.osk" in rel or "/.gitconfig" in rel:
                continue
            found[rel] = path.read_bytes() if path.is_file() else None
    return found


def context(home: Path, vault: Path | None, project: Path | None = None) -> hostsetup.Context:
    return hostsetup.Context(home=home, vault=vault, osk_command=hostsetup.osk_command(),
                             project=project, codex_home=home / ".codex")


def setup(home: Path, vault: Path | None, host: str, project: Path | None = None,
          *, remove: bool = False) -> hostsetup.Plan:
    ctx = context(home, vault, project)
    plan = hostsetup.plan(host, ctx, remove=remove)
    hostsetup.apply(plan, ctx)
    return plan


# -- install, re-install, remove --------------------------------------------------------------


@pytest.mark.parametrize("level", ["user", "project"])
@pytest.mark.parametrize("host", HOSTS)
def test_setup_then_remove_gives_back_every_original_byte(
    vault: Vault, home: Path, project: Path, host: str, level: str
) -> None:
    seed(home, project, host)
    where = project if level == "project" else None
    before = snapshot(home, project)

    installed = setup(home, vault.root, host, where)
    assert not installed.empty
    assert snapshot(home, project) != before
    remove_all(home, host, where)

    assert snapshot(home, project) == before


def remove_all(home: Path, host: str, project: Path | None) -> None:
    setup(home, None, host, project, remove=True)
    if host == "antigravity" and project is not None:  # its MCP entry is user-level and shared
        setup(home, None, host, remove=True)


@pytest.mark.parametrize("level", ["user", "project"])
@pytest.mark.parametrize("host", HOSTS)
def test_setting_up_twice_changes_nothing_the_second_time(
    vault: Vault, home: Path, project: Path, host: str, level: str
) -> None:
    seed(home, project, host)
    where = project if level == "project" else None
    setup(home, vault.root, host, where)
    after_first = snapshot(home, project)

    second = setup(home, vault.root, host, where)

    assert second.empty
    assert snapshot(home, project) == after_first


@pytest.mark.parametrize("level", ["user", "project"])
@pytest.mark.parametrize("host", HOSTS)
def test_setup_and_remove_on_a_bare_machine_leave_nothing_behind(
    vault: Vault, home: Path, project: Path, host: str, level: str
) -> None:
    where = project if level == "project" else None
    before = snapshot(home, project)

    setup(home, vault.root, host, where)
    remove_all(home, host, where)

    assert snapshot(home, project) == before
    assert setup(home, None, host, where, remove=True).empty


@pytest.mark.parametrize("host", HOSTS)
def test_existing_settings_keep_their_values_after_setup(
    vault: Vault, home: Path, project: Path, host: str
) -> None:
    seed(home, project, host)
    originals = {rel: _parse(home / rel) for rel in USER_FILES[host]}

    setup(home, vault.root, host)

    for rel, original in originals.items():
        now = _parse(home / rel)
        if isinstance(original, dict):
            assert _without_osk(now) == original, rel
        else:
            assert str(now).startswith(str(original)), rel


def _parse(path: Path) -> object:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return json.loads(text)
    if path.suffix == ".toml":
        return tomllib.loads(text)
    return text


def _without_osk(data: object) -> object:
    """The data with osk's own entries taken out (the MCP entry and our hook groups)."""
    if isinstance(data, dict):
        cleaned = {k: _without_osk(v) for k, v in data.items() if k != "osk"}
        if "hooks" in cleaned and isinstance(cleaned["hooks"], dict):
            cleaned["hooks"] = {e: g for e, g in cleaned["hooks"].items() if g}
            if not cleaned["hooks"]:
                del cleaned["hooks"]
        return cleaned
    if isinstance(data, list):
        return [_without_osk(item) for item in data
                if "hook " not in json.dumps(item) or "--host" not in json.dumps(item)]
    return data


# -- what gets registered ---------------------------------------------------------------------


def test_claude_gets_the_mcp_server_and_three_hooks_with_absolute_paths(
    vault: Vault, home: Path
) -> None:
    setup(home, vault.root, "claude")

    server = json.loads((home / ".claude.json").read_text(encoding="utf-8"))["mcpServers"]["osk"]
    assert Path(server["command"]).is_absolute() and Path(server["command"]).exists()
    assert server["args"][-3:] == ["--vault", str(vault.root), "mcp"]
    hooks = json.loads((home / ".claude" / "settings.json").read_text(encoding="utf-8"))["hooks"]
    for event, name in (("session-start", "SessionStart"), ("prompt-submit", "UserPromptSubmit"),
                        ("stop", "Stop")):
        (group,) = hooks[name]
        argv = shlex.split(group["hooks"][0]["command"])
        assert Path(argv[0]).is_absolute()
        assert argv[-6:] == ["hook", event, "--host", "claude", "--vault", str(vault.root)]


def test_claude_project_setup_uses_the_local_scope_and_the_uncommitted_settings_file(
    vault: Vault, home: Path, project: Path
) -> None:
    setup(home, vault.root, "claude", project)

    data = json.loads((home / ".claude.json").read_text(encoding="utf-8"))
    assert "osk" in data["projects"][str(project)]["mcpServers"]
    assert "mcpServers" not in data
    assert (project / ".claude" / "settings.local.json").is_file()
    assert not (project / ".mcp.json").exists()


def test_claude_project_setup_keeps_its_settings_file_out_of_git_and_remove_restores_exclude(
    vault: Vault, home: Path, project: Path
) -> None:
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    exclude = project / ".git" / "info" / "exclude"
    before = exclude.read_bytes()
    nested = project / "web"
    nested.mkdir()

    setup(home, vault.root, "claude", project)
    second = hostsetup.plan("claude", context(home, vault.root, nested))

    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"],
                            cwd=project, capture_output=True, text=True, check=True).stdout
    assert (project / ".claude" / "settings.local.json").is_file()
    assert status == ""
    assert [c.path for c in second.changes if c.path == exclude] == []  # one shared block
    setup(home, None, "claude", project, remove=True)
    assert exclude.read_bytes() == before


def test_codex_gets_a_delimited_table_before_the_users_first_table(
    vault: Vault, home: Path, project: Path
) -> None:
    seed(home, project, "codex")
    original = tomllib.loads(USER_FILES["codex"][".codex/config.toml"])

    setup(home, vault.root, "codex")

    text = (home / ".codex" / "config.toml").read_text(encoding="utf-8")
    data = tomllib.loads(text)
    ours = data["mcp_servers"].pop("osk")
    assert data == original
    assert ours["args"][-3:] == ["--vault", str(vault.root), "mcp"]
    assert text.index("[mcp_servers.osk]") < text.index("# servers I use every day")
    hooks = json.loads((home / ".codex" / "hooks.json").read_text(encoding="utf-8"))["hooks"]
    assert len(hooks["Stop"]) == 2 and set(hooks) == {"SessionStart", "UserPromptSubmit",
                                                      "Stop"}


def test_kiro_and_antigravity_get_a_rules_file_that_asks_for_append_raw(
    vault: Vault, home: Path, project: Path
) -> None:
    setup(home, vault.root, "kiro", project)
    setup(home, vault.root, "antigravity", project)

    steering = (project / ".kiro" / "steering" / "osk.md").read_text(encoding="utf-8")
    rules = (project / ".agents" / "rules" / "osk.md").read_text(encoding="utf-8")
    assert steering.startswith("---\ninclusion: always\n---\n")
    assert rules.startswith("---\ntrigger: always_on\n---\n")
    for text in (steering, rules):
        assert "`append_raw`" in text and "`search`" in text
    ide_hook = json.loads((project / ".kiro" / "hooks" / "osk-prompt-submit.kiro.hook")
                          .read_text(encoding="utf-8"))
    assert ide_hook["when"] == {"type": "promptSubmit"}
    assert " hook prompt-submit --host kiro " in ide_hook["then"]["command"]
    cli_hooks = json.loads((project / ".kiro" / "hooks" / "osk.json").read_text(encoding="utf-8"))
    assert [h["trigger"] for h in cli_hooks["hooks"]] == ["SessionStart", "UserPromptSubmit"]


def test_removing_an_antigravity_project_setup_keeps_the_shared_user_level_server(
    vault: Vault, home: Path, project: Path
) -> None:
    setup(home, vault.root, "antigravity")
    setup(home, vault.root, "antigravity", project)
    mcp_config = home / ".gemini" / "antigravity" / "mcp_config.json"

    setup(home, None, "antigravity", project, remove=True)

    assert "osk" in json.loads(mcp_config.read_text(encoding="utf-8"))["mcpServers"]
    assert not (project / ".agents").exists()
    assert (home / ".gemini" / "GEMINI.md").exists()


def test_setup_for_another_vault_moves_our_entries_in_place(
    vault: Vault, home: Path, project: Path, tmp_path: Path
) -> None:
    seed(home, project, "claude")
    setup(home, vault.root, "claude")
    other = tmp_path / "other-vault"

    setup(home, other, "claude")

    settings = json.loads((home / ".claude" / "settings.json").read_text(encoding="utf-8"))
    stop_groups = settings["hooks"]["Stop"]
    assert len(stop_groups) == 2  # the user's group and one of ours, not two of ours
    assert stop_groups[1]["hooks"][0]["command"].endswith(f"--vault {other}")
    assert hostsetup.installed_vaults("claude", context(home, other)) == [str(other)]


def test_remove_keeps_a_hook_the_user_added_after_setup(vault: Vault, home: Path) -> None:
    setup(home, vault.root, "claude")
    settings = home / ".claude" / "settings.json"
    data = json.loads(settings.read_text(encoding="utf-8"))
    data["hooks"]["Stop"].append({"hooks": [{"type": "command", "command": "mine"}]})
    settings.write_text(json.dumps(data, indent=2), encoding="utf-8")

    setup(home, None, "claude", remove=True)

    left = json.loads(settings.read_text(encoding="utf-8"))
    assert left == {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "mine"}]}]}}


def test_a_changed_file_is_backed_up_before_it_is_written(vault: Vault, home: Path,
                                                          project: Path) -> None:
    seed(home, project, "claude")
    original = (home / ".claude" / "settings.json").read_bytes()

    setup(home, vault.root, "claude")

    (backup,) = (home / ".osk" / "backups").glob("*-claude/home/.claude/settings.json")
    assert backup.read_bytes() == original


# -- refusals ---------------------------------------------------------------------------------

MALFORMED = {
    "claude": (".claude/settings.json", '{"hooks": {"Stop": [}\n'),
    "codex": (".codex/config.toml", 'model = "gpt\n[broken\n'),
    "kiro": (".kiro/settings/mcp.json", "{'mcpServers': {}}"),
    "antigravity": (".gemini/antigravity/mcp_config.json", '{"mcpServers": '),
}


@pytest.mark.parametrize("host", HOSTS)
def test_a_malformed_settings_file_is_refused_and_nothing_is_written(
    vault: Vault, home: Path, project: Path, host: str
) -> None:
    seed(home, project, host)
    rel, text = MALFORMED[host]
    (home / rel).parent.mkdir(parents=True, exist_ok=True)
    (home / rel).write_text(text, encoding="utf-8")
    before = snapshot(home, project)

    with pytest.raises(SetupError, match="not valid") as caught:
        setup(home, vault.root, host)

    assert str(home / rel) in str(caught.value)
    assert snapshot(home, project) == before


def test_a_foreign_file_where_our_rules_file_goes_is_refused(vault: Vault, home: Path,
                                                             project: Path) -> None:
    steering = project / ".kiro" / "steering" / "osk.md"
    steering.parent.mkdir(parents=True)
    steering.write_text("my own notes about osk\n", encoding="utf-8")
    before = snapshot(home, project)

    with pytest.raises(SetupError, match="not written by osk setup"):
        setup(home, vault.root, "kiro", project)

    assert snapshot(home, project) == before


def test_a_codex_table_of_our_name_written_by_hand_is_refused(vault: Vault, home: Path) -> None:
    config = home / ".codex" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[mcp_servers.osk]\ncommand = "osk"\n', encoding="utf-8")

    with pytest.raises(SetupError, match=r"already defines \[mcp_servers.osk\]"):
        setup(home, vault.root, "codex")


def test_a_non_object_where_our_entry_goes_is_refused(vault: Vault, home: Path) -> None:
    (home / ".claude.json").write_text('{"mcpServers": []}\n', encoding="utf-8")

    with pytest.raises(SetupError, match="not an object"):
        setup(home, vault.root, "claude")


# -- the command ------------------------------------------------------------------------------


def test_setup_on_a_non_terminal_without_yes_refuses_and_writes_nothing(
    vault: Vault, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = snapshot(home)

    code = main(["setup", "claude"])

    out, err = capsys.readouterr()
    assert code == 1
    assert "+++ " + str(home / ".claude" / "settings.json") in out  # the diff was shown
    assert err.startswith("Error: osk setup asks before it changes files")
    assert snapshot(home) == before


def test_setup_with_yes_applies_and_a_second_run_says_nothing_to_change(
    vault: Vault, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["setup", "codex", "--yes"]) == 0
    out = capsys.readouterr().out
    assert f"created {home / '.codex' / 'config.toml'}" in out
    assert "/hooks" in out  # Codex's trust step is spelled out

    assert main(["setup", "codex", "--yes"]) == 0
    assert capsys.readouterr().out == (
        "osk is already set up for codex in your user settings: nothing to change.\n")


def test_dry_run_shows_the_diff_and_writes_nothing(
    vault: Vault, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = snapshot(home)

    assert main(["setup", "antigravity", "--dry-run"]) == 0

    out = capsys.readouterr().out
    assert "+++ " + str(home / ".gemini" / "antigravity" / "mcp_config.json") in out
    assert out.endswith("Dry run: nothing was written.\n")
    assert snapshot(home) == before


def test_remove_through_the_command_needs_no_vault(
    vault: Vault, home: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["setup", "kiro", "--yes"]) == 0
    monkeypatch.delenv("OSK_VAULT")

    assert main(["setup", "kiro", "--remove", "--yes"]) == 0

    assert "removed " + str(home / ".kiro" / "steering" / "osk.md") in capsys.readouterr().out
    assert not (home / ".kiro").exists()


def test_setup_without_a_vault_is_refused(home: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["setup", "claude", "--yes"]) == 2
    assert "no osk vault found" in capsys.readouterr().err
    assert not (home / ".claude").exists()


def test_setup_for_a_missing_project_folder_is_refused(
    vault: Vault, home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["setup", "claude", "--project", str(tmp_path / "nope"), "--yes"]) == 1
    assert "no such folder" in capsys.readouterr().err


TRICKY_TOML = [
    "",
    "\n\n",
    'model = "o3"',
    'model = "o3"\r\nnotify = ["say"]\r\n',
    'args = [\n[1, 2],\n[3]\n]\n[profiles.fast]\nmodel = "mini"\n',
    '[[skills]]\nname = "a"\n\n[[skills]]\nname = "b"\n',
    '# only a comment\n# and another\n[tui]\nnotifications = true\n',
    'text = """\n[not a table]\n"""\n[mcp_servers.other]\ncommand = "x"\n',
    '[mcp_servers]\n',
]


@pytest.mark.parametrize("text", TRICKY_TOML)
def test_codex_config_layouts_round_trip_and_parse_to_the_users_data_plus_ours(
    vault: Vault, home: Path, text: str
) -> None:
    config = home / ".codex" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_bytes(text.encode("utf-8"))

    setup(home, vault.root, "codex")

    data = tomllib.loads(config.read_text(encoding="utf-8"))
    ours = data["mcp_servers"].pop("osk")
    assert ours["command"] == hostsetup.osk_command()[0]
    expected = tomllib.loads(text)
    expected.setdefault("mcp_servers", {})
    assert data == expected
    setup(home, None, "codex", remove=True)
    assert config.read_bytes() == text.encode("utf-8")


def test_a_codex_config_where_our_table_cannot_go_is_refused_with_its_reason(
    vault: Vault, home: Path
) -> None:
    config = home / ".codex" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('mcp_servers = "none"\n', encoding="utf-8")

    with pytest.raises(SetupError, match=r"table cannot be added to this file"):
        setup(home, vault.root, "codex")

    assert config.read_text(encoding="utf-8") == 'mcp_servers = "none"\n'


@pytest.mark.parametrize("host", ["claude", "codex", "kiro"])
def test_every_registered_hook_command_runs_in_a_shell_even_with_spaces_in_the_vault_path(
    home: Path, tmp_path: Path, project: Path, host: str
) -> None:
    from osk.store.vault import init

    odd = init(tmp_path / "my vault's home")
    setup(home, odd.root, host, project)
    commands = registered_commands(host, home, project)
    assert len(commands) == 3

    for command in commands:
        payload = {"session_id": "s-1", "cwd": str(project), "transcript_path": None,
                   "hook_event_name": "x", "prompt": "hello", "source": "startup"}
        done = subprocess.run(command, shell=True, input=json.dumps(payload), text=True,
                              capture_output=True, cwd=project, timeout=60,
                              env={**os.environ, "OSK_GROWTH": "off"})
        assert done.returncode == 0 and done.stderr == "", (command, done.stderr)
    assert not odd.state("logs", "hooks.log").exists()  # no hook reported a failure


def registered_commands(host: str, home: Path, project: Path) -> list[str]:
    if host == "kiro":
        hooks = project / ".kiro" / "hooks"
        ide = json.loads((hooks / "osk-prompt-submit.kiro.hook").read_text(encoding="utf-8"))
        cli = json.loads((hooks / "osk.json").read_text(encoding="utf-8"))
        return [ide["then"]["command"], *(h["action"]["command"] for h in cli["hooks"])]
    path = (project / ".claude" / "settings.local.json" if host == "claude"
            else project / ".codex" / "hooks.json")
    events = json.loads(path.read_text(encoding="utf-8"))["hooks"]
    return [group["hooks"][0]["command"] for groups in events.values() for group in groups]
