"""The real Claude Code and Codex CLIs, set up by `osk setup`, through one conversation.

One conversation per host (module-scoped, shared by the asserts below): a first input in which
the model finds osk's tools, writes a node, searches and reads it, then eight more inputs, each
a resume of the same session. Background reviews are off here (``OSK_GROWTH=off``), so the
review reminder is due in-session at input turn 9. test_live_growth.py covers the fork.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from livehost import OSK_TOOLS, LiveHost, Run, pinned_versions
from obsidian_support import notes, unresolved
from plays import CLUSTER, chat_answer

from osk.capture.raw import RawRecord, list_records, read_record
from osk.store.vault import locate

WRITE = "[live:write] Please note how tidepool releases."
WRITE_ANSWER = "Noted: tidepool releases after `make check`."
INPUTS = 9
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"


@dataclass
class Conversation:
    host: LiveHost
    runs: list[Run]

    @property
    def session_id(self) -> str:
        return self.runs[0].session_id

    def prompts(self) -> list[str]:
        return [r.prompt for r in self.runs]


def chat(number: int) -> str:
    return f"[live:chat {number}] Question {number}: what runs before a tidepool release?"


@pytest.fixture(scope="module")
def conversation(host: LiveHost) -> Conversation:
    runs = [host.run(WRITE, OSK_GROWTH="off")]
    for number in range(2, INPUTS + 1):
        runs.append(host.run(chat(number), resume=runs[0].session_id, OSK_GROWTH="off"))
    conv = Conversation(host, runs)
    if os.environ.get("OSK_LIVE_RECORD"):
        record_fixture(conv)
    return conv


def record_fixture(conv: Conversation) -> None:
    """Keep the host's own transcript of our scripted conversation as a parser fixture, with
    what the suite sent and what the scripted model answered
    (tests/hooks/test_hooks_live_fixtures.py)."""
    host = conv.host
    package = {"claude": "@anthropic-ai/claude-code", "codex": "@openai/codex"}[host.name]
    folder = FIXTURES / host.name / f"live-{pinned_versions()[package]}"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(host.transcript(conv.session_id), folder / "transcript.jsonl")
    expected = [{"user": r.prompt, "final": final_answer(r.prompt)} for r in conv.runs]
    (folder / "expected.json").write_text(json.dumps(expected, indent=1) + "\n",
                                          encoding="utf-8")


def final_answer(prompt: str) -> str:
    if prompt == WRITE:
        return WRITE_ANSWER
    return chat_answer(prompt.split()[1].rstrip("]"))


# -- setup and the MCP connection -----------------------------------------------------------

def test_setup_registers_the_server_and_the_hooks(host: LiveHost) -> None:
    if host.name == "claude":
        config = json.loads((host.home / ".claude.json").read_text(encoding="utf-8"))
        assert config["mcpServers"]["osk"]["args"][-1] == "mcp"
        hooks = json.loads((host.home / ".claude" / "settings.json").read_text(encoding="utf-8"))
    else:
        assert "[mcp_servers.osk]" in (host.codex_home / "config.toml").read_text(encoding="utf-8")
        hooks = json.loads((host.codex_home / "hooks.json").read_text(encoding="utf-8"))
    assert set(hooks["hooks"]) == {"SessionStart", "UserPromptSubmit", "Stop"}


def test_the_twelve_tools_are_found_on_the_first_search(conversation: Conversation) -> None:
    """Claude Code defers MCP tools behind ToolSearch: the model's first search must bring all
    twelve. Codex offers them in the first request, as the namespace ``mcp__osk``."""
    first = conversation.runs[0].requests
    wanted = {f"mcp__osk__{name}" for name in OSK_TOOLS}
    if conversation.host.name == "claude":
        assert "ToolSearch" in tool_names(first[0])
        listed = json.dumps(first[0].body["system"]) + json.dumps(first[0].body["messages"])
        assert all(name in listed for name in wanted), "the deferred list lacks osk tools"
        # The first tool result the model gets back is its search's: all twelve loaded.
        results = [r for r in first if tool_results(r) or tool_references(r)]
        assert tool_references(results[0]) == wanted
    else:
        namespaces = {t["name"]: t for t in first[0].body["tools"] if t.get("type") == "namespace"}
        assert {f"mcp__osk__{t['name']}" for t in namespaces["mcp__osk"]["tools"]} == wanted


def test_session_start_injection_reaches_the_model(conversation: Conversation) -> None:
    first = conversation.runs[0].request_text()
    assert '<osk-memory scope=\\"tidepool\\"' in first
    # On resume the host runs SessionStart again: the note reaches those requests too.
    assert '<osk-memory scope=\\"tidepool\\"' in conversation.runs[1].request_text()


def test_create_search_and_read_work_through_the_host(conversation: Conversation) -> None:
    host = conversation.host
    results = max((tool_results(r) for r in conversation.runs[0].requests), key=len)
    created, found, read = (json.loads(r) for r in results[-3:])
    assert created["action"] == "created" and created["title"] == CLUSTER
    assert [hit["title"] for hit in found["hits"]] == [CLUSTER]
    assert read["text"] == "The tidepool project releases after `make check` passes.\n"
    node = host.vault / created["path"]
    assert "derived-from" in node.read_text(encoding="utf-8")


# -- capture ----------------------------------------------------------------------------------

def test_every_round_is_captured_verbatim_once(conversation: Conversation) -> None:
    host = conversation.host
    check_capture(host.record_of(conversation.session_id), conversation)


def check_capture(record: RawRecord, conversation: Conversation) -> None:
    """Every input of the conversation is one round: the input and the final answer verbatim,
    the first round's three osk tool calls summarised, nothing else."""
    assert [r.user for r in record.rounds] == conversation.prompts()
    assert [r.assistant for r in record.rounds] == [final_answer(p)
                                                    for p in conversation.prompts()]
    osk_tools = [t.split(":")[0] for t in record.rounds[0].tools if t.startswith("mcp__osk__")]
    assert osk_tools == ["mcp__osk__create_node", "mcp__osk__search", "mcp__osk__read_node"]
    assert all(not r.tools for r in record.rounds[1:])
    assert len({r.completion for r in record.rounds}) == INPUTS
    assert [r.host for r in record.rounds] == [conversation.host.name] * INPUTS


