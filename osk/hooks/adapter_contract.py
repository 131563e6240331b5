"""The harness contract: what every host adapter tells the hooks, as frozen dataclasses.

A host (Claude Code, Codex CLI, Kiro, Antigravity, or a fifth one) is one adapter module under
``osk/hooks/adapters/`` exposing ``ADAPTER``, an object that satisfies ``Adapter``. The hook
modules (capture, cadence, injection) only ever talk to that contract:

- ``payload(event, data, env)`` turns the host's stdin JSON into a normalised ``HookPayload``;
- ``parse(lines)`` turns complete transcript lines (read from a byte offset) into ``TurnRecord``
  rounds: what the person asked, every text the agent answered, the tool calls summarised, and
  the host's id for the turn (the completion id that makes a capture idempotent);
- ``render(event, text)`` is exactly what the hook prints on stdout for that host and event;
- ``budget`` says how much injected text the host takes before it truncates or spills it, and
  ``capabilities`` says what the host's hooks can do at all (docs/hosts.md has one row per host).

This module is on the hook path: standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from osk.store.fastclass import dataclass

if TYPE_CHECKING:  # what Stop reads (osk.hooks.transcript): the other hooks never load it
    from osk.hooks.transcript import Line, TurnRecord, Unknown

Event = Literal["session-start", "prompt-submit", "stop"]
EVENTS: tuple[Event, ...] = ("session-start", "prompt-submit", "stop")
# Seconds a hook waits for another process indexing the raw rounds (recall's query, the Stop
# hook's update): it then ranks what is indexed, or leaves the new rounds to the next one.
REFRESH_WAIT = 0.2
# Seconds of indexing a hook spends at most catching the round index up (a first index of a
# large vault, a new schema, many rounds landed by sync: a minute or more at 100,000 rounds),
# each part committed: the host stops a hook at its timeout (10 s for a prompt), which would
# undo an indexing done whole, every time.
REFRESH_BUDGET = 1.0


@dataclass(frozen=True)
class Budget:
    """What the host accepts from one hook.

    ``max_chars``/``max_bytes`` bound the injected text (the tighter one wins); ``timeouts`` are
    the seconds ``osk setup`` registers per event, well inside the host's own limits.
    """

    max_chars: int
    max_bytes: int
    timeouts: Mapping[str, int] = field(default_factory=dict)

    def fits(self, text: str) -> bool:
        return len(text) <= self.max_chars and len(text.encode("utf-8")) <= self.max_bytes


@dataclass(frozen=True)
class Capabilities:
    """What a host's hooks allow; ``osk doctor`` and docs/hosts.md report these."""

    capture: Literal["transcript", "agent"]  # transcript: the Stop hook reads it; agent: append_raw
    cadence: Literal["hook", "rules"]        # hook: prompt-submit counts; rules: the rules file
    inject: Literal["hook", "rules"]         # hook: session-start output; rules: the agent reads
    conversation_ids: bool                   # the payload names the conversation


@dataclass(frozen=True)
class HookPayload:
    """One hook invocation, normalised. Fields a host does not send are empty."""

    host: str
    event: Event
    session_id: str = ""                  # the host's conversation id
    cwd: Path | None = None               # the project the session works in
    transcript_path: Path | None = None   # the host's transcript (None when it gives none)
    prompt: str | None = None             # prompt-submit: the text as typed
    machine_input: bool = False           # prompt-submit: injected by the host, not typed
    turn_id: str = ""                     # the turn in progress (Claude prompt_id, Codex turn_id)
    last_assistant_message: str | None = None  # stop: the final answer as the host saw it
    source: str = ""                      # session-start: startup / resume / clear / compact
    subagent: bool = False                # fired inside a sub-agent: not the person's turn
    stop_hook_active: bool = False        # stop: the turn continues because a Stop hook blocked


class Adapter(Protocol):
    """What one host module provides (``osk.hooks.adapters.<host>.ADAPTER``)."""

    name: str
    budget: Budget
    capabilities: Capabilities

    def payload(self, event: Event, data: Mapping[str, object],
                env: Mapping[str, str]) -> HookPayload: ...

    def parse(self, lines: Sequence[Line]) -> list[TurnRecord]: ...

    def unknown(self, lines: Sequence[Line]) -> list[Unknown]:
        """The lines whose kind the adapter has never seen, in order (capture stops before the
        first one until an adapter that knows them reads it)."""

    def version(self, lines: Sequence[Line], path: Path) -> str:
        """The host version that wrote the transcript, for the hook log ("" when unknown)."""

    def render(self, event: Event, text: str) -> str: ...


# -- small helpers shared by the adapters -------------------------------------------------------

def text_field(data: Mapping[str, object], *keys: str) -> str:
    """The first of ``keys`` whose value is a non-empty string, else ""."""
    for key in keys:
        value = data.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def optional_text(data: Mapping[str, object], key: str) -> str | None:
    value = data.get(key)
    return value if isinstance(value, str) else None


def path_field(data: Mapping[str, object], *keys: str) -> Path | None:
    text = text_field(data, *keys)
    return Path(text).expanduser() if text else None


def one_line(text: str, limit: int = 160) -> str:
    """Collapse whitespace and cut to ``limit`` characters (tool summaries, log lines)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
