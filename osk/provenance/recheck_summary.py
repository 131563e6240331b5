"""The recheck summary that hooks read: this device's open recheck candidates, per scope.

``osk.provenance.rechecks`` writes it (device state, ``.osk/rechecks/summary.json``) after every
pass; the session-start notes and per-prompt recall read it here, with the standard library only, so
a hook never loads the ledger machinery. It reflects the vault as of the last engine call on this
device; a hand edit made since shows up after the next one.
"""

from __future__ import annotations

import json

from osk.store.fsutil import stat_key
from osk.store.vault import Vault

SUMMARY_FILE = ("rechecks", "summary.json")

# One hook process asks several times (the session start's notes, the digest's markers and its
# most cited nodes): the file is parsed once while its stat is unchanged.
_read: dict[str, tuple[tuple[int, int, int], dict[str, object]]] = {}


def _summary(vault: Vault) -> dict[str, object]:
    path = vault.state(*SUMMARY_FILE)
    key = stat_key(path)
    if key is None:
        return {}
    cached = _read.get(str(path))
    if cached is not None and cached[0] == key:
        return cached[1]
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    data = data if isinstance(data, dict) else {}
    _read[str(path)] = (key, data)
    return data


def scopes(vault: Vault) -> dict[str, list[object]]:
    """Scope (``""``: Domain and Person) -> its candidates as stored; {} when unreadable."""
    found = _summary(vault).get("scopes", {})
    if not isinstance(found, dict):
        return {}
    return {str(k): v for k, v in found.items() if isinstance(v, list)}


def most_cited(vault: Vault) -> list[tuple[str, int]]:
    """(node id, how many nodes cite it) for the most cited nodes, most first (at most
    ``osk.provenance.recheck_table.MOST_CITED``); [] before the first recheck pass on this
    device."""
    found = _summary(vault).get("cited")
    if not isinstance(found, list):
        return []
    return [(str(item[0]), item[1]) for item in found
            if isinstance(item, list) and len(item) == 2 and isinstance(item[1], int)]


def scope_notes(vault: Vault, scope: str) -> list[dict[str, object]]:
    """The candidates of ``scope`` alone (``""``: the Domain and Person ones), in the form of
    the session-start hook's providers, which ask for ``""`` separately."""
    return [dict(item) for item in scopes(vault).get(scope, []) if isinstance(item, dict)]
