"""Rechecks: citations bound to the bytes they were made against.

Every ``derived-from`` edge of a node is a *citation pair*: the citing node and its target (a
node, a raw round, a project file). The rechecks ledger records, for each pair, the citing node's
body hash and the target's hash at the time the citation was made. When either no longer matches,
the pair is a *recheck candidate*: the claim may no longer follow from its evidence, and the agent
must re-read the target and either re-cite it unchanged or correct the node.

The ledger as a table, its shape and its indexes, is ``osk.provenance.recheck_table``; this
module records pairs into it and computes the candidates they open.

Carrying forward: when osk rewrites a citing node's body, every pair whose recorded citing hash
matched the old body is re-recorded with the new body hash and its *old* target hash, so a pair
that was current stays current and a pair whose target had changed stays a candidate. A pair whose
citing hash did not match (the node was edited by hand) is kept as it was: still a candidate.

After every pass the open candidates are written per scope to a summary that hooks read
(``osk.provenance.recheck_summary``, which owns its file name).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from osk.provenance.pairs import (
    Candidate,
    Citations,
    Pair,
    TargetHasher,
    TargetRef,
    candidate_id,
    link_identity,
    node_by_id,
    parse_raw,
    racy,
    stale_pairs,
)
from osk.provenance.recheck_summary import SUMMARY_FILE
from osk.provenance.recheck_table import LEDGER, RecheckTable, pairs_line
from osk.store.fsutil import StatKey, replace_unsynced, stat_key
from osk.store.ledger import Record
from osk.store.vault import Vault, scope_of

if TYPE_CHECKING:
    from osk.store.catalog import Catalog
    from osk.store.node import Node


@dataclass(frozen=True)
class Planned:
    """A citing node's pairs as a write will record them (``Rechecks.plan``)."""

    citations: Citations
    title: str
    via: str

    def line(self) -> tuple[str, str, str, dict[str, object]]:
        """The ledger line (ledger, kind, subject, data) that records them."""
        return (LEDGER, *pairs_line(self.citations, self.title, self.via))


