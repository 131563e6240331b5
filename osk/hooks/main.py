"""``osk hook {session-start,prompt-submit,stop} --host HOST [--vault PATH] [--dry-run]``.

The host runs this on every session start, prompt and end of turn, with its JSON payload on
stdin. It must be quick and it must never get in the user's way: whatever goes wrong is written
as one line to the hook log in device state (and stderr) and the command exits 0 with nothing
on stdout. Only the text meant for the model is printed, in the host's output format, and the
Stop hook prints nothing at all.

``--dry-run`` parses and resolves everything but writes nothing (``osk doctor`` uses it).

This module is imported before anything else of osk on the hook path: standard library and
osk's light modules only, each imported when the event needs it.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from osk.hooks import hooklog
from osk.hooks.adapter_contract import (
    EVENTS,
    REFRESH_BUDGET,
    REFRESH_WAIT,
    Adapter,
    Event,
    HookPayload,
)
from osk.hooks.forks import in_growth_fork
from osk.store.fastclass import dataclass
from osk.store.vault import Vault

if TYPE_CHECKING:
    from osk.hooks.recall.per_prompt import Recall

USAGE = ("usage: osk hook {session-start,prompt-submit,stop} --host "
         "{claude,codex,kiro,antigravity} [--vault PATH] [--dry-run]  (payload JSON on stdin)")
MAX_STDIN = 16 * 1024 * 1024


class UsageError(ValueError):
    pass


@dataclass(frozen=True)
class Request:
    event: Event
    host: str
    vault: str | None = None
    dry_run: bool = False


def run(argv: Sequence[str]) -> int:
    """Run one hook. Always returns 0: a hook must never fail or block the user's turn."""
    try:
        request = parse_args(argv)
    except UsageError as exc:
        if str(exc) == "help":
            print(USAGE)
            return 0
        hooklog.write(None, "", "", f"{exc}; {USAGE}", echo=True)
        return 0
    vault: Vault | None = None
    try:
        from osk.store.vault import locate

        vault = locate(request.vault)
        output = dispatch(vault, request, read_stdin(), os.environ)
    except Exception as exc:  # the user's turn must go on: log it, exit 0, print nothing
        from osk.store.vault import disk_error

        disk = disk_error(exc)  # a full or read-only vault: say so, in one line
        hooklog.write(vault, request.host, request.event,
                      f"failed: {exc.__class__.__name__}: {exc}" if disk is None else
                      f"failed: {disk}", echo=True)
        return 0
    if output:
        try:
            sys.stdout.write(output)
            sys.stdout.flush()
        except (BrokenPipeError, OSError) as exc:
            hooklog.write(vault, request.host, request.event, f"could not write output: {exc}")
    return 0


def parse_args(argv: Sequence[str]) -> Request:
    args = list(argv)
    if not args or args[0] in ("-h", "--help"):
        raise UsageError("help")
    event, rest = args[0], args[1:]
    if event not in EVENTS:
        raise UsageError(f"unknown hook event {event!r}")
    options: dict[str, str] = {}
    dry_run = False
    index = 0
    while index < len(rest):
        arg = rest[index]
        if arg == "--dry-run":
            dry_run = True
        elif arg.startswith("--") and "=" in arg:
            name, value = arg[2:].split("=", 1)
            options[name] = value
        elif arg in ("--host", "--vault") and index + 1 < len(rest):
            options[arg[2:]] = rest[index + 1]
            index += 1
        else:
            raise UsageError(f"unexpected argument {arg!r}")
        index += 1
    unknown = set(options) - {"host", "vault"}
    if unknown:
        raise UsageError(f"unknown option(s) {sorted(unknown)}")
    if "host" not in options:
        raise UsageError("--host is required")
    from osk.hooks.adapters import HOSTS

    if options["host"] not in HOSTS:
        raise UsageError(f"unknown host {options['host']!r}")
    return Request(event, options["host"], options.get("vault"), dry_run)


def read_stdin() -> bytes:
    stream = sys.stdin
    if stream is None or stream.isatty():  # run by hand: there is no payload to wait for
        return b""
    return stream.buffer.read(MAX_STDIN)


def decode_payload(raw: bytes) -> Mapping[str, object]:
    try:
        text = raw.decode("utf-8").strip()
        data = json.loads(text) if text else {}
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"the hook payload on stdin is not JSON text ({exc}); hosts send one "
                         f"JSON object, so this hook was run by hand or by another program"
                         ) from None
    if not isinstance(data, dict):
        raise ValueError(f"the hook payload is a JSON {type(data).__name__}, not an object")
    return data


def dispatch(vault: Vault, request: Request, raw: bytes, env: Mapping[str, str]) -> str:
    """The text to print for this hook (already in the host's format), or ""."""
    from osk.hooks.adapters import get

    adapter = get(request.host)
    payload = adapter.payload(request.event, decode_payload(raw), env)
    if in_growth_fork(env):
        return ""  # a background review's own turns are neither captured, counted nor primed
    if request.event == "stop":
        stop(vault, adapter, payload, request.dry_run)
        return ""
    if request.event == "prompt-submit":
        from osk.hooks.cadence import count_prompt

        recalled = recall_or_nothing(vault, adapter, payload, request.dry_run)
        counted = count_prompt(vault, adapter, payload, dry_run=request.dry_run,
                               also=recalled.note if recalled.note else None)
        if recalled.note and not counted.noted:
            recalled.save()
        return adapter.render("prompt-submit",
                              "\n\n".join(t for t in (recalled.block, counted.reminder) if t))
    from osk.hooks.inject import session_start

    return adapter.render("session-start",
                          session_start(vault, adapter, payload, dry_run=request.dry_run))


def recall_or_nothing(vault: Vault, adapter: Adapter, payload: HookPayload,
                      dry_run: bool) -> Recall:
    """The recall block; a failure is logged and costs only the block, never the reminder."""
    from osk.hooks.recall.per_prompt import Recall, recall_for

    try:
        return recall_for(vault, adapter, payload, dry_run=dry_run)
    except Exception as exc:  # recall is a help, never a reason to lose the turn's reminder
        hooklog.write(vault, adapter.name, "prompt-submit",
                      f"recall failed: {exc.__class__.__name__}: {exc}")
        return Recall()




def stop(vault: Vault, adapter: Adapter, payload: HookPayload, dry_run: bool) -> None:
    from osk.hooks.stop import capture_stop

    captured = capture_stop(vault, adapter, payload, dry_run=dry_run)
    if captured.warnings:
        hooklog.warnings(vault, adapter.name, "stop", captured.warnings)
    if captured.written and not dry_run:
        index_rounds(vault, adapter)
    if captured.final_answer and not dry_run:
        after_final_answer(vault, adapter, payload)


def index_rounds(vault: Vault, adapter: Adapter) -> None:
    """Add the rounds just captured to the round index now, after the turn, so the next
    prompt's recall finds them indexed (osk.search.rounds) instead of reading the record."""
    from osk.search.rounds import RoundIndex

    try:
        RoundIndex(vault).refresh(timeout=REFRESH_WAIT, budget=REFRESH_BUDGET)
    except Exception as exc:  # the next search or prompt indexes them instead
        hooklog.write(vault, adapter.name, "stop", f"round index not updated: {exc}")


def after_final_answer(vault: Vault, adapter: Adapter, payload: HookPayload) -> None:
    """Tell background growth a final answer was captured (it may start a review)."""
    from osk.hooks import growth

    growth.on_final_answer(vault, host=adapter.name, session_id=payload.session_id,
                           transcript_path=payload.transcript_path,
                           cwd=payload.cwd if payload.cwd is not None else Path.cwd())
