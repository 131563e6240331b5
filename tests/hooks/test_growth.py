"""Background growth: the fork cycle with a fake host CLI, fallbacks, and crash recovery."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from osk.calls.request import NewNode, NodeEdit
from osk.capture.raw import RoundInput, append_round
from osk.hooks import growth
from osk.hooks.state import StateStore, conversation_name
from osk.hosts import hostsetup
from osk.provenance.sessions import session_key
from osk.store.vault import Vault

FAKE = Path(__file__).with_name("fake_host_cli.py")
SESSION = "5f0c4a7e-1111-4222-8333-944445555666"
WAIT = float(os.environ.get("OSK_TEST_WAIT", "90"))


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A PATH holding only fake host CLIs (plus what the runner needs: nothing else)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", str(folder))
    monkeypatch.setenv("FAKE_HOST_LOG", str(tmp_path / "fake.log"))
    monkeypatch.setenv("FAKE_HOST_SCRIPT", str(tmp_path / "script.json"))
    monkeypatch.setenv("FAKE_HOST_MARKER", str(tmp_path / "marker.jsonl"))
    monkeypatch.setenv("FAKE_HOST_DEFAULT", "note")  # tests about tools ask for "review"
    return folder


def install_fake(bin_dir: Path, host: str) -> None:
    wrapper = bin_dir / host
    wrapper.write_text(
        f"#!/bin/sh\nexec {sys.executable} {FAKE} --as {host} \"$@\"\n", encoding="utf-8"
    )
    wrapper.chmod(0o755)


def script(bin_dir: Path, *actions: str) -> None:
    (bin_dir.parent / "script.json").write_text(json.dumps(list(actions)), encoding="utf-8")


def fake_runs(bin_dir: Path) -> list[dict[str, object]]:
    path = bin_dir.parent / "fake.log"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def reviewed(bin_dir: Path) -> list[str]:
    path = bin_dir.parent / "marker.jsonl"
    if not path.exists():
        return []
    return [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines()]


def capture(vault: Vault, host: str, rounds: int, cwd: Path, session: str = SESSION) -> str:
    """Stand in for the stop hook's capture: real raw rounds under the session key of ``cwd``,
    and the hook state naming them (the state the runner reads)."""
    key = session_key(cwd, vault).key
    conversation = conversation_name(session)
    store = StateStore(vault, host, conversation)
    state = store.load()
    for number in range(state.rounds + 1, rounds + 1):
        append_round(vault, key, conversation, RoundInput(
            user=f"question {number}", assistant=f"We decided fact {number}.",
            completion=f"turn-{number}", host=host))
    state.key, state.rounds = key, rounds
    store.save(state)
    return f"_raw/{key}/{conversation}"


def citations(vault: Vault) -> dict[str, list[str]]:
    """Node title -> its derived-from targets, for the nodes the fake fork wrote."""
    found = {}
    for path in sorted(vault.root.glob("Scope/*/background/*.md")):
        meta = yaml.safe_load(path.read_text(encoding="utf-8").split("---\n")[1])
        found[path.stem] = meta.get("derived-from", [])
    return found


def answer(vault: Vault, host: str, cwd: Path, session: str = SESSION) -> str | None:
    return growth.on_final_answer(vault, host=host, session_id=session,
                                  transcript_path=cwd / "t.jsonl", cwd=cwd)


def answers(vault: Vault, host: str, cwd: Path, count: int) -> list[str]:
    started = [answer(vault, host, cwd) for _ in range(count)]
    return [job for job in started if job]


def wait_done(vault: Vault, job_id: str) -> dict[str, object]:
    """Wait (bounded) until the job's runner has exited, then reap it."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        job = growth.load_job(vault, job_id)
        pid = job.get("runner_pid")
        if job.get("status") in {"finished", "unfinished"} and isinstance(pid, int):
            reap(pid)
            return job
        if job.get("status") == "running" and isinstance(pid, int) and not alive(pid):
            return job  # the runner died mid-job
        time.sleep(0.05)
    state = growth.load_job(vault, job_id)
    raise AssertionError(f"job {job_id} did not end within {WAIT}s: {state}")


