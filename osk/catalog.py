"""The vault's node set: which files are nodes, and how a title or id finds one.

The catalog parses each node file once and re-parses only files whose (size, mtime, inode)
changed, so a long-lived server pays for a change, not for the vault. ``refresh`` reports what
changed so the search index can update just those postings.
"""

from __future__ import annotations

import os
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
            if old is None or old.stat != stat or _in_race_window(stat):
                entry = self._load(rel, stat)
                if old is None:
                    added.append(rel)
                elif old.stat != stat or _content_differs(old, entry):
                    changed.append(rel)
                self.entries[rel] = entry
        removed = [rel for rel in self.entries if rel not in seen]
        for rel in removed:
            del self.entries[rel]
        result = Changes(tuple(added), tuple(changed), tuple(removed))
        if result:
            self._reindex()
        return result

    def note_written(self, rel: str) -> None:
        """Record a file osk itself just wrote, without waiting for the next walk."""
        path = self.vault.abs(rel)
        try:
            stat = _stat_key(path.stat())
        except FileNotFoundError:
            self.entries.pop(rel, None)
        else:
            self.entries[rel] = self._load(rel, stat)
        self._reindex()

    def note_removed(self, rel: str) -> None:
        self.entries.pop(rel, None)
        self._reindex()

    def _walk(self) -> Iterator[tuple[str, StatKey]]:
        for space in SPACES:
            top = self.vault.root / space
            if top.is_dir():
                yield from _walk_dir(top, space)

    def _load(self, rel: str, stat: StatKey) -> Entry:
        try:
            text = self.vault.abs(rel).read_text(encoding="utf-8")
            return Entry(rel, stat, node_mod.parse(rel, text), None)
        except ContractError as exc:
            return Entry(rel, stat, None, exc)
        except (UnicodeDecodeError, OSError) as exc:
            return Entry(rel, stat, None,
                         ContractError(f"{rel}: unreadable as UTF-8 text ({exc})", path=rel))

    def _reindex(self) -> None:
        by_id: dict[str, list[str]] = {}
        by_title: dict[str, list[str]] = {}
        for rel, entry in self.entries.items():
            by_title.setdefault(title_key(node_mod.title_from_path(rel)), []).append(rel)
            if entry.node is not None:
                by_id.setdefault(entry.node.id, []).append(rel)
        self._by_id, self._by_title = by_id, by_title

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


def _in_race_window(stat: StatKey) -> bool:
    """A file modified within the clock's granularity may change again with the same stat."""
    import time

    return time.time_ns() - stat[1] < _RACE_WINDOW_NS


def _content_differs(old: Entry, new: Entry) -> bool:
    old_text = old.node.text if old.node else None
    new_text = new.node.text if new.node else None
    return old_text != new_text or (old.error is None) != (new.error is None)
