"""Git sync: commit the vault, bring in the remote's commits, publish ours, lose nothing.

One cycle (``sync_once``) runs in this order:

1. **Commit** (under the vault mutation lock) everything that changed, with a message that names
   what changed: nodes added, changed, moved and removed, ledger lines appended, raw records
   grown. Device state (``.osk/``) is never staged, whatever ``.gitignore`` says. Ledgers and raw
   records are committed only up to their last complete line, so a lock-free append caught
   half-written is never published (the rest goes in the next cycle).
2. **Fetch** the remote branch (no lock held: the network can be slow). If the remote cannot
   be reached the cycle stops here: the commit stays local, the state says *offline*, and a
   later cycle catches up.
3. **Rebase** our unpublished commits onto the remote branch (under the mutation lock). The
   rebase never runs in the vault's own working tree: it runs in a disposable clone under
   ``.osk/sync/scratch`` that borrows the vault's objects and checks out only the top-level
   files (a sparse checkout), so agents and the person at the keyboard never see a half-rebased
   vault, and a process killed mid-rebase leaves nothing in the vault to repair.
   ``_ledger/*.jsonl merge=union`` in ``.gitattributes`` applies there as in any rebase, so both
   devices' ledger lines are kept; the ledger reader then reports a fork and the next append
   joins it (``osk.store.ledger``).
4. **Land** the rebased commit in the vault: each file that differs is rewritten atomically,
   then the branch and index move. Appends made to a ledger or raw record while the cycle ran
   are carried over onto the new content; each such file lands under the lock its appends
   take (``raw.lock_path`` for a raw record), so no append interleaves with the rewrite. A
   landing is journalled in ``.osk/sync/landing.json`` first, so an interrupted landing is
   finished by the next cycle.
5. **Push**. A rejected push (another device pushed first) goes back to step 2, a bounded number
   of times; an unreachable remote marks the vault offline, with its commits kept. A remote
   that answers but refuses our credentials is not "offline": the cycle fails with the
   reason (a key or token to fix), its commits kept all the same.

Conflicts. Ledgers never conflict (union). Raw records are per device and conversation, so they
should not; if one does, both versions are kept. A node edited on two devices keeps **the
version the remote already has** at its path (it is what every other device already sees), and
the local version is written beside it as a *conflict copy* (``osk.store.conflict_copies``: its
name, and the commented-out id that keeps the original readable). A node deleted on one device and
edited on the other keeps the edit (at the path when the remote still has the node, as a
conflict copy when the remote deleted it). A file a person edits by hand while a cycle lands a
different version of it gets the same treatment (their text becomes the copy). Copies of
anything but nodes keep their bytes unchanged. No file is ever left with conflict markers.

Interrupted cycles. A killed cycle leaves at most: a scratch clone (discarded and redone), a
landing journal (the landing is finished), and stale git lock files such as ``index.lock``
(removed if they outlive a short wait, since the previous cycle is known to be dead). A merge,
rebase or cherry-pick in progress in the vault itself was started by a person, never by osk:
the cycle refuses and says how to finish or abort it.

Only the vault's top-level ``.gitattributes`` is read during a sync rebase (the scratch clone
checks out top-level files only).

``OSK_SYNC_PAUSE_AT=<checkpoint>`` (one of ``CHECKPOINTS``) with ``OSK_SYNC_PAUSE_FILE=<path>``
makes a cycle write that file and wait there (``OSK_SYNC_PAUSE_SECONDS``, default 120), so crash
tests can kill a real process at a known point.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, NoReturn

from osk.authority import mutation
from osk.errors import OskError, RawRecordError, SyncError
from osk.store import clock
from osk.store.conflict_copies import (
    conflict_copies,
    copy_content,
    copy_name,
    is_conflict_copy,
    is_node_path,
)
from osk.store.fsutil import atomic_write, is_temp_name
from osk.store.ledger import device_id
from osk.store.locks import LockTimeout, file_lock
from osk.store.vault import LEDGER_DIR, RAW_DIR, STATE_DIR, Vault
from osk.sync.gitrepo import GitRepo, GitRun, literal, open_repo, split_z

DEFAULT_REMOTE = "origin"
PUSH_ATTEMPTS = 5
NETWORK_TIMEOUT = 120.0
SYNC_LOCK_TIMEOUT = 300.0
MUTATION_TIMEOUT = 60.0  # a landing waits this long for node writes under way
STALE_LOCK_WAIT = 1.5
CHECKPOINTS = ("committed", "fetched", "rebase-stopped", "rebased", "landing", "landed", "pushed")
_ZERO = "0" * 40
_EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
_NAMES_SHOWN = 12
# The scratch rebase must not be steered by the person's global rebase settings or hooks.
_SCRATCH_CONFIG = ("rebase.autoStash=false", "rebase.autoSquash=false", "rebase.updateRefs=false",
                   "rebase.backend=merge", "advice.detachedHead=false", "gc.auto=0")

Checkpoint = Callable[[str], None]


# -- results --------------------------------------------------------------------------------
@dataclass(frozen=True)
class CommitSummary:
    """What one sync commit recorded (vault-relative paths, titles for nodes)."""

    sha: str
    subject: str
    nodes_added: tuple[str, ...] = ()
    nodes_changed: tuple[str, ...] = ()
    nodes_removed: tuple[str, ...] = ()
    nodes_moved: tuple[tuple[str, str], ...] = ()
    ledgers: tuple[tuple[str, int], ...] = ()  # (ledger name, lines appended)
    raw: tuple[tuple[str, int], ...] = ()  # (KEY/CONVERSATION, lines added)
    conflict_copies: tuple[str, ...] = ()
    other: tuple[str, ...] = ()


@dataclass
class SyncResult:
    remote: str
    branch: str
    commits: list[CommitSummary] = field(default_factory=list)
    pulled: int = 0  # commits brought in from the remote
    pushed: int = 0  # local commits published
    conflict_copies: list[str] = field(default_factory=list)
    offline: bool = False
    reason: str = ""  # why the remote could not be reached
    ahead: int = 0  # local commits still unpublished (offline)
    head: str = ""

    def line(self) -> str:
        target = f"{self.remote}/{self.branch}"
        parts = [f"committed {c.subject.removeprefix('osk sync: ')} ({c.sha[:8]})"
                 for c in self.commits]
        if self.offline:
            waiting = f"{self.ahead} commit(s) wait to be pushed" if self.ahead else "nothing waits"
            done = "; ".join(parts) or "nothing new to commit"
            return (f"Offline: {self.remote} is unreachable ({self.reason}). "
                    f"{done[:1].upper()}{done[1:]} locally; {waiting}; "
                    f"run `osk sync` again when the remote is reachable.")
        if self.pulled:
            parts.append(f"pulled {self.pulled} commit(s)")
        if self.pushed:
            parts.append(f"pushed {self.pushed} commit(s)")
        if self.conflict_copies:
            parts.append(f"kept {len(self.conflict_copies)} conflict copy(ies): "
                         f"{', '.join(self.conflict_copies)} (merge by hand, then delete)")
        if not parts:
            return f"Already in sync with {target} ({self.head[:8]})."
        return f"Synced with {target} ({self.head[:8]}): " + "; ".join(parts) + "."

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class SyncStatus:
    remote: str
    branch: str
    tracked: bool  # the remote branch has been fetched at least once
    ahead: int
    behind: int
    pending: int  # uncommitted local changes
    last_sync: str | None
    last_fetch: str | None
    offline_since: str | None
    reason: str | None
    failed_at: str | None  # the last cycle that stopped with an error, if none succeeded since
    error: str | None
    conflict_copies: int
    blocked: str | None

    def line(self) -> str:
        target = f"{self.remote}/{self.branch}"
        if self.tracked:
            seen = f" (as of {self.last_fetch})" if self.last_fetch else ""
            parts = [f"{self.branch}: {self.ahead} ahead, {self.behind} behind {target}{seen}"]
        else:
            parts = [f"{self.branch}: {target} not fetched yet"]
        parts.append(f"{self.pending} local change(s) pending")
        parts.append(f"last synced {self.last_sync}" if self.last_sync else "never synced")
        if self.blocked:
            parts.append(f"blocked: {self.blocked}")
        elif self.offline_since:
            parts.append(f"offline since {self.offline_since} ({self.reason})")
        else:
            parts.append("online")
        if self.failed_at:
            parts.append(f"last attempt failed at {self.failed_at}: {self.error}")
        if self.conflict_copies:
            parts.append(f"{self.conflict_copies} conflict copy(ies) to merge by hand")
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class _Unreachable(Exception):
    """The remote could not be reached; the message is git's first error line."""


