"""A node as per-prompt recall sees it, whichever half ranked it: the hook over the recall file
(``osk.hooks.recall.per_prompt``) or the session's MCP server over the recall channel
(``osk.search.recall_server``). Both hand over ``Recalled`` hits, each with the hook's
confidence: how many of the prompt's rare words the node holds (``confidence``), which the
hook's floors are set in.

Top-level imports: standard library only (the hook imports this module).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from osk.store.fastclass import dataclass

PRIOR = 100        # see ``confidence``
TITLE_CONFIDENCE = 10.0  # a prompt equal to a node's title
DEPTH = 8          # how many ranked hits are looked at before the hook's filters
PROMPT_CHARS = 2000  # a pasted log or file: its first part says what the prompt is about


@dataclass(frozen=True)
class Recalled:
    """A node per-prompt recall may show, as either half hands it over."""

    title: str
    id: str
    path: str
    summary: str
    markers: tuple[str, ...]
    confidence: float
    content_hash: str
    space: str
    stat: tuple[int, int, int]  # the file's stat key when the index read it
    approvals: object = None    # the approvals' generation the index served it under
    trust: str | None = None    # confirmed / inferred (osk.authority.trust)
    meant: bool = False         # the semantic order's first node (server path): not cut by
                                # the hook's ``RELATIVE``, since its confidence counts words only
    # who wrote it, its trust, citations and steering (``osk.provenance.origin.Origin``, a wing
    # beside this one): read by the hook from the file of a hit it is about to show
    origin: Any = None


def recalled(ranking: Any, order: Sequence[tuple[int, int, float, float]],
             weights: Mapping[str, float], approvals: object) -> list[Recalled]:
    """The hits of a ranked order (``Ranking.rank``, or search's fused order) as recall sees
    them: each with its confidence, markers and the stat key it was indexed at."""
    corpus = ranking.corpus
    hits = ranking.hits(list(order), None)
    pairs, _ = corpus.supersession()
    found = []
    for (slot, tier, _, _), hit in zip(order, hits, strict=True):
        # A node that supersedes another answers what the older one answered: it is at
        # least as sure as its predecessor (whose own hit is left out as superseded).
        sure = TITLE_CONFIDENCE if tier else max(
            ranking.factor(s) * confidence(corpus.bm25, weights, s)
            for s in (slot, *(old for old, new in pairs if new == slot)))
        found.append(recalled_doc(corpus.docs[slot], approvals, hit.markers, sure))
    return found


def recalled_doc(doc: Any, approvals: object, markers: Sequence[str] = (),
                 sure: float = 0.0) -> Recalled:
    """A Recalled from a recall-file document (``SearchDoc``), with the trust marker added."""
    from osk.authority import trust

    inferred = trust.person_marker(doc.space, doc.trust)
    labels = tuple(sorted({*markers, inferred})) if inferred else tuple(markers)
    return Recalled(doc.title, doc.id, doc.path, doc.summary, labels, sure, doc.content_hash,
                    doc.space, tuple(doc.stat), approvals, doc.trust)


def confidence(bm25: Any, weights: Mapping[str, float], slot: int) -> float:
    """How many of the prompt's rare words the node holds, each counted by its rarity.

    A word's rarity is a smoothed idf, ``log(1 + (N + PRIOR) / (df + 0.5))``, over the idf of a
    word found in a single node, so a word in one node of many counts about 1 and a word in
    every node much less. ``PRIOR`` pretends the vault is larger by that many nodes without
    the word, which keeps the measure meaningful in a vault of a handful of nodes (where
    BM25's own idf is near zero for everything) while it fades out in a large one.
    """
    size = bm25.size
    unit = math.log(1 + (size + PRIOR) / 1.5)
    norm = bm25.norms()[slot]
    held = 0.0
    for term, weight in weights.items():
        tf = bm25.tf(term, slot)
        if tf:
            rarity = math.log(1 + (size + PRIOR) / (bm25.df(term) + 0.5))
            held += weight * rarity * tf * (bm25.k1 + 1) / (tf + norm)
    return held / unit


def coverage(bm25: Any, weights: Mapping[str, float], slot: int,
             typed: Collection[str] | None = None) -> float:
    """The share of the prompt the node holds: its words' rarity (as in ``confidence``, each
    counted once) over all of the prompt's, where a word no node holds counts as rarest.
    Unlike ``confidence`` it does not grow with the prompt's length: a long prompt whose few
    common words a node happens to hold stays low. Given the words the person ``typed``, a
    term the query only added (another language's word for one typed, ``osk.search.expand``)
    counts only where the node holds it: a translation the vault never uses leaves no part
    of the prompt unanswered."""
    size = bm25.size
    total = held = 0.0
    for term, weight in weights.items():
        rarity = weight * math.log(1 + (size + PRIOR) / (bm25.df(term) + 0.5))
        found = bool(bm25.tf(term, slot))
        if found or typed is None or term in typed:
            total += rarity
        if found:
            held += rarity
    return held / total if total else 0.0
