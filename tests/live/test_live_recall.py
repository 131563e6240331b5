"""Per-prompt recall through the real Claude Code and Codex CLIs.

Session 1: the scripted model writes a node through osk's tools. Then the person's other work
adds newer nodes to the scope, enough that the next session start's table of contents lists
those instead. Session 2 is a new conversation whose first prompt asks what the node answers:
the node must be in the model's request inside the prompt-submit hook's recall block, though
the model never searches.
"""

from __future__ import annotations

import json
import re

import pytest
from livehost import LiveHost, Run
from plays import CLUSTER
from test_live_hosts import WRITE

from osk.calls.request import NewNode
from osk.engine.core import Engine
from osk.hooks.digest import USED
from osk.store.vault import locate

ASK = "[live:chat 20] Question 20: what runs before a tidepool release?"
BLOCK = re.compile(r"<osk-recall>.*?</osk-recall>", re.DOTALL)


@pytest.fixture(scope="module")
def sessions(host: LiveHost) -> tuple[Run, Run, str]:
    first = host.run(WRITE, OSK_GROWTH="off")
    engine = Engine.open(locate(str(host.vault)), cwd=host.project)
    engine.warm()
    for n in range(USED + 1):  # newer nodes than session 1's
        engine.create_node(NewNode(f"Harbour map note {n}", f"Harbour map detail number {n}.",
                                   f"Harbour map detail {n}.\n", space="Scope", cluster=CLUSTER,
                                   drafter="live-test"))
    node_id = engine.read_node(CLUSTER).id
    second = host.run(ASK, OSK_GROWTH="off")
    return first, second, node_id


def test_a_node_from_session_1_reaches_session_2_in_the_recall_block(
        sessions: tuple[Run, Run, str]) -> None:
    first, second, node_id = sessions
    assert first.returncode == 0 and second.returncode == 0, second.stderr
    assert second.session_id != first.session_id
    text = second.request_text()
    blocks = BLOCK.findall(text)
    assert blocks, "no recall block reached the model in session 2"
    assert any(f"id {node_id}" in block for block in blocks)
    assert "What the live suite learned about tidepool." in " ".join(blocks)
    called = [name for request in second.requests for name in _tool_calls(request.body)]
    assert not any("search" in name for name in called)  # the model never searched
    start = text.split("<osk-recall>", 1)[0]
    assert node_id not in start  # not the session start that brought it: the prompt did


def _tool_calls(body: object) -> list[str]:
    """Tool names the conversation so far shows the model calling (both hosts' shapes)."""
    names: list[str] = []
    if not isinstance(body, dict):
        return names
    for message in body.get("messages", []) or []:
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                names.append(str(block.get("name")))
    for item in body.get("input", []) or []:
        if isinstance(item, dict) and item.get("type") == "function_call":
            names.append(str(item.get("name")))
    return names


def test_each_injection_of_both_sessions_left_a_receipt_the_log_reads_back(
        host: LiveHost, sessions: tuple[Run, Run, str]) -> None:
    first, second, node_id = sessions
    found = json.loads(host.osk("recall", "log", "--json", "--limit", "1000").stdout)
    mine = [r for r in found if r["conversation"] == second.session_id]
    events = [r["event"] for r in mine]
    assert events[0] == "session-start" and "prompt-submit" in events, events
    assert {r["host"] for r in mine} == {host.name}
    blocks = BLOCK.findall(second.request_text())
    recalled = [r for r in mine if node_id in {i["id"] for i in r["items"]}]
    assert [r["event"] for r in recalled] == ["prompt-submit"]
    shown = json.loads(f'"{blocks[0]}"')  # as the request carried it, JSON-escaped
    assert recalled[0]["chars"] == len(shown)  # what reached the model, to the character
    assert ASK not in json.dumps(found)  # the prompt itself is never kept
    assert any(r["conversation"] == first.session_id for r in found)
    stats = json.loads(host.osk("stats", "--json").stdout)
    assert sum(row["prompts"] for row in stats) == sum(
        r["event"] == "prompt-submit" for r in found)
    assert sum(row["with_block"] for row in stats) >= 1
