"""Query terms: function words dropped, plus a small cross-language expansion.

A query becomes its own terms (``tokenize``) plus, at ``EXPANSION_WEIGHT`` each, the other
language's terms for glossary words it contains: ``리플레이`` in a Korean question adds the
English term ``replay``; ``deploy`` in an English one adds the bigrams of ``배포``. Only the
query is expanded, never the index, so the parity of the underlying BM25 scores is untouched
and the expansion can change without a rebuild.
"""

from __future__ import annotations

import re
from collections import Counter
from functools import cache

from osk.search.glossary import parse
from osk.search.tokenize import normalise, tokenize

# Weight of one expansion term relative to one occurrence of a term the person typed.
# Tuned on the dev set (0, 0.25, 0.5, 0.75, 1.0 tried; see docs/performance.md).
EXPANSION_WEIGHT = 0.5

# English function words are dropped from a query (never from the index) unless nothing else
# is left. rank-bm25 gives a term found in more than half of the notes the idf floor
# ``0.25 * average idf``, which in a real vault is about the weight of a mid-frequency word,
# so "how do I run the tests" would otherwise rank notes by how often they say "the" and "I".
# A classic stop list (no project vocabulary); measured on the dev set in docs/performance.md.
STOPWORDS = frozenset("""
a about after again all also am an and any are as at be because been before being between both
but by can could did do does doing down during each few for from further had has have having he
her here hers him his how i if in into is it its itself just me more most my myself no nor not
now of off on once only or other our ours out over own same she should so some such than that
the their theirs them then there these they this those through to too under until up very was
we were what when where which while who whom why will with would you your yours
""".split())

# Korean particles that may follow a one-syllable glossary word (분, 초, 주 …); longer words
# are matched anywhere, because Korean glues particles and suffixes onto them.
_PARTICLE = re.compile(r"^(.+?)(은|는|이|가|을|를|에|의|도|로|으로|에서|와|과|랑|이랑)?$")
_WORDS = re.compile(r"[^\W_]+")


# The glossary's tables are built on first use, each only as far as a query needs it: an ASCII
# prompt needs no Korean normalised, and only the Korean words its own terms name tokenized
# (tokenizing Korean compiles the CJK patterns, a few ms a hook would pay on every prompt).
_entries = cache(parse)  # both tables read the one parse


@cache
def _korean_to_english() -> dict[str, tuple[str, ...]]:
    """Normalised Korean word -> the English terms of its alternatives."""
    return {normalise(korean): tuple(sorted({term for alt in alternatives
                                             for term in tokenize(alt)}))
            for korean, alternatives in _entries()}


@cache
def _english_words() -> dict[str, tuple[str, ...]]:
    """English term -> the Korean words that have it as a one-term alternative."""
    words: dict[str, list[str]] = {}
    for korean, alternatives in _entries():
        for alt in alternatives:
            terms = tokenize(alt)
            if len(terms) == 1:
                words.setdefault(terms[0], []).append(korean)
    return {term: tuple(found) for term, found in words.items()}


@cache
def _korean_terms(term: str) -> tuple[str, ...]:
    """The Korean bigram terms an English term expands to, each once."""
    return tuple(dict.fromkeys(bigram for korean in _english_words().get(term, ())
                               for bigram in tokenize(korean)))


def query_terms(query: str, *, expansion_weight: float = EXPANSION_WEIGHT) -> dict[str, float]:
    """Term -> weight (occurrences of typed terms, plus expansion terms at a lower weight)."""
    typed = Counter(tokenize(query))
    weights: dict[str, float] = {term: float(count) for term, count in typed.items()}
    if expansion_weight <= 0:
        return _without_stopwords(weights)
    extra: dict[str, float] = {}
    text = normalise(query)
    if not text.isascii():
        words = {_PARTICLE.match(word).group(1) for word in _WORDS.findall(text)}  # type: ignore[union-attr]
        for korean, english in _korean_to_english().items():
            if (korean in words) if len(korean) == 1 else (korean in text):
                for term in english:
                    extra[term] = expansion_weight
    english_words = _english_words()
    for term in typed:
        if term.isascii() and term in english_words:
            for korean_term in _korean_terms(term):
                extra[korean_term] = expansion_weight
    for term, weight in extra.items():
        weights[term] = weights.get(term, 0.0) + weight
    return _without_stopwords(weights)


def _without_stopwords(weights: dict[str, float]) -> dict[str, float]:
    kept = {term: weight for term, weight in weights.items() if term not in _STOP_TERMS}
    return kept or weights


_STOP_TERMS = frozenset(tokenize(" ".join(sorted(STOPWORDS))))
