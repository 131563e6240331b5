"""What a recheck compares: the pair table (each citation bound to the hashes of the citing body
and of its target, and the candidates a changed target opens), the current state of every kind
of target (a node's body hash, a raw round's hash, a project file's), and what a session has
read (the target states a correction may bind to). The ledger read as a table is
``osk.provenance.recheck_table``; its passes are ``osk.provenance.rechecks``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from osk.errors import EdgeError, OskError
from osk.store.edges import NodeTarget, parse_target
from osk.store.fastclass import dataclass, field
from osk.store.fsutil import (
    RACE_WINDOW_NS,
    StatKey,
    sha256_bytes,
    sha256_text,
    stat_key,
)
from osk.store.titles import title_key
from osk.store.vault import Vault

if TYPE_CHECKING:
    from osk.store.catalog import Catalog
    from osk.store.edges import RawTarget
    from osk.store.node import Node


# -- the pair table ----------------------------------------------------------------------
@dataclass(frozen=True)
class TargetRef:
    key: str  # node:<id> | raw:<coordinate> | file:<session key>:<path>
    kind: str  # node | raw | file
    link: str  # the link as the node writes it, "[[…]]"
    root: str | None = None  # file targets: the worktree the path resolved against


@dataclass(frozen=True)
class Pair:
    citing_id: str
    target: TargetRef
    citing_hash: str
    target_hash: str | None
    via: str
    forked: bool = False

    def to_data(self) -> dict[str, object]:
        data: dict[str, object] = {
            "target": self.target.key, "kind": self.target.kind, "link": self.target.link,
            "root": self.target.root, "citing_hash": self.citing_hash,
            "target_hash": self.target_hash, "via": self.via}
        if self.forked:
            # A write that is not a re-citation names every head, so its line alone is current:
            # the line must say the devices still disagree, or the fork would end unseen.
            data["forked"] = True
        return data

    @classmethod
    def from_data(cls, citing_id: str, data: Mapping[str, object], *,
                  forked: bool = False) -> Pair:
        root = data.get("root")
        target = TargetRef(str(data["target"]), str(data["kind"]), str(data.get("link", "")),
                           str(root) if root else None)
        target_hash = data.get("target_hash")
        return cls(citing_id, target, str(data["citing_hash"]),
                   str(target_hash) if target_hash else None, str(data.get("via", "")),
                   forked or data.get("forked") is True)


@dataclass(frozen=True)
class Citations:
    """One citing node's current pair set, as the ledger holds it."""

    citing_id: str
    pairs: dict[str, Pair]  # target key -> pair
    corrected: str | None  # body hash after the node's latest recheck correction
    record_id: str | None = None
    forked: bool = False


@dataclass(frozen=True)
class Candidate:
    """A citation whose recorded hashes no longer match: re-read the target, then re-cite it
    unchanged or correct the citing node."""

    id: str  # a short handle: name it in update_node(recheck_of=[…])
    citing_id: str
    citing_title: str
    citing_path: str
    target: str  # the link, with a node target's current title
    target_key: str
    recorded_hash: str | None
    current_hash: str | None  # None: the target is gone
    reason: str  # target-changed | target-redacted | target-missing | citing-edited | forked
    next: tuple[str, ...]  # titles of the nodes that cite the citing node
    next_ids: tuple[str, ...]
    cascade: bool  # the target's current body came from a recheck correction
    scope: str | None  # the citing node's scope (None for Domain and Person)


def candidate_id(citing_id: str, target_key: str) -> str:
    return sha256_text(f"{citing_id}\n{target_key}")[:12]


def cited_rounds(table: Mapping[str, Citations], ids: Iterable[str]) -> dict[str, set[str]]:
    """Node id -> the raw rounds it cites, for those of ``ids`` that cite any (what search
    merges round hits by: a node before the rounds it cites, ``osk.search.rounds.merged``)."""
    cites: dict[str, set[str]] = {}
    for node_id in ids:
        citations = table.get(node_id)
        if citations is not None:
            cites[node_id] = {pair.target.key.removeprefix("raw:")
                              for pair in citations.pairs.values() if pair.target.kind == "raw"}
    return cites


