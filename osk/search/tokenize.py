"""Turning text into index terms.

Latin-script text becomes lowercase ASCII words (runs of ``a-z0-9``; ``MAX_PATH`` gives ``max``
and ``path``), each reduced to its English stem (see ``stem``), so "visited", "visits" and
"visiting" meet "visit". Hangul, kana and CJK ideographs
have no spaces between words (or, for Korean, particles glued onto them), so a run of those
characters becomes its overlapping character bigrams: ``검색하면`` gives ``검색 색하 하면``,
and a query ``검색`` finds it. A one-character run is kept as a unigram. Mixed Korean/English
text yields both kinds of terms, so either language finds it.

Text is NFKC-normalised and case folded first, so full-width Latin letters, decomposed Hangul
and compatibility jamo read like their ordinary forms; Latin letters also lose their
accents. Everything here is stdlib and cheap to import.

Raw rounds are tokenized by ``tokenize_prose``: the same terms but for an English word's stem,
which is its whole Snowball stem (``prose_stem``), derived forms included.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from functools import cache

from osk.search import english

# Bump when tokenize() changes what it emits: a persisted index built by another version is
# rebuilt rather than trusted. 2: Snowball English's inflections (was: plural endings only).
TOKENIZER_VERSION = 2

_CJK_RANGES = (
    "\u1100-\u11ff"  # Hangul jamo
    "\u3040-\u309f"  # hiragana
    "\u30a0-\u30ff"  # katakana
    "\u3130-\u318f"  # Hangul compatibility jamo
    "\u31f0-\u31ff"  # katakana phonetic extensions
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\ua960-\ua97f"  # Hangul jamo extended-A
    "\uac00-\ud7a3"  # Hangul syllables
    "\ud7b0-\ud7ff"  # Hangul jamo extended-B
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\uff66-\uff9f"  # half-width katakana
    "\U00020000-\U0002ffff"  # CJK extensions B-F and supplement
)


# Compiled on first use: each of these classes spans the CJK planes and costs 2-4 ms to compile,
# which a hook would pay on every prompt although ASCII text (the common case) needs none.
@cache
def _token() -> re.Pattern[str]:
    return re.compile(f"[a-z0-9]+|[{_CJK_RANGES}]+")


@cache
def _word() -> re.Pattern[str]:
    return re.compile(f"[a-z0-9]+|[{_CJK_RANGES}]+|[^\\W_]+")


class _LatinFold(dict[int, str]):
    """Per-character fold for str.translate: Latin letters lose their accents (é → e), so
    "café" is the word ``cafe``; every other character maps to itself. Filled on first use.
    It sees text after NFKC, where no CJK character decomposes to ASCII (the two spacing kana
    sound marks that would are gone by then), so CJK needs no case of its own."""

    def __missing__(self, code: int) -> str:
        char = chr(code)
        stripped = "".join(
            c for c in unicodedata.normalize("NFKD", char) if not unicodedata.combining(c)
        )
        folded = self[code] = stripped if stripped.isascii() and stripped else char
        return folded


_FOLD = _LatinFold()


def normalise(text: str) -> str:
    """NFKC, case folding, accents off Latin letters: where every term and title key starts."""
    if text.isascii():
        return text.lower()
    return unicodedata.normalize("NFKC", text).casefold().translate(_FOLD)


def stem(word: str) -> str:
    """A word without its inflection (``osk.search.english``: Step 1 of Snowball's English
    algorithm), then without a final -e: tenses and plurals meet in one term, so visited,
    visiting and visits find visit, studies finds study, caches finds cache; derived words
    (general, generate) stay apart.

    Only words of letters alone are stemmed: a word with a digit (``crc32``, ``v2``, a date's
    ``2023``) is an identifier or a number and stays whole. Terms are only compared with
    terms made the same way, so a stem like ``configur`` is never shown to anyone.
    """
    if len(word) <= 2 or not word.isalpha():
        return word
    word = english.stem(word, derivational=False)
    # A final -e off too (as osk always did): "hashes" leaves Step 1 as "hashe", "cache" stays
    # "cache"; without the e both meet "hash"/"cach" as the plural rule intended.
    return word[:-1] if word.endswith("e") and len(word) > 3 else word


def prose_stem(word: str) -> str:
    """A word of a conversation reduced to its whole Snowball English stem (``english.stem``,
    all five steps): derived forms meet too ("rejection" and "rejected" in ``reject``,
    "recommendations" and "recommend", "participation" and "participated"), and a final -e
    comes off by Snowball's own rule only ("made", "state" and "note" keep theirs, so they do
    not meet "mad", "stat" and "not" as ``stem`` makes them).

    Raw rounds use it (``osk.search.rounds``): people say a thing again in another form of
    its word, and a round holds none of a note's identifiers. On LoCoMo's development half it
    added 0.008 to the rounds' R@10 and 0.020 to multi-hop; nodes keep ``stem``, whose
    inflections only did better on the dev set (docs/performance.md). As with ``stem``, a
    word with a digit stays whole.
    """
    if len(word) <= 2 or not word.isalpha():
        return word
    return english.stem(word)


class _StemCache(dict[str, str]):
    """word -> stem, filled on first sight: a vault repeats its words, so this is a lookup."""

    def __init__(self, reduce: Callable[[str], str]) -> None:
        super().__init__()
        self.reduce = reduce

    def __missing__(self, word: str) -> str:
        value = self.reduce(word)
        if len(self) < 500_000:  # bounded: a stream of random identifiers cannot grow it
            self[word] = value
        return value


_STEMS = _StemCache(stem)
_PROSE_STEMS = _StemCache(prose_stem)
# Every ASCII character that is not a lowercase letter or digit becomes a space, so that
# ``str.split`` yields exactly the ``[a-z0-9]+`` runs (4x faster than a regex findall).
_ASCII_SPLIT = str.maketrans({code: " " for code in range(128)
                              if not (chr(code).isdigit() or "a" <= chr(code) <= "z")})


def tokenize(text: str) -> list[str]:
    """Index terms of ``text``, in order, duplicates kept (BM25 counts them)."""
    return _terms(text, _STEMS)


def tokenize_prose(text: str) -> list[str]:
    """``tokenize`` with ``prose_stem`` for ``stem``: the terms of a raw round, one for each of
    ``tokenize``'s, in the same order (only an English word's stem differs)."""
    return _terms(text, _PROSE_STEMS)


def _terms(text: str, stems: dict[str, str]) -> list[str]:
    folded = normalise(text)
    if folded.isascii():  # the common case: one C-level findall, one dict lookup per word
        return [stems[word] for word in folded.translate(_ASCII_SPLIT).split()]
    terms: list[str] = []
    for run in _token().findall(folded):
        if run[0] < "\u0080":
            terms.append(stems[run])
        elif len(run) == 1:
            terms.append(run)
        else:
            terms.extend([run[i : i + 2] for i in range(len(run) - 1)])
    return terms


def loose_key(text: str) -> str:
    """A title compared without punctuation or spacing: the words of the text, space-joined.

    Titles cannot hold ``: / # ? "`` and friends (they are file names), so a query typed with
    the punctuation a person would naturally use still matches the stored title loosely.
    """
    folded = normalise(text)
    if folded.isascii():  # the words are the [a-z0-9] runs, as in tokenize
        return " ".join(folded.translate(_ASCII_SPLIT).split())
    return " ".join(_word().findall(folded))
