"""What every step of a sync cycle shares: its results (``SyncResult``, ``SyncStatus``), the kinds
of path a vault holds (ledgers and raw records only grow; temp files are never staged), the
device state a cycle keeps, the cycle's own record, the locks it takes, and the union of two
versions of an append-only file.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from osk.errors import SyncError
from osk.store.fsutil import atomic_write, is_temp_name
from osk.store.ledger import device_id
from osk.store.locks import LockTimeout, file_lock
from osk.store.vault import LEDGER_DIR, RAW_DIR, STATE_DIR, Vault
from osk.sync.gitrepo import GitRepo, split_z

ZERO = "0" * 40


EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


NAMES_SHOWN = 12


# The scratch rebase must not be steered by the person's global rebase settings or hooks.
SCRATCH_CONFIG = ("rebase.autoStash=false", "rebase.autoSquash=false", "rebase.updateRefs=false",
                  "rebase.backend=merge", "advice.detachedHead=false", "gc.auto=0")


NETWORK_TIMEOUT = 120.0


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
    notices: list[str] = field(default_factory=list)  # landed, but a person should look
    # files the landing rewrote that the index reads: nodes, ledgers (not raw); reported
    # (whether the index owes a catch-up is the landing's note: ``owe_index``)
    landed: int = 0

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
        notes = "".join(f" Note: {notice}." for notice in self.notices)
        if not parts:
            return f"Already in sync with {target} ({self.head[:8]}).{notes}"
        return f"Synced with {target} ({self.head[:8]}): " + "; ".join(parts) + "." + notes

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


class Unreachable(Exception):
    """The remote could not be reached; the message is git's first error line."""


# What git, ssh and HTTPS remotes print when the remote was reached and refused us: waiting
# will not help, the person has to fix a key, a token or a URL. Anything else that fails to
# reach the remote (no route, no DNS, a drive not mounted) is treated as offline.
ACCESS_REFUSED = (
    "permission denied", "authentication failed", "could not read username",
    "could not read password", "host key verification failed", "repository not found",
    "returned error: 401", "returned error: 403", "access denied",
)  # not "access rights": git adds that hint to every ssh failure, an unknown host included


# -- path kinds -----------------------------------------------------------------------------
def is_ledger(rel: str) -> bool:
    parts = PurePosixPath(rel).parts
    return len(parts) == 2 and parts[0] == LEDGER_DIR and rel.endswith(".jsonl")


def is_raw(rel: str) -> bool:
    return PurePosixPath(rel).parts[:1] == (RAW_DIR,)


def append_only(rel: str) -> bool:
    return is_ledger(rel) or is_raw(rel)


def is_temp(rel: str) -> bool:
    return is_temp_name(PurePosixPath(rel).name)


def status_paths(repo: GitRepo, *pathspec: str) -> list[tuple[str, str]]:
    """(XY, path) for every changed or untracked file; ignored files and device state left out."""
    fields = repo.run("status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames",
                      "--", *(pathspec or (".",)), f":(exclude){STATE_DIR}").out.split("\0")
    return [(item[:2], item[3:]) for item in fields if len(item) > 3]


def committer_identity(repo: GitRepo, vault: Vault) -> list[str]:
    """A committer identity for machines that have none configured (sync must not stop)."""
    if repo.run("config", "user.email", check=False).out.strip():
        return []
    return ["user.name=osk sync", f"user.email=osk-{device_id(vault)}@localhost"]


# -- state ----------------------------------------------------------------------------------
@dataclass
class SyncState:
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
    def load(cls, vault: Vault) -> SyncState:
        try:
            data = json.loads(cls.path(vault).read_text(encoding="utf-8"))
            return cls(**{k: data.get(k) for k in cls.__dataclass_fields__})
        except (FileNotFoundError, ValueError, TypeError):
            return cls()

    def save(self, vault: Vault) -> None:
        atomic_write(self.path(vault), json.dumps(asdict(self), indent=1) + "\n")