def alive(pid: int) -> bool:
    """Whether ``pid`` runs; reaps it when it is this process's finished child."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # started by another process (a hook): ask the system
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return done == 0


def reap(pid: int) -> None:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline and alive(pid):
        time.sleep(0.05)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


# -- the cycle --------------------------------------------------------------------------------


def test_the_ninth_final_answer_starts_one_detached_claude_fork_per_batch(
    vault: Vault, bin_dir: Path, project: Path
) -> None:
    install_fake(bin_dir, "claude")
    record = capture(vault, "claude", 9, project)

    started = answers(vault, "claude", project, 9)

    assert len(started) == 1
    job = wait_done(vault, started[0])
    assert job["status"] == "finished"
    assert reviewed(bin_dir) == [f"{record}#Round {n}" for n in range(1, 10)]
    runs = fake_runs(bin_dir)
    assert len(runs) == 3  # nine rounds in batches of four
    for run in runs:
        assert run["argv"][:5] == ["-p", "--resume", SESSION, "--fork-session", "--allowedTools"]
        assert run["fork_env"] == "1" and run["job"] == started[0]
        assert run["vault"] == str(vault.root)
        assert run["cwd"] == str(project)
        assert run["pgid"] == run["pid"]  # its own process group: detached from the user's
    assert "[osk background review" in str(runs[0]["prompt"])


def test_the_whole_cycle_from_the_stop_hook_to_nodes_the_fork_writes_with_the_tools(
    vault: Vault, bin_dir: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_fake(bin_dir, "claude")
    monkeypatch.setenv("FAKE_HOST_DEFAULT", "review")
    ctx = hostsetup.Context(home=Path.home(), vault=vault.root,
                            osk_command=hostsetup.osk_command())
    # The forks fire the Stop hook exactly as `osk setup claude` registers it.
    monkeypatch.setenv("FAKE_HOST_STOP_HOOK", hostsetup.hook_command(ctx, "stop", "claude"))
    transcript = project.parent / "transcript.jsonl"

    for number in range(1, 10):  # nine turns, each ended by the host's Stop hook
        with open(transcript, "a", encoding="utf-8") as handle:
            for line in claude_turn(number, project):
                handle.write(json.dumps(line) + "\n")
        stop = {"session_id": SESSION, "transcript_path": str(transcript), "cwd": str(project),
                "hook_event_name": "Stop", "stop_hook_active": False,
                "last_assistant_message": f"We decided fact {number}."}
        done = subprocess.run(
            [sys.executable, "-m", "osk", "hook", "stop", "--host", "claude", "--vault",
             str(vault.root)], input=json.dumps(stop), capture_output=True, text=True,
            cwd=project, timeout=60, check=True)
        assert done.stdout == "" and done.stderr == ""

    (job_file,) = vault.state("growth", "jobs").glob("*.json")
    job = wait_done(vault, job_file.stem)
    assert job["status"] == "finished"
    key = session_key(project, vault).key
    record = f"_raw/{key}/{conversation_name(SESSION)}"
    nodes = citations(vault)
    assert set(nodes) == {"background"} | {f"Fact {n} of the background review"
                                          for n in range(1, 10)}
    for n in range(1, 10):
        assert nodes[f"Fact {n} of the background review"] == [f"[[{record}#Round {n}]]"]
    runs = fake_runs(bin_dir)
    assert len(runs) == 3
    # Each fork fired the Stop hook for its own session: nothing was captured or counted.
    conversation = conversation_name(SESSION)
    assert [p.stem for p in (vault.raw_dir / key).glob("*.md")] == [conversation]
    assert [p.stem for p in vault.state("hooks", "claude").glob("*.json")] == [conversation]
    assert [p.stem for p in vault.state("growth", "conversations", "claude").iterdir()] == [
        SESSION]


def claude_turn(number: int, cwd: Path) -> list[dict[str, object]]:
    """One Claude Code turn as transcript lines: the person's prompt and the final answer."""
    common = {"isSidechain": False, "userType": "external", "cwd": str(cwd),
              "sessionId": SESSION, "version": "2.1.97", "gitBranch": "main"}
    at = f"2026-03-14T10:{number:02d}:00.000Z"
    return [
        {**common, "parentUuid": f"a{number - 1}" if number > 1 else None, "type": "user",
         "message": {"role": "user", "content": f"What did we decide about item {number}?"},
         "uuid": f"u{number}", "timestamp": at},
        {**common, "parentUuid": f"u{number}", "type": "assistant", "requestId": f"r{number}",
         "message": {"id": f"msg_{number}", "type": "message", "role": "assistant",
                     "model": "claude-opus-4", "stop_reason": None,
                     "content": [{"type": "text", "text": f"We decided fact {number}."}]},
         "uuid": f"a{number}", "timestamp": at},
    ]


