"""Registering osk with a host: its MCP server entry, its hooks, and its rules/steering file.

`osk setup HOST` is a plan followed by an apply. The plan is a list of file changes (the bytes
before and after) computed from the host's current files, so it can be shown as a diff, asked
about, applied, and checked by `osk doctor` without writing anything.

Existing settings are the user's: every edit is a small textual splice at our own entry, never a
re-serialisation of the file, so bytes outside our entries stay exactly as they were. JSON files
are edited member by member (our member is always appended last, so removing it is the exact
inverse); Codex's config.toml and shared Markdown files get a delimited block of our own; files
that are wholly ours carry a marker line and are created or deleted whole. A file that cannot be
parsed is refused with its path, and nothing at all is written.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shlex
import shutil
import sys
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from osk.errors import SetupError
from osk.fsutil import atomic_write
from osk.hooks.rules import rules_text

HOSTS = ("claude", "codex", "kiro", "antigravity")
SERVER_NAME = "osk"
TIMEOUTS = {"session-start": 15, "prompt-submit": 10, "stop": 30}
MARKER = "managed by osk setup"

JsonValue = object


# ---------------------------------------------------------------------------------------------
# Locations
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Context:
    """Everything a plan depends on, so tests can point it at a temporary home."""

    home: Path
    vault: Path | None  # None only when removing
    osk_command: tuple[str, ...]
    project: Path | None = None
    codex_home: Path | None = None

    @property
    def codex_dir(self) -> Path:
        return self.codex_home or self.home / ".codex"


def default_context(vault: Path | None, project: Path | None) -> Context:
    codex_env = os.environ.get("CODEX_HOME")
    return Context(
        home=Path.home(),
        vault=vault,
        osk_command=osk_command(),
        project=project.expanduser().resolve() if project else None,
        codex_home=Path(codex_env).expanduser() if codex_env else None,
    )


def osk_command() -> tuple[str, ...]:
    """The absolute command that runs this osk, so a host finds it without our PATH."""
    beside = Path(sys.executable).parent / ("osk.exe" if os.name == "nt" else "osk")
    if beside.is_file():
        return (str(beside.absolute()),)
    found = shutil.which("osk")
    if found:
        return (str(Path(found).absolute()),)
    return (str(Path(sys.executable).absolute()), "-m", "osk")


def hook_command(ctx: Context, event: str, host: str) -> str:
    """The shell command a host runs for one of our hooks (absolute paths, quoted)."""
    assert ctx.vault is not None
    words = [*ctx.osk_command, "hook", event, "--host", host, "--vault", str(ctx.vault)]
    return " ".join(shlex.quote(w) for w in words)


def is_our_hook_command(command: object, event: str, host: str) -> bool:
    return (
        isinstance(command, str)
        and "osk" in command
        and re.search(rf"\bhook\s+{re.escape(event)}\s+--host\s+{re.escape(host)}\b", command)
        is not None
    )


def server_argv(ctx: Context) -> tuple[str, list[str]]:
    """The command and arguments that start osk's MCP server on this vault."""
    assert ctx.vault is not None
    command, *prefix = ctx.osk_command
    return command, [*prefix, "--vault", str(ctx.vault), "mcp"]


def mcp_entry(ctx: Context, *, with_type: bool = False) -> dict[str, JsonValue]:
    command, args = server_argv(ctx)
    entry: dict[str, JsonValue] = {"type": "stdio"} if with_type else {}
    entry["command"] = command
    entry["args"] = args
    return entry


# ---------------------------------------------------------------------------------------------
# A JSON text editor that keeps every byte outside the member it touches
# ---------------------------------------------------------------------------------------------


@dataclass
class _Node:
    start: int
    end: int
    kind: str  # "object" | "array" | "scalar"
    members: list[tuple[str, int, _Node]] = field(default_factory=list)  # key, key start, value
    items: list[_Node] = field(default_factory=list)


