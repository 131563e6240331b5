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
from pathlib import Path

from osk.search.glossary import parse
from osk.search.glossary_terms import (
    ENGLISH_TO_KOREAN,
    KOREAN_TO_ENGLISH,
    PROSE_TERMS,
    STOP_TERMS,
)
from osk.search.tokenize import normalise, tokenize, tokenize_prose
from osk.store.fastclass import dataclass

# Weight of one expansion term relative to one occurrence of a term the person typed.
# Tuned on the dev set (0, 0.25, 0.5, 0.75, 1.0 tried; see docs/performance.md).
EXPANSION_WEIGHT = 0.5

# English function words are dropped from a query (never from the index) unless nothing else
# is left. rank-bm25 gives a term found in more than half of the notes the idf floor
# ``0.25 * average idf``, which in a real vault is about the weight of a mid-frequency word,
# so "how do I run the tests" would otherwise rank notes by how often they say "the" and "I".
# A classic stop list (no project vocabulary); measured on the dev set in docs/performance.md.
# Its modal verbs are all of them but "may" (a month): "might", "must" and "shall" were added
# beside "can", "could", "should", "will" and "would" when "What might X do?" ranked rounds by
# who said "might" (LoCoMo's development half: open-domain R@10 0.445 -> 0.456).
STOPWORDS = frozenset("""
a about after again all also am an and any are as at be because been before being between both
but by can could did do does doing down during each few for from further had has have having he
her here hers him his how i if in into is it its itself just me might more most must my myself
no nor not now of off on once only or other our ours out over own same shall she should so some
such than that the their theirs them then there these they this those through to too under
until up very was we were what when where which while who whom why will with would you your
yours
""".split())

# Korean particles that may follow a one-syllable glossary word (분, 초, 주 …); longer words
# are matched anywhere, because Korean glues particles and suffixes onto them.
_PARTICLE = re.compile(r"^(.+?)(은|는|이|가|을|를|에|의|도|로|으로|에서|와|과|랑|이랑)?$")
_WORDS = re.compile(r"[^\W_]+")


def build_tables() -> Tables:
    """The glossary and the stop list as the terms ``query_terms`` looks up, computed from
    ``osk.search.glossary`` and ``tokenize``. ``osk.search.glossary_terms`` holds them
    precomputed (a test keeps it equal to this): building them means stemming every English
    alternative and compiling the CJK patterns, 10-15 ms a prompt's hook and a fresh search
    would pay for a dictionary lookup. Regenerate it with ``python -m osk.search.expand``."""
    entries = parse()
    korean_to_english = {normalise(korean): tuple(sorted({term for alt in alternatives
                                                          for term in tokenize(alt)}))
                         for korean, alternatives in entries}
    english_words: dict[str, list[str]] = {}
    for korean, alternatives in entries:
        for alt in alternatives:
            terms = tokenize(alt)
            if len(terms) == 1:  # an English word, not a phrase, stands for the Korean one
                english_words.setdefault(terms[0], []).append(korean)
    english_to_korean = {term: tuple(dict.fromkeys(bigram for korean in words
                                                   for bigram in tokenize(korean)))
                         for term, words in english_words.items()}
    stop_terms = tuple(sorted(set(tokenize(" ".join(sorted(STOPWORDS))))))
    prose_terms = {term: prose for _, alternatives in entries for alt in alternatives
                   for term, prose in zip(tokenize(alt), tokenize_prose(alt), strict=True)
                   if term != prose}
    return Tables(korean_to_english, english_to_korean, stop_terms,
                  dict(sorted(prose_terms.items())))


@dataclass(frozen=True)  # not a NamedTuple: making one costs every importer a few ms
class Tables:
    korean_to_english: dict[str, tuple[str, ...]]  # normalised Korean word -> English terms
    english_to_korean: dict[str, tuple[str, ...]]  # English term -> the Korean words' terms
    stop_terms: tuple[str, ...]  # STOPWORDS as terms
    prose_terms: dict[str, str]  # an English glossary term -> its ``tokenize_prose`` form


def query_terms(query: str, *, expansion_weight: float = EXPANSION_WEIGHT,
                prose: bool = False) -> dict[str, float]:
    """Term -> weight (occurrences of typed terms, plus expansion terms at a lower weight).
    ``prose``: in the terms of a raw round (``tokenize_prose``), each term renamed by
    ``prose_names`` after the stop words went, so rounds and nodes drop the same words."""
    weights = _node_terms(query, expansion_weight)
    if not prose:
        return weights
    names = prose_names(query)
    renamed: dict[str, float] = {}
    for term, weight in weights.items():
        name = names.get(term, term)
        renamed[name] = renamed.get(name, 0.0) + weight
    return renamed


def prose_names(query: str) -> dict[str, str]:
    """Each of ``query``'s terms as ``query_terms`` makes them -> the ``tokenize_prose`` term
    of the same word (a term that two words share takes the later's), and each English term a
    Korean glossary word may add -> its prose form; terms that are the same both ways are
    left out. What lets a round's statistics answer a caller holding ``query_terms``. A word
    the person typed keeps its own prose form: "Tim" stays "tim", though the glossary's "time"
    (node term "tim") is renamed "time"."""
    typed = dict(zip(tokenize(query), tokenize_prose(query), strict=True))
    names = PROSE_TERMS | {term: prose for term, prose in typed.items() if term != prose}
    for term in [term for term, prose in typed.items() if term == prose and term in names]:
        del names[term]
    return names


def _node_terms(query: str, expansion_weight: float) -> dict[str, float]:
    typed = Counter(tokenize(query))
    weights: dict[str, float] = {term: float(count) for term, count in typed.items()}
    if expansion_weight <= 0:
        return _without_stopwords(weights)
    extra: dict[str, float] = {}
    text = normalise(query)
    if not text.isascii():
        words = {_PARTICLE.match(word).group(1) for word in _WORDS.findall(text)}  # type: ignore[union-attr]
        for korean, english in KOREAN_TO_ENGLISH.items():
            if (korean in words) if len(korean) == 1 else (korean in text):
                for term in english:
                    extra[term] = expansion_weight
    for term in typed:
        for korean_term in ENGLISH_TO_KOREAN.get(term, ()) if term.isascii() else ():
            extra[korean_term] = expansion_weight
    for term, weight in extra.items():
        weights[term] = weights.get(term, 0.0) + weight
    return _without_stopwords(weights)


def _without_stopwords(weights: dict[str, float]) -> dict[str, float]:
    kept = {term: weight for term, weight in weights.items() if term not in _STOP_TERMS}
    return kept or weights


_STOP_TERMS = frozenset(STOP_TERMS)


def write_tables(path: Path) -> None:
    """Write ``build_tables()`` as the module ``osk.search.glossary_terms``."""
    from pprint import pformat

    lines = ['"""Generated by ``python -m osk.search.expand`` from ``osk.search.glossary`` and the',
             'tokenizer: ``osk.search.expand.build_tables``, precomputed. Do not edit by hand."""',
             ""]
    for name, value in vars(build_tables()).items():  # the fields, in their order
        lines.append(f"{name.upper()} = {pformat(value, width=99, sort_dicts=False)}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    write_tables(Path(__file__).with_name("glossary_terms.py"))
