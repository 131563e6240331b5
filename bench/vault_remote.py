"""A copy of a vault made a git repository and published to a bare remote, for the sync
benches (``sync_catch_up.py``, ``sync_daemon_idle.py``)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

# One sync cycle, the cycle alone (no index catch-up: a bench device needs none to start).
PUBLISH = """
import sys
from pathlib import Path
from osk.store.vault import Vault
from osk.sync.cycle import sync_once
print(sync_once(Vault(Path(sys.argv[1]))).line())
"""


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def published_copy(vault: Path, device: Path, remote: Path) -> str:
    """Copy ``vault`` to ``device`` (not its device state or git), make it a repository whose
    origin is a new bare ``remote``, and push all of it there; the cycle's report line."""
    shutil.copytree(vault, device, symlinks=True, ignore=shutil.ignore_patterns(".osk", ".git"))
    git(remote.parent, "init", "-q", "--bare", "-b", "main", str(remote))
    git(device, "init", "-q", "-b", "main")
    git(device, "remote", "add", "origin", str(remote))
    done = subprocess.run([sys.executable, "-c", PUBLISH, str(device)], check=True,
                          capture_output=True, text=True)
    return done.stdout.strip()
