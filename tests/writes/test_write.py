"""The write path: every rule, and every refusal leaves the vault byte-for-byte unchanged."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import writekit
from writekit import create, make_repo, snapshot, write_toml

from osk.authority import audit, tombstones
from osk.calls.request import NewNode, NodeEdit
from osk.engine.core import Engine
from osk.errors import (
    AnchorError,
    ContractError,
    EdgeError,
    HubMissing,
    NodeNotFound,
    OskError,
    PlacementError,
    ScopeError,
    StaleHash,
    TitleError,
    TombstoneError,
)
from osk.provenance.sessions import Routing
from osk.store import sources
from osk.store.ids import is_uuid7
from osk.store.ledger import Ledger
from osk.store.vault import Vault
from osk.verbs import validate

repo, eng, hub = writekit.repo, writekit.eng, writekit.hub  # shared fixtures


def refused(vault: Vault, call: Callable[[], object], error: type[OskError],
            rule: str) -> OskError:
    """Run ``call``, expect ``error`` naming ``rule``, and check that nothing was written."""
    before = snapshot(vault)
    with pytest.raises(error) as caught:
        call()
    assert caught.value.rule == rule
    assert snapshot(vault) == before, "a refused write changed the vault"
    return caught.value


@pytest.fixture
def other(vault: Vault, tmp_path: Path) -> Engine:
    """A second project's session in the same vault, with its own hub and a raw round."""
    engine = Engine.open(vault, cwd=make_repo(tmp_path / "work" / "other"))
    engine.create_node(NewNode("billing", "How the other project bills", "Billing.\n",
                               space="Scope",
                               cluster="billing", drafter="test-model"))
    engine.append_raw("talk", user="price?", assistant="ten euros")
    return engine


def shared(vault: Vault, *scopes: str) -> None:
    listing = ", ".join(f'"{s}"' for s in scopes)
    write_toml(vault, f"[vault]\nshared_scopes = [{listing}]\n")


