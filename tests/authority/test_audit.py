"""Every change to a node leaves exactly one audit record whose hashes name stored versions."""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest
from authority_support import FakeTerminal, agent_write, edit_body, node_text, read

from osk.authority import approvals, audit, tombstones, trust, validity
from osk.errors import ObjectMissing
from osk.store import node, objects
from osk.store.catalog import Catalog
from osk.store.fsutil import atomic_write, sha256_text
from osk.store.ledger import Ledger
from osk.store.vault import Vault

NODE = "Domain/tools/Ripgrep.md"


@pytest.fixture
def person(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", FakeTerminal())


def only_new_record(vault: Vault, action: Callable[[], object]) -> audit.Entry:
    count = len(audit.entries(vault))
    action()
    after = audit.entries(vault)
    assert len(after) == count + 1, [e.action for e in after[count:]]
    return after[-1]


def assert_versions(vault: Vault, entry: audit.Entry, before: str | None, after: str | None):
    assert entry.before == (sha256_text(before) if before is not None else None)
    assert entry.after == (sha256_text(after) if after is not None else None)
    for text, sha in ((before, entry.before), (after, entry.after)):
        if text is not None:
            assert sha is not None and objects.get(vault, sha) == text


def test_creation_and_update_each_leave_one_record(vault: Vault):
    text = node_text(body="rg is fast.\n")
    entry = only_new_record(vault, lambda: agent_write(vault, NODE, text))
    assert (entry.action, entry.actor, entry.path) == ("create", "agent:test", NODE)
    assert_versions(vault, entry, None, text)
    assert entry.node_id == node.parse(NODE, text).id

    updated = edit_body(vault, NODE, "rg is fast and respects .gitignore.\n")
    entry = only_new_record(vault, lambda: agent_write(vault, NODE, updated))
    assert entry.action == "update"
    assert_versions(vault, entry, text, updated)


def test_a_move_records_both_paths(vault: Vault):
    text = node_text(body="rg is fast.\n")
    created = agent_write(vault, NODE, text)
    target = "Domain/search/Ripgrep.md"

    def move() -> None:
        vault.abs(target).parent.mkdir(parents=True)
        vault.abs(NODE).rename(vault.abs(target))
        audit.record(vault, actor="agent:test", action="move", node_id=created.node_id,
                     path=target, before=created.after, after=created.after,
                     detail={"from": NODE, "to": target})

    entry = only_new_record(vault, move)
    assert (entry.path, entry.detail["from"]) == (target, NODE)
    assert_versions(vault, entry, text, text)


def test_the_persons_verbs_each_leave_one_record(vault: Vault, person: None):
    original = node_text(body="rg is fast.\n")
    agent_write(vault, NODE, original)
    approvals.protect(vault, "Domain/tools")
    edited = edit_body(vault, NODE, "rg is slow.\n")
    agent_write(vault, NODE, edited)

    entry = only_new_record(vault, lambda: approvals.revert(vault, NODE))
    assert (entry.action, entry.actor) == ("revert", "user")
    assert_versions(vault, entry, edited, original)

    agent_write(vault, NODE, edited)
    entry = only_new_record(vault, lambda: approvals.approve(vault, NODE))
    assert entry.action == "approve"
    assert_versions(vault, entry, original, edited)

    entry = only_new_record(vault, lambda: trust.confirm(vault, "Ripgrep"))
    assert entry.action == "confirm"
    assert_versions(vault, entry, edited, read(vault, NODE))

    confirmed = read(vault, NODE)
    entry = only_new_record(vault, lambda: tombstones.reject(vault, "Ripgrep", reason="no"))
    assert (entry.action, entry.detail["reason"]) == ("reject", "no")
    assert_versions(vault, entry, confirmed, None)

    key = tombstones.all_tombstones(vault)[0].key
    entry = only_new_record(vault, lambda: tombstones.lift(vault, key[:8]))
    assert (entry.action, entry.before, entry.after) == ("lift", None, None)


def test_closing_a_superseded_node_leaves_one_record(vault: Vault, monkeypatch):
    monkeypatch.setenv("OSK_NOW", "2026-01-05T10:00+00:00")
    old = node_text(body="The API limit is 100/min.\n", valid_from="2026-01-05T10:00+00:00")
    agent_write(vault, "Domain/api/Limit v1.md", old)
    monkeypatch.setenv("OSK_NOW", "2026-02-01T10:00+00:00")
    agent_write(vault, "Domain/api/Limit v2.md",
                node_text(body="The API limit is 500/min.\n", supersedes="[[Limit v1]]"))
    catalog = Catalog(vault)
    catalog.refresh()
    entry = only_new_record(vault, lambda: validity.close_superseded(
        vault, catalog, supersedes="[[Limit v1]]", start="2026-02-01T10:00+00:00",
        actor="agent:test", new_title="Limit v2", lock=True))
    assert (entry.action, entry.detail["by"]) == ("supersede", "Limit v2")
    assert_versions(vault, entry, old, read(vault, "Domain/api/Limit v1.md"))


def test_a_record_refuses_hashes_that_are_not_stored(vault: Vault):
    with pytest.raises(ObjectMissing, match="objects.put"):
        audit.record(vault, actor="agent", action="create", node_id="x", path=NODE,
                     before=None, after="a" * 64)
    assert not vault.ledger_path("audit").exists()
    with pytest.raises(ValueError, match="unknown audit action"):
        audit.record(vault, actor="agent", action="delete", node_id="x", path=NODE,
                     before=None, after=None)


def test_a_write_inside_a_region_is_recorded_as_pending_with_the_served_version(
    vault: Vault, person: None
):
    original = node_text(body="rg is fast.\n")
    agent_write(vault, NODE, original)
    approvals.protect(vault, "Domain/tools")
    entry = agent_write(vault, NODE, edit_body(vault, NODE, "rg is slow.\n"))
    assert entry.pending and entry.served == sha256_text(original)
    outside = agent_write(vault, "Domain/other/Fd.md", node_text(body="fd finds files.\n"))
    assert not outside.pending and outside.served == outside.after


def test_records_use_the_audit_ledger_with_the_node_id_as_subject(vault: Vault):
    entry = agent_write(vault, NODE, node_text(body="rg is fast.\n", node_id="node-1"))
    record = Ledger(vault, "audit").read().records[-1]
    assert (record.kind, record.subject, record.data["path"]) == ("create", "node-1", NODE)
    assert audit.history(vault, "node-1") == [entry]


def test_hashes_are_of_the_whole_file_so_a_front_matter_change_is_visible(vault: Vault):
    text = node_text(body="rg is fast.\n")
    agent_write(vault, NODE, text)
    atomic_write(vault.abs(NODE), text.replace("a fact", "a better summary"))
    entry = agent_write(vault, NODE, text)
    assert entry.before != entry.after
