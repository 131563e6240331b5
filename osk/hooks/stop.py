"""The Stop hook's capture: new transcript rounds into the conversation's raw record.

Per conversation, device state keeps the byte offset of the first round not yet captured. A Stop
reads the transcript from there (complete lines only), lets the host's adapter group the lines
into rounds and appends, in order, every round the transcript shows as finished plus the turn
that just stopped. Then the offset moves past what was captured, so the next Stop reads only
new lines and the cost never grows with the transcript or the raw record.

- Flush race: a host may start the Stop hook before it has written the turn's last message. The
  payload's ``last_assistant_message`` completes that turn's answer (``merge_final``). Lines the
  host writes late for an already-captured turn precede the next input and are passed over.
- Exactly once: each round carries the host's completion id. Ids captured lately are kept in the
  state and ``raw.append_round`` refuses a completion it already holds, so a double fire, a crash
  between the append and the state write, or a lost state file never duplicates a round.
- A turn that the transcript does not show yet (its input line is not flushed) is not guessed
  at: it is captured by the next Stop, as a finished round.
"""

from __future__ import annotations

from dataclasses import field, replace
from pathlib import Path

from osk.hooks.adapter_contract import Adapter, HookPayload
from osk.hooks.adapters.common import merge_final
from osk.hooks.state import ConversationState, StateStore, record_conversation
from osk.hooks.transcript import Chunk, TurnRecord, Unknown, read_lines
from osk.store.edges import raw_record
from osk.store.fastclass import dataclass
from osk.store.vault import Vault


@dataclass(frozen=True)
class Captured:
    conversation: str = ""
    key: str = ""
    written: tuple[int, ...] = ()       # round numbers appended by this hook
    final_answer: bool = False          # a finished turn was recorded now (growth counts it)
    warnings: tuple[str, ...] = field(default=())
    skipped: str = ""                   # why nothing was attempted, when nothing was


def capture_stop(vault: Vault, adapter: Adapter, payload: HookPayload, *,
                 dry_run: bool = False) -> Captured:
    if adapter.capabilities.capture != "transcript":
        return Captured(skipped=f"{adapter.name} hooks give no transcript; the agent records "
                                f"rounds with append_raw")
    if payload.subagent:
        return Captured(skipped="fired inside a sub-agent")
    path = payload.transcript_path
    if path is None:
        return Captured(skipped="the payload names no transcript")
    conversation = record_conversation(payload.session_id, path)
    store = StateStore(vault, adapter.name, conversation)
    if dry_run:
        state = store.load()
        return _capture(vault, adapter, payload, state, conversation, dry_run=True)
    with store.locked() as state:
        result = _capture(vault, adapter, payload, state, conversation, dry_run=False)
    if store.warning:
        result = Captured(result.conversation, result.key, result.written, result.final_answer,
                          (*result.warnings, store.warning))
    return result


