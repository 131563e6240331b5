"""Fresh sessions of the real Claude Code and Codex after `osk doctor`, on a busy machine.

What a new user does: `osk setup HOST --yes`, `osk doctor`, then one session after another.
`osk doctor` leaves the classic handshake kept in the vault; Claude Code (2.1.332) opens with a
``server/discover`` probe and falls back to ``initialize`` when the probe is not answered
within about two seconds, which on a loaded machine it is not. Each host here gets
``SESSIONS`` fresh sessions (no resume), each of which calls two osk tools, while one
busy-loop process per core keeps the machine loaded (started here, ended by their PIDs);
every tool call of every session must succeed. Before the stdio front committed a connection
to one protocol generation, most Claude Code sessions failed every call.

``OSK_LIVE_SESSIONS`` overrides the session count. With ``OSK_LIVE_RECORD=1`` the first
sessions are also recorded through tests/live/wiretap.py (quiet machine, before the load) into
``osk/hosts/recordings/``, the sequences `osk doctor` replays; see ``record``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import make_host
from livehost import LiveHost, Run, pinned_versions
from modelserver import anthropic_turn, responses_turn
from plays import CALLS_ANSWER
from test_live_hosts import text_of_output

SESSIONS = int(os.environ.get("OSK_LIVE_SESSIONS", "10"))
PACKAGES = {"claude": "@anthropic-ai/claude-code", "codex": "@openai/codex"}


def prompt(number: int) -> str:
    return f"[live:calls {number}] What does the vault say about tidepool releases?"


def busy_loops(count: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"],
                             stdin=subprocess.DEVNULL) for _ in range(count)]


def end(loops: list[subprocess.Popen[bytes]]) -> None:
    for loop in loops:
        os.kill(loop.pid, signal.SIGKILL)
        loop.wait()


def osk_outputs(run: Run) -> list[tuple[str, str]]:
    """Each osk tool the model called in this run, with the output it got back."""
    turns = [anthropic_turn(r.body) if run.host == "claude" else responses_turn(r.body)
             for r in run.requests if isinstance(r.body, dict)
             and ("messages" in r.body or "input" in r.body)]
    mine = [t for t in turns if t.prompt.startswith("[live:calls")]
    if not mine:
        return []
    last = max(mine, key=lambda t: len(t.results))
    return [(name, text_of_output(text)) for name, text in zip(last.called, last.results,
                                                                 strict=False)
            if name.startswith("mcp__osk__")]


def succeeded(output: str) -> bool:
    """osk answers every tool with a JSON object naming the scope; an error is plain text."""
    try:
        found = json.loads(output)
    except ValueError:
        return False
    return isinstance(found, dict) and found.get("scope") == "tidepool"


def failures_of(run: Run, number: int) -> list[str]:
    outputs = osk_outputs(run)
    found = [f"{run.host} session {number}: {name} failed: {text[:200]}"
             for name, text in outputs if not succeeded(text)]
    if len(outputs) != 2:
        found.append(f"{run.host} session {number}: {len(outputs)} osk tool calls, not 2")
    if CALLS_ANSWER not in run.stdout:
        found.append(f"{run.host} session {number}: no final answer")
    return found


def sessions(host: LiveHost, failures: list[str], counts: dict[str, int]) -> None:
    for number in range(SESSIONS):
        try:
            run = host.run(prompt(number), OSK_GROWTH="off")
        except AssertionError as exc:  # the CLI itself failed: every call of it too
            failures.append(f"{host.name} session {number}: {str(exc)[:300]}")
            continue
        failures.extend(failures_of(run, number))
        counts[host.name] += len(osk_outputs(run))


def test_every_tool_call_of_every_fresh_session_succeeds_after_doctor_under_load(
        live_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    hosts = [make_host(name, live_bin, tmp_path_factory.mktemp(f"load-{name}"))
             for name in ("claude", "codex")]
    failures: list[str] = []
    counts = {"claude": 0, "codex": 0}
    loops: list[subprocess.Popen[bytes]] = []
    try:
        for host in hosts:
            doctor = host.osk("doctor", check=False)
            assert doctor.returncode == 0, doctor.stdout + doctor.stderr
        if os.environ.get("OSK_LIVE_RECORD"):
            for host in hosts:
                record(host)
        loops = busy_loops(os.cpu_count() or 2)
        threads = [threading.Thread(target=sessions, args=(host, failures, counts))
                   for host in hosts]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        end(loops)
        for host in hosts:
            host.close()
    print(f"osk tool calls made: {counts}; failed: {len(failures)}")
    assert not failures, f"{len(failures)} failure(s):\n" + "\n".join(failures)
    assert counts == {"claude": 2 * SESSIONS, "codex": 2 * SESSIONS}


# -- recordings for `osk doctor` ----------------------------------------------------------------
def record(host: LiveHost) -> None:
    """One session through the wire tap per generation the host speaks: as it is served, and
    (for a host that probes) against a server that speaks only the classic handshake."""
    from wiretap import recording_from_wire

    from osk.hosts.recordings import RECORDINGS

    version = pinned_versions()[PACKAGES[host.name]]
    for mode in ("pass", "classic") if host.name == "claude" else ("pass",):
        log = host.root / f"wire-{mode}.jsonl"
        host.tap_wire(log, mode)
        host.run(prompt(100), OSK_GROWTH="off")
        made = recording_from_wire(host.name, version, log.read_text(encoding="utf-8"))
        path = RECORDINGS / f"{host.name}-{version}-{made['generation']}.json"
        path.write_text(json.dumps(made, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    host.setup()  # the registered command as `osk setup` writes it again