# What git, ssh and HTTPS remotes print when the remote was reached and refused us: waiting
# will not help, the person has to fix a key, a token or a URL. Anything else that fails to
# reach the remote (no route, no DNS, a drive not mounted) is treated as offline.
_ACCESS_REFUSED = (
    "permission denied", "authentication failed", "could not read username",
    "could not read password", "host key verification failed", "repository not found",
    "returned error: 401", "returned error: 403", "access denied",
)  # not "access rights": git adds that hint to every ssh failure, an unknown host included


# -- path kinds -----------------------------------------------------------------------------
def _is_ledger(rel: str) -> bool:
    parts = PurePosixPath(rel).parts
    return len(parts) == 2 and parts[0] == LEDGER_DIR and rel.endswith(".jsonl")


def _is_raw(rel: str) -> bool:
    return PurePosixPath(rel).parts[:1] == (RAW_DIR,)


def _append_only(rel: str) -> bool:
    return _is_ledger(rel) or _is_raw(rel)


def _is_temp(rel: str) -> bool:
    return is_temp_name(PurePosixPath(rel).name)


def _status_paths(repo: GitRepo, *pathspec: str) -> list[tuple[str, str]]:
    """(XY, path) for every changed or untracked file; ignored files and device state left out."""
    fields = repo.run("status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames",
                      "--", *(pathspec or (".",)), f":(exclude){STATE_DIR}").out.split("\0")
    return [(item[:2], item[3:]) for item in fields if len(item) > 3]


def _identity(repo: GitRepo, vault: Vault) -> list[str]:
    """A committer identity for machines that have none configured (sync must not stop)."""
    if repo.run("config", "user.email", check=False).out.strip():
        return []
    return ["user.name=osk sync", f"user.email=osk-{device_id(vault)}@localhost"]


# -- state ----------------------------------------------------------------------------------
@dataclass
class _State:
    last_sync: str | None = None
    last_fetch: str | None = None
    offline_since: str | None = None
    reason: str | None = None
    failed_at: str | None = None
    error: str | None = None

    @staticmethod
    def path(vault: Vault) -> Path:
        return vault.state("sync", "state.json")

    @classmethod
    def load(cls, vault: Vault) -> _State:
        try:
            data = json.loads(cls.path(vault).read_text(encoding="utf-8"))
            return cls(**{k: data.get(k) for k in cls.__dataclass_fields__})
        except (FileNotFoundError, ValueError, TypeError):
            return cls()

    def save(self, vault: Vault) -> None:
        atomic_write(self.path(vault), json.dumps(asdict(self), indent=1) + "\n")


