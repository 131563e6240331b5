"""Codex CLI: hook payloads, the rollout transcript (JSON Lines), context output.

A rollout (``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-…-<id>.jsonl``; always taken from the
payload's ``transcript_path``) holds ``{"timestamp", "type", "payload"}`` lines: ``session_meta``,
``turn_context``, ``response_item`` (what the model saw and did) and ``event_msg`` (what the UI
shows), plus bookkeeping (``compacted``, ``world_state``, ``token_usage_record`` …). Two
generations of ``event_msg`` carry the conversation, and a rollout may hold either:

- older CLIs: ``user_message`` (the person's input) and ``agent_message`` (each agent text);
- 0.17x: ``item_completed`` events whose ``item`` is a ``UserMessage`` (input as content
  parts), an ``AgentMessage`` (its ``Text`` parts), an ``McpToolCall`` and so on.

Either way ``task_complete`` carries the final answer and closes the turn, ``turn_aborted``
closes an interrupted one, and the completion id of a round is its ``turn_id``. The person's
input is never read from ``response_item`` user messages, which also carry the injected
AGENTS.md, environment and hook context; assistant ``response_item`` messages stand in for the
agent's texts only in rollouts without either event kind. Tool calls are the
``function_call``/``custom_tool_call``/``local_shell_call``/``web_search_call`` items (an MCP
tool is named ``<namespace>__<tool>``, as Claude Code names it).

Every line kind below is known: read, or deliberately passed over. Anything else is format drift
(``unknown``): capture stops before it rather than guess (docs/hosts.md, "Format drift").
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from osk.hooks.adapter_contract import (
    Budget,
    Capabilities,
    Event,
    HookPayload,
    one_line,
    optional_text,
    path_field,
    text_field,
)
from osk.hooks.adapters.common import RoundBuilder, additional_context, minute_time

if TYPE_CHECKING:  # Stop's types: the other hooks do not load osk.hooks.transcript
    from osk.hooks.transcript import Line, TurnRecord, Unknown
from osk.store.fsutil import sha256_text

_TURN_START = frozenset({"task_started", "turn_started"})
# Kinds read or deliberately passed over (from the rollouts of 0.3x-0.171 and codex-rs's
# rollout persistence policy). A kind outside these is drift.
_KNOWN_LINES = frozenset({"session_meta", "turn_context", "response_item", "event_msg",
                          "compacted", "world_state", "token_usage_record",
                          "inter_agent_communication"})
_KNOWN_EVENTS = frozenset({
    "task_started", "turn_started", "task_complete", "turn_complete", "turn_aborted",
    "user_message", "agent_message", "item_completed", "agent_reasoning",
    "agent_reasoning_raw_content", "agent_reasoning_section_break", "token_count",
    "thread_settings_applied", "thread_goal_updated", "thread_rolled_back", "context_compacted",
    "entered_review_mode", "exited_review_mode", "mcp_tool_call_end", "exec_command_end",
    "patch_apply_end", "web_search_end", "image_generation_end", "view_image_tool_call",
    "sub_agent_activity", "plan_update", "error", "warning", "stream_error",
})
_KNOWN_ITEMS = frozenset({
    "UserMessage", "AgentMessage", "McpToolCall", "HookPrompt", "InjectedContext", "Plan",
    "Reasoning", "WebSearch", "ImageView", "ImageGeneration", "FileChange", "CommandExecution",
    "ContextCompaction", "EventDrivenTool", "EventCommandEvent", "CollabAgentMessage",
    "ConversationArtifact", "Sleep",
})
_KNOWN_RESPONSE_ITEMS = frozenset({
    "message", "reasoning", "function_call", "function_call_output", "custom_tool_call",
    "custom_tool_call_output", "local_shell_call", "web_search_call", "tool_search_call",
    "tool_search_output", "image_generation_call", "compaction", "context_compaction",
    "additional_tools", "agent_message",
})
_TURN_END = frozenset({"task_complete", "turn_complete"})
_TOOL_ITEMS = frozenset({"function_call", "custom_tool_call", "local_shell_call",
                         "web_search_call", "tool_search_call"})


class CodexAdapter:
    name = "codex"
    # additionalContext above 2,500 tokens (estimated as bytes / 4) is spilled to a file under
    # $CODEX_HOME/hook_outputs and the model sees only a preview: stay well below 10,000 bytes.
    budget = Budget(max_chars=6000, max_bytes=8000,
                    timeouts={"session-start": 15, "prompt-submit": 10, "stop": 30})
    capabilities = Capabilities(capture="transcript", cadence="hook", inject="hook",
                                conversation_ids=True)

    def payload(self, event: Event, data: Mapping[str, object],
                env: Mapping[str, str]) -> HookPayload:
        return HookPayload(
            host=self.name, event=event,
            session_id=text_field(data, "session_id"),
            cwd=path_field(data, "cwd") or Path(os.getcwd()),
            transcript_path=path_field(data, "transcript_path"),
            prompt=optional_text(data, "prompt"),
            turn_id=text_field(data, "turn_id"),
            last_assistant_message=optional_text(data, "last_assistant_message"),
            source=text_field(data, "source"),
            subagent=bool(text_field(data, "agent_id")),
            stop_hook_active=data.get("stop_hook_active") is True,
        )

    def render(self, event: Event, text: str) -> str:
        return additional_context(event, text)

    def unknown(self, lines: Sequence[Line]) -> list[Unknown]:
        from osk.hooks.transcript import Unknown

        return [Unknown(line.offset, kind) for line in lines
                if (kind := _kind(line.obj)) and not _known(kind)]

    def version(self, lines: Sequence[Line], path: Path) -> str:
        """``cli_version`` of the rollout's ``session_meta`` (its first line)."""
        for line in lines:
            if line.obj.get("type") == "session_meta":
                return _cli_version(line.obj)
        try:
            with open(path, "rb") as handle:
                head = handle.read(256 * 1024)
        except OSError:
            return ""
        found = re.search(rb'"cli_version"\s*:\s*"([^"]{1,40})"', head)
        return found.group(1).decode("utf-8", "replace") if found else ""

    def parse(self, lines: Sequence[Line]) -> list[TurnRecord]:
        walk = _Walk()
        for line in lines:
            payload = line.obj.get("payload")
            if not isinstance(payload, Mapping):
                continue
            kind = line.obj.get("type")
            if kind == "event_msg":
                walk.event(line, payload)
            elif kind == "response_item":
                walk.item(payload)
            elif kind == "turn_context":
                walk.turn(text_field(payload, "turn_id"), None)
        return walk.finish()


