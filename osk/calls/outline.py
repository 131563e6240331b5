"""A node body's outline: its Markdown headings outside fenced code, each with the span of text it
covers, and the span a ``section`` names (what a read pages by: ``osk.calls.pages``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from osk.errors import NodeNotFound
from osk.store.fastclass import dataclass

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$")


_FENCE = re.compile(r"^\s*(```|~~~)")


# -- results -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Heading:
    level: int
    title: str
    start: int  # character offsets in the body
    end: int


# -- helpers -------------------------------------------------------------------------------------
def outline_of(body: str) -> tuple[Heading, ...]:
    """Markdown headings outside fenced code, with the character span each one covers."""
    found: list[tuple[int, str, int]] = []
    offset, fenced = 0, False
    for line in body.splitlines(keepends=True):
        stripped = line.rstrip("\r\n")
        if _FENCE.match(stripped):
            fenced = not fenced
        elif not fenced:
            match = _HEADING.match(stripped)
            if match:
                found.append((len(match[1]), match[2].strip(), offset))
        offset += len(line)
    headings = []
    for i, (level, title, start) in enumerate(found):
        end = next((s for lv, _, s in found[i + 1:] if lv <= level), len(body))
        headings.append(Heading(level, title, start, end))
    return tuple(headings)


def section_span(outline: Sequence[Heading], body: str,
                  section: str | None) -> tuple[int, int, str | None]:
    if section is None or not section.strip():
        return 0, len(body), None
    wanted = section.strip().lstrip("#").strip().casefold()
    for heading in outline:
        if heading.title.casefold() == wanted:
            return heading.start, heading.end, heading.title
    listing = "; ".join(h.title for h in outline) or "the body has no headings"
    raise NodeNotFound(f"no heading {section!r} in this node; its headings: {listing}",
                       ref=section)
