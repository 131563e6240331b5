"""What the person's redactions left (``osk redact``, ``osk.verbs.redaction``): per cited target,
the hashes a redaction wrote, read from the ``redactions`` ledger and kept while the ledger's file
is unchanged. A recheck pass asks it why a target changed (``osk.provenance.rechecks``), so it
sits below the rechecks; the verb that writes the ledger sits above the engine.
"""

from __future__ import annotations

from osk.capture import raw
from osk.errors import RawRecordError
from osk.store.edges import RawTarget
from osk.store.fsutil import stat_key
from osk.store.ledger import Ledger
from osk.store.vault import Vault

LEDGER = "redactions"
# A recheck pass asks once per changed citation: the ledger is read once per version of it.
_STATES: dict[str, tuple[object, dict[str, set[str]]]] = {}


def left_by_redactions(vault: Vault) -> dict[str, set[str]]:
    """Target key (``raw:<coordinate>``, ``node:<id>``) -> the hashes redactions left, as
    citations bind them (a round's hash, a node's body hash): for the recheck reason."""
    path = vault.ledger_path(LEDGER)
    key = stat_key(path)
    cached = _STATES.get(str(path))
    if key is not None and cached is not None and cached[0] == key:
        return cached[1]
    found = _read_states(vault)
    if key is not None:
        _STATES[str(path)] = (key, found)
    return found


def _read_states(vault: Vault) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for record in Ledger(vault, LEDGER).read().records:
        if record.kind != "redact":
            continue
        data = record.data
        if isinstance(data.get("node"), str) and isinstance(data.get("after_body"), str):
            found.setdefault(f"node:{data['node']}", set()).add(str(data["after_body"]))
        path, rounds = data.get("record"), data.get("rounds")
        if not isinstance(path, str) or not isinstance(rounds, list):
            continue
        try:
            named = raw.record_key_of(path)
        except RawRecordError:
            continue  # a damaged entry names no record; the validators report the ledger
        for item in rounds:
            after, number = (item.get("after"), item.get("n")) if isinstance(item, dict) else (
                None, None)
            if isinstance(after, str) and isinstance(number, int):
                coordinate = RawTarget(named.key, named.conversation, number)
                found.setdefault(f"raw:{coordinate.coordinate}", set()).add(after)
    return found