# -- the cycle ------------------------------------------------------------------------------
@dataclass
class Cycle:
    vault: Vault
    repo: GitRepo
    remote: str
    branch: str
    checkpoint: Checkpoint | None
    device: str
    result: SyncResult
    accept_rewrite: bool = False  # a person agreed to a remote whose history was rewritten

    @property
    def tracking(self) -> str:
        return f"refs/remotes/{self.remote}/{self.branch}"

    def mark(self, name: str) -> None:
        if self.checkpoint is not None:
            self.checkpoint(name)
        pause_for_tests(name)

    def head(self) -> str:
        head = self.repo.sha("HEAD")
        if head is None:
            raise SyncError(f"{self.vault.root} has no commit yet; create the vault with "
                            f"`osk init` or clone an existing one")
        return head


@contextmanager
def locked(path: Path, timeout: float, what: str) -> Iterator[None]:
    try:
        with file_lock(path, timeout=timeout):
            yield
    except LockTimeout as exc:
        raise lock_busy(path, timeout, what) from exc


def journal_path(vault: Vault) -> Path:
    return vault.state("sync", "landing.json")


# -- what the index has not taken in yet ----------------------------------------------------
def _owed_path(vault: Vault) -> Path:
    return vault.state("sync", "index-owed")


def owe_index(vault: Vault) -> None:
    """Note, before a landing rewrites a node or a ledger, that the stores a fresh process
    reads have not taken it in. The verbs above (``osk.verbs.syncing``) settle the note once
    they have, so a catch-up that was killed, failed or never ran is run by the next cycle."""
    atomic_write(_owed_path(vault), f"{time.time_ns()} {os.getpid()}\n")


def index_owed(vault: Vault) -> str | None:
    """The note ``owe_index`` left (a token), or None when nothing is owed."""
    try:
        return _owed_path(vault).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def settle_index(vault: Vault, token: str) -> None:
    """Clear the note if it is still ``token`` (else a landing since left one of its own).
    Under the sync lock a landing writes its token under, so none is written between the read
    and the removal; while a cycle holds the lock the note is left, for the catch-up after that
    cycle (one catch-up more, never one lost)."""
    try:
        with file_lock(vault.lock_path("sync"), timeout=0):
            if index_owed(vault) == token:
                _owed_path(vault).unlink(missing_ok=True)
    except LockTimeout:
        return


def union_lines(ours: bytes, theirs: bytes) -> bytes:
    """Lines of both sides, ours first, each distinct line once (what union would have kept)."""
    lines: list[bytes] = []
    seen: set[bytes] = set()
    for line in (*ours.splitlines(keepends=True), *theirs.splitlines(keepends=True)):
        line = line if line.endswith(b"\n") else line + b"\n"
        if line not in seen:
            seen.add(line)
            lines.append(line)
    return b"".join(lines)


Entry = tuple[str, str, str, str]  # (new mode, old sha, new sha, path) of a file that differs


def tree_changes(repo: GitRepo, old: str, new: str) -> list[Entry]:
    """Every file that differs from ``old`` to ``new`` (commits or trees), renames as a removal
    and an addition."""
    return raw_entries(split_z(repo.run(
        "diff", "--raw", "--no-abbrev", "-z", "--no-renames", old, new).out))


def raw_entries(raw: list[str]) -> list[Entry]:
    """A ``git diff --raw -z`` listing as (new mode, old sha, new sha, path) per file."""
    entries = []
    for meta, rel in zip(raw[0::2], raw[1::2], strict=True):
        _old_mode, new_mode, old_sha, new_sha, _code = meta.lstrip(":").split(" ")
        entries.append((new_mode, old_sha, new_sha, rel))
    return entries


def symlinks_in(entries: list[Entry]) -> list[str]:
    """The paths a diff makes into symbolic links (mode 120000)."""
    return [rel for mode, _old_sha, _new_sha, rel in entries if mode == "120000"]


Checkpoint = Callable[[str], None]


def lock_busy(path: Path, timeout: float, what: str) -> SyncError:
    return SyncError(f"{what} (lock {path} still held after {timeout:.0f} s); try again later")


def pause_for_tests(name: str) -> None:
    """Crash tests set these variables to hold a real process still where they will kill it:
    at a cycle's checkpoints (``Cycle.mark``) and inside the id map's write (``id-map``)."""
    if os.environ.get("OSK_SYNC_PAUSE_AT") != name:
        return
    signal_file = os.environ.get("OSK_SYNC_PAUSE_FILE")
    if signal_file:
        Path(signal_file).write_text(f"{os.getpid()} {name}\n", encoding="utf-8")
    time.sleep(float(os.environ.get("OSK_SYNC_PAUSE_SECONDS", "120")))
