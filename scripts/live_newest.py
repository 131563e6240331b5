"""The live suite against the newest Claude Code and Codex on npm, beside the pinned ones;
reports drift by test name. Not gating: the pinned run (.ci/run) is the one that gates.

    python3 scripts/live_newest.py [--force] [PYTEST ARGS...]

1. asks npm for each host package's newest version (``npm view PACKAGE version``);
2. when both equal the pinned ones (scripts/live_hosts.py), says so and stops (``--force``
   runs anyway);
3. installs the newest beside the pinned ones (the same cache, a folder keyed by versions);
4. runs ``pytest tests/live`` twice, pinned and newest (``OSK_LIVE_VERSIONS``,
   ``OSK_LIVE_BIN``), each with a JUnit report;
5. prints both version sets and every test whose outcome differs, by name ("drift"); exit 1
   when there is any, 0 when none, 2 when something could not run.

Run it from the repository with the project's venv active (or ``.venv/bin/python``): it uses
``sys.executable -m pytest``. Standard library only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import live_hosts  # noqa: E402  (the pinned versions and the installer)

RUN_TIMEOUT = 3 * 3600  # seconds for one whole live suite run


def newest(package: str) -> str:
    npm = shutil.which("npm")
    if npm is None:
        raise live_hosts.InstallError("npm is not on PATH")
    done = subprocess.run([npm, "view", package, "version"], capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    if done.returncode != 0 or not done.stdout.strip():
        raise live_hosts.InstallError(f"npm view {package} version failed: "
                                      f"{(done.stderr or done.stdout).strip()[-300:]}")
    return done.stdout.strip().splitlines()[-1]


def outcomes(versions: dict[str, str], pytest_args: list[str]) -> dict[str, str]:
    """Each live test's outcome (passed, failed, error, skipped) at ``versions``."""
    env = dict(os.environ)
    env[live_hosts.VERSIONS_ENV] = ",".join(f"{k}={v}" for k, v in versions.items())
    env["OSK_LIVE_BIN"] = str(live_hosts.ensure_installed(env=env))
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        subprocess.run([sys.executable, "-m", "pytest", "tests/live", "-q", "-p",
                        "no:cacheprovider", f"--junitxml={report}", *pytest_args],
                       cwd=ROOT, env=env, timeout=RUN_TIMEOUT, stdin=subprocess.DEVNULL)
        if not report.exists():
            raise live_hosts.InstallError(f"pytest wrote no report for {versions}")
        found = {}
        for case in ET.parse(report).getroot().iter("testcase"):
            name = f"{case.get('classname')}::{case.get('name')}"
            kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
            found[name] = {"failure": "failed"}.get(kinds[0], kinds[0]) if kinds else "passed"
        return found


def main(argv: list[str]) -> int:
    force = "--force" in argv
    pytest_args = [a for a in argv if a != "--force"]
    try:
        latest = {package: newest(package) for package in live_hosts.PINNED}
    except (live_hosts.InstallError, subprocess.TimeoutExpired) as exc:
        print(f"live_newest: {exc}", file=sys.stderr)
        return 2
    print("pinned: " + ", ".join(f"{k} {v}" for k, v in live_hosts.PINNED.items()))
    print("newest: " + ", ".join(f"{k} {v}" for k, v in latest.items()))
    if latest == live_hosts.PINNED and not force:
        print("The newest versions on npm are the pinned ones: no drift to look for.")
        return 0
    try:
        pinned = outcomes(dict(live_hosts.PINNED), pytest_args)
        fresh = outcomes(latest, pytest_args)
    except (live_hosts.InstallError, subprocess.TimeoutExpired) as exc:
        print(f"live_newest: {exc}", file=sys.stderr)
        return 2
    drift = sorted(name for name in pinned.keys() | fresh.keys()
                   if pinned.get(name) != fresh.get(name))
    for name in drift:
        print(f"DRIFT {name}: pinned {pinned.get(name, 'absent')}, "
              f"newest {fresh.get(name, 'absent')}")
    print(f"{len(drift)} test(s) drift of {len(pinned.keys() | fresh.keys())}.")
    return 1 if drift else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
