"""`osk doctor`'s checks: the vault is found and valid, the MCP server starts and answers, and
each agent host osk is set up with connects as the real host does (``osk.hosts.connect``), runs
its hooks and captures its conversations. The command (``osk.surfaces.commands.hosts``) parses
its arguments, calls ``examine`` and prints what comes back.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from osk.engine.vaults import open_vault
from osk.errors import OskError
from osk.hooks import growth, hooklog
from osk.hooks.adapters import get
from osk.hooks.state import ConversationState
from osk.hosts import hostsetup
from osk.hosts.connect import ReplyLines, close_server, connect_as, send_message
from osk.hosts.hostsetup import Context
from osk.hosts.recordings import recordings
from osk.search import semantic
from osk.store.vault import SPACES, Vault
from osk.verbs import validate

HOOK_HOSTS = ("claude", "codex", "kiro")  # hosts whose hooks osk setup registers
# Tools the rules files and the background review prompt name; the server must offer them.
NEEDED_TOOLS = ("search", "read_node", "read_raw", "overview", "create_node", "update_node",
                "append_raw", "scope_memory")
MCP_TIMEOUT = 60.0
FIRST_CALL = "overview"  # the tool doctor calls once the server lists its tools
HOOK_TIMEOUT = 30.0


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool | None  # None: information only
    detail: str
    fix: str = ""


@dataclass(frozen=True)
class HostSite:
    """One host that osk is set up with, as the per-host checks see it."""

    host: str
    ctx: Context
    vault: Vault

    @property
    def project(self) -> Path | None:
        return self.ctx.project


@dataclass(frozen=True)
class HostReport:
    """One host's checks and the verdict line they add up to."""

    host: str
    state: str  # one of the keys of VERDICTS
    checks: tuple[Check, ...] = ()

    @property
    def failed(self) -> int:
        return sum(check.ok is False for check in self.checks)

    def verdict(self) -> str:
        text = f"{self.host}: {VERDICTS[self.state]}"
        if self.state == "set up" and self.failed:
            names = ", ".join(check.name for check in self.checks if check.ok is False)
            text = f"{self.host}: BROKEN ({names})"
        elif self.state == "not set up":
            text += " (information, not a failure)"
        return text


VERDICTS = {
    "set up": "working",
    "not set up": "found here, osk not set up",
    "absent": "not found on this machine",
}


@dataclass(frozen=True)
class Examination:
    """Everything `osk doctor` checked: the vault's and server's checks, then each host's."""

    checks: tuple[Check, ...]
    reports: tuple[HostReport, ...]

    @property
    def failed(self) -> int:
        return sum(check.ok is False for check in self.checks) + sum(r.failed
                                                                     for r in self.reports)


def examine(where: str | None, project: Path | None, hosts: Sequence[str]) -> Examination:
    """Check the vault ``where`` names (``--vault``; None: find it), the semantic channel, the
    MCP server and the hook log, then each of ``hosts`` (``project``: its project-level
    setup). A vault that cannot be found ends the checks there."""
    checks: list[Check] = []
    try:
        vault = open_vault(where)
    except OskError as exc:
        checks.append(Check("vault", False, str(exc), "create one with `osk init PATH` and "
                                                       "export OSK_VAULT=PATH"))
        return Examination(tuple(checks), ())
    checks.extend(check_vault(vault))
    checks.append(check_semantic())
    ctx = hostsetup.default_context(vault.root, project)
    checks.append(check_mcp(ctx.osk_command, vault.root, project))
    checks.extend(check_hook_log(vault))
    detected = hostsetup.detected_hosts(ctx)
    return Examination(tuple(checks), tuple(check_one_host(host, host in detected, ctx, vault)
                                            for host in hosts))


def check_one_host(host: str, detected: bool, ctx: Context, vault: Vault) -> HostReport:
    """Whether osk is set up with ``host``; when it is, every per-host check."""
    setup = check_host(host, ctx)
    if setup.ok is None:  # not registered: information about this machine, not a failure
        return HostReport(host, "not set up" if detected else "absent",
                          (setup,) if detected else ())
    checks = [setup]
    if setup.ok:
        site = HostSite(host, ctx, vault)
        for check in HOST_CHECKS:
            checks.extend(check(site))
    return HostReport(host, "set up", tuple(checks))


