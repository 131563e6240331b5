"""`osk quickstart`: one scripted agent session through a demo vault, printed step by step.

Everything here goes through the real surfaces a user's host would use: the hook commands run
as subprocesses with Claude Code's payloads, the agent's tools are called over stdio on a real
`osk mcp` server with the official MCP client, and the person's commands are the `osk` CLI.
Nothing is simulated inside the engine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SESSION_ID = "3f6c2a10-5b7e-4c1d-9e8f-0a1b2c3d4e5f"
PROJECT = "tidepool"
RELEASE_DOC = """# Releasing tidepool

1. Bump the version in `Cargo.toml`.
2. Run `cargo dist build` (plain `cargo build` does not produce the installers).
3. Tag `vX.Y.Z` and push the tag; CI uploads the artefacts.
"""
QUESTION = "How do I cut a release of tidepool? Last time the installer was missing."
ANSWER = (
    "Releases are built with `cargo dist build`, not `cargo build` - only cargo dist "
    "produces the installers, which is why one was missing last time. Steps are in "
    "docs/release.md: bump Cargo.toml, run cargo dist build, then tag vX.Y.Z and push."
)


@dataclass
class Demo:
    root: Path
    out: Any = field(default=sys.stdout)
    step_no: int = 0
    coordinate: str = ""  # the captured round the session then cites

    @property
    def vault(self) -> Path:
        return self.root / "vault"

    @property
    def project(self) -> Path:
        return self.root / PROJECT

    @property
    def transcript(self) -> Path:
        return self.root / "claude" / f"{SESSION_ID}.jsonl"

    # -- printing -------------------------------------------------------------------------
    def step(self, title: str) -> None:
        self.step_no += 1
        print(f"\n{self.step_no}. {title}", file=self.out)

    def say(self, text: str, indent: int = 3) -> None:
        pad = " " * indent
        for line in text.rstrip("\n").splitlines() or [""]:
            print(f"{pad}{line}", file=self.out)

    # -- running things -------------------------------------------------------------------
    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["OSK_VAULT"] = str(self.vault)
        return env

    def osk(self, *args: str, stdin: str | None = None, cwd: Path | None = None,
            check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [sys.executable, "-m", "osk", *args], input=stdin, capture_output=True, text=True,
            cwd=cwd or self.project, env=self.env(), encoding="utf-8",
        )
        if check and result.returncode not in (0, 1):
            raise RuntimeError(f"osk {' '.join(args)} failed: {result.stderr}")
        return result

    def git(self, *args: str, cwd: Path | None = None) -> str:
        return subprocess.run(["git", *args], cwd=cwd or self.project, check=True,
                              capture_output=True, text=True).stdout

    def hook(self, event: str, payload: dict[str, Any]) -> str:
        return self.osk("hook", event, "--host", "claude", stdin=json.dumps(payload)).stdout


def run(keep: Path | None = None, out: Any = None) -> int:
    """Run the scripted session; returns 0 when every step behaved as described."""
    if keep is not None:
        # Absolute: every step runs in a folder of its own (the vault, the project), where a
        # relative folder would name another place.
        keep = keep.resolve()
        keep.mkdir(parents=True, exist_ok=True)
        return _run(Demo(keep, out or sys.stdout), kept=True)
    with tempfile.TemporaryDirectory(prefix="osk-quickstart-") as tmp:
        return _run(Demo(Path(tmp), out or sys.stdout), kept=False)


NEXT_STEPS = (
    ("osk init ~/memory && export OSK_VAULT=~/memory", "a vault of your own"),
    ("osk setup claude", "or codex, kiro, antigravity: the MCP server and hooks"),
    ("osk doctor", "the setup checked end to end"),
)


def _run(demo: Demo, *, kept: bool) -> int:
    import anyio

    print(f"osk quickstart — a demo vault and one scripted agent session in {demo.root}",
          file=demo.out)
    _setup(demo)
    _capture(demo)
    anyio.run(_agent_session, demo)
    _person(demo)
    print("\nDone. Every step above ran through the real hooks, MCP server and CLI.",
          file=demo.out)
    _next_steps(demo, kept)
    return 0


def _next_steps(demo: Demo, kept: bool) -> None:
    print("\nNext, to give your own agent a memory:", file=demo.out)
    width = max(len(command) for command, _ in NEXT_STEPS)
    for command, why in NEXT_STEPS:
        print(f"   {command:<{width}}   # {why}", file=demo.out)
    if kept:
        print(f"(the demo vault stays in {demo.vault}: open it in Obsidian as a vault)",
              file=demo.out)


def _setup(demo: Demo) -> None:
    demo.step("The person creates a vault and works in a project repository")
    demo.osk("init", str(demo.vault), cwd=demo.root)
    demo.project.mkdir()
    (demo.project / "docs").mkdir()
    (demo.project / "docs" / "release.md").write_text(RELEASE_DOC, encoding="utf-8")
    demo.git("init", "-q", "-b", "main")
    demo.git("add", "-A")
    demo.git("-c", "user.name=demo", "-c", "user.email=demo@example.invalid",
             "commit", "-qm", "tidepool: release notes")
    demo.say(f"vault:   {demo.vault}  (a git repository; Scope/ Domain/ Person/ _raw/ _ledger/)")
    demo.say(f"project: {demo.project}  (git repository `{PROJECT}`: the session key)")


def _claude_lines() -> list[dict[str, Any]]:
    base = {"isSidechain": False, "userType": "external", "sessionId": SESSION_ID,
            "version": "2.1.97", "gitBranch": "main"}
    user = {**base, "type": "user", "uuid": "u-1", "parentUuid": None,
            "promptId": "p-1", "timestamp": "2026-11-29T09:00:00.000Z",
            "message": {"role": "user", "content": QUESTION}}
    tool = {**base, "type": "assistant", "uuid": "a-1", "parentUuid": "u-1",
            "timestamp": "2026-11-29T09:00:04.000Z", "requestId": "req-1",
            "message": {"id": "msg-1", "type": "message", "role": "assistant",
                        "model": "claude-opus-4-5", "stop_reason": None,
                        "content": [{"type": "tool_use", "id": "t-1", "name": "Read",
                                     "input": {"file_path": "docs/release.md"}}]}}
    result = {**base, "type": "user", "uuid": "u-2", "parentUuid": "a-1",
              "timestamp": "2026-11-29T09:00:05.000Z",
              "message": {"role": "user", "content": [
                  {"type": "tool_result", "tool_use_id": "t-1", "content": RELEASE_DOC}]}}
    answer = {**base, "type": "assistant", "uuid": "a-2", "parentUuid": "u-2",
              "timestamp": "2026-11-29T09:00:09.000Z", "requestId": "req-2",
              "message": {"id": "msg-2", "type": "message", "role": "assistant",
                          "model": "claude-opus-4-5", "stop_reason": None,
                          "content": [{"type": "text", "text": ANSWER}]}}
    return [user, tool, result, answer]


def _payload(demo: Demo, event: str, **extra: Any) -> dict[str, Any]:
    return {"session_id": SESSION_ID, "transcript_path": str(demo.transcript),
            "cwd": str(demo.project), "hook_event_name": event, **extra}


def _capture(demo: Demo) -> None:
    demo.step("Session start: the SessionStart hook injects this project's memory")
    injected = demo.hook("session-start", _payload(demo, "SessionStart", source="startup"))
    demo.say(_context_of(injected) or "(nothing yet: a new project has no memory)")

    demo.step("The person asks; the agent answers; the Stop hook captures the round")
    demo.transcript.parent.mkdir(parents=True)
    demo.hook("prompt-submit", _payload(demo, "UserPromptSubmit", prompt=QUESTION))
    with demo.transcript.open("w", encoding="utf-8") as handle:
        for line in _claude_lines():
            handle.write(json.dumps(line) + "\n")
    stop = _payload(demo, "Stop", stop_hook_active=False, last_assistant_message=ANSWER)
    demo.hook("stop", stop)
    demo.hook("stop", stop)  # hosts may fire Stop twice: the round is captured once
    from osk.capture.raw import list_records
    from osk.store.edges import RawTarget
    from osk.store.vault import Vault

    record = list_records(Vault(demo.vault))[0]
    text = (demo.vault / record.path).read_text(encoding="utf-8")
    demo.say(f"raw record: {record.path}  "
             f"({text.count('## Round ')} round after two Stop events)")
    coordinate = RawTarget(record.key, record.conversation, 1).coordinate
    demo.say(f"coordinate: {coordinate}")
    demo.coordinate = coordinate


def _memory_lines(context: str) -> str:
    """The scope memory part of an injected block: its heading and the note's first line."""
    lines = context.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("## Scope memory")), None)
    if start is None:
        return "(no scope memory)"
    shown = [line for line in lines[start:start + 3] if line.strip() and "</" not in line]
    return "\n".join(textwrap.shorten(line, 96) for line in shown[:2])