_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def _skip(text: str, pos: int) -> int:
    match = _WS.match(text, pos)
    return match.end() if match else pos


def _parse(text: str, pos: int) -> _Node:
    pos = _skip(text, pos)
    char = text[pos : pos + 1]
    if char == "{":
        node = _Node(pos, pos, "object")
        pos = _skip(text, pos + 1)
        if text[pos] == "}":
            node.end = pos + 1
            return node
        while True:
            key_start = pos
            key, pos = _DECODER.raw_decode(text, pos)
            pos = _skip(text, pos) + 1  # the colon
            value = _parse(text, pos)
            node.members.append((key, key_start, value))
            pos = _skip(text, value.end)
            if text[pos] == "}":
                node.end = pos + 1
                return node
            pos = _skip(text, pos + 1)  # the comma
    if char == "[":
        node = _Node(pos, pos, "array")
        pos = _skip(text, pos + 1)
        if text[pos] == "]":
            node.end = pos + 1
            return node
        while True:
            item = _parse(text, pos)
            node.items.append(item)
            pos = _skip(text, item.end)
            if text[pos] == "]":
                node.end = pos + 1
                return node
            pos = _skip(text, pos + 1)
    _, end = _DECODER.raw_decode(text, pos)
    return _Node(pos, end, "scalar")


