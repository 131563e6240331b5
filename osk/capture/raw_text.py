"""A raw record's text (docs/FORMAT.md): the preamble, each round's framed section (a header with
its number, time, host, completion id and the hash of its content, then ### User /
### Assistant / ### Tools), rendered for an append and parsed back, with every kind of damage
named. Pure text: the record on disk, its lock and its device state are ``osk.capture.raw``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import quote, unquote

from osk.errors import RawRecordError
from osk.store.edges import RawTarget

FORMAT_VERSION = 1


PREAMBLE = (
    "\n> Raw conversation record kept by osk: append-only, one section per round. Editing it "
    "makes further captures refuse; see docs/FORMAT.md.\n"
)
_FIELD_SAFE = ":+@/,"  # besides letters, digits and "_.-~": kept as is in header values


_FENCE_OPEN = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")


@dataclass(frozen=True)
class Round:
    key: str
    conversation: str
    number: int
    text: str                 # the round's content: its ### User / ### Assistant / ### Tools
    hash: str                 # sha256 of ``text`` without trailing newlines, as it is now
    recorded_hash: str        # the sha256 written in the round's header at capture
    at: str
    host: str
    completion: str
    user: str
    assistant: str
    tools: tuple[str, ...]
    redacted: tuple[tuple[str, int], ...]
    offset: int               # byte offset of the round's frame in the file

    @property
    def intact(self) -> bool:
        return self.hash == self.recorded_hash

    @property
    def target(self) -> RawTarget:
        return RawTarget(self.key, self.conversation, self.number)

    @property
    def coordinate(self) -> str:
        return self.target.coordinate


# -- rendering ------------------------------------------------------------------------------

def round_head(number: int, fields: list[tuple[str, str]]) -> bytes:
    encoded = " ".join(f"{name}={quote(value, safe=_FIELD_SAFE)}" for name, value in fields)
    return f"\n## Round {number}\n<!-- osk-round {encoded} -->\n".encode()


def round_trailer(number: int) -> bytes:
    return f"\n<!-- /osk-round {number} -->\n".encode()


def _glue(kind: str, index: int) -> bytes:
    if kind == "user":
        return b"### User\n\n"
    if kind == "assistant":
        return b"\n\n### Assistant\n\n"
    return b"\n\n### Tools\n\n" if index == 2 else b"\n\n"


def _open_fence(text: str) -> str:
    """The fence still open at the end of ``text`` (CommonMark-style), or "".

    The closer is written after the section so one unbalanced fence cannot swallow the rest of
    the record in Obsidian; it is part of the round's framing, not of the section's text.
    """
    fence = ""
    for line in text.split("\n"):
        match = _FENCE_OPEN.match(line)
        if not match:
            continue
        run = match[1]
        if not fence:
            if not (run[0] == "`" and "`" in match[2]):
                fence = run
        elif run[0] == fence[0] and len(run) >= len(fence) and not match[2].strip():
            fence = ""
    return fence


def _fence_code(fence: str) -> str:
    return "" if not fence else ("b" if fence[0] == "`" else "t") + str(len(fence))


def _fence_of(code: str) -> str:
    if not code:
        return ""
    match = re.fullmatch(r"([bt])([3-9]|[1-9][0-9]+)", code)
    if not match:
        raise ValueError(code)
    return ("`" if match[1] == "b" else "~") * int(match[2])


def round_content(sections: list[tuple[str, str]]) -> tuple[bytes, str]:
    """The round's content bytes and its ``parts`` header value."""
    pieces: list[bytes] = []
    parts: list[str] = []
    for index, (kind, text) in enumerate(sections):
        data = text.encode("utf-8")
        fence = _open_fence(text)
        pieces += [_glue(kind, index), data]
        if fence:
            pieces.append(b"\n" + fence.encode())
        parts.append(f"{kind}:{len(data)}" + (f":{_fence_code(fence)}" if fence else ""))
    return b"".join(pieces), ",".join(parts)


def content_hash(content: bytes) -> str:
    """A round's hash: sha256 of its content without trailing newlines."""
    return hashlib.sha256(content.rstrip(b"\n")).hexdigest()


def front_matter(key: str, conversation: str, host_conversation: str, host: str,
                 created: str) -> bytes:
    def q(value: str) -> str:
        return json.dumps(value, ensure_ascii=False)

    return (
        f"---\nosk-raw: {FORMAT_VERSION}\nkey: {q(key)}\nconversation: {q(conversation)}\n"
        f"host-conversation: {q(host_conversation)}\nhost: {q(host)}\ncreated: {q(created)}\n"
        f"---\n{PREAMBLE}"
    ).encode()


