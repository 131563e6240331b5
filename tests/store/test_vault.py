"""Creating and finding a vault."""

from __future__ import annotations

import subprocess
from pathlib import Path, PurePosixPath

import pytest

from osk.errors import OskError, VaultNotFound
from osk.store.vault import (
    Vault,
    cluster_of,
    init,
    locate,
    path_parts,
    scope_of,
    space_of,
)


def test_init_creates_the_spaces_the_union_merge_rule_and_a_git_repository(tmp_path: Path):
    vault = init(tmp_path / "v")
    for folder in ("Scope", "Domain", "Person", "Workbench", "_raw", "_ledger", "_memory",
                   "_governance"):
        assert (vault.root / folder).is_dir(), folder
    assert "_ledger/*.jsonl merge=union" in (vault.root / ".gitattributes").read_text(
        encoding="utf-8")
    assert ".osk/" in (vault.root / ".gitignore").read_text(encoding="utf-8")
    assert (vault.root / "README.md").read_text(encoding="utf-8").startswith("# This is an osk")
    tracked = subprocess.run(["git", "ls-files"], cwd=vault.root, capture_output=True,
                             text=True, check=True).stdout.split()
    assert "osk.toml" in tracked and "_governance/README.md" in tracked
    status = subprocess.run(["git", "status", "--porcelain"], cwd=vault.root,
                            capture_output=True, text=True, check=True).stdout
    assert status == ""


def test_init_refuses_an_existing_vault_or_a_non_empty_folder(tmp_path: Path):
    init(tmp_path / "v")
    with pytest.raises(OskError, match="already an osk vault"):
        init(tmp_path / "v")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "file.txt").write_text("x", encoding="utf-8")
    with pytest.raises(OskError, match="not empty"):
        init(tmp_path / "busy")


def test_init_refuses_a_file_and_a_failed_init_leaves_nothing_behind(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "a-file").write_text("x", encoding="utf-8")
    with pytest.raises(OskError, match="is a file, not a folder"):
        init(tmp_path / "a-file")
    monkeypatch.setenv("PATH", str(tmp_path / "no-git-here"))  # git cannot be found
    with pytest.raises(OskError, match=r"could not create a vault in .*\(git is not "
                                       r"installed; .*\); nothing was left behind"):
        init(tmp_path / "new")
    assert not (tmp_path / "new").exists()
    (tmp_path / "empty").mkdir()
    with pytest.raises(OskError, match="nothing was left behind"):
        init(tmp_path / "empty")
    assert list((tmp_path / "empty").iterdir()) == []
    monkeypatch.undo()
    assert (init(tmp_path / "empty").root / "osk.toml").is_file()  # and it can be tried again


def test_locate_prefers_the_flag_then_the_environment_then_the_ancestors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    flag, env, walk = (init(tmp_path / name) for name in ("flag", "env", "walk"))
    deep = walk.root / "Scope" / "app"
    deep.mkdir(parents=True)
    monkeypatch.setenv("OSK_VAULT", str(env.root))
    assert locate(flag.root, cwd=deep) == Vault(flag.root)
    assert locate(None, cwd=deep) == Vault(env.root)
    monkeypatch.delenv("OSK_VAULT")
    assert locate(None, cwd=deep) == Vault(walk.root)


def test_locate_without_a_vault_says_how_to_give_one(tmp_path: Path):
    with pytest.raises(VaultNotFound) as caught:
        locate(None, cwd=tmp_path)
    message = str(caught.value)
    assert "--vault" in message and "OSK_VAULT" in message and "osk init" in message


def test_locate_refuses_a_flag_that_points_at_a_folder_that_is_not_a_vault(tmp_path: Path):
    with pytest.raises(VaultNotFound, match="not an osk vault"):
        locate(tmp_path)


@pytest.mark.parametrize(
    ("path", "space", "scope", "cluster"),
    [
        ("Scope/app/release/Cargo dist.md", "Scope", "app", "release"),
        ("Scope/app/Loose.md", "Scope", "app", None),
        ("Domain/rust/Cargo features.md", "Domain", None, "rust"),
        ("Person/Editors.md", "Person", None, None),
        ("Workbench/x.md", None, None, None),
    ],
)
def test_space_scope_and_cluster_come_from_the_path(path, space, scope, cluster):
    assert (space_of(path), scope_of(path), cluster_of(path)) == (space, scope, cluster)


@pytest.mark.parametrize("path", [
    "Scope/app/release/Cargo dist.md", "Person/Editors.md", "x.md", "", ".", "/Scope/a/b.md",
    "Scope//a/b.md", "Scope/a/b.md/", "./Scope/a/b.md", "Scope/./a/b.md", "Scope/../a.md",
    "Domain/a b/c:d.md", "//x/y",
])
def test_a_path_splits_into_the_parts_a_path_object_gives(path):
    assert path_parts(path) == PurePosixPath(path).parts


def test_unknown_settings_are_refused_by_name(vault: Vault):
    (vault.root / "osk.toml").write_text("[vault]\nscope_isolaton = false\n", encoding="utf-8")
    with pytest.raises(OskError, match="scope_isolaton"):
        vault.settings()
