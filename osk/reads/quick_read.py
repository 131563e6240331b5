"""A fresh ``osk read`` answered from the persisted index and the node's own file, without
opening the engine.

Opening the engine restores the catalog of every node and stats every node file, and the
related nodes of a read load the whole index (and, with the semantic channel on, the model):
at 100,000 nodes a read cost 6.5 s and 540 MB (docs/performance.md). A read needs one node.
The recall file (``osk.search.recallfile``) holds every node the index took, by id and by
title, and the last engine's look says which of them it holds as they are; this module finds
the node there by the catalog's rule and vouches for it by the checks a fresh search makes
(``osk.reads.quick_search``), then reads its file:

- the last engine's look still holds, by ``quick_search``'s checks (every folder it listed
  unmoved or listed again; up to ``SWEEP_FILES`` files stat by stat; each file the index
  skipped as the look saw it), but for at most ``quick_search.EDITS`` node files changed,
  made or removed by hand since: each of those is read here, and none may be the node's own
  file or claim its id or title;
- ``ref`` names exactly one node, as ``Catalog.get`` resolves it: an id one document holds,
  else a title one document holds and no skipped (invalid) file claims, whose id no other
  document holds;
- that node's file has the stat the index recorded, settled before the look (or read and
  found to hold the text indexed), and its text now hashes to the file hash indexed;
- the session may see its scope, and, in a vault with protected regions, no change in them
  waits for the person's approval (``_none_waiting``): each file there is the version
  approved, so what a reader is served is the file, as elsewhere (while one waits, what a
  protected node serves is the engine's to judge).

Its markers follow the engine's rule from the rechecks table on disk, as a search hit's do.
Its front matter is read as ``parse_validated`` reads a text the index took from a valid node:
in osk's own form, without the contract's model. The page is cut by the engine's own
``node_page``, and the hash that authorises a full replacement comes with a read of the whole
body, as a session's first read earns it.

A first page read with its related nodes (``osk read --json``) lists them by the engine's rule
(``osk.calls.related``) from the same stores: the nodes it cites and its citers found by the
catalog's rule in the recall file, its citers from the rechecks table on disk
(``recheck_store.citers_of``), the similar ones by the same bounded ranking over the recall
file (by words where meaning cannot change them, ``_words_order``; else the engine answers).
That takes every node file the look cannot vouch for to be one the recall file holds as its
text is now (``_as_held``: none made, removed or changed by hand since), and each node looked
at vouched for as the node itself is.

A reference no node claims, in an index the look vouches for and with no file changed by hand
since claiming it, is refused here as the engine refuses it (``NodeNotFound``), as is a node of
a scope the session cannot see. Anything else (a past version, a name claimed twice, a stale
index, a change waiting for approval, a marker only the engine can judge) returns None, and
the caller opens the engine, whose answer and error messages are the reference. So every read
answered here is one the engine gives.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from osk.store.fsutil import collector_paused

if TYPE_CHECKING:
    from osk.calls.results import NodeRead, Related
    from osk.reads.quick_search import Stale
    from osk.store.vault import Vault


def read(vault_arg: str | Path | None, cwd: Path, scope: str | None, ref: str, *,
         section: str | None = None, start: int | None = None,
         length: int | None = None, related: bool = False) -> NodeRead | None:
    """``Engine.read_node(ref, ..., related=related)`` for a session in ``cwd``, or None: open
    the engine. Raises ``NodeNotFound`` where the engine would (the module's rule). Without
    the cycle collector, as a fresh search runs."""
    with collector_paused():
        found = _read(vault_arg, cwd, scope, ref, section, start, length, related)
    if isinstance(found, NotFound):
        from osk.errors import NodeNotFound

        raise NodeNotFound.named(ref)
    return found


class NotFound:
    """What the store answers for a reference it vouches no visible node claims."""


def _read(vault_arg: str | Path | None, cwd: Path, scope: str | None, ref: str,
          section: str | None, start: int | None, length: int | None,
          related: bool) -> NodeRead | NotFound | None:
    from osk.authority import mutation
    from osk.calls.pages import node_page
    from osk.errors import OskError
    from osk.provenance.sessions import open_session
    from osk.reads.quick_search import EngineNeeded, hit_markers
    from osk.search import recallfile
    from osk.store.ids import check_identifier
    from osk.store.vault import locate

    try:
        check_identifier("a node reference (title or id)", ref)
    except OskError:
        return None  # the engine refuses it, in its own words
    vault = locate(vault_arg, cwd)
    mutation.finish_killed_writes(vault)  # what opening the engine does first
    session = open_session(vault, cwd, scope)
    try:
        db = recallfile.open_reader(vault.state("index"))
    except recallfile.Unusable:
        return None
    try:
        db.execute("BEGIN")  # one snapshot: the rows below are those the look vouches for
        found = _vouched(vault, db, ref)
        if found is None or isinstance(found, NotFound):
            return found
        doc, node, look, bounds, stale = found
        if not session.can_see_scope(node.scope):
            return NotFound()  # as the engine says it, for a node it will not show here
        markers = hit_markers(vault, db, [doc], look, {}).get(doc.id, [])
        # a first read of this file version earns the hash when it shows the whole body
        # (``ReadLog.note`` on one page)
        page = node_page(session.scope, node, node, section, start, length,
                         markers=tuple(markers), whole_hash=node.file_hash)
        if not related or page.start != 0:
            return page
        if not _as_held(vault, db, stale):
            return None  # a file made or changed by hand may be near it, or claim a name
        near = _related(vault, db, session, node, look, bounds)
        return node_page(session.scope, node, node, section, start, length,
                         markers=tuple(markers), whole_hash=node.file_hash, related=near)
    except (recallfile.Unusable, recallfile.Error, EngineNeeded, OskError, OSError,
            UnicodeDecodeError, KeyError, TypeError, ValueError):
        return None  # damaged, swapped as we read, or another shape: the engine answers
    finally:
        db.close()


def _vouched(vault: Vault, db: Any, ref: str
             ) -> tuple[Any, Any, dict[str, Any], tuple[int, int], Stale] | NotFound | None:
    """The document ``ref`` names, its node as its file holds it now, the look that vouches
    for it, the generation bounds read and the node files changed by hand since the look;
    ``NotFound`` when no node claims ``ref``; None when the index on disk cannot say (the
    module's checks)."""
    from osk.reads.quick_search import as_indexed, look_bounds, stale_since_look, stat_now
    from osk.search import recallfile
    from osk.search.regions import Regions
    from osk.store.fsutil import sha256_text
    from osk.store.node import parse_validated, read_text
    from osk.store.titles import title_key

    look = recallfile.read_look(vault.state("index"))  # read before the file's rows
    if look is None:
        return None
    meta = recallfile.read_meta(db)
    meta["look"] = look
    bounds = look_bounds(vault, look)  # the generation read once, before any check
    stale = stale_since_look(vault, db, meta, bounds)
    if stale is None:
        return None  # what the checks cannot tell: the engine looks
    if Regions(vault).protected() and not _none_waiting(vault, db, look, stale):
        return None  # what protection serves, while a change waits, is the engine's to judge
    doc, refused = _named(db, look, ref)
    if doc is None:
        if refused or not _claim_none(vault, stale, title_key(ref), {ref}):
            return None  # the engine's words for what is wrong, or a file made since
        return NotFound()
    key = None if doc.id == ref else title_key(ref)  # named by its title
    if doc.path in stale or not _claim_none(vault, stale, key, {ref, doc.id}):
        return None
    if not as_indexed(vault, doc.path, doc.stat, doc.file_hash, bounds,
                      stat_now(str(vault.root), doc.path)):
        return None
    text = read_text(vault.abs(doc.path))
    if sha256_text(text) != doc.file_hash:
        return None  # changed since it was vouched for: the engine reads it again
    return doc, parse_validated(doc.path, text, doc.file_hash), look, bounds, stale


def _none_waiting(vault: Vault, db: Any, look: dict[str, Any], stale: Stale) -> bool:
    """In a vault with protected regions, whether no change in them waits for the person's
    approval, so every reader is served each file as it is, and the catalog and the index
    know the same nodes: none changed there since the look; each file the index left out
    there (the look's ``others``: a creation not approved yet is one) the version approved, so
    left out as the catalog leaves it, for not being a valid node (``protection.is_pending``);
    and each the index holds the version approved (its file hash, as indexed, the approved
    one)."""
    from osk.authority import protection

    current = protection.state(vault)
    if any(current.region_of(rel) is not None for rel in stale):
        return False
    for rel in look.get("others", {}):
        try:
            if current.region_of(rel) is not None and protection.is_pending(vault, rel, current):
                return False
        except (OSError, UnicodeDecodeError):
            return False
    for region in current.regions:
        inside = region.rstrip("/")
        for path, file_hash in db.execute(  # the region itself, and the paths below it
                "SELECT path, file_hash FROM docs WHERE path = ? OR (path > ? AND path < ?)",
                (inside, inside + "/", inside + "0")):  # "0" follows "/"
            if current.approved_sha(path) != file_hash:
                return False
    return True


def _as_held(vault: Vault, db: Any, stale: Stale) -> bool:
    """Whether each node file the look cannot vouch for (``stale``: written since, an osk
    writer's too while its stat is that recent) is a document of the recall file as its text
    is now: none was made, removed or changed by hand."""
    from osk.reads.quick_search import holds

    for rel, now in stale.items():
        found = db.execute("SELECT file_hash FROM docs WHERE path = ?", (rel,)).fetchone()
        if now is None or found is None or not holds(vault, rel, found[0]):
            return False
    return True


def _named(db: Any, look: dict[str, Any], ref: str) -> tuple[Any | None, bool]:
    """The recall file's document ``ref`` names by the catalog's rule (``Catalog.get``): an
    id documents hold, else a title (case-folded) files claim, the valid nodes the index took
    and the files it skipped as invalid (the look's ``others``); exactly one, a valid node
    whose id no other document holds. (document, False); (None, False) when nothing claims
    ``ref``; (None, True) when the catalog refuses it (claimed twice, or not a valid node)."""
    from osk.search import recallfile
    from osk.store.node import title_from_path
    from osk.store.titles import title_key

    docs = list(recallfile.documents(db, "id = ?", (ref,)))
    if not docs:
        key = title_key(ref)
        docs = list(recallfile.documents(db, "title_key = ?", (key,)))
        if any(title_key(title_from_path(rel)) == key for rel in look.get("others", {})):
            return None, True  # a file that is no valid node claims the title too
    if not docs:
        return None, False
    if len(docs) != 1 or db.execute("SELECT count(*) FROM docs WHERE id = ?",
                                    (docs[0].id,)).fetchone()[0] != 1:
        return None, True
    return docs[0], False


def _related(vault: Vault, db: Any, session: Any, node: Any, look: dict[str, Any],
             bounds: tuple[int, int]) -> tuple[Related, ...]:
    """``Engine.related(node)`` from the stores on disk (every node file held as it is now:
    ``_as_held``): each node the rule looks at found by ``_named``, the citers from the
    rechecks table on disk, the similar ones by the engine's bounded ranking over the recall
    file. ``EngineNeeded`` where they cannot say: the table cannot vouch for the ledger, the
    query would be embedded, or a node looked at is not vouched for as it is now."""
    from osk.calls import related
    from osk.errors import OskError
    from osk.reads.quick_search import EngineNeeded, hits_unsure, rechecks_ledger
    from osk.search import recallfile
    from osk.store.ids import check_identifier

    seen: list[Any] = []

    def named(ref: str) -> Any | None:
        try:
            check_identifier("a node reference (title or id)", ref)
        except OskError:
            return None  # the catalog refuses it: not listed
        doc = _named(db, look, ref)[0]
        if doc is not None:
            seen.append(doc)
        return doc

    def citing() -> set[str]:
        from osk.provenance.recheck_store import citers_of

        ledger = rechecks_ledger(vault)
        if ledger is None:
            return set()  # no node has ever cited anything
        found = citers_of(vault, ledger, node.id)
        if found is None:
            raise EngineNeeded
        return found

    def similar(query: str, k: int) -> list[Any]:
        from osk.search.expand import query_terms
        from osk.search.ranking import Ranking
        from osk.search.versions import checked, moment

        text, wanted = checked(query, k)
        bound = related.RELATED_POSTINGS
        corpus = recallfile.RecallCorpus(db, query_terms(text), bound=bound)
        ranking = Ranking(corpus, scope=session.scope,  # type: ignore[arg-type]
                          visible=lambda doc: session.can_see_scope(doc.scope),
                          moment=moment(None), explicit_time=False)
        order = _words_order(vault, corpus, ranking, text, wanted,
                             ranking.rank(text, wanted, bound))
        seen.extend(corpus.docs[slot] for slot, *_ in order)
        return ranking.hits(order, None)

    near = related.related_nodes(node, named=named, citing=citing, similar=similar,
                                 shown_title=lambda doc: doc.title,
                                 can_see=session.can_see_scope)
    swept = int(recallfile.read_meta(db).get("n", 0)) <= int(look["sweep"])
    if not swept and hits_unsure(vault, seen, {}, bounds):
        raise EngineNeeded  # a file changed in place since the look: the engine reads it
    return tuple(near)


def _words_order(vault: Vault, corpus: Any, ranking: Any, text: str, k: int,
                 lexical: list[Any]) -> list[Any]:
    """The order ``SearchIndex.channels`` gives a search that embeds the query only where
    meaning can count (``meaning_if_needed``), from the words' ``lexical`` order: that order
    when the semantic channel is off or does not read ``text``; its fusion with no meaning
    when the words decide whatever meaning says (``words_decide``); else ``EngineNeeded``
    (the query is to be embedded)."""
    from osk.reads.quick_search import EngineNeeded, meaning_reads

    if meaning_reads(vault, text) is None:
        return lexical
    from osk.search.ranking import fuse, words_decide

    coverage = ranking.coverage(text, lexical[0][0] if lexical else None)
    if not words_decide(coverage, (final for _, _, final, _ in lexical), k):
        raise EngineNeeded
    return fuse(lexical, [], k, lambda slot: corpus.docs[slot].path, coverage)


def _claim_none(vault: Vault, stale: dict[str, Any], key: str | None, ids: set[str]) -> bool:
    """Whether none of the node files changed by hand since the look (``stale``: at most
    ``quick_search.EDITS``, each read here) claims the title ``key`` (None: the node was named
    by its id) or any of ``ids``, as the catalog would find them claimed; a file no longer
    there claims nothing."""
    from osk.search.versions import parse_node
    from osk.store.node import read_text, title_from_path
    from osk.store.titles import title_key

    for rel, now in stale.items():
        if now is None:
            continue
        if key is not None and title_key(title_from_path(rel)) == key:
            return False
        node = parse_node(rel, read_text(vault.abs(rel)))
        if node is not None and node.id in ids:
            return False
    return True
