"""The rechecks ledger as an in-memory table: one citing node's current pair set per subject,
with the indexes a recheck pass looks things up by (who cites a node, what a node cites, which
citing nodes use a raw record or a project file) and the most-cited count they keep.

Ledger shape (``_ledger/rechecks.jsonl``): one record per write of a citing node, subject
``citing:<node id>``, holding that node's complete pair set, so a write costs one append and two
devices that change one node's citations concurrently produce a reported fork. Data:

- ``citing`` (id), ``title`` (for people reading the ledger), ``via`` (create, update, correct,
  recite), ``corrected`` (the body hash the node had after its latest recheck correction, or
  null: a target whose current body came from a correction makes its citers' candidates
  ``cascade``), and ``pairs``: ``[{target, kind, link, root, citing_hash, target_hash, via}]``.

Target keys: ``node:<id>`` (ids survive moves), ``raw:<coordinate>``, ``file:<key>:<path>``
(``root`` records the worktree the path resolved against on the writing device).

A fork (concurrent records for one citing node) is merged: the pairs every branch agrees on
stand, the rest are candidates until the next re-citation or correction joins the branches.
What the pairs are recorded from, and the candidates they open, is ``osk.provenance.rechecks``.

The same table is kept on disk for fresh processes (``osk.provenance.recheck_store``): after
each append here and each read of the ledger anew, the store is brought up to the ledger.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from osk.errors import LedgerFork
from osk.provenance.most_cited import MostCited, counts_of
from osk.provenance.pairs import Citations, Pair, TargetRef
from osk.provenance.recheck_store import CitationStore, Whole, citations_from
from osk.store.fsutil import StatKey, stat_key
from osk.store.ledger import Ledger, LedgerView, Record
from osk.store.vault import Vault

LEDGER = "rechecks"
KIND_PAIRS = "pairs"
MOST_CITED = 32  # how many of the most cited nodes the hooks' summary names


class RecheckTable:
    """The rechecks ledger as an in-memory table, and its indexes kept up to date.

    The table is reloaded only when the ledger file changes, and then only for the subjects
    of the records appended since (when the file grew; a rewritten file is read whole). Each
    change of a citing node's record updates the indexes and adds to ``_dirty`` the citing
    nodes whose candidates it may move, which the next recheck pass recomputes.
    """

    def __init__(self, vault: Vault) -> None:
        self.vault = vault
        self.ledger = Ledger(vault, LEDGER)
        self._stat: StatKey | None = None
        self._view: LedgerView | None = None  # the view the table was built from
        self._table: dict[str, Citations] = {}
        # indexes over the table
        self._citers: dict[str, set[str]] = {}  # cited node id -> citing ids
        self._cites: dict[str, set[str]] = {}  # citing id -> cited node ids
        self._sources: dict[str, set[str]] = {}  # raw record / project file -> citing ids
        self._source_refs: dict[str, TargetRef] = {}  # how to look at a source
        self._uses: dict[str, set[str]] = {}  # citing id -> sources
        self._dirty: set[str] = set()  # citing ids whose candidates may have moved
        self._most_cited = MostCited(MOST_CITED)
        self._store = CitationStore(vault)  # the table on disk, for fresh processes

    # -- the table ---------------------------------------------------------------------
    def table(self) -> dict[str, Citations]:
        stat = stat_key(self.ledger.path)
        if stat is None:
            self._view = None
            self._replace({})
        elif stat != self._stat:
            self._reload(self.ledger.read())
            self._stat = stat
            self._store.catch_up(self.ledger, lambda: self._whole(stat, lambda _: self._table),
                                 self._bodies())
        self._stat = stat
        return self._table

    def _whole(self, stat: StatKey, table: Callable[[LedgerView], dict[str, Citations]]
               ) -> Whole | None:
        """The table of the whole ledger (``table`` of the view read), when that view is of
        the file at ``stat`` and the file is still so: what the store is rebuilt from."""
        view = self._view
        if view is None or self._stat != stat or stat_key(self.ledger.path) != stat:
            return None
        return Whole(stat, table(view), view.heads)

    def _reload(self, view: LedgerView) -> None:
        old = self._view
        if old is not None and _extends(view, old):
            table = dict(self._table)
            fresh = view.records[len(old.records):]
            for subject in {r.subject for r in fresh if r.subject.startswith("citing:")}:
                citing_id = subject[len("citing:"):]
                value = _subject_citations(view, subject, citing_id)
                if value is None:
                    table.pop(citing_id, None)
                else:
                    table[citing_id] = value
        else:
            table = build_table(view)
        self._view = view
        self._replace(table)

    def _replace(self, table: dict[str, Citations]) -> None:
        old = self._table
        for citing_id in old.keys() | table.keys():
            before, after = old.get(citing_id), table.get(citing_id)
            if before != after:
                self._changed(citing_id, after)
        self._table = table

    def _changed(self, citing_id: str, after: Citations | None) -> None:
        """Update the indexes for one citing node's new record; mark what depends on it."""
        self._dirty.add(citing_id)
        self._dirty |= self._citers.get(citing_id, set())  # their cascade flag reads its marker
        moved = self._cites.pop(citing_id, set())
        for node_id in moved:
            self._unlink(self._citers, node_id, citing_id)
            self._dirty.add(node_id)  # its ``next`` names its citers
        for source in self._uses.pop(citing_id, set()):
            self._unlink(self._sources, source, citing_id)
        for pair in after.pairs.values() if after is not None else ():
            target = pair.target
            if target.kind == "node":
                node_id = target.key[len("node:"):]
                self._citers.setdefault(node_id, set()).add(citing_id)
                self._cites.setdefault(citing_id, set()).add(node_id)
                self._dirty.add(node_id)
                moved.add(node_id)
            else:
                source = _source_key(target)
                self._sources.setdefault(source, set()).add(citing_id)
                self._source_refs.setdefault(source, target)
                self._uses.setdefault(citing_id, set()).add(source)
        for node_id in moved:  # net moves only: a kept citation leaves its count as it was
            self._most_cited.moved(node_id, len(self._citers.get(node_id, ())))

    @staticmethod
    def _unlink(index: dict[str, set[str]], key: str, value: str) -> None:
        found = index.get(key)
        if found is not None:
            found.discard(value)
            if not found:
                del index[key]

    def citing(self, node_id: str) -> set[str]:
        """The ids of the nodes whose recorded citations name node ``node_id``."""
        self.table()
        return set(self._citers.get(node_id, ()))

    def citations(self, node_id: str) -> Citations | None:
        return self.table().get(node_id)

    def check_readable(self) -> None:
        """Raise LedgerError now if the ledger is damaged, before a write starts (parsing
        only when the file changed since this table last read it)."""
        self.table()

    def _append(self, citations: Citations, title: str, via: str) -> Record:
        kind, subject, data = pairs_line(citations, title, via)
        self.table()  # the table now matches the file as of self._stat
        known = self._stat
        record = self.ledger.append(kind, subject, data)
        after = stat_key(self.ledger.path)
        line = len(record.to_json().encode("utf-8")) + 1
        known_size = known[0] if known is not None else 0
        same_file = known is None or (after is not None and after[2] == known[2])
        if after is not None and same_file and after[0] == known_size + line:
            # Only our line was added: update the table in place instead of reparsing.
            new = replace(citations, record_id=record.id, forked=False)
            self._changed(citations.citing_id, new)
            self._table[citations.citing_id] = new
            view = self.ledger.read()  # the ledger's cache already holds the grown view
            self._view = view if view.by_id.get(record.id) is not None else None
            self._stat = after
        else:
            self._stat = None  # someone else appended too: reload on the next read
        # This line (and any another process appended) as a tail; a store to be rebuilt is
        # rebuilt from the ledger as read, never from the table as updated in place above
        # (a kept pair's fork mark lives there, not in the line).
        self._store.catch_up(self.ledger, lambda: self._whole(after, build_table)
                             if after is not None else None, self._bodies())
        return record

    def _bodies(self) -> dict[str, str]:
        """The node hashes this table's owner noted since the store last took them (none
        here: ``Rechecks`` hashes the nodes)."""
        return {}

    def most_cited(self) -> list[tuple[str, int]]:
        """The most cited nodes (id, how many nodes cite it), most first (``MostCited``: kept
        up to date by each citation change, recounted only when that cannot be exact)."""
        return list(self._most_cited.top(counts_of(self._citers)))