# -- current target states -----------------------------------------------------------------
class TargetHasher:
    """Current hashes of citation targets, cached by file stat so a query pays for changes."""

    UNVERIFIABLE = "\0unverifiable"  # a file target whose worktree is not on this device

    def __init__(self, vault: Vault) -> None:
        self.vault = vault
        self._pass: dict[str, StatKey | None] | None = None  # stats of one candidates() pass
        self._raw: dict[str, tuple[StatKey, dict[int, str]]] = {}
        self._files: dict[str, tuple[StatKey, str | None]] = {}
        self._roots: dict[str, str] | None = None
        # file hash -> body hash of the nodes asked about since the owner last took them
        # (``take_bodies``): the table on disk keeps them, so a fresh search knows a cited
        # node's body hash from its file hash without reading its file (recheck_store)
        self._bodies: dict[str, str] = {}

    def body_hash(self, node: Node) -> str:
        """The node's own cached hash (one restored from the catalog snapshot carries it: no
        read). Not kept here as well: a table of the nodes asked about would hold each one,
        and its text, after the catalog let it go (``osk import`` cites every node it writes);
        only the two hashes are noted, when the file hash is had without a read."""
        value = node.body_hash
        file_hash = node.known_file_hash
        if file_hash is not None:
            self._bodies[file_hash] = value
        return value

    def take_bodies(self) -> dict[str, str]:
        """The (file hash, body hash) pairs noted since the last call."""
        found, self._bodies = self._bodies, {}
        return found

    def current(self, target: TargetRef, catalog: Catalog) -> str | None:
        if target.kind == "node":
            found = node_by_id(catalog, target.key[len("node:"):])
            return self.body_hash(found) if found is not None else None
        return self.source_hash(target)

    def source_hash(self, target: TargetRef) -> str | None:
        """A raw round's or a project file's current hash (every kind but a node's, which
        each caller finds in the copy of the nodes it holds)."""
        if target.kind == "raw":
            return self.raw_hash(parse_raw(target.key[len("raw:"):]))
        return self.file_hash(target)

    @contextmanager
    def one_pass(self) -> Iterator[None]:
        """Within the block, stat each raw record and file at most once (a pass over the pair
        table); outside it every lookup stats afresh."""
        self._pass, self._roots = {}, None
        try:
            yield
        finally:
            self._pass = None

    def _stat_once(self, key: str, path: Callable[[], Path]) -> StatKey | None:
        if self._pass is None:
            return stat_key(path())
        if key not in self._pass:
            self._pass[key] = stat_key(path())
        return self._pass[key]

    def raw_hash(self, target: RawTarget) -> str | None:
        from osk.capture import raw

        stat = self._stat_once(target.record_path,
                               lambda: self.vault.abs(target.record_path))
        if stat is None:
            return None
        cached = self._raw.get(target.record_path)
        if cached is None or cached[0] != stat or racy(stat):
            try:
                record = raw.read_record(self.vault, target.key, target.conversation,
                                         strict=False)
            except (OSError, ValueError, KeyError, OskError):
                return None  # a damaged record is reported by the validators, not here
            hashes = {int(r.number): str(r.hash) for r in record.rounds}
            cached = (stat, hashes)
            self._raw[target.record_path] = cached
        return cached[1].get(target.round)

    def file_hash(self, target: TargetRef) -> str | None:
        path = self.file_path(target)
        if path is None:
            return self.UNVERIFIABLE
        stat = self._stat_once(str(path), lambda: path)
        if stat is None:
            return None
        cached = self._files.get(str(path))
        if cached is None or cached[0] != stat or racy(stat):
            try:
                cached = (stat, sha256_bytes(path.read_bytes()))
            except OSError:
                cached = (stat, None)
            self._files[str(path)] = cached
        return cached[1]

    def file_path(self, target: TargetRef) -> Path | None:
        """Where a file target lives on this device, or None when its worktree is unknown."""
        _, key, rel = target.key.split(":", 2)
        root = Path(target.root) if target.root else None
        if root is None or not root.is_dir():
            if self._roots is None:
                from osk.provenance.sessions import known_roots

                self._roots = known_roots(self.vault)
            known = self._roots.get(key)
            root = Path(known) if known else None
        if root is None or not root.is_dir():
            return None
        return root / rel


def parse_raw(coordinate: str) -> RawTarget:
    from osk.store.edges import RawTarget

    target = parse_target(coordinate)
    if not isinstance(target, RawTarget):
        raise EdgeError(f"{coordinate!r} is not a raw coordinate")
    return target


def node_by_id(catalog: Catalog, node_id: str) -> Node | None:
    try:
        found = catalog.get(node_id)
    except OskError:
        return None
    return found if found.id == node_id else None


