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

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace

from osk.errors import LedgerFork
from osk.provenance.most_cited import MostCited
from osk.provenance.pairs import Citations, Pair, TargetRef
from osk.provenance.recheck_store import (
    CitationStore,
    Whole,
    citations_from,
    cited_nodes,
    decoded,
    encoded,
    successors,
)
from osk.store.fsutil import stat_key
from osk.store.grouped import Grouped
from osk.store.ledger import NO_TIP, Ledger, LedgerView, Record, Tip
from osk.store.vault import Vault

LEDGER = "rechecks"
KIND_PAIRS = "pairs"
MOST_CITED = 32  # how many of the most cited nodes the hooks' summary names


class RecheckTable:
    """The rechecks ledger as an in-memory table, and its indexes kept up to date.

    The table is read again only when the ledger file changes, and then only the records
    appended since (``Ledger.after``: each names every head before it, so it alone is its
    subject's current record, as ``recheck_store.successors`` reads it); anything else (a
    merge, a rewrite) reads the ledger whole, once, and lets the records go: the table keeps
    the ledger's tip, not its history. Each change of a citing node's record updates the
    indexes and adds to ``_dirty`` the citing nodes whose candidates it may move, which the
    next recheck pass recomputes.
    """

    def __init__(self, vault: Vault) -> None:
        self.vault = vault
        self.ledger = Ledger(vault, LEDGER)
        self._tip: Tip | None = None  # how far into the ledger the table has read
        self._rows: dict[str, str] = {}  # citing id -> its citations, ``encoded``
        self._reset()
        self._dirty: set[str] = set()  # citing ids whose candidates may have moved
        self._most_cited = MostCited(MOST_CITED)
        self._store = CitationStore(vault)  # the table on disk, for fresh processes
        self._store_waits = False  # inside ``store_at_end``: appends leave the store behind

    def _reset(self) -> None:
        """No row, no index (a table about to be read whole)."""
        self._rows = {}
        self._citers: Grouped[str] = Grouped()  # cited node id -> citing ids
        self._sources: Grouped[str] = Grouped()  # raw record / project file -> citing ids
        self._source_refs: dict[str, TargetRef] = {}  # how to look at a source

    # -- the table ---------------------------------------------------------------------
    def table(self) -> Rows:
        """Citing node id -> its current ``Citations`` (decoded when asked for)."""
        stat = stat_key(self.ledger.path)
        if stat is None:
            self._tip = NO_TIP
            self._replace({})
        elif self._tip is None or stat != self._tip.key:
            whole = self._reload()
            self._store.catch_up(self.ledger, whole, self._bodies())
        return Rows(self._rows)

    def _reload(self) -> Callable[[], Whole | None]:
        """Bring the table up to the ledger; what the store is rebuilt from if it must be."""
        grown = self.ledger.after(self._tip) if self._tip is not None else None
        found = successors(grown[0], self._tip.heads) if grown and self._tip else None
        if grown is not None and found is not None:
            for citing_id, value in found[0].items():
                self._set(citing_id, value)
            self._tip = grown[1]
            return self._whole
        if self._tip is None and self._loaded():
            return self._whole
        view, tip = self.ledger.read_tipped()
        table = build_table(view)
        self._tip = tip
        self._replace({citing_id: encoded(value) for citing_id, value in table.items()})
        if tip is None:
            return lambda: None
        return lambda: Whole(tip.key, table, tip.heads) if tip.key is not None else None

    def _loaded(self) -> bool:
        """The first look: the store's rows, when they vouch for the ledger as it is (its tip
        checked line by line, no record kept), instead of every record decoded."""
        tip = self.ledger.tip()
        rows = self._store.load(self.ledger, tip)
        if rows is None:
            return False
        try:
            self._replace(rows)
        except (ValueError, TypeError, KeyError, AttributeError):  # a damaged row
            self._store.discard()  # rebuilt from the ledger read whole, next
            self._reset()
            self._dirty.clear()
            self._most_cited.forget()
            return False
        self._tip = tip
        return True

    def _whole(self) -> Whole | None:
        """The table of the whole ledger as it is now, read again (the store is rebuilt from
        the ledger as read, never from the table as updated in place by an append: a kept
        pair's fork mark lives there, not in the line)."""
        view, tip = self.ledger.read_tipped()
        if tip is None or tip.key is None or stat_key(self.ledger.path) != tip.key:
            return None
        return Whole(tip.key, build_table(view), tip.heads)

    def _replace(self, rows: dict[str, str]) -> None:
        old = self._rows
        # A cited node that cites too is named by its row's id, not a copy cut from each
        # target key (85 bytes a node: 8.5 MB of a table of 100,000 loaded whole).
        ids = {citing_id: citing_id for citing_id in rows}
        for citing_id in old.keys() | rows.keys() if old else rows:  # no set of 100,000 ids
            before, after = old.get(citing_id), rows.get(citing_id)
            if before != after:
                self._changed(citing_id, _decode(citing_id, before), _decode(citing_id, after),
                              ids)
        self._rows = rows

    def _set(self, citing_id: str, value: Citations) -> None:
        """One citing node's record is now ``value``."""
        before, row = self._rows.get(citing_id), encoded(value)
        if before != row:
            self._changed(citing_id, _decode(citing_id, before), value)
            self._rows[citing_id] = row

    def _changed(self, citing_id: str, before: Citations | None, after: Citations | None,
                 ids: Mapping[str, str] | None = None) -> None:
        """Update the indexes for one citing node's new record; mark what depends on it
        (``ids``: the one string each node id is to be held as, where it is known)."""
        self._dirty.add(citing_id)
        self._dirty.update(self._citers.get(citing_id))  # their cascade flag reads its marker
        moved = cited_nodes(before)
        for node_id in moved:
            self._citers.discard(node_id, citing_id)
            self._dirty.add(node_id)  # its ``next`` names its citers
        for pair in before.pairs.values() if before is not None else ():
            if pair.target.kind != "node":
                self._sources.discard(_source_key(pair.target), citing_id)
        for pair in after.pairs.values() if after is not None else ():
            target = pair.target
            if target.kind == "node":
                node_id = target.key[len("node:"):]
                node_id = ids.get(node_id, node_id) if ids is not None else node_id
                self._citers.add(node_id, citing_id)
                self._dirty.add(node_id)
                moved.add(node_id)
            else:
                source = _source_key(target)
                self._sources.add(source, citing_id)
                self._source_refs.setdefault(source, target)
        for node_id in moved:  # net moves only: a kept citation leaves its count as it was
            self._most_cited.moved(node_id, self._citers.count(node_id))

    def cited(self, citing_id: str) -> set[str]:
        """The ids of the nodes ``citing_id``'s recorded citations name."""
        return cited_nodes(_decode(citing_id, self._rows.get(citing_id)))

    def citing(self, node_id: str) -> set[str]:
        """The ids of the nodes whose recorded citations name node ``node_id``."""
        self.table()
        return set(self._citers.get(node_id))

    def citations(self, node_id: str) -> Citations | None:
        return self.table().get(node_id)

    def check_readable(self) -> None:
        """Raise LedgerError now if the ledger is damaged, before a write starts (parsing
        only when the file changed since this table last read it)."""
        self.table()

    def _append(self, citations: Citations, title: str, via: str) -> Record:
        kind, subject, data = pairs_line(citations, title, via)
        self.table()  # the table now matches the file as of self._tip
        before = self._tip
        record = self.ledger.append(kind, subject, data)
        now = self.ledger.tip()  # the append's own: no read
        if before is not None and now.count == before.count + 1 and now.max_id == record.id \
                and _only_grown(before, now, len(record.to_json().encode("utf-8")) + 1):
            # Only our line was added: update the table in place instead of reading it back.
            self._set(citations.citing_id, replace(citations, record_id=record.id, forked=False))
            self._tip = now
        else:
            self._tip = None  # someone else appended too: read the ledger on the next look
        # This line (and any another process appended) as a tail; a store to be rebuilt is
        # rebuilt from the ledger as read, never from the table as updated in place above.
        if not self._store_waits:
            self._store.catch_up(self.ledger, self._whole, self._bodies())
        return record

    @contextmanager
    def store_at_end(self) -> Iterator[None]:
        """Bring the store up to the ledger once, at the block's end (a batch of writes:
        ``osk import``), not after each append: one transaction over the block's lines instead
        of one per line (0.2-0.4 ms each). Meanwhile the store is behind the ledger, as after a
        killed writer, which its readers and the next catch-up already take as it is."""
        if self._store_waits:
            yield
            return
        self._store_waits = True
        try:
            yield
        finally:
            self._store_waits = False
            self._store.catch_up(self.ledger, self._whole, self._bodies())

    def _bodies(self) -> dict[str, str]:
        """The node hashes this table's owner noted since the store last took them (none
        here: ``Rechecks`` hashes the nodes)."""
        return {}

    def most_cited(self) -> list[tuple[str, int]]:
        """The most cited nodes (id, how many nodes cite it), most first (``MostCited``: kept
        up to date by each citation change, recounted only when that cannot be exact)."""
        return list(self._most_cited.top(self._citers.counts))


def _only_grown(before: Tip, now: Tip, line: int) -> bool:
    """Whether the file at ``now`` is the one at ``before`` plus one line of ``line`` bytes."""
    return before.key is None or (now.key is not None and now.key[2] == before.key[2]
                                  and now.key[0] == before.key[0] + line)


class Rows(Mapping[str, Citations]):
    """The table as its users read it: citing node id -> ``Citations``, decoded from the row
    text on each ask. A hundred thousand citing nodes hold their rows' text (about 290 bytes
    each), not a graph of objects for every pair (more than twice that)."""

    def __init__(self, rows: Mapping[str, str]) -> None:
        self._rows = rows

    def __getitem__(self, citing_id: str) -> Citations:
        return decoded(citing_id, self._rows[citing_id])

    def __contains__(self, citing_id: object) -> bool:
        return citing_id in self._rows

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)


def _decode(citing_id: str, row: str | None) -> Citations | None:
    return decoded(citing_id, row) if row is not None else None


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
