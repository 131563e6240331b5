"""The README's first command: the scripted session runs end to end and shows each behaviour."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from obsidian_support import listed, notes, unresolved


def test_quickstart_walks_capture_distil_recall_and_recheck(tmp_path: Path):
    # --keep as a user types it: a folder relative to where osk runs (issue 24 item 8)
    result = subprocess.run(
        [sys.executable, "-m", "osk", "quickstart", "--keep", "demo"], cwd=tmp_path,
        capture_output=True, text=True, encoding="utf-8", timeout=300,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "(1 round after two Stop events)" in out
    assert "offers 12 tools" in out
    assert "search hit now carries markers=['recheck']" in out
    assert "recheck_unread" in out
    assert "update_node(recheck_of=…) -> recited, closed 1 candidate" in out
    assert "unknown argument(s) 'limit'" in out
    assert "osk validate -> exit 0 (0 finding(s))" in out
    assert "osk protect from a script (stdin is not a terminal) -> exit 5" in out
    assert "pushed" in out
    assert result.stderr == ""
    vault = tmp_path / "demo" / "vault"
    assert not (tmp_path / "demo" / "demo").exists()
    ending = out[out.index("\nDone."):].splitlines()
    commands = [line.split("#")[0].strip() for line in ending if line.startswith("   osk ")]
    assert commands == ["osk init ~/memory && export OSK_VAULT=~/memory", "osk setup claude",
                        "osk doctor"]
    assert ending[-1] == f"(the demo vault stays in {vault}: open it in Obsidian as a vault)"
    node = vault / "Scope" / "tidepool" / "release" / "Releases are built with cargo dist.md"
    assert "\n  - file:docs/release.md\n" in node.read_text(encoding="utf-8")
    # Obsidian (issue 24 item 9): every link resolves; the file list shows the nodes, not the
    # machinery; no file holds this device's path to the project
    assert unresolved(vault) == []
    assert listed(vault) == ["README.md", "Scope/tidepool/release/Releases are built with cargo "
                             "dist.md", "Scope/tidepool/release/release.md"]
    assert not [p for p in notes(vault) if str(tmp_path) in p.read_text(encoding="utf-8")]
    log = subprocess.run(["git", "log", "--oneline"], cwd=vault, capture_output=True,
                         text=True, check=True).stdout
    assert len(log.splitlines()) >= 2
