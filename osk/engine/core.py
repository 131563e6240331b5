"""The engine: the one object the CLI and the MCP server call.

An ``Engine`` holds a vault, its catalog, the session (key, scope, binding), the rechecks table,
what this session has read, and the search index. It has one method per tool; each validates
nothing the surface already validated, makes the engine calls, and returns a dataclass that
names the session's active scope.

Scope isolation (vault setting ``scope_isolation``, default on) is applied to every read:
``search``, ``read_node`` and ``read_raw`` see another project's Scope nodes and raw records only
when that scope is listed in ``shared_scopes``.

The methods delegate what only some calls need, and import it when they use it: the write path
(``osk.writes.write``), capture (``osk.capture.raw``), ``read_raw``
(``osk.reads.raw_reads``), reads at a past date (``osk.reads.as_of``), and the ``overview`` and
``recheck`` reports (``osk.reads.overview``). So a process that only reads (``osk search``)
never loads them: a fresh process pays for every module it imports (a test checks
``sys.modules``).
"""

from __future__ import annotations

import functools
import importlib
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osk.authority import mutation, protection
from osk.calls.context import AGENT, USER, WriteContext
from osk.calls.pages import node_page
from osk.calls.request import NewNode, NodeEdit
from osk.calls.results import (
    AppendResult,
    MemoryNote,
    NodeRead,
    Overview,
    RawRead,
    RecheckReport,
    Related,
)
from osk.engine.vaults import open_vault
from osk.errors import NodeNotFound, OskError, SearchError
from osk.provenance import candidates
from osk.provenance.markers import Listed, OpenItems
from osk.provenance.pairs import ReadLog
from osk.provenance.rechecks import Rechecks
from osk.provenance.sessions import Routing, Session, open_session
from osk.search import DEFAULT_K, SearchIndex
from osk.search.corpus import SearchDoc, node_content_hash
from osk.search.ranking import Hit, Markers, ScopeRule, SearchResult
from osk.search.rounds import SEARCH_KINDS, RoundIndex, merged, round_hits
from osk.store.catalog import Catalog, Changes
from osk.store.fsutil import RACE_WINDOW_NS, collector_paused, synced_at_exit
from osk.store.node import Node
from osk.store.node import parse as parse_node
from osk.store.vault import Vault, disk_error, scope_of

if TYPE_CHECKING:
    from osk.search import semantic
    from osk.search.recall_server import Listener
    from osk.writes.write import MoveResult, ReciteResult, WriteResult

REFRESH_SECONDS = 1.0  # reads re-stat every node file at most this often (for hand edits)
# Files still inside the race window at the end of a bulk load that the next process may read
# rather than wait for (``persist``): a few files cost it less than the wait costs the load.
SETTLE_FILES = 64
# What the first searches imported as they met it, loaded by ``warm`` instead: what a listed
# node's markers read (its front matter model, ``Node.meta``: pydantic's; the steering check,
# the YAML a header may need, trust and the review queue). With numpy (the rounds' top-k:
# ``RoundIndex.warm``), 80-160 ms of CPU each of a server's first searches paid at 100,000
# records.
FIRST_SEARCH_IMPORTS = ("osk.store.contract", "osk.capture.steering", "yaml",
                        "osk.authority.trust", "osk.authority.review_queue")

log = logging.getLogger("osk.engine.core")


BACKGROUND_PACE = 1.0  # the background catch-up rests as long as it works: half the cores


def _embed_until_done(index: SearchIndex, rounds: RoundIndex, meaning: Any) -> None:
    """The semantic catch-up thread: embed until nothing is missing (writes made while it ran
    included), nodes first, then the raw rounds (``meaning``: their ``RoundVectors``), at
    ``BACKGROUND_PACE``; a failure only logs, the lexical channel keeps serving."""
    import logging

    try:
        for _ in range(10):  # a node whose text cannot be read stays missing: bounded
            if index.missing_vectors() == 0:
                break
            index.embed_missing(budget=None, pace=BACKGROUND_PACE)
        if meaning is not None:
            meaning.catch_up(rounds, budget=None, pace=BACKGROUND_PACE)
    except Exception:
        logging.getLogger("osk.engine.core").exception("embedding nodes for search failed")


