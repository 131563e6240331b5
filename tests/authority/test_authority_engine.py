"""The five authority marks through the real engine (write path, read_node, search).

These drive ``osk.engine.core.Engine`` as an agent's MCP session does, and the person's verbs as the
terminal does, so they check the integration points, not just the authority modules.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from authority_support import FakeTerminal, read
from writekit import make_repo

from osk.authority import approvals, audit, tombstones, trust
from osk.calls.request import NewNode, NodeEdit
from osk.engine.core import Engine
from osk.errors import NodeNotFound, ProtectedRegionError, TombstoneError
from osk.store import objects
from osk.store.fsutil import sha256_text
from osk.store.vault import Vault

T0, T1 = "2026-01-05T10:00+00:00", "2026-03-01T09:00+00:00"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "work" / "proj")


@pytest.fixture
def agent(vault: Vault, repo: Path) -> Engine:
    return Engine.open(vault, cwd=repo)


@pytest.fixture
def person(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", FakeTerminal())


def new_session(vault: Vault, repo: Path) -> Engine:
    """A fresh agent session (a new MCP server process would open one like this)."""
    return Engine.open(vault, cwd=repo)


def person_node(agent: Engine, title: str, body: str) -> str:
    if title != "prefs":
        try:
            agent.read_node("prefs")
        except NodeNotFound:
            agent.create_node(NewNode("prefs", "The person's preferences", "Preferences.\n",
                                      space="Person", cluster="prefs", drafter="m"))
    return agent.create_node(NewNode(title, f"About {title}", body, space="Person", cluster="prefs",
                                     drafter="m")).path


def titles(hits) -> list[str]:
    return [hit.title for hit in getattr(hits, "hits", hits)]


# -- human_review ------------------------------------------------------------------------------
def test_an_agent_edit_in_a_protected_region_is_not_served_until_approved(
    vault: Vault, repo: Path, agent: Engine, person: None
):
    rel = person_node(agent, "Editor", "The person edits in Helix.\n")
    approvals.protect(vault, "Person/prefs")
    agent.update_node("Editor", NodeEdit(old_text="Helix", new_text="Kakoune"))
    assert "Kakoune" in read(vault, rel)  # the working copy holds the edit

    shown = agent.read_node("Editor")
    assert "Helix" in shown.text and "Kakoune" not in shown.text
    assert shown.pending and shown.hash is None
    session = new_session(vault, repo)
    assert "Editor" not in titles(session.search("Kakoune"))
    hit = [h for h in session.search("Helix").hits if h.title == "Editor"][0]
    assert "pending" in hit.markers
    with pytest.raises(ProtectedRegionError, match="waiting for the person's review"):
        agent.update_node("Editor", NodeEdit(old_text="The person edits", new_text="They edit"))

    approvals.approve(vault, rel)
    shown = agent.read_node("Editor")
    assert "Kakoune" in shown.text and not shown.pending
    assert "Editor" in titles(new_session(vault, repo).search("Kakoune"))


def test_a_reverted_agent_edit_is_gone(vault: Vault, repo: Path, agent: Engine, person: None):
    rel = person_node(agent, "Editor", "The person edits in Helix.\n")
    approvals.protect(vault, "Person/prefs")
    approved = read(vault, rel)
    agent.update_node("Editor", NodeEdit(old_text="Helix", new_text="Kakoune"))
    discarded = read(vault, rel)
    approvals.revert(vault, rel)
    assert read(vault, rel) == approved
    session = new_session(vault, repo)
    assert "Editor" not in titles(session.search("Kakoune"))
    shown = session.read_node("Editor")
    assert "Helix" in shown.text and not shown.pending
    assert objects.get(vault, sha256_text(discarded)) == discarded  # recorded, not lost


def test_an_agent_node_created_in_a_protected_region_is_absent_until_approved(
    vault: Vault, repo: Path, agent: Engine, person: None
):
    person_node(agent, "Editor", "The person edits in Helix.\n")
    approvals.protect(vault, "Person/prefs")
    rel = person_node(agent, "Shell", "The person uses the fish shell.\n")
    with pytest.raises(NodeNotFound, match="waiting for the person's approval"):
        agent.read_node("Shell")
    assert "Shell" not in titles(new_session(vault, repo).search("fish shell"))
    approvals.approve(vault, rel)
    assert "fish" in agent.read_node("Shell").text
    assert "Shell" in titles(new_session(vault, repo).search("fish shell"))


def test_moving_a_node_out_of_a_protected_region_is_refused(
    vault: Vault, agent: Engine, person: None
):
    person_node(agent, "Editor", "The person edits in Helix.\n")
    agent.create_node(NewNode("tools", "Tools", "Tools.\n", space="Person", cluster="tools",
                              drafter="m"))
    approvals.protect(vault, "Person/prefs")
    with pytest.raises(ProtectedRegionError, match="touches protected region"):
        agent.move_nodes(["Editor"], space="Person", cluster="tools")


# -- audit_log ---------------------------------------------------------------------------------
def test_every_engine_mutation_leaves_exactly_one_record_with_the_file_hashes(
    vault: Vault, agent: Engine
):
    rel = person_node(agent, "Editor", "The person edits in Helix.\n")
    node_id = agent.read_node("Editor").id
    created_text = read(vault, rel)
    agent.update_node("Editor", NodeEdit(old_text="Helix", new_text="Kakoune"))
    updated_text = read(vault, rel)
    agent.create_node(NewNode("tools", "Tools", "Tools.\n", space="Person", cluster="tools",
                              drafter="m"))
    agent.move_nodes(["Editor"], space="Person", cluster="tools")
    history = audit.history(vault, node_id)
    assert [e.action for e in history] == ["create", "update", "move"]
    assert (history[0].before, history[0].after) == (None, sha256_text(created_text))
    assert (history[1].before, history[1].after) == (
        sha256_text(created_text), sha256_text(updated_text))
    assert history[2].path_after == "Person/tools/Editor.md"
    assert history[2].path_before == rel
    for entry in history:
        for sha in (entry.before, entry.after):
            assert sha is None or sha256_text(objects.get(vault, sha)) == sha


# -- trust_state ---------------------------------------------------------------------------------
def test_an_agent_written_person_fact_is_marked_inferred_until_confirmed(
    vault: Vault, repo: Path, agent: Engine, person: None
):
    person_node(agent, "Indentation", "The person prefers tabs over spaces.\n")
    shown = agent.read_node("Indentation")
    assert shown.trust == "inferred" and "inferred" in shown.markers
    hit = [h for h in new_session(vault, repo).search("tabs spaces").hits
           if h.title == "Indentation"][0]
    assert "inferred" in hit.markers

    trust.confirm(vault, "Indentation")
    shown = new_session(vault, repo).read_node("Indentation")
    assert shown.trust == "confirmed" and "inferred" not in shown.markers
    hit = [h for h in new_session(vault, repo).search("tabs spaces").hits
           if h.title == "Indentation"][0]
    assert "inferred" not in hit.markers

    agent.update_node("Indentation", NodeEdit(old_text="tabs over spaces",
                                              new_text="spaces over tabs"))
    assert new_session(vault, repo).read_node("Indentation").trust == "inferred"


# -- tombstone -------------------------------------------------------------------------------------
def test_a_rejected_claim_cannot_be_written_again_through_the_engine(
    vault: Vault, agent: Engine, person: None
):
    rel = person_node(agent, "Editor", "The person edits in Helix.\n")
    tomb = tombstones.reject(vault, "Editor", reason="I use Vim")
    assert not vault.abs(rel).exists()
    agent.refresh()
    with pytest.raises(TombstoneError, match="I use Vim") as refused:
        person_node(agent, "Editor", "The person edits in   helix.\n")
    assert refused.value.date == tomb.time
    assert not vault.abs(rel).exists()


# -- bitemporal ---------------------------------------------------------------------------------
def test_as_of_a_date_before_the_supersession_returns_the_superseded_node(
    vault: Vault, repo: Path, agent: Engine, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("OSK_NOW", T0)
    agent.create_node(NewNode("api", "The API", "The API.\n", space="Domain", cluster="api",
                              drafter="m"))
    agent.create_node(NewNode("Rate limit v1", "Rate limit", "The rate limit is 100 per minute.\n",
                              space="Domain", cluster="api", drafter="m"))
    monkeypatch.setenv("OSK_NOW", T1)
    agent.create_node(NewNode("Rate limit v2", "Rate limit", "The rate limit is 500 per minute.\n",
                              space="Domain", cluster="api", drafter="m",
                              supersedes="Rate limit v1"))
    session = new_session(vault, repo)
    before = titles(session.search("rate limit per minute", as_of="2026-02-01"))
    assert "Rate limit v1" in before and "Rate limit v2" not in before
    after = titles(session.search("rate limit per minute", as_of="2026-04-01"))
    assert "Rate limit v2" in after and "Rate limit v1" not in after
    now = session.search("rate limit per minute").hits
    assert titles(now)[0] == "Rate limit v2"
    old = [h for h in now if h.title == "Rate limit v1"][0]
    assert "superseded" in old.markers


def rewritten_over_time(agent: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """A node whose body said "zeppelin" from T0 and says "airship" from T1."""
    monkeypatch.setenv("OSK_NOW", T0)
    agent.create_node(NewNode("transport", "How we travel", "Transport.\n", space="Domain",
                              cluster="transport", drafter="m"))
    agent.create_node(NewNode("Carrier", "What carries us", "We fly by zeppelin.\n", space="Domain",
                              cluster="transport", drafter="m"))
    monkeypatch.setenv("OSK_NOW", T1)
    agent.update_node("Carrier", NodeEdit(old_text="zeppelin", new_text="airship"))


def test_as_of_searches_and_reads_the_text_that_stood_then(
    vault: Vault, repo: Path, agent: Engine, monkeypatch: pytest.MonkeyPatch
):
    rewritten_over_time(agent, monkeypatch)
    session = new_session(vault, repo)
    assert titles(session.search("zeppelin", as_of="2026-02-01")) == ["Carrier"]
    assert titles(session.search("airship", as_of="2026-02-01")) == []
    assert titles(session.search("airship", as_of="2026-04-01")) == ["Carrier"]
    assert titles(session.search("zeppelin", as_of="2026-04-01")) == []
    assert titles(session.search("zeppelin")) == []  # today's text
    then = session.read_node("Carrier", as_of="2026-02-01")
    assert then.text == "We fly by zeppelin.\n" and then.hash is None
    assert session.read_node("Carrier").text == "We fly by airship.\n"
    with pytest.raises(NodeNotFound, match="stood in the vault"):
        session.read_node("Carrier", as_of="2025-12-01")


def test_osk_search_and_read_as_of_serve_the_past_version(
    vault: Vault, repo: Path, agent: Engine, monkeypatch: pytest.MonkeyPatch
):
    import subprocess

    rewritten_over_time(agent, monkeypatch)

    def osk(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "osk", "--vault", str(vault.root), *args],
                              cwd=repo, capture_output=True, text=True, encoding="utf-8")
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert "Carrier" in osk("search", "zeppelin", "--as-of", "2026-02-01")
    assert "Carrier" not in osk("search", "airship", "--as-of", "2026-02-01")
    assert "We fly by zeppelin." in osk("read", "Carrier", "--as-of", "2026-02-01")
    assert "We fly by airship." in osk("read", "Carrier")