# -- the cycle ------------------------------------------------------------------------------
@dataclass
class _Cycle:
    vault: Vault
    repo: GitRepo
    remote: str
    branch: str
    checkpoint: Checkpoint | None
    device: str
    result: SyncResult

    @property
    def tracking(self) -> str:
        return f"refs/remotes/{self.remote}/{self.branch}"

    def mark(self, name: str) -> None:
        if self.checkpoint is not None:
            self.checkpoint(name)
        _pause_for_tests(name)

    def head(self) -> str:
        head = self.repo.sha("HEAD")
        if head is None:
            raise SyncError(f"{self.vault.root} has no commit yet; create the vault with "
                            f"`osk init` or clone an existing one")
        return head


def sync_once(vault: Vault, *, remote: str = DEFAULT_REMOTE, push_attempts: int = PUSH_ATTEMPTS,
              checkpoint: Checkpoint | None = None) -> SyncResult:
    """Run one cycle: commit, fetch, rebase, land, push. See the module docstring."""
    with _locked(vault.lock_path("sync"), SYNC_LOCK_TIMEOUT,
                 "another `osk sync` is running for this vault"):
        marker = vault.state("sync", "cycle.json")
        interrupted = marker.exists()
        atomic_write(marker, json.dumps({"pid": os.getpid(), "at": clock.now_text()}) + "\n")
        try:
            return _run_cycle(vault, remote, push_attempts, checkpoint, interrupted)
        except SyncError as exc:
            state = _State.load(vault)
            state.failed_at, state.error = clock.now_text(), str(exc).split("; ")[0]
            state.save(vault)
            raise
        finally:
            marker.unlink(missing_ok=True)


def _run_cycle(vault: Vault, remote: str, attempts: int, checkpoint: Checkpoint | None,
               interrupted: bool) -> SyncResult:
    state = _State.load(vault)
    with open_repo(vault.root) as repo:
        repo.config = _identity(repo, vault)
        branch = _current_branch(repo, remote)
        cycle = _Cycle(vault, repo, remote, branch, checkpoint, device_id(vault),
                       SyncResult(remote, branch))
        _refuse_foreign_operations(repo)
        _clear_stale_git_locks(cycle, interrupted)
        with _mutation(vault):
            _recover_landing(cycle)
            _commit_into(cycle)
        cycle.mark("committed")
        for _attempt in range(attempts):
            try:
                upstream = _fetch(cycle)
            except _Unreachable as exc:
                return _offline(cycle, state, str(exc))
            state.last_fetch = clock.now_text()
            cycle.mark("fetched")
            with _mutation(vault):
                _commit_into(cycle)
                if upstream is not None and not repo.is_ancestor(upstream, cycle.head()):
                    _integrate(cycle, upstream)
            head = cycle.head()
            if head == upstream:
                break
            ahead = repo.count(f"{upstream}..{head}") if upstream else repo.count(head)
            try:
                pushed = _push(cycle, head)
            except _Unreachable as exc:
                return _offline(cycle, state, str(exc))
            if pushed:
                cycle.result.pushed += ahead
                cycle.mark("pushed")
                break
        else:
            raise SyncError(
                f"{remote} rejected the push {attempts} times (other devices kept pushing); "
                f"every commit is kept locally; run `osk sync` again"
            )
        cycle.result.head = cycle.head()
        state.last_sync, state.offline_since, state.reason = clock.now_text(), None, None
        state.failed_at = state.error = None
        state.save(vault)
        return cycle.result


def _offline(cycle: _Cycle, state: _State, reason: str) -> SyncResult:
    result = cycle.result
    result.offline, result.reason = True, reason
    result.head = cycle.head()
    upstream = cycle.repo.sha(cycle.tracking)
    result.ahead = cycle.repo.count(f"{upstream}..HEAD" if upstream else "HEAD")
    state.offline_since = state.offline_since or clock.now_text()
    state.reason = reason
    state.failed_at = state.error = None
    state.save(cycle.vault)
    return result


def _current_branch(repo: GitRepo, remote: str) -> str:
    result = repo.run("symbolic-ref", "-q", "--short", "HEAD", check=False)
    if result.status != 0:
        raise SyncError(f"{repo.root} is not on a branch (detached HEAD); check out the vault's "
                        f"branch (e.g. `git -C {repo.root} switch main`) and sync again")
    if repo.run("remote", "get-url", remote, check=False).status != 0:
        raise SyncError(f"the vault has no git remote {remote!r}; add one with "
                        f"`git -C {repo.root} remote add {remote} URL`", remote=remote)
    return result.out.strip()


@contextmanager
def _locked(path: Path, timeout: float, what: str) -> Iterator[None]:
    try:
        with file_lock(path, timeout=timeout):
            yield
    except LockTimeout as exc:
        raise _busy(path, timeout, what) from exc


@contextmanager
def _mutation(vault: Vault) -> Iterator[None]:
    """The vault mutation lock; a landing moves the generation, so readers look again."""
    try:
        with mutation.mutation(vault, timeout=MUTATION_TIMEOUT):
            yield
    except LockTimeout as exc:
        raise _busy(vault.mutation_lock_path(), MUTATION_TIMEOUT,
                    "another osk process is writing the vault") from exc


def _busy(path: Path, timeout: float, what: str) -> SyncError:
    return SyncError(f"{what} (lock {path} still held after {timeout:.0f} s); try again later")


def _pause_for_tests(name: str) -> None:
    """Crash tests set these variables to hold a real process still where they will kill it."""
    if os.environ.get("OSK_SYNC_PAUSE_AT") != name:
        return
    signal_file = os.environ.get("OSK_SYNC_PAUSE_FILE")
    if signal_file:
        Path(signal_file).write_text(f"{os.getpid()} {name}\n", encoding="utf-8")
    time.sleep(float(os.environ.get("OSK_SYNC_PAUSE_SECONDS", "120")))


