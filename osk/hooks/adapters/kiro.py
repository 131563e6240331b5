"""Kiro (CLI agent hooks and IDE agent hooks): what their hooks allow.

Kiro's hooks name no conversation and give no transcript. The CLI sends
``{"hook_event_name": "agentSpawn" | "userPromptSubmit" | "stop" | …, "cwd": …}`` on stdin (plus
``prompt`` for ``userPromptSubmit``); the IDE's shell-command action gets the prompt in the
``USER_PROMPT`` environment variable. On exit 0 the command's stdout is added to the agent's
context for agent spawn and prompt submit. So:

- session start (``agentSpawn``): the scope memory and notes are printed as plain text;
- prompt submit: input turns are counted per workspace (reset at each agent spawn, which starts
  a new conversation) and the review reminder is printed as plain text at turns 9 and 15;
- stop: nothing can be captured from the hook. The agent records each round itself by calling
  the ``append_raw`` tool, as the steering file ``osk setup kiro`` installs tells it to
  (text: ``osk.hooks.rules.rules_text("kiro")``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from osk.hooks.adapter_contract import (
    Budget,
    Capabilities,
    Event,
    HookPayload,
    optional_text,
    path_field,
    text_field,
)

if TYPE_CHECKING:  # Stop's types: the other hooks do not load osk.hooks.transcript
    from osk.hooks.transcript import Line, TurnRecord, Unknown


class KiroAdapter:
    name = "kiro"
    # No documented limit; hook stdout goes into the context verbatim, so keep it modest.
    budget = Budget(max_chars=6000, max_bytes=12000,
                    timeouts={"session-start": 15, "prompt-submit": 10, "stop": 10})
    capabilities = Capabilities(capture="agent", cadence="hook", inject="hook",
                                conversation_ids=False)

    def payload(self, event: Event, data: Mapping[str, object],
                env: Mapping[str, str]) -> HookPayload:
        prompt = optional_text(data, "prompt")
        if prompt is None:
            prompt = env.get("USER_PROMPT")
        return HookPayload(
            host=self.name, event=event,
            session_id=text_field(data, "session_id", "conversation_id"),
            cwd=path_field(data, "cwd") or Path(os.getcwd()),
            prompt=prompt,
        )

    def parse(self, lines: Sequence[Line]) -> list[TurnRecord]:
        return []  # Kiro keeps no transcript a hook can read

    def unknown(self, lines: Sequence[Line]) -> list[Unknown]:
        return []

    def version(self, lines: Sequence[Line], path: Path) -> str:
        return ""

    def render(self, event: Event, text: str) -> str:
        return "" if event == "stop" or not text else text + "\n"


ADAPTER = KiroAdapter()
