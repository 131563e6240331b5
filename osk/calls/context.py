"""A session's context on a vault: what its reads and its writes share.

The vault, its catalog and the freshness that keeps the catalog exact (``osk.store.freshness``), the
session (key, scope, isolation), the recheck table, what the session has read, and the catalog
changes waiting for the search index. ``osk.engine.core`` holds one per session and hands it
to the write path (``osk.writes.write``) for each write; a process that only reads (``osk
search``) builds it without importing the write path.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from osk.provenance.pairs import ReadLog
from osk.provenance.rechecks import Rechecks
from osk.provenance.sessions import Routing, Session
from osk.store.catalog import Catalog, Changes
from osk.store.freshness import Freshness
from osk.store.fsutil import StatKey, stat_key
from osk.store.ledger import Ledger
from osk.store.node import Node
from osk.store.vault import MARKER, Vault

USER = "user"
AGENT = "agent"


@dataclass
class WriteContext:
    """What a session's reads and writes need: the vault, its catalog, the session and its
    caches (the write path's name for it: every write takes one)."""

    vault: Vault
    catalog: Catalog
    session: Session
    actor: str  # "agent" (MCP) or "user" (a person at the terminal)
    rechecks: Rechecks
    reads: ReadLog
    routing: Routing
    seen: list[Changes] = field(default_factory=list)  # catalog changes, for the search index
    fresh: Freshness = field(init=False)
    _settings_stat: StatKey | None = None
    _settings_path: str = field(init=False)  # made once: a Path join costs what the stat does
    _ledgers: dict[str, Ledger] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.fresh = Freshness(self.vault, self.catalog)
        self._settings_path = str(self.vault.root / MARKER)

    def ledger(self, name: str) -> Ledger:
        """One Ledger object per name, so its stat-keyed cache survives between writes."""
        if name not in self._ledgers:
            self._ledgers[name] = Ledger(self.vault, name)
        return self._ledgers[name]

    def settings_unmoved(self) -> bool:
        """Whether osk.toml is as ``reload_settings`` last read it (one stat)."""
        return stat_key(self._settings_path) == self._settings_stat

    def reload_settings(self) -> None:
        """Pick up a change to osk.toml (isolation, shared scopes) made while we run."""
        stat = stat_key(self._settings_path)
        if stat == self._settings_stat:
            return
        settings = self.vault.settings()
        self.session = replace(self.session, isolation=settings.scope_isolation,
                               shared=frozenset(settings.shared_scopes))
        self._settings_stat = stat

    @property
    def author(self) -> str:
        return USER if self.actor == USER else AGENT

    @property
    def audit_actor(self) -> str:
        return USER if self.actor == USER else f"{AGENT}:{self.session.key.key}"

    def note(self, added: Sequence[str] = (), changed: Sequence[str] = (),
             removed: Sequence[str] = (), written: Node | None = None) -> None:
        """Tell the catalog (and, through ``seen``, the search index) what this write did;
        ``written``: the node parsed from the text just written (the catalog need not parse
        it again)."""
        for rel in (*added, *changed):
            self.catalog.note_written(rel, written if written is not None
                                      and written.path == rel else None)
        for rel in removed:
            self.catalog.note_removed(rel)
        self.fresh.noted(added, removed)
        self.seen.append(Changes(tuple(added), tuple(changed), tuple(removed)))

    def keep(self, changes: Changes) -> None:
        if changes:
            self.seen.append(changes)

    def freshen(self, rels: Iterable[str]) -> None:
        """Re-read these node files now if they changed (see ``Freshness.freshen``)."""
        self.keep(self.fresh.freshen(rels))

    def take_changes(self) -> Changes:
        """Everything the catalog saw change since the last call, merged, for the index."""
        added: dict[str, None] = {}
        changed: dict[str, None] = {}
        removed: dict[str, None] = {}
        for item in self.seen:
            for rel in item.removed:
                added.pop(rel, None)
                changed.pop(rel, None)
                removed[rel] = None
            for rel in item.added:
                removed.pop(rel, None)
                added[rel] = None
            for rel in item.changed:
                if rel not in added:
                    changed[rel] = None
        self.seen.clear()
        return Changes(tuple(added), tuple(changed), tuple(removed))