@dataclass
class _Walk:
    """Round assembly over one read of a rollout."""

    rounds: list[RoundBuilder] = field(default_factory=list)
    current: RoundBuilder | None = None
    fallback: list[str] = field(default_factory=list)  # assistant response_items of the round
    turn_id: str = ""           # the last turn id announced
    turn_start: int | None = None  # offset of the task_started line not yet claimed by a round
    claimed: set[str] = field(default_factory=set)
    items: list[str] = field(default_factory=list)   # AgentMessage texts of the round
    legacy: list[str] = field(default_factory=list)  # agent_message texts of the round

    def turn(self, turn_id: str, offset: int | None) -> None:
        """A turn id announced by ``task_started`` (with its offset) or ``turn_context``."""
        if not turn_id or turn_id in self.claimed:
            return
        current = self.current
        if current is not None and not current.turn_id and not current.closed:
            # Some rollouts announce the turn after the user message that opened it.
            current.turn_id = current.completion = turn_id
            self.claimed.add(turn_id)
            return
        self.turn_id = turn_id
        if offset is not None:
            self.turn_start = offset

    def event(self, line: Line, payload: Mapping[str, object]) -> None:
        kind = payload.get("type")
        if kind == "item_completed":
            item = payload.get("item")
            if isinstance(item, Mapping):
                self.completed(line, item)
        elif kind in _TURN_START:
            self.turn(text_field(payload, "turn_id"), line.offset)
        elif kind == "user_message":
            self.user(line, text_field(payload, "message"), _count(payload.get("images")),
                      text_field(payload, "kind"))
        elif self.current is None:
            return
        elif kind == "agent_message":
            self.agent(line, text_field(payload, "message"), legacy=True)
        elif kind in _TURN_END and _same_turn(self.current, payload):
            final = optional_text(payload, "last_agent_message")
            if final:
                self.current.final = final
            self.current.closed = True
        elif kind == "turn_aborted" and _same_turn(self.current, payload):
            self.current.interrupted = True
            self.current.closed = True

    def completed(self, line: Line, item: Mapping[str, object]) -> None:
        """A 0.17x ``item_completed`` event: the person's input or an agent text."""
        kind = item.get("type")
        if kind == "UserMessage":
            text, images = _user_parts(item.get("content"))
            self.user(line, text, images, "")
        elif kind == "AgentMessage" and self.current is not None:
            self.agent(line, _agent_parts(item.get("content")), legacy=False)

    def agent(self, line: Line, text: str, *, legacy: bool) -> None:
        """One agent text. A CLI that writes both generations of events says each text twice:
        the item wins and the legacy twin is dropped."""
        current = self.current
        assert current is not None
        if legacy:
            self.legacy.append(text)
        else:
            self.items.append(text)
        current.add_text(f"line-{line.offset}", text)

    def user(self, line: Line, text: str, images: int, kind: str) -> None:
        if kind not in ("", "plain"):
            return  # older rollouts marked injected instructions and context this way
        if images:
            text = (text + "\n" if text else "") + f"[{images} image(s) attached]"
        if not text:
            return
        current = self.current
        if (current is not None and current.user == text and not current.texts
                and not current.tools and not current.closed):
            return  # the same input in both generations of events
        self.close()
        turn_id = self.turn_id if self.turn_id and self.turn_id not in self.claimed else ""
        if turn_id:
            self.claimed.add(turn_id)
        start = self.turn_start if self.turn_start is not None else line.offset
        self.turn_start = None
        completion = turn_id or "line-" + sha256_text(
            f"{line.obj.get('timestamp')}\n{text}")[:16]
        self.current = RoundBuilder(start=start, user=text, completion=completion,
                                    turn_id=turn_id, at=minute_time(line.obj.get("timestamp")))

    def item(self, payload: Mapping[str, object]) -> None:
        if self.current is None:
            return
        kind = payload.get("type")
        if kind == "message" and payload.get("role") == "assistant":
            text = _output_text(payload.get("content"))
            if text:
                self.fallback.append(text)
        elif kind in _TOOL_ITEMS:
            self.current.tools.append(_tool_summary(payload))

    def close(self) -> None:
        if self.current is None:
            return
        if self.items and self.legacy:  # both generations: keep the items' texts only
            self.current.texts = []
            self.current.text_keys = []
            for number, text in enumerate(self.items):
                self.current.add_text(f"item-{number}", text)
        if not self.current.texts:  # rollouts without agent text events
            for number, text in enumerate(self.fallback):
                self.current.add_text(f"item-{number}", text)
        self.rounds.append(self.current)
        self.current = None
        self.fallback = []
        self.items = []
        self.legacy = []

    def finish(self) -> list[TurnRecord]:
        last = self.current
        self.close()
        built = []
        for builder in self.rounds:
            if builder is not last:
                builder.closed = True  # a later input followed it
            built.append(builder.build())
        return built


