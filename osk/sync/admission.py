"""What a remote may land. Everything another device pushed is checked before any of it lands,
so nothing a remote brings can stop this device: a remote's commit is refused as a whole, by
name, when it brings

- a symbolic link (it can lead reads and writes out of the vault);
- a file over the size limit (``[sync] max_file_mb`` in this device's ``osk.toml``, default
  10 MB);
- a ledger line that is not a record (not a JSON object, an id that is no UUIDv7 or is used
  twice, a parent that is not an older record), or a record removed (its id gone from the
  file; a line rewritten in place, as a person's redaction does, keeps its id): one bad line
  would stop every write here;
- a node whose id another node already carries (the real node would become unreadable), in
  the remote's tree or, once this device's unpushed commits are rebased onto it, in one of
  them (``refuse_clashing_ids``: the rebase runs in a scratch clone, so nothing has landed);
- machinery the vault depends on, broken: a ``.gitattributes`` that lets git rewrite the bytes
  of ledgers or raw records, an ``osk.toml`` osk cannot read, or files under ``.osk/`` (device
  state is never synced). A ``.gitattributes`` that only drops the union merge of ledgers (or
  ``-text`` of raw records) lands with a notice in the cycle's report: osk merges ledger lines
  itself, so nothing stops, but the person should put the line back.

A refused cycle lands nothing and keeps every local commit; the message says what to do (repair
the commit on the device that pushed it, push, sync again). So that no device has to, this
device does not push commits that give a node file an id another node file carries
(``refuse_duplicate_push``): the other devices would refuse them. The checks read blobs from git's
object database, never a checkout, and look only at what changed since this device and the
remote last agreed (their merge base), so a problem already on this device is not the
remote's to answer for.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath

from osk.errors import OskError, SyncError
from osk.store.conflict_copies import is_node_path
from osk.store.ledger import foreign_line_problems
from osk.store.vault import MARKER, STATE_DIR, Settings
from osk.sync.cycle_state import (
    EMPTY_TREE,
    ZERO,
    Cycle,
    Entry,
    is_ledger,
    symlinks_in,
    tree_changes,
)
from osk.sync.node_ids import Carried, carried_ids

DEFAULT_MAX_FILE_MB = 10.0
ATTRIBUTES = ".gitattributes"
# Paths whose attributes osk relies on, and the attribute each must keep.
_PROBE_LEDGER = "_ledger/audit.jsonl"
_PROBE_RAW = "_raw/key/conversation.md"
_REWRITING = ("text", "eol", "filter", "ident", "working-tree-encoding")

@dataclass(frozen=True)
class Admitted:
    """What an admitted pull brings of nodes: the node files it adds or changes."""

    brought_nodes: frozenset[str]


def admit(cycle: Cycle, local: str, upstream: str) -> Admitted:
    """Refuse (SyncError, nothing landed) when what ``upstream`` brings cannot land here."""
    repo = cycle.repo
    entries = tree_changes(repo, _merge_base(cycle, local, upstream), upstream)
    brought = [e for e in entries if e[2] != ZERO]
    arriving = frozenset(rel for _mode, _old, _new, rel in brought if is_node_path(rel))
    carried = carried_ids(cycle.vault, repo, upstream, arriving) if arriving else Carried({}, {})
    problems = [*_link_problems(entries), *_state_problems(brought),
                *_size_problems(cycle, brought), *_ledger_problems(cycle, brought),
                *_machinery_problems(cycle, brought), *_duplicate_ids(carried)]
    if problems:
        raise SyncError(
            f"{cycle.remote}/{cycle.branch} brings what osk will not land, so none of it was "
            f"landed (this device's notes and commits are kept, unchanged): "
            + "; ".join(problems)
            + ". On the device that pushed it, repair or revert that commit (`git revert`), "
              "push, and sync here again",
            problems=problems)
    return Admitted(arriving)


def refuse_clashing_ids(cycle: Cycle, admitted: Admitted, upstream: str, rebased: str) -> None:
    """Refuse (SyncError, nothing landed or pushed) when a node the remote brings and a node of
    this device's unpushed commits carry the same id: each tree alone is sound, and
    ``rebased`` (those commits on ``upstream``) would hold the id twice. Such an id is one a
    person wrote (``id: auth-decision``) or a node file copied by hand; osk's own are UUIDv7.
    Only a clash the pull makes is refused: one already on this device is this device's own,
    which ``osk validate`` reports."""
    if not admitted.brought_nodes:
        return
    changed = tree_changes(cycle.repo, upstream, rebased)
    ours = {rel for _mode, _old, new, rel in changed if new != ZERO and is_node_path(rel)}
    if not ours:
        return
    # A brought file the rebase changed or removed is no longer the remote's alone.
    theirs = admitted.brought_nodes - {rel for _mode, _old, _new, rel in changed}
    carried = carried_ids(cycle.vault, cycle.repo, rebased, ours)
    twice = {node_id: paths for node_id, paths in carried.holders.items()
             if not theirs.isdisjoint(paths)}
    if not twice:
        return
    problems = [
        f"node id {node_id} is carried by both "
        f"{' and '.join(sorted(rel for rel in paths if rel in theirs)[:2])} (brought) and "
        f"{' and '.join(sorted(rel for rel in paths if rel in ours)[:2])} (this device's, "
        f"not yet pushed)" for node_id, paths in sorted(twice.items())]
    raise SyncError(
        f"{cycle.remote}/{cycle.branch} and this device's unpushed commits each hold a node "
        f"with the same id, so nothing was landed or pushed (this device's notes and commits "
        f"are kept, unchanged): " + "; ".join(problems)
        + ". If they are two nodes, give this device's another id (its `id:` line); if they "
          "are one node, moved or copied here while another device edited it, put this "
          "device's file back where the remote keeps it (or remove it). Then sync again",
        problems=problems)


def refuse_duplicate_push(cycle: Cycle, upstream: str | None, head: str) -> None:
    """Refuse (SyncError, nothing pushed; what landed stays) to publish commits that give a node
    file an id another node file of ``head`` carries, such as a note duplicated in an editor
    with its front matter: every other device's admission would refuse them, and stop syncing
    until this device repaired them. Read only when the commits add or change a node file."""
    ours = {rel for _mode, _old, new, rel in tree_changes(cycle.repo, upstream or EMPTY_TREE, head)
            if new != ZERO and is_node_path(rel)}
    if not ours:
        return
    carried = carried_ids(cycle.vault, cycle.repo, head, ours)
    twice = {node_id: paths for node_id, paths in carried.holders.items() if len(paths) > 1}
    if not twice:
        return
    problems = [f"node id {node_id} is carried by both {' and '.join(sorted(paths)[:3])}"
                for node_id, paths in sorted(twice.items())]
    raise SyncError(
        f"this device's commits give one id to two node files, so nothing was pushed to "
        f"{cycle.remote}/{cycle.branch} (every other device would refuse them; this device's "
        f"notes and commits are kept): " + "; ".join(problems)
        + ". Give one of them another id (its `id:` line), or remove the copy, and sync again",
        problems=problems)


def _merge_base(cycle: Cycle, local: str, upstream: str) -> str:
    found = cycle.repo.run("merge-base", local, upstream, check=False).out.strip()
    return found or local


def _link_problems(entries: list[Entry]) -> list[str]:
    return [f"{rel} is a symbolic link (a link can lead reads and writes out of the vault)"
            for rel in symlinks_in(entries)]


def _state_problems(brought: list[Entry]) -> list[str]:
    return [f"{rel} is device state (.osk/ is never synced)" for _m, _o, _n, rel in brought
            if PurePosixPath(rel).parts[:1] == (STATE_DIR,)]


def max_file_bytes(settings: Settings) -> int:
    """``[sync] max_file_mb`` (default 10): the largest file a remote may land."""
    section = settings.extra.get("sync", {})
    if not isinstance(section, Mapping) or set(section) - {"max_file_mb"}:
        raise OskError("osk.toml: [sync] may hold only max_file_mb (the largest file, in MB, "
                       "a sync may bring in)")
    value = section.get("max_file_mb", DEFAULT_MAX_FILE_MB)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise OskError(f"osk.toml: [sync] max_file_mb must be a number above 0 (got {value!r})")
    return int(value * 1_000_000)


def _size_problems(cycle: Cycle, brought: list[Entry]) -> list[str]:
    limit = max_file_bytes(cycle.vault.settings())
    problems = []
    for mode, _old, new, rel in brought:
        if mode == "160000":
            continue  # a submodule's commit, never landed (landing skips it)
        size = cycle.repo.size(new)
        if size > limit:
            problems.append(f"{rel} is {size / 1_000_000:.1f} MB, over the "
                            f"{limit / 1_000_000:g} MB limit ([sync] max_file_mb in osk.toml)")
    return problems


def _ledger_problems(cycle: Cycle, brought: list[Entry]) -> list[str]:
    problems = []
    for _mode, old, new, rel in brought:
        if not is_ledger(rel):
            continue
        known = cycle.repo.blob(old) if old != ZERO else b""
        found = foreign_line_problems(rel, known, cycle.repo.blob(new))
        problems.extend(found[:3])
        if len(found) > 3:
            problems.append(f"{rel}: {len(found) - 3} more bad line(s)")
    return problems


def _machinery_problems(cycle: Cycle, brought: list[Entry]) -> list[str]:
    problems = []
    for _mode, _old, new, rel in brought:
        if rel == ATTRIBUTES:
            refusals, notices = attribute_problems(
                cycle.repo.blob(new).decode("utf-8", "replace"))
            problems.extend(refusals)
            cycle.result.notices.extend(n for n in notices if n not in cycle.result.notices)
        elif rel == MARKER:
            try:
                Settings.from_toml(tomllib.loads(cycle.repo.blob(new).decode("utf-8")),
                                   Path(MARKER))
            except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
                problems.append(f"{MARKER} is not valid TOML ({exc}): no osk command could run")
            except OskError as exc:
                problems.append(f"{exc} (no osk command could run)")
    return problems


def attribute_problems(text: str) -> tuple[list[str], list[str]]:
    """What a ``.gitattributes`` breaks, as (refusals, notices). Refused: attributes that let
    git rewrite the bytes of a ledger or a raw record (text, eol, filter, ident, an encoding):
    their lines are hashed and checked by prefix, so a rewrite reads as damage on every other
    device. Only noted: the union merge of ledgers or ``-text`` of raw records dropped (osk
    merges ledger lines itself, and git rewrites nothing unless told to)."""
    refusals, notices = [], []
    for probe, kind in ((_PROBE_LEDGER, "ledgers"), (_PROBE_RAW, "raw records")):
        rewriting = [name for name in _REWRITING
                     if _attribute(text, probe, name) not in (None, False)]
        if rewriting:
            refusals.append(f"{ATTRIBUTES} sets {', '.join(rewriting)} on {kind} (git would "
                            f"rewrite their bytes, which read as damage on every device)")
    if _attribute(text, _PROBE_LEDGER, "merge") != "union":
        notices.append(f"{ATTRIBUTES} no longer says `_ledger/*.jsonl merge=union`; osk still "
                       f"merges ledger lines itself, but put the line back")
    if _attribute(text, _PROBE_RAW, "text") is not False:
        notices.append(f"{ATTRIBUTES} no longer says `_raw/** -text`; put the line back so no "
                       f"git setting (core.autocrlf) can rewrite raw records")
    return refusals, notices


def _attribute(text: str, path: str, name: str) -> str | bool | None:
    """The value git gives attribute ``name`` of ``path`` under ``text`` (last match wins):
    a string for ``name=value``, True set, False unset, None unspecified."""
    value: str | bool | None = None
    for line in text.splitlines():
        fields = line.split()
        if not fields or fields[0].startswith("#") or not _matches(fields[0], path):
            continue
        for item in fields[1:]:
            if item == "binary" and name in ("merge", "text", "diff"):
                value = False  # the built-in macro: -diff -merge -text
            elif item in (name, f"-{name}", f"!{name}"):
                value = True if item == name else (False if item[0] == "-" else None)
            elif item.startswith(f"{name}="):
                value = item.split("=", 1)[1]
    return value


def _matches(pattern: str, path: str) -> bool:
    if "/" not in pattern.rstrip("/"):
        return fnmatchcase(PurePosixPath(path).name, pattern)
    parts = []
    for piece in re.split(r"(\*\*/|/\*\*|\*|\?)", pattern.lstrip("/")):
        parts.append({"**/": "(?:.*/)?", "/**": "/.*", "*": "[^/]*", "?": "[^/]"}.get(
            piece, re.escape(piece)))
    return re.fullmatch("".join(parts), path) is not None


def _duplicate_ids(carried: Carried) -> list[str]:
    """Node ids a node the remote brings carries that another node of its tree carries too."""
    twice = {node_id: paths for node_id, paths in carried.holders.items() if len(paths) > 1}
    return [f"node id {node_id} is carried by both {' and '.join(sorted(paths)[:3])} (the "
            f"node would become unreadable)" for node_id, paths in sorted(twice.items())]
