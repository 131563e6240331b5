"""What every command group shares: the one ``--json`` and ``--scope``, what ``--json``
prints, and the code a person types back before a verb that decides.

Below ``osk.surfaces.cli`` (which routes to the groups) so a group never imports the router.
"""

from __future__ import annotations

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
    import dataclasses
    from pathlib import Path

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)
                if not f.name.startswith("_")}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value
