"""Background growth's runner, ``python -m osk.hooks.growth_runner run --vault V --job ID``, started
detached by ``osk.hooks.growth`` at every ninth final answer: it builds the job's bounded
manifest (new raw rounds, recheck candidates, pending scope-memory evictions, in batches) and
runs one fork of the host CLI per batch. Off the hook path: it may import heavier code.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

from osk.hooks.growth import (
    BATCH_SIZE,
    ENV_FORK,
    ENV_JOB,
    FORK_CLIS,
    FORK_TIMEOUT,
    JOB_LIMIT,
    conversation_path,
    count_finished,
    count_unfinished,
    int_or_zero,
    job_lock_path,
    job_log_path,
    job_path,
    load_counts,
    load_job,
    locked,
    save_counts,
    set_fallback,
    stop_group,
)
from osk.hooks.state import conversation_name
from osk.store.edges import RawTarget, raw_record
from osk.store.fsutil import atomic_write
from osk.store.locks import LockTimeout, file_lock
from osk.store.vault import Vault

# ---------------------------------------------------------------------------------------------
# The runner (detached; may import heavier code)
# ---------------------------------------------------------------------------------------------


def fork_command(host: str, session_id: str, prompt: str) -> tuple[list[str], bool]:
    """The host CLI command that forks ``session_id`` and runs ``prompt`` in the fork.

    Returns the argv and whether the prompt goes on stdin (else it is in the argv).
    """
    if host == "claude":
        # -p: one non-interactive turn; --fork-session: a new session id, the source untouched;
        # --allowedTools mcp__osk: the osk tools run without a permission prompt, nothing else.
        return ["claude", "-p", "--resume", session_id, "--fork-session",
                "--allowedTools", "mcp__osk", "--output-format", "json"], True
    if host == "codex":
        return ["codex", "exec", "fork", session_id, prompt], False
    raise ValueError(f"host {host!r} cannot fork a session")


def fork_timeout() -> float:
    try:
        return float(os.environ.get("OSK_GROWTH_FORK_TIMEOUT", FORK_TIMEOUT))
    except ValueError:
        return float(FORK_TIMEOUT)


def run_job(vault: Vault, job_id: str) -> int:
    """Run (or resume) a job: build its manifest once, then one fork per unfinished batch."""
    lock = file_lock(job_lock_path(vault, job_id), timeout=0)
    try:
        lock.acquire()
    except LockTimeout:
        _log(f"job {job_id}: another runner holds it")
        return 0
    try:
        job = load_job(vault, job_id)
        if not job or job.get("status") == "finished":
            return 0
        host = str(job["host"])
        job["status"] = "running"
        job["runner_pid"] = os.getpid()
        save_counts(job_path(vault, job_id), job)
        if job.get("manifest") is None:
            job["manifest"] = build_manifest(vault, job)
            save_counts(job_path(vault, job_id), job)
        manifest = job["manifest"]
        assert isinstance(manifest, dict)
        batches = manifest["batches"]
        assert isinstance(batches, list)
        while int_or_zero(job.get("batches_done")) < len(batches):
            outcome = _run_fork(vault, job, int_or_zero(job.get("batches_done")), len(batches))
            if outcome != "finished":
                job["status"] = "unfinished"
                save_counts(job_path(vault, job_id), job)
                if outcome == "cli-missing":
                    set_fallback(vault, host, "cli-missing",
                                 f"`{FORK_CLIS[host]}` is not on PATH; reviews run in-session")
                else:
                    count_unfinished(vault, host)
                return 1
            job["batches_done"] = int_or_zero(job.get("batches_done")) + 1
            save_counts(job_path(vault, job_id), job)
            count_finished(vault, host)
        job["status"] = "finished"
        job["finished"] = time.time()
        save_counts(job_path(vault, job_id), job)
        return 0
    finally:
        lock.release()


def _run_fork(vault: Vault, job: dict[str, object], index: int, total: int) -> str:
    import subprocess

    job_id, host = str(job["id"]), str(job["host"])
    manifest = job["manifest"]
    assert isinstance(manifest, dict)
    prompt = review_prompt(job, index, total)
    prompt_file = vault.state("growth", "jobs", f"{job_id}.batch{index + 1}.prompt")
    atomic_write(prompt_file, prompt)
    argv, on_stdin = fork_command(host, str(job["session_id"]), prompt)
    attempt: dict[str, object] = {"batch": index, "started": time.time()}
    attempts = job.setdefault("attempts", [])
    assert isinstance(attempts, list)
    attempts.append(attempt)
    save_counts(job_path(vault, job_id), job)
    exe = shutil.which(argv[0])
    if exe is None:
        attempt.update(outcome="cli-missing", ended=time.time())
        save_counts(job_path(vault, job_id), job)
        return "cli-missing"
    env = dict(os.environ)
    env.update({ENV_FORK: "1", ENV_JOB: job_id, "OSK_VAULT": str(vault.root)})
    if host == "claude":
        # `claude -p` does not wait for MCP servers by default: the fork would review without
        # osk's tools whenever the server starts slower than the first request goes out.
        env["MCP_CONNECTION_NONBLOCKING"] = "0"
    cwd = job.get("cwd")
    workdir = cwd if isinstance(cwd, str) and Path(cwd).is_dir() else str(vault.root)
    log = job_log_path(vault, job_id)
    stdin_path = prompt_file if on_stdin else Path(os.devnull)
    with open(log, "ab") as out, open(stdin_path, "rb") as stdin:
        proc = subprocess.Popen([exe, *argv[1:]], stdin=stdin, stdout=out,
                                stderr=subprocess.STDOUT, cwd=workdir, env=env,
                                start_new_session=True)
        attempt["pid"] = proc.pid
        save_counts(job_path(vault, job_id), job)
        try:
            code: int | None = proc.wait(timeout=fork_timeout())
            outcome = "finished" if code == 0 else "failed"
        except subprocess.TimeoutExpired:
            stop_group(proc.pid)
            try:
                code = proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                code = proc.wait()
            outcome = "timeout"
    attempt.update(outcome=outcome, exit=code, ended=time.time())
    save_counts(job_path(vault, job_id), job)
    return outcome


# -- the manifest ---------------------------------------------------------------------------


def build_manifest(vault: Vault, job: dict[str, object]) -> dict[str, object]:
    """What the job reviews: new raw rounds, recheck candidates, pending evictions (bounded)."""
    host, session_id = str(job["host"]), str(job["session_id"])
    key, conversation, rounds = _raw_record(vault, host, session_id)
    scope = _scope_of(vault, key, job.get("cwd"))
    with locked(vault, f"growth-{host}-{conversation_name(session_id)}"):
        conv_path = conversation_path(vault, host, session_id)
        conv = load_counts(conv_path)
        first = int_or_zero(conv.get("reviewed_through")) + 1
        round_items = [
            {"kind": "round", "target": RawTarget(key, conversation, n).coordinate}
            for n in range(first, rounds + 1)
        ] if key else []
        items = _bounded(round_items, _recheck_items(vault, scope), _eviction_items(vault, scope))
        taken = [i for i in items if i["kind"] == "round"]
        if taken:
            conv["reviewed_through"] = first + len(taken) - 1
            save_counts(conv_path, conv)
    batches = [items[i : i + BATCH_SIZE] for i in range(0, len(items), BATCH_SIZE)]
    return {"scope": scope, "record": raw_record(key, conversation) if key else None,
            "items": items, "batches": batches}


def _bounded(rounds: list[dict[str, str]], rechecks: list[dict[str, str]],
             evictions: list[dict[str, str]]) -> list[dict[str, str]]:
    """At most JOB_LIMIT items: rechecks and evictions keep a batch each when they have any,
    oldest rounds fill the rest (later rounds wait for the next job)."""
    keep_rechecks = rechecks[:BATCH_SIZE]
    keep_evictions = evictions[:BATCH_SIZE]
    room = JOB_LIMIT - len(keep_rechecks) - len(keep_evictions)
    chosen = rounds[:room]
    spare = JOB_LIMIT - len(chosen) - len(keep_rechecks) - len(keep_evictions)
    extra = (rechecks[BATCH_SIZE:] + evictions[BATCH_SIZE:])[:spare]
    return chosen + keep_rechecks + keep_evictions + extra


def _raw_record(vault: Vault, host: str, session_id: str) -> tuple[str, str, int]:
    """The session key, conversation name and round count of the session's raw record.

    The key is the one the stop hook recorded in its per-conversation state; the count comes
    from the record itself (the hook state's count is the fallback).
    """
    from osk.capture.raw import read_record
    from osk.errors import OskError
    from osk.hooks.state import StateStore

    conversation = conversation_name(session_id)
    state = StateStore(vault, host, conversation).load()
    if not state.key or not (vault.raw_dir / state.key / f"{conversation}.md").is_file():
        return "", conversation, 0
    try:
        count = len(read_record(vault, state.key, conversation, strict=False).rounds)
    except OskError as exc:
        _log(f"raw record unreadable, using the hook's round count: {exc}")
        count = state.rounds
    return state.key, conversation, count


def _scope_of(vault: Vault, key: str, cwd: object) -> str | None:
    try:
        from osk.provenance.sessions import Routing, open_session

        if key:
            return Routing(vault).scope_for(key)
        if isinstance(cwd, str) and Path(cwd).is_dir():
            return open_session(vault, Path(cwd)).scope
    except Exception as exc:  # noqa: BLE001 - a manifest without a scope still reviews rounds
        _log(f"scope lookup failed: {exc!r}")
    return None


def _recheck_items(vault: Vault, scope: str | None) -> list[dict[str, str]]:
    try:
        from osk.provenance.rechecks import Rechecks

        candidates = Rechecks(vault).candidates()
    except Exception as exc:  # noqa: BLE001 - rechecks are optional in a job
        _log(f"recheck candidates unavailable: {exc!r}")
        return []
    items = []
    for candidate in candidates:
        if candidate.cascade:
            continue  # a cascade is the person's to resolve, not a background review's
        if candidate.scope not in (None, scope):
            continue  # another project's node: this session may not touch it
        items.append({"kind": "recheck", "id": str(candidate.id),
                      "node": str(candidate.citing_title), "target": str(candidate.target)})
    return items


def _eviction_items(vault: Vault, scope: str | None) -> list[dict[str, str]]:
    if scope is None:
        return []
    try:
        from osk.provenance.scope_memory import pending_evictions

        evictions = pending_evictions(vault, scope)
    except Exception as exc:  # noqa: BLE001 - evictions are optional in a job
        _log(f"pending evictions unavailable: {exc!r}")
        return []
    return [{"kind": "eviction", "id": e.id, "scope": e.scope, "lines": "\n".join(e.lines)}
            for e in evictions]


# -- the prompt -----------------------------------------------------------------------------


def review_prompt(job: dict[str, object], index: int, total: int) -> str:
    manifest = job["manifest"]
    assert isinstance(manifest, dict)
    batch = manifest["batches"][index]
    lines = [
        f"[osk background review: job {job['id']}, batch {index + 1} of {total}]",
        "",
        "You are a background copy of this conversation, started by osk to grow its memory "
        "vault. Nobody is watching this copy: do not ask questions, do not edit project files "
        "and do not run commands. Work only through the osk MCP tools.",
        "",
        "For each item below:",
        "- round: read it with `read_raw`, then `search` for nodes that already hold its "
        "durable claims (decisions, facts, conventions, constraints, preferences). Correct or "
        "extend such a node with `update_node` (read it with `read_node` first), or write a new "
        "one with `create_node`, citing the round's coordinate in derived-from. Skip small "
        "talk and anything temporary.",
        "- recheck ID: the node cites a target that changed since it was cited. Read both; "
        "then call `update_node` on the node with recheck_of=[ID]: with no other change it "
        "re-cites the target as it is now, with a change it corrects the node.",
        "- eviction ID: these lines left the scope memory at its cap. Keep what is durable as "
        "a node, then settle the item with `scope_memory` (action settle, eviction ID).",
        "",
        "Items:",
    ]
    for number, item in enumerate(batch, start=1):
        if item["kind"] == "round":
            lines.append(f"{number}. round {item['target']}")
        elif item["kind"] == "recheck":
            lines.append(f"{number}. recheck {item['id']}: {item['node']} cites {item['target']}")
        else:
            evicted = " / ".join(item["lines"].splitlines())
            lines.append(f"{number}. eviction {item['id']} (scope {item['scope']}): {evicted}")
    lines += ["", "When you are done, answer with one line: osk review done."]
    return "\n".join(lines) + "\n"


def _log(message: str) -> None:
    """Runner diagnostics go to its stdout, which the spawner points at the job's log file."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
    print(f"{stamp} osk growth: {message}", flush=True)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m osk.hooks.growth_runner",
                                     description="osk background growth runner")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run or resume one journalled job")
    run.add_argument("--vault", required=True)
    run.add_argument("--job", required=True)
    args = parser.parse_args(argv)
    return run_job(Vault(Path(args.vault)), args.job)


if __name__ == "__main__":
    raise SystemExit(main())