# The Codex adapter as it was before 0.17x rollouts: the item_completed events unread and no
# drift check, so the Stop hook moves its cursor past rounds it never saw.
OLD_CODEX = """
import sys
from osk.hooks.adapters import codex
from osk.hooks.main import run
event = codex._Walk.event
codex._Walk.event = lambda walk, line, payload: (
    None if payload.get("type") == "item_completed" else event(walk, line, payload))
if sys.argv[1] == "old":
    codex.CodexAdapter.unknown = lambda adapter, lines: []
else:  # the drift-aware adapter that has not learnt item_completed yet
    codex._KNOWN_EVENTS = codex._KNOWN_EVENTS - {"item_completed"}
sys.exit(run(sys.argv[3:]))  # after -c, the variant and "hook"
"""


@pytest.mark.parametrize("host", ["codex"], indirect=True)
def test_an_old_codex_parser_fails_the_capture_check(conversation: Conversation,
                                                     tmp_path: Path) -> None:
    """The suite catches the bug it was built for: with the old parser the real rollout
    yields no round, and the capture check above fails. A drift-aware adapter that does not
    know the new events holds its cursor and says so; once it knows them, all is captured."""
    host = conversation.host
    vault = tmp_path / "vault"
    host.osk("init", str(vault))

    def stop(variant: str) -> None:
        argv = ([sys.executable, "-c", OLD_CODEX, variant] if variant else
                [sys.executable, "-m", "osk"]) + ["hook", "stop", "--host", "codex",
                                                  "--vault", str(vault)]
        done = subprocess.run(argv, input=json.dumps(stop_payload(conversation)),
                              env=host.env(OSK_GROWTH="off"), capture_output=True, text=True,
                              timeout=60, cwd=host.project)
        assert done.returncode == 0 and done.stderr == "", done.stderr

    def record() -> RawRecord:
        located = locate(str(vault))
        found = [read_record(located, r.key, r.conversation) for r in list_records(located)]
        return found[0] if found else RawRecord("", "", vault, "", "", "", "", ())

    stop("old")
    with pytest.raises(AssertionError):
        check_capture(record(), conversation)
    assert record().rounds == ()

    fresh = tmp_path / "vault2"
    host.osk("init", str(fresh))
    vault = fresh
    stop("unaware")
    log = (vault / ".osk" / "logs" / "hooks.log").read_text(encoding="utf-8")
    assert "format drift: codex 0.171.0" in log and "event_msg/item_completed/UserMessage" in log
    with pytest.raises(AssertionError):
        check_capture(record(), conversation)
    stop("")  # the current adapter: every round, once
    check_capture(record(), conversation)


