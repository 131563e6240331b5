"""Which id each node file of a tree carries, kept for this device in an SQLite file of device
state (``.osk/sync/node-ids.sqlite``), brought from one tree to the next by what differs.

Sync asks it three questions, each about a few files of a whole tree:

- before a pull lands (``admission.admit``): does a node file the remote brings carry an id
  another node file of the remote's tree carries too (the node would become unreadable)?
- after the rebase (``admission.refuse_clashing_ids``): does a node file of this device's
  unpushed commits carry an id a brought node file carries, in the rebased tree?
- before a push (``admission.refuse_duplicate_push``): does a node file this device's commits
  add or change carry an id another node file of the pushed tree carries?

So the file holds one tree's node files, each with its blob and the id it carries, an index
on the id, and which tree that is. Asked about another tree, it applies what ``git diff``
lists between the two, reading only the blobs of the files that changed: a pull, a rebase and
a push cost what they change, not what the vault holds (at 100,000 nodes, listing the tree and
reading a map of every blob took 0.4 s a question). A tree it cannot diff from (none held yet,
or an object git no longer has) is listed whole, and a blob the file already knows is not read
again. A file that is damaged or of another format is made anew; it is a cache of git's
objects, never synced.

An id is read as the catalog reads it (``split_frontmatter``; ``is_valid_id``, the contract's
rule), so ids are compared as the catalog compares them: any form, case and all.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Collection, Iterable, Mapping
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from osk.errors import ContractError, SyncError
from osk.store.conflict_copies import is_node_path
from osk.store.contract import is_valid_id
from osk.store.node import split_frontmatter
from osk.store.vault import Vault
from osk.sync.cycle_state import ZERO, pause_for_tests, tree_changes
from osk.sync.gitrepo import GitRepo, split_z

FILE = "node-ids.sqlite"
# The text map of blobs and ids this file replaces: a line a blob, then a space and its id.
LEGACY = "node-ids"
_LEGACY_ENTRY = re.compile(r"^([0-9a-f]{40}|[0-9a-f]{64})(?: ([^\n]+))?\n", re.MULTILINE)
FORMAT = 1  # PRAGMA user_version; a file of another is made anew
GITLINK = "160000"  # a submodule's entry: a commit, no blob to read
CHUNK = 500  # ids a statement asks about

_SCHEMA = """
CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, blob TEXT NOT NULL, id TEXT)
    WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS files_by_id ON files (id) WHERE id IS NOT NULL;
CREATE TABLE IF NOT EXISTS held (tree TEXT NOT NULL);
"""


@dataclass(frozen=True)
class Carried:
    """What a tree's node files carry: the id of each file asked about (None: it carries no
    valid id), and every node file of the tree that carries one of those ids."""

    ids: Mapping[str, str | None]
    holders: Mapping[str, list[str]]


def carried_ids(vault: Vault, repo: GitRepo, tree: str, paths: Collection[str]) -> Carried:
    """The ids ``paths`` (node files of ``tree``, a commit or tree) carry, and each one's
    holders in ``tree``, the file brought to ``tree`` first."""
    tree_sha = repo.run("rev-parse", "--verify", f"{tree}^{{tree}}").out.strip()
    path = vault.state("sync", FILE)
    try:
        return _asked(vault, path, repo, tree_sha, paths)
    except sqlite3.OperationalError:  # locked, full, read-only: not damage, told as it is
        raise
    except sqlite3.DatabaseError:  # damaged, or another format: a cache, made anew
        _remove(path)
        return _asked(vault, path, repo, tree_sha, paths)


# -- the file ---------------------------------------------------------------------------------
def _asked(vault: Vault, path: Path, repo: GitRepo, tree: str, paths: Collection[str]
           ) -> Carried:
    path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(path, isolation_level=None)) as db:
        if db.execute("PRAGMA user_version").fetchone()[0] not in (0, FORMAT):
            raise sqlite3.DatabaseError(f"{path} is of another format")
        db.executescript(_SCHEMA)
        db.execute(f"PRAGMA user_version = {FORMAT}")
        _bring_to(db, repo, tree, vault)
        return _answer(db, paths)


def _answer(db: sqlite3.Connection, paths: Collection[str]) -> Carried:
    ids: dict[str, str | None] = {}
    for chunk in _chunks(sorted(paths)):
        marks = ",".join("?" * len(chunk))
        ids.update(db.execute(f"SELECT path, id FROM files WHERE path IN ({marks})", chunk))
    found: dict[str, list[str]] = {}
    for chunk in _chunks(sorted({node_id for node_id in ids.values() if node_id})):
        marks = ",".join("?" * len(chunk))
        for node_id, rel in db.execute(
                f"SELECT id, path FROM files WHERE id IN ({marks}) ORDER BY path", chunk):
            found.setdefault(node_id, []).append(rel)
    return Carried(ids, found)


def _remove(path: Path) -> None:
    for stale in (path, path.with_name(path.name + "-journal")):
        stale.unlink(missing_ok=True)


def _bring_to(db: sqlite3.Connection, repo: GitRepo, tree: str, vault: Vault) -> None:
    """Make the file hold ``tree``'s node files (one transaction)."""
    found = db.execute("SELECT tree FROM held").fetchone()
    held = found[0] if found else None
    if held == tree:
        return
    changed = _diff(repo, held, tree) if held else None
    db.execute("BEGIN IMMEDIATE")
    try:
        if changed is None:
            _list_whole(db, repo, tree, vault)
        else:
            _apply(db, repo, changed)
        db.execute("DELETE FROM held")
        db.execute("INSERT INTO held (tree) VALUES (?)", (tree,))
        pause_for_tests("id-map")
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:  # SQLite may have rolled back already (a full disk)
            db.execute("ROLLBACK")
        raise