# -- recovery -------------------------------------------------------------------------------
def _refuse_foreign_operations(repo: GitRepo) -> None:
    """osk never merges or rebases in the vault itself, so one in progress is a person's."""
    git_dir = repo.git_dir
    states = {"rebase-merge": "a rebase", "rebase-apply": "a rebase or `git am`",
              "MERGE_HEAD": "a merge", "CHERRY_PICK_HEAD": "a cherry-pick",
              "REVERT_HEAD": "a revert"}
    for name, what in states.items():
        if (git_dir / name).exists():
            raise SyncError(
                f"{what} started outside osk is in progress in {repo.root}; finish it "
                f"(resolve, then `git {_verb(name)} --continue`) or abort it "
                f"(`git {_verb(name)} --abort`), then sync again", state=name)
    if repo.run("ls-files", "-u", "-z").out:
        raise SyncError(f"{repo.root} has unmerged files from a merge made by hand; "
                        f"resolve them (git add/rm) and sync again")


def _verb(state: str) -> str:
    return {"MERGE_HEAD": "merge", "CHERRY_PICK_HEAD": "cherry-pick",
            "REVERT_HEAD": "revert"}.get(state, "rebase")


def _clear_stale_git_locks(cycle: _Cycle, interrupted: bool) -> None:
    """Remove git lock files a killed cycle left behind; wait for any a live command holds."""
    git_dir = cycle.repo.git_dir
    candidates = [git_dir / "index.lock", git_dir / "HEAD.lock", git_dir / "packed-refs.lock",
                  git_dir / f"refs/heads/{cycle.branch}.lock",
                  git_dir / f"{cycle.tracking}.lock", git_dir / "refs/osk/sync-result.lock"]
    for lock in candidates:
        deadline = time.monotonic() + STALE_LOCK_WAIT
        while lock.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        if not lock.exists():
            continue
        try:
            age = time.time() - lock.stat().st_mtime
        except FileNotFoundError:
            continue
        if interrupted or age > 600:
            lock.unlink(missing_ok=True)
            continue
        raise SyncError(f"{lock} exists: another git command is using the vault's repository. "
                        f"If none is running, delete that file and sync again")


def _recover_landing(cycle: _Cycle) -> None:
    """Finish a landing a killed cycle started (see ``_land``)."""
    journal = _journal_path(cycle.vault)
    if _scratch_path(cycle.vault).exists() and not journal.exists():
        _drop_scratch(cycle)  # a cycle killed before or after its landing: nothing to finish
    try:
        data = json.loads(journal.read_text(encoding="utf-8"))
        old, new = str(data["from"]), str(data["to"])
    except FileNotFoundError:
        return
    except (ValueError, KeyError, TypeError):
        journal.unlink(missing_ok=True)
        return
    head = cycle.head()
    if head == old and cycle.repo.sha(new) == new:
        _land(cycle, old, new)
    elif head == new:
        cycle.repo.run("reset", "-q", new)
    journal.unlink(missing_ok=True)
    _drop_scratch(cycle)


def _journal_path(vault: Vault) -> Path:
    return vault.state("sync", "landing.json")


# -- commit ---------------------------------------------------------------------------------
def _commit_into(cycle: _Cycle) -> None:
    summary = _commit_changes(cycle.vault, cycle.repo, cycle.device)
    if summary is not None:
        cycle.result.commits.append(summary)


def _commit_changes(vault: Vault, repo: GitRepo, device: str) -> CommitSummary | None:
    """Stage and commit the vault's changes; None when nothing changed. Caller holds the lock."""
    # Naming an ignored folder, even to exclude it, makes `git add` fail: exclude .osk/ only
    # when .gitignore does not already keep it out.
    ignored = repo.run("check-ignore", "-q", f"{STATE_DIR}/", check=False).status == 0
    keep_out = [] if ignored else [f":(exclude){STATE_DIR}"]
    repo.run("add", "-A", "--", ".", *keep_out, ":(exclude,glob)**/.*.tmp",
             f":(exclude){LEDGER_DIR}", f":(exclude){RAW_DIR}")
    _stage_complete_lines(vault, repo)
    if repo.run("ls-files", "-z", "--", STATE_DIR).out:
        repo.run("rm", "-r", "-q", "--cached", "--", STATE_DIR)  # device state is never synced
    head = repo.sha("HEAD") or _EMPTY_TREE
    links = _links(_raw_entries(split_z(repo.run("diff", "--cached", "--raw", "--no-abbrev",
                                                 "-z", "--no-renames", head).out)))
    if links:
        repo.run("reset", "-q")  # unstage: nothing of this cycle is committed
        raise SyncError(
            f"the vault holds symbolic link(s) {_listing(links)}; osk never commits one (a "
            f"link can lead another device's reads and writes out of its vault). Replace each "
            f"with the real file or folder, or remove it, and sync again")
    names = split_z(repo.run("diff", "--cached", "-z", "--name-status", "-M", head).out)
    if not names:
        return None
    numstat = repo.run("diff", "--cached", "-z", "--numstat", "--no-renames", head, "--",
                       LEDGER_DIR, RAW_DIR).out
    summary = _summarise(names, numstat)
    message = _message(summary, device)
    # --no-verify: a pre-commit hook meant for code must not stall a background sync forever.
    repo.run("commit", "-q", "--no-verify", "-m", message)
    sha = repo.sha("HEAD") or ""
    return CommitSummary(sha=sha, subject=message.splitlines()[0], **summary)