# -- the engine ----------------------------------------------------------------------------------
@dataclass
class Engine:
    """One session's view of one vault. Not thread-safe: a surface that runs tools on worker
    threads serialises calls by holding ``calls`` around each one (the MCP server's tools, its
    early searches, and the searches a fresh `osk search` asks it for: ``search_as``)."""

    vault: Vault
    catalog: Catalog
    rechecks: Rechecks
    routing: Routing
    reads: ReadLog
    actor: str
    _ctx: WriteContext
    _index: SearchIndex | None = None
    _rounds: RoundIndex | None = None
    _round_vectors: Any = None  # the rounds' RoundVectors (None: the semantic channel is off)
    _watch_rounds: bool = False  # a long-running process's choice (``open``'s ``watch``)
    embed_after_writes: bool = False  # the MCP server's choice: see embed_in_background
    _embedder: threading.Thread | None = None
    _scope_answers: tuple[Session | None, dict[str | None, bool]] = field(
        default_factory=lambda: (None, {}))
    # the unindexed node files' stats (``_unindexed``) and the (catalog mark, index version)
    # they were taken at
    _others: tuple[tuple[int, tuple[int, int]], dict[str, list[int]]] | None = None
    # held by whoever calls from another thread; shared with siblings, which share its state
    calls: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)

    @classmethod
    def open(cls, vault: Vault | str | Path | None = None, *, cwd: Path | None = None,
             scope: str | None = None, actor: str = "agent", watch: bool = False,
             look: bool = True, claim: bool = True) -> Engine:
        """Open the vault (``--vault``/``OSK_VAULT``/cwd) for a session working in ``cwd``.
        ``watch``: a long-running process's choice: have the kernel report hand edits
        (``Freshness.watch``; where it cannot, the once-a-second look keeps its stat sweep),
        chosen before the first look so that look watches every folder it lists. ``look``:
        False for a command whose one call walks the vault first anyway (``overview``,
        ``reindex``): the opening walk would be a second one (1.2 s at 100,000 nodes); every
        other call made before a walk walks first (``_fresh``, ``Freshness.ensure``); ``persist``
        and ``catch_up`` walk first too. ``claim``:
        False for an engine that writes nothing under its session (``open_session``)."""
        if actor not in (AGENT, USER):
            raise ValueError(f"actor must be 'agent' or 'user', not {actor!r}")
        found = open_vault(vault, cwd)
        mutation.finish_killed_writes(found)
        session = open_session(found, (cwd or Path.cwd()), scope, claim=claim)
        catalog, rechecks, routing, reads = Catalog(found), Rechecks(found), Routing(found), \
            ReadLog()
        ctx = WriteContext(found, catalog, session, actor, rechecks, reads, routing)
        engine = cls(found, catalog, rechecks, routing, reads, actor, ctx)
        if watch:
            ctx.fresh.watch()
            engine._watch_rounds = True  # the raw folders too (``RoundIndex``'s ``watch``)
        if look:
            engine.refresh()
        return engine

    def sibling(self, *, cwd: Path, scope: str | None, files: Path | None = None) -> Engine:
        """Another session on this vault (``scope``, or the one ``cwd`` routes to) sharing this
        engine's catalog, recheck table, read log, ledgers and freshness, so what either writes
        the other knows without a walk: ``osk import`` writes every scope through siblings.
        ``files``: where its file citations resolve instead of the worktree (a host's own
        memory folder, ``osk import --from``)."""
        session = open_session(self.vault, cwd, scope)
        if files is not None:
            session = replace(session, key=replace(session.key, repo_root=files))
        ctx = replace(self._ctx, session=session)
        ctx.fresh = self._ctx.fresh
        return replace(self, _ctx=ctx, _index=None, _embedder=None, _scope_answers=(None, {}),
                       _others=None)

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Several writes under one hold of the mutation lock (``write.batch``); the writes
        inside fsync once, at the end (``fsutil.synced_at_exit``)."""
        from osk.writes import write

        with synced_at_exit(), write.batch(self._ctx):
            yield
        self._recount_candidates()  # what each write inside left to the batch's end

    @property
    def session(self) -> Session:
        return self._ctx.session

    @property
    def scope(self) -> str:
        return self.session.scope

    # -- freshness -----------------------------------------------------------------------
    def refresh(self) -> Changes:
        """Re-stat the vault's node files; feed what changed to the search index."""
        self._ctx.reload_settings()
        changes = self._ctx.fresh.full()
        self._ctx.keep(changes)
        self._sync_index()
        return changes

    def _fresh(self) -> None:
        """Reads: exact for every osk write, within a documented bound for edits by hand.

        When the last periodic look (a read's or a write's) is a second old, the next one
        (``Freshness.periodic``: a full refresh up to ``SWEEP_FILES`` node files, the folder
        check and a turn of the file sweep beyond); otherwise, when the vault generation moved
        (another osk process, or this one, wrote since the last look), the folder check, which
        finds every change an osk writer makes (``osk.store.freshness``). While nothing moved this
        costs one ``stat``. A watched engine's periodic look is skipped while the kernel reported
        nothing and nothing else that look reads moved (``Freshness.idle``, ``_at_rest``).
        """
        if time.monotonic() - self._ctx.fresh.full_at >= REFRESH_SECONDS:
            if self._at_rest() and self._ctx.fresh.idle():
                return
            self._ctx.reload_settings()
            self._ctx.keep(self._ctx.fresh.periodic())
            self._sync_index(moved=True)
        elif self._ctx.fresh.behind():
            self._ctx.keep(self._ctx.fresh.quick())
            self._sync_index(moved=True)

    def _at_rest(self) -> bool:
        """Whether, besides the node files, nothing the periodic look reads has moved since the
        last: osk.toml, and the search index's own state (``SearchIndex.at_rest``)."""
        return (self._index is not None and self._ctx.settings_unmoved()
                and self._index.at_rest())

    def _search_index(self) -> SearchIndex:
        """The search index, created on first use and reconciled with the catalog's stats of
        every node file, so changes made before it existed need not be replayed into it; it
        never walks on its own: every change the catalog sees is handed to it (``_sync_index``)."""
        if self._index is None:
            self._index = SearchIndex(self.vault, refresh_interval=math.inf)
            self._ctx.take_changes()
            self._index.reconcile(self.catalog)  # the catalog's stats: no second walk
            self._note_look()
        return self._index

    def _sync_index(self, *, moved: bool = False) -> None:
        """Hand the catalog's changes to the index so a write is searchable on return.

        ``moved``: the vault generation moved or the periodic look ran, so the index checks
        the approvals too (an approval changes what is served without changing a node file).
        """
        changes = self._ctx.take_changes()
        if self._index is not None and (changes or moved):
            self._index.sync(self.catalog, changes)
            self._note_look()

    def _note_look(self) -> None:
        """Tell the index what the catalog's last look saw, now that it holds every change
        that look found: a fresh ``osk search`` checks that instead of looking itself
        (``osk.reads.quick_search``). Files the index does not hold (invalid nodes) go with it."""
        assert self._index is not None
        look = self._ctx.fresh.look()
        if look is not None and len(self.catalog.entries) != len(self._index):
            look["others"] = self._unindexed()
        self._index.note_look(look)

    def _unindexed(self) -> dict[str, list[int]]:
        """The stats of the node files the catalog holds and the index does not (invalid
        ones), taken again only when either changed: a look comes with nearly every call at
        an agent's pace, and this was a pass over every entry."""
        assert self._index is not None
        key = (self.catalog.mark, self._index.version)
        if self._others is None or self._others[0] != key:
            entries = self.catalog.entries
            self._others = (key, {rel: list(entries[rel].stat)
                                  for rel in self._index.unindexed(entries.keys())})
        return dict(self._others[1])

    def _after_write(self) -> None:
        """Make a write searchable and refresh the hook snapshot of recheck candidates.

        Runs after refused writes too (the lock's refresh may have seen other changes). A
        failure here must not hide the write's own outcome: an index that cannot take the
        change is dropped and rebuilt by the next search's walk; a damaged rechecks ledger is
        reported by overview and the validators.
        """
        try:
            self._sync_index()
        except (OskError, OSError):  # a full disk, say: the write itself has landed
            self._index = None
        if not self._ctx.fresh.held:  # inside a batch: once, at its end (``batch``)
            self._recount_candidates()
        if self.embed_after_writes and self._index is not None:
            self.embed_in_background()

    def _recount_candidates(self) -> None:
        """Bring the recheck candidates, and the hooks' summary of them, up to date."""
        try:  # the hooks' summary of candidates is a cache the disk may refuse now
            self.rechecks.candidates(self.catalog)
        except (OskError, OSError):
            pass

    # -- writing -------------------------------------------------------------------------
    def create_node(self, new: NewNode) -> WriteResult:
        from osk.writes.write import create_node

        try:
            return create_node(self._ctx, new)
        finally:
            self._after_write()

    def update_node(self, ref: str, edit: NodeEdit) -> WriteResult:
        """Replace the body (with ``expect_hash``), edit one passage (``old_text`` ->
        ``new_text``), or change summary/edges. ``recheck_of`` names the recheck candidates
        this call resolves: with changes it is a correction; with none, a re-citation."""
        from osk.writes.write import update_node

        try:
            return update_node(self._ctx, ref, edit)
        finally:
            self._after_write()

    def recite(self, candidates: Sequence[str]) -> ReciteResult:
        """Close recheck candidates as unchanged, at the target states this session read."""
        from osk.writes.write import recite

        try:
            return recite(self._ctx, candidates)
        finally:
            self._after_write()

    def move_nodes(self, refs: Sequence[str], *, space: str, cluster: str,
                   scope: str | None = None) -> MoveResult:
        from osk.writes.moves import move_nodes
        from osk.writes.placement import Place

        try:
            return move_nodes(self._ctx, refs, Place(space, cluster, scope))
        finally:
            self._after_write()

    def move_cluster(self, cluster: str, *, space: str, to_space: str) -> MoveResult:
        from osk.writes.moves import move_cluster

        try:
            return move_cluster(self._ctx, cluster, space=space, to_space=to_space)
        finally:
            self._after_write()

    def append_raw(self, conversation: str, *, user: str, assistant: str,
                   tools: Sequence[str] = (), completion: str = "", host: str = "",
                   ) -> AppendResult:
        """Capture one round into this session's raw record (the hooks' path)."""
        from osk.capture import raw

        ref = raw.append_round(self.vault, self.session.key.key, conversation, raw.RoundInput(
            user=user, assistant=assistant, tools=tuple(tools), completion=completion,
            host=host))
        return AppendResult(self.scope, ref.coordinate, ref.number, ref.hash, ref.duplicate,
                            ref.path)

    # -- reading nodes ---------------------------------------------------------------------
    def read_node(self, ref: str, *, section: str | None = None, start: int | None = None,
                  length: int | None = None, as_of: str | None = None,
                  related: bool = True) -> NodeRead:
        """A node by title or id. A long body comes in pages of at most 4,000 characters:
        by ``section`` (a heading from ``outline``) and/or by ``start``/``length``. The hash
        that authorises a full replacement comes with the read that completes this session's
        reading of the current version: one whole read, or the last of its pages. The first
        page lists the related nodes (``related``) unless ``related`` is False (a reader that
        shows none: their similar ones take a search, which in a fresh process loads the index).

        ``as_of``: the version readers were served at that time (``osk.authority.validity``); such a
        read carries no hash and does not count as reading the node for a re-citation."""
        if as_of is not None:
            from osk.reads.as_of import past_node

            self._fresh()
            past = past_node(self._ctx, self.visible, ref, as_of)
            return node_page(self.scope, past, past, section, start, length)
        node = self.visible_node(ref)
        shown, pending = self._served(node)
        page = node_page(self.scope, node, shown, section, start, length)
        self.reads.note(f"node:{node.id}", shown.body_hash, page.start, page.end,
                        page.total_chars)
        # The replacement hash is the file's, so the pages that earn it are counted per file
        # version: every page of one version read (in any order) is a complete read.
        whole = self.reads.note(f"file:{node.id}", node.file_hash, page.start, page.end,
                                page.total_chars)
        return replace(page, pending=pending,
                       hash=node.file_hash if whole and not pending else None,
                       markers=tuple(self.markers([node.id]).get(node.id, [])),
                       related=tuple(self.related(shown)) if related and page.start == 0
                       else ())

    def related(self, node: Node) -> list[Related]:
        """Up to ``RELATED`` nodes this session may see near ``node`` (the rule:
        ``osk.calls.related``): from the catalog, the rechecks table and a bounded search."""
        from osk.calls import related

        def shown_title(other: Node) -> str | None:
            try:
                return self._served(other)[0].title
            except NodeNotFound:
                return None

        return related.related_nodes(
            node, named=lambda ref: _node_or_none(self.catalog, ref),
            citing=lambda: self.rechecks.citing(node.id),
            similar=lambda query, k: self._hits(query, k, None,
                                                postings=related.RELATED_POSTINGS),
            shown_title=shown_title, can_see=self.session.can_see_scope)

    def visible_node(self, ref: str) -> Node:
        """The node ``ref`` names if this session may see it, re-read from disk."""
        self._fresh()
        try:
            node = self.catalog.get(ref)
        except NodeNotFound:
            self.refresh()
            node = self.catalog.get(ref)
        if not self.session.can_see_scope(node.scope):
            raise NodeNotFound.named(ref)
        self._ctx.freshen([node.path])  # the CAS hash must be exact; the index hears of it too
        fresh = self.catalog.by_path(node.path)
        if fresh is None:
            return self.catalog.get(ref)  # raises the file's contract error or NodeNotFound
        return fresh

    def _served(self, node: Node) -> tuple[Node, bool]:
        served = protection.served(self.vault, node.path, node.text)
        if served.text is None:
            raise NodeNotFound(
                f"{node.title!r} is a new node in a protected region waiting for the "
                f"person's approval; it is not served yet", ref=node.title,
            )
        if served.text == node.text:
            return node, bool(served.pending)
        return parse_node(node.path, served.text), bool(served.pending)

    # -- reading raw records and project files -------------------------------------------------
    def read_raw(self, coordinate: str, *, rounds: Sequence[int] | None = None,
                 start: int = 0, length: int | None = None) -> RawRead:
        """A raw round, a raw record's review view or a project file, in pages of at most
        6,000 characters (``osk.reads.raw_reads``)."""
        from osk.reads.raw_reads import read_raw

        return read_raw(self._ctx, coordinate, rounds=rounds, start=start, length=length)

    # -- search and markers ----------------------------------------------------------------
    def warm(self) -> None:
        """Load what the first searches would otherwise load as they meet it: the index, the
        recheck table, the raw rounds' index and its top-k, and the modules a listed node's
        markers import (``FIRST_SEARCH_IMPORTS``).

        The MCP server calls this as it opens the engine, off the request path, so the
        session's first questions do not pay for it.
        """
        self._search_index()  # loaded and reconciled with the catalog
        self.rechecks.stale_node_ids(self.catalog)
        self._rounds_channel()[0].warm()
        for name in FIRST_SEARCH_IMPORTS:
            importlib.import_module(name)

    def persist(self) -> None:
        """Leave what a bulk load built whole on disk, so the next process reads no node file:
        one full look (the catalog exact, recorded with the index), the catalog snapshot,
        and every change of the search index committed to its store (``osk import`` ends
        with this).

        A file read within the race window of its mtime cannot be vouched for by its stat, so
        the next process would read it again (catalog and index alike): when more than
        ``SETTLE_FILES`` are, this waits out the window (at most its 2 s) and looks again,
        which re-reads them (a compare with the text held: no parse) past it."""
        self.refresh()
        count, newest = self.catalog.unsettled()
        if count > SETTLE_FILES:
            time.sleep(max(0.0, (newest + RACE_WINDOW_NS - time.time_ns()) / 1e9))
            self.refresh()
        self.catalog.save_snapshot(last=True)  # a bulk load's end: nothing saves it again
        if self._index is None:  # no index in this process: none on disk is built to disk
            index = SearchIndex(self.vault, refresh_interval=math.inf)
            self._ctx.take_changes()  # the build reads every file: nothing to hand over
            if index.build_on_disk(self.catalog.entries, self._ctx.fresh.look()):
                self._index = index
                return
        index = self._search_index()
        self._note_look()
        index.flush()

    def catch_up(self) -> None:
        """Leave what a fresh process reads beside the files as the vault is now: the
        catalog's snapshot, the search index on disk with this look recorded (``persist``), and
        the rechecks table on disk. ``osk sync`` calls this once it has landed another device's
        nodes or ledgers: a look cannot vouch for the files a landing rewrote, so the next
        search or read would otherwise open an engine of its own to take them in. Open it with
        ``claim=False``: nothing here is written under its session."""
        self.persist()
        self.rechecks.stale_node_ids(self.catalog)

    def reindex(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Rebuild the search index and the recall file from the node files alone (the files
        are the source of truth; what was persisted is forgotten), then record this look with
        it; ``progress(done, total)`` per file. Returns how many nodes are indexed."""
        self.refresh()
        self._ctx.take_changes()  # the rebuild reads every file: nothing to hand over
        if self._index is None:
            self._index = SearchIndex(self.vault, refresh_interval=math.inf)
        self._index.rebuild(progress)
        self._note_look()
        self.catalog.save_snapshot()
        return len(self._index)

    def listen_for_recall(self) -> Listener | None:
        """Answer the prompt-submit hook's per-prompt recall over a local socket with this
        index's ranking (``osk.search.recall_server``); None when the channel is off or the
        semantic model is not installed (the hook's recall file ranks the same then)."""
        from osk.search import recall_server

        return recall_server.listen(self._search_index(), self.vault, self._asked_search)

    def search_as(self, cwd: Path, scope: str | None, query: str, *, k: int | None = None,
                  as_of: str | None = None, kind: str = "all") -> SearchResult:
        """``search`` as a session working in ``cwd`` (``scope``: its ``--scope``) sees it, on
        this engine's index and under ``calls``: what a fresh `osk search` asks this running
        server for (``osk.search.recall_server``), so its hits are the search tool's own for
        that scope, fused with meaning by the model this process holds. ``k`` None: the
        default."""
        with self.calls:
            index = self._search_index()
            self._rounds_channel()  # the sibling shares the rounds' index and vectors
            other = replace(self.sibling(cwd=cwd, scope=scope), _index=index)
            wanted = {} if k is None else {"k": k}
            return other.search(query, as_of=as_of, kind=kind, **wanted)

    def _asked_search(self, asked: Any) -> SearchResult:
        """``search_as`` for a request read off the recall socket (a ``SearchAsk``)."""
        return self.search_as(Path(asked.cwd), asked.scope, asked.query, k=asked.k,
                              as_of=asked.as_of, kind=asked.kind)

    def embed_nodes(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Give every indexed node its semantic vector now; how many could not get one.
        Returns 0 at once when the semantic channel is off."""
        return self._search_index().embed_missing(budget=None, progress=progress)

    def embed_rounds(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Give every indexed raw round its semantic vectors now; how many rounds' records
        are still without (0 at once when the channel is off)."""
        rounds, meaning = self._rounds_channel()
        if meaning is None:
            return 0
        rounds.refresh()
        return int(meaning.catch_up(rounds, budget=None, progress=progress))

    def embed_in_background(self) -> None:
        """Embed nodes that lack a vector in a daemon thread, unless one is already at it.

        Minutes for a large vault the first time (tens of milliseconds a node), so the MCP
        server starts this when it opens and (``embed_after_writes``) after each write: a
        search then finds the vector ready instead of computing it, and until then finds the
        node by its words. The thread touches only the search index, which has its own lock.
        """
        index = self._search_index()
        if index.vectors is None or (self._embedder is not None and self._embedder.is_alive()):
            return
        self._embedder = threading.Thread(target=_embed_until_done,
                                          args=(index, *self._rounds_channel()),
                                          name="osk-embed", daemon=True)
        self._embedder.start()

    def search(self, query: str, *, k: int = DEFAULT_K, as_of: str | None = None,
               kind: str = "all") -> SearchResult:
        """Ranked hits visible to this session, each with its markers (k is capped at
        ``MAX_K``; below 1 is refused): nodes and raw rounds (``kind``: all, nodes, rounds;
        a round is marked "raw round", its coordinate its id). ``as_of``: the vault as it
        stood then, each node in the version readers were served at that time, ranked by
        those words (nodes only)."""
        if kind not in SEARCH_KINDS:
            raise SearchError(f"search kind must be one of {', '.join(SEARCH_KINDS)}, "
                              f"not {kind!r}", kind=kind)
        if as_of is not None:  # nodes only: a round has no past version
            from osk.reads.as_of import search_past

            self._fresh()
            return search_past(self._ctx, self.visible, query, k, as_of)
        nodes = self._hits(query, k, self.markers) if kind != "rounds" else []
        if kind == "nodes":
            return SearchResult(self.scope, query, tuple(nodes))
        rounds = self._round_hits(query, k)
        return SearchResult(self.scope, query, tuple(
            merged(nodes, rounds, self._cited_rounds(nodes), k)))

    def _round_hits(self, query: str, k: int) -> list[Hit]:
        """Raw rounds of the projects this session may see (scope isolation, as read_raw)."""
        rounds, meaning = self._rounds_channel()
        routing, session = self.routing, self.session
        # A key's scope looked up once a search: most hits share a few conversations' keys,
        # and each lookup reads the routing ledger's view (0.05 ms each, 8-10 hits a search).
        scope_for = functools.cache(routing.scope_for)

        def visible(key: str) -> bool:
            return routing.key_visible(session, key)

        try:
            return round_hits(rounds, query, k, visible, scope_for, meaning)
        except Exception as exc:
            refused = disk_error(exc, sqlite_file=rounds.path)
            if refused is None and meaning is not None:
                # a damaged model must not take search down: the rounds' words from now on
                log.exception("the rounds' semantic channel failed (%s); ranking them by "
                              "words from now on; `osk doctor` says how to mend it", exc)
                self._round_vectors = None
                return self._round_hits(query, k)
            if refused is None:
                raise
            # The rounds' index is a cache the disk cannot update now: the rounds it already
            # holds are still found, by their words.
            log.warning("raw rounds captured since the index last took them are left out of "
                        "search: %s", refused)
        try:
            return round_hits(rounds, query, k, visible, scope_for, refresh=False)
        except Exception as exc:
            if disk_error(exc, sqlite_file=rounds.path) is None:
                raise
            return []  # nor can it be read: nodes are still served

    def _rounds_channel(self) -> tuple[RoundIndex, Any]:
        """The round index and, when the semantic channel is on, the rounds' vectors."""
        if self._rounds is None:
            from osk.search.round_vectors import RoundVectors

            self._rounds = RoundIndex(self.vault, watch=self._watch_rounds)
            self._round_vectors = RoundVectors.for_vault(self.vault)
        return self._rounds, self._round_vectors

    def _cited_rounds(self, hits: Sequence[Hit]) -> dict[str, set[str]]:
        """node id -> the raw rounds it cites (the rechecks ledger's citations)."""
        from osk.provenance.pairs import cited_rounds

        return cited_rounds(self.rechecks.table(), [hit.id for hit in hits])

    def _hits(self, query: str, k: int, markers: Markers | None, *,
              postings: int | None = None) -> list[Hit]:
        """The index's hits for this session, the catalog made fresh first (``postings``: as
        in ``SearchIndex.search``)."""
        self._fresh()
        index = self._search_index()
        self._sync_index()
        return index.search(query, k=k, scope=self.scope, visible=ScopeRule(self._sees),
                            markers=markers, postings=postings)

    def visible(self, doc: object) -> bool:
        """Scope isolation for one search document (anything with ``.path``, or a path).

        A search document's scope is read from it, and each scope's answer is remembered until
        the session (or its settings) change. A search asks it by kind of node (``_sees``)."""
        scope = doc.scope if isinstance(doc, SearchDoc) else \
            scope_of(str(getattr(doc, "path", doc)))
        return self._sees(None, scope)

    def _sees(self, space: str | None, scope: str | None) -> bool:
        """``visible`` for a node in ``space`` and ``scope``, which the scope alone decides
        (a ``ScopeRule``: called for every candidate of every search)."""
        session, answers = self._scope_answers
        if session is not self.session:
            session, answers = self._scope_answers = (self.session, {})
        seen = answers.get(scope)
        if seen is None:
            seen = answers[scope] = session.can_see_scope(scope)
        return seen

    def markers(self, node_ids: Iterable[str]) -> dict[str, list[str]]:
        """recheck / conflict / pending / inferred / steering (/ the review marker) for each id
        that has any (the rule: ``osk.provenance.markers``)."""
        wanted = list(node_ids)
        stale = self.rechecks.stale_among(wanted, self.catalog)
        items = OpenItems(self.vault)
        result: dict[str, list[str]] = {}
        for node_id in wanted:
            node = _node_or_none(self.catalog, node_id)
            found = items.of(node_id, None if node is None else _listed(node),
                             recheck=node_id in stale)
            if found:
                result[node_id] = found
        return result

    # -- what an agent leaves for the person, and its scope's memory ------------------------
    def record_candidate(self, kind: str, parties: Sequence[str],
                         note: str = "") -> tuple[candidates.Candidate, bool]:
        """File a conflict candidate between nodes this session can see, for the person;
        (the candidate, whether it is new: the same parties at the same hashes are one)."""
        found = [self.visible_node(ref) for ref in parties]
        return candidates.Candidates(self.vault).record(kind, found, note, actor=AGENT)

    def scope_memory(self, action: str, *, text: str | None = None,
                     edits: Sequence[tuple[str, str]] = (), expect_hash: str | None = None,
                     eviction: str | None = None, node: str | None = None,
                     drafter: str = "", host: str = "") -> MemoryNote:
        """Read this session's scope memory, ``replace`` it (``text`` + ``expect_hash``),
        ``edit`` it (``edits``: (old, new) anchors), or ``settle`` a pending ``eviction`` as
        distilled into ``node`` (a node this session can see); the note as it then stands."""
        from osk.provenance.scope_memory import CAP, Author, Edit, ScopeMemory

        memory = ScopeMemory(self.vault, self.scope)
        author = Author(AGENT, self.session.key.key, drafter, host)
        written = None
        if action == "replace":
            written = memory.write(text=text, expect_hash=expect_hash, author=author)
        elif action == "edit":
            written = memory.write(edits=[Edit(old, new) for old, new in edits],
                                   expect_hash=expect_hash, author=author)
        elif action == "settle":
            if eviction is None or node is None:
                raise OskError("settle names the pending eviction and the node its lines "
                               "went into")
            memory.settle(eviction, "distilled", node=self.visible_node(node).title,
                          actor=AGENT)
        current, digest = memory.read()
        return MemoryNote(current, digest, CAP, written, tuple(memory.pending_evictions()))

    def log_use(self, tool: str, *, node: str, cites: Sequence[str] = ()) -> None:
        """Note one tool call that read or wrote ``node`` (and what it cites) in the call log
        ``osk stats`` joins with the receipts (``osk.hooks.receipts``)."""
        from osk.hooks import receipts

        receipts.log_call(self.vault, tool, self.scope, node=node, cites=cites)

    # -- rechecks and overview ---------------------------------------------------------------
    def recheck(self) -> RecheckReport:
        """Recheck candidates whose citing node this session can see."""
        from osk.reads.overview import visible_candidates

        self.refresh()
        return RecheckReport(self.scope, tuple(visible_candidates(self._ctx)))

    def overview(self) -> Overview:
        """What this session may see of the vault and its health (``osk.reads.overview``)."""
        from osk.reads.overview import overview

        self.refresh()
        return overview(self._ctx)


def search_once(vault: Vault | str | None, query: str, *, cwd: Path, scope: str | None,
                as_of: str | None, kind: str, k: int | None) -> SearchResult:
    """One search by a process that exits after it (`osk search`; ``k`` None: the engine's
    default). It makes no garbage cycles worth collecting, and the collector's passes over
    50,000 nodes' objects cost about 0.7 s: the collector waits meanwhile."""
    with collector_paused():
        engine = Engine.open(vault, cwd=cwd, scope=scope, actor=USER)
        wanted = {} if k is None else {"k": k}  # the engine owns default and cap
        return engine.search(query, as_of=as_of, kind=kind, **wanted)


def semantic_status() -> semantic.Status:
    """Whether the semantic channel is on here, and if not, how to turn it on."""
    from osk.search import semantic

    return semantic.status()


_STEERS: dict[tuple[str, str], bool] = {}  # (path, file hash) -> whether its text steers
STEERS_KEPT = 8192  # answers kept; all are forgotten when full (a search asks about ten)


def _steers(node: Node) -> bool:
    """Its text carries steering (``osk.capture.steering``): marked wherever it is listed; the
    hooks inject it only once a person confirmed it. Kept by path and file hash (the title
    is the file's name, the rest its bytes): a search marks each hit, and the patterns cost
    more than the rest of a hit's markers together."""
    from osk.capture.steering import node_steering

    try:
        key = (node.path, node.file_hash)
        found = _STEERS.get(key)
        if found is None:
            if len(_STEERS) >= STEERS_KEPT:
                _STEERS.clear()
            found = _STEERS[key] = bool(node_steering(node.title, node.meta.summary, node.body))
        return found
    except (OskError, OSError, UnicodeDecodeError):
        return False  # unreadable now: the validators and read_node say so


def _listed(node: Node) -> Listed:
    """What the markers rule reads of a catalog node (its hash only when its scope is held)."""
    return Listed(node.id, node.path, node.space, node.trust_state,
                  lambda: node_content_hash(node), lambda: _steers(node))


def _node_or_none(catalog: Catalog, node_id: str) -> Node | None:
    try:
        return catalog.get(node_id)
    except OskError:
        return None


__all__ = [
    "Engine",
]
