"""A ledger already damaged on disk blocks only what depends on it: a damaged line in the audit
ledger (history that no write decides from) is left out and reported, and writes go on; a
damaged line in a ledger that decides every write (routing, rechecks) refuses writes, saying
why, with the path inside the vault, never an absolute one."""

from __future__ import annotations

import json

import pytest
import writekit
from writekit import create, snapshot

from osk.calls.request import NodeEdit
from osk.engine.core import Engine
from osk.errors import LedgerError
from osk.store.ids import uuid7
from osk.store.ledger import Ledger
from osk.store.vault import Vault
from osk.surfaces.cli import main
from osk.verbs import validate

repo, eng, hub = writekit.repo, writekit.eng, writekit.hub  # shared fixtures


def _append(vault: Vault, ledger: str, line: bytes) -> None:
    with open(vault.ledger_path(ledger), "ab") as handle:
        handle.write(line)


@pytest.mark.parametrize("line", [
    b"[1, 2, 3]\n",
    b"not json at all\n",
    (json.dumps({"id": uuid7(), "parents": [uuid7()], "device": "x", "at": "2026-11-29T18:02Z",
                 "kind": "create", "subject": "gone"}) + "\n").encode(),
])
def test_a_damaged_audit_line_blocks_no_write_and_is_reported(eng: Engine, vault: Vault,
                                                              hub: str, line: bytes, capsys):
    created = create(eng, "Tokens")
    _append(vault, "audit", line)
    later = create(eng, "Sessions")  # every write was refused here before
    eng.update_node("Tokens", NodeEdit(body="Rotated weekly.\n", expect_hash=created.hash))
    view = Ledger(vault, "audit").read()
    assert {later.id, created.id} <= {r.subject for r in view.records}
    assert view.damaged and view.damaged[0].startswith("_ledger/audit.jsonl: line ")
    found = [f for f in validate.run(vault) if f.rule == "ledger-integrity"]
    assert [f.path for f in found] == ["_ledger/audit.jsonl"]
    assert "no write waits for it" in found[0].message
    capsys.readouterr()
    assert main(["log", "Tokens"]) == 0  # the node's history still reads
    printed = capsys.readouterr().out
    assert "create" in printed and "update" in printed, printed


def test_a_damaged_routing_line_refuses_writes_saying_why(eng: Engine, vault: Vault, hub: str):
    _append(vault, "routing", b"{broken\n")
    before = snapshot(vault)
    with pytest.raises(LedgerError) as caught:
        create(eng, "Tokens")
    message = str(caught.value)
    assert message.startswith("_ledger/routing.jsonl: line ")
    assert "decides which scope each session writes to" in message
    assert str(vault.root) not in message
    assert snapshot(vault) == before