# -- parsing ------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Frame:
    number: int
    start: int
    end: int
    fields: dict[str, str]
    content: bytes
    sections: tuple[tuple[str, str], ...]
    recorded_hash: str
    actual_hash: str


@dataclass
class Scan:
    front: dict[str, object]
    header_end: int
    frames: list[_Frame]
    torn_start: int | None  # where an interrupted append begins (None: the file is whole)
    size: int

    @property
    def end(self) -> int:
        return self.frames[-1].end if self.frames else self.header_end


_FRONT_START = b"---\nosk-raw:"
_ROUND_ONE = b"\n## Round 1\n<!-- osk-round "
_HEAD_LINE = re.compile(rb"<!-- osk-round ([^\n]*) -->")
_REQUIRED = ("n", "at", "host", "completion", "bytes", "sha256", "parts", "redacted")


def record_damage(rel: str, message: str, **facts: object) -> RawRecordError:
    return RawRecordError(
        f"{rel}: {message}. The record is append-only: restore it from Git history "
        f"(git log -p -- {rel}); docs/FORMAT.md describes the format for a repair by hand",
        path=rel, **facts,
    )


def scan_record(data: bytes, rel: str) -> Scan:
    """Split a record into frames; raise RawRecordError naming the round and byte offset."""
    interrupted_creation = Scan({}, 0, [], 0, len(data))
    if not data.startswith(_FRONT_START):
        if _FRONT_START.startswith(data):
            return interrupted_creation
        raise record_damage(rel, "does not start with the osk-raw front matter (offset 0)",
                            offset=0)
    close = data.find(b"\n---\n", 3)
    if close < 0:
        if _plausible_front(data):
            return interrupted_creation
        raise record_damage(rel, "its front matter is not closed by a '---' line", offset=0)
    first = data.find(_ROUND_ONE, close + 1)
    if first < 0:
        # Round 1 never completed its heading: an interrupted creation, if nothing else is there.
        if (PREAMBLE.encode() + _ROUND_ONE).startswith(data[close + 5:]):
            return interrupted_creation
        raise record_damage(rel, f"no '## Round 1' heading with its osk-round header follows the "
                            f"front matter (byte offset {close + 5})", offset=close + 5)
    front = _parse_front(data[4:close + 1], rel)
    frames, position = frames_from(data, first, 1, rel)
    if not frames:
        return interrupted_creation
    torn = position if position < len(data) else None
    return Scan(front, first, frames, torn, len(data))


def frames_from(data: bytes, position: int, number: int, rel: str) -> tuple[list[_Frame], int]:
    """The complete frames from round ``number`` at byte ``position`` on, and where they end
    (a torn last append is left out)."""
    frames: list[_Frame] = []
    while position < len(data):
        frame = _parse_frame(data, position, number + len(frames), rel)
        if frame is None:
            break
        frames.append(frame)
        position = frame.end
    return frames, position


def _plausible_front(data: bytes) -> bool:
    """An unclosed front matter whose complete lines are all 'name: value' (a cut creation)."""
    lines = data.split(b"\n")
    return all(re.fullmatch(rb"[a-z][a-z-]*: .*", line) for line in lines[1:-1])


def _parse_front(block: bytes, rel: str) -> dict[str, object]:
    values: dict[str, object] = {}
    for number, line in enumerate(block.decode("utf-8", "replace").splitlines(), start=2):
        name, sep, raw = line.partition(": ")
        if not sep:
            raise record_damage(rel, f"front matter line {number} is not 'name: value'",
                                line=number)
        try:
            values[name] = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise record_damage(rel, f"front matter line {number} has a malformed value ({exc})",
                                line=number) from exc
    version = values.get("osk-raw")
    if version != FORMAT_VERSION:
        raise RawRecordError(
            f"{rel}: osk-raw format {version!r} is not {FORMAT_VERSION}, the format this osk "
            f"reads and appends. Nothing was written; upgrade osk, or restore the file",
            path=rel,
        )
    return values