class Rechecks(RecheckTable):
    """The rechecks ledger's table (``RecheckTable``), the pairs recorded into it, and its
    candidates kept up to date.

    Candidates are computed per citing node and remembered. A citing node's candidates depend
    on its record in the table, its own file, the files of the nodes it cites (their bodies,
    titles and correction markers), the titles of the nodes citing it (``next``), and the raw
    records and project files it cites. Each ``candidates`` call finds what changed since the
    last one (table records, catalog entries by identity, one stat per cited raw record or
    project file) and recomputes only the citing nodes that depend on it, so a write or a
    search pays for what changed, not for the size of the table.
    """

    def __init__(self, vault: Vault) -> None:
        super().__init__(vault)
        self.hasher = TargetHasher(vault)
        # remembered candidates
        self._catalog: Catalog | None = None
        self._entries: dict[str, object] = {}  # catalog entries as last looked at, by path
        self._mark: int | None = None  # the catalog's change-log position at that look
        self._tokens: dict[str, tuple[str, StatKey | None]] = {}  # source -> state last seen
        self._paths: dict[str, Path | None] = {}  # file source -> where it resolved
        self._roots_stat: StatKey | None = None
        self._memo: dict[str, list[Candidate]] = {}
        self._found: list[Candidate] | None = None
        self._summary_key: tuple[object, ...] | None = None
        self._cited_written = -1  # the most-cited version the summary was written with
        self._summarised: list[Candidate] | None = None  # the list the snapshot was written for

    # -- recording ---------------------------------------------------------------------
    def record(self, planned: Planned) -> Record:
        """Append what ``plan`` decided."""
        return self._append(planned.citations, planned.title, planned.via)

    def plan(self, before: Node | None, after: Node, edges: Sequence[Edge], *,
             corrected: Mapping[str, str] | None = None, via: str = "write",
             ) -> Planned | None:
        """``after``'s citation pairs as they will be recorded, None when nothing changes;
        complete pairs are carried forward across a body change. Writes nothing: the write
        path journals the line before the node file (``osk.authority.audit.Follow``).

        ``edges`` are ``after``'s derived-from links; ``Edge.target`` is None for a link that
        no longer resolves (kept from before: its old pair, if any, stays as it was).
        ``corrected`` maps target keys to the target state the session read while correcting.
        """
        corrected = dict(corrected or {})
        previous = self.citations(after.id)
        old_pairs = previous.pairs if previous else {}
        body_before = before.body_hash if before is not None else None
        body_after = after.body_hash
        pairs: dict[str, Pair] = {}
        for edge in edges:
            if edge.target is None:
                for pair in old_pairs.values():
                    if _same_link(pair.target.link, edge.link):
                        pairs[pair.target.key] = pair
                continue
            key = edge.target.key
            old = old_pairs.get(key)
            if key in corrected:
                pairs[key] = Pair(after.id, edge.target, body_after, corrected[key], "correct")
            elif old is None:
                pairs[key] = Pair(after.id, edge.target, body_after, edge.current_hash, via)
            elif old.forked:
                pairs[key] = old
            elif body_before is not None and old.citing_hash == body_before:
                pairs[key] = Pair(after.id, edge.target, body_after, old.target_hash, old.via)
            else:
                pairs[key] = old
        marker = previous.corrected if previous else None
        if corrected and body_before != body_after:
            marker = body_after
        new = Citations(after.id, pairs, marker)
        if previous is not None and not previous.forked and previous.pairs == pairs \
                and previous.corrected == marker:
            return None
        if previous is None and not pairs:
            return None
        return Planned(new, after.title, "correct" if corrected else via)

    def recite(self, citing: Node, readings: Mapping[str, str]) -> Record:
        """Re-cite ``citing``'s targets at the states the session read (target key -> hash)."""
        previous = self.citations(citing.id)
        pairs = dict(previous.pairs) if previous else {}
        body = citing.body_hash
        for key, state in readings.items():
            old = pairs[key]
            pairs[key] = Pair(citing.id, old.target, body, state, "recite")
        marker = previous.corrected if previous else None
        return self._append(Citations(citing.id, pairs, marker), citing.title, "recite")

    # -- candidates --------------------------------------------------------------------
    def candidates(self, catalog: Catalog | None = None) -> list[Candidate]:
        """Every pair whose recorded hashes no longer match, with ``next`` and ``cascade``.

        Pass the caller's catalog (the engine's is kept fresh); without one, a catalog of the
        vault is read now.
        """
        if catalog is None:
            from osk.store.catalog import Catalog

            catalog = Catalog(self.vault)
            catalog.refresh()
        table = self.table()
        if catalog is not self._catalog:  # another catalog: nothing remembered holds for it
            self._catalog, self._entries, self._mark = catalog, {}, None
            self._memo.clear()
            self._found = None
            self._dirty |= table.keys()
        self._note_catalog(catalog)
        with self.hasher.one_pass():
            self._note_sources()
            dirty, self._dirty = self._dirty, set()
            for citing_id in dirty:
                found = self._collect_one(catalog, table, citing_id)
                if found != self._memo.get(citing_id, []):
                    self._found = None
                if found:
                    self._memo[citing_id] = found
                else:
                    self._memo.pop(citing_id, None)
        if self._found is None:
            self._found = sorted((c for found in self._memo.values() for c in found),
                                 key=lambda c: (c.citing_path, c.target_key))
        if self._summarised is not self._found or self._most_cited.version != self._cited_written:
            self._write_summary(self._found)  # candidates, or who is cited how often, moved
        self._store.keep_bodies(self._bodies())
        return list(self._found)

    def _bodies(self) -> dict[str, str]:
        return self.hasher.take_bodies()

    def _note_catalog(self, catalog: Catalog) -> None:
        """Mark what depends on the catalog entries that changed since the last look.

        The catalog's change log names the paths touched since then, so this costs what
        changed, not the vault's size; on first contact, or when the log no longer reaches
        back, every entry is compared once.
        """
        seen = self._entries
        changed: set[str] = set()
        entries = catalog.entries
        touched = None if self._mark is None else catalog.changed_since(self._mark)
        self._mark = catalog.mark
        for rel in entries if touched is None else dict.fromkeys(touched):
            old, entry = seen.get(rel), entries.get(rel)
            if old is not entry:
                if entry is None:
                    del seen[rel]
                else:
                    seen[rel] = entry
                _ids_of(old, changed)
                _ids_of(entry, changed)
        if touched is None and len(seen) != len(entries):
            for rel in [rel for rel in seen if rel not in entries]:
                _ids_of(seen.pop(rel), changed)
        for node_id in changed:
            self._dirty.add(node_id)
            self._dirty.update(self._citers.get(node_id))
            self._dirty |= self.cited(node_id)

    def _note_sources(self) -> None:
        """One stat per cited raw record and project file; mark the citers of changed ones."""
        from osk.provenance.sessions import roots_path

        roots = stat_key(roots_path(self.vault))
        if roots != self._roots_stat:
            self._paths.clear()  # where a file citation resolves may have changed
            self._roots_stat = roots
        for source in self._sources.keys():
            token = self._token(source)
            if token != self._tokens.get(source) or _racy_token(token):
                self._tokens[source] = token
                self._dirty.update(self._sources.get(source))
        for source in [s for s in self._tokens if s not in self._sources]:
            del self._tokens[source]

    def _token(self, source: str) -> tuple[str, StatKey | None]:
        """A source's state: where it is and its stat (None: missing or unresolvable)."""
        target = self._source_refs[source]
        path = self._paths.get(source)
        if target.kind == "raw":
            if path is None:
                path = self.vault.abs(parse_raw(target.key[len("raw:"):]).record_path)
                self._paths[source] = path
            return (str(path), stat_key(path))
        stat = stat_key(path) if path is not None else None
        if stat is None:  # resolve again: the file or its worktree may have moved
            path = self.hasher.file_path(target)
            self._paths[source] = path
            stat = stat_key(path) if path is not None else None
        return (str(path), stat)

    def _collect_one(self, catalog: Catalog, table: Mapping[str, Citations],
                     citing_id: str) -> list[Candidate]:
        """The candidates of one citing node, as they stand now (the rule: ``stale_pairs``)."""
        citations = table.get(citing_id)
        if citations is None:
            return []
        citing = node_by_id(catalog, citing_id)
        if citing is None:
            return []  # the citing node is gone (deleted by hand): nothing to recheck
        return [self._candidate(catalog, table, citing, pair, current, reason)
                for pair, current, reason in stale_pairs(
                    self.vault, citations, citing.derived_from,
                    self.hasher.body_hash(citing),
                    lambda target: self.hasher.current(target, catalog))]

    def _candidate(self, catalog: Catalog, table: Mapping[str, Citations], citing: Node,
                   pair: Pair, current: str | None, reason: str) -> Candidate:
        link = pair.target.link
        cascade = False
        if pair.target.kind == "node":
            target_node = node_by_id(catalog, pair.target.key[len("node:"):])
            if target_node is not None:
                link = f"[[{target_node.title}]]"
                marker = table.get(target_node.id)
                cascade = bool(marker and marker.corrected
                               and marker.corrected == self.hasher.body_hash(target_node))
        next_nodes = [n for n in (node_by_id(catalog, i)
                                  for i in self._citers.get(citing.id)) if n is not None]
        return Candidate(
            id=candidate_id(citing.id, pair.target.key),
            citing_id=citing.id,
            citing_title=citing.title,
            citing_path=citing.path,
            target=link,
            target_key=pair.target.key,
            recorded_hash=pair.target_hash,
            current_hash=current,
            reason=reason,
            next=tuple(sorted(n.title for n in next_nodes)),
            next_ids=tuple(sorted(n.id for n in next_nodes)),
            cascade=cascade,
            scope=scope_of(citing.path),
        )

    def cascades(self, catalog: Catalog | None = None) -> list[Candidate]:
        """The person's queue (governance/ledgers.md rule 6): candidates whose target's current
        text is itself a recheck correction. An agent may only re-cite such a node unchanged;
        changing it is the person's decision, so the correction stops here."""
        return [c for c in self.candidates(catalog) if c.cascade]

    def stale_node_ids(self, catalog: Catalog | None = None) -> set[str]:
        """The ids of nodes with at least one recheck candidate (the ``recheck`` marker)."""
        return {c.citing_id for c in self.candidates(catalog)}

    def stale_among(self, node_ids: Iterable[str], catalog: Catalog) -> set[str]:
        """Which of ``node_ids`` carry the ``recheck`` marker.

        A table that has already looked at ``catalog`` answers from what it keeps, which
        costs what changed since. A cold one (a fresh ``osk search``'s only look) checks just
        these nodes with the same rule, instead of every node of the vault.
        """
        wanted = set(node_ids)
        if catalog is self._catalog and self._mark is not None:
            return self.stale_node_ids(catalog) & wanted
        table = self.table()
        with self.hasher.one_pass():
            found = {i for i in wanted if self._collect_one(catalog, table, i)}
        self._store.keep_bodies(self._bodies())
        return found

    def _write_summary(self, found: Sequence[Candidate]) -> None:
        """Keep a small snapshot for the session-start hook, rewritten only when it changes.

        Device state that the next engine call recomputes, so it is replaced atomically but
        not fsynced: a crash can only leave the previous snapshot.
        """
        version = self._most_cited.version
        cited = self.most_cited()
        key = (tuple((c.id, c.reason, c.cascade, c.next, c.citing_path, c.target,
                      c.citing_title) for c in found), tuple(cited))
        if key == self._summary_key:
            self._summarised = found if isinstance(found, list) else None
            self._cited_written = version
            return
        by_scope: dict[str, list[dict[str, object]]] = {}
        for cand in found:
            by_scope.setdefault(cand.scope or "", []).append({
                "id": cand.id, "citing": cand.citing_title, "path": cand.citing_path,
                "target": cand.target, "reason": cand.reason, "cascade": cand.cascade,
                "next": list(cand.next),
            })
        # Compact: the C encoder (``indent`` would select the pure-Python one, ten times slower).
        text = json.dumps({"scopes": by_scope, "cited": cited}, ensure_ascii=False,
                          sort_keys=True, separators=(",", ":"))
        path = self.vault.state(*SUMMARY_FILE)
        try:
            if not path.exists() or path.read_text(encoding="utf-8") != text + "\n":
                replace_unsynced(path, text + "\n")
        except OSError:
            return
        self._summary_key = key
        self._summarised = found if isinstance(found, list) else None
        self._cited_written = version


def _ids_of(entry: object, into: set[str]) -> None:
    node = getattr(entry, "node", None)
    if node is not None:
        into.add(node.id)


def _racy_token(token: tuple[str, StatKey | None]) -> bool:
    return token[1] is not None and racy(token[1])


@dataclass(frozen=True)
class Edge:
    """A derived-from link as the write path resolved it."""

    link: str
    target: TargetRef | None  # None: a link the node already had that no longer resolves
    current_hash: str | None = None


def _same_link(a: str, b: str) -> bool:
    return link_identity(a) == link_identity(b)