def _capture(vault: Vault, adapter: Adapter, payload: HookPayload, state: ConversationState,
             conversation: str, *, dry_run: bool) -> Captured:
    from osk.capture.raw import RoundInput, append_round

    path = payload.transcript_path
    assert path is not None
    if state.transcript != str(path):
        state.transcript, state.offset = str(path), 0
    chunk = read_lines(path, state.offset)
    drift = adapter.unknown(chunk.lines)
    warnings = list(chunk.warnings)
    if drift:
        # Read only up to the first line this adapter does not know; the cursor stays there,
        # so an osk that knows the line captures it (never skipped, never guessed at).
        warnings.append(drift_warning(adapter, chunk, drift, path))
        chunk = replace(chunk, lines=tuple(li for li in chunk.lines if li.offset < drift[0].offset),
                        end=drift[0].offset, at_eof=False)
    rounds = adapter.parse(chunk.lines)
    current = _current_turn(rounds, chunk, payload)
    if not state.key:
        state.key = session_key_text(vault, payload, claim=not dry_run)
    written: list[int] = []
    next_offset = chunk.end
    for turn in rounds:
        if turn is not current and not _finished(turn, chunk, held=bool(drift)):
            next_offset = turn.start  # still being written: read it again next time
            break
        if turn.completion in state.recent:
            continue
        texts = list(turn.texts)
        if turn is current and payload.last_assistant_message:
            texts = merge_final(texts, payload.last_assistant_message)
        if turn.optional and not (texts or turn.tools):
            continue
        if dry_run:
            continue
        ref = append_round(vault, state.key, conversation, RoundInput(
            user=turn.user, assistant=answer_text(texts, turn), tools=turn.tools,
            completion=turn.completion, host=adapter.name, at=turn.at,
        ))
        state.remember(turn.completion)
        state.rounds = max(state.rounds, ref.number)
        state.record = raw_record(ref.key, ref.conversation)
        if not ref.duplicate:
            written.append(ref.number)
            state.answers += 1
    if not dry_run:
        note_progress(state, grew=chunk.end > chunk.start or bool(drift), recorded=bool(written),
                      drift=warnings[-1] if drift else "")
        state.offset = next_offset
    # One call to growth per Stop that recorded something new: usually the turn that stopped,
    # or a turn the transcript showed late (its own Stop could not see it).
    return Captured(conversation, state.key, tuple(written), bool(written), tuple(warnings))


def drift_warning(adapter: Adapter, chunk: Chunk, drift: list[Unknown], path: Path) -> str:
    kinds = sorted({u.kind for u in drift})
    version = adapter.version(chunk.lines, path) or "version unknown"
    return (f"format drift: {adapter.name} {version} wrote {len(drift)} transcript line(s) "
            f"of kinds osk does not read ({', '.join(kinds[:8])}) from byte {drift[0].offset} "
            f"of {path}; capture waits before them and loses nothing: upgrade osk, and the "
            f"next turn captures them")


def note_progress(state: ConversationState, *, grew: bool, recorded: bool, drift: str) -> None:
    """Count the Stops in a row that saw the transcript grow and recorded nothing (doctor
    reports a conversation where that keeps happening)."""
    if recorded:
        state.empty_stops, state.drift = 0, ""
    elif grew:
        state.empty_stops += 1
    if drift:
        state.drift = drift


def _current_turn(rounds: list[TurnRecord], chunk: Chunk,
                  payload: HookPayload) -> TurnRecord | None:
    """The round of the turn that just stopped, when the transcript already shows it."""
    if payload.event != "stop" or not rounds or not chunk.at_eof:
        return None
    last = rounds[-1]
    if payload.turn_id and last.turn_id and payload.turn_id != last.turn_id:
        return None  # the stopped turn's input is not in the transcript yet
    return last


def _finished(turn: TurnRecord, chunk: Chunk, *, held: bool = False) -> bool:
    # A round that alone fills a capped read can never be followed within one read: take it.
    # A read held before drift is not capped: the rest of that round is still to be read.
    return turn.closed or (not held and not chunk.at_eof and turn.start == chunk.start)


def answer_text(texts: list[str], turn: TurnRecord) -> str:
    """The answer as recorded: every text of the turn, in order, with a note when cut short."""
    answer = "\n\n".join(t.strip("\n") for t in texts if t.strip())
    if turn.interrupted:
        return (answer + "\n\n" if answer else "") + "[interrupted by the user]"
    if answer:
        return answer
    return "[no text answer; tool calls only]" if turn.tools else "[no answer recorded]"


def session_key_text(vault: Vault, payload: HookPayload, *, claim: bool = True) -> str:
    """The session key (raw record folder) of the payload's working directory.

    Resolving a key may claim its name in the routing ledger; ``claim=False`` (dry runs) gives
    the plain name without writing.
    """
    from osk.provenance import sessions

    if payload.cwd is None:
        raise ValueError("the hook payload names no working directory")
    return sessions.session_key(payload.cwd, vault if claim else None).key
