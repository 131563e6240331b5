"""Config-file text editors that keep every byte outside our own entries.

A host's settings belong to the user, so osk never re-serialises them: each edit is a small
textual splice at our own entry. JSON files are edited member by member (our member is always
appended last, so removing it is the exact inverse); TOML and shared Markdown files get a
delimited block of our own whose begin line records the padding we added; files that are wholly
ours carry a marker line and are created or deleted whole. Text that cannot be parsed is refused
with its path (SetupError), before anything is written.

Every editor is an ``Edit``: a pure function from a file's current text to its new text, plus a
memo of what an install created so that removal undoes exactly that. The JSON edits splice
through ``osk.hosts.jsontext``. Which files a host gets, and writing them, is
`osk.hosts.hostsetup`'s business.
"""

from __future__ import annotations

import json
import re
import tomllib
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from osk.errors import SetupError
from osk.hosts.jsontext import JsonText, JsonValue

MARKER = "managed by osk setup"

EMPTY_JSON = "{\n}\n"


def _json_after(
    before: str | None, path: Path, edit: Callable[[JsonText], None], *, may_delete: bool
) -> str | None:
    doc = JsonText(before if before is not None else EMPTY_JSON, path)
    edit(doc)
    if before is not None and doc.text == before:
        return before
    if may_delete and not doc.data and not doc.text.strip("{} \t\r\n"):
        return None  # nothing but an empty object is left, in a file osk created
    return doc.text


# ---------------------------------------------------------------------------------------------
# Edits: one kind of change to one file
# ---------------------------------------------------------------------------------------------

Memo = dict[str, object]  # what an install created, so that removal undoes exactly that


class Edit(ABC):
    """A change to one file.

    ``apply`` maps the file's current text (None = absent) to its new text. An edit that adds
    to a shared JSON file also returns a memo of what it created (the file, enclosing objects),
    kept in ``~/.osk/setup.json``; removal reads it so that it deletes only what osk added.
    """

    path: Path

    @property
    def key(self) -> str:
        return str(self.path)

    @abstractmethod
    def apply(self, text: str | None, remove: bool, memo: Memo | None) -> tuple[str | None,
                                                                                Memo | None]:
        """The file's new text (None: remove the file) and the memo to keep."""


def _levels(memo: Memo) -> int:
    levels = memo.get("levels")
    return levels if isinstance(levels, int) else 0


def _missing_levels(doc: JsonText, keys: Sequence[str]) -> int:
    for depth in range(len(keys)):
        if doc.get(keys[: depth + 1]) is None:
            return len(keys) - depth
    return 0


@dataclass
class JsonMember(Edit):
    path: Path
    keys: tuple[str, ...]
    value: JsonValue

    @property
    def key(self) -> str:
        return f"{self.path}#{'/'.join(self.keys)}"

    def apply(self, text: str | None, remove: bool, memo: Memo | None) -> tuple[str | None,
                                                                                Memo | None]:
        if remove:
            if text is None:
                return None, None
            made = memo or {"file": True, "levels": len(self.keys) - 1}
            new = _json_after(text, self.path,
                              lambda d: d.remove(self.keys, prune=_levels(made)),
                              may_delete=bool(made.get("file")))
            return new, None
        doc = JsonText(text if text is not None else EMPTY_JSON, self.path)
        made = memo or {"file": text is None,
                        "levels": _missing_levels(doc, self.keys[:-1])}
        return _json_after(text, self.path, lambda d: d.set(self.keys, self.value),
                           may_delete=False), made


