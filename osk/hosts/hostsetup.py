"""Registering osk with a host: its MCP server entry, its hooks, and its rules/steering file.

`osk setup HOST` is a plan followed by an apply. The plan is a list of file changes (the bytes
before and after) computed from the host's current files, so it can be shown as a diff, asked
about, applied, and checked by `osk doctor` without writing anything.

Existing settings are the user's: each host's plan is a list of `osk.hosts.configtext` edits, which
splice only our own entries and leave every other byte as it was. A file that cannot be parsed
is refused with its path, and nothing at all is written.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shlex
import shutil
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from osk.capture.secrets import check_name
from osk.errors import SetupError
from osk.hooks import adapters
from osk.hooks.adapters import HOSTS as HOSTS  # re-exported: the commands name the hosts by it
from osk.hooks.adapters.common import HOOK_EVENT_NAMES
from osk.hooks.rules import rules_text
from osk.hosts.configtext import (
    MARKER,
    Edit,
    JsonHook,
    JsonMember,
    KeptOnRemove,
    Memo,
    OwnedFile,
    TextBlock,
    toml_check,
    toml_places,
    toml_string,
)
from osk.hosts.jsontext import JsonText, JsonValue
from osk.store.fsutil import atomic_write

SERVER_NAME = "osk"


# ---------------------------------------------------------------------------------------------
# Locations
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Context:
    """Everything a plan depends on, so tests can point it at a temporary home."""

    home: Path
    vault: Path | None  # None only when removing
    osk_command: tuple[str, ...]
    project: Path | None = None
    codex_home: Path | None = None

    @property
    def codex_dir(self) -> Path:
        return self.codex_home or self.home / ".codex"


def default_context(vault: Path | None, project: Path | None) -> Context:
    codex_env = os.environ.get("CODEX_HOME")
    return Context(
        home=Path.home(),
        vault=vault,
        osk_command=osk_command(),
        project=project.expanduser().resolve() if project else None,
        codex_home=Path(codex_env).expanduser() if codex_env else None,
    )


def osk_command() -> tuple[str, ...]:
    """The absolute command that runs this osk, so a host finds it without our PATH."""
    beside = Path(sys.executable).parent / ("osk.exe" if os.name == "nt" else "osk")
    if beside.is_file():
        return (str(beside.absolute()),)
    found = shutil.which("osk")
    if found:
        return (str(Path(found).absolute()),)
    return (str(Path(sys.executable).absolute()), "-m", "osk")


def hook_timeout(host: str, event: str) -> int:
    """The seconds a host is told to allow one of our hooks: the host adapter's budget."""
    return adapters.get(host).budget.timeouts[event]


def hook_command(ctx: Context, event: str, host: str) -> str:
    """The shell command a host runs for one of our hooks (absolute paths, quoted)."""
    assert ctx.vault is not None
    words = [*ctx.osk_command, "hook", event, "--host", host, "--vault", str(ctx.vault)]
    return " ".join(shlex.quote(w) for w in words)


def is_our_hook_command(command: object, event: str, host: str) -> bool:
    return (
        isinstance(command, str)
        and "osk" in command
        and re.search(rf"\bhook\s+{re.escape(event)}\s+--host\s+{re.escape(host)}\b", command)
        is not None
    )


def server_argv(ctx: Context) -> tuple[str, list[str]]:
    """The command and arguments that start osk's MCP server on this vault."""
    assert ctx.vault is not None
    command, *prefix = ctx.osk_command
    return command, [*prefix, "--vault", str(ctx.vault), "mcp"]


def mcp_entry(ctx: Context, *, with_type: bool = False) -> dict[str, JsonValue]:
    command, args = server_argv(ctx)
    entry: dict[str, JsonValue] = {"type": "stdio"} if with_type else {}
    entry["command"] = command
    entry["args"] = args
    return entry


# ---------------------------------------------------------------------------------------------
# What each host gets
# ---------------------------------------------------------------------------------------------

def _instructions(front_matter: str, host: str) -> str:
    note = f"<!-- {MARKER}; remove with: osk setup {host} --remove -->\n"
    return f"---\n{front_matter}\n---\n{note}\n{rules_text(host)}"


def _owned_md(host: str) -> Callable[[str], bool]:
    return lambda text: MARKER in text and f"osk setup {host}" in text


def _claude_group(ctx: Context, event: str, host: str) -> dict[str, JsonValue]:
    group: dict[str, JsonValue] = {}
    if event == "session-start":
        group["matcher"] = "startup|resume|clear|compact"
    group["hooks"] = [
        {"type": "command", "command": hook_command(ctx, event, host),
         "timeout": hook_timeout(host, event)}
    ]
    return group


