"""`osk sync --daemon`: bounded, stoppable, and quick to follow a change; the service examples."""

from __future__ import annotations

import configparser
import plistlib
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from sync_support import git, make_devices, wait_for, write_node

from osk.store.vault import init
from osk.surfaces.cli import build_parser, main
from osk.surfaces.commands.sync import run_sync

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def test_the_daemon_publishes_a_change_soon_and_stops_on_sigterm(tmp_path):
    remote, (a,) = make_devices(tmp_path, 1)
    a.state("sync", "state.json").unlink()  # it reappears when the daemon's first cycle ends
    process = subprocess.Popen(
        [sys.executable, "-m", "osk", "--vault", str(a.root), "sync", "--daemon",
         "--interval", "3600", "--poll", "0.05"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8",
    )
    try:
        wait_for(lambda: a.state("sync", "state.json").exists() or process.poll() is not None,
                 "the first cycle")
        write_node(a, "Domain/Daemon.md", "written while the daemon runs\n")
        wait_for(lambda: "Domain/Daemon.md" in git(remote, "ls-tree", "-r", "--name-only",
                                                  "main"),
                 "the change to reach the remote (interval is an hour: only a change does it)")
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    lines = out.splitlines()
    assert lines[0].startswith(f"osk sync daemon: {a.root} every 3600 s and on change")
    assert any("committed nodes: 1 added" in line for line in lines[1:-1])
    assert lines[-1] == "osk sync daemon: stopped"


def test_max_cycles_bounds_the_daemon_and_an_error_does_not_stop_it(tmp_path, capsys):
    vault = init(tmp_path / "alone")  # no remote: every cycle is refused, the loop goes on
    code = main(["--vault", str(vault.root), "sync", "--daemon", "--interval", "0.01",
                 "--poll", "0.01", "--max-cycles", "3"])
    assert code == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 5
    assert all("Error: the vault has no git remote 'origin'" in line for line in lines[1:4])
    assert lines[4] == "osk sync daemon: stopped"
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # handlers are put back


def _arguments_of(command: list[str]) -> list[str]:
    assert Path(command[0]).name == "osk"
    return command[1:]


def _assert_parses_as_sync(arguments: list[str], *, daemon: bool) -> None:
    args = build_parser().parse_args(arguments)
    assert args.handler is run_sync
    assert args.daemon is daemon


def test_the_systemd_examples_run_the_daemon_and_a_one_shot_cycle():
    units = {}
    for name in ("osk-sync.service", "osk-sync-once.service", "osk-sync.timer"):
        parser = configparser.ConfigParser(strict=False, interpolation=None)
        parser.optionxform = str  # type: ignore[assignment,method-assign]
        parser.read(SCRIPTS / "systemd" / name, encoding="utf-8")
        units[name] = parser
    daemon = shlex.split(units["osk-sync.service"]["Service"]["ExecStart"])
    _assert_parses_as_sync(_arguments_of(daemon), daemon=True)
    once = units["osk-sync-once.service"]
    _assert_parses_as_sync(_arguments_of(shlex.split(once["Service"]["ExecStart"])), daemon=False)
    assert once["Service"]["SuccessExitStatus"] == "75"
    assert "OnUnitActiveSec" in units["osk-sync.timer"]["Timer"]


def test_the_launchd_example_runs_the_daemon():
    with (SCRIPTS / "launchd" / "dev.osk.sync.plist").open("rb") as handle:
        agent = plistlib.load(handle)
    assert agent["Label"] == "dev.osk.sync"
    _assert_parses_as_sync(_arguments_of(agent["ProgramArguments"]), daemon=True)
    assert "OSK_VAULT" in agent["EnvironmentVariables"]


def test_the_daemon_flags_refuse_a_zero_interval(capsys):
    with pytest.raises(SystemExit) as caught:
        build_parser().parse_args(["sync", "--daemon", "--interval", "0"])
    assert caught.value.code == 2
    assert "argument --interval: must be greater than 0 (got 0)" in capsys.readouterr().err
