"""The scripted model of the live suite: what it answers to each prompt, deterministically.

A prompt starts with a marker that picks the plan:

- ``[live:write] …``: find osk's tools (Claude Code's ToolSearch when it defers them), then
  ``create_node`` (the cluster's hub), ``search`` for it, ``read_node`` it, and a final answer;
- ``[live:chat N] …``: a plain final answer that quotes N, no tools;
- ``[live:calls N] …``: find osk's tools, then ``search`` and ``overview`` (read-only, so any
  number of fresh sessions can make them) and a final answer;
- ``[live:remember] …`` (Claude Code): write one memory with the host's own ``Write`` tool into
  the memory folder its system prompt names, in the format it states, then its ``MEMORY.md``;
- osk's background review prompt (``[osk background review: …``): read the first round item
  with ``read_raw``, write a node citing it with ``create_node``, answer "osk review done.".

Anything else (a host's own side request) gets a short text. Each tool step is taken once per
prompt, in order, judged by the tool calls the conversation already shows after the prompt, so
a resumed or forked conversation continues where its plan stands.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from modelserver import Call, Reply, Turn

CLUSTER = "live"
TOOL_QUERY = "+osk"  # Claude Code's ToolSearch: every deferred tool with "osk" in its name
ITEM = re.compile(r"^\d+\. round (.+)$", re.MULTILINE)

Step = Callable[[Turn], Call]


def osk(tool: str) -> str:
    return f"mcp__osk__{tool}"


def chat_answer(number: str) -> str:
    return f"Answer {number}: the tidepool build runs `make check` before every release."


def write_steps(host_model: str) -> list[Step]:
    return [
        lambda turn: Call(osk("create_node"), {
            "title": CLUSTER, "summary": "What the live suite learned about tidepool.",
            "body": "The tidepool project releases after `make check` passes.\n",
            "space": "scope", "cluster": CLUSTER, "drafter": host_model,
            "derived_from": ["[[file:README.md]]"]}),
        lambda turn: Call(osk("search"), {"query": "tidepool releases make check"}),
        lambda turn: Call(osk("read_node"), {"node": CLUSTER}),
    ]


READ_STEPS: list[Step] = [
    lambda turn: Call(osk("search"), {"query": "tidepool releases"}),
    lambda turn: Call(osk("overview"), {}),
]
CALLS_ANSWER = "Looked: the vault answered both calls."


def review_steps(host_model: str) -> list[Step]:
    def target(turn: Turn) -> str:
        found = ITEM.findall(turn.prompt)
        assert found, f"the review prompt lists no round: {turn.prompt!r}"
        return found[0]

    return [
        lambda turn: Call(osk("read_raw"), {"coordinate": target(turn)}),
        lambda turn: Call(osk("create_node"), {
            "title": review_title(target(turn)),
            "summary": "tidepool runs make check before every release.",
            "body": "The conversation settled that `make check` runs before every release.\n",
            "space": "scope", "cluster": CLUSTER, "drafter": host_model,
            "derived_from": [f"[[{target(turn)}]]"]}),
    ]


def review_title(coordinate: str) -> str:
    """One node per reviewed batch, named after the batch's first round."""
    return f"tidepool release check from round {coordinate.rsplit(' ', 1)[-1].rstrip(']')}"


MEMORY_DIR = re.compile(r"persistent file-based memory at `([^`]+)`")
MEMORY_FILE = "feedback_make_check.md"
MEMORY_TEXT = ("---\nname: make-check-first\ndescription: Run make check before every tidepool "
               "release\nmetadata:\n  type: feedback\n---\n\nRun `make check` before every "
               "release.\n\n**Why:** a release without it shipped a broken build.\n"
               "**How to apply:** `make check && make release`.\n")


def remember_steps(turn: Turn) -> list[Call]:
    """Claude Code's own memory, written as its system prompt tells the model to."""
    system = turn.body.get("system", "")
    text = system if isinstance(system, str) else " ".join(
        str(block.get("text", "")) for block in system if isinstance(block, dict))
    found = MEMORY_DIR.search(text)
    assert found, "Claude Code's system prompt names no memory folder"
    folder = found.group(1).rstrip("/")
    return [Call("Write", {"file_path": f"{folder}/{MEMORY_FILE}", "content": MEMORY_TEXT}),
            Call("Write", {"file_path": f"{folder}/MEMORY.md",
                           "content": f"- [Make check first]({MEMORY_FILE}) — before releases\n"})]


class Play:
    """The brain a ``ModelServer`` asks; ``model`` is the drafter name nodes carry."""

    def __init__(self, model: str) -> None:
        self.model = model

    def __call__(self, turn: Turn) -> Reply:
        prompt = turn.prompt.strip()
        chat = re.match(r"\[live:chat (\w+)\]", prompt)
        if chat:
            return Reply(text=chat_answer(chat.group(1)))
        if prompt.startswith("[live:write]"):
            return self.steps(turn, write_steps(self.model),
                              "Noted: tidepool releases after `make check`.")
        if prompt.startswith("[live:calls"):
            return self.steps(turn, READ_STEPS, CALLS_ANSWER)
        if prompt.startswith("[live:remember]"):
            steps = remember_steps(turn)
            done = sum(1 for name in turn.called if name == "Write")
            return Reply(calls=(steps[done],)) if done < len(steps) else Reply(
                text="Remembered.")
        if prompt.startswith("[osk background review"):
            return self.steps(turn, review_steps(self.model), "osk review done.")
        return Reply(text="(scripted side answer)")

    def steps(self, turn: Turn, steps: list[Step], final: str) -> Reply:
        if needs_tool_search(turn):
            return Reply(calls=(Call("ToolSearch", {"query": TOOL_QUERY, "max_results": 20}),))
        done = sum(1 for name in turn.called if name.startswith("mcp__osk__")
                   or name.startswith("mcp__osk"))
        if done < len(steps):
            return Reply(calls=(steps[done](turn),))
        return Reply(text=final)


def needs_tool_search(turn: Turn) -> bool:
    """Claude Code lists MCP tools by name only until ToolSearch loads their schemas."""
    return ("ToolSearch" in turn.tools and osk("create_node") not in turn.tools
            and "ToolSearch" not in turn.called)


def tool_results(turn: Turn) -> list[object]:
    out: list[object] = []
    for text in turn.results:
        try:
            out.append(json.loads(text))
        except ValueError:
            out.append(text)
    return out
