"""The sources section: a node's front-matter links, written again where Markdown readers look.

Obsidian's graph and backlinks, and parsers such as obsidiantools, read links from a note's
body; the contract keeps a node's citations in its front matter. So osk writes a short section
between the front matter and the body that repeats every ``derived-from``, ``conflicts`` and
``supersedes`` link (docs/FORMAT.md §2, "The sources section"). It is not part of the body: the
body hash that citations bind to is the hash of the text after it, so adding, refreshing or
deleting the section never changes what a node says. The front matter stays the truth; the
section is rewritten from it on every osk write of the node.

A file citation is a path relative to the project, which lives outside the vault and at
another place on every device the vault syncs to, so the section shows it as text: never a link
Obsidian could not resolve, never one device's absolute path in a synced file.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from osk.errors import ContractError, EdgeError

OPEN = ("<!-- osk-sources: the front matter's links, rewritten by osk on every write; "
        "edit the front matter, not these lines -->")
CLOSE = "<!-- /osk-sources -->"

# Markdown characters that could turn link text into something else (emphasis, code, a nested
# link, an HTML tag, Obsidian's highlights, math, comments and tags); CommonMark lets a
# backslash escape any ASCII punctuation.
_ESCAPE = re.compile(r"([\\`*_\[\]<>~=$%#^|&!])")


def render(derived_from: Sequence[str], conflicts: Sequence[str], supersedes: str | None) -> str:
    """The section for these links (empty when there are none), ending with one blank line."""
    lines = []
    if derived_from:
        lines.append("- Derived from " + ", ".join(_shown(link) for link in derived_from))
    if conflicts:
        lines.append("- Conflicts with " + ", ".join(_shown(link) for link in conflicts))
    if supersedes:
        lines.append("- Supersedes " + _shown(supersedes))
    if not lines:
        return ""
    return "\n".join([OPEN, *lines, CLOSE]) + "\n\n"


def split(after: str) -> tuple[str, str]:
    """``after`` (the text after the front matter) as (section, body).

    The section is recognised only where osk writes it: starting on the first line with the
    exact ``OPEN`` line and ending at the first ``CLOSE`` line, plus one blank line after it.
    Anything else (no section, or one whose closing line was deleted) is all body.
    """
    first, sep, _ = after.partition("\n")
    if not sep or first.rstrip("\r") != OPEN:
        return "", after
    position = len(first) + 1
    for line in after[position:].splitlines(keepends=True):
        position += len(line)
        if line.rstrip("\r\n") == CLOSE:
            rest = after[position:]
            if rest.startswith("\r\n") or rest.startswith("\n"):
                position += 2 if rest.startswith("\r\n") else 1
            return after[:position], after[position:]
    return "", after


def check_body(path: str, body: str) -> None:
    """Refuse a body that carries the section's opening line: read back, it would not be body."""
    if any(line.rstrip("\r") == OPEN for line in body.split("\n")):
        raise ContractError(
            f"{path}: the body contains osk's sources marker line ({OPEN[:20]}…), which only osk "
            f"writes; remove that line", path=path, key="body", expected="no sources marker",
        )


def _shown(link: str) -> str:
    # here: reading a node's body needs no link parsing (a fresh search reads hits' bodies)
    from osk.store.edges import FileTarget, NodeTarget, RawTarget

    target = _target(link)
    if isinstance(target, RawTarget):
        return f"[[{target.coordinate}|{target.key}/{target.conversation}, round {target.round}]]"
    if isinstance(target, FileTarget):
        return _ESCAPE.sub(r"\\\1", f"file:{target.path}") + " (a project file)"
    if isinstance(target, NodeTarget):
        return target.link
    return link


def _target(link: str) -> object:
    from osk.store.edges import parse_target

    try:
        return parse_target(link)
    except EdgeError:  # a hand-written link osk validate reports; show it as it is
        return None
