"""What agents leave for the person: `osk candidates` / `osk dismiss`, `osk evictions` /
`osk settle`. Listing works anywhere; deciding is refused through a pipe and works at a pty."""

from __future__ import annotations

import io
import json
import sys

import pytest
import writekit
from authority_support import FakeTerminal, osk
from writekit import create

from osk.engine.core import Engine
from osk.errors import AuthorityError, CandidateError, LimitError, ScopeError
from osk.provenance import candidates as candidates_mod
from osk.provenance import scope_memory
from osk.provenance.candidates import Candidates, Party
from osk.provenance.scope_memory import CAP, ScopeMemory, pending_evictions
from osk.store.ledger import Ledger
from osk.store.vault import Vault

repo, eng, hub = writekit.repo, writekit.eng, writekit.hub  # shared fixtures


def party(n: int) -> Party:
    return Party(id=f"0000000{n}-node", title=f"Cache TTL {n}", path=f"Domain/Cache/TTL {n}.md",
                 hash=f"{n:064x}")


@pytest.fixture
def filed(vault: Vault) -> candidates_mod.Candidate:
    candidate, _ = Candidates(vault).record("contradiction", [party(1), party(2)],
                                            "60 seconds or five minutes?")
    return candidate


def ledger_bytes(vault: Vault, name: str) -> bytes:
    path = vault.ledger_path(name)
    return path.read_bytes() if path.exists() else b""


def lines(count: int) -> str:
    return "".join(f"{i:03d} " + "x" * 55 + "\n" for i in range(count))


@pytest.fixture
def evicted(vault: Vault) -> scope_memory.Eviction:
    """One pending eviction in scope ``app``: an over-cap refusal, then a shrinking write."""
    memory = ScopeMemory(vault, "app")
    memory.write(text=lines(10), expect_hash=memory.read()[1])
    with pytest.raises(LimitError):
        memory.write(text="q" * (CAP + 5), expect_hash=memory.read()[1])
    memory.write(text=lines(3), expect_hash=memory.read()[1])
    (eviction,) = memory.pending_evictions()
    return eviction


@pytest.fixture
def at_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", FakeTerminal())


# -- candidates -------------------------------------------------------------------------------
def test_candidates_lists_each_open_one_with_key_type_party_titles_note_and_date(
        vault: Vault, filed: candidates_mod.Candidate):
    result = osk(vault, "candidates")
    assert result.code == 0, result.err
    first, parties, note, footer = result.out.splitlines()
    assert first == f"{filed.key[:12]}  {filed.at}  contradiction"
    assert parties == "    parties: [[Cache TTL 1]] / [[Cache TTL 2]]"
    assert note == "    note: 60 seconds or five minutes?"
    assert footer.startswith("1 open candidate(s).") and "osk dismiss KEY" in footer

    (item,) = json.loads(osk(vault, "candidates", "--json").out)
    assert (item["key"], item["type"], item["status"]) == (filed.key, "contradiction", "open")
    assert [p["title"] for p in item["parties"]] == ["Cache TTL 1", "Cache TTL 2"]


def test_an_empty_queue_says_so(vault: Vault):
    assert osk(vault, "candidates").out == "No open candidates.\n"
    assert osk(vault, "evictions").out == "No pending evictions.\n"


def test_dismiss_through_a_pipe_is_refused_and_writes_nothing(
        vault: Vault, filed: candidates_mod.Candidate):
    before = ledger_bytes(vault, "candidates")
    result = osk(vault, "dismiss", filed.key[:12], "--reason", "both hold")
    assert result.code == 5, result.err
    assert result.err.startswith("Error: `osk dismiss` is reserved for a person at a terminal")
    assert "not a defence against a process that fakes a terminal" in result.err
    assert ledger_bytes(vault, "candidates") == before
    assert [c.key for c in Candidates(vault).open()] == [filed.key]


def test_dismiss_at_a_real_terminal_closes_the_candidate_named_by_a_key_prefix(
        vault: Vault, filed: candidates_mod.Candidate):
    result = osk(vault, "dismiss", filed.key[:8], "--reason", "both hold in different regions",
                 tty=True)
    assert result.code == 0, result.err
    assert f"Dismissed contradiction candidate {filed.key[:12]}" in result.out
    assert Candidates(vault).open() == []
    record = Ledger(vault, "candidates").read().for_subject(filed.key)[-1]
    assert (record.kind, record.data["actor"], record.data["reason"]) == (
        "dismiss", "user", "both hold in different regions")

    assert osk(vault, "candidates").out == "No open candidates.\n"
    listed = osk(vault, "candidates", "--all").out
    assert f"{filed.key[:12]}  {filed.at}  contradiction (dismissed)" in listed
    again = osk(vault, "dismiss", filed.key[:12], "--reason", "again", tty=True)
    assert again.code == 1 and "already dismissed" in again.err


@pytest.mark.parametrize(("prefix", "fragment"), [
    ("abcdef0", "at least 8 hex characters"),
    ("not-hex-at-all", "at least 8 hex characters"),
    ("abcdef01", "2 candidate keys start with 'abcdef01'"),
    ("abcdef019", "no candidate key starts with 'abcdef019'"),
])
def test_a_short_unknown_or_ambiguous_key_prefix_is_refused_and_nothing_is_written(
        vault: Vault, at_terminal: None, prefix: str, fragment: str):
    ledger = Ledger(vault, "candidates")
    for tail in ("a", "b"):  # two keys sharing their first eight characters
        ledger.append("candidate", "abcdef01" + tail * 56, {
            "type": "duplication", "parties": [party(1).to_data(), party(2).to_data()],
            "note": "", "actor": "agent"})
    before = ledger_bytes(vault, "candidates")
    with pytest.raises(CandidateError, match=fragment):
        candidates_mod.dismiss_at_terminal(vault, prefix, reason="no")
    assert ledger_bytes(vault, "candidates") == before


