"""One child process with osk imported from a given source tree (a checkout or a worktree of
another commit), for the benches that measure two trees in the same run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

# A child's CPU so far, its own and its finished children's (git's): prepend to ``code``.
CHILD_CPU = """
import resource
def cpu():
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
"""


def run_in_tree(tree: Path, code: str, *args: str) -> dict[str, Any]:
    """Run ``code`` (``python -c``) from ``tree`` with ``args``, the semantic channel off and
    no ``OSK_VAULT`` inherited; the JSON object its last line of output prints."""
    env = {**os.environ, "PYTHONPATH": str(tree), "OSK_SEMANTIC": "0"}
    env.pop("OSK_VAULT", None)
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=tree, env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the child on {tree} failed:\n{done.stderr}")
    found: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return found
