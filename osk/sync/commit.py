"""A cycle's commit: everything that changed, staged only up to each append-only file's last
complete line (a half-written append is never published), with a message naming what changed:
nodes added, changed, moved and removed, ledger lines, raw records grown.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import PurePosixPath
from typing import Any

from osk.errors import SyncError
from osk.store.conflict_copies import (
    is_conflict_copy,
    is_node_path,
)
from osk.store.vault import LEDGER_DIR, RAW_DIR, STATE_DIR, Vault
from osk.sync.cycle_state import (
    EMPTY_TREE,
    NAMES_SHOWN,
    CommitSummary,
    Cycle,
    append_only,
    is_ledger,
    is_raw,
    is_temp,
    raw_entries,
    status_paths,
    symlinks_in,
)
from osk.sync.gitrepo import GitRepo, literal, split_z


# -- commit ---------------------------------------------------------------------------------
def commit_into(cycle: Cycle) -> None:
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
    head = repo.sha("HEAD") or EMPTY_TREE
    links = symlinks_in(raw_entries(split_z(repo.run("diff", "--cached", "--raw", "--no-abbrev",
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
    for code, rel in status_paths(repo, LEDGER_DIR, RAW_DIR):
        if is_temp(rel):
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
    added: list[str] = []
    changed: list[str] = []
    removed: list[str] = []
    copies: list[str] = []
    other: list[str] = []
    moved: list[tuple[str, str]] = []
    index = 0
    while index < len(names):
        code = names[index]
        if code[0] in "RC":
            source, target = names[index + 1], names[index + 2]
            index += 3
            if is_node_path(source) and is_node_path(target) and code[0] == "R":
                moved.append((_title(source), _title(target)))
            elif not (append_only(target) or is_conflict_copy(target)):
                other.append(target)
            continue
        rel = names[index + 1]
        index += 2
        if is_conflict_copy(rel):
            copies.append(rel)
        elif is_node_path(rel):
            {"A": added, "D": removed}.get(code[0], changed).append(_title(rel))
        elif not append_only(rel):
            other.append(rel)
    ledgers, raw = [], []
    for entry in split_z(numstat):
        count, _deleted, rel = entry.split("\t", 2)
        lines = int(count) if count.isdigit() else 0
        if is_ledger(rel):
            ledgers.append((PurePosixPath(rel).stem, lines))
        elif is_raw(rel) and not is_conflict_copy(rel):
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
    shown = ", ".join(values[:NAMES_SHOWN])
    more = len(values) - NAMES_SHOWN
    return shown + (f" and {more} more" if more > 0 else "")