def test_a_codex_fork_uses_exec_fork_on_the_source_session(
    vault: Vault, bin_dir: Path, project: Path
) -> None:
    install_fake(bin_dir, "codex")
    capture(vault, "codex", 3, project)

    started = answers(vault, "codex", project, 9)

    job = wait_done(vault, started[0])
    assert job["status"] == "finished"
    (run,) = fake_runs(bin_dir)
    assert run["argv"][:3] == ["exec", "fork", SESSION]
    assert "round _raw/project/" in str(run["argv"][3])


def test_answers_between_reviews_start_nothing(vault: Vault, bin_dir: Path,
                                               project: Path) -> None:
    install_fake(bin_dir, "claude")
    capture(vault, "claude", 8, project)

    assert answers(vault, "claude", project, 8) == []
    assert fake_runs(bin_dir) == []


def test_the_next_job_reviews_only_rounds_after_the_last_job(
    vault: Vault, bin_dir: Path, project: Path
) -> None:
    install_fake(bin_dir, "claude")
    record = capture(vault, "claude", 9, project)
    wait_done(vault, answers(vault, "claude", project, 9)[0])
    capture(vault, "claude", 18, project)

    second = answers(vault, "claude", project, 9)

    wait_done(vault, second[0])
    assert reviewed(bin_dir) == [f"{record}#Round {n}" for n in range(1, 19)]


def test_a_job_takes_at_most_twenty_items_in_batches_of_four(
    vault: Vault, bin_dir: Path, project: Path
) -> None:
    install_fake(bin_dir, "claude")
    record = capture(vault, "claude", 30, project)

    job = wait_done(vault, answers(vault, "claude", project, 9)[0])

    manifest = job["manifest"]
    assert len(manifest["items"]) == 20
    assert [len(batch) for batch in manifest["batches"]] == [4, 4, 4, 4, 4]
    assert reviewed(bin_dir) == [f"{record}#Round {n}" for n in range(1, 21)]


# -- fallbacks --------------------------------------------------------------------------------


def test_a_missing_cli_sets_the_fallback_flag_and_starts_nothing(
    vault: Vault, bin_dir: Path, project: Path
) -> None:
    capture(vault, "claude", 9, project)
    assert growth.in_session_review(vault, "claude")  # no CLI yet: in-session from the start

    assert answers(vault, "claude", project, 9) == []

    flag = json.loads(growth.fallback_path(vault, "claude").read_text(encoding="utf-8"))
    assert flag["reason"] == "cli-missing"
    assert growth.in_session_review(vault, "claude")


def test_the_cli_coming_back_clears_the_missing_cli_flag(
    vault: Vault, bin_dir: Path, project: Path
) -> None:
    capture(vault, "claude", 9, project)
    answers(vault, "claude", project, 9)
    install_fake(bin_dir, "claude")

    started = answers(vault, "claude", project, 9)

    assert wait_done(vault, started[0])["status"] == "finished"
    assert not growth.fallback_path(vault, "claude").exists()
    assert not growth.in_session_review(vault, "claude")


