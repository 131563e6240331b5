"""Session keys from Git repositories, and the routing ledger that binds keys to scopes."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from writekit import git, make_repo, snapshot

from osk.errors import LedgerFork, ScopeError
from osk.provenance import sessions
from osk.provenance.scope_memory import ScopeMemory
from osk.provenance.sessions import Routing, open_session, portable_name, session_key
from osk.store.ledger import Ledger
from osk.store.vault import Vault


def root_of(repo: Path) -> str:
    return git(repo, "rev-list", "--max-parents=0", "HEAD")


def test_key_is_the_repository_folder_name_from_any_subfolder(vault: Vault, tmp_path: Path):
    repo = make_repo(tmp_path / "proj", files={"src/deep/x.py": "x\n"})
    key = session_key(repo / "src" / "deep", vault)
    assert (key.key, key.name, key.source) == ("proj", "proj", "git")
    assert key.repo_root == repo.resolve()
    assert key.identity == f"commit:{root_of(repo)}"


def test_every_worktree_of_a_repository_is_one_project(vault: Vault, tmp_path: Path):
    repo = make_repo(tmp_path / "proj")
    git(repo, "worktree", "add", "-q", str(tmp_path / "elsewhere" / "proj-feature"), "-b", "f")
    main = session_key(repo, vault)
    linked = session_key(tmp_path / "elsewhere" / "proj-feature", vault)
    assert main.key == linked.key == "proj"
    assert linked.common_dir == main.common_dir == (repo / ".git").resolve()
    assert linked.repo_root == (tmp_path / "elsewhere" / "proj-feature").resolve()


def test_an_unrelated_repository_with_a_taken_name_gets_its_root_commit_suffix(
        vault: Vault, tmp_path: Path):
    first = make_repo(tmp_path / "a" / "app", files={"one.txt": "1\n"})
    second = make_repo(tmp_path / "b" / "app", files={"two.txt": "2\n"})
    assert session_key(first, vault).key == "app"
    suffixed = session_key(second, vault)
    assert suffixed.key == f"app-{root_of(second)[:8]}"
    assert suffixed.name == "app" and suffixed.key != suffixed.name
    # stable on every later resolution, from either side, and from the second one's worktree
    assert session_key(first, vault).key == "app"
    assert session_key(second, vault).key == suffixed.key
    git(second, "worktree", "add", "-q", str(tmp_path / "c" / "app-wt"), "-b", "wt")
    assert session_key(tmp_path / "c" / "app-wt", vault).key == suffixed.key


def test_names_differing_only_in_case_collide(vault: Vault, tmp_path: Path):
    make_repo(tmp_path / "a" / "App")
    other = make_repo(tmp_path / "b" / "app")
    assert session_key(tmp_path / "a" / "App", vault).key == "App"
    assert session_key(other, vault).key == f"app-{root_of(other)[:8]}"


def test_outside_git_the_key_is_the_folder_name_owned_by_its_path(vault: Vault,
                                                                  tmp_path: Path):
    one = tmp_path / "x" / "notes"
    two = tmp_path / "y" / "notes"
    one.mkdir(parents=True)
    two.mkdir(parents=True)
    first = session_key(one, vault)
    second = session_key(two, vault)
    assert (first.key, first.source, first.repo_root) == ("notes", "folder", None)
    assert second.key.startswith("notes-") and len(second.key) == len("notes-") + 8
    assert session_key(two, vault).key == second.key


def test_a_repository_without_commits_uses_its_name_without_claiming_it(vault: Vault,
                                                                        tmp_path: Path):
    empty = make_repo(tmp_path / "fresh", commit=False)
    key = session_key(empty, vault)
    assert (key.key, key.identity) == ("fresh", None)
    assert Routing(vault).owner_of("fresh") is None
    # once it has a commit it claims the name and keeps the same key
    git(empty, "add", "-A")
    git(empty, "commit", "-q", "-m", "first")
    assert session_key(empty, vault).key == "fresh"
    assert Routing(vault).owner_of("fresh") == f"commit:{root_of(empty)}"


def test_a_commitless_repository_whose_name_is_owned_gets_a_path_suffix(vault: Vault,
                                                                        tmp_path: Path):
    make_repo(tmp_path / "a" / "tool")
    session_key(tmp_path / "a" / "tool", vault)
    empty = make_repo(tmp_path / "b" / "tool", commit=False)
    key = session_key(empty, vault)
    assert key.key.startswith("tool-") and key.key != "tool"


def test_the_root_commit_is_cached_so_git_runs_once_per_repository(
        vault: Vault, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    repo = make_repo(tmp_path / "proj", files={"src/x.py": "x\n"})
    calls: list[list[str]] = []
    real = subprocess.run

    def counting(args, *a, **kw):
        calls.append(list(args))
        return real(args, *a, **kw)

    monkeypatch.setattr(subprocess, "run", counting)  # sessions imports it when it asks git
    first = session_key(repo, vault)
    second = session_key(repo / "src", vault)
    assert first == second
    assert len(calls) == 1


def test_without_a_vault_the_plain_name_is_returned_and_nothing_is_recorded(
        vault: Vault, tmp_path: Path):
    repo = make_repo(tmp_path / "proj")
    before = snapshot(vault)
    assert session_key(repo).key == "proj"
    assert snapshot(vault) == before


def test_portable_names_drop_characters_no_platform_allows():
    assert portable_name('we:ird/na|me?') == "we-ird-na-me-"
    assert portable_name("...") == sessions.FALLBACK_NAME
    assert portable_name("  café ") == "café"


def test_the_sessions_module_imports_nothing_heavy():
    code = ("import sys, osk.provenance.sessions; "
            "heavy = {'pydantic', 'yaml', 'mcp', 'git', 'rank_bm25', "
            "'numpy'} & set(sys.modules); print(sorted(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"


# -- routing -------------------------------------------------------------------------------
def test_an_unbound_key_writes_to_the_scope_named_after_it(vault: Vault):
    routing = Routing(vault)
    assert routing.scope_for("proj") == "proj"
    assert not routing.route("proj")[1]


def test_binding_is_recorded_once_and_a_second_scope_is_refused_writing_nothing(vault: Vault):
    routing = Routing(vault)
    assert routing.bind("proj", "platform") is True
    assert routing.bind("proj", "platform") is False
    assert routing.scope_for("proj") == "platform" and routing.route("proj")[1]
    before = snapshot(vault)
    with pytest.raises(ScopeError) as caught:
        routing.bind("proj", "other")
    assert caught.value.rule == "scope-boundary"
    assert "bound to scope 'platform'" in str(caught.value)
    assert snapshot(vault) == before
    assert routing.scope_for("platform") == routing.scope_for("proj") == "platform"


def test_two_devices_binding_one_key_differently_surface_a_fork(vault: Vault, tmp_path: Path):
    Routing(vault).bind("seed", "seed")  # a shared history both devices start from
    other = Vault(tmp_path / "device-b")
    shutil.copytree(vault.root, other.root)
    (other.state("device-id")).unlink()  # the copy is a second device with its own id
    Routing(vault).bind("proj", "alpha")
    Routing(other).bind("proj", "beta")
    ours = vault.ledger_path("routing").read_bytes().splitlines(keepends=True)
    theirs = other.ledger_path("routing").read_bytes().splitlines(keepends=True)
    merged = ours + [line for line in theirs if line not in ours]  # what git's union does
    vault.ledger_path("routing").write_bytes(b"".join(merged))
    with pytest.raises(LedgerFork) as caught:
        Routing(vault).scope_for("proj")
    assert caught.value.rule == "ledger-forks"
    assert Routing(vault).scope_for("seed") == "seed"
    assert [f.subject for f in Ledger(vault, "routing").read().forks()] == ["key:proj"]


def test_open_session_reads_binding_isolation_and_shared_scopes(vault: Vault, tmp_path: Path):
    (vault.root / "osk.toml").write_text(
        '[vault]\nscope_isolation = true\nshared_scopes = ["handbook"]\n', encoding="utf-8")
    repo = make_repo(tmp_path / "proj")
    Routing(vault).bind("proj", "platform")
    session = open_session(vault, repo)
    assert (session.scope, session.bound, session.explicit) == ("platform", True, False)
    assert session.can_see_scope("platform") and session.can_see_scope("handbook")
    assert session.can_see_scope(None)  # Domain and Person
    assert not session.can_see_scope("secret")
    explicit = open_session(vault, repo, scope="elsewhere")
    assert (explicit.scope, explicit.explicit) == ("elsewhere", True)


def test_an_explicit_scope_must_be_a_portable_folder_name(vault: Vault, tmp_path: Path):
    repo = make_repo(tmp_path / "proj")
    with pytest.raises(ScopeError):
        open_session(vault, repo, scope="a/b")


@pytest.mark.parametrize("name", ["NUL", "com1", "x" * 256])
def test_a_session_scope_and_a_scope_memory_refuse_the_same_unportable_names(
        vault: Vault, tmp_path: Path, name: str):
    # Windows device names and over-long names were once accepted as an explicit --scope
    # while the scope memory refused them; both now follow one rule.
    repo = make_repo(tmp_path / "proj")
    before = snapshot(vault)
    with pytest.raises(ScopeError):
        open_session(vault, repo, scope=name)
    with pytest.raises(ScopeError):
        ScopeMemory(vault, name)
    assert snapshot(vault) == before


def test_a_session_scope_and_a_scope_memory_accept_the_same_portable_name(
        vault: Vault, tmp_path: Path):
    repo = make_repo(tmp_path / "proj")
    assert open_session(vault, repo, scope="Mobile app").scope == "Mobile app"
    assert ScopeMemory(vault, "Mobile app").scope == "Mobile app"


def test_two_devices_claiming_one_name_keep_stable_keys_and_report_the_fork(
        vault: Vault, tmp_path: Path):
    other = Vault(tmp_path / "device-b")
    shutil.copytree(vault.root, other.root)
    (other.state("device-id")).unlink(missing_ok=True)
    mine = make_repo(tmp_path / "a" / "app", files={"mine.txt": "1\n"})
    theirs = make_repo(tmp_path / "b" / "app", files={"theirs.txt": "2\n"})
    assert session_key(mine, vault).key == "app"
    assert session_key(theirs, other).key == "app"
    ours = vault.ledger_path("routing").read_bytes().splitlines(keepends=True)
    lines = other.ledger_path("routing").read_bytes().splitlines(keepends=True)
    vault.ledger_path("routing").write_bytes(b"".join(ours + [x for x in lines
                                                              if x not in ours]))
    first, second = session_key(mine, vault).key, session_key(theirs, vault).key
    # the earlier claim owns the name on every device until a person resolves the fork
    assert (first, second) == ("app", f"app-{root_of(theirs)[:8]}")
    assert [f.subject for f in Ledger(vault, "routing").read().forks()] == ["owner:app"]