def _stage_complete_lines(vault: Vault, repo: GitRepo) -> None:
    """Stage ledgers and raw records up to their last newline: a torn append waits a cycle."""
    whole: list[str] = []
    for code, rel in _status_paths(repo, LEDGER_DIR, RAW_DIR):
        if _is_temp(rel):
            continue
        path = vault.abs(rel)
        if not path.is_file():
            if code[1] == "D" or code[0] == "D":
                repo.run("rm", "-q", "--cached", "--ignore-unmatch", "--", literal(rel))
            continue
        data = path.read_bytes()
        complete = data[: data.rfind(b"\n") + 1]
        if complete == data:
            whole.append(rel)
        elif complete:
            mode = "100755" if os.access(path, os.X_OK) else "100644"
            repo.set_entry(rel, mode, repo.store(complete))
    for start in range(0, len(whole), 200):  # stay far below the command-line length limit
        repo.run("add", "--", *map(literal, whole[start:start + 200]))


def _summarise(names: list[str], numstat: str) -> dict[str, Any]:
    added, changed, removed, copies, other = [], [], [], [], []
    moved: list[tuple[str, str]] = []
    index = 0
    while index < len(names):
        code = names[index]
        if code[0] in "RC":
            source, target = names[index + 1], names[index + 2]
            index += 3
            if is_node_path(source) and is_node_path(target) and code[0] == "R":
                moved.append((_title(source), _title(target)))
            elif not (_append_only(target) or is_conflict_copy(target)):
                other.append(target)
            continue
        rel = names[index + 1]
        index += 2
        if is_conflict_copy(rel):
            copies.append(rel)
        elif is_node_path(rel):
            {"A": added, "D": removed}.get(code[0], changed).append(_title(rel))
        elif not _append_only(rel):
            other.append(rel)
    ledgers, raw = [], []
    for entry in split_z(numstat):
        count, _deleted, rel = entry.split("\t", 2)
        lines = int(count) if count.isdigit() else 0
        if _is_ledger(rel):
            ledgers.append((PurePosixPath(rel).stem, lines))
        elif _is_raw(rel) and not is_conflict_copy(rel):
            raw.append((str(PurePosixPath(rel).relative_to(RAW_DIR).with_suffix("")), lines))
    return {"nodes_added": tuple(added), "nodes_changed": tuple(changed),
            "nodes_removed": tuple(removed), "nodes_moved": tuple(moved),
            "ledgers": tuple(ledgers), "raw": tuple(raw), "conflict_copies": tuple(copies),
            "other": tuple(other)}


def _title(rel: str) -> str:
    return PurePosixPath(rel).stem


def _message(summary: dict[str, Any], device: str) -> str:
    counts, body = [], []
    node_kinds = (("added", "nodes_added"), ("changed", "nodes_changed"),
                  ("removed", "nodes_removed"))
    node_parts = [f"{len(summary[key])} {word}" for word, key in node_kinds if summary[key]]
    if summary["nodes_moved"]:
        node_parts.append(f"{len(summary['nodes_moved'])} moved")
    if node_parts:
        counts.append("nodes: " + ", ".join(node_parts))
    for word, key in node_kinds:
        if summary[key]:
            body.append(f"Nodes {word}: {_listing(summary[key])}")
    if summary["nodes_moved"]:
        body.append("Nodes moved: " + _listing([f"{a} -> {b}" for a, b in summary["nodes_moved"]]))
    if summary["ledgers"]:
        total = sum(n for _, n in summary["ledgers"])
        counts.append(f"{total} ledger line(s)")
        body.append("Ledgers appended: " + _listing([f"{n} +{c}" for n, c in summary["ledgers"]]))
    if summary["raw"]:
        counts.append(f"{len(summary['raw'])} raw record(s) grown")
        body.append("Raw records grown: "
                    + _listing([f"{n} +{c} lines" for n, c in summary["raw"]]))
    if summary["conflict_copies"]:
        counts.append(f"{len(summary['conflict_copies'])} conflict copy(ies)")
        body.append("Conflict copies: " + _listing(summary["conflict_copies"]))
    if summary["other"]:
        counts.append(f"{len(summary['other'])} other file(s)")
        body.append("Other files: " + _listing(summary["other"]))
    subject = "osk sync: " + ("; ".join(counts) or "vault changes")
    return "\n".join([subject, "", *body, f"Device: {device}"]) + "\n"


def _listing(items: Iterable[str]) -> str:
    values = list(items)
    shown = ", ".join(values[:_NAMES_SHOWN])
    more = len(values) - _NAMES_SHOWN
    return shown + (f" and {more} more" if more > 0 else "")


# -- fetch and push -------------------------------------------------------------------------
def _fetch(cycle: _Cycle) -> str | None:
    """Update the remote-tracking ref; None when the remote has no such branch yet."""
    result = cycle.repo.run("fetch", "-q", "--no-tags", cycle.remote,
                            f"+refs/heads/{cycle.branch}:{cycle.tracking}",
                            check=False, timeout=NETWORK_TIMEOUT)
    if result.status != 0:
        if "couldn't find remote ref" in result.err:
            return None
        _raise_unless_reached(cycle, result)
    return cycle.repo.sha(cycle.tracking)


def _push(cycle: _Cycle, head: str) -> bool:
    """True when published; False when the remote moved on first (fetch and retry)."""
    result = cycle.repo.run("push", "--porcelain", cycle.remote,
                            f"{head}:refs/heads/{cycle.branch}", check=False,
                            timeout=NETWORK_TIMEOUT)
    if result.status == 0:
        cycle.repo.run("update-ref", cycle.tracking, head)
        return True
    text = result.out + result.err
    if "[remote rejected]" in text:
        raise SyncError(f"{cycle.remote} refused the push: {_first_error(result)}; "
                        f"every commit is kept locally")
    if "[rejected]" in text:
        return False
    _raise_unless_reached(cycle, result)