def _group_is_ours(event: str, host: str) -> Callable[[JsonValue], bool]:
    def check(group: JsonValue) -> bool:
        if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
            return False
        handlers = group["hooks"]
        return len(handlers) == 1 and isinstance(handlers[0], dict) and is_our_hook_command(
            handlers[0].get("command"), event, host
        )

    return check


def _hook_edits(ctx: Context, host: str, path: Path) -> list[Edit]:
    edits: list[Edit] = []
    for event, name in HOOK_EVENT_NAMES.items():  # Claude's and Codex's hooks.json alike
        group = _claude_group(ctx, event, host) if ctx.vault is not None else {}
        edits.append(JsonHook(path, name, group, _group_is_ours(event, host)))
    return edits


def _claude(ctx: Context) -> list[Edit]:
    claude_json = ctx.home / ".claude.json"
    entry = mcp_entry(ctx, with_type=True) if ctx.vault else {}
    if ctx.project is None:
        mcp: Edit = JsonMember(claude_json, ("mcpServers", SERVER_NAME), entry)
        settings = ctx.home / ".claude" / "settings.json"
    else:
        # Claude Code's "local" scope: per user and per project, never committed with the repo.
        mcp = JsonMember(claude_json, ("projects", str(ctx.project), "mcpServers", SERVER_NAME),
                         entry)
        settings = ctx.project / ".claude" / "settings.local.json"
    edits = [mcp, *_hook_edits(ctx, "claude", settings)]
    ignore = _git_exclude(ctx.project) if ctx.project is not None else None
    return edits if ignore is None else [*edits, ignore]


def _git_exclude(project: Path) -> Edit | None:
    """Keep Claude Code's personal settings out of git in the repository holding ``project``,
    through the clone's own ``info/exclude`` (never committed, like the local scope itself);
    None outside a repository. Claude Code ignores the file only when it creates it itself.

    The pattern matches the file in any folder, so every project of one repository asks for
    the same block and a second project's setup changes nothing."""
    from osk.provenance.sessions import find_repo

    repo = find_repo(project)
    if repo is None:
        return None
    body = "**/.claude/settings.local.json\n"
    return TextBlock(repo.common_dir / "info" / "exclude", "claude", body, "#")


def _codex(ctx: Context) -> list[Edit]:
    base = ctx.codex_dir if ctx.project is None else ctx.project / ".codex"
    config = base / "config.toml"
    body = ""
    if ctx.vault is not None:
        command, args = server_argv(ctx)
        # required: Codex otherwise sends the first model request without waiting for the
        # server, so a one-shot `codex exec` (and osk's own background review fork) can run
        # its whole turn without osk's tools; with it a server that cannot start stops Codex
        # with the reason instead (the live suite showed both).
        body = (
            f"[mcp_servers.{SERVER_NAME}]\n"
            f"command = {toml_string(command)}\n"
            f"args = [{', '.join(toml_string(arg) for arg in args)}]\n"
            "required = true\n"
        )
    table = TextBlock(config, "codex", body, "#", toml_places,
                      toml_check(config, ("mcp_servers", SERVER_NAME)))
    return [table, *_hook_edits(ctx, "codex", base / "hooks.json")]


def _kiro(ctx: Context) -> list[Edit]:
    base = ctx.home / ".kiro" if ctx.project is None else ctx.project / ".kiro"
    entry = mcp_entry(ctx) if ctx.vault else {}
    edits: list[Edit] = [
        JsonMember(base / "settings" / "mcp.json", ("mcpServers", SERVER_NAME), entry),
        OwnedFile(base / "steering" / "osk.md", _instructions("inclusion: always", "kiro"),
                  _owned_md("kiro")),
    ]
    if ctx.project is not None:  # Kiro's hooks live in the workspace only
        hooks = base / "hooks"
        ide = _kiro_ide_hook(ctx) if ctx.vault else ""
        edits.append(OwnedFile(hooks / "osk-prompt-submit.kiro.hook", ide, _kiro_hook_is_ours))
        cli = _kiro_cli_hooks(ctx) if ctx.vault else ""
        edits.append(OwnedFile(hooks / "osk.json", cli, _kiro_hook_is_ours))
    return edits


def _kiro_ide_hook(ctx: Context) -> str:
    """The Kiro IDE's agent hook: a shell command on prompt submit (its stdout reaches the
    agent). Its agent-stop trigger is not used: Kiro gives a hook no transcript to capture."""
    hook = {
        "enabled": True,
        "name": "osk-prompt-submit",
        "description": f"osk memory vault: counts turns and asks for reviews ({MARKER})",
        "version": "1.0.0",
        "when": {"type": "promptSubmit"},
        "then": {"type": "runCommand", "command": hook_command(ctx, "prompt-submit", "kiro"),
                 "timeout": hook_timeout("kiro", "prompt-submit")},
    }
    return json.dumps(hook, indent=2, ensure_ascii=False) + "\n"