def _diff(repo: GitRepo, held: str, tree: str) -> dict[str, str] | None:
    """Each node file that differs from ``held`` to ``tree`` with its blob there (ZERO: gone);
    None when git cannot diff them (``held`` no longer in its objects)."""
    try:
        changed = tree_changes(repo, held, tree)
    except SyncError:  # git lacks ``held``
        return None
    return {rel: ZERO if mode == GITLINK else new
            for mode, _old, new, rel in changed if is_node_path(rel)}


def _apply(db: sqlite3.Connection, repo: GitRepo, changed: Mapping[str, str]) -> None:
    gone = [(rel,) for rel, sha in changed.items() if sha == ZERO]
    db.executemany("DELETE FROM files WHERE path = ?", gone)
    wanted = {sha: rel for rel, sha in changed.items() if sha != ZERO}
    read = _read_ids(repo, wanted)
    db.executemany("INSERT OR REPLACE INTO files (path, blob, id) VALUES (?, ?, ?)",
                   [(rel, sha, read[sha]) for rel, sha in changed.items() if sha != ZERO])


def _list_whole(db: sqlite3.Connection, repo: GitRepo, tree: str, vault: Vault) -> None:
    """``tree``'s node files listed whole; a blob the file, or the text map it replaces
    (``LEGACY``), already knows is not read again."""
    files: dict[str, str] = {}  # node file -> blob
    for entry in split_z(repo.run("ls-tree", "-r", "-z", tree).out):
        meta, rel = entry.split("\t", 1)
        _mode, kind, sha = meta.split()
        if kind == "blob" and is_node_path(rel):
            files[rel] = sha
    known = {**_legacy(vault), **dict(db.execute("SELECT blob, id FROM files"))}
    kept = {sha: known[sha] for sha in files.values() if sha in known}
    kept.update(_read_ids(repo, {sha: rel for rel, sha in files.items() if sha not in kept}))
    db.execute("DELETE FROM files")
    db.executemany("INSERT INTO files (path, blob, id) VALUES (?, ?, ?)",
                   [(rel, sha, kept[sha]) for rel, sha in files.items()])


def _legacy(vault: Vault) -> dict[str, str | None]:
    """The blobs and ids of the text map osk kept before this file (``LEGACY``, removed once
    read): a device upgraded does not read every node file again. A line that is no entry is
    left out."""
    legacy = vault.state("sync", LEGACY)
    try:
        text = legacy.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    legacy.unlink(missing_ok=True)
    return {found[1]: found[2] for found in _LEGACY_ENTRY.finditer(text)
            if found[2] is None or is_valid_id(found[2])}


def _chunks(items: list[str]) -> Iterable[list[str]]:
    return (items[start:start + CHUNK] for start in range(0, len(items), CHUNK))


# -- reading ids --------------------------------------------------------------------------------
def _read_ids(repo: GitRepo, wanted: Mapping[str, str]) -> dict[str, str | None]:
    """Each blob of ``wanted`` (blob -> a node file holding it) with the id it carries."""
    return {sha: _id_of(wanted[sha], data) for sha, data in repo.blobs(list(wanted))}


def _id_of(rel: str, data: bytes) -> str | None:
    """The valid id node file ``rel`` (its bytes ``data``) carries, as the catalog reads it;
    else None."""
    try:
        fields, _body = split_frontmatter(rel, data.decode("utf-8"), ("id",))
    except (UnicodeDecodeError, ContractError):
        return None
    value = fields.get("id")
    return value if is_valid_id(value) else None