_RACE_NS = RACE_WINDOW_NS  # a module name, so a test can narrow the window


def racy(stat: StatKey) -> bool:
    """Changed too recently for an equal stat to prove the contents equal."""
    return time.time_ns() - stat[1] < _RACE_NS


# -- the rule: which of a citing node's pairs are candidates ------------------------------------
def stale_pairs(vault: Vault, citations: Citations, live: Iterable[str], citing_hash: str,
                current: Callable[[TargetRef], str | None], *, why: bool = True
                ) -> Iterator[tuple[Pair, str | None, str]]:
    """Each recorded pair of one citing node that is a recheck candidate now, with its
    target's current hash and the reason: the one rule, whichever copy of the vault the
    caller holds (``Rechecks``: the engine's catalog; ``osk.reads.quick_search``: the
    recall file's documents, each checked against its file).

    ``live``: the node's ``derived-from`` links as its file has them now (a pair whose link
    was removed by hand is no candidate: the next write drops it); ``citing_hash``: its body
    hash now; ``current``: a target's current hash (None: gone; ``UNVERIFIABLE``: a file
    whose worktree is not on this device, never a candidate). Lazy: a caller that only asks
    whether there is one reads the targets up to the first, and with ``why`` False it is not
    told whether a changed target changed by a person's redaction alone (the redactions
    ledger is not read: a candidate either way)."""
    links = [link_identity(link) for link in live]
    for pair in citations.pairs.values():
        if link_identity(pair.target.link) not in links:
            continue
        now = current(pair.target)
        if now == TargetHasher.UNVERIFIABLE:
            continue
        reason = _reason(pair, now, citing_hash)
        if reason is None:
            continue
        if why and reason == "target-changed" and pair.target.kind in ("raw", "node"):
            reason = _redacted_reason(vault, pair.target.key, now)
        yield pair, now, reason


def _reason(pair: Pair, current: str | None, citing_hash: str) -> str | None:
    if pair.forked:
        return "forked"
    if current is None:
        return "target-missing"
    if current != pair.target_hash:
        return "target-changed"
    if citing_hash != pair.citing_hash:
        return "citing-edited"
    return None


def _redacted_reason(vault: Vault, target_key: str, current: str | None) -> str:
    """A raw round or node whose current text is the one a person's redaction left (``osk
    redact``) changed for that reason alone: say so, so the agent knows the claim's evidence
    lost only a secret. Imported here: the ledger is read only when a target has changed."""
    from osk.capture.redacted_targets import left_by_redactions

    return "target-redacted" if current in left_by_redactions(vault).get(target_key, ()) \
        else "target-changed"


# A pass over every citing node asks each link twice in a row (its pair and its front matter)
# and a hub's link from many nodes: recent links are what a cache serves. 65,536 links held
# 13 MB at 100,000 citing nodes, for a pass that met each other link once.
@lru_cache(maxsize=4096)
def link_identity(link: str) -> str:
    """What two links have in common when they cite the same thing (a node's title after case
    folding, or the raw/file coordinate); a malformed link stands for itself."""
    try:
        target = parse_target(link)
    except EdgeError:
        return link
    if isinstance(target, NodeTarget):
        return "node:" + title_key(target.title)
    return target.link


# -- what a session has read -----------------------------------------------------------------
@dataclass
class ReadLog:
    """Which target states this session has read in full (possibly over several pages).

    A re-citation records only a state listed here; anything else answers ``recheck_unread``.
    """

    _full: set[tuple[str, str]] = field(default_factory=set)
    _spans: dict[tuple[str, str], list[tuple[int, int]]] = field(default_factory=dict)

    def note(self, target_key: str, state_hash: str, start: int, end: int, total: int) -> bool:
        """Record that characters [start, end) of a ``total``-long state were shown."""
        token = (target_key, state_hash)
        if token in self._full:
            return True
        spans = sorted([*self._spans.get(token, []), (max(0, start), min(total, end))])
        merged: list[tuple[int, int]] = []
        for lo, hi in spans:
            if merged and lo <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
            else:
                merged.append((lo, hi))
        if total == 0 or (len(merged) == 1 and merged[0][0] == 0 and merged[0][1] >= total):
            self._full.add(token)
            self._spans.pop(token, None)
            return True
        self._spans[token] = merged
        return False

    def has_read(self, target_key: str, state_hash: str | None) -> bool:
        return state_hash is not None and (target_key, state_hash) in self._full
