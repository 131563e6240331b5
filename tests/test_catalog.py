"""The catalog: finding nodes by title or id, refusing duplicates, noticing changes."""

from __future__ import annotations

import os

import pytest

from osk import node
from osk.catalog import Catalog
from osk.errors import ContractError, DuplicateId, NodeNotFound, TitleError
from osk.fsutil import atomic_write
from osk.vault import Vault


def write_node(vault: Vault, rel: str, node_id: str, body: str = "Body.\n") -> None:
    meta = node.Frontmatter.model_validate({
        "id": node_id, "created": "2026-11-29T18:00+00:00", "updated": "2026-11-29T18:00+00:00",
        "author": "user", "drafter": "human", "summary": f"About {rel}.",
    })
    atomic_write(vault.abs(rel), node.render(meta, body))


def test_a_node_is_found_by_title_case_insensitively_and_by_id(vault: Vault):
    write_node(vault, "Domain/rust/Cargo features.md", "id-1")
    catalog = Catalog(vault)
    assert catalog.refresh().added == ("Domain/rust/Cargo features.md",)
    assert catalog.get("cargo FEATURES").id == "id-1"
    assert catalog.get("id-1").title == "Cargo features"
    with pytest.raises(NodeNotFound):
        catalog.get("nothing")


def test_two_files_with_one_id_make_every_read_by_id_or_title_refuse_naming_both(vault: Vault):
    write_node(vault, "Domain/A.md", "same")
    write_node(vault, "Person/B.md", "same")
    catalog = Catalog(vault)
    catalog.refresh()
    for ref in ("same", "A", "B"):
        with pytest.raises(DuplicateId) as caught:
            catalog.get(ref)
        assert "Domain/A.md" in str(caught.value) and "Person/B.md" in str(caught.value)
    assert catalog.duplicate_ids() == {"same": ["Domain/A.md", "Person/B.md"]}


def test_titles_colliding_after_case_folding_are_reported_and_refused(vault: Vault):
    write_node(vault, "Domain/Release.md", "id-1")
    write_node(vault, "Scope/app/RELEASE.md", "id-2")
    catalog = Catalog(vault)
    catalog.refresh()
    with pytest.raises(TitleError):
        catalog.get("release")
    assert list(catalog.duplicate_titles().values()) == [["Domain/Release.md",
                                                          "Scope/app/RELEASE.md"]]


def test_a_hand_edit_that_breaks_the_contract_is_reported_not_fixed(vault: Vault):
    write_node(vault, "Domain/A.md", "id-1")
    catalog = Catalog(vault)
    catalog.refresh()
    path = vault.abs("Domain/A.md")
    broken = path.read_text(encoding="utf-8").replace("author: user", "author: robot")
    path.write_text(broken, encoding="utf-8")
    changes = catalog.refresh()
    assert changes.changed == ("Domain/A.md",)
    assert [type(e) for e in catalog.errors()] == [ContractError]
    assert path.read_text(encoding="utf-8") == broken
    with pytest.raises(ContractError):
        catalog.get("A")


def test_refresh_reports_added_changed_and_removed_files_and_skips_non_node_folders(vault: Vault):
    write_node(vault, "Domain/A.md", "id-1")
    write_node(vault, "Domain/B.md", "id-2")
    (vault.root / "Workbench" / "scratch.md").write_text("not a node", encoding="utf-8")
    catalog = Catalog(vault)
    assert sorted(catalog.refresh().added) == ["Domain/A.md", "Domain/B.md"]
    write_node(vault, "Domain/A.md", "id-1", body="Changed.\n")
    os.unlink(vault.abs("Domain/B.md"))
    write_node(vault, "Person/C.md", "id-3")
    changes = catalog.refresh()
    assert changes.added == ("Person/C.md",)
    assert changes.changed == ("Domain/A.md",)
    assert changes.removed == ("Domain/B.md",)
    assert not catalog.refresh()