def _kiro_cli_hooks(ctx: Context) -> str:
    """Kiro CLI 3's standalone hooks file: session start (injection) and prompt submit."""
    hooks = [
        {"name": f"osk-{event}", "trigger": trigger,
         "action": {"type": "command", "command": hook_command(ctx, event, "kiro")},
         "timeout": hook_timeout("kiro", event), "enabled": True}
        for event, trigger in (("session-start", "SessionStart"),
                               ("prompt-submit", "UserPromptSubmit"))
    ]
    return json.dumps({"version": "v1", "hooks": hooks}, indent=2, ensure_ascii=False) + "\n"


def _kiro_hook_is_ours(text: str) -> bool:
    """A Kiro hook file is ours when every hook in it is named osk-… and runs `osk hook`."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return False
    hooks = data.get("hooks", [data]) if isinstance(data, dict) else []
    return bool(hooks) and all(
        isinstance(h, dict) and str(h.get("name", "")).startswith("osk-")
        and " hook " in json.dumps(h) for h in hooks
    )


def _antigravity(ctx: Context) -> list[Edit]:
    mcp_path = ctx.home / ".gemini" / "antigravity" / "mcp_config.json"
    entry = mcp_entry(ctx) if ctx.vault else {}
    mcp: Edit = JsonMember(mcp_path, ("mcpServers", SERVER_NAME), entry)
    edits: list[Edit] = [mcp if ctx.project is None else KeptOnRemove(mcp)]
    if ctx.project is None:
        body = rules_text("antigravity")
        edits.append(TextBlock(ctx.home / ".gemini" / "GEMINI.md", "antigravity", body, "<!--"))
    else:
        rules = ctx.project / ".agents" / "rules" / "osk.md"
        edits.append(OwnedFile(rules, _instructions("trigger: always_on", "antigravity"),
                               _owned_md("antigravity")))
    return edits


PLANNERS: dict[str, Callable[[Context], list[Edit]]] = {
    "claude": _claude, "codex": _codex, "kiro": _kiro, "antigravity": _antigravity,
}

NOTES = {
    "claude": "Restart Claude Code (or review the hooks in /hooks) so it loads the new hooks.",
    "codex": "Codex runs a new or changed hook only after you trust it: open Codex and run "
             "/hooks to review and trust the three osk hooks.",
    "kiro": "Kiro has no transcript for osk to read: the steering file asks the agent to call "
            "append_raw after each answer. Agent hooks are installed per workspace only "
            "(use --project DIR).",
    "antigravity": "Antigravity has no stable hooks: the rules ask the agent to call "
                   "append_raw after each answer. Its MCP entry is user-level: a project "
                   "setup adds it, and only `osk setup antigravity --remove` removes it.",
}


# ---------------------------------------------------------------------------------------------
# Plan and apply
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    path: Path
    before: str | None  # None: the file does not exist
    after: str | None  # None: the file is deleted

    def diff(self) -> str:
        old = [] if self.before is None else self.before.splitlines(keepends=True)
        new = [] if self.after is None else self.after.splitlines(keepends=True)
        label_old = str(self.path) if self.before is not None else "/dev/null"
        label_new = str(self.path) if self.after is not None else "/dev/null"
        lines = difflib.unified_diff(old, new, label_old, label_new)
        return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
                       for line in lines)


@dataclass(frozen=True)
class Plan:
    host: str
    remove: bool
    changes: tuple[Change, ...]
    note: str
    memos: dict[str, Memo | None] = field(default_factory=dict)  # manifest updates

    @property
    def empty(self) -> bool:
        return not self.changes

    def diff(self) -> str:
        return "".join(change.diff() for change in self.changes)


def plan(host: str, ctx: Context, *, remove: bool = False) -> Plan:
    """Compute what `osk setup HOST` would change. Reads files; writes nothing."""
    if host not in PLANNERS:
        raise SetupError(f"unknown host {host!r}; choose one of {', '.join(HOSTS)}")
    if not remove and ctx.vault is None:
        raise SetupError("a vault is needed to set up a host: pass --vault or set OSK_VAULT")
    if not remove:  # every path below is written into the host's configuration as it is
        for what, path in (("the vault path", ctx.vault), ("the project path", ctx.project),
                           ("the osk command", " ".join(ctx.osk_command))):
            check_name(what, None if path is None else str(path))
    manifest = _load_manifest(ctx.home)
    texts: dict[Path, str | None] = {}
    originals: dict[Path, str | None] = {}
    memos: dict[str, Memo | None] = {}
    edits = PLANNERS[host](ctx)
    for edit in reversed(edits) if remove else edits:  # removal undoes installs in reverse
        if edit.path not in texts:
            texts[edit.path] = originals[edit.path] = _read(edit.path)
        before = texts[edit.path]
        after, memo = edit.apply(before, remove, manifest.get(edit.key))
        texts[edit.path] = after
        if after != before and (remove or edit.key not in manifest):
            memos[edit.key] = memo
    changes = tuple(
        Change(path, originals[path], after)
        for path, after in texts.items()
        if after != originals[path]
    )
    return Plan(host, remove, changes, NOTES[host], memos if changes else {})


def manifest_path(home: Path) -> Path:
    return home / ".osk" / "setup.json"


def _load_manifest(home: Path) -> dict[str, Memo]:
    text = _read(manifest_path(home))
    if text is None:
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return {}  # a damaged record only costs exactness of a later removal
    return data if isinstance(data, dict) else {}


def _save_manifest(home: Path, memos: dict[str, Memo | None]) -> None:
    if not memos:
        return
    manifest = _load_manifest(home)
    for key, memo in memos.items():
        if memo is None:
            manifest.pop(key, None)
        else:
            manifest[key] = memo
    atomic_write(manifest_path(home), json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def _read(path: Path) -> str | None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SetupError(f"cannot read {path}: {exc.strerror}; nothing was changed") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SetupError(f"{path} is not UTF-8 text; fix it by hand. Nothing was changed.") from exc


def backup_root(home: Path) -> Path:
    return home / ".osk" / "backups"


def apply(plan_: Plan, ctx: Context) -> Path | None:
    """Write the plan. Existing files are copied to a backup folder first; returns that folder."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    backup_dir = backup_root(ctx.home) / f"{stamp}-{plan_.host}"
    backed_up = False
    for change in plan_.changes:
        if _read(change.path) != change.before:
            raise SetupError(
                f"{change.path} changed while osk setup was running; run it again. "
                f"Nothing more was written."
            )
    for change in plan_.changes:
        if change.before is not None:
            target = backup_dir / _backup_name(change.path, ctx.home)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(change.path, target)
            backed_up = True
    memos = dict(plan_.memos)
    created_dirs = _load_manifest(ctx.home).get("created-folders", {})
    assert isinstance(created_dirs, dict)
    for change in plan_.changes:
        if change.after is None:
            change.path.unlink(missing_ok=True)
            _remove_empty(created_dirs.pop(str(change.path), []))
        else:
            missing = _missing_dirs(change.path.parent)
            atomic_write(change.path, change.after.encode("utf-8"))
            if missing:
                created_dirs[str(change.path)] = missing
    memos["created-folders"] = created_dirs or None
    _save_manifest(ctx.home, memos)
    return backup_dir if backed_up else None