def _raise_unless_reached(cycle: _Cycle, result: GitRun) -> NoReturn:
    """Raise SyncError when the remote refused our credentials, else _Unreachable."""
    lines = [line.strip() for line in (result.err + result.out).splitlines() if line.strip()]
    refused = [line for line in lines if any(sign in line.lower() for sign in _ACCESS_REFUSED)]
    if refused:
        raise SyncError(
            f"{cycle.remote} refused access ({refused[0][:300]}); the remote was reached, so "
            f"this is not a network outage. Check the key, token or credential helper git "
            f"uses for {cycle.remote} (`git -C {cycle.vault.root} fetch {cycle.remote}` shows "
            f"the same error); every commit is kept locally",
            remote=cycle.remote,
        )
    raise _Unreachable(_first_error(result))


def _first_error(result: GitRun) -> str:
    lines = [line.strip() for line in (result.err + result.out).splitlines() if line.strip()]
    wanted = [line for line in lines if line.startswith(("fatal", "error", "!"))]
    return (wanted or lines or ["git gave no reason"])[0][:300]


# -- integrate: rebase in a scratch clone, then land ---------------------------------------
def _integrate(cycle: _Cycle, upstream: str) -> None:
    repo, local = cycle.repo, cycle.head()
    cycle.result.pulled += repo.count(f"{local}..{upstream}")
    if repo.is_ancestor(local, upstream):
        _land(cycle, local, upstream)
        return
    if repo.run("merge-base", local, upstream, check=False).status != 0:
        raise SyncError(
            f"{cycle.remote}/{cycle.branch} shares no history with this vault (was the vault "
            f"created twice?); clone the remote into a new folder and move your notes there")
    rebased = _rebase_in_scratch(cycle, local, upstream)
    cycle.mark("rebased")
    _land(cycle, local, rebased)
    _drop_scratch(cycle)


def _scratch_path(vault: Vault) -> Path:
    return vault.state("sync", "scratch")


def _drop_scratch(cycle: _Cycle) -> None:
    cycle.repo.run("update-ref", "-d", "refs/osk/sync-result", check=False)
    shutil.rmtree(_scratch_path(cycle.vault), ignore_errors=True)


def _rebase_in_scratch(cycle: _Cycle, local: str, upstream: str) -> str:
    scratch = _scratch_path(cycle.vault)
    shutil.rmtree(scratch, ignore_errors=True)  # a killed cycle's leftovers are simply redone
    scratch.parent.mkdir(parents=True, exist_ok=True)
    cycle.repo.run("clone", "-q", "--shared", "--no-checkout", "--no-tags",
                   str(cycle.vault.root), str(scratch))
    hooks = scratch / ".git" / "osk-no-hooks"
    hooks.mkdir(exist_ok=True)
    config = [*cycle.repo.config, *_SCRATCH_CONFIG, f"core.hooksPath={hooks}"]
    with open_repo(scratch, config) as work:
        work.run("sparse-checkout", "set", "--cone", check=False)  # top-level files only
        work.run("checkout", "-q", "--detach", local)
        started = work.run("rebase", "--merge", upstream, check=False)
        limit = work.count(f"{upstream}..{local}") + 2
        while (work.git_dir / "rebase-merge").exists():
            limit -= 1
            if limit < 0:
                raise SyncError(f"the rebase in {scratch} did not finish; sync again")
            cycle.mark("rebase-stopped")
            _resolve_step(cycle, work, started)
            action = "--continue" if _index_differs(work) else "--skip"
            started = work.run("rebase", action, check=False)
        if started.status != 0:
            raise SyncError(f"rebasing onto {cycle.remote}/{cycle.branch} failed: "
                            f"{_first_error(started)}")
        _dedupe_ledgers(cycle, work, upstream)
        rebased = work.sha("HEAD")
        assert rebased is not None
        work.run("update-ref", "refs/osk/result", rebased)
    cycle.repo.run("fetch", "-q", "--no-tags", str(scratch),
                   "+refs/osk/result:refs/osk/sync-result")
    return rebased


def _index_differs(work: GitRepo) -> bool:
    return work.run("diff", "--cached", "--quiet", "HEAD", check=False).status != 0


def _resolve_step(cycle: _Cycle, work: GitRepo, started: GitRun) -> None:
    """Resolve every unmerged path of the stopped step; never leave conflict markers."""
    stages: dict[str, dict[int, tuple[str, str]]] = {}
    for entry in split_z(work.run("ls-files", "-u", "-z").out):
        info, rel = entry.split("\t", 1)
        mode, sha, stage = info.split()
        stages.setdefault(rel, {})[int(stage)] = (mode, sha)
    if not stages:
        raise SyncError(f"the rebase stopped without a conflict: {_first_error(started)}")
    notes = []
    for rel, entry in sorted(stages.items()):
        notes.extend(_resolve_path(cycle, work, rel, entry.get(2), entry.get(3)))
    message = work.git_dir / "rebase-merge" / "message"
    if notes and message.exists():
        with message.open("a", encoding="utf-8") as handle:
            handle.write("\nSync conflicts (both versions kept):\n"
                         + "".join(f"- {note}\n" for note in notes))