class JsonText:
    """One JSON document as text, with edits that splice only the touched member or item."""

    def __init__(self, text: str, path: Path) -> None:
        self.path = path
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SetupError(
                f"{path} is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
                f"fix or move the file by hand, then run osk setup again. Nothing was changed."
            ) from exc
        if not isinstance(data, dict):
            raise SetupError(f"{path} must hold a JSON object at the top; nothing was changed")
        self.text = text
        self.unit = _indent_unit(text)

    @property
    def data(self) -> dict[str, JsonValue]:
        return json.loads(self.text)

    def _root(self) -> _Node:
        return _parse(self.text, 0)

    def _walk(self, keys: Sequence[str]) -> _Node | None:
        node = self._root()
        for depth, key in enumerate(keys):
            if node.kind != "object":
                raise SetupError(
                    f"{self.path}: {'.'.join(keys[:depth])} is not an object; fix the file by "
                    f"hand. Nothing was changed."
                )
            found = [value for name, _, value in node.members if name == key]
            if not found:
                return None
            node = found[-1]
        return node

    def get(self, keys: Sequence[str]) -> JsonValue | None:
        node = self._walk(keys)
        return None if node is None else json.loads(self.text[node.start : node.end])

    # -- setting and removing object members ------------------------------------------------

    def set(self, keys: Sequence[str], value: JsonValue) -> None:
        """Make ``keys`` hold ``value``: replace the value in place, or append a new member."""
        node = self._root()
        for depth, key in enumerate(keys):
            if node.kind != "object":
                raise SetupError(
                    f"{self.path}: {'.'.join(keys[:depth])} is not an object; fix the file by "
                    f"hand. Nothing was changed."
                )
            found = [member for member in node.members if member[0] == key]
            if not found:
                nested: JsonValue = value
                for inner in reversed(keys[depth + 1 :]):
                    nested = {inner: nested}
                self._append_member(node, key, nested)
                return
            node = found[-1][2]
        self._replace(node, value)

    def remove(self, keys: Sequence[str], *, prune: int = 0) -> None:
        """Remove the member at ``keys``; then drop up to ``prune`` enclosing objects left empty."""
        parent = self._walk(keys[:-1])
        if parent is None or parent.kind != "object":
            return
        index = next((i for i, m in enumerate(parent.members) if m[0] == keys[-1]), None)
        if index is None:
            return
        self._delete_entry(parent, [(m[1], m[2]) for m in parent.members], index)
        if prune and len(keys) > 1:
            emptied = self._walk(keys[:-1])
            if emptied is not None and emptied.kind == "object" and not emptied.members:
                self.remove(keys[:-1], prune=prune - 1)

    # -- arrays -----------------------------------------------------------------------------

    def array_items(self, keys: Sequence[str]) -> list[JsonValue]:
        node = self._walk(keys)
        if node is None:
            return []
        if node.kind != "array":
            raise SetupError(f"{self.path}: {'.'.join(keys)} should be a list; fix it by hand")
        return [json.loads(self.text[i.start : i.end]) for i in node.items]

    def append_item(self, keys: Sequence[str], value: JsonValue) -> None:
        node = self._walk(keys)
        if node is None:
            self.set(keys, [value])
            return
        if node.kind != "array":
            raise SetupError(f"{self.path}: {'.'.join(keys)} should be a list; fix it by hand")
        entries = [(item.start, item) for item in node.items]
        indent = self._child_indent(node, entries)
        piece = self._render(value, indent, self._multiline(node, entries))
        self._append_entry(node, entries, piece)

    def replace_item(self, keys: Sequence[str], index: int, value: JsonValue) -> None:
        node = self._walk(keys)
        assert node is not None
        self._replace(node.items[index], value)

    def remove_item(self, keys: Sequence[str], index: int) -> None:
        node = self._walk(keys)
        assert node is not None and node.kind == "array"
        self._delete_entry(node, [(item.start, item) for item in node.items], index)

    # -- splicing helpers -------------------------------------------------------------------

    def _splice(self, start: int, end: int, replacement: str) -> None:
        self.text = self.text[:start] + replacement + self.text[end:]

    def _replace(self, node: _Node, value: JsonValue) -> None:
        old = self.text[node.start : node.end]
        if json.loads(old) != value:
            rendered = self._render(value, self._line_indent(node.start), "\n" in old)
            self._splice(node.start, node.end, rendered)

    def _append_member(self, node: _Node, key: str, value: JsonValue) -> None:
        entries = [(key_start, val) for _, key_start, val in node.members]
        indent = self._child_indent(node, entries)
        rendered = self._render(value, indent, self._multiline(node, entries))
        self._append_entry(node, entries, json.dumps(key, ensure_ascii=False) + ": " + rendered)

    def _multiline(self, node: _Node, entries: list[tuple[int, _Node]]) -> bool:
        """Whether a container is laid out over several lines (an empty one follows the file)."""
        if entries:
            return "\n" in self.text[node.start : node.end]
        return "\n" in self.text.strip()

    def _append_entry(self, node: _Node, entries: list[tuple[int, _Node]], piece: str) -> None:
        multiline = self._multiline(node, entries)
        indent = self._child_indent(node, entries)
        if entries:
            last = entries[-1][1]
            glue = ",\n" + indent if multiline else ", "
            self._splice(last.end, last.end, glue + piece)
        elif multiline:
            closing = "\n" + self._line_indent(node.start)
            self._splice(node.start + 1, node.end - 1, "\n" + indent + piece + closing)
        else:
            self._splice(node.start + 1, node.end - 1, piece)

    def _delete_entry(self, node: _Node, entries: list[tuple[int, _Node]], index: int) -> None:
        start, value = entries[index]
        if len(entries) == 1:
            self._splice(node.start + 1, node.end - 1, "")
        elif index == len(entries) - 1:
            self._splice(entries[index - 1][1].end, value.end, "")
        else:
            self._splice(start, entries[index + 1][0], "")

    def _child_indent(self, node: _Node, entries: list[tuple[int, _Node]]) -> str:
        if entries:
            return self._line_indent(entries[0][0])
        return self._line_indent(node.start) + self.unit

    def _line_indent(self, pos: int) -> str:
        line_start = self.text.rfind("\n", 0, pos) + 1
        line = self.text[line_start:pos]
        return line[: len(line) - len(line.lstrip(" \t"))]

    def _render(self, value: JsonValue, indent: str, multiline: bool) -> str:
        if not multiline:
            return json.dumps(value, ensure_ascii=False)
        rendered = json.dumps(value, ensure_ascii=False, indent=self.unit)
        return rendered.replace("\n", "\n" + indent)


