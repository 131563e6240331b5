"""Google Antigravity: MCP tools and a rules file; its hooks are not relied on.

Public reports disagree about Antigravity's hooks: which file is read (``.agents/hooks.json``,
``~/.gemini/config/hooks.json``), which events actually run (several found only PreToolUse and
PostToolUse executing) and what a lifecycle hook may print. Their payloads are camelCase
(``conversationId``, ``workspacePaths``, ``transcriptPath``), and the transcript format is not
documented. So this adapter accepts those payloads, does nothing with them and prints nothing:

- capture: the agent calls ``append_raw`` at the end of each turn;
- cadence: the rules file asks for a review every nine user messages;
- injection: the rules file asks the agent to call ``overview`` when a conversation starts.

``osk setup antigravity`` writes that rules file (text: ``osk.hooks.rules.rules_text``). Should
Antigravity publish stable lifecycle hooks, this module is where they go.
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
    path_field,
    text_field,
)

if TYPE_CHECKING:  # Stop's types: the other hooks do not load osk.hooks.transcript
    from osk.hooks.transcript import Line, TurnRecord, Unknown


class AntigravityAdapter:
    name = "antigravity"
    budget = Budget(max_chars=0, max_bytes=0, timeouts={})
    capabilities = Capabilities(capture="agent", cadence="rules", inject="rules",
                                conversation_ids=True)

    def payload(self, event: Event, data: Mapping[str, object],
                env: Mapping[str, str]) -> HookPayload:
        workspaces = data.get("workspacePaths")
        first = workspaces[0] if isinstance(workspaces, list) and workspaces else None
        cwd = Path(first) if isinstance(first, str) and first else path_field(data, "cwd")
        return HookPayload(
            host=self.name, event=event,
            session_id=text_field(data, "conversationId", "session_id"),
            cwd=cwd or Path(os.getcwd()),
            transcript_path=None,  # its format is undocumented; never parsed
        )

    def parse(self, lines: Sequence[Line]) -> list[TurnRecord]:
        return []

    def unknown(self, lines: Sequence[Line]) -> list[Unknown]:
        return []

    def version(self, lines: Sequence[Line], path: Path) -> str:
        return ""

    def render(self, event: Event, text: str) -> str:
        return ""


ADAPTER = AntigravityAdapter()