@dataclass
class JsonHook(Edit):
    """One of our hook groups in a Claude-style ``{"hooks": {EVENT: [group, …]}}`` file."""

    path: Path
    event_name: str  # the host's event name, e.g. "SessionStart"
    group: dict[str, JsonValue]
    is_ours: Callable[[JsonValue], bool]

    @property
    def key(self) -> str:
        return f"{self.path}#hooks/{self.event_name}"

    def apply(self, text: str | None, remove: bool, memo: Memo | None) -> tuple[str | None,
                                                                                Memo | None]:
        keys = ("hooks", self.event_name)
        if remove:
            if text is None:
                return None, None
            made = memo or {"file": True, "levels": 2}
            new = _json_after(text, self.path, lambda d: self._remove(d, _levels(made)),
                              may_delete=bool(made.get("file")))
            return new, None
        doc = JsonText(text if text is not None else EMPTY_JSON, self.path)
        made = memo or {"file": text is None, "levels": _missing_levels(doc, keys)}
        return _json_after(text, self.path, self._install, may_delete=False), made

    def _ours(self, doc: JsonText) -> list[int]:
        hooks = doc.get(("hooks",))
        if hooks is not None and not isinstance(hooks, dict):
            raise SetupError(f"{self.path}: 'hooks' should be an object; fix it by hand")
        groups = doc.array_items(("hooks", self.event_name))
        return [i for i, group in enumerate(groups) if self.is_ours(group)]

    def _install(self, doc: JsonText) -> None:
        keys = ("hooks", self.event_name)
        ours = self._ours(doc)
        for index in reversed(ours[1:]):
            doc.remove_item(keys, index)
        if ours:
            doc.replace_item(keys, ours[0], self.group)
        else:
            doc.append_item(keys, self.group)

    def _remove(self, doc: JsonText, levels: int) -> None:
        keys = ("hooks", self.event_name)
        ours = self._ours(doc)
        for index in reversed(ours):
            doc.remove_item(keys, index)
        if ours and levels and not doc.array_items(keys):
            doc.remove(keys, prune=levels - 1)


@dataclass
class OwnedFile(Edit):
    """A file that is wholly ours (a steering/rules file, a Kiro hook file)."""

    path: Path
    content: str
    is_ours: Callable[[str], bool]

    def apply(self, text: str | None, remove: bool, memo: Memo | None) -> tuple[str | None,
                                                                                Memo | None]:
        if text is not None and text != self.content and not self.is_ours(text):
            raise SetupError(
                f"{self.path} exists and was not written by osk setup; move it away or merge it "
                f"by hand. Nothing was changed."
            )
        return (None if remove else self.content), None


@dataclass
class KeptOnRemove(Edit):
    """An entry shared by several setups (Antigravity's user-level MCP server entry, which a
    project setup needs too): installed with them, removed only by the setup that owns it."""

    edit: Edit

    @property
    def path(self) -> Path:  # type: ignore[override]
        return self.edit.path

    @property
    def key(self) -> str:
        return self.edit.key

    def apply(self, text: str | None, remove: bool, memo: Memo | None) -> tuple[str | None,
                                                                                Memo | None]:
        if remove:
            return text, memo
        return self.edit.apply(text, False, memo)


@dataclass
class TextBlock(Edit):
    """Our delimited block inside a file that is otherwise the user's (Codex TOML, GEMINI.md).

    The begin line records how many newlines we added before and after the block, so removal
    deletes exactly what was inserted and the original bytes come back.
    """

    path: Path
    host: str
    body: str  # the block's inner lines, each ending with "\n"
    comment: str  # "#" for TOML, "<!--" for Markdown
    # Where the block may go in the user's text, best first; each candidate is checked.
    places: Callable[[str], list[int]] = lambda text: [len(text)]
    check: Callable[[str, str | None], None] = lambda text, ours: None

    def _line(self, words: str) -> str:
        return f"# {words}\n" if self.comment == "#" else f"<!-- {words} -->\n"

    def _begin(self, lead: int, trail: int) -> str:
        return self._line(f">>> osk ({MARKER}; remove with `osk setup {self.host} --remove`; "
                          f"pad {lead},{trail}) >>>")

    @property
    def _end(self) -> str:
        return self._line("<<< osk <<<")

    def _find(self, text: str) -> tuple[int, int] | None:
        """The span of our block in ``text``, padding included."""
        prefix, suffix = ("# ", "\n") if self.comment == "#" else ("<!-- ", " -->\n")
        begin = re.compile(re.escape(prefix) + r">>> osk \(.*; pad (\d),(\d)\) >>>"
                           + re.escape(suffix))
        match = begin.search(text)
        if match is None:
            return None
        end = text.find(self._end, match.end())
        if end < 0:
            raise SetupError(
                f"{self.path}: osk's block has a begin line but no end line "
                f"({self._end.strip()}); fix the file by hand. Nothing was changed."
            )
        lead, trail = int(match.group(1)), int(match.group(2))
        start = match.start() - lead
        stop = end + len(self._end) + trail
        if text[start : match.start()] != "\n" * lead or text[end + len(self._end) : stop] != (
            "\n" * trail
        ):
            start, stop = match.start(), end + len(self._end)  # edited by hand: drop just ours
        return start, stop

    @property
    def key(self) -> str:
        return f"{self.path}#block"

    def apply(self, text: str | None, remove: bool, memo: Memo | None) -> tuple[str | None,
                                                                                Memo | None]:
        if remove:
            created = memo is None or bool(memo.get("file"))
            return self._apply(text, True, created), None
        return self._apply(text, False, False), memo or {"file": text is None}

    def _apply(self, text: str | None, remove: bool, created: bool) -> str | None:
        original = text or ""
        found = self._find(original)
        base = original if found is None else original[: found[0]] + original[found[1] :]
        self.check(base, None)
        if remove:
            if found is None:
                return text
            return base if base or not created else None
        candidates = self.places(base)
        for place in candidates:
            new = base[:place] + self._padded(base, place) + base[place:]
            try:
                self.check(new, base)
            except SetupError:
                if place == candidates[-1]:
                    raise
                continue
            return original if new == original else new
        raise AssertionError("no placement candidates")

    def _padded(self, base: str, place: int) -> str:
        before = base[:place]
        lead = 0 if not before else (0 if before.endswith("\n") else 1)
        if before and not before.endswith("\n\n"):
            lead += 1  # a blank line between the user's text and ours
        trail = 1 if base[place:] else 0  # a blank line before the user's next table
        return "\n" * lead + self._begin(lead, trail) + self.body + self._end + "\n" * trail