def _missing_dirs(folder: Path) -> list[str]:
    missing = []
    while not folder.exists():
        missing.append(str(folder))
        folder = folder.parent
    return missing  # deepest first


def _remove_empty(folders: object) -> None:
    for folder in folders if isinstance(folders, list) else []:
        try:
            Path(folder).rmdir()
        except OSError:
            return  # not empty (the user put something there) or already gone


def _backup_name(path: Path, home: Path) -> Path:
    try:
        return Path("home") / path.relative_to(home)
    except ValueError:
        return Path("abs") / str(path).lstrip("/\\").replace(":", "")


# ---------------------------------------------------------------------------------------------
# Reading back what is installed (for `osk doctor`)
# ---------------------------------------------------------------------------------------------


def detected_hosts(ctx: Context) -> list[str]:
    """Hosts that look installed on this machine: their config folder or their CLI exists."""
    signs = {
        "claude": ([ctx.home / ".claude", ctx.home / ".claude.json"], ["claude"]),
        "codex": ([ctx.codex_dir], ["codex"]),
        "kiro": ([ctx.home / ".kiro"], ["kiro", "kiro-cli"]),
        "antigravity": ([ctx.home / ".gemini" / "antigravity"], ["antigravity", "agy"]),
    }
    found = []
    for host, (paths, commands) in signs.items():
        if any(p.exists() for p in paths) or any(shutil.which(c) for c in commands):
            found.append(host)
    return found


def installed_vaults(host: str, ctx: Context) -> list[str]:
    """Vault paths our MCP entries for ``host`` point at (empty when not registered)."""
    vaults = []
    for edit in PLANNERS[host](ctx):
        text = _read(edit.path)
        if text is None:
            continue
        args: object = None
        if isinstance(edit, JsonMember):
            entry = JsonText(text, edit.path).get(edit.keys)
            args = entry.get("args") if isinstance(entry, dict) else None
        elif isinstance(edit, TextBlock) and edit.comment == "#":
            try:
                entry = tomllib.loads(text).get("mcp_servers", {}).get(SERVER_NAME)
            except tomllib.TOMLDecodeError:
                entry = None
            args = entry.get("args") if isinstance(entry, dict) else None
        if isinstance(args, list) and "--vault" in args:
            index = args.index("--vault")
            if index + 1 < len(args):
                vaults.append(str(args[index + 1]))
    return vaults
