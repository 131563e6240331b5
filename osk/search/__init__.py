"""Search: tokenizer, incremental persisted BM25 index, ranking, markers.

``SearchIndex(vault)`` is the one object callers hold; ``tokenize`` is the term function the
index uses (also handy for tests and the eval). Importing this package stays light (no
pydantic, no numpy); node files are parsed only when one has to be (re)read.

Modules: ``tokenize`` (terms), ``bm25`` (scores, postings), ``corpus`` (documents in memory),
``index`` (freshness, persistence, the public object),
``versions`` (what the index keeps of a node version; a search over given versions alone),
``regions`` (protected regions as the index sees them), ``ranking`` (the order of hits),
``recallfile`` (the index on disk, which the hooks query in place; ``recall_mirror`` writes it),
``recall_hits`` + ``recall_wire`` + ``recall_server`` (per-prompt recall's hits, what the hook
and a running server share over the recall channel, and the server's half),
``expand`` + ``glossary`` (query terms). (`osk import` is ``osk.verbs.importer``: it writes
through the engine.)

The names below are loaded on first use, so the prompt-submit hook can import ``ranking`` and
``recallfile`` without paying for the index and the semantic channel.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

# Eager, and after the submodule: the function, not the module, is ``osk.search.tokenize``.
from osk.search.tokenize import tokenize

if TYPE_CHECKING:
    from osk.search.corpus import SearchDoc
    from osk.search.index import Refreshed, SearchIndex
    from osk.search.ranking import Hit, scope_visibility
    from osk.search.versions import DEFAULT_K, MAX_K

_HOMES = {"SearchDoc": "corpus", "DEFAULT_K": "versions", "MAX_K": "versions", "Refreshed": "index",
          "SearchIndex": "index", "Hit": "ranking", "scope_visibility": "ranking"}


SEMANTIC_SWITCH = "OSK_SEMANTIC"
VECTORS_FOLDER = "vectors"  # the nodes' vectors, in the index's folder (``semantic.Vectors``)


def semantic_enabled() -> bool:
    """Whether the semantic channel may run here (``OSK_SEMANTIC`` is not 0, false, off or
    no). Read here, not in ``semantic``, so a lexical fresh search imports no module of the
    channel."""
    import os

    return os.environ.get(SEMANTIC_SWITCH, "1").strip() not in {"0", "false", "off", "no"}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'osk.search' has no attribute {name!r}")
    return getattr(import_module(f"osk.search.{home}"), name)


__all__ = [
    "DEFAULT_K",
    "MAX_K",
    "Hit",
    "Refreshed",
    "SearchDoc",
    "SEMANTIC_SWITCH",
    "SearchIndex",
    "VECTORS_FOLDER",
    "scope_visibility",
    "semantic_enabled",
    "tokenize",
]
