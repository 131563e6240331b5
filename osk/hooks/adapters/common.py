"""Pieces several adapters share: the JSON hook output, timestamps, round assembly."""

from __future__ import annotations

import json
from dataclasses import field
from typing import TYPE_CHECKING

from osk.store.fastclass import dataclass

if TYPE_CHECKING:
    from osk.hooks.adapter_contract import Event
    from osk.hooks.transcript import TurnRecord

HOOK_EVENT_NAMES = {"session-start": "SessionStart", "prompt-submit": "UserPromptSubmit",
                    "stop": "Stop"}


def additional_context(event: Event, text: str) -> str:
    """The JSON output Claude Code and Codex both read for SessionStart and UserPromptSubmit.

    Only ``hookSpecificOutput.hookEventName`` and ``additionalContext`` are emitted: Codex
    validates hook output against closed schemas, so a Claude-only key would void the output.
    """
    if event == "stop" or not text:
        return ""
    return json.dumps({"hookSpecificOutput": {"hookEventName": HOOK_EVENT_NAMES[event],
                                              "additionalContext": text}},
                      ensure_ascii=False)


def minute_time(value: object) -> str | None:
    """A host's ISO 8601 timestamp as the vault writes time (minute precision, local offset)."""
    if not isinstance(value, str) or not value:
        return None
    from osk.store import clock  # only the Stop hook parses times; the other hooks skip datetime

    try:
        return clock.format_minute(clock.parse(value).astimezone())
    except ValueError:
        return None


@dataclass
class RoundBuilder:
    """A round being assembled while a parser walks the transcript."""

    start: int
    user: str
    completion: str
    turn_id: str = ""
    at: str | None = None
    optional: bool = False
    texts: list[str] = field(default_factory=list)
    text_keys: list[str] = field(default_factory=list)  # message id per text (streamed lines)
    tools: list[str] = field(default_factory=list)
    closed: bool = False
    interrupted: bool = False
    final: str | None = None  # the host's own record of the final answer, when it keeps one

    def add_text(self, key: str, text: str) -> None:
        """Add ``text`` of message ``key``; lines of one streamed message join into one text."""
        if not text.strip():
            return
        if self.text_keys and self.text_keys[-1] == key:
            self.texts[-1] = self.texts[-1] + "\n\n" + text
        else:
            self.texts.append(text)
            self.text_keys.append(key)

    def build(self) -> TurnRecord:
        from osk.hooks.transcript import TurnRecord  # Stop only

        texts = list(self.texts)
        if self.final and self.final.strip():
            texts = merge_final(texts, self.final)
        return TurnRecord(
            start=self.start, user=self.user, texts=tuple(texts), tools=tuple(self.tools),
            completion=self.completion, turn_id=self.turn_id, closed=self.closed,
            interrupted=self.interrupted, at=self.at, optional=self.optional,
        )


def norm(text: str) -> str:
    return " ".join(text.split())


def merge_final(texts: list[str], final: str) -> list[str]:
    """``texts`` completed with the final answer the host reports (the flush race).

    The host may run the Stop hook before the last message reaches the transcript, or while it
    is only partly written. The reported final answer replaces a partial last text, is dropped
    when the transcript already has it, and is appended otherwise.
    """
    wanted = norm(final)
    if not wanted:
        return texts
    if texts and norm(texts[-1]) == wanted:
        return texts
    if texts and norm(texts[-1]) and wanted.startswith(norm(texts[-1])):
        return [*texts[:-1], final]
    return [*texts, final]
