"""Shared fixtures. Every test runs with OSK_VAULT and HOME pointed into its own tmp folder, so
no test can touch a real vault or a real host configuration."""

from __future__ import annotations

from pathlib import Path

import pytest

from osk.store.vault import Vault, init

# Fixtures the tests of several wings share: the recall tests' ``project`` and ``eng``, the stdio
# server tests' ``repo`` and ``anyio_backend`` (a module's own fixture of the same name wins).
pytest_plugins = ["recallkit", "serverkit"]


@pytest.fixture(scope="session")
def _models_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One ``~/.cache/osk/models`` for the session: the multilingual model unpacks its 65 MB
    piece table there at its first load (``multilingual.pieces_cache``), once, not per test."""
    return tmp_path_factory.mktemp("models")


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
                   _models_cache: Path):
    home = tmp_path_factory.mktemp("home")
    (home / ".cache" / "osk").mkdir(parents=True)
    (home / ".cache" / "osk" / "models").symlink_to(_models_cache, target_is_directory=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)  # the models cache is the one above
    monkeypatch.setenv("USERPROFILE", str(home))
    monkeypatch.setenv("CODEX_HOME", str(home / ".codex"))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    (home / ".gitconfig").write_text(
        "[user]\n\tname = osk test\n\temail = test@osk.invalid\n[init]\n\tdefaultBranch = main\n",
        encoding="utf-8",
    )
    monkeypatch.delenv("OSK_VAULT", raising=False)
    monkeypatch.delenv("OSK_NOW", raising=False)
    # Search is lexical unless a test turns the semantic channel on (test_semantic.py): its
    # model costs tens of milliseconds a node, and ranking tests fix the lexical order.
    monkeypatch.setenv("OSK_SEMANTIC", "0")
    return home


@pytest.fixture
def vault(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Vault:
    """A fresh vault made by `osk init`, also exported as OSK_VAULT."""
    created = init(tmp_path / "vault")
    monkeypatch.setenv("OSK_VAULT", str(created.root))
    return created