def _indent_unit(text: str) -> str:
    match = re.search(r"\n([ \t]+)[\"\[{\]}]", text)
    if match is None:
        return "  "
    found = match.group(1)
    return "\t" if found.startswith("\t") else " " * min(len(found), 8)


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


class Edit:
    """A change to one file.

    ``apply`` maps the file's current text (None = absent) to its new text. An edit that adds
    to a shared JSON file also returns a memo of what it created (the file, enclosing objects),
    kept in ``~/.osk/setup.json``; removal reads it so that it deletes only what osk added.
    """

    path: Path

    @property
    def key(self) -> str:
        return str(self.path)

    def apply(self, text: str | None, remove: bool, memo: Memo | None) -> tuple[str | None,
                                                                                Memo | None]:
        raise NotImplementedError


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


def _toml_places(text: str) -> list[int]:
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


def _toml_check(path: Path, table: tuple[str, ...]) -> Callable[[str, str | None], None]:
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


# ---------------------------------------------------------------------------------------------
# What each host gets
# ---------------------------------------------------------------------------------------------

def _instructions(front_matter: str, host: str) -> str:
    note = f"<!-- {MARKER}; remove with: osk setup {host} --remove -->\n"
    return f"---\n{front_matter}\n---\n{note}\n{rules_text(host)}"


def _owned_md(host: str) -> Callable[[str], bool]:
    return lambda text: MARKER in text and f"osk setup {host}" in text


def _claude_group(ctx: Context, event: str, host: str) -> dict[str, JsonValue]:
    group: dict[str, JsonValue] = {}
    if event == "session-start":
        group["matcher"] = "startup|resume|clear|compact"
    group["hooks"] = [
        {"type": "command", "command": hook_command(ctx, event, host),
         "timeout": TIMEOUTS[event]}
    ]
    return group


def _group_is_ours(event: str, host: str) -> Callable[[JsonValue], bool]:
    def check(group: JsonValue) -> bool:
        if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
            return False
        handlers = group["hooks"]
        return len(handlers) == 1 and isinstance(handlers[0], dict) and is_our_hook_command(
            handlers[0].get("command"), event, host
        )

    return check


CLAUDE_EVENTS = {"session-start": "SessionStart", "prompt-submit": "UserPromptSubmit",
                 "stop": "Stop"}


def _hook_edits(ctx: Context, host: str, path: Path) -> list[Edit]:
    edits: list[Edit] = []
    for event, name in CLAUDE_EVENTS.items():
        group = _claude_group(ctx, event, host) if ctx.vault is not None else {}
        edits.append(JsonHook(path, name, group, _group_is_ours(event, host)))
    return edits


def _claude(ctx: Context) -> list[Edit]:
    claude_json = ctx.home / ".claude.json"
    entry = mcp_entry(ctx, with_type=True) if ctx.vault else {}
    if ctx.project is None:
        mcp: Edit = JsonMember(claude_json, ("mcpServers", SERVER_NAME), entry)
        settings = ctx.home / ".claude" / "settings.json"
    else:
        # Claude Code's "local" scope: per user and per project, never committed with the repo.
        mcp = JsonMember(claude_json, ("projects", str(ctx.project), "mcpServers", SERVER_NAME),
                         entry)
        settings = ctx.project / ".claude" / "settings.local.json"
    return [mcp, *_hook_edits(ctx, "claude", settings)]


def _codex(ctx: Context) -> list[Edit]:
    base = ctx.codex_dir if ctx.project is None else ctx.project / ".codex"
    config = base / "config.toml"
    body = ""
    if ctx.vault is not None:
        command, args = server_argv(ctx)
        body = (
            f"[mcp_servers.{SERVER_NAME}]\n"
            f"command = {_toml_string(command)}\n"
            f"args = [{', '.join(_toml_string(arg) for arg in args)}]\n"
        )
    table = TextBlock(config, "codex", body, "#", _toml_places,
                      _toml_check(config, ("mcp_servers", SERVER_NAME)))
    return [table, *_hook_edits(ctx, "codex", base / "hooks.json")]


