"""The vault's node set: which files are nodes, and how a title or id finds one.

The catalog parses each node file once and re-parses only files whose (size, mtime, inode)
changed, so a long-lived server pays for a change, not for the vault. ``refresh`` reports what
changed so the search index can update just those postings.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from osk import node as node_mod
from osk.errors import ContractError, DuplicateId, NodeNotFound, OskError, TitleError
from osk.node import Node
from osk.titles import title_key
from osk.vault import SPACES, Vault

StatKey = tuple[int, int, int]


@dataclass(frozen=True)
class Entry:
    path: str
    stat: StatKey
    node: Node | None
    error: OskError | None
    read_at_ns: int = 0  # when the bytes were read; see _settled


@dataclass(frozen=True)
class Changes:
    added: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.added or self.changed or self.removed)


@dataclass
class Catalog:
    vault: Vault
    entries: dict[str, Entry] = field(default_factory=dict)
    _by_id: dict[str, list[str]] = field(default_factory=dict)
    _by_title: dict[str, list[str]] = field(default_factory=dict)

    # -- refreshing ---------------------------------------------------------------------
    def refresh(self) -> Changes:
        """Stat every node file; re-read the ones that changed. Returns what changed."""
        seen: dict[str, StatKey] = dict(self._walk())
        added, changed = [], []
        for rel, stat in seen.items():
            old = self.entries.get(rel)
            if old is None or old.stat != stat or not _settled(old):
                entry = self._load(rel, stat)
                if old is None:
                    added.append(rel)
                elif old.stat != stat or _content_differs(old, entry):
                    changed.append(rel)
                self._put(entry)
        removed = [rel for rel in self.entries if rel not in seen]
        for rel in removed:
            self._drop(rel)
        return Changes(tuple(added), tuple(changed), tuple(removed))

    def note_written(self, rel: str) -> None:
        """Record a file osk itself just wrote, without waiting for the next walk."""
        path = self.vault.abs(rel)
        try:
            stat = _stat_key(path.stat())
        except FileNotFoundError:
            self._drop(rel)
        else:
            self._put(self._load(rel, stat))

    def note_removed(self, rel: str) -> None:
        self._drop(rel)

    def _walk(self) -> Iterator[tuple[str, StatKey]]:
        for space in SPACES:
            top = self.vault.root / space
            if top.is_dir():
                yield from _walk_dir(top, space)

    def _load(self, rel: str, stat: StatKey) -> Entry:
        read_at = time.time_ns()
        try:
            text = self.vault.abs(rel).read_text(encoding="utf-8")
            return Entry(rel, stat, node_mod.parse(rel, text), None, read_at)
        except ContractError as exc:
            return Entry(rel, stat, None, exc, read_at)
        except (UnicodeDecodeError, OSError) as exc:
            error = ContractError(f"{rel}: unreadable as UTF-8 text ({exc})", path=rel)
            return Entry(rel, stat, None, error, read_at)

    def _put(self, entry: Entry) -> None:
        self._drop(entry.path)
        self.entries[entry.path] = entry
        self._by_title.setdefault(title_key(node_mod.title_from_path(entry.path)), []).append(
            entry.path)
        if entry.node is not None:
            self._by_id.setdefault(entry.node.id, []).append(entry.path)

    def _drop(self, rel: str) -> None:
        old = self.entries.pop(rel, None)
        if old is None:
            return
        _unlink_index(self._by_title, title_key(node_mod.title_from_path(rel)), rel)
        if old.node is not None:
            _unlink_index(self._by_id, old.node.id, rel)

    # -- reading ------------------------------------------------------------------------
    def nodes(self) -> Iterator[Node]:
        for entry in self.entries.values():
            if entry.node is not None:
                yield entry.node

    def errors(self) -> list[OskError]:
        return [entry.error for entry in self.entries.values() if entry.error is not None]

    def duplicate_ids(self) -> dict[str, list[str]]:
        return {nid: sorted(paths) for nid, paths in self._by_id.items() if len(paths) > 1}

    def duplicate_titles(self) -> dict[str, list[str]]:
        return {key: sorted(paths) for key, paths in self._by_title.items() if len(paths) > 1}

    def paths_with_title(self, title: str) -> list[str]:
        return sorted(self._by_title.get(title_key(title), []))

    def get(self, ref: str) -> Node:
        """A node by id or title. Refuses while its id or title is claimed by two files."""
        paths = self._by_id.get(ref) or self._by_title.get(title_key(ref))
        if not paths:
            raise NodeNotFound(
                f"no node with id or title {ref!r}; search first, then use a returned title or id",
                ref=ref,
            )
        if len(paths) > 1:
            raise _ambiguity(ref, sorted(paths), by_id=ref in self._by_id)
        entry = self.entries[paths[0]]
        if entry.node is None:
            assert entry.error is not None
            raise entry.error
        twins = self._by_id.get(entry.node.id, [])
        if len(twins) > 1:
            raise _ambiguity(entry.node.id, sorted(twins), by_id=True)
        return entry.node

    def by_path(self, rel: str) -> Node | None:
        entry = self.entries.get(rel)
        return entry.node if entry else None


def _ambiguity(ref: str, paths: list[str], *, by_id: bool) -> OskError:
    listing = ", ".join(paths)
    if by_id:
        return DuplicateId(
            f"id {ref} is carried by {len(paths)} files ({listing}); osk will not read or write "
            f"it until a person keeps one and removes or re-ids the others",
            node_id=ref, paths=paths,
        )
    return TitleError(
        f"title {ref!r} is claimed by {len(paths)} files after case folding ({listing}); "
        f"a person must rename all but one",
        title=ref, paths=paths,
    )


def _walk_dir(directory: Path, prefix: str) -> Iterator[tuple[str, StatKey]]:
    try:
        with os.scandir(directory) as it:
            entries = list(it)
    except (FileNotFoundError, NotADirectoryError):
        return
    for entry in entries:
        if entry.name.startswith("."):
            continue
        rel = f"{prefix}/{entry.name}"
        if entry.is_dir(follow_symlinks=False):
            yield from _walk_dir(Path(entry.path), rel)
        elif entry.name.endswith(".md") and entry.is_file(follow_symlinks=False):
            try:
                yield rel, _stat_key(entry.stat(follow_symlinks=False))
            except FileNotFoundError:
                continue


def _stat_key(stat: os.stat_result) -> StatKey:
    return (stat.st_size, stat.st_mtime_ns, stat.st_ino)


_RACE_WINDOW_NS = 2_000_000_000  # coarse filesystems (FAT: 2 s) can hide a same-size rewrite


def _settled(entry: Entry) -> bool:
    """Whether the bytes we hold are final for this stat.

    A file read within the clock's granularity of its mtime may be rewritten again with an
    identical (size, mtime). Such an entry is re-read on each refresh until one read happens
    safely after the window; from then on the stat alone vouches for it.
    """
    return entry.read_at_ns - entry.stat[1] >= _RACE_WINDOW_NS


def _unlink_index(index: dict[str, list[str]], key: str, rel: str) -> None:
    paths = index.get(key)
    if paths and rel in paths:
        paths.remove(rel)
        if not paths:
            del index[key]


def _content_differs(old: Entry, new: Entry) -> bool:
    old_text = old.node.text if old.node else None
    new_text = new.node.text if new.node else None
    return old_text != new_text or (old.error is None) != (new.error is None)
