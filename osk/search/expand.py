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
from functools import lru_cache

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


@lru_cache(maxsize=1)
def _tables() -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[str, ...]]]:
    """(Korean word -> English terms, English term -> Korean bigram terms)."""
    korean_to_english: dict[str, tuple[str, ...]] = {}
    english_to_korean: dict[str, list[str]] = {}
    for korean, alternatives in parse():
        key = normalise(korean)
        english_terms = sorted({term for alt in alternatives for term in tokenize(alt)})
        korean_to_english[key] = tuple(english_terms)
        korean_terms = tokenize(korean)
        for alt in alternatives:
            words = tokenize(alt)
            if len(words) == 1:
                english_to_korean.setdefault(words[0], []).extend(korean_terms)
    return korean_to_english, {k: tuple(dict.fromkeys(v)) for k, v in english_to_korean.items()}


def query_terms(query: str, *, expansion_weight: float = EXPANSION_WEIGHT) -> dict[str, float]:
    """Term -> weight (occurrences of typed terms, plus expansion terms at a lower weight)."""
    typed = Counter(tokenize(query))
    weights: dict[str, float] = {term: float(count) for term, count in typed.items()}
    if expansion_weight <= 0:
        return _without_stopwords(weights)
    extra: dict[str, float] = {}
    text = normalise(query)
    korean_to_english, english_to_korean = _tables()
    if not text.isascii():
        words = {_PARTICLE.match(word).group(1) for word in _WORDS.findall(text)}  # type: ignore[union-attr]
        for korean, english in korean_to_english.items():
            if (korean in words) if len(korean) == 1 else (korean in text):
                for term in english:
                    extra[term] = expansion_weight
    for term in typed:
        if term.isascii():
            for korean_term in english_to_korean.get(term, ()):
                extra[korean_term] = expansion_weight
    for term, weight in extra.items():
        weights[term] = weights.get(term, 0.0) + weight
    return _without_stopwords(weights)


def _without_stopwords(weights: dict[str, float]) -> dict[str, float]:
    kept = {term: weight for term, weight in weights.items() if term not in _STOP_TERMS}
    return kept or weights


_STOP_TERMS = frozenset(tokenize(" ".join(sorted(STOPWORDS))))
