"""A JSON text editor that keeps every byte outside the member it touches.

``JsonText`` holds one JSON document as text and edits it by splicing: a member set or removed,
an array item appended, replaced or removed, each rendered in the indentation the file already
uses. Nothing is re-serialised, so the user's formatting, key order and spacing survive every
edit. Invalid JSON, or a document that is not an object at the top, is refused with its path
(SetupError). The edits built on it are ``osk.hosts.configtext``'s.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from osk.errors import SetupError

JsonValue = object


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


_CLOSING = {"{": ("}", "object"), "[": ("]", "array")}


def _parse(text: str, pos: int) -> _Node:
    """The value at ``pos`` and, for an object or array, its members or items with their
    offsets. ``text`` is valid JSON (``JsonText`` checks it first)."""
    pos = _skip(text, pos)
    opening = text[pos : pos + 1]
    if opening not in _CLOSING:
        _, end = _DECODER.raw_decode(text, pos)
        return _Node(pos, end, "scalar")
    closing, kind = _CLOSING[opening]
    node = _Node(pos, pos, kind)
    pos = _skip(text, pos + 1)
    while text[pos] != closing:
        if kind == "object":
            key_start = pos
            key, pos = _DECODER.raw_decode(text, pos)
            value = _parse(text, _skip(text, pos) + 1)  # past the colon
            node.members.append((key, key_start, value))
        else:
            value = _parse(text, pos)
            node.items.append(value)
        pos = _skip(text, value.end)
        if text[pos] == ",":
            pos = _skip(text, pos + 1)
    node.end = pos + 1
    return node


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
        data: dict[str, JsonValue] = json.loads(self.text)  # an object: checked when read
        return data

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
