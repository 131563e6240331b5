"""The English Snowball stemmer ("Porter2", as Snowball 3 defines it), in the standard library.

Why our own code: the prompt-submit hook tokenizes every prompt and must stay standard-library
only, and a query matches only terms made the same way as the index's, so the index and the
hook need one stemmer that both can import. This module implements the published algorithm
(snowballstem.org, "The English (Porter2) stemming algorithm");
``tests/search/test_search_tokenize.py`` checks that it gives exactly what the maintained
``snowballstemmer`` package gives, word for word, over a large vocabulary.

The index applies only its inflectional part (Step 1, see ``stem``): on the development sets the
derivational steps (2-5) added 0.005 to LoCoMo's R@10 and cost the dev set 0.002 nDCG@10, one
answer and one silence of per-prompt recall (docs/performance.md). It takes one lowercase ASCII
word of letters; ``stem`` in ``osk.search.tokenize`` decides which
words it sees. Inside, a consonant ``y`` is written ``Y`` while the steps run (so it is not a
vowel), and turned back at the end.
"""

from __future__ import annotations

_VOWELS = frozenset("aeiouy")
_NOT_SHORT_END = frozenset("aeiouywxY")  # what may not end a short syllable
_LI_BEFORE = frozenset("cdeghkmnrt")  # letters before which a final "li" comes off
_REGION_PREFIXES = ("univers", "commun", "arsen", "emerg", "gener", "inter", "later", "organ",
                    "past")
_EXCEPTIONS = {"skis": "ski", "skies": "sky", "idly": "idl", "gently": "gentl", "ugly": "ugli",
               "early": "earli", "only": "onli", "singly": "singl", "sky": "sky",
               "news": "news", "howe": "howe", "atlas": "atlas", "cosmos": "cosmos",
               "bias": "bias", "andes": "andes"}
_ING_KEPT = frozenset({"even", "cann", "inn", "earr", "herr", "out"})  # evening, herring …
_EED_KEPT = frozenset({"succ", "proc", "exc"})  # succeed, proceed, exceed
_DOUBLES = frozenset({"bb", "dd", "ff", "gg", "mm", "nn", "pp", "rr", "tt"})
# Step 2 and 3: suffix -> replacement, each tried longest first; None marks a rule with a
# condition of its own (below).
_STEP2 = {"ization": "ize", "ational": "ate", "fulness": "ful", "ousness": "ous",
          "iveness": "ive", "tional": "tion", "biliti": "ble", "lessli": "less",
          "entli": "ent", "ation": "ate", "alism": "al", "aliti": "al", "ousli": "ous",
          "iviti": "ive", "fulli": "ful", "enci": "ence", "anci": "ance", "abli": "able",
          "izer": "ize", "ator": "ate", "alli": "al", "ogist": "og", "bli": "ble",
          "ogi": None, "li": None}
_STEP3 = {"ational": "ate", "tional": "tion", "alize": "al", "icate": "ic", "iciti": "ic",
          "ative": None, "ical": "ic", "ness": "", "ful": ""}
_STEP4 = ("ement", "ment", "able", "ible", "ance", "ence", "ate", "iti", "ion", "ism", "ive",
          "ize", "ous", "ant", "ent", "al", "er", "ic")




def _by_last_letter(suffixes: object) -> dict[str, tuple[str, ...]]:
    """Suffixes grouped by their last letter, longest first: a word looks at its own group."""
    groups: dict[str, list[str]] = {}
    for suffix in sorted(suffixes, key=len, reverse=True):  # type: ignore[call-overload]
        groups.setdefault(suffix[-1], []).append(suffix)
    return {letter: tuple(group) for letter, group in groups.items()}


_STEP2_ORDER = _by_last_letter(_STEP2)
_STEP3_ORDER = _by_last_letter(_STEP3)
_STEP4_ORDER = _by_last_letter(_STEP4)


def _first(word: str, order: dict[str, tuple[str, ...]]) -> str | None:
    """The longest suffix of ``order`` that ``word`` ends with."""
    return next((suffix for suffix in order.get(word[-1], ()) if word.endswith(suffix)), None)


def stem(word: str, *, derivational: bool = True) -> str:
    """The Snowball English stem of ``word`` (lowercase ASCII letters).

    ``derivational=False`` stops after Step 1 (plurals, ``-ed``/``-ing``/``-edly``/``-ingly``,
    final ``y``): the inflections only, so "visited" meets "visit" while "general" and
    "generate" stay apart. The index uses that (see ``osk.search.tokenize.stem``)."""
    if len(word) <= 2:
        return word
    known = _EXCEPTIONS.get(word)
    if known is not None:
        return known
    word = _mark_y(word)
    r1, r2 = _regions(word)
    word = _step1a(word)
    word = _step1b(word, r1)
    word = _step1c(word)
    if not derivational:
        return word.replace("Y", "y")
    word = _step2(word, r1)
    word = _step3(word, r1, r2)
    word = _step4(word, r2)
    word = _step5(word, r1, r2)
    return word.replace("Y", "y")


