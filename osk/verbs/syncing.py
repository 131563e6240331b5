"""`osk sync`'s verbs as the surfaces call them: one cycle now (``once``), the daemon, and where
the vault stands without touching the network (``status``). The sync wing (``osk/sync/``) does
the work; this is its face above the engine, so a command reaches it the way it reaches every
other verb, and here what a cycle landed reaches the index (``caught_up``).
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable

from osk.errors import OskError
from osk.store.vault import Vault
from osk.sync.cycle import DEFAULT_REMOTE, sync_once
from osk.sync.cycle_state import SyncResult, index_owed, settle_index
from osk.sync.daemon import daemon as sync_daemon
from osk.sync.daemon import status

__all__ = ["caught_up", "daemon", "once", "status"]


def once(vault: Vault, *, remote: str = DEFAULT_REMOTE, accept_rewrite: bool = False
         ) -> SyncResult:
    """One cycle (``sync_once``), then the index takes what it landed."""
    result = sync_once(vault, remote=remote, accept_rewrite=accept_rewrite)
    caught_up(vault, result)
    return result


def daemon(vault: Vault, *, interval: float, poll: float, max_cycles: int | None,
           remote: str, stop: threading.Event, report: Callable[[str], None]) -> int:
    """The daemon (``osk.sync.daemon.daemon``); after each cycle the index takes what it
    landed, in a process of its own (``caught_up_apart``)."""
    return sync_daemon(vault, interval=interval, poll=poll, max_cycles=max_cycles,
                       remote=remote, stop=stop, report=report, after=caught_up_apart)


def caught_up(vault: Vault, result: SyncResult) -> None:
    """While a landing of nodes or ledgers from another device is owed a catch-up (its note,
    ``index_owed``, written before it moved a file: this cycle's, or an earlier one whose
    catch-up failed or never ran), bring the stores a fresh process reads up to them
    (``Engine.catch_up``): the next `osk search`, `osk read` or prompt's recall then answers
    from them instead of opening an engine. The sync is done either way; a failure here is
    told as a notice, tried again after the next cycle, and meanwhile the next engine takes
    them in."""
    _settled(vault, result, lambda: _catch_up(vault))


def caught_up_apart(vault: Vault, result: SyncResult) -> None:
    """``caught_up`` in a child process, for the daemon: it runs for days, and an engine's
    catalog and index, once loaded, leave a process's memory high after they are dropped
    (49 MB where it was 23, at 10,000 nodes)."""
    _settled(vault, result, lambda: _catch_up_apart(vault))


def _settled(vault: Vault, result: SyncResult, catch_up: Callable[[], str | None]) -> None:
    """``catch_up`` while the index is owed one; the note cleared once it succeeded."""
    owed = index_owed(vault)
    if owed is None:
        return
    problem = catch_up()
    _told(result, problem)
    if problem is None:
        settle_index(vault, owed)


def _catch_up_apart(vault: Vault) -> str | None:
    """``_catch_up`` in ``python -m osk.verbs.syncing VAULT``; what went wrong, or None."""
    try:
        done = subprocess.run([sys.executable, "-m", __name__, str(vault.root)],
                              capture_output=True, text=True, encoding="utf-8", check=False)
    except OSError as exc:  # the daemon's errors are told, never fatal
        return f"the catch-up process did not start: {exc}"
    if done.returncode == 0:
        return None
    lines = done.stderr.strip().splitlines()
    return lines[-1] if lines else f"exit status {done.returncode}"


def _catch_up(vault: Vault | str) -> str | None:
    """``Engine.catch_up`` on ``vault`` (a path: checked to be one first); what went wrong, or
    None."""
    from osk.engine.core import Engine

    try:
        Engine.open(vault, claim=False, look=False).catch_up()  # persist walks first
    except (OskError, OSError) as exc:
        return str(exc)
    return None


def _told(result: SyncResult, problem: str | None) -> None:
    if problem is not None:
        result.notices.append(f"the search index has not taken what landed yet ({problem}); "
                              "the next search takes it in")


if __name__ == "__main__":  # caught_up_apart's child: python -m osk.verbs.syncing VAULT
    trouble = _catch_up(sys.argv[1])
    if trouble is not None:
        print(trouble, file=sys.stderr)
        sys.exit(1)