def _resolve_path(cycle: _Cycle, work: GitRepo, rel: str, ours: tuple[str, str] | None,
                  theirs: tuple[str, str] | None) -> list[str]:
    # In a rebase "ours" is the remote's version and "theirs" is the local commit's.
    if ours and theirs and _is_ledger(rel):
        merged = _union(work.blob(ours[1]), work.blob(theirs[1]))
        _put(work, rel, ours[0], work.store(merged))
        return [f"{rel}: lines of both kept"]
    if ours and theirs and ours[1] == theirs[1]:
        _put(work, rel, *ours)
        return []
    if ours:
        _put(work, rel, *ours)
        if not theirs:
            return [f"{rel}: deleted here, edited on another device; the edit is kept"]
    else:
        if theirs and _append_only(rel):
            _put(work, rel, *theirs)  # never drop lines of an append-only file
            return [f"{rel}: deleted on another device, grown here; kept"]
        work.run("update-index", "--force-remove", "--", rel)
        (work.root / rel).unlink(missing_ok=True)
    if not theirs:
        return []
    copy = copy_name(rel, cycle.device, lambda name: _tracked(work, name))
    _put(work, copy, theirs[0], work.store(copy_content(rel, work.blob(theirs[1]))))
    cycle.result.conflict_copies.append(copy)
    return [f"{rel}: this device's version is in {copy}"]


def _put(work: GitRepo, rel: str, mode: str, sha: str) -> None:
    """Resolve ``rel`` in the index and the worktree (rebase --continue checks both)."""
    work.set_entry(rel, mode, sha)
    work.run("checkout-index", "-f", "--", rel)


def _tracked(work: GitRepo, rel: str) -> bool:
    return bool(work.run("ls-files", "-z", "--", literal(rel)).out) or (work.root / rel).exists()


def _union(ours: bytes, theirs: bytes) -> bytes:
    """Lines of both sides, ours first, each distinct line once (what union would have kept)."""
    lines: list[bytes] = []
    seen: set[bytes] = set()
    for line in (*ours.splitlines(keepends=True), *theirs.splitlines(keepends=True)):
        line = line if line.endswith(b"\n") else line + b"\n"
        if line not in seen:
            seen.add(line)
            lines.append(line)
    return b"".join(lines)


def _dedupe_ledgers(cycle: _Cycle, work: GitRepo, upstream: str) -> None:
    """A union merge can repeat a line both sides added; a ledger line must appear once."""
    changed = split_z(work.run("diff", "-z", "--name-only", upstream, "HEAD", "--",
                                LEDGER_DIR).out)
    fixed = 0
    for rel in changed:
        entry = work.run("ls-tree", "-z", "HEAD", "--", rel).out.split("\0")[0]
        if not entry:
            continue
        mode, _kind, rest = entry.split(" ", 2)
        data = work.blob(rest.split("\t", 1)[0])
        unique = _union(data, b"")
        if unique != data:
            fixed += data.count(b"\n") - unique.count(b"\n")
            _put(work, rel, mode, work.store(unique))
    if fixed:
        work.run("commit", "-q", "--no-verify", "-m",
                 f"osk sync: removed {fixed} repeated ledger line(s) left by a merge\n\n"
                 f"Device: {cycle.device}\n")


# -- landing: move the vault's working tree from one commit to another ----------------------
def _land(cycle: _Cycle, old: str, new: str) -> None:
    """Bring the working tree from ``old`` to ``new`` without losing anything written since.

    Journalled: a killed landing is finished by ``_recover_landing``. Caller holds the lock.
    """
    repo = cycle.repo
    entries = _raw_entries(
        split_z(repo.run("diff", "--raw", "--no-abbrev", "-z", "--no-renames", old, new).out))
    links = _links(entries)
    if links:
        raise SyncError(
            f"{cycle.remote}/{cycle.branch} brings symbolic link(s) {_listing(links)}; osk "
            f"refuses to land a commit that adds one (a link can lead reads and writes out of "
            f"the vault), and nothing here changed. Remove the links on the device that added "
            f"them, push, and sync again")
    journal = _journal_path(cycle.vault)
    atomic_write(journal, json.dumps({"from": old, "to": new}) + "\n")
    first = True
    for new_mode, old_sha, new_sha, rel in entries:
        _land_file(cycle, rel, old_sha, new_sha, new_mode)
        if first:
            cycle.mark("landing")
            first = False
    repo.run("update-ref", "-m", "osk sync", f"refs/heads/{cycle.branch}", new, old)
    repo.run("reset", "-q", new)  # the index follows; the working tree is already there
    journal.unlink(missing_ok=True)
    cycle.mark("landed")
    _commit_into(cycle)  # copies of files edited during the cycle


def _raw_entries(raw: list[str]) -> list[tuple[str, str, str, str]]:
    """A ``git diff --raw -z`` listing as (new mode, old sha, new sha, path) per file."""
    entries = []
    for meta, rel in zip(raw[0::2], raw[1::2], strict=True):
        _old_mode, new_mode, old_sha, new_sha, _code = meta.lstrip(":").split(" ")
        entries.append((new_mode, old_sha, new_sha, rel))
    return entries


def _links(entries: list[tuple[str, str, str, str]]) -> list[str]:
    """The paths a diff makes into symbolic links (mode 120000)."""
    return [rel for mode, _old_sha, _new_sha, rel in entries if mode == "120000"]


def _land_file(cycle: _Cycle, rel: str, old_sha: str, new_sha: str, new_mode: str) -> None:
    repo, vault = cycle.repo, cycle.vault
    lock = _append_lock(vault, rel)
    with _locked(lock, 60.0, f"an append to {rel} is stuck") if lock else _nothing():
        path = vault.abs(rel)
        old = repo.blob(old_sha) if old_sha != _ZERO else None
        new = repo.blob(new_sha) if new_sha != _ZERO else None
        current = _read_current(path)
        if current == new or new_mode == "160000":
            return
        if current == old:
            _write(vault, rel, new, new_mode)
            return
        if current is not None and _append_only(rel):
            if new is not None and current.startswith(new):
                return  # landed before a crash, then appended to
            if old is not None and current.startswith(old):
                tail = current[len(old):]
                _write(vault, rel, (new + tail) if new is not None else current, new_mode)
                return
            if old is None and new is not None and _is_ledger(rel):
                _write(vault, rel, _union(new, current), new_mode)
                return
        if current is not None:  # changed here while the cycle ran: keep it beside the node
            copy = copy_name(rel, cycle.device, lambda name: vault.abs(name).exists())
            _write(vault, copy, copy_content(rel, current), "100644")
            cycle.result.conflict_copies.append(copy)
        _write(vault, rel, new, new_mode)


