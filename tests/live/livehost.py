"""Run the real Claude Code and Codex CLIs against our scripted model server.

This is the live suite's reusable part (other live tests build on it):

- ``live_bin_dir()`` finds the pinned CLIs (``$OSK_LIVE_BIN``, set by ``.ci/run``) or installs
  them into the cache on first use (``scripts/live_hosts.py``); no CLIs is a failure with the
  reason, never a skip;
- ``LiveHost(name, bin_dir, root, brain)`` is one host on one temporary machine: its own HOME
  (and CODEX_HOME), a vault, a git project to work in, a scripted model server on 127.0.0.1
  that the CLI is pointed at, and ``osk setup HOST --yes`` as a person would run it;
- ``host.run(prompt, resume=SESSION)`` runs one non-interactive turn of the real CLI
  (``claude -p`` / ``codex exec``) and returns its session id and the model requests it made
  (``run.requests``: the whole JSON bodies, so a test can look for what reached the model).

The CLIs' non-essential traffic is switched off (``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC``;
Codex: analytics, update checks, plugin and app sync off), and both are pointed at 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from modelserver import Brain, ModelServer, Recorded

from osk.capture.raw import RawRecord, list_records, read_record
from osk.store.vault import locate

ROOT = Path(__file__).resolve().parents[2]
BIN_ENV = "OSK_LIVE_BIN"
RUN_TIMEOUT = 240  # seconds one CLI turn may take on a loaded 2-core machine
OSK_TOOLS = ("append_raw", "create_node", "move_cluster", "move_nodes", "overview", "read_node",
             "read_raw", "record_candidate", "run_validators", "scope_memory", "search",
             "update_node")
CODEX_MODEL = "gpt-5.1-codex"


def _installer() -> Any:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import live_hosts
    finally:
        sys.path.pop(0)
    return live_hosts


def live_bin_dir(env: dict[str, str] | None = None) -> Path:
    """The folder of the pinned ``claude`` and ``codex`` binaries; fails the test with the
    reason when they cannot be had (``$OSK_LIVE_BIN`` wrong, no npm, registry unreachable)."""
    env = dict(os.environ) if env is None else env
    installer = _installer()
    given = env.get(BIN_ENV)
    if given:
        problems = installer.check(Path(given), installer.wanted(env))
        if problems:
            pytest.fail(f"{BIN_ENV}={given} does not hold the host CLIs "
                        f"{installer.wanted(env)}: {'; '.join(problems)}", pytrace=False)
        return Path(given)
    try:
        return installer.ensure_installed(installer.cache_root(env), env)
    except installer.InstallError as exc:
        pytest.fail(f"the live suite needs the real host CLIs and could not install them: {exc}",
                    pytrace=False)


def pinned_versions() -> dict[str, str]:
    """The versions this run drives: the pinned ones unless ``$OSK_LIVE_VERSIONS`` says."""
    return _installer().wanted()


@dataclass
class Run:
    """One CLI invocation: what it printed, its session id, the model requests it made."""

    host: str
    prompt: str
    session_id: str
    returncode: int
    stdout: str
    stderr: str
    requests: list[Recorded]

    def request_text(self) -> str:
        return "\n".join(json.dumps(r.body, ensure_ascii=False) for r in self.requests)


@dataclass
class LiveHost:
    name: str          # "claude" or "codex"
    bin_dir: Path
    root: Path         # everything of this machine lives under it
    brain: Brain
    server: ModelServer = field(init=False)
    runs: list[Run] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.home = self.root / "home"
        self.vault = self.root / "vault"
        self.project = self.home / "work" / "tidepool"
        self.project.mkdir(parents=True)
        self.server = ModelServer(self.brain).start()
        git = ["git", "-C", str(self.project)]
        subprocess.run([*git, "init", "-q"], check=True, env=self.env())
        (self.project / "README.md").write_text("# tidepool\n\nA small demo project.\n",
                                                encoding="utf-8")
        subprocess.run([*git, "add", "README.md"], check=True, env=self.env())
        subprocess.run([*git, "commit", "-qm", "start"], check=True, env=self.env())
        self.osk("init", str(self.vault))
        if self.name == "codex":
            self.codex_home.mkdir(parents=True, exist_ok=True)
            (self.codex_home / "config.toml").write_text(self._codex_config(), encoding="utf-8")

    @property
    def codex_home(self) -> Path:
        return self.home / ".codex"

    def close(self) -> None:
        self.server.stop()

    # -- environment --------------------------------------------------------------------------

    def env(self, **extra: str) -> dict[str, str]:
        venv_bin = str(Path(sys.executable).parent)
        env = {
            "HOME": str(self.home), "USER": "live", "LANG": "C.UTF-8", "TERM": "dumb",
            "PATH": os.pathsep.join([str(self.bin_dir), venv_bin, "/usr/local/bin", "/usr/bin",
                                     "/bin"]),
            "TMPDIR": str(self.root / "tmp"),
            "GIT_CONFIG_GLOBAL": str(self.home / ".gitconfig"),
            "OSK_VAULT": str(self.vault), "OSK_SEMANTIC": "0",
            # Claude Code: the scripted server, no telemetry, error reports or update checks.
            "ANTHROPIC_BASE_URL": self.server.url, "ANTHROPIC_API_KEY": "sk-ant-live-scripted",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
            # `claude -p` sends its first request without waiting for MCP servers unless told
            # to (2.1.332): a slow start would leave the model without osk's tools.
            "MCP_CONNECTION_NONBLOCKING": "0",
            # Codex: the key its scripted provider entry names.
            "CODEX_HOME": str(self.codex_home), "OSK_LIVE_KEY": "scripted",
        }
        (self.root / "tmp").mkdir(exist_ok=True)
        gitconfig = self.home / ".gitconfig"
        if not gitconfig.exists():
            gitconfig.parent.mkdir(parents=True, exist_ok=True)
            gitconfig.write_text("[user]\n\tname = live\n\temail = live@osk.invalid\n"
                                 "[init]\n\tdefaultBranch = main\n", encoding="utf-8")
        env.update(extra)
        return env

    def _codex_config(self) -> str:
        # Our provider on loopback; everything that would phone elsewhere switched off.
        return (
            f'model = "{CODEX_MODEL}"\n'
            'model_provider = "scripted"\n'
            'check_for_update_on_startup = false\n'
            '\n[analytics]\nenabled = false\n'
            '\n[feedback]\nenabled = false\n'
            '\n[features]\nplugins = false\napps = false\n'
            '\n[model_providers.scripted]\nname = "scripted"\n'
            f'base_url = "{self.server.url}/v1"\nwire_api = "responses"\n'
            'env_key = "OSK_LIVE_KEY"\nrequest_max_retries = 0\nstream_max_retries = 0\n'
            f'\n[projects."{self.project}"]\ntrust_level = "trusted"\n'
        )

    # -- osk ----------------------------------------------------------------------------------

    def osk(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([sys.executable, "-m", "osk", *args], env=self.env(),
                              cwd=self.project, capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL)
        if check and done.returncode != 0:
            raise AssertionError(f"osk {' '.join(args)} exited {done.returncode}:\n"
                                 f"{done.stdout}\n{done.stderr}")
        return done

    def setup(self) -> subprocess.CompletedProcess[str]:
        return self.osk("setup", self.name, "--yes")

    def tap_wire(self, log: Path, mode: str = "pass") -> None:
        """Start the registered MCP server through tests/live/wiretap.py from now on, which
        logs every line each way to ``log`` (``mode``: see that module)."""
        tap = [str(Path(__file__).with_name("wiretap.py")), str(log), mode]
        if self.name == "claude":
            path = self.home / ".claude.json"
            config = json.loads(path.read_text(encoding="utf-8"))
            server = config["mcpServers"]["osk"]
            server["args"] = [*tap, server["command"], *server["args"]]
            server["command"] = sys.executable
            path.write_text(json.dumps(config, indent=2), encoding="utf-8")
            return
        path = self.codex_home / "config.toml"
        text = path.read_text(encoding="utf-8")
        found = re.search(r'(?m)^command = (".*")\nargs = \[(.*)\]$', text)
        assert found is not None, f"no osk server entry in {path}"
        args = ", ".join([*(json.dumps(a) for a in tap), found.group(1), found.group(2)])
        path.write_text(text.replace(found.group(0), f"command = {json.dumps(sys.executable)}\n"
                                                     f"args = [{args}]"), encoding="utf-8")

    # -- the CLI ------------------------------------------------------------------------------

    def command(self, prompt: str, resume: str | None) -> list[str]:
        if self.name == "claude":
            argv = [str(self.bin_dir / "claude"), "-p", prompt, "--output-format", "json",
                    "--allowedTools", "mcp__osk"]
            return argv + (["--resume", resume] if resume else [])
        # A person trusts the three hooks once in Codex's /hooks screen; a scripted run has no
        # screen, so it bypasses hook trust for this invocation (the hooks are the ones that
        # `osk setup codex` wrote, nothing else is configured).
        flags = ["--json", "--skip-git-repo-check", "--dangerously-bypass-hook-trust"]
        base = [str(self.bin_dir / "codex"), "exec"]
        if resume:
            return [*base, "resume", *flags, resume, prompt]
        return [*base, *flags, prompt]

    def run(self, prompt: str, *, resume: str | None = None, **extra_env: str) -> Run:
        before = len(self.server.model_requests())
        done = subprocess.run(self.command(prompt, resume), env=self.env(**extra_env),
                              cwd=self.project, capture_output=True, text=True,
                              timeout=RUN_TIMEOUT, stdin=subprocess.DEVNULL)
        requests = self.server.model_requests()[before:]
        run = Run(self.name, prompt, self._session_id(done.stdout, resume), done.returncode,
                  done.stdout, done.stderr, requests)
        self.runs.append(run)
        assert not self.server.errors, f"the scripted model failed: {self.server.errors}"
        if done.returncode != 0:
            raise AssertionError(f"{self.name} exited {done.returncode} on {prompt!r}:\n"
                                 f"stdout: {done.stdout[-3000:]}\nstderr: {done.stderr[-3000:]}")
        return run

    def _session_id(self, stdout: str, resume: str | None) -> str:
        if self.name == "claude":
            try:
                return str(json.loads(stdout.strip().splitlines()[-1]).get("session_id", ""))
            except (ValueError, IndexError):
                return resume or ""
        for line in stdout.splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and event.get("type") == "thread.started":
                return str(event.get("thread_id", ""))
        return resume or ""

    # -- what the host left on disk -----------------------------------------------------------

    def transcript(self, session_id: str) -> Path:
        if self.name == "claude":
            found = list((self.home / ".claude" / "projects").glob(f"*/{session_id}.jsonl"))
        else:
            found = list((self.codex_home / "sessions").glob(f"*/*/*/rollout-*-{session_id}.jsonl"))
        assert len(found) == 1, f"no single transcript for {session_id}: {found}"
        return found[0]

    def hook_log(self) -> str:
        path = self.vault / ".osk" / "logs" / "hooks.log"
        return path.read_text(encoding="utf-8") if path.exists() else ""

    def raw_records(self) -> list[RawRecord]:
        """Every raw record of the vault, read and verified the way osk reads them."""
        vault = locate(str(self.vault))
        return [read_record(vault, r.key, r.conversation) for r in list_records(vault)]

    def record_of(self, session_id: str) -> RawRecord:
        found = [r for r in self.raw_records() if r.host_conversation == session_id]
        assert len(found) == 1, f"no single raw record of {session_id}: {self.raw_records()}"
        return found[0]
