"""scripts/live_hosts.py installs the live suite's host CLIs once, however many test workers
(pytest-xdist) ask for them at the same moment on a fresh machine: they would otherwise run
two `npm install` into one folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# A stand-in for npm: slow enough that two callers overlap, it counts its runs and leaves
# binaries that report the wanted versions.
FAKE_NPM = """#!{python}
import sys, time
from pathlib import Path
args = sys.argv[1:]
prefix = Path(args[args.index("--prefix") + 1])
with open(prefix.parent / "npm-runs", "a") as runs:
    runs.write("run\\n")
time.sleep(1.0)
bin_dir = prefix / "node_modules" / ".bin"
bin_dir.mkdir(parents=True, exist_ok=True)
for spec in args[args.index("--prefix") + 2:]:
    package, _, version = spec.rpartition("@")
    binary = bin_dir / ("claude" if "claude" in package else "codex")
    binary.write_text("#!/bin/sh\\necho " + version + "\\n")
    binary.chmod(0o755)
"""

ASK = ("import sys; sys.path.insert(0, sys.argv[1]); import live_hosts; "
       "print(live_hosts.ensure_installed())")


def test_two_processes_asking_at_once_install_once(tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    npm = tools / "npm"
    npm.write_text(FAKE_NPM.format(python=sys.executable), encoding="utf-8")
    npm.chmod(0o755)
    env = {**os.environ, "OSK_LIVE_CACHE": str(tmp_path / "cache"),
           "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}"}
    env.pop("OSK_LIVE_VERSIONS", None)
    asking = [subprocess.Popen([sys.executable, "-c", ASK, str(ROOT / "scripts")], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for _ in range(2)]
    answers = [process.communicate(timeout=60) for process in asking]
    assert [process.returncode for process in asking] == [0, 0], answers
    assert answers[0][0] == answers[1][0] and answers[0][0].strip().endswith(".bin")
    assert (tmp_path / "cache" / "npm-runs").read_text(encoding="utf-8") == "run\n"