# -- creating ------------------------------------------------------------------------------
def test_create_writes_a_contract_node_with_a_server_id_and_the_agent_as_author(
        eng: Engine, vault: Vault, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OSK_NOW", "2026-11-29T18:02+09:00")
    result = eng.create_node(NewNode("auth", "How this project authenticates",
                                     "# Auth\n\nTokens.\n",
                                     space="Scope", cluster="auth", drafter="test-model"))
    assert is_uuid7(result.id)
    assert (result.action, result.path, result.scope) == ("created", "Scope/proj/auth/auth.md",
                                                          "proj")
    text = vault.abs(result.path).read_text(encoding="utf-8")
    assert text == (
        "---\n"
        f"id: {result.id}\n"
        "created: 2026-11-29T18:02+09:00\n"
        "updated: 2026-11-29T18:02+09:00\n"
        "author: agent\n"
        "drafter: test-model\n"
        "summary: How this project authenticates\n"
        "derived-from: []\n"
        "trust: inferred\n"
        "---\n"
        "# Auth\n\nTokens.\n"
    )


def test_the_first_scope_write_binds_the_session_key(eng: Engine, vault: Vault):
    assert not eng.session.bound
    first = eng.create_node(NewNode("auth", "hub", "x\n", space="Scope", cluster="auth",
                                    drafter="m"))
    second = create(eng, "Token lifetime")
    assert (first.bound_now, first.bound, second.bound_now) == (True, True, False)
    assert Routing(vault).scope_for("proj") == "proj" and Routing(vault).route("proj")[1]


def test_domain_and_person_writes_do_not_bind_the_session(eng: Engine, vault: Vault):
    eng.create_node(NewNode("patterns", "Reusable patterns", "x\n", space="Domain",
                            cluster="patterns",
                            drafter="m"))
    assert not Routing(vault).route("proj")[1] and not eng.session.bound


def test_a_person_at_the_terminal_writes_as_user_with_confirmed_trust(vault: Vault,
                                                                      repo: Path):
    person = Engine.open(vault, cwd=repo, actor="user")
    result = person.create_node(NewNode("me", "Who I am", "I prefer tabs.\n", space="Person",
                                        cluster="me", drafter="hand"))
    text = vault.abs(result.path).read_text(encoding="utf-8")
    assert "author: user\n" in text and "trust: confirmed\n" in text


@pytest.mark.parametrize("title", ["a/b", "CON", "ends with a dot.", " padded", "x[y]"])
def test_a_title_that_is_no_portable_file_name_is_refused(eng: Engine, vault: Vault,
                                                           title: str):
    refused(vault, lambda: eng.create_node(NewNode(title, "s", "b\n", space="Scope", cluster="auth",
                                                   drafter="m")), TitleError,
                                                   "unique-portable-titles")


def test_a_title_taken_after_case_folding_is_refused_vault_wide(eng: Engine, vault: Vault,
                                                                hub: str):
    error = refused(vault, lambda: eng.create_node(NewNode("AUTH", "s", "b\n", space="Domain",
                                                           cluster="auth", drafter="m")),
                    TitleError, "unique-portable-titles")
    assert "Scope/proj/auth/auth.md" in str(error)


def test_a_node_into_a_new_cluster_writes_the_clusters_hub_in_the_same_call(eng: Engine,
                                                                            vault: Vault):
    """Issue 24 item 6: no extra call per cluster; the hub rule still holds on disk."""
    made = create(eng, "Token lifetime", cluster="auth/tokens")
    assert made.path == "Scope/proj/auth/tokens/Token lifetime.md"
    assert made.hub == "Scope/proj/auth/auth.md"
    hub = eng.read_node("auth")
    assert hub.summary == "The auth cluster of proj"  # generated: the person may rewrite it
    assert "say here what the cluster holds" in hub.text
    assert validate.run(vault) == []
    again = create(eng, "Token rotation", cluster="auth")
    assert again.hub is None  # the cluster has its hub now
    given = eng.create_node(NewNode("Invoice dates", "s", "b\n", space="Scope",
                                    cluster="billing", drafter="m",
                                    hub_summary="How invoices are numbered and dated"))
    assert given.hub == "Scope/proj/billing/billing.md"
    assert eng.read_node("billing").summary == "How invoices are numbered and dated"
    assert len(audit.entries(vault)) == 5  # one audit record per node written


def test_a_hub_title_taken_elsewhere_is_refused_and_nothing_is_written(eng: Engine,
                                                                       vault: Vault):
    create(eng, "billing", cluster="money")  # the hub of money, then a node titled billing
    error = refused(vault, lambda: create(eng, "Invoice dates", cluster="billing"), HubMissing,
                    "cluster-hub-first")
    assert "The title 'billing' is already used by Scope/proj/money/billing.md" in str(error)


def test_a_node_refused_in_a_new_cluster_leaves_no_hub_behind(eng: Engine, vault: Vault):
    refused(vault, lambda: create(eng, "Token lifetime", cluster="auth",
                                  derived_from=("[[No such node]]",)), EdgeError,
            "citation-topology")


@pytest.mark.parametrize("space,cluster", [("Workbench", "x"), ("Nowhere", "x"),
                                           ("Scope", ""), ("Scope", "a/../b"),
                                           ("Scope", "bad:name")])
def test_a_node_goes_in_a_space_and_a_portable_cluster_folder(eng: Engine, vault: Vault,
                                                             space: str, cluster: str):
    refused(vault, lambda: eng.create_node(NewNode("x", "s", "b\n", space=space, cluster=cluster,
                                                   drafter="m")), PlacementError, "node-placement")


def test_a_session_cannot_create_a_node_in_another_scope(eng: Engine, vault: Vault):
    refused(vault, lambda: eng.create_node(NewNode("x", "s", "b\n", space="Scope", cluster="x",
                                                   scope="elsewhere", drafter="m")),
            ScopeError, "scope-boundary")


def test_a_summary_that_breaks_the_contract_is_refused(eng: Engine, vault: Vault):
    error = refused(vault, lambda: eng.create_node(NewNode("auth", "two\nlines", "b\n",
                                                           space="Scope",
                                                           cluster="auth", drafter="m")),
                    ContractError, "node-contract")
    assert error.key == "summary"


# -- citation topology ---------------------------------------------------------------------
def test_a_citation_of_a_missing_node_raw_round_or_file_is_refused(eng: Engine, vault: Vault,
                                                                   hub: str):
    eng.append_raw("talk", user="q", assistant="a")
    for link in ("[[Nothing here]]", "[[_raw/proj/talk#Round 2]]",
                 "[[_raw/proj/nope#Round 1]]", "[[file:src/missing.py]]", "[[file:../x]]",
                 "[[_raw/proj/talk#Round x]]"):
        refused(vault, lambda link=link: create(eng, "T", derived_from=(link,)), EdgeError,
                "citation-topology")


def test_existing_raw_node_and_file_targets_are_accepted(eng: Engine, vault: Vault, hub: str):
    ref = eng.append_raw("talk", user="q", assistant="a")
    result = create(eng, "T", derived_from=(ref.coordinate, "auth", "file:src/app.py"))
    text = vault.abs(result.path).read_text(encoding="utf-8")
    assert ('derived-from:\n  - "[[_raw/proj/talk#Round 1]]"\n  - "[[auth]]"\n'
            '  - file:src/app.py\n') in text  # plain: Obsidian would take [[…]] for a note


def test_no_node_cites_workbench_work_state(eng: Engine, vault: Vault, hub: str):
    (vault.root / "Workbench" / "plans").mkdir(parents=True)
    (vault.root / "Workbench" / "plans" / "Sprint plan.md").write_text("wip\n", encoding="utf-8")
    for link in ("[[Sprint plan]]", "[[Workbench/plans/Sprint plan]]"):
        error = refused(vault, lambda link=link: create(eng, "T", derived_from=(link,)),
                        EdgeError, "citation-topology")
        assert "Workbench" in str(error)


def test_a_domain_node_cannot_cite_a_raw_round_directly(eng: Engine, vault: Vault):
    ref = eng.append_raw("talk", user="q", assistant="a")
    eng.create_node(NewNode("patterns", "hub", "x\n", space="Domain", cluster="patterns",
                            drafter="m"))
    error = refused(vault, lambda: create(eng, "Retry pattern", space="Domain",
                                          cluster="patterns", derived_from=(ref.coordinate,)),
                    EdgeError, "citation-topology")
    assert error.topology == "domain-raw"


def test_a_scope_node_cannot_cite_another_scopes_node_even_when_shared(
        eng: Engine, other: Engine, vault: Vault, hub: str):
    shared(vault, "other")
    error = refused(vault, lambda: create(eng, "T", derived_from=("[[billing]]",)), EdgeError,
                    "citation-topology")
    assert error.topology == "cross-scope-node"


def test_a_scope_node_cannot_cite_another_scopes_raw_rounds(eng: Engine, other: Engine,
                                                            vault: Vault, hub: str):
    shared(vault, "other")
    error = refused(vault, lambda: create(eng, "T", derived_from=("_raw/other/talk#Round 1",)),
                    EdgeError, "citation-topology")
    assert error.topology == "cross-scope-raw"


def test_another_scopes_nodes_are_not_citable_from_domain_when_isolated(
        eng: Engine, other: Engine, vault: Vault):
    eng.create_node(NewNode("patterns", "hub", "x\n", space="Domain", cluster="patterns",
                            drafter="m"))
    error = refused(vault, lambda: create(eng, "Retry", space="Domain", cluster="patterns",
                                          derived_from=("[[billing]]",)),
                    EdgeError, "citation-topology")
    assert "can see" in str(error)


def test_conflicts_name_nodes_only(eng: Engine, vault: Vault, hub: str):
    ref = eng.append_raw("talk", user="q", assistant="a")
    refused(vault, lambda: eng.create_node(NewNode("T", "s", "b\n", space="Scope", cluster="auth",
                                                   drafter="m", conflicts=(ref.coordinate,))),
            EdgeError, "citation-topology")


def test_a_node_cannot_cite_itself(eng: Engine, vault: Vault, hub: str):
    refused(vault, lambda: eng.update_node("auth", NodeEdit(derived_from=["[[auth]]"])), EdgeError,
            "citation-topology")


# -- updating --------------------------------------------------------------------------------
def test_an_anchor_edit_replaces_exactly_that_passage(eng: Engine, vault: Vault, hub: str):
    created = create(eng, "T", body="alpha\nbeta\ngamma\n")
    result = eng.update_node("T", NodeEdit(old_text="beta", new_text="BETA"))
    assert result.action == "updated" and result.hash != created.hash
    assert vault.abs(result.path).read_text(encoding="utf-8").endswith(
        "---\nalpha\nBETA\ngamma\n")


@pytest.mark.parametrize("anchor,count", [("delta", 0), ("a", 5), ("aa", 2)])
def test_an_anchor_that_does_not_occur_exactly_once_is_refused_with_its_count(
        eng: Engine, vault: Vault, hub: str, anchor: str, count: int):
    create(eng, "T", body="aaa gamma\n")
    error = refused(vault, lambda: eng.update_node("T", NodeEdit(old_text=anchor, new_text="z")),
                    AnchorError, "unique-anchor")
    assert error.occurrences == count


def test_a_full_replacement_needs_the_hash_of_the_version_read(eng: Engine, vault: Vault,
                                                               hub: str):
    create(eng, "T", body="one\n")
    refused(vault, lambda: eng.update_node("T", NodeEdit(body="two\n")), StaleHash,
            "compare-and-swap")
    read = eng.read_node("T")
    eng.update_node("T", NodeEdit(old_text="one", new_text="uno"))  # someone else's change
    error = refused(vault, lambda: eng.update_node("T", NodeEdit(body="two\n",
                                                                 expect_hash=read.hash)),
                    StaleHash, "compare-and-swap")
    assert error.expected == read.hash
    fresh = eng.read_node("T")
    result = eng.update_node("T", NodeEdit(body="two\n", expect_hash=fresh.hash))
    assert vault.abs(result.path).read_text(encoding="utf-8").endswith("---\ntwo\n")


def test_body_and_anchor_together_are_refused(eng: Engine, vault: Vault, hub: str):
    create(eng, "T")
    h = eng.read_node("T").hash
    refused(vault, lambda: eng.update_node("T", NodeEdit(body="x\n", expect_hash=h, old_text="T",
                                                    new_text="y")), AnchorError, "unique-anchor")


def test_an_update_that_changes_nothing_writes_nothing(eng: Engine, vault: Vault, hub: str):
    create(eng, "T", summary="same")
    before = snapshot(vault)
    result = eng.update_node("T", NodeEdit(summary="same"))
    assert result.action == "unchanged" and snapshot(vault) == before


def test_summary_and_edges_change_without_touching_the_body(eng: Engine, vault: Vault,
                                                           hub: str):
    create(eng, "T", body="kept\n")
    result = eng.update_node("T", NodeEdit(summary="new summary", derived_from=["[[auth]]"]))
    text = vault.abs(result.path).read_text(encoding="utf-8")
    assert "summary: new summary\n" in text and '  - "[[auth]]"\n' in text
    # the body follows the sources section (docs/FORMAT.md §2), unchanged
    assert text.endswith(f"---\n{sources.render(['[[auth]]'], [], None)}kept\n")


def test_a_session_cannot_change_another_scopes_node(eng: Engine, other: Engine, vault: Vault,
                                                     hub: str):
    refused(vault, lambda: eng.update_node("billing", NodeEdit(summary="mine now")), NodeNotFound,
            "")
    shared(vault, "other")
    eng.refresh()
    refused(vault, lambda: eng.update_node("billing", NodeEdit(summary="mine now")), ScopeError,
            "scope-boundary")


# -- moving --------------------------------------------------------------------------------
@pytest.fixture
def two_clusters(eng: Engine, hub: str) -> None:
    eng.create_node(NewNode("storage", "Where data lives", "x\n", space="Scope", cluster="storage",
                            drafter="m"))
    create(eng, "Token store")
    create(eng, "Session rules", derived_from=("[[Token store]]",))


def test_a_move_keeps_every_link_and_citation_pointing_at_the_node(
        eng: Engine, vault: Vault, two_clusters: None):
    citing_before = vault.abs("Scope/proj/auth/Session rules.md").read_bytes()
    result = eng.move_nodes(["Token store"], space="Scope", cluster="storage")
    assert [(m.before, m.after) for m in result.moved] == [
        ("Scope/proj/auth/Token store.md", "Scope/proj/storage/Token store.md")]
    assert vault.abs("Scope/proj/auth/Session rules.md").read_bytes() == citing_before
    assert eng.read_node("Token store").path == "Scope/proj/storage/Token store.md"
    assert eng.recheck().candidates == ()
    # the citation still binds the moved node: changing it reopens the citing node
    eng.update_node("Token store", NodeEdit(old_text="Token store body", new_text="changed"))
    assert [c.citing_title for c in eng.recheck().candidates] == ["Session rules"]
    hits = eng.search("Token store")
    assert hits.hits[0].path == "Scope/proj/storage/Token store.md"


def test_a_move_into_another_scope_is_refused(eng: Engine, vault: Vault, two_clusters: None):
    refused(vault, lambda: eng.move_nodes(["Token store"], space="Scope", cluster="storage",
                                          scope="elsewhere"), ScopeError, "scope-boundary")


def test_a_move_may_not_leave_a_cluster_without_its_hub(eng: Engine, vault: Vault,
                                                        two_clusters: None):
    refused(vault, lambda: eng.move_nodes(["auth"], space="Scope", cluster="storage"),
            HubMissing, "cluster-hub-first")
    refused(vault, lambda: eng.move_nodes(["Token store"], space="Scope", cluster="nohub"),
            HubMissing, "cluster-hub-first")


def test_a_move_to_domain_of_a_node_citing_raw_rounds_is_refused(eng: Engine, vault: Vault,
                                                                 hub: str):
    ref = eng.append_raw("talk", user="q", assistant="a")
    create(eng, "Decision", derived_from=(ref.coordinate,))
    eng.create_node(NewNode("patterns", "hub", "x\n", space="Domain", cluster="patterns",
                            drafter="m"))
    error = refused(vault, lambda: eng.move_nodes(["Decision"], space="Domain",
                                                  cluster="patterns"),
                    EdgeError, "citation-topology")
    assert error.topology == "domain-raw" and "after this move" in str(error)


def test_a_move_into_a_scope_is_refused_while_another_scope_cites_the_node(
        eng: Engine, other: Engine, vault: Vault, hub: str):
    eng.create_node(NewNode("patterns", "hub", "x\n", space="Domain", cluster="patterns",
                            drafter="m"))
    create(eng, "Retry", space="Domain", cluster="patterns")
    other.create_node(NewNode("Billing retries", "s", "b\n", space="Scope", cluster="billing",
                              drafter="m", derived_from=["[[Retry]]"]))
    error = refused(vault, lambda: eng.move_nodes(["Retry"], space="Scope", cluster="auth"),
                    EdgeError, "citation-topology")
    assert error.topology == "cross-scope-node"


def test_move_cluster_takes_hub_nodes_and_attachments_to_another_space(
        eng: Engine, vault: Vault, two_clusters: None):
    (vault.abs("Scope/proj/storage") / "diagram.png").write_bytes(b"\x89PNG")
    result = eng.move_cluster("storage", space="Scope", to_space="Domain")
    assert sorted(m.after for m in result.moved) == ["Domain/storage/storage.md"]
    assert not vault.abs("Scope/proj/storage").exists()
    assert (vault.abs("Domain/storage") / "diagram.png").read_bytes() == b"\x89PNG"
    eng.move_nodes(["Token store"], space="Domain", cluster="storage")
    assert eng.read_node("Session rules").derived_from == ("[[Token store]]",)
    assert eng.read_node("Token store").path == "Domain/storage/Token store.md"


def test_move_cluster_refuses_when_a_member_would_break_topology(eng: Engine, vault: Vault,
                                                                 hub: str):
    ref = eng.append_raw("talk", user="q", assistant="a")
    create(eng, "Decision", derived_from=(ref.coordinate,))
    refused(vault, lambda: eng.move_cluster("auth", space="Scope", to_space="Domain"),
            EdgeError, "citation-topology")
    refused(vault, lambda: eng.move_cluster("nothing", space="Scope", to_space="Domain"),
            PlacementError, "node-placement")


# -- authority integration points -------------------------------------------------------------
def test_every_create_update_and_move_leaves_one_audit_record(eng: Engine, vault: Vault,
                                                              two_clusters: None):
    node = eng.read_node("Token store")
    first_hash = node.hash
    updated = eng.update_node("Token store", NodeEdit(old_text="Token store body", new_text="v2"))
    eng.move_nodes(["Token store"], space="Scope", cluster="storage")
    history = audit.history(vault, node.id)
    assert [e.action for e in history] == ["create", "update", "move"]
    assert (history[0].before, history[0].after) == (None, first_hash)
    assert (history[1].before, history[1].after) == (first_hash, updated.hash)
    assert history[2].before == history[2].after == updated.hash
    assert history[0].actor == "agent:proj"


def test_ledgers_stay_parseable_after_writes(eng: Engine, vault: Vault, two_clusters: None):
    for name in ("routing", "rechecks", "audit"):
        assert Ledger(vault, name).read().records


class _Terminal:
    def isatty(self) -> bool:
        return True


def test_a_claim_the_person_rejected_is_refused_by_create_and_update(
        eng: Engine, vault: Vault, hub: str, monkeypatch: pytest.MonkeyPatch):
    create(eng, "Port", body="The API listens on 8080.\n")
    create(eng, "Host", body="The API runs on localhost.\n")
    with monkeypatch.context() as person:
        person.setattr(sys, "stdin", _Terminal())
        tombstones.reject(vault, "Port", reason="we moved to 9090")
    eng.refresh()
    error = refused(vault, lambda: create(eng, "Port again", body="The API listens on 8080.\n"),
                    TombstoneError, "tombstones")
    assert error.reason == "we moved to 9090"
    refused(vault, lambda: eng.update_node("Host", NodeEdit(old_text="runs on localhost",
                                                    new_text="listens on 8080")),
            TombstoneError, "tombstones")


def test_a_node_that_supersedes_another_closes_its_validity(eng: Engine, vault: Vault,
                                                            hub: str):
    old = create(eng, "Old limit", body="Ten per minute.\n")
    new = eng.create_node(NewNode("New limit", "Twenty per minute", "Twenty per minute.\n",
                                  space="Scope", cluster="auth", drafter="m",
                                  valid_from="2026-12-01T00:00+00:00", supersedes="Old limit"))
    assert new.superseded == "Old limit"
    text = vault.abs(old.path).read_text(encoding="utf-8")
    assert "valid_to: 2026-12-01T00:00+00:00\n" in text
    assert 'supersedes: "[[Old limit]]"\n' in vault.abs(new.path).read_text(encoding="utf-8")
    assert [e.action for e in audit.history(vault, old.id)] == ["create", "supersede"]


def test_an_agent_rewrite_of_a_confirmed_node_is_inferred_again(eng: Engine, vault: Vault,
                                                                repo: Path):
    person = Engine.open(vault, cwd=repo, actor="user")
    person.create_node(NewNode("me", "Who I am", "I prefer tabs.\n", space="Person", cluster="me",
                               drafter="hand"))
    result = eng.update_node("me", NodeEdit(old_text="tabs", new_text="spaces"))
    assert result.trust == "inferred"
    assert "author: agent\n" in vault.abs(result.path).read_text(encoding="utf-8")


def test_links_not_named_in_an_update_are_kept_exactly_as_written(eng: Engine, vault: Vault,
                                                                  hub: str):
    created = create(eng, "T", derived_from=("[[auth]]",))
    path = vault.abs(created.path)
    path.write_text(path.read_text(encoding="utf-8").replace("[[auth]]", "[[AUTH]]"),
                    encoding="utf-8")  # a person's spelling of the same link
    eng.refresh()
    before = snapshot(vault)
    assert eng.update_node("T", NodeEdit()).action == "unchanged" and snapshot(vault) == before
    eng.update_node("T", NodeEdit(summary="new words"))
    assert '  - "[[AUTH]]"\n' in path.read_text(encoding="utf-8")