def stop_payload(conversation: Conversation) -> dict[str, object]:
    host = conversation.host
    return {"session_id": conversation.session_id, "cwd": str(host.project),
            "transcript_path": str(host.transcript(conversation.session_id)),
            "hook_event_name": "Stop", "stop_hook_active": False,
            "last_assistant_message": final_answer(conversation.prompts()[-1])}


def test_a_repeated_stop_hook_captures_nothing_twice(conversation: Conversation) -> None:
    host = conversation.host
    record = host.record_of(conversation.session_id)
    before = record.path.read_bytes()
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-m", "osk", "hook", "stop", "--host", host.name],
            input=json.dumps(stop_payload(conversation)), env=host.env(OSK_GROWTH="off"),
            capture_output=True, text=True, timeout=60, cwd=host.project)
        assert done.returncode == 0 and done.stdout == ""
    assert record.path.read_bytes() == before


def test_the_review_reminder_reaches_the_model_at_input_turn_9(conversation: Conversation
                                                               ) -> None:
    reminder = "[osk review reminder, input turn 9]"
    assert reminder in conversation.runs[8].request_text()
    assert not any("osk review reminder" in r.request_text() for r in conversation.runs[:8])


def test_the_hooks_logged_no_trouble(conversation: Conversation) -> None:
    assert conversation.host.hook_log() == ""


def test_the_vault_the_conversation_leaves_reads_clean_in_obsidian(
        conversation: Conversation) -> None:
    """Issue 24 item 9: no link Obsidian cannot resolve (the node's file citation, the raw
    record's quoted tool arguments), and no node naming this device's project folder."""
    host = conversation.host
    assert unresolved(host.vault) == []
    nodes = [note for note in notes(host.vault) if note.relative_to(host.vault).parts[0]
             in ("Scope", "Domain", "Person")]
    assert nodes and not [n for n in nodes if str(host.project) in n.read_text(encoding="utf-8")]


# -- helpers ----------------------------------------------------------------------------------

def tool_names(request) -> set[str]:
    return {str(t.get("name")) for t in request.body.get("tools") or []}


def tool_references(request) -> set[str]:
    """The tools a ToolSearch result loaded (its tool_reference blocks)."""
    found = set()
    for message in request.body["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block.get("type") == "tool_result" and isinstance(block.get("content"), list):
                found |= {b["tool_name"] for b in block["content"]
                          if b.get("type") == "tool_reference"}
    return found


def tool_results(request) -> list[str]:
    """Every tool output in a request, in order (both APIs), as text."""
    body = request.body
    out = []
    if "messages" in body:
        for message in body["messages"]:
            for block in message["content"] if isinstance(message["content"], list) else []:
                if block.get("type") == "tool_result" and isinstance(block.get("content"), str):
                    out.append(block["content"])
        return out
    for item in body["input"]:
        if item.get("type") == "function_call_output":
            output = item["output"]
            out.append(output if isinstance(output, str) else json.dumps(output))
    return [text_of_output(o) for o in out]


def text_of_output(output: str) -> str:
    """Codex hands an MCP result to the model after a "Wall time" line and "Output:"."""
    marker = "Output:\n"
    return output.split(marker, 1)[1] if output.startswith("Wall time") and marker in output \
        else output
