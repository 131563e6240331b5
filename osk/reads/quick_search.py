"""A fresh process's search answered from the persisted index, without opening the engine.

``osk search`` runs in a new process each time. Opening the engine costs that process its
heaviest imports (pydantic, YAML), the catalog restored from its snapshot and a stat of every
node file, and the index decoded whole: 8-10x a SQLite FTS5 query over the same text
(docs/performance.md, the scale table). The recall file (``osk.search.recallfile``) already
holds the index's documents, postings and statistics in a form a query reads only the part it
needs of, and ``Ranking`` ranks over it exactly as over the index in memory. What a fresh
process lacks is the engine's freshness; this module checks instead what the last engine's
look recorded with the index (``Freshness.look``, handed over by ``SearchIndex.note_look``):

- every folder it listed has the stat it had, and each absent Space folder is still absent:
  no node file was created, removed or renamed there since (every osk write and most
  editors' saves are one of those); a folder whose stat moved (another osk process wrote
  there: a server's write, a command's) or that the look could not vouch for (listed too
  soon after a change) is listed here: a node file the index on disk holds there at the
  stat it recorded is vouched for as below (an osk writer's files reach that index with its
  write, so its write needs nothing more here), and a file made, removed, renamed or
  changed by hand is *stale*;
- up to ``SWEEP_FILES`` node files (``osk.store.freshness``, recorded with the look), each
  one the index holds (and each invalid one it skipped) has its stat and changed at least
  the race window before that look (in a larger vault only the hits' files are checked: the
  bound the engine's own sweep keeps there, docs/search.md); an indexed file changed later
  than that, but before the last osk writer's announcement (the generation's move), is read
  and must be the text indexed, as the engine re-reads a file its stat cannot vouch for;
  any other is stale;
- the approvals (what protected regions serve) are the ones the index read under: the
  approvals ledger's generation now is the one recorded with the index.

Up to ``EDITS`` stale node files (an editor's saves since the last engine) are read here and
indexed for this query as the engine indexes a file (``versions.document`` of the version
protection serves), over the index on disk (``RecallCorpus.amend``): the query's terms'
postings, N and the total length are integers, so the scores are the engine's exactly; a
query word in over half the documents has rank-bm25's floor, a share of the mean idf over
every term, summed again from the counts of document frequencies the index on disk keeps,
moved for each word the files gained or lost (``RecallCorpus._counts``; the sum is exactly
rounded, so the bits are the engine's). What cannot be had so goes to the engine: a file
that is not a valid node, a changed id another node holds, a hit waiting for the person's
review, a floored word when the index on disk holds no counts of its documents as they are
(a writer another process wrote past writes its own, unstamped: ``recallfile.COUNTED``), the
semantic channel, more stale files than ``EDITS``. Nothing is written: every fresh search
reads them again until an engine (the next command that opens one, a server's look) takes
them into the index on disk.

The semantic channel is fused as ``SearchIndex.channels`` fuses it, from the same vectors,
once every node has its vector. The hits' markers follow the engine's rule
(``osk.provenance.markers``); a hit's ``recheck`` marker, and the rounds its node cites
(which the merge with round hits orders by), come from the rechecks table kept on disk
(``osk.provenance.recheck_store``): the hits' rows only, each hit and each node it cites read
from its file, so it costs what the hits cite, not the vault. When any check fails, or the
query asks what this path does not answer (a past date, a node still without its vector, a
rechecks table on disk that cannot vouch for the ledger as it is), ``search`` returns None
and the caller opens the engine, which looks, mends the index (and that table) and records a
new look. So every answer given here is one the engine would have given.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osk.store.fsutil import RACE_WINDOW_NS, collector_paused, folder_stat, node_listing

if TYPE_CHECKING:
    from collections.abc import Callable

    from osk.provenance.markers import Listed
    from osk.search.ranking import Ranking, SearchResult
    from osk.store.vault import Vault

LINKS = "derived-from"  # the front matter key of a node's citations (osk.store.contract)
RECHECKS_LEDGER = "rechecks"  # osk.provenance.recheck_table.LEDGER: looked at before importing it
# Node files a fresh search reads and indexes itself when the index on disk does not hold
# them as they are (a hand edit, a file made or removed by hand): each costs a read, a parse
# and a tokenization (about a millisecond), so a handful of an editor's saves is answered here
# and a checkout of many goes to the engine, which mends the index for the next process.
EDITS = 64
WORDS_ALONE = ("(ranked by words alone: no running `osk mcp` for this vault answered; "
               "--semantic ranks by meaning here, loading the model: seconds)")


def served(vault_arg: str | Path | None, cwd: Path, scope: str | None, query: str,
           k: int | None, kind: str = "all", as_of: str | None = None) -> SearchResult | None:
    """The search tool's answer from a running ``osk mcp`` serving this vault, asked over its
    recall socket (``osk.hooks.recall.channel.ask_search``): words fused with meaning by the
    model that server holds, for the session this process would have (``cwd``, ``scope``).
    None when the semantic channel is off here (``OSK_SEMANTIC=0``: words were asked for) or
    no server of this vault answers in time. Loads neither NumPy nor the model."""
    from osk.search import semantic_enabled

    if not semantic_enabled():
        return None
    from osk.hooks.recall.channel import ask_search
    from osk.search.recall_wire import SearchAsk
    from osk.store.vault import locate

    vault = locate(vault_arg, cwd)
    return ask_search(vault, SearchAsk(str(vault.root), str(cwd), scope, query, k, kind, as_of))


def words_alone(vault_arg: str | Path | None, cwd: Path) -> str | None:
    """Rank by words alone in this process from now on (no NumPy, no model: a fresh
    ``osk search`` that no server answered, docs/search.md), as ``OSK_SEMANTIC=0`` does; the
    line that tells the person so, or None when meaning was not to be had here anyway (the
    channel switched off, or no node of the vault has a vector on this device: finding the
    model to ask would import more than the search itself costs)."""
    from osk.search import SEMANTIC_SWITCH, VECTORS_FOLDER, semantic_enabled
    from osk.store.vault import locate

    if not semantic_enabled():
        return None
    os.environ[SEMANTIC_SWITCH] = "0"  # the one switch every part of the channel reads
    embedded = locate(vault_arg, cwd).state("index", VECTORS_FOLDER).is_dir()
    return WORDS_ALONE if embedded else None


def search(vault_arg: str | Path | None, cwd: Path, scope: str | None, query: str,
           k: int | None, kind: str = "all") -> SearchResult | None:
    """The engine's answer to ``query`` for a session in ``cwd``, or None: open the engine.
    ``kind`` as ``Engine.search``'s: raw rounds come from their own index
    (``osk.search.rounds``), merged as the engine merges them (a node before the rounds it
    cites, from the rechecks table on disk).

    Without the cycle collector (its modules imported here, not at the top, to be inside):
    its passes over what the imports make, all of it kept for the life of the process, were
    5-10 % of a fresh search, and what the search itself makes is freed by reference counts."""
    with collector_paused():
        return _search(vault_arg, cwd, scope, query, k, kind)


def _search(vault_arg: str | Path | None, cwd: Path, scope: str | None, query: str,
            k: int | None, kind: str) -> SearchResult | None:
    from osk.authority import mutation
    from osk.errors import OskError
    from osk.provenance.sessions import open_session
    from osk.search.ranking import SearchResult
    from osk.search.versions import DEFAULT_K, checked
    from osk.store.vault import locate

    try:
        text, wanted = checked(query, DEFAULT_K if k is None else k)
    except OskError:
        return None  # the engine refuses it, in its own words
    vault = locate(vault_arg, cwd)
    mutation.finish_killed_writes(vault)  # what opening the engine does first
    session = open_session(vault, cwd, scope)
    if kind == "rounds":
        rounds = _rounds(vault, session, text, wanted)
        return SearchResult(session.scope, query, tuple(rounds)) if rounds is not None else None
    result = _ranked(vault, session, query, text, wanted)
    if result is None or kind == "nodes":
        return result
    from osk.search.rounds import merged

    rounds = _rounds(vault, session, text, wanted)
    cites = _cited_rounds(vault, result.hits) if rounds else {}
    if rounds is None or cites is None:
        return None
    return SearchResult(result.scope, query, tuple(merged(result.hits, rounds, cites, wanted)))


def _rounds(vault: Vault, session: Any, text: str, k: int) -> list[Any] | None:
    """The rounds' hits as ``Engine.search`` ranks them; None when their semantic channel
    fails (the engine logs why and ranks them by words)."""
    from osk.provenance.sessions import Routing
    from osk.search import semantic_enabled
    from osk.search.rounds import RoundIndex, round_hits

    routing = Routing(vault)
    meaning = None
    if semantic_enabled():  # else the channel's modules stay unread
        from osk.search.round_vectors import RoundVectors

        meaning = RoundVectors.for_vault(vault)
    try:
        return round_hits(RoundIndex(vault), text, k,
                          lambda key: routing.key_visible(session, key), routing.scope_for,
                          meaning)
    except Exception:
        if meaning is None:
            raise
        return None


def _ranked(vault: Vault, session: Any, query: str, text: str,
            k: int) -> SearchResult | None:
    from osk.search import recallfile
    from osk.search.expand import query_terms
    from osk.search.ranking import Ranking, SearchResult
    from osk.search.versions import moment

    try:
        db = recallfile.open_reader(vault.state("index"))
    except recallfile.Unusable:
        return None
    try:
        # One read transaction: every row below is of one snapshot, so the documents a folder
        # is compared with (``_as_listed``) are those the postings and statistics count.
        db.execute("BEGIN")
        look = recallfile.read_look(vault.state("index"))  # read before the file's rows
        if look is None:  # no engine has recorded a look with this file: it looks first
            return None
        corpus = recallfile.RecallCorpus(db, query_terms(text))
        corpus.meta["look"] = look
        # The generation read once, before any check: a write announced later is not vouched for.
        bounds = look_bounds(vault, look)
        stale = stale_since_look(vault, db, corpus.meta, bounds)
        if stale is None or (stale and not _amend(vault, db, corpus, stale)):
            return None
        swept = int(corpus.meta.get("n", 0)) <= int(look["sweep"])
        while True:  # in a larger vault, until every hit's file is vouched for or read
            ranking = Ranking(corpus, scope=session.scope,  # type: ignore[arg-type]
                              visible=lambda doc: session.can_see_scope(doc.scope),
                              moment=moment(None), explicit_time=False)
            order = _order(vault, db, corpus, ranking, text, k, bool(stale))
            if order is None:
                return None
            docs = [corpus.docs[slot] for slot, *_ in order]
            unsure = {} if swept else hits_unsure(vault, docs, stale, bounds)
            if not unsure:
                break
            # a hit's file changed in place (its folder's stat kept): read, and ranked again
            if len(stale) + len(unsure) > EDITS or not _amend(vault, db, corpus, unsure):
                return None
            stale.update(unsure)
        hits = ranking.hits(order, lambda ids: hit_markers(vault, db, docs, look,
                                                           corpus.amended))
    except (recallfile.Unusable, recallfile.Error, EngineNeeded, KeyError, TypeError,
            ValueError):
        return None  # damaged, swapped as we read, or another shape: the engine mends it
    finally:
        db.close()
    return SearchResult(session.scope, query, tuple(hits))


def hits_unsure(vault: Vault, docs: list[Any], stale: Stale, bounds: tuple[int, int]
                 ) -> Stale:
    """The hits' files not read here already whose stat cannot vouch for the text indexed
    (``as_indexed``), with their stats now (None: gone)."""
    root = str(vault.root)
    unsure: Stale = {}
    for doc in docs:
        if doc.path not in stale:
            now = stat_now(root, doc.path)
            if not as_indexed(vault, doc.path, doc.stat, doc.file_hash, bounds, now):
                unsure[doc.path] = now
    return unsure


def _order(vault: Vault, db: Any, corpus: Any, ranking: Ranking, text: str,
           k: int, amended: bool) -> list[Any] | None:
    """What ``SearchIndex.channels`` orders by: the lexical order, fused with the semantic
    one when the channel is on and reads the query. None when a node still lacks its vector
    (the engine embeds what is missing first), a node file changed since the index on disk
    took it (``amended``: its vector may be missing, and the vectors are keyed by the rows
    on disk) or the model fails (the engine says why)."""
    from osk.search.ranking import FUSION_DEPTH, fuse

    vectors = meaning_reads(vault, text)
    if vectors is None:
        return ranking.rank(text, k)
    from osk.search.semantic import NEAREST

    if amended:
        return None
    keys = [key for (key,) in db.execute("SELECT content_hash FROM docs")]
    lexical = ranking.rank(text, max(k, FUSION_DEPTH))
    words = [slot for slot, *_ in lexical[:FUSION_DEPTH]]
    try:
        if vectors.count_missing(keys):
            return None
        near = vectors.nearest(text, NEAREST, [corpus.docs[slot].content_hash for slot in words])
    except Exception:  # a damaged model: the engine logs it and answers lexically
        return None
    rows = {key: row for row, key in db.execute(
        f"SELECT row, content_hash FROM docs WHERE content_hash IN "  # noqa: S608 - placeholders
        f"({','.join('?' * len(near))})", [key for key, _ in near])} if near else {}
    semantic = ranking.semantic_order({rows[key]: value for key, value in near if key in rows},
                                      words)
    coverage = ranking.coverage(text, lexical[0][0] if lexical else None)
    return fuse(lexical, semantic, k, lambda slot: corpus.docs[slot].path, coverage)


def meaning_reads(vault: Vault, text: str) -> Any | None:
    """The vault's vectors (``semantic.Vectors``) where the engine's channels would rank
    ``text`` by meaning too: the channel on, its model found, and reading the text; None where
    words alone rank it (the channel's modules left unread while it is off)."""
    from osk.search import semantic_enabled

    if not semantic_enabled():
        return None
    from osk.search.semantic import Vectors

    vectors = Vectors.for_index(vault.state("index"))
    return vectors if vectors is not None and vectors.model.reads(text) else None


Stale = dict[str, "tuple[int, int, int] | None"]  # node file -> its stat now (None: gone)


def stale_since_look(vault: Vault, db: Any, meta: dict[str, Any], bounds: tuple[int, int]
                     ) -> Stale | None:
    """The node files the index on disk may not hold as they are, or None when its checks
    cannot tell (the engine looks). Every folder the look listed has the stat it had, or is
    listed now (``_as_listed``: an osk process wrote there since the look, and its write
    reached the index as every engine's does; a file changed, made or removed by hand is
    found there); up to ``SWEEP_FILES`` node files, each file as indexed too
    (``as_indexed``); each file the index skipped (invalid) as the look saw it."""
    from osk.search.regions import Regions
    from osk.search.versions import PARAMS

    look = meta["look"]  # a look ``recallfile.read_look`` found whole
    if meta.get("params") != PARAMS:  # postings of another tokenizer or BM25: the engine rebuilds
        return None
    if meta.get("approvals") != Regions(vault).approvals_now():
        return None
    root = str(vault.root)
    stale: Stale = {}
    moved = [rel for rel, stat in look["folders"].items() if _folder_now(root, rel) != stat]
    if moved and not _as_listed(vault, db, look, moved, bounds, stale):
        return None
    for rel, recorded in look.get("others", {}).items():
        if rel not in stale and not _files_unchanged(vault, [(rel, recorded)], look):
            stale[rel] = stat_now(root, rel)
    if int(meta.get("n", 0)) <= int(look["sweep"]):
        for path, file_hash, size, mtime, ino in db.execute(
                "SELECT path, file_hash, size, mtime_ns, ino FROM docs"):
            if path in stale:
                continue
            now = stat_now(root, path)
            if not as_indexed(vault, path, (size, mtime, ino), file_hash, bounds, now):
                stale[path] = now
                if len(stale) > EDITS:
                    return None
    return stale if len(stale) <= EDITS else None


def stat_now(root: str, rel: str) -> tuple[int, int, int] | None:
    """A node file's stat key now (None: gone)."""
    try:
        st = os.stat(os.path.join(root, rel), follow_symlinks=False)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns, st.st_ino


def _folder_now(root: str, rel: str) -> list[int] | None:
    """A folder's stat as a look records it (None: absent)."""
    now = folder_stat(os.path.join(root, rel), top="/" not in rel)
    return None if now is None else list(now)


def _as_listed(vault: Vault, db: Any, look: dict[str, Any], moved: list[str],
               bounds: tuple[int, int], stale: Stale) -> bool:
    """Whether each folder of ``moved`` (its stat is not the look's, or the look could not
    vouch for it) was listed here, and no sub-folder the index holds files in is gone: each
    node file in it that the index on disk holds at the stat it holds (changed since the
    look: found to be the text indexed), or that the look saw unindexed as it is, is
    vouched for; each other one, and each file held there but gone, goes to ``stale``;
    each sub-folder the look did not know likewise. Another osk process's write leaves
    nothing stale (its files, then the index on disk, in that order; a server's, a
    command's): the index already holds it, and the listing here is the look the engine
    would make of those folders. A file created, removed, renamed or changed by hand there
    is stale. Its rows are of the one snapshot ``_ranked`` reads the postings in."""
    root = str(vault.root)
    known = look["folders"]
    others = look.get("others", {})
    pending = list(moved)
    while pending:
        rel = pending.pop()
        listed = node_listing(os.path.join(root, rel)) \
            if _folder_now(root, rel) is not None else None
        folders, files = listed if listed is not None else (set(), {})
        prefix = f"{rel}/"
        held, below = _held_in(db, prefix)
        unindexed = {path[len(prefix):]: stat for path, stat in others.items()
                     if path.startswith(prefix) and "/" not in path[len(prefix):]}
        if not below <= folders:
            return False  # a folder of held files gone by hand: the engine drops them
        for name in (held.keys() | unindexed.keys()) - files.keys():
            stale[prefix + name] = None
        for name, stat in files.items():
            if name in held:
                vouched = as_indexed(vault, prefix + name, held[name][1], held[name][0],
                                     bounds, stat)
            else:  # the look saw it unindexed (invalid), settled, as it is; or it is new
                vouched = name in unindexed and list(stat) == unindexed[name] and \
                    stat[1] < bounds[0]
            if not vouched:
                stale[prefix + name] = stat
        if len(stale) > EDITS:
            return False
        # a sub-folder the look knew is checked by its own stat (``moved``), a new one here
        pending.extend(f"{prefix}{name}" for name in folders if f"{prefix}{name}" not in known)
    return True


def _held_in(db: Any, prefix: str) -> tuple[dict[str, tuple[str, tuple[int, int, int]]],
                                            set[str]]:
    """What the index on disk holds in the folder ``prefix``: each node file directly in it
    (name -> its hash and stat) and the names of the sub-folders it holds files in (counted
    in SQLite over the path index: a Space folder holds most of the vault)."""
    start, stop = len(prefix) + 1, prefix[:-1] + chr(ord("/") + 1)
    held = {path[len(prefix):]: (file_hash, (size, mtime, ino))
            for path, file_hash, size, mtime, ino in db.execute(
                "SELECT path, file_hash, size, mtime_ns, ino FROM docs WHERE path >= ? "
                "AND path < ? AND instr(substr(path, ?), '/') = 0", (prefix, stop, start))}
    below = {name for (name,) in db.execute(
        "SELECT DISTINCT substr(path, ?, instr(substr(path, ?), '/') - 1) FROM docs "
        "WHERE path >= ? AND path < ? AND instr(substr(path, ?), '/') > 0",
        (start, start, prefix, stop, start))}
    return held, below


def look_bounds(vault: Vault, look: dict[str, Any]) -> tuple[int, int]:
    """(settled before, announced by): a file changed before the first was settled when the
    look began (the look vouches for its stat); one changed no later than the second, the
    generation's last move, was changed before an osk writer's announcement (every writer
    moves it after its files are on disk, ``osk.store.generation``)."""
    from osk.store import generation

    return int(look["seen_ns"]) - RACE_WINDOW_NS, generation.current(vault)[2]


def as_indexed(vault: Vault, rel: str, recorded: Any, file_hash: str,
               bounds: tuple[int, int], stat: tuple[int, int, int] | None) -> bool:
    """Whether a node file is the one the index on disk holds: the stat it recorded
    (``stat``: the file's now, ``stat_now``; None: gone), and changed long enough before
    the look that a later change would show in it (``RACE_WINDOW_NS``, ``look_bounds``). A file
    changed since, or just before, is read and its text compared with the text indexed (as
    the engine re-reads a file its stat cannot vouch for) when an osk writer announced that
    change (a server's or a command's write: the index took it with the write); a change
    after the last announcement (a hand edit within the race window) is stale."""
    if stat is None or stat != tuple(recorded):
        return False
    settled_before, announced = bounds
    return stat[1] < settled_before or (stat[1] <= announced and holds(vault, rel, file_hash))


def _amend(vault: Vault, db: Any, corpus: Any, stale: Stale) -> bool:
    """Index the stale node files in ``corpus`` for this query, as the engine would index
    them (``versions.document`` of the version served, ``RecallCorpus.amend``); False when
    one needs the engine: not a valid node, held back by protection, an id another node
    holds (the catalog judges duplicates). A file with the text the index holds changed only
    its stat, which ranking never reads. The callers keep ``stale`` within ``EDITS``."""
    from osk.search.recallfile import documents
    from osk.search.regions import Regions
    from osk.search.versions import document, parse_node
    from osk.store.fsutil import sha256_text
    from osk.store.node import read_text

    regions = Regions(vault)
    taken: list[str] = []  # ids a changed file holds that its indexed version did not
    released: set[str] = set()  # paths whose indexed id is gone from them
    for rel, stat in sorted(stale.items()):
        old = next(documents(db, "path = ?", (rel,)), None)
        if stat is None:
            corpus.amend(rel, None, {})
            released.add(rel)
            continue
        read_ns = time.time_ns()  # before the read, as the engine takes it
        try:
            text = read_text(vault.abs(rel))
        except (OSError, UnicodeDecodeError):
            return False
        file_hash = sha256_text(text)
        if old is not None and old.file_hash == file_hash:
            continue
        node = parse_node(rel, text)
        served = None if node is None else regions.served(rel, node)
        if served is None:
            return False
        doc, frequencies = document(rel, served, stat, file_hash, read_ns)
        if old is None or old.id != doc.id:
            taken.append(doc.id)
            released.add(rel)
        corpus.amend(rel, doc, frequencies)
    return _ids_free(db, taken, released)


def _ids_free(db: Any, taken: list[str], released: set[str]) -> bool:
    """Whether each id in ``taken`` is held by one changed file alone: no document the index
    on disk holds under another path still has it."""
    if len(set(taken)) != len(taken):
        return False
    holders = {path for (path,) in db.execute(
        f"SELECT path FROM docs WHERE id IN ({','.join('?' * len(taken))})",  # noqa: S608
        taken)} if taken else set()
    return holders <= released


def holds(vault: Vault, rel: str, file_hash: str) -> bool:
    """Whether the node file's text now is the one hashed ``file_hash``."""
    from osk.store.fsutil import sha256_text
    from osk.store.node import read_text

    try:
        return sha256_text(read_text(vault.abs(rel))) == file_hash
    except (OSError, UnicodeDecodeError):
        return False


def _files_unchanged(vault: Vault, files: list[tuple[str, Any]], look: dict[str, Any]) -> bool:
    """Each file has the stat recorded and was settled before the look began."""
    root = str(vault.root)
    settled_before = int(look["seen_ns"]) - RACE_WINDOW_NS
    for rel, recorded in files:
        now = stat_now(root, rel)
        if now is None or now != tuple(recorded) or now[1] >= settled_before:
            return False
    return True


class EngineNeeded(Exception):
    """A hit's markers need what only the engine holds: its answer, not this one."""


def hit_markers(vault: Vault, db: Any, docs: list[Any], look: dict[str, Any],
                amended: dict[str, Any]) -> dict[str, list[str]]:
    """recheck / conflict / pending / inferred / pending-review / steering, by the engine's
    rule (``osk.provenance.markers``). A hit waiting for the person's approval of a protected
    change goes to the engine (``EngineNeeded``): what it serves and what is on disk differ,
    and the engine judges the rest from the disk."""
    from osk.provenance.markers import OpenItems

    items = OpenItems(vault)
    if any(items.pending(doc.path) for doc in docs):
        raise EngineNeeded
    stale = _rechecks(vault, db, docs, look, amended)
    found: dict[str, list[str]] = {}
    for doc in docs:
        labels = items.of(doc.id, _listed(vault, doc), recheck=doc.id in stale)
        if labels:
            found[doc.id] = labels
    return found


def _recorded(vault: Vault, ids: list[str]) -> dict[str, Any] | None:
    """The recorded citations of ``ids`` that cite anything (``Citations``), as the engine's
    rechecks table holds them; None when the table on disk cannot vouch for the ledger."""
    ledger = rechecks_ledger(vault)
    if ledger is None:
        return {}
    from osk.provenance.recheck_store import citations_of

    return citations_of(vault, ledger, ids)


def rechecks_ledger(vault: Vault) -> Any | None:
    """The rechecks ledger (a ``Ledger``, not read yet), or None while no node has ever cited
    anything (the file absent or empty): what a fresh process reads recorded citations from."""
    path = vault.ledger_path(RECHECKS_LEDGER)
    if not (path.exists() and path.stat().st_size):
        return None
    from osk.store.ledger import Ledger

    return Ledger(vault, RECHECKS_LEDGER)


def _cited_rounds(vault: Vault, hits: tuple[Any, ...]) -> dict[str, set[str]] | None:
    """What ``Engine._cited_rounds`` gives for these node hits, or None: open the engine."""
    ids = [hit.id for hit in hits]
    table = _recorded(vault, ids)
    if not table:
        return None if table is None else {}
    from osk.provenance.pairs import cited_rounds

    return cited_rounds(table, ids)


def _rechecks(vault: Vault, db: Any, docs: list[Any], look: dict[str, Any],
              amended: dict[str, Any]) -> set[str]:
    """The ids of the hits with a recheck candidate, by the engine's rule
    (``osk.provenance.pairs.stale_pairs``) over what the engine would hold: the hits' recorded
    citations from the rechecks table on disk (``osk.provenance.recheck_store``), each citing
    hit as its file holds it now, each node it cites by its body hash (``_cited_bodies``),
    each raw round and project file it cites read now. Costs what the hits cite, not the
    vault; ``EngineNeeded`` when the table on disk cannot vouch for the ledger, or a cited
    node is not one the recall file holds as its file is now."""
    table = _recorded(vault, [doc.id for doc in docs])
    if table is None:
        raise EngineNeeded
    if not table:
        return set()
    from osk.provenance.pairs import TargetHasher, stale_pairs

    hasher = TargetHasher(vault)
    bodies = _cited_bodies(vault, db, look, amended, [
        pair.target.key[len("node:"):] for doc in docs if doc.id in table
        for pair in table[doc.id].pairs.values() if pair.target.kind == "node"])

    def current(target: Any) -> str | None:
        if target.kind != "node":
            return hasher.source_hash(target)
        return bodies(target.key[len("node:"):])

    stale = set()
    for doc in docs:
        citations = table.get(doc.id)
        if citations is None:
            continue
        live, body = _as_on_disk(vault, doc.path, doc.file_hash)
        if next(stale_pairs(vault, citations, live, body, current, why=False), None) is not None:
            stale.add(doc.id)
    return stale


def _cited_bodies(vault: Vault, db: Any, look: dict[str, Any], amended: dict[str, Any],
                  ids: list[str]) -> Callable[[str], str]:
    """Each cited node's body hash now, as the engine's catalog has it: the recall file's
    document of that id (exactly one, else ``EngineNeeded``), its file unchanged since it
    was indexed (the stat recorded, settled before the look) and its body hash kept with the
    rechecks table by its file hash; a file that changed, or whose body the table does not
    know, is read (and must be the text indexed). So the first process after an import reads
    no file it does not show. A file this search read itself (``amended``: path -> its
    document now, None when gone) counts as it is now, not as the recall file holds it."""
    from osk.provenance.recheck_store import bodies_of

    wanted = list(dict.fromkeys(ids))
    rows = db.execute(
        f"SELECT id, path, file_hash, size, mtime_ns, ino FROM docs WHERE id IN "  # noqa: S608
        f"({','.join('?' * len(wanted))})", wanted).fetchall() if wanted else []
    found: dict[str, list[tuple[str, str, tuple[int, int, int]]]] = {}
    for node_id, path, file_hash, *stat in rows:
        if path not in amended:
            found.setdefault(node_id, []).append((path, file_hash, (stat[0], stat[1], stat[2])))
    for path, doc in amended.items():
        if doc is not None and doc.id in wanted:
            found.setdefault(doc.id, []).append((path, doc.file_hash, tuple(doc.stat)))
    settled = [docs[0] for docs in found.values() if len(docs) == 1 and _files_unchanged(
        vault, [(docs[0][0], docs[0][2])], look)]
    known = bodies_of(vault, [file_hash for _, file_hash, _ in settled])

    def body(node_id: str) -> str:
        docs = found.get(node_id, [])
        if len(docs) != 1:  # gone, or an id two files claim: the engine's catalog says how
            raise EngineNeeded
        path, file_hash, _ = docs[0]
        value = known.get(file_hash) if docs[0] in settled else None
        return value if value is not None else _as_on_disk(vault, path, file_hash)[1]

    return body


def _as_on_disk(vault: Vault, path: str, file_hash: str) -> tuple[list[str], str]:
    """A node's ``derived-from`` links and body hash, read from its file, which must hold
    the text the recall file indexed (else ``EngineNeeded``): what the engine's catalog
    holds of it."""
    from osk.errors import OskError
    from osk.store.fsutil import sha256_text
    from osk.store.node import body_hash, read_text, split_frontmatter

    try:
        text = read_text(vault.abs(path))
        if sha256_text(text) != file_hash:
            raise EngineNeeded
        front, body = split_frontmatter(path, text, (LINKS,))
    except (OSError, OskError, UnicodeDecodeError):
        raise EngineNeeded from None
    links = front.get(LINKS) or []
    if not isinstance(links, list):
        raise EngineNeeded
    return [str(link) for link in links], body_hash(body)


def _listed(vault: Vault, doc: Any) -> Listed:
    """What the markers rule reads of a recall-file document."""
    from osk.provenance.markers import Listed

    return Listed(doc.id, doc.path, doc.space, doc.trust, lambda: doc.content_hash,
                  lambda: _steers(vault, doc))


def _steers(vault: Vault, doc: Any) -> bool:
    """Whether the hit's text carries steering, judged on the text the engine judges (its
    title, summary and body; the file was checked unchanged since it was indexed)."""
    from osk.capture.steering import node_steering
    from osk.errors import OskError
    from osk.store.node import body_of

    try:
        body = body_of(doc.path, vault.abs(doc.path).read_text(encoding="utf-8"))
    except (OSError, OskError, UnicodeDecodeError):
        raise EngineNeeded from None
    return bool(node_steering(doc.title, doc.summary, body))
