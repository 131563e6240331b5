"""The indexed documents in memory: one record per node, its postings, and the title tables.

``Corpus`` is what the index keeps and what ranking reads. It changes one document at a time
(``store``/``remove``) and is loaded from the recall file (``from_store``), which the index
keeps in step with it (``osk.search.recall_mirror``).
"""

from __future__ import annotations

import sys
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from osk.search.bm25 import Bm25, Staged
from osk.store.fastclass import dataclass
from osk.store.fsutil import RACE_WINDOW_NS, StatKey, sha256_text
from osk.store.grouped import Grouped

if TYPE_CHECKING:
    from osk.store.catalog import Entry
    from osk.store.node import Node

@dataclass(slots=True)
class SearchDoc:
    """What the index knows about one node; ``visible`` callbacks receive these."""

    path: str
    id: str
    title: str
    summary: str
    updated: str
    space: str
    scope: str | None
    trust: str | None
    created: float | None  # epoch seconds
    valid_from: float | None
    valid_to: float | None
    supersedes: str | None  # loose title key of the node this one replaces (key or text)
    stat: StatKey
    file_hash: str
    read_ns: int  # when the file was read (time.time_ns, taken before reading)
    length: int  # number of terms
    title_key: str
    loose_key: str
    content_hash: str  # sha256 of the indexed text (``content_text``): the vector's key

    def record(self) -> list[Any]:
        return [self.path, self.id, self.title, self.summary, self.updated, self.space,
                self.scope, self.trust, self.created, self.valid_from, self.valid_to,
                self.supersedes, *self.stat, self.file_hash, self.read_ns, self.length,
                self.title_key, self.loose_key, self.content_hash]

    @classmethod
    def from_record(cls, record: list[Any]) -> SearchDoc:
        (path, node_id, title, summary, updated, space, scope, trust, created, valid_from,
         valid_to, supersedes, size, mtime_ns, inode, file_hash, read_ns, length, tkey,
         lkey, content_hash) = record
        return cls(path, node_id, title, summary, updated, space, scope, trust, created,
                   valid_from, valid_to, supersedes, (size, mtime_ns, inode), file_hash,
                   read_ns, length, tkey, lkey, content_hash).sharing()

    def sharing(self) -> SearchDoc:
        """This document holding one string where it can (itself, changed in place): the few
        spaces, scopes and trust states one string each (a decoded record made one a
        document: 16 MB at 100,000), and the title keys the title's own string where they
        are equal to it (a lower-case title's, or the loose key of a title without
        punctuation), where each was its own copy: up to 150 bytes a node."""
        self.space, self.scope, self.trust = (_shared(self.space), _shared(self.scope),
                                              _shared(self.trust))
        if self.title_key == self.title:
            self.title_key = self.title
        if self.loose_key == self.title_key:
            self.loose_key = self.title_key
        return self

    @staticmethod
    def content_text(title: str, summary: str, body: str) -> str:
        """What the index reads of a node, as one text (what the semantic channel embeds)."""
        return f"{title}\n{summary}\n{body}"

    @staticmethod
    def hash_of(title: str, summary: str, body: str) -> str:
        """A version's content hash: what recall, receipts and review keeps name it by."""
        return sha256_text(SearchDoc.content_text(title, summary, body))

    @property
    def starts(self) -> float | None:
        """When the claim starts to hold: valid_from, else created
        (osk.authority.validity.start_of)."""
        return self.valid_from if self.valid_from is not None else self.created

    @property
    def racy(self) -> bool:
        """Read so soon after its last modification that a same-stat rewrite could hide."""
        return self.read_ns - self.stat[1] < RACE_WINDOW_NS


@dataclass
class Stored:
    """A whole corpus as its store holds it (``recallfile.load``), for ``Corpus.from_store``:
    the documents by row (a row is the loaded document's slot), each term's postings
    concatenated in term order (term ``i`` owns ``slots[offsets[i]:offsets[i + 1]]``, rows
    ascending), the file's version and meta, and its counts of document frequencies when they
    count these documents (``recallfile.COUNTED``; None: the index counts them)."""

    docs: list[tuple[int, SearchDoc]]
    lengths: array[int]  # by row; 0 where no document is
    terms: list[str]
    offsets: array[int]
    slots: array[int]
    tfs: array[int]
    version: str | None
    meta: dict[str, Any]
    counts: Counter[int] | None


