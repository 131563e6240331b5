"""Reading a raw record in pages: chosen rounds as one capped text that says where to go on.

``read_raw`` shows a whole record (or a selection of its rounds, ``"3-5,8"``) this way. The view
never exceeds its cap: a round that does not fit whole is cut inside when a useful piece of it
fits, otherwise the view stops before it, and a closing notice names the rounds (and the
``skip`` into the first of them) to ask for next. Records themselves (the format, appending,
verifying) are ``osk.capture.raw``'s.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from osk.capture.raw import RawRecord, count_text, read_record
from osk.capture.raw_text import Round
from osk.errors import RawNotFound, RawRecordError
from osk.store.vault import Vault

REVIEW_CAP = 6000
_MIN_PIECE = 300  # characters: less than this of a round is not worth showing after others


@dataclass(frozen=True)
class Review:
    """A capped view of chosen rounds; ``next_rounds``/``next_skip`` say where to read on."""

    text: str
    shown: tuple[int, ...]
    cut: bool
    next_rounds: tuple[int, ...] = ()
    next_skip: int = 0


def parse_rounds(spec: str) -> tuple[int, ...]:
    """``"3-5,8"`` → ``(3, 4, 5, 8)``: the round selection a surface can pass through."""
    chosen: set[int] = set()
    for piece in spec.replace(" ", "").split(","):
        match = re.fullmatch(r"([1-9][0-9]*)(?:-([1-9][0-9]*))?", piece)
        if not match:
            raise RawRecordError(f"round selection {spec!r} is malformed; write e.g. 3-5,8")
        first = int(match[1])
        last = int(match[2] or first)
        if last < first:
            raise RawRecordError(f"round range {piece!r} runs backwards; write {last}-{first}")
        chosen.update(range(first, last + 1))
    return tuple(sorted(chosen))


def _ranges(numbers: Iterable[int]) -> str:
    runs: list[list[int]] = []
    for n in sorted(numbers):
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def review(vault: Vault, key: str, conversation: str,
           rounds: Iterable[int] | str | None = None, cap: int = REVIEW_CAP,
           skip: int = 0) -> Review:
    """Chosen rounds as one text of at most ``cap`` characters, saying where it was cut.

    ``skip`` drops that many characters of the first chosen round (to page through a round
    longer than the cap). A round that does not fit whole is cut inside when a useful piece of
    it fits (or when it is the first), otherwise the view stops before it.
    """
    if cap < 1000:
        raise RawRecordError(f"a review needs a cap of at least 1,000 characters, not {cap:,}")
    if skip < 0:
        raise RawRecordError(f"skip must be 0 or more, not {skip}")
    record = read_record(vault, key, conversation, strict=False)
    chosen = _chosen(record, rounds)
    text = f"# Raw record {record.rel}: rounds {_ranges(chosen)} of {len(record.rounds)}\n\n"
    shown: list[int] = []
    for index, number in enumerate(chosen):
        found = record.rounds[number - 1]
        offset = skip if index == 0 else 0
        head = _review_heading(found, offset)
        body = found.text[offset:]
        later = chosen[index + 1:]
        reserve = len(_stop_notice(cap, number, later)) if later else 0
        if len(text) + len(head) + len(body) + 2 + reserve <= cap:
            text += f"{head}{body}\n\n"
            shown.append(number)
            continue
        rest = chosen[index:]
        longest = _cut_notice(cap, found, offset + len(body), rest)
        room = cap - len(text) - len(head) - 2 - len(longest)
        if room < _MIN_PIECE and shown:
            notice = _stop_notice(cap, shown[-1], rest)
            return Review(text + notice, tuple(shown), True, rest, 0)
        piece = body[:max(room, 0)]
        shown.append(number)
        notice = _cut_notice(cap, found, offset + len(piece), rest)
        return Review(f"{text}{head}{piece}\n\n{notice}", tuple(shown), True, rest,
                      offset + len(piece))
    return Review(text, tuple(shown), False)


def _stop_notice(cap: int, after: int, rest: tuple[int, ...]) -> str:
    return (f"[cut at the {cap:,}-character cap after round {after}. To read on, ask for "
            f"rounds {_ranges(rest)}.]\n")


def _cut_notice(cap: int, found: Round, upto: int, rest: tuple[int, ...]) -> str:
    return (f"[cut at the {cap:,}-character cap inside round {found.number}: shown up to "
            f"character {upto:,} of {len(found.text):,}. To read on, ask for rounds "
            f"{_ranges(rest)} with skip {upto}.]\n")


def _chosen(record: RawRecord, rounds: Iterable[int] | str | None) -> tuple[int, ...]:
    count = len(record.rounds)
    if rounds is None:
        chosen = tuple(range(1, count + 1))
    elif isinstance(rounds, str):
        chosen = parse_rounds(rounds)
    else:
        chosen = tuple(sorted(set(rounds)))
    if not chosen:
        raise RawNotFound(f"{record.rel} has {count_text(count)}; nothing to review",
                          path=record.rel)
    missing = [n for n in chosen if not 1 <= n <= count]
    if missing:
        raise RawNotFound(f"{record.rel} has no round {_ranges(missing)}; it has "
                          f"{count_text(count)}", path=record.rel, round=missing[0])
    return chosen


def _review_heading(found: Round, offset: int) -> str:
    notes = [found.at]
    if found.host:
        notes.append(found.host)
    if found.redacted:
        notes.append("redacted " + ", ".join(f"{k} ×{c}" for k, c in found.redacted))
    if not found.intact:
        notes.append("WARNING: text changed since capture (hash differs)")
    if offset:
        notes.append(f"continued from character {offset:,}")
    return f"## {found.coordinate} · {' · '.join(notes)}\n"