def _toml_string(value: str) -> str:
    # JSON string escapes are a subset of TOML basic-string escapes.
    return json.dumps(value, ensure_ascii=False)


def _kiro(ctx: Context) -> list[Edit]:
    base = ctx.home / ".kiro" if ctx.project is None else ctx.project / ".kiro"
    entry = mcp_entry(ctx) if ctx.vault else {}
    edits: list[Edit] = [
        JsonMember(base / "settings" / "mcp.json", ("mcpServers", SERVER_NAME), entry),
        OwnedFile(base / "steering" / "osk.md", _instructions("inclusion: always", "kiro"),
                  _owned_md("kiro")),
    ]
    if ctx.project is not None:  # Kiro's hooks live in the workspace only
        hooks = base / "hooks"
        ide = _kiro_ide_hook(ctx) if ctx.vault else ""
        edits.append(OwnedFile(hooks / "osk-prompt-submit.kiro.hook", ide, _kiro_hook_is_ours))
        cli = _kiro_cli_hooks(ctx) if ctx.vault else ""
        edits.append(OwnedFile(hooks / "osk.json", cli, _kiro_hook_is_ours))
    return edits


def _kiro_ide_hook(ctx: Context) -> str:
    """The Kiro IDE's agent hook: a shell command on prompt submit (its stdout reaches the
    agent). Its agent-stop trigger is not used: Kiro gives a hook no transcript to capture."""
    hook = {
        "enabled": True,
        "name": "osk-prompt-submit",
        "description": f"osk memory vault: counts turns and asks for reviews ({MARKER})",
        "version": "1.0.0",
        "when": {"type": "promptSubmit"},
        "then": {"type": "runCommand", "command": hook_command(ctx, "prompt-submit", "kiro"),
                 "timeout": TIMEOUTS["prompt-submit"]},
    }
    return json.dumps(hook, indent=2, ensure_ascii=False) + "\n"


def _kiro_cli_hooks(ctx: Context) -> str:
    """Kiro CLI 3's standalone hooks file: session start (injection) and prompt submit."""
    hooks = [
        {"name": f"osk-{event}", "trigger": trigger,
         "action": {"type": "command", "command": hook_command(ctx, event, "kiro")},
         "timeout": TIMEOUTS[event], "enabled": True}
        for event, trigger in (("session-start", "SessionStart"),
                               ("prompt-submit", "UserPromptSubmit"))
    ]
    return json.dumps({"version": "v1", "hooks": hooks}, indent=2, ensure_ascii=False) + "\n"