class Corpus:
    """Documents by slot, their BM25 postings, and lookups by path, title and supersession."""

    def __init__(self) -> None:
        self.bm25 = Bm25()
        self.docs: dict[int, SearchDoc] = {}
        self.slot_of: dict[str, int] = {}
        self.by_title: Grouped[int] = Grouped()  # title key -> slots
        self.by_loose: Grouped[int] = Grouped()  # loose title key -> slots
        self.successors: dict[str, set[int]] = {}  # loose title key -> slots that supersede it
        self.version = 0  # bumped on every change
        self._free: list[int] = []
        self._next_slot = 0
        self._doc_terms: dict[int, str] = {}  # distinct terms of documents stored here
        # Where a loaded document's terms are kept when not here (the recall file: a load
        # reads none), None when it holds no such version (``terms_of``).
        self.stored_terms: Callable[[SearchDoc], list[str] | None] | None = None
        self._supersession: tuple[int, list[tuple[int, int]], set[int]] | None = None
        # Each document's kind, its (space, scope): all that its locality depends on, so a
        # query bounds the factor of a whole kind at once (``Bm25.top``'s ceilings).
        self.kinds: list[tuple[str, str | None]] = []
        self.kind_of: list[int] = []  # slot -> index in ``kinds``
        self._kind_ids: dict[tuple[str, str | None], int] = {}
        self._staged: Staged | None = None  # a bulk build's postings (``stage``)

    # -- loading ------------------------------------------------------------------------------
    @classmethod
    def from_store(cls, stored: Stored,
                   known: Mapping[str, Entry] | None = None) -> Corpus:
        """The corpus the recall file holds (``recallfile.load``: a row is a slot);
        ``known``: a catalog's entries by path, whose objects a document holds where it holds
        values equal to them (``_share``)."""
        corpus = cls()
        lengths: dict[int, int] = {}
        # Times are whole minutes, so most documents share each: one float each (24 bytes
        # a document, 2.4 MB at 100,000, for the few minutes an import of them took).
        moments: dict[float, float] = {}
        for slot, doc in stored.docs:
            doc.sharing()
            entry = known.get(doc.path) if known is not None else None
            if entry is not None:
                _share(doc, entry)
            for name in ("created", "valid_from", "valid_to"):
                moment = getattr(doc, name)
                if moment is not None:
                    setattr(doc, name, moments.setdefault(moment, moment))
            corpus.docs[slot] = doc
            lengths[slot] = doc.length
        corpus.bm25 = Bm25.from_base(stored.terms, stored.offsets, stored.slots, stored.tfs,
                                     lengths)
        if stored.counts is not None:
            corpus.bm25.adopt_counts(stored.counts)
        corpus._next_slot = len(stored.lengths)
        corpus._free = [slot for slot in range(corpus._next_slot - 1, -1, -1)
                        if slot not in corpus.docs]  # low slots reused first
        for slot, doc in corpus.docs.items():
            corpus.slot_of[doc.path] = slot
            corpus._link(slot, doc)
            corpus._kind(slot, doc)
        return corpus

    # -- reading ------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.docs)

    def get(self, path: str) -> SearchDoc | None:
        slot = self.slot_of.get(path)
        return None if slot is None else self.docs[slot]

    def terms_of(self, slot: int) -> list[str]:
        """A document's distinct terms (needed to remove it): kept when it was stored in this
        process; else as ``stored_terms`` holds them for this version of it (the recall file
        it was loaded from); else searched for in the postings (``Bm25.terms_holding``: a
        pass over them, where another process wrote a later version there)."""
        terms = self._doc_terms.get(slot)
        if terms is not None:
            return terms.split(" ") if terms else []
        found = self.stored_terms(self.docs[slot]) if self.stored_terms is not None else None
        return found if found is not None else self.bm25.terms_holding(slot)

    def holding(self, slots: Iterable[int], terms: Iterable[str]) -> dict[int, set[str]]:
        """Which of ``terms`` each document holds: from its terms when stored in this process,
        else from the terms' postings (``Bm25.holds``: a binary search each)."""
        wanted = set(terms)
        held: dict[int, set[str]] = {}
        for slot in slots:
            own = self._doc_terms.get(slot)
            if own is not None:
                held[slot] = wanted.intersection(own.split(" "))
            else:
                held[slot] = {term for term in wanted if self.bm25.holds(term, slot)}
        return held

    def supersession(self) -> tuple[list[tuple[int, int]], set[int]]:
        """(superseded slot, superseding slot) pairs and the superseded slots; cached until
        the corpus changes."""
        cached = self._supersession
        if cached is None or cached[0] != self.version:
            pairs = [(old, new) for key, successors in self.successors.items()
                     for old in self.by_loose.get(key, ()) for new in successors if old != new]
            cached = self._supersession = (self.version, pairs, {p[0] for p in pairs})
        return cached[1], cached[2]

    # -- changing -----------------------------------------------------------------------------
    def stage(self) -> None:
        """Start a bulk build of this empty corpus: the documents stored until ``staged``
        keep their postings compactly (``bm25.Staged``) and not their terms (the recall file
        the build writes holds them: ``recallfile.RecallBuild``), so a build's memory is what
        a loaded index holds. Nothing may read the postings before ``staged``; a change to a
        stored document ends the staging first."""
        if self.docs:
            raise ValueError("only an empty corpus is built in bulk")
        self._staged = Staged()

    def staged(self) -> None:
        """End a bulk build (``stage``): the postings become the index's base."""
        staged, self._staged = self._staged, None
        if staged is not None:
            self.bm25 = staged.index()
            self.version += 1

    def store(self, doc: SearchDoc, frequencies: Mapping[str, int]) -> None:
        """Add a document, or replace the one at the same path (only its postings change)."""
        slot = self.slot_of.get(doc.path)
        if slot is not None:
            self.staged()  # a replacement reads the postings
            terms = self.terms_of(slot)
            self._unlink(slot, self.docs[slot])
            self.bm25.remove(slot, terms)
        else:
            slot = self._free.pop() if self._free else self._next_slot
            self._next_slot = max(self._next_slot, slot + 1)
            self.slot_of[doc.path] = slot
        self.docs[slot] = doc
        if self._staged is not None:
            self._staged.add(slot, frequencies, doc.length)
        else:
            self._doc_terms[slot] = " ".join(frequencies)
            self.bm25.add(slot, frequencies, doc.length)
        self._link(slot, doc)
        self._kind(slot, doc)

    def remove(self, path: str) -> bool:
        """Drop the document at ``path``; False when there is none."""
        slot = self.slot_of.get(path)
        if slot is None:
            return False
        self.staged()
        terms = self.terms_of(slot)
        del self.slot_of[path]
        doc = self.docs.pop(slot)
        self._unlink(slot, doc)
        self.bm25.remove(slot, terms)
        self._doc_terms.pop(slot, None)
        self._free.append(slot)
        return True

    def _kind(self, slot: int, doc: SearchDoc) -> None:
        key = (doc.space, doc.scope)
        kind = self._kind_ids.get(key)
        if kind is None:
            kind = self._kind_ids[key] = len(self.kinds)
            self.kinds.append(key)
        if slot >= len(self.kind_of):
            self.kind_of.extend([0] * (slot + 1 - len(self.kind_of)))
        self.kind_of[slot] = kind

    def _link(self, slot: int, doc: SearchDoc) -> None:
        self.version += 1
        self.by_title.add(doc.title_key, slot)
        self.by_loose.add(doc.loose_key, slot)
        if doc.supersedes:
            self.successors.setdefault(doc.supersedes, set()).add(slot)

    def _unlink(self, slot: int, doc: SearchDoc) -> None:
        self.version += 1
        self.by_title.discard(doc.title_key, slot)
        self.by_loose.discard(doc.loose_key, slot)
        slots = self.successors.get(doc.supersedes) if doc.supersedes else None
        if doc.supersedes and slots is not None:
            slots.discard(slot)
            if not slots:
                del self.successors[doc.supersedes]


def _share(doc: SearchDoc, entry: Entry) -> None:
    """Have ``doc`` hold the catalog entry's path, stat, id, file hash, summary and updated
    time where they are equal to its own: otherwise each document holds a second copy of
    them, read from the recall file (620 bytes a node, 62 MB at 100,000). Values, not
    meaning: a document the catalog holds at another stat or version keeps its own."""
    doc.path = entry.path
    if entry.stat == doc.stat:
        doc.stat = entry.stat
    node = entry.node
    if node is not None and node.known_file_hash == doc.file_hash:
        doc.file_hash = node.file_hash
        if node.id == doc.id:
            doc.id = node.id
        for name in ("summary", "updated"):  # (another 170 bytes a node)
            held = node.field(name)
            if held == getattr(doc, name):
                setattr(doc, name, held)


def _shared(value: Any) -> Any:
    """``value``, one object for each string of its kind (``sys.intern``)."""
    return sys.intern(value) if isinstance(value, str) else value


def node_content_hash(node: Node) -> str:
    """A node version's content hash (``SearchDoc.hash_of`` of what it says now)."""
    return SearchDoc.hash_of(node.title, node.meta.summary, node.body)
