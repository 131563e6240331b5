"""A claim the person rejected cannot be written again until the person lifts the tombstone."""

from __future__ import annotations

import sys

import pytest
from authority_support import FakeTerminal, agent_write, node_text, osk

from osk.authority import tombstones
from osk.errors import OskError, TombstoneError
from osk.store import objects
from osk.store.fsutil import sha256_text
from osk.store.ledger import Ledger
from osk.store.vault import Vault

CLAIM = "Scope/app/db/Primary database.md"
BODY = "The app stores orders in MongoDB.\n"


@pytest.fixture
def person(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", FakeTerminal())


@pytest.fixture
def rejected(vault: Vault, person: None) -> tombstones.Tombstone:
    agent_write(vault, CLAIM, node_text(body=BODY))
    return tombstones.reject(vault, "Primary database", reason="We use Postgres since 2025")


def test_normalising_ignores_whitespace_case_and_unicode_form():
    assert tombstones.normalise("  Café\n\tSTRASSE  ") == tombstones.normalise(
        "cafe\u0301 strasse"
    )
    assert tombstones.claim_key("A", "x  y") == tombstones.claim_key("a", "X\ny\n")
    assert tombstones.content_key(" \n ") is None


def test_reject_removes_the_claim_and_keeps_its_text(vault: Vault, person: None):
    text = node_text(body=BODY)
    agent_write(vault, CLAIM, text)
    tomb = tombstones.reject(vault, "Primary database", reason="We use Postgres since 2025")
    assert not vault.abs(CLAIM).exists()
    assert tomb.object == sha256_text(text) and objects.get(vault, tomb.object) == text
    record = Ledger(vault, "tombstones").read().records[-1]
    assert (record.kind, record.subject, record.data["reason"]) == (
        "reject", tombstones.claim_key("Primary database", BODY), "We use Postgres since 2025"
    )


def test_a_tombstoned_claim_cannot_be_rewritten(vault: Vault, rejected: tombstones.Tombstone):
    again = node_text(body="The app stores   orders in\nMONGODB.\n")
    with pytest.raises(TombstoneError) as refused:
        agent_write(vault, CLAIM, again)
    message = str(refused.value)
    assert "rejected by the person on" in message and rejected.time in message
    assert "We use Postgres since 2025" in message
    assert refused.value.reason == "We use Postgres since 2025"
    assert not vault.abs(CLAIM).exists()  # refused: nothing written


def test_the_same_body_under_another_title_is_the_same_claim(
    vault: Vault, rejected: tombstones.Tombstone
):
    with pytest.raises(TombstoneError):
        tombstones.check(vault, "Orders store", BODY)


def test_a_different_claim_under_the_old_title_is_allowed(
    vault: Vault, rejected: tombstones.Tombstone
):
    tombstones.check(vault, "Primary database", "The app stores orders in Postgres.\n")
    agent_write(vault, CLAIM, node_text(body="The app stores orders in Postgres.\n"))


def test_lifting_a_tombstone_lets_the_claim_be_written_again(
    vault: Vault, rejected: tombstones.Tombstone
):
    tombstones.lift(vault, rejected.key[:10], reason="we went back")
    assert tombstones.active(vault) == []
    assert [t.lifted for t in tombstones.all_tombstones(vault)] == [True]
    agent_write(vault, CLAIM, node_text(body=BODY))


def test_rejecting_again_after_a_lift_reinstates_the_tombstone(
    vault: Vault, rejected: tombstones.Tombstone
):
    tombstones.lift(vault, rejected.key[:10])
    agent_write(vault, CLAIM, node_text(body=BODY))
    tombstones.reject(vault, "Primary database", reason="still no")
    with pytest.raises(TombstoneError, match="still no"):
        tombstones.check(vault, "Primary database", BODY)


def test_reject_needs_a_reason_and_writes_nothing_without_one(vault: Vault, person: None):
    agent_write(vault, CLAIM, node_text(body=BODY))
    with pytest.raises(OskError, match="--reason"):
        tombstones.reject(vault, "Primary database", reason="  ")
    assert vault.abs(CLAIM).exists()
    assert not vault.ledger_path("tombstones").exists()


def test_lift_wants_an_unambiguous_key(vault: Vault, rejected: tombstones.Tombstone):
    with pytest.raises(OskError, match="at least 6"):
        tombstones.lift(vault, rejected.key[:3])
    with pytest.raises(OskError, match="no active tombstone"):
        tombstones.lift(vault, "ffffffffffff" if not rejected.key.startswith("f") else "000000")


def test_the_cli_lists_active_and_lifted_tombstones(vault: Vault,
                                                    rejected: tombstones.Tombstone):
    listing = osk(vault, "tombstones")
    assert rejected.key[:12] in listing.out and "We use Postgres since 2025" in listing.out
    tombstones.lift(vault, rejected.key[:10])
    assert osk(vault, "tombstones").out.strip() == "No tombstones."
    assert "(lifted)" in osk(vault, "tombstones", "--all").out


def test_rejecting_tells_the_person_about_twins_and_citing_nodes(vault: Vault):
    agent_write(vault, CLAIM, node_text(body=BODY))
    twin = "Scope/app/db/Orders store.md"
    agent_write(vault, twin, node_text(body=BODY))
    citing = "Scope/app/db/Order flow.md"
    cited_text = node_text(body="Orders go to the primary database.\n").replace(
        "derived-from: []", 'derived-from:\n  - "[[Primary database]]"')
    vault.abs(citing).write_text(cited_text, encoding="utf-8")
    result = osk(vault, "reject", "Primary database", "--reason", "Postgres", tty=True)
    assert result.code == 0, result.err
    assert "same claim (their next edit will be refused" in result.out
    assert twin in result.out and citing in result.out