def check_vault(vault: Vault) -> list[Check]:

    try:
        vault.settings()
    except OskError as exc:
        return [Check("vault", False, str(exc), "fix osk.toml by hand")]
    missing = [name for name in SPACES if not (vault.root / name).is_dir()]
    if missing:
        return [Check("vault", False, f"{vault.root} lacks the folders {', '.join(missing)}",
                      "recreate them (empty folders are fine)")]
    checks = [Check("vault", True, f"{vault.root}")]
    try:
        findings = validate.run(vault)
    except OskError as exc:
        return [*checks, Check("validators", False, str(exc), "run `osk validate`")]
    # Links and crash debris get lines of their own, naming each one; the rest are summed up.
    links = [f.path for f in findings if f.rule == validate.LINK_RULE]
    debris = [f.path for f in findings if f.rule == validate.DEBRIS_RULE]
    others = [f for f in findings if f.rule not in (validate.LINK_RULE, validate.DEBRIS_RULE)]
    if others:
        first = others[0]
        checks.append(Check("validators", False,
                            f"{len(others)} finding(s); first: {first.path}: {first.message}",
                            "run `osk validate` for the full list"))
    else:
        checks.append(Check("validators", True, "no findings"))
    return [*checks, *_link_checks(links, debris)]


def _link_checks(links: list[str], debris: list[str]) -> list[Check]:
    """Every symbolic link in the vault by name (a link is how a file outside the vault gets
    read or written, or arrives from another device), and any crash debris."""
    found = [Check("symbolic links", not links,
                   f"{len(links)} in the vault: {', '.join(links)}" if links else "none",
                   "replace each with the real file or folder, or remove it; osk reads and "
                   "writes nothing through a link out of the vault, and sync refuses them")]
    if debris:
        found.append(Check("crash debris", False,
                           f"{len(debris)} temporary file(s) left by killed writes: "
                           f"{', '.join(debris)}", "delete them"))
    return found


def check_semantic() -> Check:

    state = semantic.status()
    return Check("semantic search", True if state.on else None, state.text, state.fix or "")


def check_host(host: str, ctx: Context) -> Check:
    """Whether osk is registered with ``host``: ok, broken (False), or not at all (None)."""

    where = f" --project {ctx.project}" if ctx.project else ""
    try:
        plan = hostsetup.plan(host, ctx)
    except OskError as exc:
        return Check(f"{host} setup", False, str(exc))
    if plan.empty:
        return Check(f"{host} setup", True,
                     "MCP server, hooks and rules are registered for this vault")
    others = hostsetup.installed_vaults(host, ctx)
    fix = f"osk setup {host}{where}"
    if not others:
        if not ctx.project:
            fix += " (or, for a per-project setup, check it with osk doctor --project DIR)"
        detail = "osk is not registered" + ("" if ctx.project else " at user level")
        return Check(f"{host} setup", None, detail, fix)
    if str(ctx.vault) not in others:
        detail = f"registered for another vault ({', '.join(others)})"
    else:
        detail = f"registered but out of date ({len(plan.changes)} file(s) would change)"
    return Check(f"{host} setup", False, detail, fix)


def check_codex_trust(site: HostSite) -> list[Check]:
    if site.host != "codex":
        return []
    return [Check("codex hooks", None, "Codex runs new hooks only once trusted",
                  "open Codex and trust the osk hooks in /hooks")]


def check_mcp(command: tuple[str, ...], vault_root: Path, project: Path | None) -> Check:
    """Start `osk mcp` as a host would (in the project) and speak JSON-RPC to it: initialize,
    tools/list, then one read-only tool call."""
    argv = [*command, "--vault", str(vault_root), "mcp"]
    try:
        tools = list_tools(argv, timeout=MCP_TIMEOUT, cwd=project)
    except (OSError, ValueError, TimeoutError) as exc:
        return Check("mcp server", False, f"`{' '.join(argv)}` failed: {exc}",
                     "run that command by hand to see its error")
    missing = [name for name in NEEDED_TOOLS if name not in tools]
    if missing:
        return Check("mcp server", False,
                     f"started, but lacks the tool(s) {', '.join(missing)} "
                     f"({len(tools)} tools listed)", "reinstall osk")
    return Check("mcp server", True, f"started and listed {len(tools)} tools; a first tool "
                                     f"call ({FIRST_CALL}) was answered")


