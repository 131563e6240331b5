"""Reading a host's JSON Lines transcript from a byte offset, complete lines only.

The Stop hook keeps, per conversation, the byte offset where the first round it has not yet
captured begins. Reading starts there, so a hook's cost follows the size of the new turns, never
the size of the whole transcript. Only complete lines (ending in a newline) are parsed: a line
the host is still writing stays unread until the next hook. A line that is not a JSON object is
skipped with a warning (the caller logs it); it never stops the read.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from osk.store.fastclass import dataclass

# One read is bounded so that a first capture of a very long transcript cannot stall the user's
# turn; what is left is read by the next hook. A single line longer than this is skipped.
MAX_READ = 32 * 1024 * 1024


@dataclass(frozen=True)
class Line:
    """One complete transcript line, parsed. ``offset`` is the byte position of its start."""

    offset: int
    end: int
    obj: Mapping[str, object]


@dataclass(frozen=True)
class TurnRecord:
    """One round as read from a transcript.

    ``texts`` are the agent's texts in order (one per message; a message streamed over several
    lines is one text). ``closed`` means the transcript itself shows the turn is over (the next
    input, a completion marker or an interrupt); the turn still in progress at a Stop hook is
    not closed, and the Stop payload completes it.
    """

    start: int
    user: str
    texts: tuple[str, ...]
    tools: tuple[str, ...]
    completion: str
    turn_id: str = ""
    closed: bool = False
    interrupted: bool = False
    at: str | None = None
    optional: bool = False  # a command echo: dropped when the agent never answered it


@dataclass(frozen=True)
class Unknown:
    """A transcript line of a kind the adapter does not know: format drift, never skipped."""

    offset: int
    kind: str  # the line's type path, e.g. "event_msg/item_completed/Foo"


@dataclass(frozen=True)
class Chunk:
    lines: tuple[Line, ...]
    start: int          # where this read began (0 when the file was replaced or shrank)
    end: int            # byte offset just after the last complete line consumed
    at_eof: bool        # nothing but (at most) one partial line follows ``end``
    warnings: tuple[str, ...]


def read_lines(path: Path, offset: int, max_read: int = MAX_READ) -> Chunk:
    """Parse the complete lines of ``path`` from ``offset``."""
    warnings: list[str] = []
    size = os.stat(path).st_size
    if offset > size:
        warnings.append(f"{path} is shorter ({size} bytes) than the saved offset {offset}; "
                        f"the file was replaced, reading it from the start")
        offset = 0
    with open(path, "rb") as handle:
        handle.seek(offset)
        data = handle.read(max_read)
    last_newline = data.rfind(b"\n")
    if last_newline < 0:
        if len(data) >= max_read:  # one enormous line: step over it rather than stall forever
            skipped = _skip_long_line(path, offset)
            warnings.append(f"{path}: skipped a line longer than {max_read} bytes at byte {offset}")
            return Chunk((), offset, skipped, skipped >= size, tuple(warnings))
        return Chunk((), offset, offset, True, tuple(warnings))
    complete = data[: last_newline + 1]
    lines: list[Line] = []
    position = offset
    for raw in complete.split(b"\n")[:-1]:
        line_end = position + len(raw) + 1
        parsed = _parse(raw)
        if isinstance(parsed, str):
            if raw.strip():
                warnings.append(f"{path}: skipped line at byte {position}: {parsed}")
        else:
            lines.append(Line(position, line_end, parsed))
        position = line_end
    end = offset + len(complete)
    at_eof = offset + len(data) >= size  # everything was read; at most a partial line follows
    return Chunk(tuple(lines), offset, end, at_eof, tuple(warnings))


def _parse(raw: bytes) -> dict[str, object] | str:
    try:
        value = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return f"not JSON ({exc.__class__.__name__}: {str(exc)[:80]})"
    if not isinstance(value, dict):
        return f"not a JSON object ({type(value).__name__})"
    return value


def _skip_long_line(path: Path, offset: int) -> int:
    """The offset just after the next newline at or after ``offset`` (or the end of the file)."""
    with open(path, "rb") as handle:
        handle.seek(offset)
        position = offset
        while True:
            block = handle.read(1024 * 1024)
            if not block:
                return position
            found = block.find(b"\n")
            if found >= 0:
                return position + found + 1
            position += len(block)
