"""The fence: how every stored text the hooks inject is written into osk's blocks.

osk's blocks (``<osk-memory>`` at session start, ``<osk-recall>`` per prompt) are its own
structure: the tags, the ``## `` section headings, the ``- `` item lines. Everything else in
them came from the vault (scope memory, titles, summaries, notes, raw excerpts) and anyone who
could write to the vault wrote it. So a stored text is encoded on the way in, by this one rule:

- invisible characters are dropped (zero-width, bidirectional and tag characters, variation
  selectors, controls), so nothing hides in what the model reads and nothing splits a word the
  rules below look for;
- an inline text (``inline``) is folded to one line and cut, so it can never start a line of
  its own: no heading, item, role marker or tag of its own can begin one;
- a multi-line text (``block``) has every line quoted with ``QUOTE`` and wrapped at ``WIDTH``,
  so each of its lines shows where it came from;
- inside the text, anything a host or a model reads as structure is written as an HTML
  character reference, in the skeleton's sense (``osk.capture.steering``: look-alikes count):
  the brackets of tags (``&lt;/osk-memory&gt;``), the colon of a role marker
  (``SYSTEM&#58;``), the bracket of ``[INST]``, and in a text that names a tool call or result
  in a host's format, its braces and quotes (``&#123;&quot;type&quot;…``).

``&`` itself is left alone: a reference in stored text stays a reference, and no reference is
structure, so encoding twice changes nothing. Standard library only (hook path).
"""

from __future__ import annotations

from osk.capture.steering import BRACKET_ROLE, ROLE, TAG, TOOL_WORDS, skeleton, visible

QUOTE = "> "  # every line of a multi-line stored text starts with it
WIDTH = 200   # characters of a stored line per quoted line (a longer one continues below)
_JSON_MARKS = {"{": "&#123;", "}": "&#125;", '"': "&quot;"}


def inline(text: str, limit: int) -> str:
    """A stored text as part of one injected line: one line, encoded, at most ``limit``."""
    flat = " ".join(visible(text).split())
    return _cut(encode(flat), limit)


def block(text: str) -> str:
    """A stored multi-line text, every line quoted and encoded ("" for an empty text)."""
    lines: list[str] = []
    for raw in visible(text).strip().splitlines():
        line = encode(" ".join(raw.split()))
        if line.startswith("#"):  # a heading imitating osk's sections, even quoted
            line = "&#35;" + line[1:]
        lines.extend((QUOTE + line[start:start + WIDTH]).rstrip()
                     for start in range(0, max(len(line), 1), WIDTH))
    return "\n".join(lines)


def attribute(text: str) -> str:
    """A stored text as the value of an attribute of osk's own tag (``scope="…"``)."""
    return inline(text, 200).replace('"', "&quot;")


def encode(text: str) -> str:
    """``text`` with what reads as structure written as character references (see above)."""
    shape = skeleton(text)
    marks: dict[int, str] = {}
    for found in TAG.finditer(shape):
        marks[found.start()] = "&lt;"
        if shape[found.end() - 1] in ">\ue001":
            marks[found.end() - 1] = "&gt;"
    for found in ROLE.finditer(shape):
        marks[found.end() - 1] = "&#58;"
    for found in BRACKET_ROLE.finditer(shape):
        marks[found.start()] = "&#91;"
    if TOOL_WORDS.search(shape):
        for index, ch in enumerate(shape):
            if ch in _JSON_MARKS:
                marks[index] = _JSON_MARKS[ch]
    if not marks:
        return text
    return "".join(marks.get(index, ch) for index, ch in enumerate(text))


def _cut(text: str, limit: int) -> str:
    """At most ``limit`` characters, never ending inside a character reference."""
    if len(text) <= limit:
        return text
    head = text[: max(limit - 1, 0)]
    amp = head.rfind("&", max(len(head) - 6, 0))
    if amp >= 0 and ";" not in head[amp:]:
        head = head[:amp]
    return head + "…"
