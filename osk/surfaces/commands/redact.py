"""`osk redact`: the person removes a pasted secret from a raw record (terminal only)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from osk.verbs.redaction import NodeOutcome, Outcome, Remaining


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "redact", help="replace a text you type in a raw record by [REDACTED:by-person], "
                       "record it in the redactions ledger, and say how to purge Git history "
                       "(terminal only)")
    parser.add_argument("target", help="_raw/KEY/CONVERSATION#Round N (one round), "
                                       "_raw/KEY/CONVERSATION (every round), or a node's "
                                       "title or id (its body and summary)")
    parser.set_defaults(handler=run_redact)


def run_redact(args: argparse.Namespace) -> int:
    from osk.engine.vaults import open_vault
    from osk.surfaces.commands.common import typed_back
    from osk.verbs import redaction
    from osk.verbs.person import at_terminal

    vault = open_vault(args.vault)
    target = redaction.parse(args.target)
    at_terminal("redact")  # before asking anything
    span = read_hidden("Text to redact (not shown as you type): ")
    shown = redaction.preview(vault, target, span)
    where = describe(shown, len(span))
    code = redaction.code_of(shown)
    if not typed_back(code, f"Type {code} to redact (anything else changes nothing): "):
        print("Nothing redacted.")
        return 0
    done = redaction.redact(vault, target, span, shown=shown)
    print(f"Redacted in {where}; recorded in _ledger/{redaction.LEDGER}.jsonl "
          f"({done.record_id}).")
    if done.dropped:
        print(f"Deleted this device's caches of the vault (rebuilt on the next read; the "
              f"search index keeps a text's words): {', '.join(done.dropped)}.")
    report_remaining(redaction.remaining(vault, span, where), span)
    print(redaction.purge_instructions(vault, where))
    return 0


def report_remaining(left: Sequence[Remaining], span: str) -> None:
    """Say exactly where the text still is, grouped by why osk redact left it; a name that
    holds the text is shown with the text masked (it is never printed)."""
    from osk.verbs.redaction import WHY_LEFT

    if not left:
        print("No other file or folder name in the vault holds the text (device state "
              "included); Git history still does.")
        return
    print(f"The text is still in {len(left)} place(s) osk redact does not change:")
    for place, why in WHY_LEFT.items():
        here = [r for r in left if r.place == place]
        if here:
            print(f"  {why}:")
            for found in here:
                line = "" if found.line is None else f" line {found.line}"
                print(f"    {found.path.replace(span, '<the text>')}{line}")


def describe(shown: Outcome | NodeOutcome, length: int) -> str:
    """Print what a redaction would change; return the vault path it changes."""
    from osk.verbs.redaction import NodeOutcome

    if isinstance(shown, NodeOutcome):
        change = shown.change
        print(f"In {change.title!r} ({change.path}): {change.spans} occurrence(s) of a "
              f"{length}-character text in its body or summary; {len(change.purged)} recorded "
              f"version(s) in _objects/ hold it and will be purged.")
        where = change.path
    else:
        spans = sum(r.spans for r in shown.rounds)
        print(f"In {shown.target.path}: {spans} occurrence(s) of a {length}-character text in "
              f"round(s) {', '.join(str(r.number) for r in shown.rounds)}.")
        where = shown.target.path
    if shown.affected:
        print(f"{len(shown.affected)} citation(s) of it will become recheck candidates "
              f"(reason: target-redacted).")
    return where


def read_hidden(prompt: str) -> str:
    """A line from the terminal with echo off (the text is a secret). Reads stdin itself,
    not /dev/tty as getpass does, so the terminal checked by require_person is the one read."""
    try:
        import termios
    except ImportError:  # Windows: getpass reads the console without echo
        import getpass

        return getpass.getpass(prompt)
    fd = sys.stdin.fileno()
    old = termios.tcgetattr(fd)
    quiet = termios.tcgetattr(fd)
    quiet[3] &= ~termios.ECHO
    sys.stdout.write(prompt)
    sys.stdout.flush()
    termios.tcsetattr(fd, termios.TCSANOW, quiet)  # TCSANOW: keep what was typed ahead
    try:
        line = sys.stdin.readline()
    finally:
        termios.tcsetattr(fd, termios.TCSANOW, old)
        sys.stdout.write("\n")
    return line.rstrip("\r\n")
