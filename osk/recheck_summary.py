"""The recheck summary that hooks read: this device's open recheck candidates, per scope.

``osk.rechecks`` writes it (device state, ``.osk/rechecks/summary.json``) after every pass; the
session-start notes and per-prompt recall read it here, with the standard library only, so a
hook never loads the ledger machinery. It reflects the vault as of the last engine call on this
device; a hand edit made since shows up after the next one.
"""

from __future__ import annotations

import json

from osk.vault import Vault

SUMMARY_FILE = ("rechecks", "summary.json")


def scopes(vault: Vault) -> dict[str, list[object]]:
    """Scope (``""``: Domain and Person) -> its candidates as stored; {} when unreadable."""
    try:
        data = json.loads(vault.state(*SUMMARY_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    found = data.get("scopes", {}) if isinstance(data, dict) else {}
    if not isinstance(found, dict):
        return {}
    return {str(k): v for k, v in found.items() if isinstance(v, list)}


def scope_notes(vault: Vault, scope: str) -> list[dict[str, object]]:
    """The candidates of ``scope`` alone (``""``: the Domain and Person ones), in the form of
    the session-start hook's providers, which ask for ``""`` separately."""
    return [dict(item) for item in scopes(vault).get(scope, []) if isinstance(item, dict)]