def _extends(view: LedgerView, old: LedgerView) -> bool:
    """Whether ``view`` is ``old`` plus appended records: the ledger's reader shares the
    record objects only when the file grew and its earlier bytes are unchanged."""
    count = len(old.records)
    return len(view.records) >= count and (count == 0
                                            or view.records[count - 1] is old.records[-1])


def _source_key(target: TargetRef) -> str:
    return f"{target.key}\0{target.root or ''}"


def build_table(view: LedgerView) -> dict[str, Citations]:
    table: dict[str, Citations] = {}
    for subject in list(view.subjects()):
        if not subject.startswith("citing:"):
            continue
        citing_id = subject[len("citing:"):]
        value = _subject_citations(view, subject, citing_id)
        if value is not None:
            table[citing_id] = value
    return table


def _subject_citations(view: LedgerView, subject: str, citing_id: str) -> Citations | None:
    tops = view.maxima(subject)
    if not tops:
        return None
    try:
        view.current(subject)
    except LedgerFork:
        return _merge_fork(citing_id, tops)
    return citations_from(citing_id, tops[0], forked=False)


def _merge_fork(citing_id: str, tops: Sequence[Record]) -> Citations:
    """Concurrent records for one citing node: pairs all branches agree on stand; the rest are
    candidates (``forked``) until the next re-citation or correction joins the branches."""
    branches = [citations_from(citing_id, r, forked=False) for r in tops]
    keys = {k for b in branches for k in b.pairs}
    pairs: dict[str, Pair] = {}
    for key in sorted(keys):
        versions = [b.pairs.get(key) for b in branches]
        present = [v for v in versions if v is not None]
        agreed = len(present) == len(versions) and all(
            (v.citing_hash, v.target_hash) == (present[0].citing_hash, present[0].target_hash)
            for v in present)
        pairs[key] = present[0] if agreed else replace(present[0], forked=True)
    markers = {b.corrected for b in branches}
    corrected = markers.pop() if len(markers) == 1 else None
    return Citations(citing_id, pairs, corrected, max(r.id for r in tops), True)


def pairs_line(citations: Citations, title: str, via: str) -> tuple[str, str, dict[str, object]]:
    """The ledger line (kind, subject, data) that records ``citations``."""
    return KIND_PAIRS, f"citing:{citations.citing_id}", {
        "citing": citations.citing_id,
        "title": title,
        "via": via,
        "corrected": citations.corrected,
        "pairs": [pair.to_data() for pair in citations.pairs.values()],
    }
