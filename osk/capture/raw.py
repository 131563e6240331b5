"""Raw conversation records (governance/raw.md): numbered, hashed, append-only rounds.

One Markdown file per conversation, ``_raw/KEY/CONVERSATION.md``, readable in Obsidian. Each
round is a ``## Round N`` heading (so ``[[_raw/KEY/CONV#Round N]]`` resolves), an HTML comment
header that carries the round's byte length and sha256, the round's text, and an end comment.
The length makes the framing exact: a round's text may contain lines that look like our
headings or comments without confusing the parser. docs/FORMAT.md ("Raw records") has the
byte-level grammar.

Rules kept here:

- raw-append-only: an append is accepted only when the file's bytes are exactly the bytes this
  device last acknowledged (or, with no device state, a well-formed record whose every round
  matches its recorded hash); otherwise it is refused with the round and byte offset, and
  nothing is written.
- stable coordinates: a round's hash covers its text without trailing newlines, and a round's
  bytes never change after it is written, so ``_raw/KEY/CONV#Round N`` always names the same
  text.
- the secret filter runs inside ``append_round``; the header records the kinds and counts of
  what was removed, never the secret.
- a crash never damages an acknowledged round: bytes after the last complete round that form
  the beginning of the next round are an interrupted append (never acknowledged), and the next
  append removes them before writing.

Capture cost does not grow with the record: device state (``.osk/raw/KEY/CONV.json``) holds
the file's stat identity as of the last acknowledged append, the round count, a hash chain over
the acknowledged bytes, and the latest completion ids; every completion id is in a hash file of
fixed-size slots beside it (``osk.capture.raw_ids``), so neither file is rewritten whole as the
conversation grows. While the file's identity is unchanged an append reads only the state and
a few slots of the index; when it differs, the whole record is verified once.

Standard library only (locks through osk.store.locks): this module is on the hook path.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import field
from pathlib import Path

from osk.capture import raw_ids
from osk.capture.raw_text import (
    Round,
    Scan,
    content_hash,
    frames_from,
    front_matter,
    record_damage,
    round_content,
    round_head,
    round_of,
    round_trailer,
    scan_record,
)
from osk.capture.secrets import check_name, mask_secrets
from osk.errors import RawNotFound, RawRecordError
from osk.store import clock, generation
from osk.store.edges import RAW_PREFIX, RawTarget, record_name
from osk.store.fastclass import dataclass
from osk.store.fsutil import fsync_dir, name_path, replace_unsynced
from osk.store.ids import check_identifier
from osk.store.locks import file_lock
from osk.store.vault import RAW_DIR, Vault

RECENT_COMPLETIONS = 16  # completion ids the JSON state keeps (all are in the index)
_WRITE_CHUNK = 1 << 20  # bytes per write(2): large rounds are written in pieces
_O_BINARY = getattr(os, "O_BINARY", 0)  # Windows: no newline translation


# -- public data --------------------------------------------------------------------------

@dataclass(frozen=True)
class RoundInput:
    """One finished turn: what the user said, what the assistant answered, the tools it ran.

    ``completion`` is the host's id of the finished turn; a second append with the same id is a
    no-op, which makes captures safe to retry.
    """

    user: str
    assistant: str
    tools: tuple[str, ...] = ()
    completion: str = ""
    host: str = ""
    at: str | None = None


@dataclass(frozen=True)
class RoundRef:
    """What ``append_round`` acknowledged (or found already captured, ``duplicate=True``)."""

    key: str
    conversation: str
    number: int
    hash: str
    duplicate: bool = False
    redacted: tuple[tuple[str, int], ...] = ()

    @property
    def target(self) -> RawTarget:
        return RawTarget(self.key, self.conversation, self.number)

    @property
    def coordinate(self) -> str:
        return self.target.coordinate

    @property
    def link(self) -> str:
        return self.target.link

    @property
    def path(self) -> str:
        return self.target.record_path


@dataclass(frozen=True)
class RawRecord:
    key: str
    conversation: str
    path: Path
    rel: str
    host: str
    host_conversation: str
    created: str
    rounds: tuple[Round, ...]
    torn_tail: int = 0        # bytes of an interrupted append after the last round (ignored)

    @property
    def damaged(self) -> tuple[int, ...]:
        """Rounds whose text no longer matches the hash recorded at capture."""
        return tuple(r.number for r in self.rounds if not r.intact)

    def round(self, number: int) -> Round:
        if 1 <= number <= len(self.rounds):
            return self.rounds[number - 1]
        raise RawNotFound(
            f"{self.rel} has no round {number}; it has {count_text(len(self.rounds))}",
            path=self.rel, round=number,
        )


@dataclass(frozen=True)
class RecordId:
    key: str
    conversation: str

    @property
    def path(self) -> str:
        return f"{RAW_PREFIX}{self.key}/{self.conversation}.md"


# -- names and paths ------------------------------------------------------------------------

def record_path(vault: Vault, key: str, conversation: str) -> Path:
    return vault.inside(vault.raw_dir / record_name(key) / f"{record_name(conversation)}.md")


def located_record(vault: Vault, key: str, conversation: str) -> tuple[str, str, Path, str]:
    """A record's portable key and conversation names, its path (inside the vault, or
    refused) and its vault-relative path."""
    key_name, conversation_name = record_name(key), record_name(conversation)
    return (key_name, conversation_name, record_path(vault, key_name, conversation_name),
            RecordId(key_name, conversation_name).path)


def record_key_of(text: str) -> RecordId:
    """The record named by a coordinate (``_raw/K/C#Round N``, as a link or bare) or a path."""
    inner = text[2:-2] if text.startswith("[[") and text.endswith("]]") else text
    inner = inner.strip().split("#", 1)[0]
    if inner.endswith(".md"):
        inner = inner[:-3]
    parts = inner.split("/")
    if len(parts) != 3 or parts[0] != RAW_DIR or not parts[1] or not parts[2]:
        raise RawRecordError(
            f"{text!r} names no raw record; expected _raw/KEY/CONVERSATION#Round N or "
            f"_raw/KEY/CONVERSATION.md", text=text,
        )
    return RecordId(parts[1], parts[2])


def lock_path(vault: Vault, rel: str) -> Path:
    """The lock ``append_round`` holds on the record ``rel`` names (its path or a coordinate).

    Anything else that rewrites a record file (a sync landing) holds it too, so an append never
    interleaves with that rewrite. Raises RawRecordError when ``rel`` names no record.
    """
    record = record_key_of(rel)
    return record_lock(vault, record_name(record.key), record_name(record.conversation))


def record_lock(vault: Vault, key_name: str, conversation_name: str) -> Path:
    return vault.lock_path(f"raw/{key_name}/{conversation_name}")


def list_records(vault: Vault) -> list[RecordId]:
    root = vault.raw_dir
    if not root.is_dir():
        return []
    return [RecordId(p.parent.name, p.stem) for p in sorted(root.glob("*/*.md"))]


def count_text(count: int) -> str:
    """A record's complete rounds, as refusals name them ("rounds 1-4")."""
    return "no complete rounds" if count == 0 else f"rounds 1-{count}"


# -- reading ------------------------------------------------------------------------------

_READ_CACHE: dict[Path, tuple[tuple[int, ...], RawRecord]] = {}
_READ_CACHE_SIZE = 16


def file_identity(stat: os.stat_result) -> tuple[int, ...]:
    return (stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino, stat.st_dev)


def read_record(vault: Vault, key: str, conversation: str, *, strict: bool = True) -> RawRecord:
    """Parse and verify a record. ``strict`` refuses a record with a round whose text changed.

    An interrupted append at the end (``torn_tail``) is ignored: it was never acknowledged.
    """
    key, conversation, path, rel = located_record(vault, key, conversation)
    try:
        stat = path.stat()
    except FileNotFoundError:
        raise RawNotFound(f"no raw record {rel}", path=rel) from None
    identity = file_identity(stat)
    cached = _READ_CACHE.get(path)
    if cached and cached[0] == identity:
        record = cached[1]
    else:
        scan = scan_record(path.read_bytes(), rel)
        record = _record_of(key, conversation, path, rel, scan)
        if len(_READ_CACHE) >= _READ_CACHE_SIZE:
            _READ_CACHE.pop(next(iter(_READ_CACHE)))
        _READ_CACHE[path] = (identity, record)
    if strict and record.damaged:
        first = record.round(record.damaged[0])
        raise record_damage(rel, f"round {first.number} (byte offset {first.offset}) no longer "
                            f"matches the hash recorded when it was captured", round=first.number,
                            offset=first.offset)
    return record


def _record_of(key: str, conversation: str, path: Path, rel: str, scan: Scan) -> RawRecord:
    front = scan.front
    return RawRecord(
        key=key, conversation=conversation, path=path, rel=rel,
        host=str(front.get("host", "")), host_conversation=str(front.get("host-conversation", "")),
        created=str(front.get("created", "")),
        rounds=tuple(round_of(key, conversation, f) for f in scan.frames),
        torn_tail=0 if scan.torn_start is None else scan.size - scan.torn_start,
    )


def read_round(vault: Vault, target: RawTarget, *, strict: bool = True) -> Round:
    """The round a coordinate names; ``strict`` refuses a round whose text changed."""
    record = read_record(vault, target.key, target.conversation, strict=False)
    found = record.round(target.round)
    if strict and not found.intact:
        raise record_damage(record.rel, f"round {found.number} (byte offset {found.offset}) "
                            f"no longer matches the hash recorded when it was captured",
                            round=found.number, offset=found.offset)
    return found


def round_hash(vault: Vault, target: RawTarget) -> str:
    """The hash of the round's text as it is now (a changed round reopens its citations)."""
    return read_round(vault, target, strict=False).hash


@dataclass(frozen=True)
class Mark:
    """Where a reader of a record may resume: round ``number`` starts at byte ``offset``, and
    the bytes before it digest to ``prefix`` (sha256)."""

    offset: int
    number: int
    prefix: str


@dataclass(frozen=True)
class Tail:
    """Rounds of a record read from a mark on (or all of them), and the mark to resume from
    next time: before its last ``keep`` rounds."""

    rounds: tuple[Round, ...]
    resume: Mark | None  # None: no complete round yet, read it whole next time


def read_tail(vault: Vault, key: str, conversation: str, *, since: Mark | None,
              keep: int = 2) -> Tail | None:
    """The complete rounds from ``since`` on, without parsing the rounds before it, when the
    bytes before it are unchanged: what a reader that keeps a record's earlier rounds needs
    after an append, at a cost that does not grow with the record. ``since=None`` reads every
    round (RawRecordError for a damaged record, as ``read_record``). None when the record was
    rewritten before ``since`` (a redaction re-frames its rounds) or is damaged after it:
    read it whole instead. One read of the file: the rounds and the new mark agree."""
    key, conversation, path, rel = located_record(vault, key, conversation)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise RawNotFound(f"no raw record {rel}", path=rel) from None
    prefix = hashlib.sha256()
    if since is None:
        frames = scan_record(data, rel).frames
    else:
        prefix.update(data[:since.offset])
        if len(data) < since.offset or prefix.hexdigest() != since.prefix:
            return None
        try:
            frames, _ = frames_from(data, since.offset, since.number, rel)
        except RawRecordError:
            return None
    rounds = tuple(round_of(key, conversation, f) for f in frames)
    if len(frames) > keep or (since is None and frames):
        first = frames[-keep] if len(frames) > keep else frames[0]
        prefix.update(data[since.offset if since else 0:first.start])
        resume: Mark | None = Mark(first.start, first.number, prefix.hexdigest())
    else:
        resume = since  # None: no complete round yet
    return Tail(rounds, resume)


# -- device state ---------------------------------------------------------------------------

@dataclass
class RecordState:
    identity: list[int]
    rounds: int
    chain: str
    # The latest completion ids only (id -> (n, hash)), so a repeated hook is answered from
    # this file; every id is in the record's completion index (osk.capture.raw_ids).
    completions: dict[str, tuple[int, str]] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps({"v": 2, "identity": self.identity, "rounds": self.rounds,
                           "chain": self.chain, "completions": self.completions},
                          ensure_ascii=False, separators=(",", ":"))


def record_state_path(vault: Vault, key: str, conversation: str) -> Path:
    return vault.state("raw", key, f"{conversation}.json")


def ids_path(vault: Vault, key: str, conversation: str) -> Path:
    return vault.state("raw", key, f"{conversation}.ids")


def _recent(completions: dict[str, tuple[int, str]], completion: str, number: int,
            digest: str) -> dict[str, tuple[int, str]]:
    """The state's window of latest completion ids, with this one added."""
    kept = dict(list(completions.items())[-(RECENT_COMPLETIONS - bool(completion)):])
    if completion:
        kept[completion] = (number, digest)
    return kept


def load_state(path: Path) -> RecordState | None:
    """The last acknowledged append; None when missing or unreadable (a full verify follows)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        completions = {str(k): (int(v[0]), str(v[1])) for k, v in data["completions"].items()}
        return RecordState(list(data["identity"]), int(data["rounds"]), str(data["chain"]),
                           completions)
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
        return None


def save_state(path: Path, state: RecordState) -> None:
    # Not fsynced: the state is a cache of facts the record itself holds. Losing it, or finding
    # it older than the record, costs one full verification on the next append.
    replace_unsynced(path, state.to_json())


def _chain(previous: str, frame_bytes: bytes) -> str:
    step = hashlib.sha256(frame_bytes).hexdigest()
    return hashlib.sha256(f"{previous}:{step}".encode()).hexdigest()


# -- appending ------------------------------------------------------------------------------

@dataclass
class _Position:
    """Where the next round goes, as established under the record's lock."""

    rounds: int
    chain: str
    recent: dict[str, tuple[int, str]]  # the state's window of latest completion ids
    verified: dict[str, tuple[int, str]] | None = None  # every id, when the record was read
    truncate_to: int | None = None  # drop an interrupted append first
    create: bool = False


def append_round(vault: Vault, key: str, conversation: str, round: RoundInput) -> RoundRef:
    """Append one round (secret-filtered) to ``_raw/KEY/CONVERSATION.md``.

    Refuses with RawRecordError, writing nothing, when the record is not exactly what this
    device last acknowledged (or, without device state, not a well-formed record). A round whose
    ``completion`` id is already in the record is not written again (``duplicate=True``).
    """
    check_identifier("completion", round.completion)
    check_identifier("host", round.host)
    sections, findings = _prepared(round)
    _check_names(key, conversation, round)
    at = _at_text(round.at)
    key_name, conversation_name, path, rel = located_record(vault, key, conversation)
    state_path = record_state_path(vault, key_name, conversation_name)
    with file_lock(record_lock(vault, key_name, conversation_name)), \
            raw_ids.CompletionIds(ids_path(vault, key_name, conversation_name)) as index:
        state = load_state(state_path)
        position = _position(path, rel, state, key_name, conversation_name)
        known = position.recent.get(round.completion) if round.completion else None
        if known is not None:
            return RoundRef(key_name, conversation_name, known[0], known[1], duplicate=True)
        position = _indexed(index, position, path, rel, state, key_name, conversation_name)
        known = index.get(round.completion) if round.completion else None
        if known is not None:
            return RoundRef(key_name, conversation_name, known[0], known[1], duplicate=True)
        number = position.rounds + 1
        content, parts = round_content(sections)
        digest = content_hash(content)
        frame = round_head(number, [
            ("n", str(number)), ("at", at), ("host", round.host),
            ("completion", round.completion), ("bytes", str(len(content))), ("sha256", digest),
            ("parts", parts), ("redacted", ",".join(f"{k}:{c}" for k, c in findings)),
        ]) + content + round_trailer(number)
        chain = position.chain
        data = frame
        if position.create:
            header = front_matter(key_name, conversation_name, conversation, round.host, at)
            chain = hashlib.sha256(header).hexdigest()
            data = header + frame
        stat = _write(path, data, position.truncate_to, position.create)
        # The round is durable now, so the call succeeds whatever follows: the stamp, the
        # index and the state only tell of what the record holds. The stamp first (a crash
        # before it leaves the round unindexed by processes without a watch until the next
        # record's bump, see ``written``); the state last: a crash (or a full disk) between
        # or during them leaves a state that does not match the record, so the next append
        # verifies the record and rebuilds the index, and a retry with the same completion
        # id is still found.
        try:
            written(vault, rel)
            index.add(round.completion, number, digest)
            save_state(state_path, RecordState(list(file_identity(stat)), number,
                                               _chain(chain, frame),
                                               _recent(position.recent, round.completion, number,
                                                   digest)))
        except OSError:
            pass
    return RoundRef(key_name, conversation_name, number, digest, redacted=tuple(findings))


def written(vault: Vault, rel: str) -> None:
    """Tell the rounds' index of every process that the record file ``rel`` changed (its
    stamp, ``osk.store.generation.RECORDS``): call it after the record's bytes are on disk,
    still holding its lock, so that a reader that sees the stamp move also sees the bytes.
    Every osk writer of a record calls it (an append, ``osk redact``, a sync landing). This
    process remembers which record each of its bumps told of (``generation.own_bumps``): its
    index, finding the stamp moved by its own bumps alone, reads only those records (the Stop
    hook after its capture)."""
    generation.bump(vault, generation.RECORDS, rel)


def _indexed(index: raw_ids.CompletionIds, position: _Position, path: Path, rel: str,
             state: RecordState | None, key: str, conversation: str) -> _Position:
    """Open the completion index for ``position``; rebuild it from the record when it is
    missing or does not account for the acknowledged rounds (one verification)."""
    if position.verified is None and index.open(position.rounds):
        return position
    if position.verified is None:
        position = verified_position(path, rel, state, key, conversation)
    assert position.verified is not None
    raw_ids.write_all(index.path, position.verified, position.rounds)
    if not index.open(position.rounds):
        raise RawRecordError(f"{index.path}: cannot open the completion index just written")
    return position


def _prepared(round: RoundInput) -> tuple[list[tuple[str, str]], list[tuple[str, int]]]:
    """Check the input's types, then secret-filter every section (callers cannot skip it)."""
    if not isinstance(round, RoundInput):
        raise RawRecordError(f"append_round takes a RoundInput, not {type(round).__name__}")
    tools = round.tools
    texts = [("user", round.user), ("assistant", round.assistant),
             *(("tool", t) for t in (tools if isinstance(tools, tuple | list) else [tools]))]
    for name, value in [*texts, ("completion", round.completion), ("host", round.host)]:
        if not isinstance(value, str):
            raise RawRecordError(f"round field {name} must be text, not {type(value).__name__}")
    counts: dict[str, int] = {}
    sections: list[tuple[str, str]] = []
    for kind, text in texts:
        filtered = mask_secrets(_valid_unicode(text).rstrip("\r\n"))
        for found, count in filtered.findings:
            counts[found] = counts.get(found, 0) + count
        sections.append((kind, _inert(filtered.text) if kind == "tool" else filtered.text))
    return sections, sorted(counts.items())


def _inert(tool: str) -> str:
    """A tool call's summary with no ``[[`` left to open a link: its arguments quote citations
    (often cut short, ``"[[_r…``), which Obsidian would render as links to notes that do not
    exist. A backslash keeps the bracket as text in Obsidian and every CommonMark reader."""
    while "[[" in tool:  # "[[[" leaves "[\\[[" after one pass
        tool = tool.replace("[[", "[\\[")
    return tool


def _check_names(key: str, conversation: str, round: RoundInput) -> None:
    """Refuse identifiers that hold a secret: the conversation and key name the record's file
    and every coordinate of it, and the completion id and host sit in each round's header."""
    for what, value in (("the conversation id", conversation), ("the session key", key),
                        ("completion", round.completion), ("host", round.host)):
        check_name(what, value)


def _valid_unicode(text: str) -> str:
    """Lone surrogates (from a lenient JSON decode) become U+FFFD so the text encodes."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _at_text(at: str | None) -> str:
    if at is None:
        return clock.now_text()
    try:
        return clock.format_minute(clock.parse(at))
    except (TypeError, ValueError) as exc:
        raise RawRecordError(
            f"round time {at!r} is not an ISO 8601 time with a UTC offset ({exc})", at=at,
        ) from exc


def _position(path: Path, rel: str, state: RecordState | None, key: str,
              conversation: str) -> _Position:
    try:
        stat = path.stat()
    except FileNotFoundError:
        if state is not None and state.rounds > 0:
            raise _refusal(rel, f"the record is gone, but this device acknowledged "
                           f"{state.rounds} round(s) in it") from None
        return _Position(0, "", {}, verified={}, create=True)
    if state is not None and state.identity == list(file_identity(stat)) and _tail_ok(path, state):
        return _Position(state.rounds, state.chain, state.completions)
    return verified_position(path, rel, state, key, conversation)


def _tail_ok(path: Path, state: RecordState) -> bool:
    """O(1) sanity check on the fast path: the file still ends with the last round's marker."""
    trailer = round_trailer(state.rounds)
    try:
        with path.open("rb") as handle:
            handle.seek(-len(trailer), os.SEEK_END)
            return handle.read() == trailer
    except OSError:
        return False


def verified_position(path: Path, rel: str, state: RecordState | None, key: str,
                      conversation: str) -> _Position:
    """The slow path: verify every round, compare with what this device acknowledged."""
    data = path.read_bytes()
    scan = scan_record(data, rel)
    for frame in scan.frames:
        if frame.actual_hash != frame.recorded_hash:
            raise record_damage(rel, f"round {frame.number} (byte offset {frame.start}) no longer "
                                f"matches the hash recorded when it was captured",
                                round=frame.number, offset=frame.start)
    if scan.frames and (scan.front.get("key") != key
                        or scan.front.get("conversation") != conversation):
        raise record_damage(rel, f"its front matter names key {scan.front.get('key')!r} and "
                            f"conversation {scan.front.get('conversation')!r}, not {key!r} and "
                            f"{conversation!r} (the file was moved or edited)", offset=0)
    chain = hashlib.sha256(data[:scan.header_end]).hexdigest() if scan.frames else ""
    chains = [chain]
    for frame in scan.frames:
        chains.append(_chain(chains[-1], data[frame.start:frame.end]))
    if state is not None and state.rounds > 0:
        _check_acknowledged(rel, scan, chains, state)
    completions: dict[str, tuple[int, str]] = {}
    for frame in scan.frames:
        completion = frame.fields["completion"]
        if completion and completion not in completions:
            completions[completion] = (frame.number, frame.recorded_hash)
    recent = dict(list(completions.items())[-RECENT_COMPLETIONS:])
    return _Position(len(scan.frames), chains[-1], recent, verified=completions,
                     truncate_to=scan.torn_start, create=not scan.frames)


def _check_acknowledged(rel: str, scan: Scan, chains: list[str], state: RecordState) -> None:
    count = len(scan.frames)
    if count < state.rounds:
        where = scan.end
        raise _refusal(rel, f"this device acknowledged {state.rounds} round(s) but the record "
                       f"now holds {count} complete round(s); it was cut at byte offset {where} "
                       f"(round {count + 1} is missing or incomplete)",
                       round=count + 1, offset=where)
    if chains[state.rounds] != state.chain:
        raise _refusal(rel, f"bytes this device acknowledged (the front matter or rounds "
                       f"1-{state.rounds}) were changed, though each round still matches its "
                       f"recorded hash", offset=0)


def _refusal(rel: str, message: str, **facts: object) -> RawRecordError:
    return RawRecordError(
        f"{rel}: {message}. Nothing was written. Restore the record from Git history "
        f"(git log -p -- {rel}); if the change is intended, delete this device's state for the "
        f"record (.osk/raw/{rel[len(RAW_DIR) + 1:-3]}.json) so the record is accepted as it is",
        path=rel, **facts,
    )


def _write(path: Path, data: bytes, truncate_to: int | None, create: bool) -> os.stat_result:
    """Write under the lock: drop an interrupted append, append, fsync; fsync new folders."""
    new_folders = [p for p in (path.parent.parent, path.parent) if not p.exists()]
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _O_BINARY, 0o644)
    try:
        if truncate_to is not None:
            os.ftruncate(fd, truncate_to)
        start = os.fstat(fd).st_size
        try:
            _write_all(fd, data)
            os.fsync(fd)
        except OSError as exc:
            _cut_back(fd, start)  # a full disk: no half-written round stays behind
            name_path(exc, path)
            raise
        stat = os.fstat(fd)
    finally:
        os.close(fd)
    if create:
        fsync_dir(path.parent)
        for folder in reversed(new_folders):
            fsync_dir(folder.parent)
    return stat


def _cut_back(fd: int, size: int) -> None:
    """Drop what a failed append wrote past ``size``; if even that fails, the next append
    finds the torn frame and cuts it (``truncate_to``)."""
    try:
        os.ftruncate(fd, size)
        os.fsync(fd)
    except OSError:
        pass


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view[:_WRITE_CHUNK])
        view = view[written:]


