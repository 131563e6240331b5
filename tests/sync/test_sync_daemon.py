"""`osk sync --daemon`: bounded, stoppable, and quick to follow a change; the service examples."""

from __future__ import annotations

import configparser
import plistlib
import shlex
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from sync_support import git, make_devices, wait_for, write_node

from osk.store.vault import init
from osk.store.watch import Watch
from osk.surfaces.cli import build_parser, main
from osk.surfaces.commands.sync import run_sync
from osk.sync import daemon as sync_daemon

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


def test_an_idle_daemon_looks_at_no_file_yet_follows_new_folders_and_commits_by_hand(
        tmp_path, monkeypatch):
    remote, (a,) = make_devices(tmp_path, 1)
    probe = Watch.start(a.root)
    if probe is None:
        pytest.skip("no kernel watch here (not Linux, or not a local file system)")
    probe.close()
    looks, polls = [], []
    status_paths, fingerprint = sync_daemon.status_paths, sync_daemon.fingerprint

    def counted_status(repo):
        looks.append(1)
        return status_paths(repo)

    def counted_fingerprint(vault, *, committed_only=False):
        polls.append(1)  # at least one a poll, whatever the daemon asks
        return fingerprint(vault, committed_only=committed_only)

    monkeypatch.setattr(sync_daemon, "status_paths", counted_status)
    monkeypatch.setattr(sync_daemon, "fingerprint", counted_fingerprint)
    lines: list[str] = []
    stop = threading.Event()
    thread = threading.Thread(target=sync_daemon.daemon, args=(a,), kwargs={
        "interval": 3600.0, "poll": 0.02, "stop": stop, "report": lines.append})
    thread.start()

    def polled(count: int) -> None:
        at = len(polls)
        wait_for(lambda: len(polls) >= at + count, f"{count} polls")

    def published(rel: str) -> bool:
        return rel in git(remote, "ls-tree", "-r", "--name-only", "main")

    try:
        wait_for(lambda: len(lines) == 1, "the first cycle")
        polled(3)  # what the cycle itself wrote is looked at once
        before = len(looks)
        polled(15)
        assert len(looks) == before, "an idle daemon ran git status over the vault"
        write_node(a, "Domain/new/deeper/First.md", "in folders made while the daemon runs\n")
        wait_for(lambda: published("Domain/new/deeper/First.md"), "the first node to land")
        polled(3)  # the cycle's own look is over: only the watch can tell of the next write
        write_node(a, "Domain/new/deeper/Second.md", "in a folder the daemon saw made\n")
        wait_for(lambda: published("Domain/new/deeper/Second.md"),
                 "a write in the new folder to be seen (the interval is an hour)")
        git(a.root, "commit", "-q", "--allow-empty", "-m", "a commit by hand, no file changed")
        local = git(a.root, "rev-parse", "HEAD")
        wait_for(lambda: git(remote, "rev-parse", "main") == local, "the hand commit to land")
    finally:
        stop.set()
        thread.join(timeout=60)
    assert not thread.is_alive()
    assert not any("Error" in line for line in lines), lines


def test_a_commit_made_by_hand_as_a_cycle_ends_is_synced_by_the_next(tmp_path):
    remote, (a,) = make_devices(tmp_path, 1)
    made: list[str] = []

    def commit_by_hand(vault, result) -> None:  # after the push, before the daemon's look
        if not made:
            git(vault.root, "commit", "-q", "--allow-empty", "-m", "made by hand")
            made.append(git(vault.root, "rev-parse", "HEAD"))

    stop = threading.Event()
    thread = threading.Thread(target=sync_daemon.daemon, args=(a,), kwargs={
        "interval": 3600.0, "poll": 0.02, "stop": stop, "after": commit_by_hand})
    thread.start()
    try:
        wait_for(lambda: bool(made) and git(remote, "rev-parse", "main") == made[0],
                 "the hand commit to be pushed (the interval is an hour)")
    finally:
        stop.set()
        thread.join(timeout=60)
    assert not thread.is_alive()


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
