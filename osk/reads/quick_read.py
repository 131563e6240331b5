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
- the session may see its scope, and no region of the vault is protected (what a protected
  node serves, and whether a change waits, is the engine's to judge).

Its markers follow the engine's rule from the rechecks table on disk, as a search hit's do.
Its front matter is read as ``parse_validated`` reads a text the index took from a valid node:
in osk's own form, without the contract's model. The page is cut by the engine's own
``node_page``, and the hash that authorises a full replacement comes with a read of the whole
body, as a session's first read earns it.

Related nodes are not listed: the similar ones take a ranked search (``Engine.related``), and
the text ``osk read`` prints shows none; ``--json``, which carries them, opens the engine.
Anything else (a past version, a node not found or claimed twice, a stale index, a protected
vault, a marker only the engine can judge) returns None, and the caller opens the engine,
whose answer and error messages are the reference. So every read answered here is one the
engine gives.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from osk.store.fsutil import collector_paused

if TYPE_CHECKING:
    from osk.calls.results import NodeRead
    from osk.store.vault import Vault


def read(vault_arg: str | Path | None, cwd: Path, scope: str | None, ref: str, *,
         section: str | None = None, start: int | None = None,
         length: int | None = None) -> NodeRead | None:
    """``Engine.read_node(ref, ...)`` for a session in ``cwd`` with no related nodes listed,
    or None: open the engine. Without the cycle collector, as a fresh search runs."""
    with collector_paused():
        return _read(vault_arg, cwd, scope, ref, section, start, length)


def _read(vault_arg: str | Path | None, cwd: Path, scope: str | None, ref: str,
          section: str | None, start: int | None, length: int | None) -> NodeRead | None:
    from osk.authority import mutation
    from osk.calls.pages import node_page
    from osk.errors import OskError
    from osk.provenance.sessions import open_session
    from osk.reads.quick_search import EngineNeeded, hit_markers
    from osk.search import recallfile
    from osk.search.regions import Regions
    from osk.store.ids import check_identifier
    from osk.store.vault import locate

    try:
        check_identifier("a node reference (title or id)", ref)
    except OskError:
        return None  # the engine refuses it, in its own words
    vault = locate(vault_arg, cwd)
    mutation.finish_killed_writes(vault)  # what opening the engine does first
    if Regions(vault).protected():
        return None
    session = open_session(vault, cwd, scope)
    try:
        db = recallfile.open_reader(vault.state("index"))
    except recallfile.Unusable:
        return None
    try:
        db.execute("BEGIN")  # one snapshot: the rows below are those the look vouches for
        found = _vouched(vault, db, ref)
        if found is None:
            return None
        doc, node, look = found
        if not session.can_see_scope(node.scope):
            return None  # the engine says it is not found, as it says for a missing node
        markers = hit_markers(vault, db, [doc], look, {}).get(doc.id, [])
        # a first read of this file version earns the hash when it shows the whole body
        # (``ReadLog.note`` on one page)
        return node_page(session.scope, node, node, section, start, length,
                         markers=tuple(markers), whole_hash=node.file_hash)
    except (recallfile.Unusable, recallfile.Error, EngineNeeded, OskError, OSError,
            UnicodeDecodeError, KeyError, TypeError, ValueError):
        return None  # damaged, swapped as we read, or another shape: the engine answers
    finally:
        db.close()


def _vouched(vault: Vault, db: Any, ref: str) -> tuple[Any, Any, dict[str, Any]] | None:
    """The document ``ref`` names, its node as its file holds it now, and the look that
    vouches for it; None when the index on disk cannot say (the module's checks)."""
    from osk.reads.quick_search import as_indexed, look_bounds, stale_since_look, stat_now
    from osk.search import recallfile
    from osk.store.fsutil import sha256_text
    from osk.store.node import parse_validated, read_text, title_from_path
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
    docs = list(recallfile.documents(db, "id = ?", (ref,)))
    key = None
    if not docs:
        key = title_key(ref)
        docs = list(recallfile.documents(db, "title_key = ?", (key,)))
        if any(title_key(title_from_path(rel)) == key for rel in look.get("others", {})):
            return None  # a file that is no valid node claims the title too
    if len(docs) != 1:
        return None
    doc = docs[0]
    if db.execute("SELECT count(*) FROM docs WHERE id = ?", (doc.id,)).fetchone()[0] != 1:
        return None
    if doc.path in stale or not _claim_none(vault, stale, key, {ref, doc.id}):
        return None
    if not as_indexed(vault, doc.path, doc.stat, doc.file_hash, bounds,
                       stat_now(str(vault.root), doc.path)):
        return None
    text = read_text(vault.abs(doc.path))
    if sha256_text(text) != doc.file_hash:
        return None  # changed since it was vouched for: the engine reads it again
    return doc, parse_validated(doc.path, text, doc.file_hash), look


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
