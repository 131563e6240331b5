"""Install the real host CLIs the live suite (tests/live/) drives, pinned, outside the repo.

    python3 scripts/live_hosts.py      install if needed; print the folder holding the binaries

The CLIs come from npm at the exact versions in ``PINNED`` and go into a cache folder keyed by
those versions (``$OSK_LIVE_CACHE``, else ``$XDG_CACHE_HOME/osk-live``, else
``~/.cache/osk-live``), so one install serves every run on the machine and a version bump
installs beside the old one. ``.ci/run`` runs this before the test command and exports the
printed folder as ``OSK_LIVE_BIN``; a plain ``pytest`` (the README's test command on a fresh
machine) calls ``ensure_installed`` from tests/live/conftest.py instead. Either way a failure
(no npm, the registry unreachable, a binary that does not report its pinned version) is an
error with the reason, never a skip. Standard library only: it runs before the venv exists.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

PINNED = {"@anthropic-ai/claude-code": "2.1.332", "@openai/codex": "0.171.0"}
BINARIES = {"claude": "@anthropic-ai/claude-code", "codex": "@openai/codex"}
INSTALL_TIMEOUT = 600  # seconds; both packages together are about 800 MB unpacked


VERSIONS_ENV = "OSK_LIVE_VERSIONS"  # "PACKAGE=VERSION,…": other versions than the pinned ones


class InstallError(RuntimeError):
    pass


def wanted(env: dict[str, str] | None = None) -> dict[str, str]:
    """The versions to run: the pinned ones, or those ``$OSK_LIVE_VERSIONS`` names (the drift
    job, scripts/live_newest.py, sets it to the newest on npm)."""
    env = dict(os.environ) if env is None else env
    given = env.get(VERSIONS_ENV, "")
    if not given:
        return dict(PINNED)
    versions = dict(PINNED)
    for part in given.split(","):
        name, _, version = part.strip().rpartition("=")
        if name not in PINNED or not version:
            raise InstallError(f"{VERSIONS_ENV}: {part!r} is not PACKAGE=VERSION for one of "
                               f"{', '.join(PINNED)}")
        versions[name] = version
    return versions


def cache_root(env: dict[str, str] | None = None) -> Path:
    env = dict(os.environ) if env is None else env
    if env.get("OSK_LIVE_CACHE"):
        return Path(env["OSK_LIVE_CACHE"]).expanduser()
    base = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
    return Path(base).expanduser() / "osk-live"


def install_dir(root: Path, versions: dict[str, str] | None = None) -> Path:
    versions = PINNED if versions is None else versions
    tag = "-".join(f"{name.rsplit('/', 1)[-1]}-{version}" for name, version in versions.items())
    return root / tag


def version_of(binary: Path) -> str:
    """The version a CLI reports (first line of ``--version``), or "" when it does not run."""
    try:
        done = subprocess.run([str(binary), "--version"], capture_output=True, text=True,
                              timeout=60, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout else ""


def check(bin_dir: Path, versions: dict[str, str] | None = None) -> list[str]:
    """What is wrong with ``bin_dir`` as the live suite's binaries (empty when nothing is)."""
    versions = PINNED if versions is None else versions
    problems = []
    for binary, package in BINARIES.items():
        path = bin_dir / binary
        reported = version_of(path) if path.exists() else ""
        if not reported:
            problems.append(f"{path} is missing or does not run")
        elif versions[package] not in reported:
            problems.append(f"{path} reports {reported!r}, not the wanted {versions[package]}")
    return problems


def ensure_installed(root: Path | None = None, env: dict[str, str] | None = None) -> Path:
    """The folder of the pinned ``claude`` and ``codex`` binaries, installing them first
    (``env``: the environment npm runs in, the process's by default)."""
    env = dict(os.environ) if env is None else env
    versions = wanted(env)
    target = install_dir(root or cache_root(env), versions)
    target.parent.mkdir(parents=True, exist_ok=True)
    with _installing(target):  # the test workers of one run may each come here first
        return _installed(target, versions, env)


@contextmanager
def _installing(target: Path) -> Iterator[None]:
    """Hold a lock beside ``target`` while it is checked and installed (POSIX; elsewhere the
    first process installs unguarded)."""
    with open(target.parent / f"{target.name}.lock", "a") as lock:
        if fcntl is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _installed(target: Path, versions: dict[str, str], env: dict[str, str]) -> Path:
    bin_dir = target / "node_modules" / ".bin"
    if not check(bin_dir, versions):
        return bin_dir
    npm = shutil.which("npm", path=env.get("PATH"))
    if npm is None:
        raise InstallError("npm is not on PATH: the live suite needs Node.js and npm to "
                           "install the Claude Code and Codex CLIs (apt-get install npm)")
    target.mkdir(parents=True, exist_ok=True)
    specs = [f"{name}@{version}" for name, version in versions.items()]
    try:
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--no-save", "--prefix", str(target),
             *specs],
            capture_output=True, text=True, timeout=INSTALL_TIMEOUT, stdin=subprocess.DEVNULL,
            env=env)
    except subprocess.TimeoutExpired:
        raise InstallError(f"npm install of {' '.join(specs)} did not finish in "
                           f"{INSTALL_TIMEOUT} s: is the npm registry reachable?") from None
    if done.returncode != 0:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-6:])
        raise InstallError(f"npm install of {' '.join(specs)} failed (exit "
                           f"{done.returncode}); is the npm registry reachable? npm said: {tail}")
    problems = check(bin_dir, versions)
    if problems:
        raise InstallError("after npm install: " + "; ".join(problems))
    return bin_dir


def main() -> int:
    try:
        print(ensure_installed())
    except InstallError as exc:
        print(f"live_hosts: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