def _context_of(hook_stdout: str) -> str:
    if not hook_stdout.strip():
        return ""
    try:
        data = json.loads(hook_stdout)
    except json.JSONDecodeError:
        return hook_stdout
    return str(data.get("hookSpecificOutput", {}).get("additionalContext", ""))


async def _agent_session(demo: Demo) -> None:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "osk", "mcp"],
                                   env=demo.env(), cwd=str(demo.project))
    # The server logs each refused call to stderr (a host shows it in its MCP log); keep that
    # out of the walkthrough.
    with (demo.root / "mcp-server.log").open("w", encoding="utf-8") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), \
                ClientSession(read, write) as client:
            await client.initialize()
            await _session_steps(demo, client)


async def _session_steps(demo: Demo, client: Any) -> None:
    tools = sorted(tool.name for tool in (await client.list_tools()).tools)
    demo.step(f"The agent's MCP server offers {len(tools)} tools")
    demo.say(textwrap.fill(", ".join(tools), 88))
    await _distil(demo, client)
    await _recheck(demo, client)
    await _strictness(demo, client)


async def _call(client: Any, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    if result.is_error:
        raise RuntimeError(f"{tool} refused: {result.content[0].text}")
    return dict(result.structured_content or {})


async def _refusal(client: Any, tool: str, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    if not result.is_error:
        raise RuntimeError(f"{tool} was expected to refuse {arguments}")
    return str(result.content[0].text)


async def _distil(demo: Demo, client: Any) -> None:
    coordinate = demo.coordinate
    demo.step("The agent distils a durable claim into a node that cites its evidence")
    created = await _call(
        client, "create_node", title="Releases are built with cargo dist",
        summary="tidepool releases use `cargo dist build`; plain `cargo build` ships no "
                "installer.",
        body="Build releases with `cargo dist build`. A plain `cargo build` produces no "
             "installers, which is how a release once shipped without one.\n",
        space="scope", cluster="release", drafter="claude-opus-4-5",
        hub_summary="How tidepool is released: procedure and pitfalls.",
        derived_from=[f"[[{coordinate}]]", "[[file:docs/release.md]]"],
    )
    demo.say(f"created {created['hub']}  (the new cluster's hub, written by the same call; "
             f"this first write bound the session to scope {created['scope']!r}: "
             f"{created['bound_now']})")
    demo.say(f"created {created['path']}")
    node_text = (demo.vault / created["path"]).read_text(encoding="utf-8")
    demo.say(node_text.split("---\n")[1].rstrip(), indent=5)
    note = await _call(client, "scope_memory", action="read")
    await _call(client, "scope_memory", action="replace", expect_hash=note["hash"],
                text="tidepool: releases go through `cargo dist build`; "
                     "see [[Releases are built with cargo dist]].\n")
    hits = (await _call(client, "search", query="why was the installer missing"))["hits"]
    demo.step("Recall: search finds it, and the next session starts with the scope memory")
    for hit in hits[:2]:
        demo.say(f"{hit['score']:.2f}  {hit['title']}  markers={hit['markers']}")
    from osk.engine.core import semantic_status

    meaning = semantic_status()
    demo.say(f"(semantic search {meaning.text})")
    if meaning.fix:
        demo.say(f"(to rank by meaning in Korean and English alike: {meaning.fix})")
    first = demo.hook("session-start", _payload(demo, "SessionStart", source="startup"))
    again = demo.hook("session-start", _payload(demo, "SessionStart", source="resume"))
    demo.say("session start now injects:")
    demo.say(_memory_lines(_context_of(first)), indent=5)
    demo.say("the same conversation resuming gets a pointer instead of the full note:")
    demo.say(_memory_lines(_context_of(again)), indent=5)


async def _recheck(demo: Demo, client: Any) -> None:
    title = "Releases are built with cargo dist"
    demo.step("The source changes: the node that cites it is reopened for recheck")
    doc = demo.project / "docs" / "release.md"
    doc.write_text(RELEASE_DOC.replace("cargo dist build", "cargo dist build --allow-dirty"),
                   encoding="utf-8")
    hit = (await _call(client, "search", query=title))["hits"][0]
    demo.say(f"search hit now carries markers={hit['markers']}")
    candidate = (await _call(client, "overview"))["rechecks"][0]
    demo.say(f"overview: candidate {candidate['id'][:8]}… {candidate['citing_title']!r} "
             f"-> {candidate['target']} ({candidate['reason']})")
    refusal = await _refusal(client, "update_node", node=title, recheck_of=[candidate["id"]])
    demo.say("re-citing without reading the new source is refused:")
    demo.say(textwrap.fill(refusal, 84), indent=5)
    await _call(client, "read_raw", coordinate="file:docs/release.md")
    closed = await _call(client, "update_node", node=title, recheck_of=[candidate["id"]])
    demo.say(f"after read_raw, update_node(recheck_of=…) -> {closed['action']}, "
             f"closed {len(closed['closed'])} candidate")
    hit = (await _call(client, "search", query=title))["hits"][0]
    demo.say(f"search hit markers={hit['markers']}")


async def _strictness(demo: Demo, client: Any) -> None:
    demo.step("A misspelt argument is refused before the tool runs; nothing is written")
    refusal = await _refusal(client, "search", query="release", limit=3)
    demo.say(textwrap.fill(refusal, 84))


def _person(demo: Demo) -> None:
    demo.step("The person: validate, the terminal-only authority, history, sync to a remote")
    validate = demo.osk("validate")
    findings = validate.stdout.strip().splitlines()
    demo.say(f"osk validate -> exit {validate.returncode} "
             f"({len(findings)} finding(s){': ' + findings[0] if findings else ''})")
    refused = demo.osk("protect", "Scope/tidepool", stdin="", check=False)
    demo.say(f"osk protect from a script (stdin is not a terminal) -> exit {refused.returncode}:")
    demo.say(textwrap.fill(refused.stderr.strip(), 84), indent=5)
    log = demo.osk("log", "Releases are built with cargo dist")
    for line in log.stdout.strip().splitlines()[:4]:
        demo.say(line)
    remote = demo.root / "remote.git"
    demo.git("init", "-q", "--bare", str(remote), cwd=demo.root)
    demo.git("remote", "add", "origin", str(remote), cwd=demo.vault)
    sync = demo.osk("sync")
    demo.say(f"osk sync -> {sync.stdout.strip().splitlines()[-1] if sync.stdout else sync.stderr}")
    status = demo.osk("sync", "--status")
    demo.say(f"osk sync --status -> {status.stdout.strip()}")
