"""Candidates: keyed on type and each party's id@body-hash; re-filing is a no-op."""

from __future__ import annotations

import json

import pytest

from osk.errors import CandidateError
from osk.provenance.candidates import Candidates, Party, candidate_key
from osk.store import contract
from osk.store import node as node_mod
from osk.store.ids import uuid7
from osk.store.ledger import Ledger
from osk.store.vault import Vault


def make_node(vault: Vault, rel: str, body: str) -> node_mod.Node:
    meta = contract.Frontmatter.model_validate({
        "id": uuid7(), "created": "2026-01-02T03:04+00:00", "updated": "2026-01-02T03:04+00:00",
        "author": "agent", "drafter": "test-model", "summary": "a test node",
    })
    text = node_mod.render(meta, body)
    path = vault.abs(rel)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return node_mod.parse(rel, text)


def ledger_lines(vault: Vault) -> list[dict]:
    path = vault.ledger_path("candidates")
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def pair(vault: Vault) -> tuple[node_mod.Node, node_mod.Node]:
    a = make_node(vault, "Domain/Cache/Cache TTL is 60s.md", "The cache TTL is 60 seconds.\n")
    b = make_node(vault, "Domain/Cache/Cache TTL is 5m.md", "The cache TTL is five minutes.\n")
    return a, b


def test_filing_a_contradiction_writes_one_record_naming_both_parties(vault, pair):
    candidate, created = Candidates(vault).record("contradiction", pair, "TTL differs")
    assert created and candidate.status == "open"
    rows = ledger_lines(vault)
    assert len(rows) == 1
    assert rows[0]["kind"] == "candidate" and rows[0]["type"] == "contradiction"
    assert {p["id"] for p in rows[0]["parties"]} == {pair[0].id, pair[1].id}
    assert rows[0]["subject"] == candidate.key


def test_refiling_the_same_parties_at_the_same_bytes_is_a_no_op_in_either_order(vault, pair):
    candidates = Candidates(vault)
    first, _ = candidates.record("contradiction", pair, "TTL differs")
    again, created = candidates.record("contradiction", list(reversed(pair)), "other words")
    assert not created and again.key == first.key
    assert len(ledger_lines(vault)) == 1


def test_a_change_to_either_party_makes_a_new_candidate(vault, pair):
    candidates = Candidates(vault)
    first, _ = candidates.record("duplication", pair)
    changed = make_node(vault, pair[1].path, "The cache TTL is five minutes, per region.\n")
    second, created = candidates.record("duplication", [pair[0], changed])
    assert created and second.key != first.key
    assert len(candidates.open()) == 2


def test_a_front_matter_only_change_does_not_make_a_new_candidate(vault, pair):
    candidates = Candidates(vault)
    candidates.record("competition", pair)
    text = pair[1].text.replace("summary: a test node", "summary: a reworded summary")
    moved = node_mod.parse(pair[1].path, text)
    _, created = candidates.record("competition", [pair[0], moved])
    assert not created


def test_delegation_overlap_keeps_the_order_of_its_parties(vault, pair):
    forward = candidate_key("delegation-overlap", [Party.of(pair[0]), Party.of(pair[1])])
    backward = candidate_key("delegation-overlap", [Party.of(pair[1]), Party.of(pair[0])])
    assert forward != backward
    sym_a = candidate_key("competition", [Party.of(pair[0]), Party.of(pair[1])])
    sym_b = candidate_key("competition", [Party.of(pair[1]), Party.of(pair[0])])
    assert sym_a == sym_b


def test_the_type_is_part_of_the_key(vault, pair):
    candidates = Candidates(vault)
    candidates.record("contradiction", pair)
    _, created = candidates.record("duplication", pair)
    assert created


@pytest.mark.parametrize(
    ("kind", "count", "fragment"),
    [("rumour", 2, "not one of"), ("contradiction", 1, "at least two"),
     ("contradiction", 0, "at least two")],
)
def test_a_malformed_candidate_is_refused_and_nothing_is_written(vault, pair, kind, count,
                                                                 fragment):
    with pytest.raises(CandidateError, match=fragment):
        Candidates(vault).record(kind, list(pair)[:count])
    assert ledger_lines(vault) == []


def test_naming_one_node_twice_is_refused(vault, pair):
    with pytest.raises(CandidateError, match="more than once"):
        Candidates(vault).record("contradiction", [pair[0], pair[0]])
    assert ledger_lines(vault) == []


