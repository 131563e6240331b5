"""`osk overview`, `osk read NODE`, and keeping the MCP SDK off every other command's path."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from osk.calls.request import NewNode, NodeEdit
from osk.engine.core import Engine
from osk.store.vault import Vault
from osk.surfaces.cli import main


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "work" / "app"
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=path, check=True)
    subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "root"], cwd=path, check=True)
    monkeypatch.chdir(path)
    return path


@pytest.fixture
def written(vault: Vault, repo: Path) -> Engine:
    engine = Engine.open(vault, cwd=repo)
    engine.create_node(NewNode("cache", "the cache hub", "Hub.\n", space="scope", cluster="cache",
                               drafter="m"))
    body = "".join(f"## Part {i}\n{'text ' * 20}\n" for i in range(3))
    engine.create_node(NewNode("Cache TTL", "TTL facts", body, space="scope", cluster="cache",
                               drafter="m", derived_from=["[[cache]]"]))
    return engine


def test_overview_prints_the_session_scope_and_counts(written: Engine, capsys):
    assert main(["overview"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Session app: scope app (bound)\n")
    assert "Scope 2" in out and "Recheck candidates: 0" in out


def test_overview_walks_the_vault_once_and_sees_a_file_made_just_before(
        written: Engine, vault: Vault, capsys, monkeypatch: pytest.MonkeyPatch):
    """The engine a command opens for its overview skips its opening walk: the overview's own
    refresh walks, once, after the command began."""
    from osk.store.freshness import Freshness

    walks = []
    full = Freshness.full

    def counted(self: Freshness) -> object:
        walks.append(1)
        return full(self)

    monkeypatch.setattr(Freshness, "full", counted)
    (vault.abs("Scope/app/cache") / "Broken.md").write_text("no front matter\n",
                                                           encoding="utf-8")
    assert main(["overview", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(walks) == 1
    assert data["counts"]["Scope"] == 2 and any("Broken.md" in p for p in data["problems"])


def test_overview_json_lists_recheck_candidates(written: Engine, capsys):
    written.update_node("cache", NodeEdit(old_text="Hub.", new_text="The hub."))
    assert main(["overview", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["scope"] == "app"
    assert [c["citing_title"] for c in data["rechecks"]] == ["Cache TTL"]


def test_read_prints_a_node_and_a_section(written: Engine, capsys):
    assert main(["read", "Cache TTL"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# Cache TTL  (Scope/app/cache/Cache TTL.md)\nTTL facts\n")
    assert "derived-from [[cache]]" in out and "## Part 2" in out
    assert main(["read", "Cache TTL", "--section", "Part 1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["text"].startswith("## Part 1") and "Part 2" not in data["text"]
    assert data["hash"] is None


def test_read_of_a_missing_node_says_how_to_find_one(written: Engine, capsys):
    assert main(["read", "Nowhere"]) == 3
    assert "search first" in capsys.readouterr().err


def test_building_the_cli_and_importing_the_hook_entry_never_import_the_mcp_sdk():
    code = (
        "import sys\n"
        "from osk.surfaces.cli import build_parser\n"
        "build_parser()\n"
        "import importlib, importlib.util, osk.provenance.scope_memory\n"
        "import osk.provenance.candidates, osk.verbs.validate\n"
        "if importlib.util.find_spec('osk.hooks.main'):\n"
        "    importlib.import_module('osk.hooks.main')\n"
        "print(sorted(m for m in ('mcp', 'osk.surfaces.server') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, encoding="utf-8")
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(("argv", "expected"), [
    (["--vault", "/v1", "mcp"], "/v1"), (["mcp", "--vault", "/v2"], "/v2"), (["mcp"], None)])
def test_osk_mcp_takes_the_vault_before_or_after_the_command(argv, expected):
    from osk.surfaces.cli import _plain_mcp, build_parser

    assert build_parser().parse_args(argv).vault == expected
    assert _plain_mcp(argv) == (expected,)  # the fast path reads it the same way


@pytest.mark.parametrize("argv", [["mcp", "--help"], ["--vault", "mcp"], ["mcp", "mcp"],
                                  ["--vault", "mcp", "/v"], ["mcp", "--vault"], ["search", "x"]])
def test_anything_but_a_plain_osk_mcp_goes_through_the_parser(argv):
    from osk.surfaces.cli import _plain_mcp

    assert _plain_mcp(argv) is None