def _kind(obj: Mapping[str, object]) -> str:
    """A line's type path: ``event_msg/<type>``, ``event_msg/item_completed/<item type>``,
    ``response_item/<type>`` or the top-level type."""
    kind = obj.get("type")
    if not isinstance(kind, str):
        return "(no type)"
    payload = obj.get("payload")
    payload = payload if isinstance(payload, Mapping) else {}
    inner = payload.get("type")
    if kind not in ("event_msg", "response_item") or not isinstance(inner, str):
        return kind
    if kind == "event_msg" and inner == "item_completed":
        item = payload.get("item")
        item_type = item.get("type") if isinstance(item, Mapping) else None
        return f"{kind}/{inner}/{item_type}"
    return f"{kind}/{inner}"


def _known(kind: str) -> bool:
    parts = kind.split("/")
    if parts[0] not in _KNOWN_LINES:
        return False
    if len(parts) == 1:
        return True
    if parts[0] == "response_item":
        return parts[1] in _KNOWN_RESPONSE_ITEMS
    return parts[1] in _KNOWN_EVENTS and (len(parts) < 3 or parts[2] in _KNOWN_ITEMS)


def _cli_version(obj: Mapping[str, object]) -> str:
    payload = obj.get("payload")
    return text_field(payload, "cli_version") if isinstance(payload, Mapping) else ""


