"""What every command group shares: the one ``--json`` and ``--scope``, what ``--json``
prints, the code a person types back before a verb that decides, and the progress bar of a
long run (import, embed, reindex).

Below ``osk.surfaces.cli`` (which routes to the groups) so a group never imports the router.
"""

from __future__ import annotations

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
