"""Claude Code: hook payloads, the session transcript (JSON Lines), context output.

Transcript lines (``~/.claude/projects/<encoded cwd>/<session id>.jsonl``; always taken from the
payload's ``transcript_path``) are ``user``/``assistant`` entries in the Messages API shape plus
bookkeeping entries (``system``, ``summary``, ``attachment``, ``progress``, snapshots …), which
are ignored. What counts as the person's input is narrow: a ``user`` entry of the main chain
(not ``isSidechain``), not ``isMeta``, not a compact summary, whose content is text rather than
``tool_result`` blocks, and which is not a slash-command echo, local command output or an
interrupt marker. A slash command that the model then answers starts a round of its own, with
the command line (``/name args``) as its input; one it never answers is dropped.

The agent's answer is every text block of the turn, in order; one API message is streamed over
several lines that share ``message.id`` and is joined into one text. Tool calls are summarised
one line each. The completion id of a round is the ``uuid`` of the input entry.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
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

# Machine-injected prompts (UserPromptSubmit ``source``): not the person typing.
MACHINE_SOURCES = frozenset({"system", "loop_wakeup", "schedule_wakeup", "poll_event"})

_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)
_COMMAND_NAME = re.compile(r"<command-name>(.*?)</command-name>", re.DOTALL)
_COMMAND_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.DOTALL)
_LOCAL_OUTPUT = ("<local-command-stdout>", "<local-command-stderr>", "<local-command-caveat>",
                 "<bash-input>", "<bash-stdout>", "<bash-stderr>")
_INTERRUPT = "[Request interrupted by user"

# Drift: Claude Code adds bookkeeping entries (api-request, cost-state, …) most releases and
# they carry no conversation, so an unknown entry type is drift only when it holds a message.
# Inside the person's and the agent's messages every content block type must be known.
_MESSAGE_ENTRIES = frozenset({"user", "assistant"})
# Entries known to copy messages without being the conversation (2.1.332 keeps the request it
# sent as api-request-blob): passed over even though they hold a message.
_COPIES = frozenset({"api-request-blob", "api-request", "api-request-shape", "summary"})
_KNOWN_BLOCKS = frozenset({
    "text", "tool_use", "tool_result", "thinking", "redacted_thinking", "image", "document",
    "server_tool_use", "web_search_tool_result", "web_fetch_tool_result",
    "code_execution_tool_result", "bash_code_execution_tool_result",
    "text_editor_code_execution_tool_result", "mcp_tool_use", "mcp_tool_result",
    "container_upload", "tool_reference", "search_result",
})

# What each built-in tool's summary shows of its input.
_TOOL_FIELDS = {
    "Bash": "command", "Read": "file_path", "Write": "file_path", "Edit": "file_path",
    "MultiEdit": "file_path", "NotebookEdit": "notebook_path", "Grep": "pattern",
    "Glob": "pattern", "WebFetch": "url", "WebSearch": "query", "Task": "description",
    "Agent": "description", "Skill": "skill", "TodoWrite": "",
}


class ClaudeAdapter:
    name = "claude"
    # Inline hook output above ~10,000 characters is replaced by a preview and a file path.
    budget = Budget(max_chars=9000, max_bytes=36000,
                    timeouts={"session-start": 15, "prompt-submit": 10, "stop": 30})
    capabilities = Capabilities(capture="transcript", cadence="hook", inject="hook",
                                conversation_ids=True)

    def payload(self, event: Event, data: Mapping[str, object],
                env: Mapping[str, str]) -> HookPayload:
        cwd = path_field(data, "cwd") or path_field(env, "CLAUDE_PROJECT_DIR")
        source = text_field(data, "source")
        return HookPayload(
            host=self.name, event=event,
            session_id=text_field(data, "session_id"),
            cwd=cwd or Path(os.getcwd()),
            transcript_path=path_field(data, "transcript_path"),
            prompt=optional_text(data, "prompt"),
            machine_input=event == "prompt-submit" and source in MACHINE_SOURCES,
            turn_id=text_field(data, "prompt_id"),
            last_assistant_message=optional_text(data, "last_assistant_message"),
            source=source,
            subagent=bool(text_field(data, "agent_id")),
            stop_hook_active=data.get("stop_hook_active") is True,
        )

    def render(self, event: Event, text: str) -> str:
        return additional_context(event, text)

    def unknown(self, lines: Sequence[Line]) -> list[Unknown]:
        from osk.hooks.transcript import Unknown

        found = []
        for line in lines:
            entry = line.obj
            kind = entry.get("type")
            message = entry.get("message")
            if kind not in _MESSAGE_ENTRIES:
                if (kind not in _COPIES and isinstance(message, Mapping)
                        and message.get("role") in _MESSAGE_ENTRIES):
                    found.append(Unknown(line.offset, f"{kind} (with a message)"))
                continue
            content = message.get("content") if isinstance(message, Mapping) else None
            if not isinstance(content, str | list):
                found.append(Unknown(line.offset, f"{kind} (message content not read)"))
                continue
            for block in content if isinstance(content, list) else ():
                block_type = block.get("type") if isinstance(block, Mapping) else None
                if block_type not in _KNOWN_BLOCKS:
                    found.append(Unknown(line.offset, f"{kind}/{block_type}"))
                    break
        return found

    def version(self, lines: Sequence[Line], path: Path) -> str:
        """Every entry names the ``version`` of Claude Code that wrote it."""
        for line in reversed(lines):
            version = line.obj.get("version")
            if isinstance(version, str) and version:
                return version
        return ""

    def parse(self, lines: Sequence[Line]) -> list[TurnRecord]:
        rounds: list[TurnRecord] = []
        current: RoundBuilder | None = None
        seen: set[str] = set()
        for line in lines:
            entry = line.obj
            uuid = entry.get("uuid")
            if isinstance(uuid, str):
                if uuid in seen:  # a resumed session may repeat entries
                    continue
                seen.add(uuid)
            if entry.get("isSidechain") is True:
                continue  # a sub-agent's own conversation
            kind = entry.get("type")
            if kind == "user":
                started = self._user(entry, line, current)
                if started is not None:
                    if current is not None:
                        current.closed = True
                        rounds.append(current.build())
                    current = started
            elif kind == "assistant" and current is not None:
                _assistant(entry, current)
        if current is not None:
            rounds.append(current.build())
        return [r for r in rounds if not (r.optional and r.closed and not (r.texts or r.tools))]

    def _user(self, entry: Mapping[str, object], line: Line,
              current: RoundBuilder | None) -> RoundBuilder | None:
        """A new round when ``entry`` is the person's input; otherwise note it on ``current``."""
        if entry.get("isMeta") is True or entry.get("isCompactSummary") is True:
            return None
        if entry.get("isVisibleInTranscriptOnly") is True:
            return None
        message = entry.get("message")
        content = message.get("content") if isinstance(message, Mapping) else None
        text, has_tool_result, images = _user_content(content)
        if has_tool_result:
            return None
        text = _REMINDER.sub("", text).strip()
        if text.startswith(_INTERRUPT):
            if current is not None:
                current.interrupted = True
                current.closed = True
            return None
        if any(text.startswith(tag) for tag in _LOCAL_OUTPUT):
            return None
        optional = False
        if "<command-name>" in text:
            name = _COMMAND_NAME.search(text)
            args = _COMMAND_ARGS.search(text)
            text = " ".join(p.group(1).strip() for p in (name, args) if p and p.group(1).strip())
            optional = True
        if images:
            text = (text + "\n" if text else "") + f"[{images} image(s) attached]"
        if not text:
            return None
        uuid = entry.get("uuid")
        return RoundBuilder(
            start=line.offset, user=text,
            completion=uuid if isinstance(uuid, str) and uuid else f"line-{line.offset}",
            turn_id=text_field(entry, "promptId"), at=minute_time(entry.get("timestamp")),
            optional=optional,
        )


