"""Freshness under the mutation lock: the write path's cheap check that the catalog is exact.

A write must see every other osk process's write before it checks its rules (title uniqueness,
hub presence, node paths, the bytes of the files it depends on), but a full catalog refresh
stats every node file. ``Freshness`` keeps the catalog exact for what a write checks with a
folder check on every write, a re-listing of folders whose stat changed, a re-read of each file
the write depends on (``freshen``), and the full refresh at most once a second. Why that is
exact is argued in the class docstring below. ``osk.writes.write`` holds one per
``WriteContext`` and runs ``ensure`` inside ``locked``.

A long-running process can have the kernel report hand edits instead (``watch``,
``osk.store.watch``): the periodic look and the folder check (``quick``, on every write and
after another process's) then re-stat only the files named in the report, and the folders that
hold them (with the Space folders), not every folder of the vault.

Reads run the same folder check (``quick``) outside the lock, but only when the vault
generation moved since the last look (``behind``, one stat; ``osk.store.generation``). That is exact
for every osk write acknowledged before the read began: its files were on disk before its bump,
the read takes the stamp before it looks, and a write still under way bumps afterwards.
"""

from __future__ import annotations

import os
import stat as stat_mod
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from osk.store import generation
from osk.store.catalog import Catalog, Changes, read_is_final
from osk.store.fsutil import RACE_WINDOW_NS, folder_stat, node_listing
from osk.store.vault import SPACES, Vault
from osk.store.watch import Watch

FULL_REFRESH_SECONDS = 1.0  # the periodic look for hand edits runs at most this often
SWEEP_FILES = 4096  # node files one periodic look re-stats (all of them, up to this many)
RACE_NS = RACE_WINDOW_NS  # a file this fresh may change again without its stat changing
FINE_RACE_NS = 100_000_000  # the same for a folder on a file system with fine timestamps

StatKey = tuple[int, ...]
UNVOUCHED = "list"  # a look's folder "stat" that no folder has (``Freshness.look``)


@dataclass
class _Folder:
    stat: StatKey  # taken before the listing, so a later change shows as a different stat
    seen_ns: int  # when that stat was taken
    # Its node file names, each ended by a NUL (no file name holds one): one string, where
    # a set of them and the stats of the listing were 220 bytes a node (22 MB at 100,000),
    # for a set made again only when the folder is listed anew or this process writes in it.
    names: str
    folders: set[str]  # sub-folder names
    path: Path  # where it was listed: kept, as making a Path costs what its stat does

    @property
    def files(self) -> set[str]:
        return set(self.names.split("\0")[:-1])

    def keep(self, files: Iterable[str]) -> None:
        self.names = "".join(f"{name}\0" for name in files)

    # One name in or out, in the string itself (a search and a copy in C): a set made and
    # joined again cost a write 2.5 ms in a folder of 10,000 files.
    def add(self, name: str) -> None:
        if f"\0{name}\0" not in f"\0{self.names}":
            self.names += f"{name}\0"

    def discard(self, name: str) -> None:
        self.names = f"\0{self.names}".replace(f"\0{name}\0", "\0", 1)[1:]


