"""Validity time: supersession closes the old claim, and the past can be read back (as_of)."""

from __future__ import annotations

import sys

import pytest
from authority_support import FakeTerminal, agent_write, edit_body, node_text, read

from osk.authority import approvals, tombstones, validity
from osk.errors import ProtectedRegionError, ValidityError
from osk.store import clock, node
from osk.store.catalog import Catalog
from osk.store.vault import Vault

OLD = "Domain/api/Rate limit 2025.md"
NEW = "Domain/api/Rate limit 2026.md"
T0, T1, T2 = "2026-01-05T10:00+00:00", "2026-03-01T09:00+00:00", "2026-05-01T09:00+00:00"


@pytest.fixture
def person(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", FakeTerminal())


def at(text: str):
    return clock.parse(text)


def catalog_of(vault: Vault) -> Catalog:
    catalog = Catalog(vault)
    catalog.refresh()
    return catalog


def as_of(vault: Vault, moment):
    """The nodes as served at ``moment`` (``validity.as_of_view``)."""
    return validity.as_of_view(vault, catalog_of(vault), moment).nodes


def supersede(vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    """The old claim written at T0; at T1 a new node supersedes it (as the write path does)."""
    monkeypatch.setenv("OSK_NOW", T0)
    agent_write(vault, OLD, node_text(body="The limit is 100 requests a minute.\n"))
    monkeypatch.setenv("OSK_NOW", T1)
    new_text = node_text(body="The limit is 500 requests a minute.\n",
                         supersedes="[[Rate limit 2025]]")
    catalog = catalog_of(vault)
    start = validity.start_of(node.parse(NEW, new_text).meta)
    validity.prepare_close(vault, catalog, supersedes="[[Rate limit 2025]]", start=start)
    written = agent_write(vault, NEW, new_text)
    validity.close_superseded(vault, catalog, supersedes="[[Rate limit 2025]]", start=start,
                              actor="agent:test", new_id=written.node_id,
                              new_title="Rate limit 2026", lock=True)


def titles(nodes) -> list[str]:
    return sorted(n.title for n in nodes)


def test_validity_is_a_half_open_interval():
    meta = node.parse("Domain/X.md", node_text(body="x\n", valid_from=T0, valid_to=T1))
    assert validity.state(meta, at("2026-01-05T09:59+00:00")) == "future"
    assert validity.state(meta, at(T0)) == "valid"
    assert validity.state(meta, at(T1)) == "expired"
    assert [validity.tier(meta, at(t)) for t in (T0, "2026-01-01T00:00+00:00", T2)] == [0, 1, 2]


def test_an_interval_that_ends_before_it_starts_is_refused():
    validity.check_interval(T0, T1)
    validity.check_interval(None, T1)
    with pytest.raises(ValidityError, match="before valid_from"):
        validity.check_interval(T1, T0)


def test_superseding_closes_the_old_claim_at_the_new_ones_start(vault: Vault, monkeypatch):
    supersede(vault, monkeypatch)
    old = node.parse(OLD, read(vault, OLD))
    assert old.meta.valid_to == T1
    assert old.meta.updated == T1
    assert old.body == "The limit is 100 requests a minute.\n"
    assert validity.state(old, at(T2)) == "expired"


def test_as_of_before_the_supersession_returns_the_superseded_node(vault: Vault, monkeypatch):
    supersede(vault, monkeypatch)
    before = as_of(vault, at("2026-02-01T00:00+00:00"))
    assert titles(before) == ["Rate limit 2025"]
    assert before[0].meta.valid_to is None  # the version served then, before it was closed
    after = as_of(vault, at(T2))
    assert titles(after) == ["Rate limit 2026"]
    assert as_of(vault, at("2025-12-31T00:00+00:00")) == []


def test_as_of_serves_the_version_current_at_that_date(vault: Vault, monkeypatch):
    monkeypatch.setenv("OSK_NOW", T0)
    rel = "Domain/api/Auth.md"
    agent_write(vault, rel, node_text(body="Auth uses API keys.\n"))
    monkeypatch.setenv("OSK_NOW", T1)
    agent_write(vault, rel, edit_body(vault, rel, "Auth uses OAuth.\n"))
    then = as_of(vault, at("2026-02-01T00:00+00:00"))
    now = as_of(vault, at(T2))
    assert [n.body for n in then] == ["Auth uses API keys.\n"]
    assert [n.body for n in now] == ["Auth uses OAuth.\n"]


def test_as_of_shows_a_rejected_claim_only_before_its_rejection(
    vault: Vault, monkeypatch, person: None
):
    monkeypatch.setenv("OSK_NOW", T0)
    agent_write(vault, OLD, node_text(body="The limit is 100 requests a minute.\n"))
    monkeypatch.setenv("OSK_NOW", T1)
    tombstones.reject(vault, "Rate limit 2025", reason="never true")
    assert titles(as_of(vault, at("2026-02-01T00:00+00:00"))) \
        == ["Rate limit 2025"]
    assert as_of(vault, at(T2)) == []


def test_as_of_serves_the_approved_version_while_a_change_was_pending(
    vault: Vault, monkeypatch, person: None
):
    monkeypatch.setenv("OSK_NOW", T0)
    rel = "Person/work/Hours.md"
    agent_write(vault, rel, node_text(body="Works 9 to 5.\n", author="user"), actor="user")
    approvals.protect(vault, "Person/work")
    monkeypatch.setenv("OSK_NOW", T1)
    agent_write(vault, rel, edit_body(vault, rel, "Works nights.\n"))
    monkeypatch.setenv("OSK_NOW", T2)
    approvals.approve(vault, rel)
    pending_then = as_of(vault, at("2026-04-01T00:00+00:00"))
    assert [n.body for n in pending_then] == ["Works 9 to 5.\n"]
    later = as_of(vault, at("2026-06-01T00:00+00:00"))
    assert [n.body for n in later] == ["Works nights.\n"]


def test_a_bare_date_means_the_end_of_that_day():
    moment = validity.parse_as_of("2026-03-01")
    assert (moment.date().isoformat(), moment.hour, moment.minute) == ("2026-03-01", 23, 59)
    assert validity.parse_as_of(T1) == at(T1)
    with pytest.raises(ValidityError, match="not a date"):
        validity.parse_as_of("last week")


def test_superseding_cannot_start_before_the_old_claim(vault: Vault, monkeypatch):
    monkeypatch.setenv("OSK_NOW", T1)
    agent_write(vault, OLD, node_text(body="100 a minute.\n", valid_from=T1))
    before = read(vault, OLD)
    with pytest.raises(ValidityError, match="cannot supersede"):
        validity.close_superseded(vault, catalog_of(vault), supersedes="[[Rate limit 2025]]",
                                  start=T0, actor="agent", lock=True)
    assert read(vault, OLD) == before


def test_an_old_claim_already_closed_earlier_is_left_alone(vault: Vault, monkeypatch):
    monkeypatch.setenv("OSK_NOW", T0)
    agent_write(vault, OLD, node_text(body="100 a minute.\n", valid_to=T0))
    before = read(vault, OLD)
    closing = validity.close_superseded(vault, catalog_of(vault),
                                        supersedes="[[Rate limit 2025]]", start=T1,
                                        actor="agent", lock=True)
    assert closing.after_text is None and read(vault, OLD) == before


def test_a_superseded_node_with_a_pending_change_is_refused_before_anything_is_written(
    vault: Vault, monkeypatch, person: None
):
    agent_write(vault, OLD, node_text(body="100 a minute.\n"))
    approvals.protect(vault, "Domain/api")
    agent_write(vault, OLD, edit_body(vault, OLD, "200 a minute.\n"))
    with pytest.raises(ProtectedRegionError):
        validity.prepare_close(vault, catalog_of(vault), supersedes="[[Rate limit 2025]]",
                               start=T2)


def test_supersedes_must_name_an_existing_node(vault: Vault):
    from osk.errors import NodeNotFound

    with pytest.raises(NodeNotFound, match="not a node"):
        validity.prepare_close(vault, catalog_of(vault), supersedes="[[Nothing]]", start=T1)
    with pytest.raises(ValidityError, match=r"\[\[Title\]\]"):
        validity.prepare_close(vault, catalog_of(vault), supersedes="[[file:a.py]]", start=T1)
