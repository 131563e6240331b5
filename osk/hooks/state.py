"""Per-conversation hook state in device state (``.osk/hooks/<host>/<conversation>.json``).

One small JSON file per conversation holds the transcript offset, the completion ids of the last
rounds captured, the input-turn cursor and the scope-memory hashes already injected. It is device
state: never synced, rebuilt from nothing if lost (a lost offset means one re-read of the
transcript, and the raw record's completion ids keep that re-read from duplicating rounds).

Writes are atomic (temp file, fsync, rename), so a crash leaves the old or the new state, and a
per-conversation lock serialises hooks that fire at the same time.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, field, fields
from pathlib import Path
from typing import TYPE_CHECKING

from osk.store.fastclass import dataclass
from osk.store.fsutil import atomic_write, sha256_text
from osk.store.locks import file_lock
from osk.store.vault import Vault

if TYPE_CHECKING:
    from osk.hooks.adapter_contract import HookPayload

RECENT = 64          # completion ids remembered per conversation (double fires, re-reads)
SEEN_TURNS = 32      # prompt ids remembered per conversation (double-fired prompt-submit)
LOCK_TIMEOUT = 10.0  # seconds; a hook never waits longer for another hook of its conversation

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass
class ConversationState:
    transcript: str = ""                 # the transcript the offset belongs to
    offset: int = 0                      # first byte not yet captured
    key: str = ""                        # the session key (raw record folder)
    record: str = ""                     # "_raw/KEY/CONVERSATION" as the raw record names it
    recent: list[str] = field(default_factory=list)   # completion ids captured lately
    rounds: int = 0                      # the last round number written to the raw record
    answers: int = 0                     # final answers captured in this conversation
    inputs: int = 0                      # real user inputs counted by prompt-submit
    seen_turns: list[str] = field(default_factory=list)
    reminded: list[int] = field(default_factory=list)  # input turns that got a review reminder
    injected: dict[str, str] = field(default_factory=dict)  # scope -> memory hash injected
    recalled: dict[str, str] = field(default_factory=dict)  # node id -> content hash recalled
    scope: list[object] = field(default_factory=list)  # [scope, cwd, routing stat] (recall)
    empty_stops: int = 0                 # Stops in a row: the transcript grew, nothing recorded
    drift: str = ""                      # the last format-drift warning, until a round records

    @classmethod
    def from_json(cls, text: str) -> ConversationState:
        """Parse saved state; a field of the wrong type is damage (ValueError), not a value."""
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("hook state is not a JSON object")
        fresh = cls()
        values = {}
        for spec in fields(cls):
            if spec.name not in data:
                continue
            value, expected = data[spec.name], type(getattr(fresh, spec.name))
            if type(value) is not expected:  # bool is not int here, on purpose
                raise ValueError(f"{spec.name} should be {expected.__name__}, "
                                 f"not {type(value).__name__}")
            values[spec.name] = value
        return cls(**values)

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, sort_keys=True) + "\n"

    def remember(self, completion: str) -> None:
        self.recent.append(completion)
        del self.recent[:-RECENT]

    def saw_turn(self, turn_id: str) -> bool:
        """Record ``turn_id``; True when it was already counted."""
        if turn_id in self.seen_turns:
            return True
        self.seen_turns.append(turn_id)
        del self.seen_turns[:-SEEN_TURNS]
        return False


def conversation_name(session_id: str) -> str:
    """A conversation id as a portable file name: host ids (UUIDs) as they are, anything else
    cleaned and suffixed with a hash of the original, so two ids never share a name. An id
    that holds what the secret filter takes for a secret is named by its hash alone: it would
    be the raw record's file name and every coordinate of it, and a hook never refuses a turn."""
    if not _UUID.fullmatch(session_id) and _holds_secret(session_id):
        return f"conversation-{sha256_text(session_id)[:16]}"
    cleaned = _UNSAFE.sub("-", session_id).strip(".-")[:100]
    if cleaned == session_id:
        return cleaned
    digest = sha256_text(session_id)
    return f"{cleaned}-{digest[:8]}" if cleaned else f"conversation-{digest[:16]}"


_UUID = re.compile(r"[0-9A-Fa-f]{8}-(?:[0-9A-Fa-f]{4}-){3}[0-9A-Fa-f]{12}")


def _holds_secret(text: str) -> bool:
    # Imported only for an id that is not a UUID (what Claude Code and Codex send): the
    # filter costs a hook about 30 ms to import.
    from osk.capture.secrets import mask_secrets

    return mask_secrets(text).changed


def record_conversation(session_id: str, transcript: Path | None) -> str:
    """The conversation name the Stop hook captures rounds under: the host's conversation id,
    else the transcript's file name ("" when the payload names neither)."""
    name = session_id or (transcript.stem if transcript else "")
    return conversation_name(name) if name else ""


def workspace_name(host: str, cwd: Path | None) -> str:
    """A stand-in conversation name for hosts whose hooks name no conversation (per workspace)."""
    where = str(cwd.resolve()) if cwd else ""
    return f"{host}-workspace-" + sha256_text(where)[:12]


class StateStore:
    def __init__(self, vault: Vault, host: str, conversation: str) -> None:
        self.vault = vault
        self.path = vault.state("hooks", host, f"{conversation}.json")
        self.lock_path = vault.lock_path(f"hook-{host}-{conversation}")
        self.warning = ""

    def load(self) -> ConversationState:
        try:
            return ConversationState.from_json(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return ConversationState()
        except (ValueError, TypeError) as exc:  # damaged: start over (see the module docstring)
            self.warning = f"hook state {self.path} was unreadable ({exc}); started it afresh"
            return ConversationState()

    def save(self, state: ConversationState) -> None:
        atomic_write(self.path, state.to_json())

    @contextmanager
    def locked(self) -> Iterator[ConversationState]:
        """Load under the conversation's lock and save when the block ends, even on an error.

        Callers change the state only after each step has succeeded, so what is saved after a
        failure is the progress made before it.
        """
        with file_lock(self.lock_path, timeout=LOCK_TIMEOUT):
            state = self.load()
            try:
                yield state
            finally:
                self.save(state)


def expected_record(key: str, payload: HookPayload) -> str:
    """``_raw/KEY/CONVERSATION``: where capture files this conversation's rounds, before the
    first is captured ("" when the payload names no conversation)."""
    from osk.store.edges import raw_record, record_name  # not osk.capture.raw: 10 ms

    conversation = record_conversation(payload.session_id, payload.transcript_path)
    return raw_record(record_name(key), record_name(conversation)) if conversation else ""
