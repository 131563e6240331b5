"""`osk validate`: exit 0 when clean, 1 with one finding per line (file and rule), --json."""

from __future__ import annotations

import json
import subprocess
import sys

from osk.store.vault import Vault
from osk.surfaces.cli import main


def break_a_node(vault: Vault) -> str:
    (vault.root / "Domain" / "Broken.md").write_text("no front matter\n", encoding="utf-8")
    return "Domain/Broken.md"


def test_a_clean_vault_exits_zero_and_prints_nothing_on_stdout(vault: Vault, capsys):
    assert main(["validate"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and "No findings" in captured.err


def test_findings_exit_one_with_one_line_each_naming_the_file_and_the_rule(vault: Vault, capsys):
    rel = break_a_node(vault)
    (vault.root / "Domain" / "Postgres").mkdir()
    (vault.root / "Domain" / "Postgres" / "Index notes.md").write_text(
        "---\nid: x\n---\n", encoding="utf-8")
    assert main(["validate"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"{rel}: [node-contract] ")
    assert lines[1].startswith("Domain/Postgres/Index notes.md: [node-contract] ")


def test_json_output_is_a_list_of_findings(vault: Vault, capsys):
    rel = break_a_node(vault)
    assert main(["validate", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert [(f["path"], f["rule"]) for f in data] == [(rel, "node-contract")]
    assert "front matter" in data[0]["message"]


def test_a_clean_vault_prints_an_empty_json_list(vault: Vault, capsys):
    assert main(["validate", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_the_vault_can_be_named_explicitly(vault: Vault, tmp_path, monkeypatch):
    monkeypatch.delenv("OSK_VAULT")
    monkeypatch.chdir(tmp_path)
    break_a_node(vault)
    result = subprocess.run([sys.executable, "-m", "osk", "--vault", str(vault.root),
                             "validate"], capture_output=True, text=True, encoding="utf-8")
    assert result.returncode == 1
    assert result.stdout.startswith("Domain/Broken.md: [node-contract] ")
