"""Protected regions gate what readers are served until the person approves or reverts."""

from __future__ import annotations

import json
import shutil
import sys

import pytest
from authority_support import FakeTerminal, agent_write, edit_body, node_text, osk, read

from osk.authority import approvals as approvals_mod
from osk.authority import audit, protection
from osk.errors import ContractError, ObjectMissing, ProtectedRegionError
from osk.store import objects
from osk.store.fsutil import sha256_text
from osk.store.ledger import Ledger
from osk.store.vault import Vault

REGION = "Person/prefs"
NODE = "Person/prefs/Editor.md"


@pytest.fixture
def person(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", FakeTerminal())


@pytest.fixture
def protected(vault: Vault, person: None) -> str:
    """A protected region holding one approved node; returns the approved text."""
    text = node_text(body="The person edits in Helix.\n", author="user")
    agent_write(vault, NODE, text, actor="user")
    approvals_mod.protect(vault, REGION)
    return text


def test_outside_any_region_the_working_copy_is_served(vault: Vault):
    served = protection.served(vault, "Domain/x/Note.md", "anything")
    assert served == protection.Served("anything", False)


def test_protect_keeps_the_snapshot_as_content_addressed_objects(vault: Vault, protected: str):
    sha = sha256_text(protected)
    assert (vault.root / "_objects" / sha[:2] / sha).read_text(encoding="utf-8") == protected
    assert objects.get(vault, sha) == protected
    record = Ledger(vault, "approvals").read().records[-1]
    assert (record.kind, record.data["files"]) == ("protect", {NODE: sha})
    assert protection.regions(vault) == (REGION,)


def test_an_agent_edit_in_a_region_is_not_served_until_approved(vault: Vault, protected: str):
    edited = edit_body(vault, NODE, "The person edits in Vim.\n")
    agent_write(vault, NODE, edited)
    assert read(vault, NODE) == edited  # the working copy holds the agent's edit
    served = protection.served(vault, NODE, read(vault, NODE))
    assert served == protection.Served(protected, True)
    assert [c.kind for c in protection.pending(vault)] == ["update"]

    approved = approvals_mod.approve(vault, NODE)
    assert [c.path for c in approved] == [NODE]
    assert protection.served(vault, NODE, read(vault, NODE)) == protection.Served(edited, False)
    assert protection.pending(vault) == []


def test_a_hand_edit_in_a_region_is_pending_as_well(vault: Vault, protected: str):
    vault.abs(NODE).write_text(protected.replace("Helix", "Emacs"), encoding="utf-8")
    served = protection.served(vault, NODE, read(vault, NODE))
    assert served.text == protected and served.pending


def test_revert_restores_the_snapshot_and_records_the_discarded_text(
    vault: Vault, protected: str
):
    edited = edit_body(vault, NODE, "The person edits in Vim.\n")
    agent_write(vault, NODE, edited)
    approvals_mod.revert(vault, NODE)
    assert read(vault, NODE) == protected
    assert protection.served(vault, NODE, protected) == protection.Served(protected, False)
    assert protection.pending(vault) == []
    record = Ledger(vault, "approvals").read().records[-1]
    assert record.kind == "revert"
    assert record.data["discarded"] == sha256_text(edited)
    assert objects.get(vault, sha256_text(edited)) == edited  # kept, not lost
    last = audit.entries(vault)[-1]
    assert (last.action, last.before, last.after) == (
        "revert", sha256_text(edited), sha256_text(protected)
    )


def test_a_node_created_inside_a_region_is_absent_until_approved(vault: Vault, protected: str):
    new = "Person/prefs/Shell.md"
    text = node_text(body="The person uses fish.\n")
    agent_write(vault, new, text)
    assert protection.served(vault, new, text) == protection.Served(None, True)
    assert [(c.path, c.kind) for c in protection.pending(vault)] == [(new, "create")]
    approvals_mod.approve(vault, new)
    assert protection.served(vault, new, text) == protection.Served(text, False)


def test_reverting_a_pending_creation_removes_the_file(vault: Vault, protected: str):
    new = "Person/prefs/Shell.md"
    agent_write(vault, new, node_text(body="The person uses fish.\n"))
    approvals_mod.revert(vault, REGION)
    assert not vault.abs(new).exists()
    assert protection.pending(vault) == []


def deletions(vault: Vault) -> dict[str, str | None]:
    """Approved files missing from the working copy (pending deletions): path -> approved."""
    return {c.path: c.approved for c in protection.pending(vault) if c.kind == "delete"}


def test_a_hand_deletion_is_pending_and_revert_brings_the_file_back(
    vault: Vault, protected: str
):
    vault.abs(NODE).unlink()
    assert deletions(vault) == {NODE: sha256_text(protected)}
    assert [c.kind for c in protection.pending(vault)] == ["delete"]
    approvals_mod.revert(vault, NODE)
    assert read(vault, NODE) == protected
    assert deletions(vault) == {}


def test_approving_a_deletion_forgets_the_file(vault: Vault, protected: str):
    vault.abs(NODE).unlink()
    approvals_mod.approve(vault, NODE)
    assert deletions(vault) == {}
    assert protection.pending(vault) == []
    last = audit.entries(vault)[-1]
    assert (last.action, last.before, last.after) == ("approve", sha256_text(protected), None)


def test_a_second_write_is_refused_while_a_change_waits(vault: Vault, protected: str):
    protection.check_writable(vault, NODE)  # nothing pending: allowed
    agent_write(vault, NODE, edit_body(vault, NODE, "Vim.\n"))
    with pytest.raises(ProtectedRegionError, match="waiting for the person's review"):
        protection.check_writable(vault, NODE)
    approvals_mod.approve(vault, REGION)
    protection.check_writable(vault, NODE)


def test_a_change_made_after_the_person_was_shown_the_list_is_not_decided_unseen(
        vault: Vault, protected: str):
    agent_write(vault, NODE, edit_body(vault, NODE, "Vim.\n"))
    shown = approvals_mod.to_approve(vault, REGION)
    assert [c.path for c in shown] == [NODE]
    other = f"{REGION}/Shell.md"  # written while the person reads the list
    agent_write(vault, other, node_text(body="Fish.\n"))
    approvals = Ledger(vault, "approvals").path.read_bytes()
    with pytest.raises(ProtectedRegionError, match=f"changed after they were shown to you "
                                                   f"\\({other}\\); nothing was approved"):
        approvals_mod.approve(vault, REGION, shown=shown)
    assert Ledger(vault, "approvals").path.read_bytes() == approvals
    assert protection.is_pending(vault, NODE) and protection.is_pending(vault, other)
    with pytest.raises(ProtectedRegionError, match="nothing was reverted"):
        approvals_mod.revert(vault, REGION, shown=approvals_mod.to_revert(vault, NODE))
    assert read(vault, other) and protection.is_pending(vault, other)
    done = approvals_mod.approve(vault, REGION, shown=approvals_mod.to_approve(vault, REGION))
    assert sorted(c.path for c in done) == [NODE, other]


def test_moves_into_or_out_of_a_region_are_refused(vault: Vault, protected: str):
    with pytest.raises(ProtectedRegionError, match="touches protected region"):
        protection.check_move(vault, NODE, "Person/other/Editor.md")
    with pytest.raises(ProtectedRegionError):
        protection.check_move(vault, "Domain/x/A.md", "Person/prefs/A.md")
    protection.check_move(vault, "Domain/x/A.md", "Domain/y/A.md")


def test_regions_do_not_nest(vault: Vault, protected: str):
    vault.abs("Person/prefs/deep").mkdir()
    with pytest.raises(ProtectedRegionError, match="overlaps"):
        approvals_mod.protect(vault, "Person/prefs/deep")
    with pytest.raises(ProtectedRegionError, match="overlaps"):
        approvals_mod.protect(vault, "Person")


def test_only_folders_and_node_files_in_a_space_can_be_protected(vault: Vault, person: None):
    with pytest.raises(ProtectedRegionError, match="not inside a Space"):
        approvals_mod.protect(vault, "Workbench")
    with pytest.raises(ProtectedRegionError, match="neither a folder nor a node file"):
        approvals_mod.protect(vault, "Domain/missing")


def test_unprotect_is_refused_while_changes_wait_and_then_serves_the_working_copy(
    vault: Vault, protected: str
):
    edited = edit_body(vault, NODE, "Vim.\n")
    agent_write(vault, NODE, edited)
    before = Ledger(vault, "approvals").path.read_bytes()
    with pytest.raises(ProtectedRegionError, match="waiting for review"):
        approvals_mod.unprotect(vault, REGION)
    assert Ledger(vault, "approvals").path.read_bytes() == before  # refused: nothing written
    approvals_mod.approve(vault, REGION)
    approvals_mod.unprotect(vault, REGION)
    assert protection.regions(vault) == ()
    vault.abs(NODE).write_text("hand edit", encoding="utf-8")
    assert protection.served(vault, NODE, "hand edit") == protection.Served("hand edit", False)


def test_approve_refuses_a_working_copy_that_breaks_the_contract(vault: Vault, protected: str):
    vault.abs(NODE).write_text("no front matter\n", encoding="utf-8")
    before = Ledger(vault, "approvals").path.read_bytes()
    with pytest.raises(ContractError, match="cannot approve"):
        approvals_mod.approve(vault, REGION)
    assert Ledger(vault, "approvals").path.read_bytes() == before
    assert protection.served(vault, NODE, read(vault, NODE)).text == protected


def test_a_missing_snapshot_object_is_refused_not_replaced_by_the_working_copy(
    vault: Vault, protected: str
):
    agent_write(vault, NODE, edit_body(vault, NODE, "Vim.\n"))
    sha = sha256_text(protected)
    (vault.root / "_objects" / sha[:2] / sha).unlink()
    with pytest.raises(ObjectMissing, match="not in _objects"):
        protection.served(vault, NODE, read(vault, NODE))


def test_approvals_recorded_by_another_process_are_seen_without_restarting(
    vault: Vault, protected: str
):
    edited = edit_body(vault, NODE, "Vim.\n")
    agent_write(vault, NODE, edited)
    assert protection.served(vault, NODE, edited).pending
    code = protection.changes_code(approvals_mod.to_approve(vault, NODE))
    result = osk(vault, "approve", NODE, tty=True, answer=f"{code}\n")
    assert result.code == 0, result.err
    assert protection.served(vault, NODE, edited) == protection.Served(edited, False)


def test_review_prints_pending_changes_as_unified_diffs(vault: Vault, protected: str):
    agent_write(vault, NODE, edit_body(vault, NODE, "The person edits in Vim.\n"))
    result = osk(vault, "review")
    assert result.code == 0, result.err
    assert f"--- a/{NODE}" in result.out and f"+++ b/{NODE}" in result.out
    assert "-The person edits in Helix." in result.out
    assert "+The person edits in Vim." in result.out
    data = json.loads(osk(vault, "review", "--json").out)
    assert [(d["path"], d["kind"]) for d in data] == [(NODE, "update")]


def test_diverging_approvals_from_two_devices_are_reported_and_closed_by_approving(
    vault: Vault, protected: str, tmp_path
):
    other_root = tmp_path / "other"
    shutil.copytree(vault.root, other_root)
    other = Vault(other_root)
    (other_root / ".osk" / "device-id").write_text("otherdevice\n", encoding="utf-8")
    agent_write(vault, NODE, edit_body(vault, NODE, "Vim.\n"))
    approvals_mod.approve(vault, NODE)
    agent_write(other, NODE, edit_body(other, NODE, "Nano.\n"))
    approvals_mod.approve(other, NODE)
    # What a sync brings: the other device's objects, and Git's union merge of the ledgers.
    shutil.copytree(other_root / "_objects", vault.root / "_objects", dirs_exist_ok=True)
    mine = vault.ledger_path("approvals").read_text(encoding="utf-8").splitlines()
    theirs = other.ledger_path("approvals").read_text(encoding="utf-8").splitlines()
    merged = mine + [line for line in theirs if line not in mine]
    vault.ledger_path("approvals").write_text("\n".join(merged) + "\n", encoding="utf-8")
    assert protection.state(vault).forked == {NODE}
    assert [c.forked for c in protection.pending(vault)] == [True]
    approvals_mod.approve(vault, NODE)  # the person decides: the working copy here
    assert protection.state(vault).forked == frozenset()
    assert protection.pending(vault) == []


def test_revert_without_the_snapshot_on_this_device_writes_nothing(vault: Vault, protected: str):
    edited = edit_body(vault, NODE, "Vim.\n")
    agent_write(vault, NODE, edited)
    sha = sha256_text(protected)
    (vault.root / "_objects" / sha[:2] / sha).unlink()
    ledger = Ledger(vault, "approvals").path.read_bytes()
    with pytest.raises(ObjectMissing, match="not yet synced"):
        approvals_mod.revert(vault, REGION)
    assert read(vault, NODE) == edited
    assert Ledger(vault, "approvals").path.read_bytes() == ledger