class Freshness:
    """Keeps the catalog exact for what a write checks, without stat-ing every node file.

    A full catalog refresh stats every node file (20-30 ms at 5,000 nodes): too slow for every
    write. Under the mutation lock a write instead stats the Space folders only (about one per
    cluster) and re-lists a folder whose stat changed, then re-reads just the files the write
    depends on (``freshen``). The full refresh still runs when the last one is a second old.

    Why this is exact for the write rules:

    - Every change another osk process makes to a node file (create, update, move, delete,
      approve, revert, sync landing) is a rename or unlink inside a Space folder (atomic_write
      replaces a file through a new inode), which changes that folder's stat; the lock means no
      osk write runs while we look. So a folder whose stat is unchanged holds exactly the files,
      and the same inodes, it held when it was last listed, and a changed folder is re-listed
      and its files re-stat-ed. Title uniqueness (titles are file names), hub presence, and the
      path of every node are therefore as exact as a full walk would make them.
    - A folder or file changed within the file system's timestamp granularity of when we
      looked at it may change again without its stat changing: such a folder is re-listed
      (``_racy_folder``), and such a file re-read (``RACE_NS``), on every check until we look
      at it late enough.
    - What a folder stat cannot show is a person editing a file's bytes in place with an
      editor. Such an edit is never serialised with osk's writes (editors take no osk lock), so
      it can land a moment after any check anyway. The files a write's outcome depends on are
      re-stat-ed individually before use (``freshen``: the node being changed, the nodes it
      cites, the citations the recheck gate reads), so the write itself never acts on stale
      bytes; any other file is re-read by the periodic look (``periodic``): within a second in
      a vault of up to ``SWEEP_FILES`` node files, within ⌈files / SWEEP_FILES⌉ looks (one a
      second at most) in a larger one.
    """

    def __init__(self, vault: Vault, catalog: Catalog) -> None:
        self.vault = vault
        self.catalog = catalog
        self.full_at = float("-inf")  # monotonic time of the last full refresh
        self.stamp: generation.Stamp | None = None  # the generation the last look began at
        self.held = False  # a batch holds the mutation lock and made the catalog fresh
        self._folders: dict[str, _Folder] = {}
        self._listings = 0  # bumped whenever a folder is listed anew or forgotten
        self._looked: tuple[tuple[int, generation.Stamp], dict[str, object]] | None = None
        self._turn: list[str] = []  # node files the periodic sweep has still to stat
        self._watch: Watch | None = None  # the kernel's report of changes (``watch``)
        # what the kernel reported that no look has taken yet (``idle`` reads the report
        # without looking); None: the report may have lost a change
        self._report: set[str] | None = set()
        self._vouched_ns: int | None = None  # when the last look that took the report began

    # -- the checks --------------------------------------------------------------------------
    @property
    def looked_fully(self) -> bool:
        """Whether a full refresh (or the periodic look) has run: before one, only a full
        refresh makes the catalog exact."""
        return self.full_at != float("-inf")

    def ensure(self, *, full: bool = False) -> Changes:
        """What a write does under the lock: a full refresh if asked, the periodic look if
        due, else the folder check."""
        if full:
            return self.full()
        if time.monotonic() - self.full_at >= FULL_REFRESH_SECONDS:
            return self.periodic()
        return self.quick()

    def periodic(self) -> Changes:
        """The once-a-second look for what no osk writer announces (hand edits, a ``git``
        run by hand): a full refresh while the vault holds at most ``SWEEP_FILES`` node files.

        In a larger vault a full refresh costs a stat of every file (0.35-0.9 s at 50,000),
        so instead: the folder check, which sees every file created, removed or renamed
        anywhere (git and most editors save by rename), then the stat of the next
        ``SWEEP_FILES`` files in turn, which finds an edit made in place within
        ⌈files / SWEEP_FILES⌉ looks. Racy files are re-read as a full refresh would.
        """
        if self._watch is not None:
            return self._watched()
        if len(self.catalog.entries) <= SWEEP_FILES or not self._folders:
            return self.full()
        started = time.monotonic()
        found = self.quick()
        if not self._turn:
            self._turn = list(self.catalog.entries)
        chunk, self._turn = self._turn[-SWEEP_FILES:], self._turn[:-SWEEP_FILES]
        swept = self.freshen(chunk)
        self.full_at = started
        self.catalog.save_if_due()
        return Changes(found.added, found.changed + swept.changed, found.removed + swept.removed)

    def watch(self) -> bool:
        """Have the kernel report changes to node files from now on (``osk.store.watch``), so
        the periodic look re-stats only the files it names instead of sweeping; the next full
        look watches every folder before listing it. False where no complete report can be
        had (then the sweep stays)."""
        if self._watch is None:
            self._watch = Watch.start(self.vault.root)
        return self._watch is not None

    def _watched(self) -> Changes:
        """The periodic look with a watch: the folder check of the folders the kernel reported
        a change in (files created, removed, renamed; ``_reported``) and a re-stat of the known
        files it reported changed since the last look.
        A report that may have lost a change ends the watch: one full look, then the sweep."""
        assert self._watch is not None
        started = time.monotonic()
        touched = self._take_report()
        if touched is None or not self._folders:
            self._watch.close()
            self._watch = None
            return self.full()
        found = self._reported(touched)
        entries = self.catalog.entries
        swept = self.freshen(sorted(rel for rel in touched if rel in entries))
        self.full_at = started
        self.catalog.save_if_due()
        return Changes(found.added, found.changed + swept.changed, found.removed + swept.removed)

    def idle(self) -> bool:
        """Whether the periodic look would find no change, known without it; then it counts
        as done. So while the kernel watches every folder listed and has reported nothing since
        the last look (what it reported is kept for the next look), no osk writer moved the
        generation, a Space folder absent then is still absent (the vault above them is not
        watched: one made shows only in its stat; one removed or moved is reported), and none
        was listed too soon after a change (``_racy_folder``: the look lists it again). A few
        system calls, where the look costs a server's call at an agent's pace 0.3 ms of CPU.
        """
        if self._watch is None or not self._folders or self.behind():
            return False
        touched = self._read_report()
        if touched is None or touched:
            return False
        for space in SPACES:
            known = self._folders.get(space)
            if known is None and folder_stat(self.vault.root / space, top=True) is not None:
                return False
            if known is not None and _racy_folder(known):
                return False
        self.full_at = time.monotonic()
        self.catalog.save_if_due()
        return True

    def _read_report(self) -> set[str] | None:
        """What the kernel reported since the last look (None: it may have lost a change)."""
        assert self._watch is not None
        touched = self._watch.drain()
        if touched is None or self._report is None:
            self._report = None
        else:
            self._report |= touched
        return self._report

    def _take_report(self) -> set[str] | None:
        """``_read_report``, taken by a look: once it hands over what the report names, the
        catalog holds every file as it was when the report was read (``look``)."""
        self._vouched_ns = time.time_ns()  # before reading: a change made after is reported
        touched = self._read_report()
        self._report = set()
        return touched

    def full(self) -> Changes:
        """Stat every node file and hand the stats to ``Catalog.refresh``: one walk lists the
        folders and stats their files (each folder's stat taken before its listing, so a change
        made while the walk runs shows up at the next ``quick``)."""
        self.stamp = generation.current(self.vault)  # before looking: see osk.store.generation
        started = time.monotonic()  # a hand edit made during the walk may be missed
        if self._watch is not None and self._take_report() is None:  # this look sees all
            self._watch.close()
            self._watch = None
        self._folders = {}
        self._listings += 1
        found: list[tuple[str, tuple[int, int, int]]] = []
        for space in SPACES:
            self._scan(space, found)
        changes = self.catalog.refresh(dict(found))
        self.full_at = started
        return changes

    def behind(self) -> bool:
        """Whether an osk process has written since the last look began (one ``stat``)."""
        return generation.current(self.vault) != self.stamp

    def quick(self) -> Changes:
        """Stat the known folders; re-list changed ones and re-read what changed in them.

        With a watch, the kernel's report instead (``_watched``): every change an osk writer
        makes is a rename or unlink it reported when it happened, so before that writer let
        go of the lock or bumped the generation; the folders nothing was reported in are not
        stat-ed (one per cluster: what grew with the vault on every write and read)."""
        if self._watch is not None and self._folders:
            return self._watched()
        self.stamp = generation.current(self.vault)
        added: list[str] = []
        changed: list[str] = []
        removed: list[str] = []
        for space in SPACES:
            self._check(space, added, changed, removed)
        return Changes(tuple(added), tuple(changed), tuple(removed))

    def _reported(self, touched: set[str]) -> Changes:
        """``quick`` where the kernel reported something: the Space folders (the vault above
        them is not watched) and each folder that holds a reported path, without descending
        into folders nothing was reported in: every folder is watched before it is listed,
        so one that reported nothing holds what it held when it was listed. Costs what
        changed, where ``quick`` stats every folder of the vault."""
        self.stamp = generation.current(self.vault)
        added: list[str] = []
        changed: list[str] = []
        removed: list[str] = []
        folders = {*SPACES, *(rel.rpartition("/")[0] for rel in touched if "/" in rel)}
        for rel in sorted(folders, key=lambda folder: (folder.count("/"), folder)):
            self._check(rel, added, changed, removed, deep=False)
        return Changes(tuple(added), tuple(changed), tuple(removed))

    def freshen(self, rels: Iterable[str]) -> Changes:
        """Re-read node files whose stat differs from the catalog's, or that are fresh enough
        to have changed unseen, or whose bytes were read too soon after their mtime to vouch
        for them (the catalog's own race guard)."""
        changed: list[str] = []
        removed: list[str] = []
        now = time.time_ns()
        root = str(self.vault.root)
        for rel in dict.fromkeys(rels):
            entry = self.catalog.entries.get(rel)
            stat = _file_stat(os.path.join(root, rel))  # a str path: a sweep stats thousands
            if stat is None:
                if entry is not None:
                    self.catalog.note_removed(rel)
                    removed.append(rel)
                continue
            if entry is None or entry.stat != stat or now - stat[1] < RACE_NS \
                    or not read_is_final(entry):
                self.catalog.note_written(rel)
                changed.append(rel)
        return Changes((), tuple(changed), tuple(removed))

    def look(self) -> dict[str, object] | None:
        """What a process that cannot afford this look may check instead
        (``osk.reads.quick_search``): the generation stamp this look began at, when it began,
        and the stat of every folder it listed (None for a Space folder that was absent;
        ``UNVOUCHED`` for one listed too soon after a change to vouch for it, ``_racy_folder``:
        such a process lists it itself, as this look would again). None when no full look has
        run. (A look that left racy folders out altogether was no look: a server's call right
        after its write, which lists the folder it wrote in, left none for the next fresh
        search until its next call, and that search opened the engine.)

        When it began: its oldest listing, or with a watch the last look that took the
        kernel's report, which vouches for every file from then on. By its oldest listing
        alone, a look never vouched for a file written after that listing (a node the server
        wrote), and the server wrote its look to disk again at every call from then on."""
        if not self.looked_fully or not self._folders or self.stamp is None:
            return None
        # Kept until a folder is listed anew or forgotten, or the stamp moves: a look comes
        # with nearly every call at an agent's pace (0.6 ms at 200 folders), and a folder
        # that could vouch once still can (only a newer listing is racy).
        key = (self._listings, self.stamp)
        if self._looked is None or self._looked[0] != key:
            folders: dict[str, object] = {space: None for space in SPACES}
            folders.update({rel: UNVOUCHED if _racy_folder(folder) else list(folder.stat)
                            for rel, folder in self._folders.items()})
            seen = min(folder.seen_ns for folder in self._folders.values())
            self._looked = (key, {"stamp": list(self.stamp), "seen_ns": seen,
                                  "folders": folders, "sweep": SWEEP_FILES})
        look = dict(self._looked[1])  # the caller may add to it
        if self._watch is not None and self._vouched_ns is not None:
            look["seen_ns"] = max(cast(int, look["seen_ns"]), self._vouched_ns)
        return look

    def noted(self, added: Sequence[str], removed: Sequence[str]) -> None:
        """Keep the folder listings in step with files this process wrote or removed."""
        for rel in added:
            folder, _, name = rel.rpartition("/")
            if folder in self._folders:
                self._folders[folder].add(name)
        for rel in removed:
            folder, _, name = rel.rpartition("/")
            if folder in self._folders:
                self._folders[folder].discard(name)

    # -- folders ------------------------------------------------------------------------------
    def _scan(self, rel: str, found: list[tuple[str, tuple[int, int, int]]]) -> None:
        """Record ``rel`` and everything under it; append its node files to ``found``. A
        watched vault's folder is watched before it is listed, so no change falls between."""
        if self._watch is not None:
            self._watch.add(rel)
        got = _list_folder(self.vault.root / rel, top="/" not in rel)
        if got is None:
            return
        listed, stats = got
        self._folders[rel] = listed
        self._listings += 1
        found.extend((f"{rel}/{name}", stat) for name, stat in stats.items())
        for name in sorted(listed.folders):
            self._scan(f"{rel}/{name}", found)

    def _check(self, rel: str, added: list[str], changed: list[str],
               removed: list[str], *, deep: bool = True) -> None:
        """Re-list ``rel`` if its stat moved (or may have moved unseen), then its sub-folders:
        all of them (``deep``), or, for a watched look, only those of a folder re-listed (a
        folder removed and made again under its name is listed and watched anew)."""
        known = self._folders.get(rel)
        path = known.path if known is not None else self.vault.root / rel
        stat = folder_stat(path, top="/" not in rel)
        if stat is None:
            if known is not None:
                self._vanish(rel, removed)
            return
        if known is None:
            found: list[tuple[str, tuple[int, int, int]]] = []
            self._scan(rel, found)
            self._take(found, added, changed)
            return
        if known.stat == stat and not _racy_folder(known):
            for name in sorted(known.folders) if deep else ():
                self._check(f"{rel}/{name}", added, changed, removed)
            return
        if self._watch is not None:  # a folder made again under this name has no watch yet
            self._watch.add(rel)
        got = _list_folder(path, top="/" not in rel)
        if got is None:
            self._vanish(rel, removed)
            return
        listed, stats = got
        self._folders[rel] = listed
        self._listings += 1
        for name in known.files - stats.keys():
            self._remove(f"{rel}/{name}", removed)
        self._take([(f"{rel}/{name}", stat) for name, stat in stats.items()], added, changed)
        for name in known.folders - listed.folders:
            self._vanish(f"{rel}/{name}", removed)
        for name in sorted(listed.folders):
            self._check(f"{rel}/{name}", added, changed, removed, deep=deep)

    def _take(self, files: Iterable[tuple[str, tuple[int, int, int]]], added: list[str],
              changed: list[str]) -> None:
        """Read the listed files that the catalog lacks or holds at another stat."""
        entries = self.catalog.entries
        for rel, stat in files:
            entry = entries.get(rel)
            if entry is None:
                self.catalog.note_written(rel)
                added.append(rel)
            elif entry.stat != stat:
                self.catalog.note_written(rel)
                changed.append(rel)

    def _remove(self, rel: str, removed: list[str]) -> None:
        if rel in self.catalog.entries:
            self.catalog.note_removed(rel)
            removed.append(rel)

    def _vanish(self, rel: str, removed: list[str]) -> None:
        """A folder is gone: forget it and every node file the catalog holds under it."""
        prefix = rel + "/"
        for name in [f for f in self._folders if f == rel or f.startswith(prefix)]:
            del self._folders[name]
            self._listings += 1
        for path in [p for p in self.catalog.entries if p.startswith(prefix)]:
            self._remove(path, removed)


