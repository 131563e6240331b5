"""Sync conflict copies: the other device's version of a node, kept beside it.

When two devices change the same node, sync keeps the version the remote already has at the
node's path and writes the local one beside it (``osk.sync.cycle``), named::

    Scope/proj/cluster/Title (sync conflict 2026-11-29 1802 3f9a1c0b2d4e).md

(the sync's time, this device's id, and `` 2``, `` 3``… if that name is taken). A node's copy
has its ``id:`` line turned into a YAML comment, so it carries no contract id: the catalog's
duplicate-id rule leaves the original readable, and the copy is neither searched nor cited.
Validators and ``overview`` list copies until the person merges and deletes them.

This module is the naming rule and the content rule; the engine and the validators use it
without importing the sync machinery.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from osk.errors import SyncError
from osk.store import clock
from osk.store.vault import SPACES, STATE_DIR, Vault

_NAME = re.compile(
    r" \(sync conflict \d{4}-\d{2}-\d{2} \d{4} [0-9A-Za-z_-]+(?: \d+)?\)(?=\.[^./]+$|$)"
)
_SKIP_DIRS = frozenset({".git", STATE_DIR, ".obsidian", ".trash"})


def conflict_copies(vault: Vault) -> list[str]:
    """Every sync conflict copy in the vault (vault-relative paths), for validators/overview."""
    found: list[str] = []
    for directory, dirs, files in os.walk(vault.root):
        dirs[:] = [d for d in dirs if d not in _SKIP_DIRS]
        found.extend(vault.rel(Path(directory) / name) for name in files if is_conflict_copy(name))
    return sorted(found)


def is_conflict_copy(rel: str) -> bool:
    """Whether ``rel`` (a path or a file name) names a conflict copy. Asked of every file of
    the vault by ``overview`` and ``validate``: the name is split as text and the regex run only
    on a name that could match (10,000 paths: 22 ms through ``PurePosixPath`` and the regex,
    1.2 ms so)."""
    name = rel.rpartition("/")[2]
    return "(sync conflict " in name and _NAME.search(name) is not None


def original_of(rel: str) -> str:
    """The path a conflict copy was made beside (the node to merge it into)."""
    path = PurePosixPath(rel)
    return str(path.with_name(_NAME.sub("", path.name, count=1)))


def is_node_path(rel: str) -> bool:
    """A Markdown file inside a Space: what sync treats as a node. ``rel`` as git writes a
    path (no ``.``, no doubled ``/``): split as text, since a pull asks this of every file of
    a tree (``PurePosixPath`` took 0.2 s at 100,000 nodes)."""
    space, slash, _rest = rel.partition("/")
    return rel.endswith(".md") and bool(slash) and space in SPACES


def copy_name(rel: str, device: str, taken: Callable[[str], bool]) -> str:
    """A free name for this device's copy of ``rel`` (``taken`` says which are used)."""
    path = PurePosixPath(rel)
    stamp = clock.now().strftime("%Y-%m-%d %H%M")
    suffix = "".join(path.suffixes[-1:])
    stem = path.name[: len(path.name) - len(suffix)] if suffix else path.name
    for number in range(1, 1000):
        extra = f" {number}" if number > 1 else ""
        name = str(path.with_name(f"{stem} (sync conflict {stamp} {device}{extra}){suffix}"))
        if not taken(name):
            return name
    raise SyncError(f"could not choose a free conflict-copy name beside {rel}")


def copy_content(rel: str, data: bytes) -> bytes:
    """A node's copy loses its contract id (kept as a comment) so the original stays readable."""
    if not is_node_path(rel):
        return data
    lines = data.split(b"\n")
    if not lines or lines[0].rstrip(b"\r").lstrip(b"\xef\xbb\xbf") != b"---":
        return data
    for index, line in enumerate(lines[1:], start=1):
        if line.rstrip(b"\r") == b"---":
            break
        if line.startswith(b"id:"):
            node_id = line[3:].strip().decode("utf-8", "replace")
            lines[index] = (f"# sync conflict copy of id {node_id}: merge it into the node by "
                            f"hand, then delete this file").encode()
            break
    return b"\n".join(lines)
