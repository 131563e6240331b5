"""Search: tokenizer, incremental persisted BM25 index, ranking, markers.

``SearchIndex(vault)`` is the one object callers hold; ``tokenize`` is the term function the
index uses (also handy for tests and the eval). Importing this package stays light (no
pydantic, no numpy); node files are parsed only when one has to be (re)read.

Modules: ``tokenize`` (terms), ``bm25`` (scores, postings), ``corpus`` (documents in memory),
``store`` (snapshot + journal on disk), ``index`` (freshness, persistence, the public object),
``ranking`` (the order of hits), ``expand`` + ``glossary`` (query terms), ``importer``
(`osk import`).
"""

from osk.search.corpus import SearchDoc
from osk.search.index import DEFAULT_K, MAX_K, Refreshed, SearchIndex
from osk.search.ranking import Hit, scope_visibility
from osk.search.tokenize import tokenize

__all__ = [
    "DEFAULT_K",
    "MAX_K",
    "Hit",
    "Refreshed",
    "SearchDoc",
    "SearchIndex",
    "scope_visibility",
    "tokenize",
]