def _parse_frame(data: bytes, start: int, number: int, rel: str) -> _Frame | None:
    """The frame of round ``number`` at ``start``; None when the bytes end inside it (torn)."""
    def bad(why: str) -> RawRecordError:
        return record_damage(rel, f"round {number} (byte offset {start}): {why}",
                             round=number, offset=start)

    heading = f"\n## Round {number}\n<!-- osk-round ".encode()
    rest = data[start:start + len(heading)]
    if rest != heading[:len(rest)]:
        raise bad(f"expected the heading '## Round {number}' and its osk-round header "
                  f"after round {number - 1}; found other bytes")
    if len(rest) < len(heading):
        return None
    line_end = data.find(b"\n", start + len(heading))
    if line_end < 0:
        return None
    match = _HEAD_LINE.fullmatch(data, start + len(heading) - len(b"<!-- osk-round "), line_end)
    if not match:
        raise bad("the osk-round header line is damaged")
    fields = _parse_fields(match[1], bad)
    if fields["n"] != str(number):
        raise bad(f"its header says n={fields['n']}")
    try:
        length = int(fields["bytes"])
        parts = _parse_parts(fields["parts"])
    except ValueError as exc:
        raise bad(f"header field bytes= or parts= is malformed ({exc})") from exc
    body_start = line_end + 1
    body_end = body_start + length
    trailer = round_trailer(number)
    if len(data) < body_end + len(trailer):
        available = data[body_end:]
        if len(data) > body_end and not trailer.startswith(available):
            raise bad(f"its text is not {length} bytes long as its header says "
                      f"(the text was edited)")
        return None
    if data[body_end:body_end + len(trailer)] != trailer:
        raise bad(f"its text is not {length} bytes long as its header says (the text was "
                  f"edited, or the end marker '<!-- /osk-round {number} -->' was changed)")
    content = data[body_start:body_end]
    sections = _split_sections(content, parts)
    if sections is None:
        raise bad("its section headings (### User, ### Assistant, ### Tools) do not sit where "
                  "its header's parts= puts them (the text was edited)")
    return _Frame(number, start, body_end + len(trailer), fields, content, sections,
                  fields["sha256"], content_hash(content))


def _parse_fields(raw: bytes, bad: Callable[[str], RawRecordError]) -> dict[str, str]:
    fields: dict[str, str] = {}
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError as exc:
        raise bad("the osk-round header holds non-ASCII bytes") from exc
    for item in text.split(" "):
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise bad(f"header item {item!r} is not name=value")
        fields[name] = unquote(value, errors="strict")
    missing = [name for name in _REQUIRED if name not in fields]
    if missing:
        raise bad(f"its header lacks {', '.join(missing)}")
    if not re.fullmatch(r"[0-9a-f]{64}", fields["sha256"]):
        raise bad("its header's sha256 is not 64 lowercase hex digits")
    return fields


def _parse_parts(value: str) -> list[tuple[str, int, str]]:
    parts: list[tuple[str, int, str]] = []
    for index, item in enumerate(value.split(",")):
        bits = item.split(":")
        if len(bits) not in (2, 3):
            raise ValueError(item)
        kind = bits[0]
        expected = ("user", "assistant")[index] if index < 2 else "tool"
        if kind != expected:
            raise ValueError(f"part {index + 1} is {kind!r}, expected {expected!r}")
        length = int(bits[1])
        if length < 0:
            raise ValueError(item)
        parts.append((kind, length, _fence_of(bits[2]) if len(bits) == 3 else ""))
    if len(parts) < 2:
        raise ValueError("a round has at least user and assistant parts")
    return parts


def _split_sections(content: bytes, parts: list[tuple[str, int, str]]
                    ) -> tuple[tuple[str, str], ...] | None:
    sections: list[tuple[str, str]] = []
    position = 0
    for index, (kind, length, fence) in enumerate(parts):
        glue = _glue(kind, index)
        if content[position:position + len(glue)] != glue:
            return None
        position += len(glue)
        piece = content[position:position + length]
        if len(piece) != length:
            return None
        position += length
        if fence:
            closer = b"\n" + fence.encode()
            if content[position:position + len(closer)] != closer:
                return None
            position += len(closer)
        try:
            sections.append((kind, piece.decode("utf-8")))
        except UnicodeDecodeError:
            return None
    return tuple(sections) if position == len(content) else None


def parse_findings(value: str) -> tuple[tuple[str, int], ...]:
    found: list[tuple[str, int]] = []
    for item in filter(None, value.split(",")):
        kind, _, count = item.rpartition(":")
        found.append((kind, int(count) if count.isdigit() else 0))
    return tuple(found)


def round_of(key: str, conversation: str, frame: _Frame) -> Round:
    sections = dict(frame.sections[:2])
    fields = frame.fields
    return Round(
        key=key, conversation=conversation, number=frame.number,
        text=frame.content.decode("utf-8"), hash=frame.actual_hash,
        recorded_hash=frame.recorded_hash, at=fields["at"], host=fields["host"],
        completion=fields["completion"], user=sections["user"],
        assistant=sections["assistant"],
        tools=tuple(text for kind, text in frame.sections[2:]),
        redacted=parse_findings(fields["redacted"]), offset=frame.start,
    )
