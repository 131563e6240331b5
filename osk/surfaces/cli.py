"""The terminal surface: `osk COMMAND …`.

Each command group lives in ``osk/surfaces/commands/<group>.py`` with a ``register(subparsers)``
function; handlers import the engine lazily so ``osk --help`` and ``osk hook …`` stay fast. Errors
are mapped to exit codes here and nowhere else: an ``OskError`` prints ``Error: …`` to stderr and
returns its ``exit_code``; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # argparse is imported lazily: `osk hook …` never builds a parser
    import argparse

def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or, given a command's name, of its group only (what one
    run needs: `osk search` then imports no other group), or of that command alone when its
    group registers each command on its own (``COMMANDS``)."""
    import argparse
    import importlib

    # Imported here, not at the top: each command module imports this one, and `osk hook …`
    # must not pay for them.
    from osk.surfaces.commands import GROUPS, group_of

    parser = argparse.ArgumentParser(
        prog="osk", description="A local-first memory vault for coding agents."
    )
    parser.add_argument("--vault", help="the vault folder (default: $OSK_VAULT, then the "
                                        "current directory's ancestors)")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    only = group_of(command) if command is not None else None
    for group in GROUPS if only is None else (only,):
        module = importlib.import_module(f"osk.surfaces.commands.{group}")
        alone = getattr(module, "COMMANDS", {}).get(command) if only is not None else None
        (alone or module.register)(sub)
    return parser


def _command_named(args: list[str]) -> str | None:
    """The command word of ``osk [--vault V] [--version] COMMAND …``; None when something
    else comes first (help, an abbreviated option), for which the whole parser is built."""
    position = 0
    while position < len(args):
        word = args[position]
        if word == "--vault":
            position += 2
        elif word.startswith("--vault=") or word == "--version":
            position += 1
        else:
            return None if word.startswith("-") else word
    return None


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["hook"]:
        return _hook(args_list[1:])
    served = _plain_mcp(args_list)
    if served is not None:
        # A host starts `osk mcp` and waits for its handshake: skip building every command's
        # parser (about a quarter of what runs before the first answer).
        from pathlib import Path

        from osk.surfaces.stdio import serve

        return _handled(lambda: serve(served[0], Path.cwd()))
    command = _command_named(args_list)
    if command == "search":  # the commonest run: read without argparse when it is plain
        from osk.surfaces.commands.search import plain_search

        plain = plain_search(args_list)
        if plain is not None:
            no_collection_at_exit()
            return _handled(lambda: plain.handler(plain))
    parser = build_parser(command)
    args = parser.parse_args(args_list)
    if args.version:
        from osk import __version__

        print(f"osk {__version__}")
        return 0
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 0
    return _handled(lambda: handler(args))


def _hook(args: list[str]) -> int:
    """Run one hook. Hooks run on every turn of a user's session: no argparse, no engine, and
    no cycle collector, from the first import on (a hook makes no cycles worth a pass; the
    collector's passes were a tenth of a session start's CPU, bench/hook_bench.py)."""
    import gc

    no_collection_at_exit()
    was_on = gc.isenabled()
    gc.disable()
    try:
        from osk.hooks.main import run as run_hook

        return run_hook(args)
    finally:
        if was_on:  # a caller running main in a long-lived process (the tests) keeps it
            gc.enable()


def no_collection_at_exit() -> None:
    """Skip the cycle collection Python runs as the process ends (5-10 ms of a fresh
    `osk search`, a hook or a read from the store, over objects the exit frees anyway): what
    is alive then is frozen, out of the collector's reach. At exit, not now: a caller that
    runs ``main`` in a long-lived process (the tests) keeps its collector until it ends too."""
    import atexit
    import gc

    atexit.register(gc.freeze)


def _plain_mcp(args: list[str]) -> tuple[str | None] | None:
    """The vault of a plain `osk [--vault V] mcp [--vault V]` (None inside: not given); None
    for anything else, which argparse then reads (and explains)."""
    rest = [a for a in args if a != "mcp"]
    if len(rest) != len(args) - 1:
        return None
    if not rest:
        return (None,)
    if len(rest) == 1 and rest[0].startswith("--vault="):
        return (rest[0].removeprefix("--vault="),)
    if len(rest) == 2 and rest[0] == "--vault" and args.index("mcp") != 1:
        return (rest[1],)
    return None


def _handled(run: Callable[[], int | None]) -> int:
    """Run a command: a refusal prints one line and exits with its code."""
    from osk.errors import OskError
    from osk.store.vault import disk_error

    try:
        try:
            return int(run() or 0)
        except OSError as exc:  # a full or read-only disk is named, not a traceback
            disk = disk_error(exc)
            if disk is None:
                raise
            raise disk from exc
    except OskError as exc:
        rule = f" (rule: {exc.rule})" if exc.rule else ""
        print(f"Error: {exc}{rule}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("Interrupted.", file=sys.stderr)
        return 130




if __name__ == "__main__":
    raise SystemExit(main())
