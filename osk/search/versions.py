"""Node versions as search keeps them.

``document``: what the index keeps of the version of a node readers are served (a
``SearchDoc`` and its terms), with the title, Space and scope read from its path.
``search_versions``: a set of versions ranked alone, with an index of their own (the vault as
it stood at a date). ``checked`` and ``moment``: what every search accepts, the live index's
(``osk.search.index``) too.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from osk.errors import ContractError, OskError, SearchError
from osk.search.bm25 import EPSILON, K1, B
from osk.search.corpus import Corpus, SearchDoc
from osk.search.ranking import Hit, Ranking, Visible
from osk.search.tokenize import TOKENIZER_VERSION, loose_key, tokenize
from osk.store import clock
from osk.store.fsutil import StatKey
from osk.store.titles import title_key
from osk.store.vault import SCOPE, SPACES

if TYPE_CHECKING:
    from osk.store.node import Node

DEFAULT_K = 8
MAX_K = 50


def document(rel: str, served: Node, stat: StatKey, file_hash: str,
             read_ns: int) -> tuple[SearchDoc, Counter[str]]:
    """What the index keeps of the version ``served`` of the node at ``rel``, and its terms."""
    from osk.store.edges import stated_supersedes  # here: only indexing needs it, not a query

    meta = served.meta
    title = title_of(rel)
    tokens = tokenize(title) + tokenize(meta.summary) + tokenize(served.body)
    content_hash = SearchDoc.hash_of(title, meta.summary, served.body)
    supersedes = _link_title(meta.supersedes) or _link_title(stated_supersedes(served.body))
    doc = SearchDoc(
        path=rel, id=meta.id, title=title, summary=meta.summary, updated=meta.updated,
        space=rel.split("/", 1)[0], scope=_scope_of(rel), trust=meta.trust_state,
        created=_epoch(meta.created), valid_from=_epoch(meta.valid_from),
        valid_to=_epoch(meta.valid_to),
        supersedes=loose_key(supersedes) if supersedes else None,
        stat=stat, file_hash=file_hash, read_ns=read_ns, length=len(tokens),
        title_key=title_key(title), loose_key=loose_key(title), content_hash=content_hash,
    ).sharing()  # one string where values agree
    return doc, Counter(tokens)


def search_versions(nodes: Iterable[Node], query: str, *, at: datetime, k: int = DEFAULT_K,
                    scope: str | None = None, visible: Visible | None = None) -> list[Hit]:
    """Rank ``query`` over these node versions alone (the vault as it stood at ``at``,
    ``osk.authority.validity.as_of_view``), the way ``SearchIndex.search`` ranks the live vault.

    The versions get an index of their own for this one query (a past vault shares no
    statistics with today's): every node is tokenized, about a second at 5,000 nodes. Words
    only: past versions have no vectors.
    """
    query, k = checked(query, k)
    corpus = Corpus()
    for node in nodes:
        if searchable_path(node.path):
            doc, frequencies = document(node.path, node, (0, 0, 0), node.file_hash, 0)
            corpus.store(doc, frequencies)
    ranking = Ranking(corpus, scope=scope, visible=visible, moment=moment(at),
                      explicit_time=True)
    return ranking.hits(ranking.rank(query, k), None)


# What an index was built with (the recall file's meta, ``recallfile.load``); one that
# differs is rebuilt, not trusted.
PARAMS: dict[str, Any] = {
    "tokenizer": TOKENIZER_VERSION, "k1": K1, "b": B, "epsilon": EPSILON,
    "fields": "title+summary+body", "doc": 2,  # doc 2: SearchDoc.content_hash
}


def checked(query: object, k: object) -> tuple[str, int]:
    """The query and k a search accepts (k capped at ``MAX_K``), or a SearchError."""
    if not isinstance(query, str) or not query.strip():
        raise SearchError("the search query is empty; give words or a title to look for")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise SearchError(f"k must be a whole number from 1 to {MAX_K} (got {k!r})")
    return query, min(k, MAX_K)


def moment(as_of: str | datetime | None) -> float:
    if as_of is None:
        return clock.now().timestamp()
    if isinstance(as_of, datetime):
        if as_of.tzinfo is None:
            raise SearchError("as_of must carry a UTC offset, e.g. 2026-11-29T18:02+09:00")
        return as_of.timestamp()
    from osk.authority.validity import parse_as_of  # one reading of as_of for every reader

    try:
        return parse_as_of(as_of).timestamp()
    except OskError as exc:
        raise SearchError(str(exc)) from None


def title_of(rel: str) -> str:
    """A node's title from its path (osk.store.node.title_from_path, without pathlib's cost)."""
    return unicodedata.normalize("NFC", rel.rsplit("/", 1)[-1].removesuffix(".md"))


def _scope_of(rel: str) -> str | None:
    parts = rel.split("/", 2)
    return parts[1] if len(parts) == 3 and parts[0] == SCOPE else None


def searchable_path(rel: str) -> bool:
    return rel.split("/", 1)[0] in SPACES and rel.endswith(".md")


def parse_node(rel: str, text: str) -> Node | None:
    from osk.store import node as node_mod  # pydantic: imported only when a file must be read

    try:
        return node_mod.parse(rel, text)
    except ContractError:
        return None


def _link_title(link: str | None) -> str | None:
    if not link:
        return None
    inner = link[2:-2] if link.startswith("[[") and link.endswith("]]") else link
    return inner.split("|", 1)[0].split("#", 1)[0].strip() or None


def _epoch(text: str | None) -> float | None:
    return clock.parse(text).timestamp() if text else None
