"""An agent's inference about the person stays marked until the person confirms it."""

from __future__ import annotations

import sys

import pytest
from authority_support import FakeTerminal, agent_write, edit_body, node_text, read

from osk.authority import approvals, audit, protection, trust
from osk.errors import ProtectedRegionError
from osk.store import node
from osk.store.catalog import Catalog
from osk.store.vault import Vault

FACT = "Person/habits/Tabs.md"


@pytest.fixture
def person(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", FakeTerminal())


def load(vault: Vault, rel: str) -> node.Node:
    return node.parse(rel, read(vault, rel))


def agent_person_fact(vault: Vault) -> node.Node:
    text = node_text(body="The person prefers tabs.\n",
                     trust=trust.trust_for_new("Person", "agent:s1"))
    agent_write(vault, FACT, text)
    return load(vault, FACT)


def test_the_person_writes_confirmed_facts_and_agents_write_inferences():
    assert trust.trust_for_new("Person", "user") == "confirmed"
    assert trust.trust_for_new("Person", "agent:s1") == "inferred"
    assert trust.trust_for_new("Scope", "agent") == "inferred"
    assert trust.trust_for_new("Domain", "user") == "confirmed"


def test_an_agent_edit_of_a_confirmed_person_fact_is_an_inference_again():
    assert trust.trust_for_update("Person", "agent:s1", "confirmed") == "inferred"
    assert trust.trust_for_update("Person", "user", "inferred") == "confirmed"


def test_an_agent_written_person_node_is_marked_inferred_until_confirmed(
    vault: Vault, person: None
):
    fact = agent_person_fact(vault)
    assert fact.meta.trust == "inferred"
    assert trust.marker(fact) == "inferred"

    done = trust.confirm(vault, "Tabs")
    confirmed = load(vault, FACT)
    assert (confirmed.meta.trust, confirmed.body) == ("confirmed", fact.body)
    assert trust.marker(confirmed) is None
    last = audit.entries(vault)[-1]
    assert (last.action, last.actor, last.after) == ("confirm", "user", done.after)


def test_a_node_written_without_a_trust_key_follows_its_author(vault: Vault):
    agent_write(vault, FACT, node_text(body="The person prefers tabs.\n"))
    assert trust.marker(load(vault, FACT)) == "inferred"
    mine = "Person/habits/Spaces.md"
    agent_write(vault, mine, node_text(body="I use spaces.\n", author="user"), actor="user")
    assert trust.marker(load(vault, mine)) is None


def test_only_person_space_inferences_are_marked(vault: Vault):
    rel = "Domain/py/Typing.md"
    agent_write(vault, rel, node_text(body="Use typing.Self.\n", trust="inferred"))
    assert trust.marker(load(vault, rel)) is None


def test_the_vault_setting_keeps_inferred_person_facts_out_of_injection(vault: Vault):
    fact = agent_person_fact(vault)
    assert trust.injectable(vault, fact.space, fact.meta.trust_state)
    settings = (vault.root / "osk.toml").read_text(encoding="utf-8")
    (vault.root / "osk.toml").write_text(
        settings.replace("inject_inferred_person = true", "inject_inferred_person = false"),
        encoding="utf-8",
    )
    assert not trust.injectable(vault, fact.space, fact.meta.trust_state)
    confirmed = load(vault, FACT).meta.model_copy(update={"trust": "confirmed"})
    assert trust.injectable(vault, fact.space, confirmed.trust_state)
    # what the hooks do with it: tests/hooks/test_recall.py (per-prompt recall, session start)


def test_confirming_twice_writes_nothing_the_second_time(vault: Vault, person: None):
    agent_person_fact(vault)
    trust.confirm(vault, "Tabs")
    count = len(audit.entries(vault))
    text = read(vault, FACT)
    assert trust.confirm(vault, "Tabs").after is None
    assert (len(audit.entries(vault)), read(vault, FACT)) == (count, text)


def test_confirming_inside_a_protected_region_is_served_at_once(vault: Vault, person: None):
    agent_person_fact(vault)
    approvals.protect(vault, "Person/habits")
    trust.confirm(vault, "Tabs")
    served = protection.served(vault, FACT, read(vault, FACT))
    assert not served.pending and "trust: confirmed" in (served.text or "")


def test_confirm_waits_for_a_pending_change_to_be_decided(vault: Vault, person: None):
    agent_person_fact(vault)
    approvals.protect(vault, "Person/habits")
    agent_write(vault, FACT, edit_body(vault, FACT, "The person prefers 2 spaces.\n"))
    with pytest.raises(ProtectedRegionError, match="Decide on the pending change first"):
        trust.confirm(vault, "Tabs")


def test_catalog_nodes_expose_the_marker(vault: Vault):
    agent_person_fact(vault)
    catalog = Catalog(vault)
    catalog.refresh()
    assert [trust.marker(n) for n in catalog.nodes()] == ["inferred"]
