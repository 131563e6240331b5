"""What every command group shares: the one ``--json`` and ``--scope``, what ``--json``
prints, the code a person types back before a verb that decides, and the progress bar of a
long run (import, embed, reindex).

Below ``osk.surfaces.cli`` (which routes to the groups) so a group never imports the router.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:  # a plain `osk search` builds no parser (osk.surfaces.commands.search)
    import argparse


def typed_back(code: str, question: str) -> bool:
    """Ask the person to type ``code`` back (the person's verbs that decide: approve, revert,
    redact); an end of input or anything else decides nothing."""
    try:
        answer = input(question)
    except EOFError:
        answer = ""
    return answer.strip().upper() == code


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    """The one definition of --json, shared by every command that can emit it."""
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")


def add_scope_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scope", help="act for this scope (default: the current repository's)")


def json_text(value: object) -> str:
    """What --json prints: engine results (dataclasses, containers, paths) as indented JSON."""
    import json

    return json.dumps(_plain(value), ensure_ascii=False, indent=2)


def print_json(value: object, stream: TextIO | None = None) -> None:
    """``json_text(value)`` and a line end written to ``stream`` (standard output) a piece at a
    time: a list in ``value`` may be an iterator, drawn as it is written, so a long one is
    never held whole in any form (``osk import --json`` of 100,000 nodes: the whole text, its
    pieces and a dict a node took 120 MB above the import's own peak)."""
    import sys

    out = sys.stdout if stream is None else stream
    for piece in json_pieces(value):
        out.write(piece)
    out.write("\n")


def json_pieces(value: object, level: int = 0) -> Iterator[str]:
    """``json_text(value)`` in pieces, the same text (``json.dumps`` writes it whole, some
    three times faster: what a short answer takes); an iterator in ``value`` is a list."""
    plain = value if isinstance(value, Iterator) else _plain(value)
    if isinstance(plain, dict):
        pairs: Iterator[tuple[str | None, object]] = iter(plain.items())
        opener, closer = "{", "}"
    elif isinstance(plain, (list, Iterator)):
        pairs = ((None, item) for item in plain)
        opener, closer = "[", "]"
    else:
        yield _scalar_json(plain)
        return
    inner = "\n" + "  " * (level + 1)
    first = True
    for key, item in pairs:
        yield (opener if first else ",") + inner
        first = False
        if key is not None:
            yield _scalar_json(key) + ": "
        yield from json_pieces(item, level + 1)
    yield opener + closer if first else "\n" + "  " * level + closer


def _scalar_json(value: object) -> str:
    global _SCALAR
    if _SCALAR is None:
        import json

        _SCALAR = json.JSONEncoder(ensure_ascii=False).encode  # one encoder, not one a value
    return _SCALAR(value)


_SCALAR: Callable[[object], str] | None = None


def _plain(value: object) -> object:
    from pathlib import Path

    if value is None or isinstance(value, (str, int, float)):
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    made = getattr(type(value), "__fastclass_fields__", None)
    if made is not None:  # its fields without importing dataclasses (osk.store.fastclass)
        return {f.name: _plain(getattr(value, f.name)) for f in made
                if not f.name.startswith("_")}
    if hasattr(type(value), "__dataclass_fields__"):
        import dataclasses  # here: `osk search --json` prints plain values and needs none

        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)
                    if not f.name.startswith("_")}
    return value


class Progress:
    """A one-line progress bar on a terminal; a line per tenth of the way otherwise."""

    WIDTH = 30

    def __init__(self, stream: TextIO, label: str = "importing") -> None:
        self.stream = stream
        self.label = label
        self.tty = stream.isatty()
        self.shown = -1

    def update(self, done: int, total: int) -> None:
        if total <= 0:
            return
        share = done / total
        if self.tty:
            filled = int(share * self.WIDTH)
            self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (self.WIDTH - filled)}] "
                              f"{done}/{total}")
            self.stream.flush()
        elif int(share * 10) > self.shown:
            self.shown = int(share * 10)
            print(f"{self.label}: {done}/{total} ({share:.0%})", file=self.stream)

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()