# ---------------------------------------------------------------------------------------------
# TOML: where our table may go, and proof that it changes nothing else
# ---------------------------------------------------------------------------------------------


def toml_places(text: str) -> list[int]:
    """Before the first table header (so nothing of the user's can fall into our table), or at
    the end. A comment block directly above that header stays with it."""
    lines = text.splitlines(keepends=True)
    offset, first_header = 0, None
    starts = []
    for line in lines:
        starts.append(offset)
        if first_header is None and re.match(r"\[", line):
            first_header = len(starts) - 1
        offset += len(line)
    if first_header is None:
        return [len(text)]
    index = first_header
    while index > 0 and lines[index - 1].lstrip().startswith("#"):
        index -= 1
    return [starts[index], len(text)]


def toml_check(path: Path, table: tuple[str, ...]) -> Callable[[str, str | None], None]:
    """Refuse malformed TOML and a user-made table of our name; accept a placement only when
    the result parses to exactly the user's data plus our table."""

    def parse(text: str) -> dict[str, object]:
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise SetupError(
                f"{path} is not valid TOML ({exc}); fix the file by hand, then run osk setup "
                f"again. Nothing was changed."
            ) from exc

    def check(text: str, base: str | None) -> None:
        if base is None:
            data = parse(text)
        else:
            try:
                data = tomllib.loads(text)
            except tomllib.TOMLDecodeError as exc:
                raise SetupError(
                    f"{path}: osk's [{'.'.join(table)}] table cannot be added to this file "
                    f"({exc}); is {table[0]} defined in another form? Nothing was changed."
                ) from exc
        ours = _lookup(data, table)
        if base is None:
            if ours is not None:
                raise SetupError(
                    f"{path} already defines [{'.'.join(table)}] outside osk's block; remove "
                    f"that table by hand (or rename it), then run osk setup again. "
                    f"Nothing was changed."
                )
            return
        expected = parse(base)
        node: dict[str, object] = expected
        for key in table[:-1]:
            child = node.setdefault(key, {})
            if not isinstance(child, dict):
                raise SetupError(f"{path}: {key} is not a table; fix the file by hand")
            node = child
        node[table[-1]] = ours
        if not isinstance(ours, dict) or data != expected:
            raise SetupError(f"{path}: osk's block would change other settings; not written")

    return check


def _lookup(data: dict[str, object], keys: tuple[str, ...]) -> object:
    node: object = data
    for key in keys:
        node = node.get(key) if isinstance(node, dict) else None
    return node


def toml_string(value: str) -> str:
    # JSON string escapes are a subset of TOML basic-string escapes.
    return json.dumps(value, ensure_ascii=False)

