"""Background growth: after every 9 final answers, a forked copy of the session reviews them.

The stop hook calls ``on_final_answer`` after each captured final answer. It bumps a durable
per-conversation counter and, at every ninth answer, journals a job and starts a detached
runner (``python -m osk.hooks.growth run``) — nothing here waits for a fork. The runner builds a
bounded manifest (new raw rounds since the last job, recheck candidates, pending scope-memory
evictions; at most 20 items, in batches of 4), then runs one fork of the host CLI per batch,
resuming the source session so its prompt cache is reused:

- Claude Code: ``claude -p --resume SESSION --fork-session`` (the prompt on stdin);
- Codex CLI: ``codex exec fork SESSION PROMPT`` (the source thread is left untouched).

The fork works through the osk MCP tools like any agent; its environment carries
``OSK_GROWTH_FORK=1`` so the hooks it fires neither capture nor count it.

Failure never reaches the user's session. A job whose runner died is resumed at its first
unfinished batch on the next final answer. If the host CLI is missing, or two forks in a row do
not finish, a fallback flag (``.osk/growth/fallback-<host>.json``) tells the prompt-submit hook
to ask for reviews in-session instead (``in_session_review``). There is no fallback to a paid
API: reviews run in the user's own subscription CLI or in the session itself.

This module is on the hook path: standard library and light osk modules only (heavier modules
are imported inside the runner, which runs detached).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from osk.hooks.forks import GROWTH_FORK_ENV
from osk.hooks.state import conversation_name
from osk.store.edges import RawTarget, raw_record
from osk.store.fsutil import atomic_write
from osk.store.locks import LockTimeout, file_lock
from osk.store.vault import Vault

CADENCE = 9  # final answers between background reviews
BATCH_SIZE = 4  # manifest items per fork
JOB_LIMIT = 20  # manifest items per job
UNFINISHED_LIMIT = 2  # forks in a row that did not finish before falling back
FORK_TIMEOUT = 20 * 60  # seconds a fork may run (OSK_GROWTH_FORK_TIMEOUT overrides)
RETRY_AFTER = 24 * 3600  # seconds before a fallen-back host is tried again
START_GRACE = 120  # seconds a spawned runner has to take its job's lock
FORK_CLIS = {"claude": "claude", "codex": "codex"}  # hosts whose CLI can fork a session

ENV_FORK = GROWTH_FORK_ENV  # set in a fork's environment (named where every hook reads it)
ENV_JOB = "OSK_GROWTH_JOB"
ENV_SWITCH = "OSK_GROWTH"  # "off": no background forks on this device (in-session reviews)


# ---------------------------------------------------------------------------------------------
# Device state
# ---------------------------------------------------------------------------------------------


def growth_dir(vault: Vault) -> Path:
    return vault.state("growth")


def fallback_path(vault: Vault, host: str) -> Path:
    """The flag the prompt-submit hook reads: present = review in-session for this host."""
    return vault.state("growth", f"fallback-{host}.json")


def job_path(vault: Vault, job_id: str) -> Path:
    return vault.state("growth", "jobs", f"{job_id}.json")


def job_lock_path(vault: Vault, job_id: str) -> Path:
    return vault.state("growth", "jobs", f"{job_id}.lock")


def job_log_path(vault: Vault, job_id: str) -> Path:
    return vault.state("growth", "logs", f"{job_id}.log")


def _conversation_path(vault: Vault, host: str, session_id: str) -> Path:
    return vault.state("growth", "conversations", host, f"{conversation_name(session_id)}.json")


def _host_path(vault: Vault, host: str) -> Path:
    return vault.state("growth", "hosts", f"{host}.json")


def _load(path: Path) -> dict[str, object]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (ValueError, OSError):
        return {}  # device state is rebuildable: a damaged file starts over
    return data if isinstance(data, dict) else {}


def _save(path: Path, data: dict[str, object]) -> None:
    atomic_write(path, json.dumps(data, ensure_ascii=False, indent=1, sort_keys=True) + "\n")


@contextmanager
def _locked(vault: Vault, name: str) -> Iterator[None]:
    with file_lock(vault.lock_path(name), timeout=10.0):
        yield


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0


# ---------------------------------------------------------------------------------------------
# What the hooks call
# ---------------------------------------------------------------------------------------------


def is_fork_process() -> bool:
    """True inside a background fork: its hooks must neither capture nor count anything."""
    return bool(os.environ.get(ENV_FORK))


def enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "").lower() not in {"off", "0", "no", "false"}


def in_session_review(vault: Vault, host: str) -> bool:
    """Whether the prompt-submit hook should ask for in-session reviews (turns 9 and 15).

    True for hosts that cannot fork, when background growth is switched off, when the host's
    CLI is not on PATH, and while the fallback flag is set. Reads only; never writes.
    """
    cli = FORK_CLIS.get(host)
    if cli is None or not enabled():
        return True
    if fallback_path(vault, host).exists():
        return True
    return shutil.which(cli) is None


def fallback_reason(vault: Vault, host: str) -> str | None:
    flag = _load(fallback_path(vault, host))
    reason = flag.get("reason")
    return reason if isinstance(reason, str) else None


def on_final_answer(
    vault: Vault,
    *,
    host: str,
    session_id: str,
    transcript_path: Path | str | None,
    cwd: Path | str | None,
) -> str | None:
    """Count one captured final answer; start or resume a background review when one is due.

    Returns the id of the job it started, else None. Never waits for a fork.
    """
    if is_fork_process() or host not in FORK_CLIS or not enabled() or not session_id:
        return None
    with _locked(vault, f"growth-{host}-{conversation_name(session_id)}"):
        conv_path = _conversation_path(vault, host, session_id)
        conv = _load(conv_path)
        conv["answers"] = _int(conv.get("answers")) + 1
        _save(conv_path, conv)
        job_id = conv.get("job")
        job = _load(job_path(vault, job_id)) if isinstance(job_id, str) else {}
        if job.get("status") in {"pending", "running"}:
            if _runner_alive(vault, job):
                return None  # still working: never stack forks
            _note_runner_died(vault, job)
        retry = job.get("status") == "unfinished"
        if not retry and conv["answers"] % CADENCE != 0:
            return None
        if not _may_fork(vault, host):
            return None
        if not retry:
            job = _new_job(vault, host, session_id, transcript_path, cwd)
            conv["job"] = job["id"]
            _save(conv_path, conv)
        _start_runner(vault, job)
        return str(job["id"])


def _may_fork(vault: Vault, host: str) -> bool:
    """Check the CLI and the fallback flag; set or clear the flag as the facts say."""
    flag_path = fallback_path(vault, host)
    flag = _load(flag_path)
    if shutil.which(FORK_CLIS[host]) is None:
        set_fallback(vault, host, "cli-missing",
                     f"`{FORK_CLIS[host]}` is not on PATH; reviews run in-session")
        return False
    if flag.get("reason") == "cli-missing":
        flag_path.unlink(missing_ok=True)
        return True
    if flag.get("reason") == "unfinished":
        since = flag.get("since")
        waited = time.time() - since if isinstance(since, int | float) else RETRY_AFTER
        return waited >= RETRY_AFTER  # probe once in a while; a finished fork clears the flag
    return True


def set_fallback(vault: Vault, host: str, reason: str, detail: str) -> None:
    path = fallback_path(vault, host)
    if _load(path).get("reason") == reason:
        return  # keep the first "since"
    _save(path, {"host": host, "reason": reason, "detail": detail, "since": time.time()})


def clear_fallback(vault: Vault, host: str) -> None:
    fallback_path(vault, host).unlink(missing_ok=True)


# ---------------------------------------------------------------------------------------------
# Jobs
# ---------------------------------------------------------------------------------------------


def _new_job(vault: Vault, host: str, session_id: str, transcript_path: object,
             cwd: object) -> dict[str, object]:
    from osk.store.ids import uuid7

    _prune_jobs(vault)
    job: dict[str, object] = {
        "id": str(uuid7()),
        "host": host,
        "session_id": session_id,
        "transcript_path": str(transcript_path) if transcript_path else None,
        "cwd": str(cwd) if cwd else None,
        "created": time.time(),
        "status": "pending",
        "manifest": None,
        "batches_done": 0,
        "attempts": [],
    }
    _save(job_path(vault, str(job["id"])), job)
    return job


def load_job(vault: Vault, job_id: str) -> dict[str, object]:
    return _load(job_path(vault, job_id))


def _runner_alive(vault: Vault, job: dict[str, object]) -> bool:
    """The runner holds the job's lock while it works; a job still pending was spawned moments
    ago (its runner has not taken the lock yet) unless that was long ago."""
    lock = file_lock(job_lock_path(vault, str(job["id"])), timeout=0)
    try:
        lock.acquire()
    except LockTimeout:
        return True
    lock.release()
    spawned = job.get("spawned")
    return (job.get("status") == "pending" and isinstance(spawned, int | float)
            and time.time() - spawned < START_GRACE)


def _note_runner_died(vault: Vault, job: dict[str, object]) -> None:
    """A runner vanished mid-job: its fork did not finish. Stop a fork it left behind."""
    attempts = job.get("attempts")
    if isinstance(attempts, list) and attempts and isinstance(attempts[-1], dict):
        last = attempts[-1]
        if "outcome" not in last:
            last["outcome"] = "crashed"
            last["ended"] = time.time()
            pid = last.get("pid")
            if isinstance(pid, int):
                _stop_orphan_fork(pid, str(job["id"]))
    job["status"] = "unfinished"
    _save(job_path(vault, str(job["id"])), job)
    _count_unfinished(vault, str(job["host"]))


def _stop_orphan_fork(pid: int, job_id: str) -> None:
    """Stop the fork of a dead runner, if it still runs and really is that fork.

    A pid can be reused, so the process must carry the job's id in its environment (read from
    /proc; where there is no /proc the fork is left to finish on its own).
    """
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return
    if f"{ENV_JOB}={job_id}".encode() in environ.split(b"\0"):
        _stop_group(pid)


def _count_unfinished(vault: Vault, host: str) -> None:
    with _locked(vault, f"growth-host-{host}"):
        state = _load(_host_path(vault, host))
        state["unfinished_in_row"] = _int(state.get("unfinished_in_row")) + 1
        _save(_host_path(vault, host), state)
        if state["unfinished_in_row"] >= UNFINISHED_LIMIT:
            set_fallback(vault, host, "unfinished",
                         f"{state['unfinished_in_row']} background reviews in a row did not "
                         f"finish; reviews run in-session")


def _count_finished(vault: Vault, host: str) -> None:
    with _locked(vault, f"growth-host-{host}"):
        _save(_host_path(vault, host), {"unfinished_in_row": 0})
        if fallback_reason(vault, host) == "unfinished":
            clear_fallback(vault, host)


def _start_runner(vault: Vault, job: dict[str, object]) -> None:
    """Start ``python -m osk.hooks.growth run`` in a new session, detached; never wait for it.

    The journal is written before the spawn and never after it: from then on it is the
    runner's to write.
    """
    job_id = str(job["id"])
    log = job_log_path(vault, job_id)
    log.parent.mkdir(parents=True, exist_ok=True)
    job["status"] = "pending"
    job["spawned"] = time.time()
    _save(job_path(vault, job_id), job)
    argv = [sys.executable, "-m", "osk.hooks.growth", "run", "--vault", str(vault.root),
            "--job", job_id]
    env = dict(os.environ)
    env.pop(ENV_FORK, None)
    _spawn_detached(argv, log, env)


def _spawn_detached(argv: list[str], log: Path, env: dict[str, str]) -> None:
    if hasattr(os, "posix_spawn"):
        # posix_spawn keeps the hook cheap (no subprocess import) and leaves no Popen object
        # behind to be waited for; setsid puts the runner in its own session.
        actions = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, str(log), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644),
            (os.POSIX_SPAWN_DUP2, 1, 2),
        ]
        os.posix_spawn(argv[0], argv, env, file_actions=actions, setsid=True)
        return
    import subprocess

    flags = getattr(subprocess, "DETACHED_PROCESS", 0) | getattr(
        subprocess, "CREATE_NEW_PROCESS_GROUP", 0)
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                env=env, creationflags=flags, close_fds=True)
    proc.returncode = 0  # detached on purpose: nobody waits for it


def _stop_group(pid: int) -> None:
    """Stop a fork this module started (it leads its own process group)."""
    if not hasattr(os, "killpg"):
        os.kill(pid, signal.SIGTERM)
        return
    try:
        os.killpg(pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return


KEEP_FINISHED = 7 * 24 * 3600  # seconds a finished job's journal is kept
KEEP_ANY = 30 * 24 * 3600  # seconds any job's journal is kept
PENDING_LINES = 3


def pending_reviews(vault: Vault, scope: str) -> list[str]:
    """Lines for the session-start note: items of recent background reviews that could not
    finish while their host is fallen back to in-session reviews (else they are retried)."""
    folder = vault.state("growth", "jobs")
    if not scope or not folder.is_dir():
        return []
    lines = []
    for path in sorted(folder.glob("*.json"), reverse=True):
        job = _load(path)
        manifest = job.get("manifest")
        created = job.get("created")
        if (job.get("status") != "unfinished" or not isinstance(manifest, dict)
                or manifest.get("scope") != scope
                or fallback_reason(vault, str(job.get("host"))) is None
                or not isinstance(created, int | float)
                or time.time() - created > KEEP_FINISHED):
            continue
        left = _items_left(job, manifest)
        if left:
            targets = [str(i.get("target")) for i in left if i.get("kind") == "round"]
            example = f" ({targets[0]} …)" if targets else ""
            lines.append(f"A background review did not finish: {len(left)} item(s) wait"
                         f"{example}; review them in-session with `read_raw`, then "
                         f"`create_node`/`update_node`.")
        if len(lines) >= PENDING_LINES:
            break
    return lines


def _items_left(job: dict[str, object], manifest: dict[str, object]) -> list[dict[str, str]]:
    batches = manifest.get("batches")
    if not isinstance(batches, list):
        return []
    return [item for batch in batches[_int(job.get("batches_done")):] for item in batch]


def _prune_jobs(vault: Vault) -> None:
    """Drop old journals (and their prompts, locks, logs) so the jobs folder stays small."""
    folder = vault.state("growth", "jobs")
    if not folder.is_dir():
        return
    now = time.time()
    for path in folder.glob("*.json"):
        job = _load(path)
        created = job.get("created")
        age = now - created if isinstance(created, int | float) else KEEP_ANY
        if age < (KEEP_FINISHED if job.get("status") == "finished" else KEEP_ANY):
            continue
        job_id = path.stem
        if _runner_alive(vault, {"id": job_id, **job}):
            continue
        for leftover in [path, job_lock_path(vault, job_id), job_log_path(vault, job_id),
                         *folder.glob(f"{job_id}.batch*.prompt")]:
            leftover.unlink(missing_ok=True)


# ---------------------------------------------------------------------------------------------
# Status (for osk doctor)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HostStatus:
    host: str
    cli: str | None  # the CLI's path, None when missing
    fallback: str | None  # the fallback reason, None when forks are in use
    detail: str  # the fallback's explanation ("" when none)
    unfinished_in_row: int


def status(vault: Vault) -> list[HostStatus]:
    found = []
    for host, cli in FORK_CLIS.items():
        state = _load(_host_path(vault, host))
        flag = _load(fallback_path(vault, host))
        found.append(HostStatus(host, shutil.which(cli), fallback_reason(vault, host),
                                str(flag.get("detail", "")), _int(state.get("unfinished_in_row"))))
    return found


# ---------------------------------------------------------------------------------------------
# The runner: `python -m osk.hooks.growth run --vault V --job ID` (detached; may import heavier
# code)
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
        _save(job_path(vault, job_id), job)
        if job.get("manifest") is None:
            job["manifest"] = build_manifest(vault, job)
            _save(job_path(vault, job_id), job)
        manifest = job["manifest"]
        assert isinstance(manifest, dict)
        batches = manifest["batches"]
        assert isinstance(batches, list)
        while _int(job.get("batches_done")) < len(batches):
            outcome = _run_fork(vault, job, _int(job.get("batches_done")), len(batches))
            if outcome != "finished":
                job["status"] = "unfinished"
                _save(job_path(vault, job_id), job)
                if outcome == "cli-missing":
                    set_fallback(vault, host, "cli-missing",
                                 f"`{FORK_CLIS[host]}` is not on PATH; reviews run in-session")
                else:
                    _count_unfinished(vault, host)
                return 1
            job["batches_done"] = _int(job.get("batches_done")) + 1
            _save(job_path(vault, job_id), job)
            _count_finished(vault, host)
        job["status"] = "finished"
        job["finished"] = time.time()
        _save(job_path(vault, job_id), job)
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
    _save(job_path(vault, job_id), job)
    exe = shutil.which(argv[0])
    if exe is None:
        attempt.update(outcome="cli-missing", ended=time.time())
        _save(job_path(vault, job_id), job)
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
        _save(job_path(vault, job_id), job)
        try:
            code: int | None = proc.wait(timeout=fork_timeout())
            outcome = "finished" if code == 0 else "failed"
        except subprocess.TimeoutExpired:
            _stop_group(proc.pid)
            try:
                code = proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                code = proc.wait()
            outcome = "timeout"
    attempt.update(outcome=outcome, exit=code, ended=time.time())
    _save(job_path(vault, job_id), job)
    return outcome


# -- the manifest ---------------------------------------------------------------------------


def build_manifest(vault: Vault, job: dict[str, object]) -> dict[str, object]:
    """What the job reviews: new raw rounds, recheck candidates, pending evictions (bounded)."""
    host, session_id = str(job["host"]), str(job["session_id"])
    key, conversation, rounds = _raw_record(vault, host, session_id)
    scope = _scope_of(vault, key, job.get("cwd"))
    with _locked(vault, f"growth-{host}-{conversation_name(session_id)}"):
        conv_path = _conversation_path(vault, host, session_id)
        conv = _load(conv_path)
        first = _int(conv.get("reviewed_through")) + 1
        round_items = [
            {"kind": "round", "target": RawTarget(key, conversation, n).coordinate}
            for n in range(first, rounds + 1)
        ] if key else []
        items = _bounded(round_items, _recheck_items(vault, scope), _eviction_items(vault, scope))
        taken = [i for i in items if i["kind"] == "round"]
        if taken:
            conv["reviewed_through"] = first + len(taken) - 1
            _save(conv_path, conv)
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

    parser = argparse.ArgumentParser(prog="python -m osk.hooks.growth",
                                     description="osk background growth runner")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run or resume one journalled job")
    run.add_argument("--vault", required=True)
    run.add_argument("--job", required=True)
    args = parser.parse_args(argv)
    return run_job(Vault(Path(args.vault)), args.job)


if __name__ == "__main__":
    raise SystemExit(main())