def list_tools(argv: list[str], *, timeout: float, cwd: Path | None = None) -> list[str]:
    deadline = time.monotonic() + timeout
    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=errors, cwd=cwd)
        try:
            lines = ReplyLines(proc)
            send_message(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "osk-doctor", "version": "1"}}})
            init = lines.response(1, deadline)
            if "error" in init:
                raise ValueError(f"initialize was refused: {init['error']}")
            send_message(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
            send_message(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
            listed = lines.response(2, deadline)
            if "error" in listed:
                raise ValueError(f"tools/list was refused: {listed['error']}")
            result = listed.get("result")
            tools = result.get("tools", []) if isinstance(result, dict) else []
            names = [str(t.get("name")) for t in tools if isinstance(t, dict)]
            if FIRST_CALL in names:  # the handshake may come from the last run: call a tool too
                _first_call(proc, lines, deadline)
            return names
        except (TimeoutError, ValueError) as exc:
            errors.seek(0)
            tail = errors.read().decode("utf-8", "replace").strip().splitlines()[-3:]
            raise type(exc)(f"{exc}{': ' + ' | '.join(tail) if tail else ''}") from exc
        finally:
            close_server(proc)


def _first_call(proc: subprocess.Popen[bytes], lines: ReplyLines, deadline: float) -> None:
    """A read-only tool call, which needs the SDK and the engine up (the handshake does not)."""
    send_message(proc, {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                        "params": {"name": FIRST_CALL, "arguments": {}}})
    called = lines.response(3, deadline)
    result = called.get("result")
    if "error" in called or not isinstance(result, dict) or result.get("isError"):
        content = result.get("content") if isinstance(result, dict) else None
        text = content[0].get("text") if isinstance(content, list) and content else None
        raise ValueError(f"a first tool call ({FIRST_CALL}) failed: "
                         f"{text or called.get('error')}")


HOST_NAMES = {"claude": "Claude Code", "codex": "Codex"}


def check_connection(site: HostSite) -> list[Check]:
    """Connect to `osk mcp` as the host itself does, by replaying what the live suite recorded
    the real host sending (osk.hosts.recordings), and make its tool calls."""

    recorded = recordings(site.host)
    if not recorded:
        return []
    version = max(r.version for r in recorded.values())
    who = f"{HOST_NAMES.get(site.host, site.host)} {version}"
    argv = [*site.ctx.osk_command, "--vault", str(site.vault.root), "mcp"]
    chosen, failed = connect_as(argv, recorded, timeout=MCP_TIMEOUT, first_call=FIRST_CALL,
                                cwd=site.project)
    name = f"{site.host} connection"
    if failed:
        kept = f" (it keeps the {chosen} protocol it was answered in first)" if chosen else ""
        return [Check(name, False, f"as {who} connects{kept}, {len(failed)} request(s) "
                                   f"failed; first: {failed[0]}",
                      "the MCP server serves this host wrongly: upgrade osk, and report it "
                      "if it persists")]
    return [Check(name, True, f"connected as {who} does ({chosen} protocol); every tool call "
                              f"was answered")]


def check_hook(site: HostSite) -> list[Check]:
    if site.host not in HOOK_HOSTS:
        return []
    return [run_hook(site.ctx.osk_command, site.vault.root, site.host, site.project)]


def run_hook(command: tuple[str, ...], vault_root: Path, host: str,
             project: Path | None) -> Check:
    """Run `osk hook session-start --dry-run` as the host would, and look for trouble."""

    cwd = project or Path.cwd()
    payload = {"session_id": "osk-doctor", "cwd": str(cwd), "hook_event_name": "SessionStart",
               "source": "startup", "transcript_path": None}
    argv = [*command, "hook", "session-start", "--host", host, "--vault", str(vault_root),
            "--dry-run"]
    log = hooklog.log_path(Vault(vault_root))
    size = log.stat().st_size if log.exists() else 0
    try:
        done = subprocess.run(argv, input=json.dumps(payload).encode("utf-8"),
                              capture_output=True, timeout=HOOK_TIMEOUT, cwd=cwd)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check(f"{host} hook", False, f"`{' '.join(argv)}` failed: {exc}")
    grown = log.exists() and log.stat().st_size > size
    problem = done.stderr.decode("utf-8", "replace").strip()
    if done.returncode != 0 or problem or grown:
        detail = problem or (log.read_text(encoding="utf-8")[size:].strip() if grown else
                             f"exit code {done.returncode}")
        return Check(f"{host} hook", False, f"the dry-run session-start hook reported: {detail}",
                     f"see {log}")
    out = done.stdout.decode("utf-8", "replace").strip()
    if host in ("claude", "codex") and out.startswith("{"):
        try:
            json.loads(out)
        except ValueError:
            return Check(f"{host} hook", False, "the hook printed malformed JSON",
                         f"see {log}")
    return Check(f"{host} hook", True, f"a dry-run session start succeeded ({len(out)} chars)")


def check_growth(site: HostSite) -> list[Check]:

    states = [state for state in growth.status(site.vault) if state.host == site.host]
    if not states:
        return []  # this host cannot fork sessions: reviews are always in-session
    state = states[0]
    name = f"{state.host} background reviews"
    if not growth.enabled():
        return [Check(name, None, f"switched off ({growth.ENV_SWITCH}=off); "
                                  f"reviews run in-session")]
    if state.cli is None:
        return [Check(name, None, f"`{growth.FORK_CLIS[state.host]}` is not on "
                                  f"PATH; reviews run in-session")]
    if state.fallback == "unfinished":
        return [Check(
            name, False, state.detail or "background reviews did not finish; reviews run "
                                         "in-session for now",
            f"read the job logs in {growth.growth_dir(site.vault) / 'logs'}, then delete "
            f"{growth.fallback_path(site.vault, state.host)} to try forks again")]
    return [Check(name, True, f"forks of {state.cli} after every {growth.CADENCE} answers")]


STUCK_STOPS = 3  # Stops in a row that saw the transcript grow and recorded nothing


def check_capture(site: HostSite) -> list[Check]:
    """Conversations whose transcript keeps growing while capture records nothing: format
    drift held at its cursor, or a format the adapter reads as holding no round at all."""

    if get(site.host).capabilities.capture != "transcript":
        return []  # the agent records rounds itself (append_raw)
    folder = site.vault.state("hooks", site.host)
    stuck: list[str] = []
    watched = 0
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            state = ConversationState.from_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, TypeError):
            continue  # damaged state is rebuilt by the next hook
        transcript = Path(state.transcript) if state.transcript else None
        if transcript is None or not transcript.is_file():
            continue
        watched += 1
        if state.empty_stops >= STUCK_STOPS or state.drift:
            unread = transcript.stat().st_size - state.offset
            why = f"; {state.drift}" if state.drift else ""
            stuck.append(f"{path.stem}: {state.empty_stops} Stop(s) in a row saw {transcript} "
                         f"grow and recorded nothing ({unread:,} bytes after the capture "
                         f"cursor){why}")
    name = f"{site.host} capture"
    if stuck:
        return [Check(name, False, f"{len(stuck)} conversation(s) not captured: "
                                   + " | ".join(stuck[:3]),
                      "upgrade osk (pip install -U osk): capture resumes from its cursor and "
                      "loses nothing; if it persists, report the host's version and the "
                      "hook log's format-drift lines")]
    return [Check(name, True, f"{watched} conversation(s) with a transcript, each capturing")]


def check_hook_log(vault: Vault) -> list[Check]:

    path = hooklog.log_path(vault)
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    if not lines:
        return []
    return [Check("hook log", None, f"{len(lines)} line(s); latest: {lines[-1]}",
                  f"see {path}")]


# The checks run for every host osk is set up with, in this order. A check that does not
# concern a host returns nothing for it. Each returns Check objects named after the host, so
# the host's verdict line can name what failed.
HOST_CHECKS: tuple[Callable[[HostSite], list[Check]], ...] = (
    check_codex_trust,
    check_connection,
    check_hook,
    check_capture,
    check_growth,
)