def test_a_dismissal_needs_a_reason(vault: Vault, filed: candidates_mod.Candidate,
                                    at_terminal: None):
    with pytest.raises(CandidateError, match="--reason"):
        candidates_mod.dismiss_at_terminal(vault, filed.key, reason="  ")
    assert len(Candidates(vault).open()) == 1


def test_the_engine_function_checks_the_terminal_itself(
        vault: Vault, filed: candidates_mod.Candidate, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # what an MCP server's stdin looks like
    with pytest.raises(AuthorityError):
        candidates_mod.dismiss_at_terminal(vault, filed.key, reason="no")
    assert len(Candidates(vault).open()) == 1


def test_after_a_dismissal_search_no_longer_marks_its_parties_as_in_conflict(
        eng: Engine, vault: Vault, hub: str, at_terminal: None):
    create(eng, "Claim", body="We allow ten quokkas.\n")
    create(eng, "Rival", body="We allow five quokkas.\n")
    filed, _ = Candidates(vault).record("contradiction", [eng.catalog.get("Claim"),
                                                          eng.catalog.get("Rival")])
    marked = {h.title: h.markers for h in eng.search("quokkas").hits}
    assert marked == {"Claim": ("conflict",), "Rival": ("conflict",)}

    candidates_mod.dismiss_at_terminal(vault, filed.key[:10], reason="regional difference")
    assert {h.title: h.markers for h in eng.search("quokkas").hits} == {"Claim": (),
                                                                      "Rival": ()}
    assert eng.read_node("Claim").markers == ()


# -- evictions --------------------------------------------------------------------------------
def test_evictions_lists_each_pending_one_with_its_scope_and_lines(
        vault: Vault, evicted: scope_memory.Eviction):
    result = osk(vault, "evictions")
    assert result.code == 0, result.err
    out = result.out.splitlines()
    assert out[0] == f"{evicted.id}  {evicted.at}  scope app: 7 line(s)"
    assert out[1:8] == [f"    {line}" for line in lines(10).splitlines()[3:]]
    assert out[8].startswith("1 pending eviction(s).") and "osk settle ID --dismissed" in out[8]

    (item,) = json.loads(osk(vault, "evictions", "--scope", "app", "--json").out)
    assert (item["id"], item["scope"], len(item["lines"])) == (evicted.id, "app", 7)
    assert osk(vault, "evictions", "--scope", "web").out == "No pending evictions.\n"
    assert osk(vault, "evictions", "--scope", "../etc").code == 1


def test_settle_through_a_pipe_is_refused_and_writes_nothing(
        vault: Vault, evicted: scope_memory.Eviction):
    before = ledger_bytes(vault, "evictions")
    result = osk(vault, "settle", evicted.id, "--dismissed")
    assert result.code == 5, result.err
    assert result.err.startswith("Error: `osk settle` is reserved for a person at a terminal")
    assert ledger_bytes(vault, "evictions") == before
    assert [e.id for e in pending_evictions(vault)] == [evicted.id]


def test_settle_at_a_real_terminal_removes_the_eviction_from_pending(
        vault: Vault, evicted: scope_memory.Eviction):
    result = osk(vault, "settle", evicted.id[:8], "--dismissed", tty=True)
    assert result.code == 0, result.err
    assert f"Settled eviction {evicted.id} (scope app, 7 line(s)) as dismissed" in result.out
    assert pending_evictions(vault) == [] and ScopeMemory(vault, "app").pending_evictions() == []
    record = Ledger(vault, "evictions").read().for_subject(evicted.id)[-1]
    assert (record.kind, record.data["how"], record.data["actor"]) == ("settle", "dismissed",
                                                                       "user")
    assert osk(vault, "evictions").out == "No pending evictions.\n"
    again = osk(vault, "settle", evicted.id, "--dismissed", tty=True)
    assert again.code == 1 and "no pending eviction id starts with" in again.err


def test_settle_needs_the_dismissed_flag_and_a_long_enough_id(
        vault: Vault, evicted: scope_memory.Eviction):
    assert osk(vault, "settle", evicted.id, tty=True).code == 2  # argparse: --dismissed missing
    short = osk(vault, "settle", evicted.id[:7], "--dismissed", tty=True)
    assert short.code == 1 and "at least 8 characters" in short.err
    assert [e.id for e in pending_evictions(vault)] == [evicted.id]


def test_settling_as_dismissed_in_process_checks_the_terminal_too(
        vault: Vault, evicted: scope_memory.Eviction, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    before = ledger_bytes(vault, "evictions")
    with pytest.raises(AuthorityError):
        ScopeMemory(vault, "app").settle(evicted.id, "dismissed", actor="user")
    with pytest.raises(AuthorityError):
        scope_memory.dismiss_at_terminal(vault, evicted.id)
    assert ledger_bytes(vault, "evictions") == before
    monkeypatch.setattr(sys, "stdin", FakeTerminal())
    with pytest.raises(ScopeError, match="no pending eviction id"):
        scope_memory.dismiss_at_terminal(vault, "ffffffff")
