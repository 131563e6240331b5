"""The scope a hook's session writes to: resolved from the working directory's session key and
the routing ledger when a session starts, and kept per conversation so a prompt pays one stat
of the routing ledger, not Git and the ledger, while nothing changed.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from osk.hooks.adapter_contract import HookPayload
from osk.store.fastclass import dataclass
from osk.store.vault import Vault


@dataclass(frozen=True)
class Scoped:
    key: str
    scope: str          # the scope the session writes to ("" when it cannot be decided)
    bound: bool         # the routing ledger binds the key (else the scope is named after it)
    problem: str = ""


def resolve_scope(vault: Vault, payload: HookPayload, *, claim: bool = True) -> Scoped | None:
    """The session key of the working directory and the scope it writes to."""
    from osk.errors import LedgerFork
    from osk.provenance import sessions

    if payload.cwd is None:
        return None
    key = sessions.session_key(payload.cwd, vault if claim else None).key
    try:
        scope, bound = sessions.Routing(vault).route(key)
        return Scoped(key, scope, bound)
    except LedgerFork as exc:  # two devices bound the key differently: say so, inject no scope
        return Scoped(key, "", False, problem=str(exc))


# -- the hook ----------------------------------------------------------------------------------
def session_scope(vault: Vault, payload: HookPayload, cached: Sequence[object] | None,
                  dry_run: bool) -> str:
    """The scope this conversation's session start resolved, while the routing ledger is
    unchanged since (one stat instead of Git and the ledger on every prompt); else resolved
    again."""
    routing = _routing_stat(vault)
    if cached and len(cached) == 3 and list(cached[1:]) == [str(payload.cwd), routing]:
        return str(cached[0])
    scoped = resolve_scope(vault, payload, claim=not dry_run)
    return scoped.scope if scoped is not None else ""


def scope_entry(vault: Vault, payload: HookPayload, scope: str) -> list[object]:
    """What ``session_scope`` accepts later: [scope, cwd, routing ledger stat]."""
    return [scope, str(payload.cwd), _routing_stat(vault)]


def _routing_stat(vault: Vault) -> list[int]:
    try:
        st = os.stat(vault.ledger_path("routing"))
    except OSError:
        return []
    return [st.st_size, st.st_mtime_ns, st.st_ino]
