"""The rounds' index's last look at the raw records, kept for processes without a watch.

A process without a kernel watch (the prompt-submit and Stop hooks, a fresh `osk search`, any
process where no complete report can be had) would stat every raw record file before each
query to find what another process appended (``RoundIndex._records_on_disk``): work that
grows with the vault (500 stats at 200,000 rounds, 2,250 at a million). Instead, whenever such
a look finds the index agreeing with the records, it leaves beside the index what it saw
(``FILE``, device state), and the next process compares only:

- the records' stamp (``osk.store.generation.RECORDS``), taken before that look listed the
  folders: every osk writer of a record (a capture, ``append_raw``, ``osk redact``, a sync
  landing) bumps it after the record's bytes are on disk, so a stamp unmoved means no osk
  writer changed a record the look could have missed;
- the stat of ``_raw`` and of each of its project folders, each taken before the folder was
  listed: a record file created, removed or replaced (git, most editors save by renaming)
  moves its folder;
- the stats of the records that changed less than ``RACE_WINDOW_NS`` before the look (a
  file changed again within its mtime's granularity may keep its stat: those few are stat-ed
  again, as a walk would have);
- the index file's stats and the exclusions the look agreed with.

All unmoved: nothing changed that a walk would find, bar a record edited by hand in place
(keeping the file) after it settled, or a capture killed between its bytes and its stamp: a
look whose walk began more than ``WALK_EVERY_NS`` ago is not trusted, so those are found
within ten minutes (a watching process, the MCP server, sees an edit at once; docs/search.md).
A look taken while a folder had changed within the race window is not kept: a file created in
the same clock tick might not have moved it.

When the stamp moved by this process's own bumps alone (``generation.own_bumps``: the Stop
hook after its capture), the look holds for every other record: the process reads the records
it wrote and leaves a look that extends the old one (its walk's time kept).

Standard library only: the hooks read it.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from osk.capture.exclusions import Excluded
from osk.store import generation
from osk.store.fsutil import RACE_WINDOW_NS, StatKey, folder_stat, replace_unsynced, stat_key
from osk.store.vault import Vault

FILE = "rounds-look.json"  # beside the index file
FORMAT = 2  # 2: when the walk it extends began (``walked``)
# A look whose last walk (a stat of every record) began longer ago than this is not trusted:
# what no stamp nor folder tells of (a record edited by hand in place, a capture killed between
# its bytes and its stamp) is found within it, at one walk per vault per period, not per query.
WALK_EVERY_NS = 600_000_000_000

Folders = dict[str, Any]  # "" (``_raw``) or a project folder's name -> its folder_stat
Disk = Mapping[str, tuple[str, tuple[int, int, int]]]  # rel -> (key, stat key)
Begun = tuple[int, generation.Stamp]  # when a look began (ns) and the records' stamp then
# what ``holds`` finds: records held, this process's own changed records, when it began, the look
Held = tuple[int, Disk, Begun, dict[str, Any]]


def begin(vault: Vault) -> Begun:
    """What a look records before it lists the folders (so a change during it moves them)."""
    return time.time_ns(), generation.current(vault, generation.RECORDS)


def folder(path: str | os.PathLike[str], *, top: bool) -> Any:
    """A raw folder's stat as a look records it (JSON's lists), None when not a folder."""
    found = folder_stat(path, top=top)
    return None if found is None else list(found)


def holds(vault: Vault, index: Path, hidden: Excluded,
          file_stats: Callable[[], tuple[StatKey | None, StatKey | None]]) -> Held | None:
    """When the last look still holds: the records the index holds, those this process
    changed since (the stamp moved by its own bumps alone, ``generation.own_bumps``: to be
    read before the index agrees again; none when the stamp did not move), when this check
    began and the look. Else None: walk."""
    look = _read(index.with_name(FILE))
    if look is None:
        return None
    try:
        return _holds(vault, look, hidden, file_stats)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None  # a look damaged by hand: the next walk leaves a whole one


def _holds(vault: Vault, look: dict[str, Any], hidden: Excluded,
           file_stats: Callable[[], tuple[StatKey | None, StatKey | None]]) -> Held | None:
    begun = begin(vault)  # the stamp before the own records' stats, as a walk takes it
    if not 0 <= begun[0] - int(look["walked"]) <= WALK_EVERY_NS:  # (or the clock went back)
        return None
    own = {} if list(begun[1]) == look["stamp"] else _own_since(vault, look["stamp"], begun[1])
    if own is None:
        return None
    root = vault.raw_dir
    folders: Folders = look["folders"]
    for name, seen in folders.items():
        if folder(root / name if name else root, top=not name) != seen:
            return None
    for rel, seen in look["unsettled"].items():
        if rel not in own and _listed(vault.root / rel) != seen:  # own ones are read again
            return None
    if _exclusions(hidden) != look["excluded"] or _stats(file_stats()) != look["file"]:
        return None
    return int(look["records"]), own, begun, look


def _own_since(vault: Vault, seen: list[int], stamp: generation.Stamp) -> Disk | None:
    """The records this process's own bumps told of since the stamp was ``seen``, with their
    stats now; None when another process bumped too (or the stamp is another file)."""
    inode, size, _ = stamp
    if inode != seen[0] or not 0 < size - seen[1] <= generation.OWN_KEPT:
        return None
    mine = generation.own_bumps(vault, generation.RECORDS, inode)
    told = {mine.get(end, "") for end in range(seen[1] + 1, size + 1)}
    own: dict[str, tuple[str, tuple[int, int, int]]] = {}
    for rel in told:
        parts = rel.split("/")
        if len(parts) != 3 or not rel.endswith(".md"):  # another's bump, or not a record
            return None
        stat = _listed(vault.root / rel)
        if stat is None:  # gone: its folder moved, and a walk finds that
            return None
        own[rel] = (parts[1], (stat[0], stat[1], stat[2]))
    return own


def keep(vault: Vault, index: Path, begun: Begun, folders: Folders,
         records: Mapping[str, Any], count: int, hidden: Excluded,
         file_stats: tuple[StatKey | None, StatKey | None], walked: int | None = None) -> None:
    """Record a look that found the index (whose stats are ``file_stats``, taken once it
    agreed) holding ``count`` records, agreeing with ``records`` (rel -> stat key: every record,
    or those whose stats the look checked), unless a folder changed within the race window
    before it began. ``walked``: when the walk this look extends began (None: this one
    walked)."""
    seen_ns, stamp = begun
    settled = seen_ns - RACE_WINDOW_NS
    if any(stat is not None and stat[0] >= settled for stat in folders.values()):
        return  # a name added in the same tick as its mtime may not have moved it
    look = {"format": FORMAT, "stamp": list(stamp), "folders": folders,
            "unsettled": {rel: list(stat) for rel, stat in records.items()
                          if stat[1] >= settled},
            "excluded": _exclusions(hidden), "file": _stats(file_stats), "records": count,
            "walked": seen_ns if walked is None else walked}
    path = index.with_name(FILE)
    try:
        replace_unsynced(path, json.dumps(look, separators=(",", ":")))
    except OSError:
        path.unlink(missing_ok=True)  # a full disk: no look, the next process walks


def _read(path: Path) -> dict[str, Any] | None:
    try:
        look = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return look if isinstance(look, dict) and look.get("format") == FORMAT else None


def _listed(path: Path) -> list[int] | None:
    """A record's stat key as ``_records_on_disk`` lists it (not following a link), as JSON
    holds it."""
    key = stat_key(path, follow_symlinks=False)
    return None if key is None else list(key)


def _exclusions(hidden: Excluded) -> list[list[str]]:
    return [sorted(hidden.records), sorted(hidden.rounds)]


def _stats(stats: tuple[StatKey | None, StatKey | None]) -> list[list[int] | None]:
    return [None if stat is None else list(stat) for stat in stats]