def test_open_party_ids_name_every_node_in_an_open_candidate_and_not_dismissed_ones(vault, pair):
    candidates = Candidates(vault)
    third = make_node(vault, "Domain/Cache/Cache eviction.md", "LRU eviction.\n")
    filed, _ = candidates.record("contradiction", pair)
    candidates.record("duplication", [pair[0], third])
    assert candidates.open_party_ids() == {pair[0].id, pair[1].id, third.id}
    candidates.dismiss(filed.key, "both hold in different regions")
    assert candidates.open_party_ids() == {pair[0].id, third.id}
    assert [c.type for c in candidates.open()] == ["duplication"]


def test_a_dismissed_candidate_stays_dismissed_when_refiled_at_the_same_bytes(vault, pair):
    candidates = Candidates(vault)
    filed, _ = candidates.record("contradiction", pair)
    candidates.dismiss(filed.key, "not a conflict")
    again, created = candidates.record("contradiction", pair)
    assert not created and again.status == "dismissed"
    assert candidates.open() == []


def test_concurrent_dismissal_and_silence_on_two_devices_keeps_the_candidate_open(vault, pair):
    candidates = Candidates(vault)
    filed, _ = candidates.record("contradiction", pair)
    # Simulate another device's concurrent record about the same subject (a union merge).
    ledger = Ledger(vault, "candidates")
    view = ledger.read()
    other = {"id": uuid7(after=view.max_id), "parents": [], "device": "other-device",
             "at": "2026-01-01T00:00:00+00:00", "kind": "candidate", "subject": filed.key,
             "type": "contradiction", "parties": [], "note": "other", "actor": "agent"}
    candidates.dismiss(filed.key, "person on this device")
    with ledger.path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(other) + "\n")
    assert [c.key for c in candidates.open()] == [filed.key]


def test_pending_summary_lists_a_candidate_once_under_its_scope_or_under_shared(vault):
    from osk.provenance.candidates import pending_summary

    candidates = Candidates(vault)
    hub = make_node(vault, "Scope/app/Cache/Cache.md", "hub\n")
    local = make_node(vault, "Scope/app/Cache/TTL.md", "60 s\n")
    shared_a = make_node(vault, "Domain/Redis/Redis.md", "hub\n")
    shared_b = make_node(vault, "Domain/Redis/Redis TTL.md", "5 m\n")
    candidates.record("contradiction", [local, shared_b], "which TTL?")
    candidates.record("duplication", [shared_a, shared_b])
    candidates.record("competition", [hub, local])
    app = pending_summary(vault, "app")
    assert sorted(line.split(" ")[0] for line in app) == ["competition", "contradiction"]
    assert any("[[TTL]]" in line and "[[Redis TTL]]" in line and line.count("which TTL?")
               for line in app)
    (shared,) = pending_summary(vault, "")
    assert shared.startswith("duplication between ") and "[[Redis]]" in shared
    assert pending_summary(vault, "web") == []


def test_listing_the_scope_and_then_shared_works_out_each_status_once_until_the_ledger_changes(
        vault, pair, monkeypatch):
    from osk.provenance import candidates as candidates_mod
    from osk.provenance.candidates import pending_summary

    candidates = Candidates(vault)
    filed, _ = candidates.record("contradiction", list(pair))
    looked_up: list[str] = []
    real_latest = candidates_mod._latest

    def counting(view, key):
        looked_up.append(key)
        return real_latest(view, key)

    monkeypatch.setattr(candidates_mod, "_latest", counting)
    assert pending_summary(vault, "app") == []
    (shared,) = pending_summary(vault, "")
    assert looked_up == [filed.key]  # the second list reused the first one's statuses
    assert filed.key[:12] in shared
    candidates.dismiss(filed.key, "a person decided")
    looked_up.clear()
    assert pending_summary(vault, "") == []  # a changed ledger is read again
    assert looked_up == [filed.key]


def test_the_module_imports_only_light_modules():
    import subprocess
    import sys

    code = ("import sys, osk.provenance.candidates\n"
            "print(sorted({'pydantic', 'yaml', 'mcp', 'git', 'numpy'} & set(sys.modules)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, encoding="utf-8")
    assert out.stdout.strip() == "[]"
