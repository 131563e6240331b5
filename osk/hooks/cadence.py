"""The prompt-submit hook: a durable per-conversation count of the person's inputs, and the review
reminder at input turns 9 and 15 (then 24 and 30, …).

Only real input counts: a prompt the host injected itself (Claude Code's ``system`` and wake-up
sources), one fired inside a sub-agent, or a second firing for a prompt id already counted is
not a turn. Hosts whose hooks name no conversation (Kiro) count per workspace; their session
start resets the count, since a new agent session is a new conversation.

When background growth reviews the session in a fork instead (``osk.hooks.growth.in_session_review``
says so), the in-session reminder is left out.
"""

from __future__ import annotations

from collections.abc import Callable

from osk.hooks.adapter_contract import Adapter, HookPayload
from osk.hooks.rules import is_review_turn, review_reminder
from osk.hooks.state import ConversationState, StateStore, conversation_name, workspace_name
from osk.store.fastclass import dataclass
from osk.store.vault import Vault


@dataclass(frozen=True)
class Counted:
    conversation: str
    inputs: int           # the count after this prompt (unchanged when it did not count)
    counted: bool
    reminder: str = ""    # the text to inject, or ""
    noted: bool = False   # ``also`` ran inside the state's lock


def conversation_of(adapter: Adapter, payload: HookPayload) -> str:
    if payload.session_id:
        return conversation_name(payload.session_id)
    return workspace_name(adapter.name, payload.cwd)


def count_prompt(vault: Vault, adapter: Adapter, payload: HookPayload, *,
                 dry_run: bool = False,
                 also: Callable[[ConversationState], None] | None = None) -> Counted:
    """Count the input. ``also`` changes the same state in the same locked write (per-prompt
    recall notes what it showed), so a prompt costs one state write, not two."""
    conversation = conversation_of(adapter, payload)
    if payload.subagent or payload.machine_input or adapter.capabilities.cadence != "hook":
        return Counted(conversation, 0, False)
    store = StateStore(vault, adapter.name, conversation)
    if dry_run:
        state = store.load()
        return Counted(conversation, state.inputs + 1, True)
    with store.locked() as state:
        if also is not None:
            also(state)
        if payload.turn_id and state.saw_turn(payload.turn_id):
            return Counted(conversation, state.inputs, False, noted=also is not None)
        state.inputs += 1
        inputs, record, rounds = state.inputs, state.record, state.rounds
        due = is_review_turn(inputs) and inputs not in state.reminded
        if due:
            state.reminded.append(inputs)
            del state.reminded[:-8]
    noted = also is not None
    if not due or not in_session_reviews(vault, adapter):
        return Counted(conversation, inputs, True, noted=noted)
    if not record and payload.session_id and adapter.capabilities.capture == "transcript":
        record = _expected_record(vault, payload)
    return Counted(conversation, inputs, True, review_reminder(inputs, record, rounds), noted)


def _expected_record(vault: Vault, payload: HookPayload) -> str:
    """Where this conversation's rounds will be recorded, before the first capture."""
    from osk.errors import OskError
    from osk.hooks.state import expected_record
    from osk.hooks.stop import session_key_text

    try:
        return expected_record(session_key_text(vault, payload), payload)
    except (OskError, ValueError):  # no working directory: the reminder stays generic
        return ""


def reset_workspace_count(vault: Vault, adapter: Adapter, payload: HookPayload) -> None:
    """A new agent session on a host without conversation ids starts the count again."""
    if payload.session_id or adapter.capabilities.cadence != "hook":
        return
    store = StateStore(vault, adapter.name, workspace_name(adapter.name, payload.cwd))
    with store.locked() as state:
        state.inputs = 0
        state.seen_turns.clear()
        state.reminded.clear()
        state.recalled.clear()  # a new agent session has seen nothing of the vault yet


def in_session_reviews(vault: Vault, adapter: Adapter) -> bool:
    """False when background growth reviews this host's sessions in a fork instead."""
    from osk.hooks import growth

    return bool(growth.in_session_review(vault, adapter.name))