def test_two_unfinished_forks_in_a_row_fall_back_to_in_session_reviews(
    vault: Vault, bin_dir: Path, project: Path
) -> None:
    install_fake(bin_dir, "claude")
    script(bin_dir, "fail", "fail")
    capture(vault, "claude", 9, project)

    first = answers(vault, "claude", project, 9)
    assert wait_done(vault, first[0])["status"] == "unfinished"
    assert not growth.in_session_review(vault, "claude")  # one failure is not enough
    retried = answers(vault, "claude", project, 1)  # the unfinished job is retried at once

    assert retried == first
    assert wait_done(vault, first[0])["status"] == "unfinished"
    assert growth.fallback_reason(vault, "claude") == "unfinished"
    assert growth.in_session_review(vault, "claude")
    assert answers(vault, "claude", project, 9) == []  # no more forks while fallen back
    assert [run["action"] for run in fake_runs(bin_dir)] == ["fail", "fail"]
    scope = session_key(project, vault).key
    (pending,) = growth.pending_reviews(vault, scope)  # the session-start note names them
    assert pending.startswith(f"A background review did not finish: 9 item(s) wait "
                              f"(_raw/{scope}/{conversation_name(SESSION)}#Round 1 …)")
    assert growth.pending_reviews(vault, "another-scope") == []


def test_a_finished_fork_resets_the_count_of_unfinished_ones(
    vault: Vault, bin_dir: Path, project: Path
) -> None:
    install_fake(bin_dir, "claude")
    script(bin_dir, "fail")
    capture(vault, "claude", 2, project)

    job_id = answers(vault, "claude", project, 9)[0]
    wait_done(vault, job_id)
    answers(vault, "claude", project, 1)

    assert wait_done(vault, job_id)["status"] == "finished"
    (status,) = [s for s in growth.status(vault) if s.host == "claude"]
    assert status.unfinished_in_row == 0 and status.fallback is None


