"""The vault template's Obsidian settings (issue 14 item 7): machinery kept out of the file list,
search and graph, nothing per-device committed."""

from __future__ import annotations

import json
import re
from pathlib import Path

from sync_support import git, make_devices

from osk.sync import sync_once
from osk.vault import GOVERNANCE, LEDGER_DIR, MEMORY_DIR, OBJECTS_DIR, RAW_DIR, Vault

HIDDEN_FROM_LIST = {RAW_DIR, LEDGER_DIR, OBJECTS_DIR}  # written and read through osk only
EXCLUDED = HIDDEN_FROM_LIST | {MEMORY_DIR, GOVERNANCE}  # out of search and the graph too


def _settings(vault: Vault, name: str) -> dict:
    return json.loads((vault.root / ".obsidian" / name).read_text(encoding="utf-8"))


def test_a_new_vault_excludes_the_machinery_from_obsidian_search_and_graph(vault: Vault):
    filters = _settings(vault, "app.json")["userIgnoreFilters"]
    assert {f.rstrip("/") for f in filters} == EXCLUDED
    assert all(f.endswith("/") for f in filters)  # folder filters, not name prefixes


def test_the_enabled_css_snippet_hides_raw_records_ledgers_and_objects_from_the_file_list(
        vault: Vault):
    enabled = _settings(vault, "appearance.json")["enabledCssSnippets"]
    assert enabled == ["osk-machinery"]
    css = (vault.root / ".obsidian" / "snippets" / "osk-machinery.css").read_text(encoding="utf-8")
    rules = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    hidden = set(re.findall(r'\.nav-folder:has\(> \.nav-folder-title\[data-path="([^"]+)"\]\)',
                            rules))
    assert hidden == HIDDEN_FROM_LIST
    assert re.search(r"\{\s*display:\s*none;\s*\}", rules)


def test_the_settings_are_committed_and_per_device_workspace_files_never_are(tmp_path: Path):
    remote, (dev1, dev2) = make_devices(tmp_path, 2)
    for name in ("workspace.json", "workspace-mobile.json"):  # what Obsidian writes on open
        (dev1.root / ".obsidian" / name).write_text('{"main": {}}\n', encoding="utf-8")
    assert git(dev1.root, "status", "--porcelain") == ""
    sync_once(dev1)
    published = set(git(remote, "ls-tree", "-r", "--name-only", "main").split())
    assert {".obsidian/app.json", ".obsidian/appearance.json",
            ".obsidian/snippets/osk-machinery.css"} <= published
    assert not {p for p in published if p.startswith(".obsidian/workspace")}
    sync_once(dev2)
    assert (dev2.root / ".obsidian" / "app.json").is_file()
    assert not (dev2.root / ".obsidian" / "workspace.json").exists()
