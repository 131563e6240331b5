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
   A remote whose history no longer holds what this device last saw there (a force-push) is
   refused until a person decides (``accept_rewrite``). Then what the remote brings is
   checked before any of it lands (``osk.sync.admission``): a commit holding a link, an
   oversized file, a damaged ledger line, a duplicate node id or broken machinery is refused
   as a whole, by name, and nothing of it lands.
3. **Rebase** our unpublished commits onto the remote branch (under the mutation lock) when the
   remote brought something, after committing what was written while fetching (a cycle with
   nothing to bring in leaves that to the next cycle). The rebase never runs in the vault's
   own working tree: it runs in a disposable clone under ``.osk/sync/scratch`` that borrows
   the vault's objects and checks out only the top-level files (a sparse checkout), so agents
   and the person at the keyboard never see a half-rebased vault, and a process killed
   mid-rebase leaves nothing in the vault to repair.
   ``_ledger/*.jsonl merge=union`` in ``.gitattributes`` applies there as in any rebase, so both
   devices' ledger lines are kept; the ledger reader then reports a fork and the next append
   joins it (``osk.store.ledger``).
4. **Land** the rebased commit in the vault: each file that differs is rewritten atomically,
   then the branch and index move. Appends made to a ledger or raw record while the cycle ran
   are carried over onto the new content; each such file lands under the lock its appends
   take (``raw.lock_path`` for a raw record), so no append interleaves with the rewrite. A
   landing is journalled in ``.osk/sync/landing.json`` first, so an interrupted landing is
   finished by the next cycle.
5. **Push**, unless our commits give a node file an id another node file carries (a note
   duplicated in an editor, front matter and all): every other device would refuse them, so
   nothing is pushed until the person gives one of them another id
   (``admission.refuse_duplicate_push``). A rejected push (another device pushed first) goes
   back to step 2, a bounded number of times; an unreachable remote marks the vault offline,
   with its commits kept. A remote that answers but refuses our credentials is not
   "offline": the cycle fails with the reason (a key or token to fix), its commits kept all
   the same.

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
tests can kill a real process at a known point (``id-map``: inside the id map's transaction,
``osk.sync.node_ids``).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

from osk.authority import mutation
from osk.errors import SyncError
from osk.store import clock
from osk.store.fsutil import atomic_write
from osk.store.ledger import device_id
from osk.store.locks import LockTimeout
from osk.store.vault import Vault
from osk.sync.admission import refuse_duplicate_push
from osk.sync.commit import commit_into
from osk.sync.cycle_state import (
    Checkpoint,
    Cycle,
    SyncResult,
    SyncState,
    Unreachable,
    committer_identity,
    journal_path,
    lock_busy,
    locked,
)
from osk.sync.gitrepo import GitRepo, open_repo
from osk.sync.integrate import (
    drop_scratch,
    fetch_upstream,
    integrate_upstream,
    push_head,
    scratch_path,
)
from osk.sync.landing import land_tree

DEFAULT_REMOTE = "origin"
PUSH_ATTEMPTS = 5
SYNC_LOCK_TIMEOUT = 300.0
MUTATION_TIMEOUT = 60.0  # a landing waits this long for node writes under way
STALE_LOCK_WAIT = 1.5
CHECKPOINTS = ("committed", "fetched", "rebase-stopped", "rebased", "landing", "landed", "pushed")


def sync_once(vault: Vault, *, remote: str = DEFAULT_REMOTE, push_attempts: int = PUSH_ATTEMPTS,
              checkpoint: Checkpoint | None = None, accept_rewrite: bool = False) -> SyncResult:
    """Run one cycle: commit, fetch, rebase, land, push. See the module docstring.

    ``accept_rewrite``: a person decided that a remote whose history was rewritten is right;
    this device's commits are rebased onto it (otherwise such a remote is refused)."""
    with locked(vault.lock_path("sync"), SYNC_LOCK_TIMEOUT,
                "another `osk sync` is running for this vault"):
        marker = vault.state("sync", "cycle.json")
        interrupted = marker.exists()
        atomic_write(marker, json.dumps({"pid": os.getpid(), "at": clock.now_text()}) + "\n")
        try:
            return _run_cycle(vault, remote, push_attempts, checkpoint, interrupted,
                              accept_rewrite)
        except SyncError as exc:
            state = SyncState.load(vault)
            state.failed_at, state.error = clock.now_text(), str(exc).split("; ")[0]
            state.save(vault)
            raise
        finally:
            marker.unlink(missing_ok=True)


def _run_cycle(vault: Vault, remote: str, attempts: int, checkpoint: Checkpoint | None,
               interrupted: bool, accept_rewrite: bool) -> SyncResult:
    state = SyncState.load(vault)
    with open_repo(vault.root) as repo:
        repo.config = committer_identity(repo, vault)
        branch = current_branch(repo, remote)
        cycle = Cycle(vault, repo, remote, branch, checkpoint, device_id(vault),
                      SyncResult(remote, branch), accept_rewrite)
        refuse_foreign_operations(repo)
        _clear_stale_git_locks(cycle, interrupted)
        with _mutation(vault):
            _recover_landing(cycle)
            commit_into(cycle)
        cycle.mark("committed")
        for _attempt in range(attempts):
            try:
                upstream = fetch_upstream(cycle)
            except Unreachable as exc:
                return _offline(cycle, state, str(exc))
            state.last_fetch = clock.now_text()
            cycle.mark("fetched")
            if upstream is not None and not repo.is_ancestor(upstream, cycle.head()):
                with _mutation(vault):
                    commit_into(cycle)  # what was written while fetching joins the rebase
                    integrate_upstream(cycle, upstream)
            head = cycle.head()
            if head == upstream:
                break
            ahead = repo.count(f"{upstream}..{head}") if upstream else repo.count(head)
            refuse_duplicate_push(cycle, upstream, head)
            try:
                pushed = push_head(cycle, head)
            except Unreachable as exc:
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
        cycle.result.head = head  # what was synced: a commit made since waits for the next
        state.last_sync, state.offline_since, state.reason = clock.now_text(), None, None
        state.failed_at = state.error = None
        state.save(vault)
        return cycle.result


def _offline(cycle: Cycle, state: SyncState, reason: str) -> SyncResult:
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


def current_branch(repo: GitRepo, remote: str) -> str:
    result = repo.run("symbolic-ref", "-q", "--short", "HEAD", check=False)
    if result.status != 0:
        raise SyncError(f"{repo.root} is not on a branch (detached HEAD); check out the vault's "
                        f"branch (e.g. `git -C {repo.root} switch main`) and sync again")
    if repo.run("remote", "get-url", remote, check=False).status != 0:
        raise SyncError(f"the vault has no git remote {remote!r}; add one with "
                        f"`git -C {repo.root} remote add {remote} URL`", remote=remote)
    return result.out.strip()


@contextmanager
def _mutation(vault: Vault) -> Iterator[None]:
    """The vault mutation lock; a landing moves the generation, so readers look again."""
    try:
        with mutation.mutation(vault, timeout=MUTATION_TIMEOUT):
            yield
    except LockTimeout as exc:
        raise lock_busy(vault.mutation_lock_path(), MUTATION_TIMEOUT,
                        "another osk process is writing the vault") from exc


# -- recovery -------------------------------------------------------------------------------
def refuse_foreign_operations(repo: GitRepo) -> None:
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


def _clear_stale_git_locks(cycle: Cycle, interrupted: bool) -> None:
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


def _recover_landing(cycle: Cycle) -> None:
    """Finish a landing a killed cycle started (see ``land_tree``)."""
    journal = journal_path(cycle.vault)
    if scratch_path(cycle.vault).exists() and not journal.exists():
        drop_scratch(cycle)  # a cycle killed before or after its landing: nothing to finish
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
        land_tree(cycle, old, new)
    elif head == new:
        cycle.repo.run("reset", "-q", new)
    journal.unlink(missing_ok=True)
    drop_scratch(cycle)