def _count(images: object) -> int:
    return len(images) if isinstance(images, list) else 0


def _user_parts(content: object) -> tuple[str, int]:
    """A ``UserMessage`` item's text (its text parts joined) and how many images it carries."""
    if not isinstance(content, list):
        return "", 0
    texts = [str(p.get("text")) for p in content if isinstance(p, Mapping)
             and p.get("type") == "text" and isinstance(p.get("text"), str)]
    images = sum(1 for p in content
                 if isinstance(p, Mapping) and p.get("type") in ("image", "local_image"))
    return "\n".join(texts), images


def _agent_parts(content: object) -> str:
    if not isinstance(content, list):
        return ""
    return "".join(str(p.get("text")) for p in content
                   if isinstance(p, Mapping) and p.get("type") in ("Text", "text")
                   and isinstance(p.get("text"), str))


def _same_turn(current: RoundBuilder, payload: Mapping[str, object]) -> bool:
    turn_id = text_field(payload, "turn_id")
    return not turn_id or not current.turn_id or turn_id == current.turn_id


def _output_text(content: object) -> str:
    if not isinstance(content, list):
        return ""
    parts = [str(b.get("text")) for b in content
             if isinstance(b, Mapping) and b.get("type") in ("output_text", "text")
             and isinstance(b.get("text"), str)]
    return "\n\n".join(parts)


def _tool_summary(item: Mapping[str, object]) -> str:
    kind = item.get("type")
    name = text_field(item, "name") or str(kind)
    namespace = text_field(item, "namespace")
    if namespace:
        name = f"{namespace.rstrip('_')}__{name}"
    if kind == "function_call":
        arguments = item.get("arguments")
        shown = _arguments(arguments)
        return one_line(f"{name}: {shown}" if shown else name)
    if kind == "custom_tool_call":
        return one_line(f"{name}: {text_field(item, 'input')}")
    action = item.get("action")
    action = action if isinstance(action, Mapping) else {}
    if kind == "local_shell_call":
        command = action.get("command")
        shown = " ".join(map(str, command)) if isinstance(command, list) else str(command or "")
        return one_line(f"shell: {shown}")
    if kind == "web_search_call":
        return one_line(f"web_search: {text_field(action, 'query')}")
    return one_line(name)


def _arguments(arguments: object) -> str:
    """A function call's arguments: the command for shells, compact JSON otherwise."""
    if not isinstance(arguments, str):
        return ""
    try:
        data = json.loads(arguments)
    except json.JSONDecodeError:
        return arguments
    if isinstance(data, Mapping):
        command = data.get("command") or data.get("cmd")
        if isinstance(command, list):
            return " ".join(map(str, command))
        if isinstance(command, str):
            return command
    return json.dumps(data, ensure_ascii=False, sort_keys=True)


ADAPTER = CodexAdapter()
