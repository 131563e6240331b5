"""The hook log: one line per failure or warning, in device state (``.osk/logs/hooks.log``).

Hooks never fail the user's turn, so this file is where a failure becomes visible (``osk doctor``
reads its tail). Lines carry no conversation content, only where and what went wrong. The file
is rotated once it passes a size, keeping one previous generation.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from osk.store.vault import Vault

MAX_BYTES = 1024 * 1024
MAX_WARNINGS = 5  # per hook run; more are summarised in one line


def log_path(vault: Vault) -> Path:
    return vault.state("logs", "hooks.log")


def write(vault: Vault | None, host: str, event: str, message: str, *, echo: bool = False) -> None:
    """Append one line; never raises (a logging failure must not fail the hook either)."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    line = f"{stamp} {host or '-'} {event or '-'}: {' '.join(message.split())}\n"
    if echo:
        try:
            sys.stderr.write(f"osk hook: {line.split(': ', 1)[-1]}")
        except (OSError, ValueError):
            pass
    if vault is None:
        return
    path = log_path(vault)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            if path.stat().st_size > MAX_BYTES:
                os.replace(path, path.with_name(path.name + ".1"))
        except FileNotFoundError:
            pass
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(line)
    except OSError:
        pass


def warnings(vault: Vault, host: str, event: str, items: tuple[str, ...] | list[str]) -> None:
    for item in list(items)[:MAX_WARNINGS]:
        write(vault, host, event, f"warning: {item}")
    if len(items) > MAX_WARNINGS:
        write(vault, host, event, f"warning: {len(items) - MAX_WARNINGS} more like these")