def _append_lock(vault: Vault, rel: str) -> Path | None:
    """The lock an append to ``rel`` takes (a ledger or a raw record), held while it lands so
    the append cannot interleave with the rewrite; None for files nobody appends to."""
    if _is_ledger(rel):
        return vault.lock_path(f"ledger-{PurePosixPath(rel).stem}")
    if _is_raw(rel) and rel.endswith(".md") and not is_conflict_copy(rel):
        from osk.capture import raw

        try:
            return raw.lock_path(vault, rel)
        except RawRecordError:
            return None  # not a record file (_raw/README.md, say): nothing appends to it
    return None


def _read_current(path: Path) -> bytes | None:
    if path.is_symlink():  # git stores a link as its target's path
        return os.readlink(path).encode("utf-8")
    return path.read_bytes() if path.is_file() else None


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def _write(vault: Vault, rel: str, data: bytes | None, mode: str) -> None:
    path = vault.abs(rel)
    if data is None:
        path.unlink(missing_ok=True)
        _prune_empty_dirs(vault, path.parent)
        return
    vault.write_file(path, data)  # never a link: _land refuses a commit that brings one
    path.chmod(0o755 if mode == "100755" else 0o644)  # what a git checkout would leave


def _prune_empty_dirs(vault: Vault, directory: Path) -> None:
    root = vault.root.resolve()
    while directory.resolve() != root and directory.parent.resolve() != root:
        try:
            directory.rmdir()
        except OSError:
            return
        directory = directory.parent


# -- status ---------------------------------------------------------------------------------
def status(vault: Vault, *, remote: str = DEFAULT_REMOTE) -> SyncStatus:
    """Where the vault stands, from local refs and the saved state (no network)."""
    state = _State.load(vault)
    with open_repo(vault.root) as repo:
        branch = _current_branch(repo, remote)
        tracking = f"refs/remotes/{remote}/{branch}"
        upstream = repo.sha(tracking)
        ahead = behind = 0
        if upstream:
            counts = repo.run("rev-list", "--left-right", "--count",
                              f"HEAD...{upstream}").out.split()
            ahead, behind = int(counts[0]), int(counts[1])
        else:
            ahead = repo.count("HEAD")
        pending = sum(1 for _code, rel in _status_paths(repo) if not _is_temp(rel))
        blocked = None
        try:
            _refuse_foreign_operations(repo)
        except SyncError as exc:
            blocked = str(exc).split(";")[0]
    return SyncStatus(remote, branch, upstream is not None, ahead, behind, pending,
                      state.last_sync, state.last_fetch, state.offline_since, state.reason,
                      state.failed_at, state.error, len(conflict_copies(vault)), blocked)


# -- daemon ---------------------------------------------------------------------------------
def fingerprint(vault: Vault, *, committed_only: bool = False) -> str:
    """A cheap digest of the uncommitted changes: it moves whenever a file is written.

    ``committed_only`` gives the digest the vault would have with nothing left to commit.
    """
    with open_repo(vault.root) as repo:
        digest = hashlib.sha256((repo.sha("HEAD") or "").encode())
        for code, rel in [] if committed_only else _status_paths(repo):
            try:
                stat = vault.abs(rel).stat()
                stamp = f"{stat.st_size}:{stat.st_mtime_ns}"
            except (OSError, OskError):  # gone, or a link out of the vault (never followed)
                stamp = "-"
            digest.update(f"{code}\0{rel}\0{stamp}\0".encode())
    return digest.hexdigest()


def daemon(vault: Vault, *, interval: float = 300.0, poll: float = 5.0,
           max_cycles: int | None = None, remote: str = DEFAULT_REMOTE,
           stop: threading.Event | None = None,
           report: Callable[[str], None] = lambda line: None) -> int:
    """Sync every ``interval`` seconds, and soon after the vault changes; return cycles run.

    A change triggers a cycle once the vault has been quiet for one ``poll`` period, so a burst
    of writes makes one commit. Errors are reported and retried next time, never fatal.
    ``stop`` ends the loop between cycles (the CLI sets it on SIGTERM/SIGINT).
    """
    stop = stop or threading.Event()
    cycles, due = 0, 0.0
    synced_print = previous = ""
    while not stop.is_set() and (max_cycles is None or cycles < max_cycles):
        current = _safe_fingerprint(vault)
        changed = current != synced_print and current == previous
        if time.monotonic() >= due or changed:
            report(_one_cycle(vault, remote))
            cycles += 1
            due = time.monotonic() + interval
            # What a cycle leaves synced is the committed state: a write that landed after the
            # commit still shows as a change, and triggers the next cycle once quiet.
            synced_print = _safe_fingerprint(vault, committed_only=True)
            previous = _safe_fingerprint(vault)
            continue
        previous = current
        stop.wait(max(0.0, min(poll, due - time.monotonic())))
    return cycles


def _one_cycle(vault: Vault, remote: str) -> str:
    stamp = clock.now_text()
    try:
        return f"{stamp} {sync_once(vault, remote=remote).line()}"
    except OskError as exc:
        return f"{stamp} Error: {exc}"


def _safe_fingerprint(vault: Vault, *, committed_only: bool = False) -> str:
    try:
        return fingerprint(vault, committed_only=committed_only)
    except SyncError as exc:
        return f"error:{exc}"
