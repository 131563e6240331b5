"""Bringing the remote's commits in and ours out: fetch and push (an unreachable remote is
offline, a refusing one an error), and the rebase of our unpublished commits onto the remote's,
run in a disposable scratch clone so nobody sees a half-rebased vault, its conflicts resolved
path by path (append-only files by union, ledger lines a merge repeated dropped).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import NoReturn

from osk.errors import SyncError
from osk.store.conflict_copies import (
    copy_content,
    copy_name,
)
from osk.store.vault import LEDGER_DIR, Vault
from osk.sync.admission import admit, refuse_clashing_ids
from osk.sync.cycle_state import (
    ACCESS_REFUSED,
    NETWORK_TIMEOUT,
    SCRATCH_CONFIG,
    Cycle,
    Unreachable,
    append_only,
    is_ledger,
    journal_path,
    union_lines,
)
from osk.sync.gitrepo import GitRepo, GitRun, literal, open_repo, split_z
from osk.sync.landing import land_tree

FETCHED = "refs/osk/fetched"  # the remote branch as fetched, before it is trusted


# -- fetch and push -------------------------------------------------------------------------
def fetch_upstream(cycle: Cycle) -> str | None:
    """Update the remote-tracking ref; None when the remote has no such branch yet.

    The branch is fetched beside the tracking ref first: a remote whose history no longer
    holds what this device last saw there (a force-push) is refused, the tracking ref left as
    it was, so every later cycle refuses too until a person decides (``accept_rewrite``)."""
    repo = cycle.repo
    known = repo.sha(cycle.tracking)
    # --refmap= : git would otherwise move the tracking ref too (its configured refspec).
    result = repo.run("fetch", "-q", "--no-tags", "--refmap=", cycle.remote,
                      f"+refs/heads/{cycle.branch}:{FETCHED}", check=False,
                      timeout=NETWORK_TIMEOUT)
    if result.status != 0:
        if "couldn't find remote ref" in result.err:
            return None
        _raise_unless_reached(cycle, result)
    fetched = repo.sha(FETCHED)
    assert fetched is not None
    if known and not cycle.accept_rewrite and not repo.is_ancestor(known, fetched):
        _refuse_rewrite(cycle, known, fetched)
    repo.run("update-ref", cycle.tracking, fetched)
    return fetched


def _refuse_rewrite(cycle: Cycle, known: str, fetched: str) -> NoReturn:
    repo = cycle.repo
    gone = repo.count(f"{fetched}..{known}")
    mine = int(repo.run("rev-list", "--count", f"--grep=^Device: {cycle.device}$",
                        f"{fetched}..{known}").out.strip() or 0)
    raise SyncError(
        f"{cycle.remote}/{cycle.branch} was rewritten (a force-push): it no longer holds "
        f"{known[:8]}, which this device last saw there; {gone} commit(s) are gone from it, "
        f"{mine} of them made on this device. Nothing was landed or pushed. A person decides: "
        f"if the rewrite was meant, run `osk sync --accept-rewrite` (this device's commits are "
        f"rebased onto the new history and pushed again; nothing is lost); if not, put the "
        f"old history back with `git -C {cycle.vault.root} push --force {cycle.remote} "
        f"{known[:12]}:{cycle.branch}` (what was pushed onto the rewritten branch then leaves "
        f"it), and sync again",
        remote=cycle.remote, known=known, fetched=fetched)


def push_head(cycle: Cycle, head: str) -> bool:
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


def _raise_unless_reached(cycle: Cycle, result: GitRun) -> NoReturn:
    """Raise SyncError when the remote refused our credentials, else Unreachable."""
    lines = [line.strip() for line in (result.err + result.out).splitlines() if line.strip()]
    refused = [line for line in lines if any(sign in line.lower() for sign in ACCESS_REFUSED)]
    if refused:
        raise SyncError(
            f"{cycle.remote} refused access ({refused[0][:300]}); the remote was reached, so "
            f"this is not a network outage. Check the key, token or credential helper git "
            f"uses for {cycle.remote} (`git -C {cycle.vault.root} fetch {cycle.remote}` shows "
            f"the same error); every commit is kept locally",
            remote=cycle.remote,
        )
    raise Unreachable(_first_error(result))


def _first_error(result: GitRun) -> str:
    lines = [line.strip() for line in (result.err + result.out).splitlines() if line.strip()]
    wanted = [line for line in lines if line.startswith(("fatal", "error", "!"))]
    return (wanted or lines or ["git gave no reason"])[0][:300]


# -- integrate: rebase in a scratch clone, then land ---------------------------------------
def integrate_upstream(cycle: Cycle, upstream: str) -> None:
    repo, local = cycle.repo, cycle.head()
    if repo.is_ancestor(local, upstream):
        admit(cycle, local, upstream)
        cycle.result.pulled += repo.count(f"{local}..{upstream}")
        land_tree(cycle, local, upstream)
        return
    if repo.run("merge-base", local, upstream, check=False).status != 0:
        raise SyncError(
            f"{cycle.remote}/{cycle.branch} shares no history with this vault (was the vault "
            f"created twice?); clone the remote into a new folder and move your notes there")
    admitted = admit(cycle, local, upstream)
    cycle.result.pulled += repo.count(f"{local}..{upstream}")
    try:
        rebased = _rebase_in_scratch(cycle, local, upstream)
        refuse_clashing_ids(cycle, admitted, upstream, rebased)
        cycle.mark("rebased")
        land_tree(cycle, local, rebased)
    except SyncError:
        if not journal_path(cycle.vault).exists():
            drop_scratch(cycle)  # a refused cycle leaves nothing behind; a journal is finished
        raise
    drop_scratch(cycle)


def scratch_path(vault: Vault) -> Path:
    return vault.state("sync", "scratch")


def drop_scratch(cycle: Cycle) -> None:
    cycle.repo.run("update-ref", "-d", "refs/osk/sync-result", check=False)
    shutil.rmtree(scratch_path(cycle.vault), ignore_errors=True)


def _rebase_in_scratch(cycle: Cycle, local: str, upstream: str) -> str:
    scratch = scratch_path(cycle.vault)
    shutil.rmtree(scratch, ignore_errors=True)  # a killed cycle's leftovers are simply redone
    scratch.parent.mkdir(parents=True, exist_ok=True)
    cycle.repo.run("clone", "-q", "--shared", "--no-checkout", "--no-tags",
                   str(cycle.vault.root), str(scratch))
    hooks = scratch / ".git" / "osk-no-hooks"
    hooks.mkdir(exist_ok=True)
    config = [*cycle.repo.config, *SCRATCH_CONFIG, f"core.hooksPath={hooks}"]
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


def _resolve_step(cycle: Cycle, work: GitRepo, started: GitRun) -> None:
    """Resolve every unmerged path of the stopped step; never leave conflict markers."""
    stages: dict[str, dict[int, tuple[str, str]]] = {}
    for entry in split_z(work.run("ls-files", "-u", "-z").out):
        info, rel = entry.split("\t", 1)
        mode, sha, stage = info.split()
        stages.setdefault(rel, {})[int(stage)] = (mode, sha)
    if not stages:
        raise SyncError(f"the rebase stopped without a conflict: {_first_error(started)}")
    notes = []
    for rel, staged in sorted(stages.items()):
        notes.extend(_resolve_path(cycle, work, rel, staged.get(2), staged.get(3)))
    message = work.git_dir / "rebase-merge" / "message"
    if notes and message.exists():
        with message.open("a", encoding="utf-8") as handle:
            handle.write("\nSync conflicts (both versions kept):\n"
                         + "".join(f"- {note}\n" for note in notes))


def _resolve_path(cycle: Cycle, work: GitRepo, rel: str, ours: tuple[str, str] | None,
                  theirs: tuple[str, str] | None) -> list[str]:
    # In a rebase "ours" is the remote's version and "theirs" is the local commit's.
    if ours and theirs and is_ledger(rel):
        merged = union_lines(work.blob(ours[1]), work.blob(theirs[1]))
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
        if theirs and append_only(rel):
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


def _dedupe_ledgers(cycle: Cycle, work: GitRepo, upstream: str) -> None:
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
        unique = union_lines(data, b"")
        if unique != data:
            fixed += data.count(b"\n") - unique.count(b"\n")
            _put(work, rel, mode, work.store(unique))
    if fixed:
        work.run("commit", "-q", "--no-verify", "-m",
                 f"osk sync: removed {fixed} repeated ledger line(s) left by a merge\n\n"
                 f"Device: {cycle.device}\n")