def _user_content(content: object) -> tuple[str, bool, int]:
    """(text, has tool results, image count) of a user message's content."""
    if isinstance(content, str):
        return content, False, 0
    if not isinstance(content, list):
        return "", False, 0
    texts: list[str] = []
    tool_result = False
    images = 0
    for block in content:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(str(block["text"]))
        elif kind == "tool_result":
            tool_result = True
        elif kind in ("image", "document"):
            images += 1
    return "\n\n".join(texts), tool_result, images


def _assistant(entry: Mapping[str, object], current: RoundBuilder) -> None:
    message = entry.get("message")
    if not isinstance(message, Mapping):
        return
    key = text_field(message, "id") or text_field(entry, "requestId", "uuid")
    content = message.get("content")
    if isinstance(content, str):
        current.add_text(key, content)
        return
    if not isinstance(content, list):
        return
    for block in content:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            current.add_text(key, str(block["text"]))
        elif kind in ("tool_use", "server_tool_use"):
            current.tools.append(_tool_summary(block))


def _tool_summary(block: Mapping[str, object]) -> str:
    name = str(block.get("name") or "tool")
    data = block.get("input")
    data = data if isinstance(data, Mapping) else {}
    field = _TOOL_FIELDS.get(name)
    if field == "":
        return name
    if field and isinstance(data.get(field), str):
        return one_line(f"{name}: {data[field]}")
    if not data:
        return name
    return one_line(f"{name}: {json.dumps(data, ensure_ascii=False, sort_keys=True)}")


ADAPTER = ClaudeAdapter()