def _mark_y(word: str) -> str:
    """A ``y`` at the start or after a vowel is a consonant: ``Y``."""
    letters = list(word)
    if letters[0] == "y":
        letters[0] = "Y"
    for i in range(1, len(letters)):
        if letters[i] == "y" and letters[i - 1] in _VOWELS:
            letters[i] = "Y"
    return "".join(letters)


def _after_vowel_consonant(word: str, start: int) -> int:
    """The position after the first non-vowel that follows a vowel, from ``start``."""
    for i in range(start + 1, len(word)):
        if word[i] not in _VOWELS and word[i - 1] in _VOWELS:
            return i + 1
    return len(word)


def _regions(word: str) -> tuple[int, int]:
    prefix = next((p for p in _REGION_PREFIXES if word.startswith(p)), None)
    r1 = len(prefix) if prefix else _after_vowel_consonant(word, 0)
    return r1, _after_vowel_consonant(word, r1) if r1 < len(word) else len(word)


def _short_syllable_end(word: str) -> bool:
    """The word ends in a short syllable (or in ``past``)."""
    n = len(word)
    if n >= 3 and (word[-1] not in _NOT_SHORT_END and word[-2] in _VOWELS
                   and word[-3] not in _VOWELS):
        return True
    if n == 2 and word[0] in _VOWELS and word[1] not in _VOWELS:
        return True
    return word.endswith("past")


def _has_vowel(text: str) -> bool:
    return any(c in _VOWELS for c in text)


def _step1a(word: str) -> str:
    if word.endswith("sses"):
        return word[:-2]
    if word.endswith(("ied", "ies")):
        return word[:-2] if len(word) > 4 else word[:-1]
    if word.endswith(("us", "ss")) or not word.endswith("s"):
        return word
    # "s" goes when a vowel comes before the letter just before it (gaps, not gas)
    return word[:-1] if _has_vowel(word[:-2]) else word


def _step1b(word: str, r1: int) -> str:
    if word.endswith(("eedly", "eed")):
        cut = 5 if word.endswith("eedly") else 3
        base = word[:-cut]
        if len(base) >= r1 and base not in _EED_KEPT:
            return base + "ee"
        return word
    suffix = next((s for s in ("ingly", "edly", "ing", "ed") if word.endswith(s)), None)
    if suffix is None:
        return word
    base = word[:-len(suffix)]
    if suffix == "ing":
        if base in _ING_KEPT:
            return word
        if len(base) == 2 and base[1] == "y" and base[0] not in _VOWELS:
            return base[0] + "ie"  # dying, lying, tying
    if not _has_vowel(base):
        return word
    if base.endswith(("at", "bl", "iz")):
        return base + "e"
    if base[-2:] in _DOUBLES:
        if len(base) == 3 and base[0] in "aeo":
            return base  # added, egged, odder kept whole
        return base[:-1]
    if r1 == len(base) and _short_syllable_end(base):
        return base + "e"
    return base


def _step1c(word: str) -> str:
    if len(word) > 2 and word[-1] in "yY" and word[-2] not in _VOWELS:
        return word[:-1] + "i"
    return word


def _step2(word: str, r1: int) -> str:
    suffix = _first(word, _STEP2_ORDER)
    if suffix is None or len(word) - len(suffix) < r1:
        return word
    base = word[:-len(suffix)]
    if suffix == "ogi":
        return base + "og" if base.endswith("l") else word
    if suffix == "li":
        return base if base and base[-1] in _LI_BEFORE else word
    return base + str(_STEP2[suffix])


def _step3(word: str, r1: int, r2: int) -> str:
    suffix = _first(word, _STEP3_ORDER)
    if suffix is None or len(word) - len(suffix) < r1:
        return word
    base = word[:-len(suffix)]
    if suffix == "ative":
        return base if len(base) >= r2 else word
    return base + str(_STEP3[suffix])


def _step4(word: str, r2: int) -> str:
    suffix = _first(word, _STEP4_ORDER)
    if suffix is None or len(word) - len(suffix) < r2:
        return word
    base = word[:-len(suffix)]
    if suffix == "ion":
        return base if base.endswith(("s", "t")) else word
    return base


def _step5(word: str, r1: int, r2: int) -> str:
    if word.endswith("e"):
        base = word[:-1]
        if len(base) >= r2 or (len(base) >= r1 and not _short_syllable_end(base)):
            return base
        return word
    if word.endswith("ll") and len(word) - 1 >= r2:
        return word[:-1]
    return word