def _kiro_hook_is_ours(text: str) -> bool:
    """A Kiro hook file is ours when every hook in it is named osk-… and runs `osk hook`."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return False
    hooks = data.get("hooks", [data]) if isinstance(data, dict) else []
    return bool(hooks) and all(
        isinstance(h, dict) and str(h.get("name", "")).startswith("osk-")
        and " hook " in json.dumps(h) for h in hooks
    )


def _antigravity(ctx: Context) -> list[Edit]:
    mcp_path = ctx.home / ".gemini" / "antigravity" / "mcp_config.json"
    entry = mcp_entry(ctx) if ctx.vault else {}
    mcp: Edit = JsonMember(mcp_path, ("mcpServers", SERVER_NAME), entry)
    edits: list[Edit] = [mcp if ctx.project is None else KeptOnRemove(mcp)]
    if ctx.project is None:
        body = rules_text("antigravity")
        edits.append(TextBlock(ctx.home / ".gemini" / "GEMINI.md", "antigravity", body, "<!--"))
    else:
        rules = ctx.project / ".agents" / "rules" / "osk.md"
        edits.append(OwnedFile(rules, _instructions("trigger: always_on", "antigravity"),
                               _owned_md("antigravity")))
    return edits


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


PLANNERS: dict[str, Callable[[Context], list[Edit]]] = {
    "claude": _claude, "codex": _codex, "kiro": _kiro, "antigravity": _antigravity,
}

NOTES = {
    "claude": "Restart Claude Code (or review the hooks in /hooks) so it loads the new hooks.",
    "codex": "Codex runs a new or changed hook only after you trust it: open Codex and run "
             "/hooks to review and trust the three osk hooks.",
    "kiro": "Kiro has no transcript for osk to read: the steering file asks the agent to call "
            "append_raw after each answer. Agent hooks are installed per workspace only "
            "(use --project DIR).",
    "antigravity": "Antigravity has no stable hooks: the rules ask the agent to call "
                   "append_raw after each answer. Its MCP entry is user-level: a project "
                   "setup adds it, and only `osk setup antigravity --remove` removes it.",
}


# ---------------------------------------------------------------------------------------------
# Plan and apply
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    path: Path
    before: str | None  # None: the file does not exist
    after: str | None  # None: the file is deleted

    def diff(self) -> str:
        old = [] if self.before is None else self.before.splitlines(keepends=True)
        new = [] if self.after is None else self.after.splitlines(keepends=True)
        label_old = str(self.path) if self.before is not None else "/dev/null"
        label_new = str(self.path) if self.after is not None else "/dev/null"
        lines = difflib.unified_diff(old, new, label_old, label_new)
        return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
                       for line in lines)


@dataclass(frozen=True)
class Plan:
    host: str
    remove: bool
    changes: tuple[Change, ...]
    note: str
    memos: dict[str, Memo | None] = field(default_factory=dict)  # manifest updates

    @property
    def empty(self) -> bool:
        return not self.changes

    def diff(self) -> str:
        return "".join(change.diff() for change in self.changes)


def plan(host: str, ctx: Context, *, remove: bool = False) -> Plan:
    """Compute what `osk setup HOST` would change. Reads files; writes nothing."""
    if host not in PLANNERS:
        raise SetupError(f"unknown host {host!r}; choose one of {', '.join(HOSTS)}")
    if not remove and ctx.vault is None:
        raise SetupError("a vault is needed to set up a host: pass --vault or set OSK_VAULT")
    manifest = _load_manifest(ctx.home)
    texts: dict[Path, str | None] = {}
    originals: dict[Path, str | None] = {}
    memos: dict[str, Memo | None] = {}
    edits = PLANNERS[host](ctx)
    for edit in reversed(edits) if remove else edits:  # removal undoes installs in reverse
        if edit.path not in texts:
            texts[edit.path] = originals[edit.path] = _read(edit.path)
        before = texts[edit.path]
        after, memo = edit.apply(before, remove, manifest.get(edit.key))
        texts[edit.path] = after
        if after != before and (remove or edit.key not in manifest):
            memos[edit.key] = memo
    changes = tuple(
        Change(path, originals[path], after)
        for path, after in texts.items()
        if after != originals[path]
    )
    return Plan(host, remove, changes, NOTES[host], memos if changes else {})


def manifest_path(home: Path) -> Path:
    return home / ".osk" / "setup.json"


def _load_manifest(home: Path) -> dict[str, Memo]:
    text = _read(manifest_path(home))
    if text is None:
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return {}  # a damaged record only costs exactness of a later removal
    return data if isinstance(data, dict) else {}


def _save_manifest(home: Path, memos: dict[str, Memo | None]) -> None:
    if not memos:
        return
    manifest = _load_manifest(home)
    for key, memo in memos.items():
        if memo is None:
            manifest.pop(key, None)
        else:
            manifest[key] = memo
    atomic_write(manifest_path(home), json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def _read(path: Path) -> str | None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SetupError(f"cannot read {path}: {exc.strerror}; nothing was changed") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SetupError(f"{path} is not UTF-8 text; fix it by hand. Nothing was changed.") from exc


def backup_root(home: Path) -> Path:
    return home / ".osk" / "backups"


def apply(plan_: Plan, ctx: Context) -> Path | None:
    """Write the plan. Existing files are copied to a backup folder first; returns that folder."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    backup_dir = backup_root(ctx.home) / f"{stamp}-{plan_.host}"
    backed_up = False
    for change in plan_.changes:
        if _read(change.path) != change.before:
            raise SetupError(
                f"{change.path} changed while osk setup was running; run it again. "
                f"Nothing more was written."
            )
    for change in plan_.changes:
        if change.before is not None:
            target = backup_dir / _backup_name(change.path, ctx.home)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(change.path, target)
            backed_up = True
    memos = dict(plan_.memos)
    created_dirs = _load_manifest(ctx.home).get("created-folders", {})
    assert isinstance(created_dirs, dict)
    for change in plan_.changes:
        if change.after is None:
            change.path.unlink(missing_ok=True)
            _remove_empty(created_dirs.pop(str(change.path), []))
        else:
            missing = _missing_dirs(change.path.parent)
            atomic_write(change.path, change.after.encode("utf-8"))
            if missing:
                created_dirs[str(change.path)] = missing
    memos["created-folders"] = created_dirs or None
    _save_manifest(ctx.home, memos)
    return backup_dir if backed_up else None


