"""Symbolic links never lead osk out of the vault (issue 16 item 3).

Each case plants a link the way a person, a tool or another device could, then checks that the
read or write is refused with OutsideVault, that nothing was written outside, that
`osk validate` and `osk doctor` name the link, and that sync will not carry one.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import writekit
from hookkit import context_of, make_project, payload, run_hook
from sync_support import git, make_devices, write_node
from writekit import create, snapshot

from osk.calls.request import NewNode
from osk.capture.raw import record_name
from osk.engine.core import Engine
from osk.errors import OutsideVault, SyncError
from osk.provenance.scope_memory import ScopeMemory
from osk.store.vault import Vault
from osk.surfaces.cli import main
from osk.sync.cycle import sync_once
from osk.verbs import validate

repo, eng, hub = writekit.repo, writekit.eng, writekit.hub  # shared fixtures

pytestmark = pytest.mark.skipif(os.name == "nt", reason="symbolic links need privileges there")


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    return folder


def _listing(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _link_findings(vault: Vault) -> list[str]:
    return [f.path for f in validate.run(vault) if f.rule == "inside-the-vault"]


def test_a_raw_folder_linked_elsewhere_gets_no_append(eng: Engine, vault: Vault, outside: Path):
    (vault.raw_dir / record_name(eng.session.key.key)).symlink_to(outside, True)
    with pytest.raises(OutsideVault) as caught:
        eng.append_raw("c", user="what is the token?", assistant="it is in the vault")
    assert _listing(outside) == {}, "the append went through the link"
    assert caught.value.rule == "inside-the-vault" and "symbolic link" in str(caught.value)


def test_a_linked_objects_folder_refuses_the_write_before_the_node_lands(
        eng: Engine, vault: Vault, hub: str, outside: Path):
    objects = vault.objects_dir
    for path in sorted(objects.rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    objects.rmdir()
    objects.symlink_to(outside, True)
    before = snapshot(vault)
    with pytest.raises(OutsideVault):
        create(eng, "Tokens")
    assert _listing(outside) == {}
    assert snapshot(vault) == before, "a node was written whose audit could not be"


def test_a_linked_object_shard_is_not_read(eng: Engine, vault: Vault, hub: str, outside: Path):
    from osk.store import objects

    sha = eng.read_node("auth").hash
    shard = vault.objects_dir / sha[:2]
    (outside / sha).write_bytes((shard / sha).read_bytes())
    for path in shard.iterdir():
        path.unlink()
    shard.rmdir()
    shard.symlink_to(outside, True)
    with pytest.raises(OutsideVault):
        objects.get(vault, sha)


def test_a_linked_audit_ledger_is_neither_written_nor_read_and_validate_names_it(
        eng: Engine, vault: Vault, hub: str, outside: Path, capsys: pytest.CaptureFixture[str]):
    ledger = vault.ledger_path("audit")
    (outside / "audit.jsonl").write_bytes(ledger.read_bytes())
    ledger.unlink()
    ledger.symlink_to(outside / "audit.jsonl")
    planted = _listing(outside)
    before = snapshot(vault)
    with pytest.raises(OutsideVault):
        create(eng, "Tokens")
    assert _listing(outside) == planted and snapshot(vault) == before
    assert main(["validate"]) == 1  # used to end in a traceback
    out = capsys.readouterr().out
    assert "_ledger/audit.jsonl" in out and "symbolic link" in out
    assert _link_findings(vault) == ["_ledger/audit.jsonl"]


def test_every_ledger_refuses_a_link(vault: Vault, outside: Path):
    from osk.store.ledger import Ledger

    for name in ("routing", "rechecks", "candidates", "approvals", "tombstones"):
        path = vault.ledger_path(name)
        path.unlink(missing_ok=True)
        path.symlink_to(outside / f"{name}.jsonl")
        with pytest.raises(OutsideVault):
            Ledger(vault, name).append("note", "s", {})
        with pytest.raises(OutsideVault):
            Ledger(vault, name).read()
    assert _listing(outside) == {}


def test_an_empty_cluster_folder_linked_elsewhere_gets_no_node(
        eng: Engine, vault: Vault, hub: str, outside: Path):
    (vault.root / "Scope" / "proj" / "billing").symlink_to(outside, True)
    with pytest.raises(OutsideVault):
        eng.create_node(NewNode("billing", "Billing", "Billing.\n", space="Scope",
                                cluster="billing",
                                drafter="test-model"))
    assert _listing(outside) == {}


def test_a_move_into_a_linked_folder_is_refused(eng: Engine, vault: Vault, hub: str,
                                                 outside: Path):
    create(eng, "Tokens")
    (vault.root / "Scope" / "proj" / "auth" / "old").symlink_to(outside, True)
    with pytest.raises(OutsideVault):
        eng.move_nodes(["Tokens"], space="Scope", cluster="auth/old")
    assert _listing(outside) == {}
    assert eng.read_node("Tokens").path == "Scope/proj/auth/Tokens.md"


def test_a_linked_scope_memory_is_not_served_to_the_tool_or_the_session_start(
        vault: Vault, tmp_path: Path, outside: Path):
    project = make_project(tmp_path / "shop")
    secret = outside / "notes.md"
    secret.write_text("SECRET FROM OUTSIDE THE VAULT\n", encoding="utf-8")
    (vault.memory_dir / "shop.md").symlink_to(secret)
    with pytest.raises(OutsideVault):
        ScopeMemory(vault, "shop").read()
    with pytest.raises(OutsideVault):
        ScopeMemory(vault, "shop").write(text="new\n", expect_hash="0" * 64)
    assert secret.read_text(encoding="utf-8") == "SECRET FROM OUTSIDE THE VAULT\n"
    data = payload("claude", "session_start", transcript=tmp_path / "t.jsonl", cwd=project)
    done = run_hook("session-start", "claude", data, cwd=project)
    assert done.returncode == 0, done.stderr
    context = context_of(done.stdout, "SessionStart")
    assert "SECRET FROM OUTSIDE" not in context
    assert "scope memory not shown" in context and "symbolic link" in context


def test_validate_and_doctor_name_every_link_even_harmless_ones(
        vault: Vault, outside: Path, capsys: pytest.CaptureFixture[str]):
    (vault.root / "Workbench" / "inside-link.md").symlink_to(vault.root / "README.md")
    (vault.root / "Domain" / "elsewhere").symlink_to(outside, True)
    (vault.root / "_memory" / "x.md").symlink_to(outside / "missing.md")  # dangling
    expected = ["Domain/elsewhere", "Workbench/inside-link.md", "_memory/x.md"]
    assert _link_findings(vault) == expected
    main(["doctor"])
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if "symbolic links" in line)
    assert line.startswith("[FAIL]") and all(rel in line for rel in expected)


def test_doctor_says_there_are_no_links_in_a_clean_vault(vault: Vault,
                                                        capsys: pytest.CaptureFixture[str]):
    main(["doctor"])
    assert "[ok  ] symbolic links: none" in capsys.readouterr().out


# -- sync ---------------------------------------------------------------------------------------
def test_sync_refuses_to_land_a_commit_that_adds_a_link(tmp_path: Path, outside: Path):
    _remote, (dev1, dev2) = make_devices(tmp_path, 2)
    sync_once(dev2)
    # Another device (or anyone with push access) commits a link with plain git.
    (dev2.root / "_raw" / "planted").symlink_to(outside, True)
    write_node(dev2, "Domain/notes/notes.md", "A real node.\n")
    git(dev2.root, "add", "-A")
    git(dev2.root, "commit", "-q", "-m", "a link")
    git(dev2.root, "push", "-q", "origin", "main")
    before = git(dev1.root, "rev-parse", "HEAD")
    with pytest.raises(SyncError) as caught:
        sync_once(dev1)
    assert "_raw/planted" in str(caught.value) and "symbolic link" in str(caught.value)
    assert not os.path.lexists(dev1.root / "_raw" / "planted")
    assert not (dev1.root / "Domain" / "notes").exists(), "part of the commit landed"
    assert git(dev1.root, "rev-parse", "HEAD") == before
    assert git(dev1.root, "status", "--porcelain") == ""


def test_sync_refuses_to_commit_a_local_link(tmp_path: Path, outside: Path):
    remote, (dev1,) = make_devices(tmp_path, 1)
    (dev1.root / "Domain" / "elsewhere").symlink_to(outside, True)
    write_node(dev1, "Domain/notes/notes.md", "A real node.\n")
    published = git(remote, "rev-parse", "main")
    with pytest.raises(SyncError) as caught:
        sync_once(dev1)
    assert "Domain/elsewhere" in str(caught.value)
    assert git(remote, "rev-parse", "main") == published
    assert git(dev1.root, "diff", "--cached", "--name-only") == ""  # nothing left staged
    (dev1.root / "Domain" / "elsewhere").unlink()
    sync_once(dev1)  # with the link gone the node goes out as usual
    assert "Domain/notes/notes.md" in git(remote, "ls-tree", "-r", "--name-only", "main")


def test_the_sync_daemons_fingerprint_survives_a_link_to_outside(vault: Vault, outside: Path):
    from osk.sync.daemon import fingerprint

    before = fingerprint(vault)
    (vault.root / "Domain" / "x.md").symlink_to(outside / "x.md")
    assert fingerprint(vault) != before  # noticed (and sync will refuse it), never followed
