"""Where an injected node came from, as the hooks say it beside the node: who wrote it (the
person or an agent), its trust state, what it cites (raw rounds, project files, other nodes) and
whether its text carries steering (``osk.capture.steering``).

Read from the node file itself with the standard library (hook path): the few front-matter
keys this needs (``author``, ``trust``, ``derived-from``) are plain lines in the form osk
writes them; a hand-edited file in another YAML form is read as far as these lines go.
"""

from __future__ import annotations

import re

from osk.capture.steering import node_steering
from osk.errors import OskError
from osk.store.edges import FileTarget, RawTarget, parse_target
from osk.store.fastclass import dataclass
from osk.store.trust_state import state_of

_KEY = re.compile(r"^([A-Za-z_][\w-]*)\s*:\s*(.*)$")
_LINK = re.compile(r"\[\[([^\[\]]+)\]\]")
_ITEM = re.compile(r"^\s*-\s*['\"]?([^'\"]+?)['\"]?\s*$")  # a bare coordinate: - file:PATH


@dataclass(frozen=True)
class Origin:
    author: str      # "person" or "agent"
    trust: str       # confirmed / inferred
    rounds: int = 0  # raw rounds cited (derived-from)
    files: int = 0   # project files cited
    nodes: int = 0   # other nodes cited
    steering: tuple[str, ...] = ()  # kinds of steering in its text (none: ())

    def cites(self) -> str:
        """'2 rounds, 1 file' ('nothing' when it cites nothing)."""
        parts = [f"{count} {name}{'' if count == 1 else 's'}" for count, name in
                 ((self.rounds, "round"), (self.files, "file"), (self.nodes, "node")) if count]
        return ", ".join(parts) or "nothing"


def read(text: str, title: str, summary: str) -> Origin:
    """The origin of the node whose file holds ``text`` (``title`` and ``summary`` as indexed)."""
    header, body = _split(text)
    keys: dict[str, str] = {}
    links: list[str] = []
    current = ""
    for line in header.splitlines():
        found = _KEY.match(line)
        if found:
            current, value = found.group(1), found.group(2).strip()
            keys[current] = value.strip("'\"")
        if current == "derived-from":
            links.extend(_LINK.findall(line) or _ITEM.findall(line))
    kinds = [_kind(link) for link in links]
    author = "person" if keys.get("author") == "user" else "agent"
    return Origin(author, state_of(keys.get("trust") or None, keys.get("author", "")),
                  kinds.count("round"), kinds.count("file"), kinds.count("node"),
                  node_steering(title, summary, body))


def _split(text: str) -> tuple[str, str]:
    if not text.startswith("---\n"):
        return "", text
    end = text.find("\n---\n", 3)
    return (text[4:end], text[end + 5:]) if end >= 0 else ("", text)


def _kind(link: str) -> str:
    try:
        target = parse_target(link)
    except OskError:  # malformed: counted as a node link, as a reader sees it
        return "node"
    if isinstance(target, RawTarget):
        return "round"
    return "file" if isinstance(target, FileTarget) else "node"
