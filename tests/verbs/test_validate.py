"""Validators: the whole vault checked, each problem one finding naming file and rule."""

from __future__ import annotations

import json
import os
from pathlib import Path

from osk.store import contract
from osk.store import node as node_mod
from osk.store.ids import uuid7
from osk.store.ledger import Ledger
from osk.store.vault import Vault
from osk.verbs import validate


def write_node(vault: Vault, rel: str, body: str = "Body.\n", *, node_id: str | None = None,
               derived: list[str] | None = None, conflicts: list[str] | None = None) -> str:
    meta = contract.Frontmatter.model_validate({
        "id": node_id or uuid7(), "created": "2026-01-02T03:04+00:00",
        "updated": "2026-01-02T03:04+00:00", "author": "agent", "drafter": "test-model",
        "summary": "a test node", "derived-from": derived or [], "conflicts": conflicts or [],
    })
    path = vault.abs(rel)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(node_mod.render(meta, body), encoding="utf-8")
    return rel


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every vault file's size and mtime, to show that validation changed nothing.

    Device state (``.osk/``: caches such as the catalog snapshot, never synced) is not the
    vault's content; a validation run may refresh those caches.
    """
    found = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not (folder == str(root) and d == ".osk")]
        for name in files:
            path = Path(folder) / name
            stat = path.stat()
            found[str(path.relative_to(root))] = (stat.st_size, stat.st_mtime_ns)
    return found


def rules_for(findings: list[validate.Finding], path: str) -> set[str]:
    return {f.rule for f in findings if f.path == path}


def test_a_fresh_vault_has_no_findings(vault: Vault):
    assert validate.run(vault) == []


def test_a_clean_cluster_with_its_hub_and_valid_edges_has_no_findings(vault: Vault):
    write_node(vault, "Scope/app/Cache/Cache.md")
    write_node(vault, "Scope/app/Cache/Cache TTL.md", derived=["[[Cache]]"])
    write_node(vault, "Domain/Redis.md", derived=["[[Cache TTL]]"])
    assert validate.run(vault) == []


def test_a_contract_break_is_reported_with_the_file_and_the_rule(vault: Vault):
    rel = write_node(vault, "Domain/Broken.md")
    path = vault.abs(rel)
    path.write_text(path.read_text(encoding="utf-8").replace("author: agent",
                                                             "author: robot\nmood: happy"),
                    encoding="utf-8")
    findings = validate.run(vault)
    assert [(f.path, f.rule) for f in findings] == [(rel, "node-contract")]
    assert "mood" in findings[0].message and "author" in findings[0].message


def test_duplicate_ids_are_reported_on_every_file_that_carries_the_id(vault: Vault):
    shared = uuid7()
    a = write_node(vault, "Domain/One.md", node_id=shared)
    b = write_node(vault, "Domain/Two.md", node_id=shared)
    findings = validate.run(vault)
    assert rules_for(findings, a) == {"unique-ids"} and rules_for(findings, b) == {"unique-ids"}
    assert b in next(f.message for f in findings if f.path == a)


def test_titles_that_collide_after_case_folding_are_reported(vault: Vault):
    a = write_node(vault, "Domain/Cache.md")
    b = write_node(vault, "Person/cache.md")
    findings = validate.run(vault)
    assert "unique-portable-titles" in rules_for(findings, a)
    assert "unique-portable-titles" in rules_for(findings, b)


def test_a_dangling_node_edge_and_a_missing_raw_record_are_reported(vault: Vault):
    rel = write_node(vault, "Scope/app/Notes.md",
                     derived=["[[Nowhere]]", "[[_raw/app/c1#Round 2]]"])
    findings = [f for f in validate.run(vault) if f.path == rel]
    assert [f.rule for f in findings] == ["dangling-edge", "dangling-edge"]
    assert any("Nowhere" in f.message for f in findings)
    assert any("_raw/app/c1.md" in f.message for f in findings)


def test_citation_topology_breaks_are_reported(vault: Vault):
    write_node(vault, "Scope/web/Web fact.md")
    cross = write_node(vault, "Scope/app/App fact.md", derived=["[[Web fact]]"])
    raw_path = vault.abs("_raw/app/c1.md")
    raw_path.parent.mkdir(parents=True, exist_ok=True)
    raw_path.write_text("", encoding="utf-8")
    domain = write_node(vault, "Domain/General.md", derived=["[[_raw/app/c1#Round 1]]"])
    (vault.root / "Workbench" / "Draft plan.md").write_text("wip\n", encoding="utf-8")
    workbench = write_node(vault, "Person/Likes.md", derived=["[[Draft plan]]"])
    findings = validate.run(vault)
    assert "citation-topology" in rules_for(findings, cross)
    assert "citation-topology" in rules_for(findings, domain)
    assert rules_for(findings, workbench) == {"citation-topology"}


def test_a_cluster_without_a_hub_is_reported_on_its_members(vault: Vault):
    member = write_node(vault, "Domain/Databases/Postgres.md")
    findings = validate.run(vault)
    assert rules_for(findings, member) == {"cluster-hubs"}
    write_node(vault, "Domain/Databases/Databases.md")
    assert validate.run(vault) == []


def test_a_scope_node_outside_a_scope_folder_is_reported(vault: Vault):
    rel = write_node(vault, "Scope/Loose.md")
    assert rules_for(validate.run(vault), rel) == {"scope-boundary"}


def test_a_damaged_ledger_is_reported_with_its_line(vault: Vault):
    ledger = Ledger(vault, "routing")
    ledger.append("bind", "app", {"scope": "app"})
    with ledger.path.open("a", encoding="utf-8") as handle:
        handle.write("{not json\n")
    findings = validate.run(vault)
    assert [(f.path, f.rule) for f in findings] == [("_ledger/routing.jsonl",
                                                     "ledger-integrity")]
    assert "line 2" in findings[0].message


def test_a_ledger_fork_is_reported_naming_the_subject(vault: Vault):
    ledger = Ledger(vault, "routing")
    base = ledger.append("bind", "app", {"scope": "app"})
    other = {"id": uuid7(after=base.id), "parents": [base.id], "device": "laptop",
             "at": "2026-01-01T00:00:00+00:00", "kind": "bind", "subject": "app",
             "scope": "web"}
    ledger.append("bind", "app", {"scope": "app2"})
    with ledger.path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(other) + "\n")
    findings = validate.run(vault)
    assert [(f.path, f.rule) for f in findings] == [("_ledger/routing.jsonl", "ledger-forks")]
    assert "'app'" in findings[0].message


def test_a_scope_memory_note_over_the_cap_is_reported(vault: Vault):
    note = vault.memory_dir / "app.md"
    note.write_text("x" * 1501, encoding="utf-8")
    findings = validate.run(vault)
    assert [(f.path, f.rule) for f in findings] == [("_memory/app.md", "refuse-over-cap")]


def test_validation_changes_nothing_on_disk(vault: Vault):
    write_node(vault, "Domain/Databases/Postgres.md", derived=["[[Gone]]"])
    Ledger(vault, "routing").append("bind", "app", {"scope": "app"})
    before = snapshot(vault.root)
    assert validate.run(vault)
    assert snapshot(vault.root) == before


def test_findings_render_one_per_line_naming_file_and_rule(vault: Vault):
    rel = write_node(vault, "Domain/Databases/Postgres.md")
    finding = validate.run(vault)[0]
    assert str(finding).startswith(f"{rel}: [cluster-hubs] ")
    assert "\n" not in str(finding)
    assert json.loads(validate.to_json([finding]))[0] == {
        "path": rel, "rule": "cluster-hubs", "message": finding.message}


def test_a_sync_conflict_copy_outside_the_spaces_is_reported_once(vault: Vault):
    copy = vault.root / "Workbench" / "Note (sync conflict 2026-01-02 0304 laptop).md"
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_text("work state\n", encoding="utf-8")
    findings = validate.run(vault)
    assert [(f.path, f.rule) for f in findings] == [
        ("Workbench/Note (sync conflict 2026-01-02 0304 laptop).md", "sync-conflicts")]


def test_a_real_sync_conflict_copy_is_reported_naming_its_original(vault: Vault):
    write_node(vault, "Domain/Note.md")
    copy = write_node(vault, "Domain/Note (sync conflict 2026-01-02 0304 laptop).md")
    findings = [f for f in validate.run(vault) if f.rule == "sync-conflicts"]
    assert [f.path for f in findings] == [copy]
    assert "Domain/Note.md" in findings[0].message


def capture(vault: Vault, key: str = "app", conversation: str = "c1") -> str:
    from osk.capture import raw

    ref = raw.append_round(vault, key, conversation,
                           raw.RoundInput(user="What TTL?", assistant="60 seconds."))
    return ref.coordinate


def test_a_scope_node_citing_its_own_raw_round_is_clean(vault: Vault):
    coordinate = capture(vault)
    write_node(vault, "Scope/app/Cache/Cache.md", derived=[f"[[{coordinate}]]"])
    assert validate.run(vault) == []


def test_a_citation_of_a_round_that_does_not_exist_is_dangling(vault: Vault):
    capture(vault)
    rel = write_node(vault, "Scope/app/Notes.md", derived=["[[_raw/app/c1#Round 7]]"])
    findings = validate.run(vault)
    assert rules_for(findings, rel) == {"dangling-edge"}
    assert "Round 7" in findings[0].message


def test_a_damaged_raw_record_is_reported(vault: Vault):
    capture(vault)
    path = vault.abs("_raw/app/c1.md")
    path.write_text(path.read_text(encoding="utf-8").replace("60 seconds.", "90 seconds."),
                    encoding="utf-8")
    findings = validate.run(vault)
    assert [(f.path, f.rule) for f in findings] == [("_raw/app/c1.md", "raw-append-only")]
    assert "round 1" in findings[0].message


def test_a_scope_node_citing_a_raw_round_of_a_session_bound_elsewhere_breaks_topology(
        vault: Vault):
    from osk.provenance.sessions import Routing

    coordinate = capture(vault, key="web-tool")
    Routing(vault).bind("web-tool", "web")
    rel = write_node(vault, "Scope/app/Notes.md", derived=[f"[[{coordinate}]]"])
    findings = validate.run(vault)
    assert rules_for(findings, rel) == {"citation-topology"}
    assert "'web'" in findings[0].message
