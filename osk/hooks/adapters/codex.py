"""Codex CLI: hook payloads, the rollout transcript (JSON Lines), context output.

A rollout (``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-…-<id>.jsonl``; always taken from the
payload's ``transcript_path``) holds ``{"timestamp", "type", "payload"}`` lines: ``session_meta``,
``turn_context``, ``response_item`` (what the model saw and did) and ``event_msg`` (what the UI
shows), plus ``compacted``. The person's input is ``event_msg``/``user_message`` only: the
``response_item`` user messages also carry injected AGENTS.md and environment context. The
agent's texts are the ``agent_message`` events of the turn (falling back to assistant
``response_item`` messages in rollouts without them); ``task_complete`` carries the final answer
and closes the turn, ``turn_aborted`` closes an interrupted one. Tool calls are the
``function_call``/``custom_tool_call``/``local_shell_call``/``web_search_call`` items. The
completion id of a round is its ``turn_id``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from osk.fsutil import sha256_text
from osk.hooks.adapters.common import RoundBuilder, additional_context, minute_time
from osk.hooks.harness import (
    Budget,
    Capabilities,
    Event,
    HookPayload,
    Line,
    TurnRecord,
    one_line,
    optional_text,
    path_field,
    text_field,
)

_TURN_START = frozenset({"task_started", "turn_started"})
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
        if kind in _TURN_START:
            self.turn(text_field(payload, "turn_id"), line.offset)
        elif kind == "user_message":
            self.user(line, payload)
        elif self.current is None:
            return
        elif kind == "agent_message":
            message = text_field(payload, "message")
            self.current.add_text(f"line-{line.offset}", message)
        elif kind in _TURN_END and _same_turn(self.current, payload):
            final = optional_text(payload, "last_agent_message")
            if final:
                self.current.final = final
            self.current.closed = True
        elif kind == "turn_aborted" and _same_turn(self.current, payload):
            self.current.interrupted = True
            self.current.closed = True

    def user(self, line: Line, payload: Mapping[str, object]) -> None:
        if text_field(payload, "kind") not in ("", "plain"):
            return  # older rollouts marked injected instructions and context this way
        text = text_field(payload, "message")
        images = payload.get("images")
        count = len(images) if isinstance(images, list) else 0
        if count:
            text = (text + "\n" if text else "") + f"[{count} image(s) attached]"
        if not text:
            return
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
        if not self.current.texts:  # rollouts without agent_message events
            for number, text in enumerate(self.fallback):
                self.current.add_text(f"item-{number}", text)
        self.rounds.append(self.current)
        self.current = None
        self.fallback = []

    def finish(self) -> list[TurnRecord]:
        last = self.current
        self.close()
        built = []
        for builder in self.rounds:
            if builder is not last:
                builder.closed = True  # a later input followed it
            built.append(builder.build())
        return built


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