def _racy_folder(folder: _Folder) -> bool:
    """Whether a change made just after ``folder`` was listed could leave its stat as it was.

    That needs the change to land in the same timestamp tick as the folder's last one. A file
    system whose timestamps are not whole multiples of 10 ms records them finely, and its
    clock ticks at most every 10 ms (Linux, macOS, Windows), so 100 ms is a safe margin there;
    anything coarser (FAT's 2 s, HFS+'s 1 s) gets the catalog's 2 s.
    """
    changed = max(folder.stat[0], folder.stat[1])
    window = FINE_RACE_NS if changed % 10_000_000 else RACE_NS
    return folder.seen_ns - changed < window


def _list_folder(path: Path, *, top: bool
                 ) -> tuple[_Folder, dict[str, tuple[int, int, int]]] | None:
    """A folder's listing (its node files and sub-folders, chosen exactly as
    ``catalog.walk_nodes`` walks), and the stat of each of its node files."""
    stat = folder_stat(path, top=top)
    seen = time.time_ns()
    if stat is None:
        return None
    got = node_listing(path)
    if got is None:
        return None
    folders, file_stats = got
    folder = _Folder(stat, seen, "", folders, path)
    folder.keep(file_stats)
    return folder, file_stats


def _file_stat(path: str | Path) -> tuple[int, int, int] | None:
    """The catalog's stat key for a node file (size, mtime, inode), or None when missing."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    if not stat_mod.S_ISREG(st.st_mode):
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino)
