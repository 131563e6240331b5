"""Integration points the write path shares with protection, audit, validators, sync and raw."""

from __future__ import annotations

import sys
from pathlib import Path

import mcp
import pytest
import writekit
from authority_support import FakeTerminal
from sync_support import make_devices
from writekit import create, snapshot

from osk.authority import approvals, audit
from osk.calls.request import NewNode, NodeEdit
from osk.capture import raw
from osk.engine.core import Engine
from osk.errors import ProtectedRegionError
from osk.store import conflict_copies
from osk.store.fsutil import atomic_write
from osk.store.vault import Vault
from osk.surfaces.server import build_server
from osk.sync import cycle as sync
from osk.sync import cycle_state as sync_common
from osk.verbs import validate

repo, eng, hub = writekit.repo, writekit.eng, writekit.hub  # shared fixtures


@pytest.fixture
def person(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", FakeTerminal())


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def protected_note(eng: Engine, vault: Vault) -> str:
    """A Domain node in a protected region, with an agent's edit waiting for review."""
    eng.create_node(NewNode("editors", "Editors", "Editors hub.\n", space="Domain",
                            cluster="editors",
                            drafter="m"))
    rel = eng.create_node(NewNode("Editor", "The editor in use", "The team edits in Helix.\n",
                                  space="Domain", cluster="editors", drafter="m")).path
    approvals.protect(vault, "Domain/editors")
    eng.update_node("Editor", NodeEdit(old_text="Helix", new_text="Kakoune"))
    return rel


# -- protected regions --------------------------------------------------------------------------
def test_editing_a_node_whose_change_waits_for_review_is_refused_as_pending_not_as_a_bad_anchor(
        eng: Engine, vault: Vault, person: None):
    protected_note(eng, vault)
    shown = eng.read_node("Editor")  # the agent is served the approved text
    assert "Helix" in shown.text and shown.pending
    before = snapshot(vault)
    # "Helix" no longer occurs in the working copy: without the early check this was an
    # AnchorError about text the agent was never shown.
    with pytest.raises(ProtectedRegionError, match="waiting for the person's review"):
        eng.update_node("Editor", NodeEdit(old_text="Helix", new_text="Vim"))
    with pytest.raises(ProtectedRegionError, match="waiting for the person's review"):
        eng.update_node("Editor", NodeEdit(body="Vim.\n", expect_hash="0" * 64))
    assert snapshot(vault) == before


def test_a_write_inside_a_protected_region_says_it_waits_for_the_person(
        eng: Engine, vault: Vault, person: None):
    eng.create_node(NewNode("editors", "Editors", "Editors hub.\n", space="Domain",
                            cluster="editors",
                            drafter="m"))
    outside = eng.create_node(NewNode("shells", "Shells", "Shells hub.\n", space="Domain",
                                      cluster="shells", drafter="m"))
    assert outside.pending is False
    eng.create_node(NewNode("Editor", "The editor", "Helix.\n", space="Domain", cluster="editors",
                            drafter="m"))
    approvals.protect(vault, "Domain/editors")
    updated = eng.update_node("Editor", NodeEdit(old_text="Helix", new_text="Kakoune"))
    created = eng.create_node(NewNode("Pager", "The pager", "less.\n", space="Domain",
                                      cluster="editors", drafter="m"))
    assert (updated.action, updated.pending) == ("updated", True)
    assert (created.action, created.pending) == ("created", True)
    assert eng.update_node("shells", NodeEdit(old_text="Shells hub",
                                              new_text="The shells")).pending is False


def test_a_pending_node_carries_the_pending_marker_in_search(eng: Engine, vault: Vault,
                                                             repo: Path, person: None):
    protected_note(eng, vault)
    hit = next(h for h in eng.search("Helix").hits if h.title == "Editor")
    assert "pending" in hit.markers
    approvals.approve(vault, "Domain/editors/Editor.md")
    session = Engine.open(vault, cwd=repo)
    hit = next(h for h in session.search("Kakoune").hits if h.title == "Editor")
    assert "pending" not in hit.markers


# -- audit ----------------------------------------------------------------------------------------
def test_a_move_is_audited_at_the_new_path_with_the_old_one_in_its_detail(eng: Engine,
                                                                           vault: Vault,
                                                                           hub: str):
    node = create(eng, "Tokens")
    eng.create_node(NewNode("patterns", "Patterns", "Patterns hub.\n", space="Scope",
                            cluster="patterns", drafter="m"))
    eng.move_nodes(["Tokens"], space="Scope", cluster="patterns")
    moved = audit.history(vault, node.id)[-1]
    assert moved.action == "move"
    assert moved.path == "Scope/proj/patterns/Tokens.md"
    assert moved.detail["from"] == "Scope/proj/auth/Tokens.md"


# -- sync conflict copies -------------------------------------------------------------------------
def conflict_copy(vault: Vault, rel: str) -> str:
    """A copy of ``rel`` as sync writes it beside a node edited on two devices (no id)."""
    copy = rel[:-3] + " (sync conflict 2026-01-02 0304 laptop).md"
    atomic_write(vault.abs(copy), conflict_copies.copy_content(rel, vault.abs(rel).read_bytes()))
    return copy


def test_a_conflict_copy_is_reported_once_as_a_conflict_copy_and_not_as_a_broken_node(
        eng: Engine, vault: Vault, hub: str):
    rel = create(eng, "Tokens").path
    copy = conflict_copy(vault, rel)
    findings = validate.run(vault)
    assert [(f.path, f.rule) for f in findings] == [(copy, "sync-conflicts")]
    assert rel in findings[0].message


def test_overview_lists_conflict_copies_and_not_as_problems(eng: Engine, vault: Vault, hub: str,
                                                             tmp_path: Path):
    copy = conflict_copy(vault, create(eng, "Tokens").path)
    other = Engine.open(vault, cwd=writekit.make_repo(tmp_path / "work" / "other"))
    other.create_node(NewNode("billing", "Billing", "Billing.\n", space="Scope", cluster="billing",
                              drafter="m"))
    hidden = conflict_copy(vault, "Scope/other/billing/billing.md")
    seen = eng.overview()
    assert seen.conflict_copies == (copy,)
    assert seen.problems == ()
    assert other.overview().conflict_copies == (hidden,)


# -- raw record locks -----------------------------------------------------------------------------
def test_raw_lock_path_is_the_lock_an_append_takes(vault: Vault, monkeypatch: pytest.MonkeyPatch):
    taken: list[Path] = []
    real = raw.file_lock

    def recording(path: Path, *args: object, **kwargs: object):
        taken.append(path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(raw, "file_lock", recording)
    ref = raw.append_round(vault, "repo x", "conv/1", raw.RoundInput(user="u", assistant="a"))
    assert taken == [raw.lock_path(vault, ref.coordinate)]
    assert raw.lock_path(vault, ref.path) == taken[0]
    with pytest.raises(raw.RawRecordError):
        raw.lock_path(vault, "_raw/README.md")


def test_a_sync_landing_a_raw_record_holds_its_append_lock(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch):
    _remote, (a, b) = make_devices(tmp_path, 2)
    ref = raw.append_round(a, "repo-a", "conv-1", raw.RoundInput(user="u", assistant="a"))
    sync.sync_once(a)
    held: list[Path] = []
    real = sync_common.file_lock

    def recording(path: Path, *args: object, **kwargs: object):
        held.append(path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(sync_common, "file_lock", recording)
    sync.sync_once(b)
    assert b.abs(ref.path).read_bytes() == a.abs(ref.path).read_bytes()
    assert raw.lock_path(b, ref.path) in held


# -- the MCP tool models ---------------------------------------------------------------------------
@pytest.mark.anyio
async def test_read_raw_pages_a_record_by_rounds_and_append_raw_names_the_record_file(
        vault: Vault, repo: Path):
    server = build_server(lambda: Engine.open(vault, cwd=repo))
    async with mcp.Client(server) as client:
        for number in range(1, 4):
            result = await client.call_tool("append_raw", {
                "conversation": "c1", "user": f"question {number}",
                "assistant": f"answer {number} " + "x" * 2500})
            assert not result.is_error, result.content[0].text
        appended = result.structured_content
        assert appended["path"] == "_raw/proj/c1.md"
        view = (await client.call_tool("read_raw", {"coordinate": "_raw/proj/c1"})
                ).structured_content
        assert not view["complete"] and view["next_rounds"][-1] == 3
        rest = (await client.call_tool("read_raw", {
            "coordinate": "_raw/proj/c1", "rounds": view["next_rounds"],
            "start": view["next_start"] or 0})).structured_content
        assert rest["rounds"] == [3] and rest["complete"] and rest["next_rounds"] == []
        assert "#Round 3" in rest["text"] and rest["text"].rstrip().endswith("x")


@pytest.mark.anyio
async def test_update_node_reports_recited_nodes_and_pending_through_the_server(
        vault: Vault, repo: Path, person: None):
    server = build_server(lambda: Engine.open(vault, cwd=repo))
    async with mcp.Client(server) as client:
        for title in ("editors", "Editor"):
            result = await client.call_tool("create_node", {
                "title": title, "summary": f"about {title}", "body": f"{title} in Helix.\n",
                "space": "domain", "cluster": "editors", "drafter": "m"})
            assert not result.is_error, result.content[0].text
            assert result.structured_content["pending"] is False
        approvals.protect(vault, "Domain/editors")
        result = await client.call_tool("update_node", {"node": "Editor", "old_text": "Helix",
                                                        "new_text": "Kakoune"})
        assert not result.is_error, result.content[0].text
        out = result.structured_content
        assert (out["action"], out["pending"], out["recited"]) == ("updated", True, [])