def _missing_dirs(folder: Path) -> list[str]:
    missing = []
    while not folder.exists():
        missing.append(str(folder))
        folder = folder.parent
    return missing  # deepest first


def _remove_empty(folders: object) -> None:
    for folder in folders if isinstance(folders, list) else []:
        try:
            Path(folder).rmdir()
        except OSError:
            return  # not empty (the user put something there) or already gone


def _backup_name(path: Path, home: Path) -> Path:
    try:
        return Path("home") / path.relative_to(home)
    except ValueError:
        return Path("abs") / str(path).lstrip("/\\").replace(":", "")


# ---------------------------------------------------------------------------------------------
# Reading back what is installed (for `osk doctor`)
# ---------------------------------------------------------------------------------------------


def detected_hosts(ctx: Context) -> list[str]:
    """Hosts that look installed on this machine: their config folder or their CLI exists."""
    signs = {
        "claude": ([ctx.home / ".claude", ctx.home / ".claude.json"], ["claude"]),
        "codex": ([ctx.codex_dir], ["codex"]),
        "kiro": ([ctx.home / ".kiro"], ["kiro", "kiro-cli"]),
        "antigravity": ([ctx.home / ".gemini" / "antigravity"], ["antigravity", "agy"]),
    }
    found = []
    for host, (paths, commands) in signs.items():
        if any(p.exists() for p in paths) or any(shutil.which(c) for c in commands):
            found.append(host)
    return found


def installed_vaults(host: str, ctx: Context) -> list[str]:
    """Vault paths our MCP entries for ``host`` point at (empty when not registered)."""
    vaults = []
    for edit in PLANNERS[host](ctx):
        text = _read(edit.path)
        if text is None:
            continue
        args: object = None
        if isinstance(edit, JsonMember):
            entry = JsonText(text, edit.path).get(edit.keys)
            args = entry.get("args") if isinstance(entry, dict) else None
        elif isinstance(edit, TextBlock) and edit.comment == "#":
            try:
                entry = tomllib.loads(text).get("mcp_servers", {}).get(SERVER_NAME)
            except tomllib.TOMLDecodeError:
                entry = None
            args = entry.get("args") if isinstance(entry, dict) else None
        if isinstance(args, list) and "--vault" in args:
            index = args.index("--vault")
            if index + 1 < len(args):
                vaults.append(str(args[index + 1]))
    return vaults
