"""Background growth: after every 9 final answers, a forked copy of the session reviews them.

The stop hook calls ``on_final_answer`` after each captured final answer. It bumps a durable
per-conversation counter and, at every ninth answer, journals a job and starts a detached
runner (``python -m osk.hooks.growth_runner run``) — nothing here waits for a fork. The runner
builds a bounded manifest (new raw rounds since the last job, recheck candidates, pending
scope-memory evictions; at most 20 items, in batches of 4), then runs one fork of the host CLI per
batch, resuming the source session so its prompt cache is reused:

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
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from osk.hooks.forks import GROWTH_FORK_ENV
from osk.hooks.state import conversation_name
from osk.store.fastclass import dataclass
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


def conversation_path(vault: Vault, host: str, session_id: str) -> Path:
    return vault.state("growth", "conversations", host, f"{conversation_name(session_id)}.json")


def _host_path(vault: Vault, host: str) -> Path:
    return vault.state("growth", "hosts", f"{host}.json")


def load_counts(path: Path) -> dict[str, object]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (ValueError, OSError):
        return {}  # device state is rebuildable: a damaged file starts over
    return data if isinstance(data, dict) else {}


def save_counts(path: Path, data: dict[str, object]) -> None:
    atomic_write(path, json.dumps(data, ensure_ascii=False, indent=1, sort_keys=True) + "\n")


@contextmanager
def locked(vault: Vault, name: str) -> Iterator[None]:
    with file_lock(vault.lock_path(name), timeout=10.0):
        yield


def int_or_zero(value: object) -> int:
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
    return _which(cli) is None


def _which(cli: str) -> str | None:
    import shutil  # 4 ms of imports (the compressors) each session start would otherwise pay

    return shutil.which(cli)


def fallback_reason(vault: Vault, host: str) -> str | None:
    flag = load_counts(fallback_path(vault, host))
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
    with locked(vault, f"growth-{host}-{conversation_name(session_id)}"):
        conv_path = conversation_path(vault, host, session_id)
        conv = load_counts(conv_path)
        answers = conv["answers"] = int_or_zero(conv.get("answers")) + 1
        save_counts(conv_path, conv)
        job_id = conv.get("job")
        job = load_counts(job_path(vault, job_id)) if isinstance(job_id, str) else {}
        if job.get("status") in {"pending", "running"}:
            if _runner_alive(vault, job):
                return None  # still working: never stack forks
            _note_runner_died(vault, job)
        retry = job.get("status") == "unfinished"
        if not retry and answers % CADENCE != 0:
            return None
        if not _may_fork(vault, host):
            return None
        if not retry:
            job = _new_job(vault, host, session_id, transcript_path, cwd)
            conv["job"] = job["id"]
            save_counts(conv_path, conv)
        _start_runner(vault, job)
        return str(job["id"])


def _may_fork(vault: Vault, host: str) -> bool:
    """Check the CLI and the fallback flag; set or clear the flag as the facts say."""
    flag_path = fallback_path(vault, host)
    flag = load_counts(flag_path)
    if _which(FORK_CLIS[host]) is None:
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
    if load_counts(path).get("reason") == reason:
        return  # keep the first "since"
    save_counts(path, {"host": host, "reason": reason, "detail": detail, "since": time.time()})


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
    save_counts(job_path(vault, str(job["id"])), job)
    return job


def load_job(vault: Vault, job_id: str) -> dict[str, object]:
    return load_counts(job_path(vault, job_id))


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
    save_counts(job_path(vault, str(job["id"])), job)
    count_unfinished(vault, str(job["host"]))


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
        stop_group(pid)


def count_unfinished(vault: Vault, host: str) -> None:
    with locked(vault, f"growth-host-{host}"):
        state = load_counts(_host_path(vault, host))
        in_row = state["unfinished_in_row"] = int_or_zero(state.get("unfinished_in_row")) + 1
        save_counts(_host_path(vault, host), state)
        if in_row >= UNFINISHED_LIMIT:
            set_fallback(vault, host, "unfinished",
                         f"{in_row} background reviews in a row did not "
                         f"finish; reviews run in-session")


def count_finished(vault: Vault, host: str) -> None:
    with locked(vault, f"growth-host-{host}"):
        save_counts(_host_path(vault, host), {"unfinished_in_row": 0})
        if fallback_reason(vault, host) == "unfinished":
            clear_fallback(vault, host)


def _start_runner(vault: Vault, job: dict[str, object]) -> None:
    """Start ``python -m osk.hooks.growth_runner run`` in a new session, detached; never wait for
    it.

    The journal is written before the spawn and never after it: from then on it is the
    runner's to write.
    """
    job_id = str(job["id"])
    log = job_log_path(vault, job_id)
    log.parent.mkdir(parents=True, exist_ok=True)
    job["status"] = "pending"
    job["spawned"] = time.time()
    save_counts(job_path(vault, job_id), job)
    argv = [sys.executable, "-m", "osk.hooks.growth_runner", "run", "--vault", str(vault.root),
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


def stop_group(pid: int) -> None:
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
        job = load_counts(path)
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
    return [item for batch in batches[int_or_zero(job.get("batches_done")):] for item in batch]


def _prune_jobs(vault: Vault) -> None:
    """Drop old journals (and their prompts, locks, logs) so the jobs folder stays small."""
    folder = vault.state("growth", "jobs")
    if not folder.is_dir():
        return
    now = time.time()
    for path in folder.glob("*.json"):
        job = load_counts(path)
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
        state = load_counts(_host_path(vault, host))
        flag = load_counts(fallback_path(vault, host))
        found.append(HostStatus(host, _which(cli), fallback_reason(vault, host),
                                str(flag.get("detail", "")),
                                int_or_zero(state.get("unfinished_in_row"))))
    return found