def test_a_fork_that_runs_past_its_time_is_stopped_and_counted_unfinished(
    vault: Vault, bin_dir: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_fake(bin_dir, "claude")
    script(bin_dir, "hang")
    monkeypatch.setenv("OSK_GROWTH_FORK_TIMEOUT", "1")
    capture(vault, "claude", 2, project)

    job = wait_done(vault, answers(vault, "claude", project, 9)[0])

    assert job["status"] == "unfinished"
    assert job["attempts"][-1]["outcome"] == "timeout"
    (run,) = fake_runs(bin_dir)
    with pytest.raises(ProcessLookupError):
        os.killpg(run["pgid"], 0)


# -- crash recovery ---------------------------------------------------------------------------


def test_a_runner_killed_mid_job_is_resumed_at_its_unfinished_batch(
    vault: Vault, bin_dir: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_fake(bin_dir, "claude")
    monkeypatch.setenv("FAKE_HOST_DEFAULT", "review")
    record = capture(vault, "claude", 9, project)
    script(bin_dir, "review", "kill-runner")

    job_id = answers(vault, "claude", project, 9)[0]
    crashed = wait_done(vault, job_id)
    assert crashed["status"] == "running" and crashed["batches_done"] == 1
    reap(int(crashed["runner_pid"]))

    resumed = answers(vault, "claude", project, 1)

    assert resumed == [job_id]
    job = wait_done(vault, job_id)
    assert job["status"] == "finished"
    assert [a["outcome"] for a in job["attempts"]] == ["finished", "crashed", "finished",
                                                       "finished"]
    assert reviewed(bin_dir) == [f"{record}#Round {n}" for n in range(1, 10)]
    assert len(citations(vault)) == 10  # nine facts and their cluster's hub, each once


def test_a_fork_left_running_by_a_dead_runner_is_stopped_before_the_retry(
    vault: Vault, bin_dir: Path, project: Path
) -> None:
    install_fake(bin_dir, "claude")
    capture(vault, "claude", 2, project)
    script(bin_dir, "hang")
    job_id = answers(vault, "claude", project, 9)[0]
    deadline = time.monotonic() + WAIT
    while not fake_runs(bin_dir) and time.monotonic() < deadline:
        time.sleep(0.05)
    (hanging,) = fake_runs(bin_dir)
    runner = int(growth.load_job(vault, job_id)["runner_pid"])
    os.kill(runner, signal.SIGKILL)  # the runner crashes; its fork keeps running
    reap(runner)

    assert answers(vault, "claude", project, 1) == [job_id]

    job = wait_done(vault, job_id)
    assert job["status"] == "finished"
    assert [a["outcome"] for a in job["attempts"]] == ["crashed", "finished"]
    while group_exists(int(hanging["pgid"])) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not group_exists(int(hanging["pgid"]))


def group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


# -- who never forks --------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["kiro", "antigravity"])
def test_hosts_without_a_forking_cli_review_in_session(
    vault: Vault, bin_dir: Path, project: Path, host: str
) -> None:
    assert growth.in_session_review(vault, host)
    assert answers(vault, host, project, 9) == []
    assert not growth.growth_dir(vault).exists()


def test_answers_inside_a_fork_are_not_counted(
    vault: Vault, bin_dir: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_fake(bin_dir, "claude")
    monkeypatch.setenv(growth.ENV_FORK, "1")

    assert answers(vault, "claude", project, 9) == []
    assert not growth.growth_dir(vault).exists()


def test_growth_switched_off_on_a_device_reviews_in_session(
    vault: Vault, bin_dir: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_fake(bin_dir, "claude")
    monkeypatch.setenv(growth.ENV_SWITCH, "off")

    assert growth.in_session_review(vault, "claude")
    assert answers(vault, "claude", project, 9) == []


def test_the_answer_counter_survives_a_new_process(vault: Vault, bin_dir: Path,
                                                   project: Path) -> None:
    install_fake(bin_dir, "claude")
    capture(vault, "claude", 9, project)
    answers(vault, "claude", project, 8)
    code = ("import sys; from pathlib import Path; from osk.hooks import growth; "
            "from osk.store.vault import Vault; "
            f"print(growth.on_final_answer(Vault(Path({str(vault.root)!r})), host='claude', "
            f"session_id={SESSION!r}, transcript_path=None, cwd={str(project)!r}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "PATH": str(bin_dir)})
    job_id = out.stdout.strip()
    assert job_id != "None"
    job = growth.load_job(vault, job_id)
    deadline = time.monotonic() + WAIT
    while job.get("status") not in {"finished", "unfinished"} and time.monotonic() < deadline:
        time.sleep(0.05)
        job = growth.load_job(vault, job_id)
    assert job["status"] == "finished"


def test_the_growth_module_imports_nothing_heavy() -> None:
    code = "import sys, osk.hooks.growth; print(*sys.modules)"
    out = subprocess.check_output([sys.executable, "-c", code], text=True)
    assert not set(out.split()) & {"mcp", "pydantic", "yaml", "git", "numpy", "rank_bm25"}


def test_a_job_lists_the_scopes_recheck_candidates_and_pending_evictions(
    vault: Vault, bin_dir: Path, project: Path
) -> None:
    from osk.engine.core import Engine
    from osk.errors import LimitError
    from osk.provenance.scope_memory import ScopeMemory

    install_fake(bin_dir, "claude")
    record = capture(vault, "claude", 1, project)
    engine = Engine.open(vault, cwd=project)
    engine.create_node(NewNode("notes", "Notes hub.", "What we noted.\n", space="scope",
                               cluster="notes",
                               drafter="test"))
    engine.create_node(NewNode("Alpha", "Alpha holds.", "Alpha, first version.\n", space="scope",
                               cluster="notes", drafter="test",
                               derived_from=[f"[[{record}#Round 1]]"]))
    engine.create_node(NewNode("Beta", "Beta builds on Alpha.", "Beta.\n", space="scope",
                               cluster="notes", drafter="test", derived_from=["[[Alpha]]"]))
    engine.update_node("Alpha", NodeEdit(old_text="first version", new_text="second version"))
    memory = ScopeMemory(vault, engine.session.scope)
    memory.write(text="keep this line\n" + "detail line\n" * 60, expect_hash=memory.read()[1])
    with pytest.raises(LimitError):
        memory.write(text="keep this line\n" + "detail line\n" * 200,
                     expect_hash=memory.read()[1])
    memory.write(text="keep this line\n", expect_hash=memory.read()[1])
    (eviction,) = memory.pending_evictions()

    job = wait_done(vault, answers(vault, "claude", project, 9)[0])

    kinds = [(item["kind"], item.get("node")) for item in job["manifest"]["items"]]
    assert kinds == [("round", None), ("recheck", "Beta"), ("eviction", None)]
    assert reviewed(bin_dir)[1].endswith(": Beta cites [[Alpha]]")
    assert reviewed(bin_dir)[2].startswith(f"{eviction.id} (scope {engine.session.scope}): ")
