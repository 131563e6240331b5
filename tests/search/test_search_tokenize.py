"""Tokenizer: ASCII words for Latin text, character bigrams for Hangul, kana and CJK."""

from __future__ import annotations

import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from osk.search.expand import query_terms
from osk.search.tokenize import loose_key, tokenize, tokenize_prose


def test_latin_text_becomes_lowercase_ascii_words_split_at_punctuation_and_underscores():
    assert tokenize("MAX_PATH x-amz-checksum-crc32 Foo.BAR") == [
        "max", "path", "x", "amz", "checksum", "crc32", "foo", "bar"
    ]


def test_plural_endings_are_stemmed_so_singular_and_plural_meet():
    assert tokenize("hashes files queries tests") == tokenize("hash file query test")
    assert tokenize("class status") == ["class", "status"]


def test_tenses_and_derived_forms_meet_their_word():
    """Questions are asked in the past tense of what a round said in the present."""
    assert tokenize("visited visiting visits") == tokenize("visit visit visit")
    assert tokenize("configured configures") == tokenize("configure configure")
    assert tokenize("general") != tokenize("generate")  # derived words stay apart
    assert tokenize("studies studying caches") == tokenize("study study cache")


def test_a_round_s_terms_meet_derived_forms_and_keep_a_final_e_where_snowball_does():
    """``tokenize_prose`` (raw rounds): whole Snowball stems, one for each of ``tokenize``'s."""
    assert tokenize_prose("rejection rejected") == tokenize_prose("reject reject")
    assert tokenize_prose("recommendations participation") == tokenize_prose(
        "recommend participate")
    for word, other in (("made", "mad"), ("note", "not"), ("state", "stat"), ("hike", "hik")):
        assert tokenize(word) == tokenize(other) and tokenize_prose(word) != tokenize_prose(other)
    assert tokenize_prose("hashes caches") == tokenize_prose("hash cache")
    text = "Deployed v2 to 배포 서버, crc32 OK; the rejections piled up"
    prose, plain = tokenize_prose(text), tokenize(text)
    assert len(prose) == len(plain) and prose[1:4] == plain[1:4] == ["v2", "to", "배포"]


def test_a_round_s_query_drops_the_words_a_note_s_does_then_takes_their_prose_terms():
    assert query_terms("What might the rejection letters say?", expansion_weight=0,
                       prose=True) == {"reject": 1.0, "letter": 1.0, "say": 1.0}
    assert query_terms("the rejection") == {"rejection": 1.0}
    korean = query_terms("배포 절차", prose=True)  # expansions come along, renamed too
    assert korean["배포"] == 1.0 and "deploy" in korean and "deployment" not in korean
    assert "deployment" in query_terms("배포 절차")
    # a typed word keeps its own prose form, though a glossary word's node term is the same
    assert "tim" in query_terms("What books has Tim read?", prose=True)
    assert "time" in query_terms("what time is it", prose=True)


def test_words_with_digits_stay_whole():
    assert tokenize("crc32 v2s 2023 utf8") == ["crc32", "v2s", "2023", "utf8"]


def _vocabulary() -> list[str]:
    """Every word of the repository's docs and code, and words built from common stems and
    endings (fixed seed): what the index meets, and the suffix rules' corners."""
    import random
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    words: set[str] = set()
    for path in [*root.glob("docs/*.md"), *root.glob("osk/**/*.py"), *root.glob("*.md")]:
        words.update(re.findall(r"[a-z]+", path.read_text(encoding="utf-8").lower()))
    rng = random.Random(27)
    heads = sorted(words)
    endings = ["s", "es", "ies", "ied", "ed", "eed", "eedly", "ing", "ingly", "edly", "ly",
               "ness", "ful", "ation", "ational", "izer", "ization", "ogist", "ogi", "li",
               "bli", "alli", "ousli", "ement", "ment", "ance", "ive", "ize", "ion", "e", "ll",
               "y", "yy", "ying", "sses", "us", "ss", "ator", "iciti", "ative", "able"]
    words.update(rng.choice(heads) + rng.choice(endings) for _ in range(20_000))
    words.update(["dying", "lying", "tying", "skis", "skies", "news", "proceed", "succeeded",
                  "exceedingly", "evening", "herring", "outing", "inning", "generate",
                  "communism", "arsenal", "universal", "pasted", "added", "eggs", "odder",
                  "hoped", "hopping", "sky", "yes", "ayes", "bye", "gas", "gaps", "kiwis"])
    return sorted(words)


def test_the_stemmer_agrees_with_the_maintained_snowball_english_stemmer():
    """Our standard-library stemmer (the hook path may import nothing else) must be exactly
    Snowball's English algorithm as the maintained package computes it."""
    import snowballstemmer

    from osk.search import english

    reference = snowballstemmer.stemmer("english")
    words = _vocabulary()
    assert len(words) > 20_000
    differ = [(w, english.stem(w), reference.stemWord(w)) for w in words
              if english.stem(w) != reference.stemWord(w)]
    assert differ == []


def test_korean_runs_become_overlapping_bigrams_so_a_word_with_a_particle_is_found():
    assert tokenize("검색하면") == ["검색", "색하", "하면"]
    assert set(tokenize("검색")) <= set(tokenize("한국어로 검색하면 조사 붙은 단어"))


def test_a_single_hangul_syllable_is_kept_as_a_unigram():
    assert tokenize("틱 이 빠르다") == ["틱", "이", "빠르", "르다"]


def test_mixed_korean_and_english_text_is_findable_by_either_language():
    terms = set(tokenize("GC 모드는 workstation 으로 둔다"))
    assert set(tokenize("gc workstation")) <= terms
    assert set(tokenize("모드")) <= terms


def test_japanese_kana_and_chinese_ideographs_become_bigrams_too():
    assert tokenize("テスト") == ["テス", "スト"]
    assert tokenize("中文检索") == ["中文", "文检", "检索"]
    assert tokenize("Hello世界") == ["hello", "世界"]


def test_decomposed_hangul_and_full_width_latin_read_like_their_ordinary_forms():
    decomposed = unicodedata.normalize("NFD", "검색")
    assert tokenize(decomposed) == tokenize("검색")
    assert tokenize("ＡＢＣ") == ["abc"]


def test_latin_letters_lose_their_accents():
    assert tokenize("Café naïve") == tokenize("cafe naive")


def test_the_precomputed_glossary_terms_are_what_the_glossary_and_tokenizer_make():
    """``osk.search.glossary_terms`` is ``build_tables()`` written out; after a change to the
    glossary, the stop list or the tokenizer, run ``python -m osk.search.expand``."""
    from osk.search import expand, glossary_terms

    built = expand.build_tables()
    assert glossary_terms.KOREAN_TO_ENGLISH == built.korean_to_english
    assert glossary_terms.ENGLISH_TO_KOREAN == built.english_to_korean
    assert glossary_terms.STOP_TERMS == built.stop_terms
    assert glossary_terms.PROSE_TERMS == built.prose_terms
    english = query_terms("why did the deploy fail")
    korean = query_terms("리플레이 배포는 어떻게 해?")
    assert english["배포"] == expand.EXPANSION_WEIGHT and korean["deploy"] == 0.5


def test_loose_title_key_ignores_punctuation_that_titles_cannot_hold():
    assert loose_key("Lag compensation: server-side rewind") == loose_key(
        "Lag compensation - server side rewind"
    )
    assert loose_key("사이드바 구조: order") == "사이드바 구조 order"


def test_a_korean_query_is_expanded_with_english_terms_at_lower_weight_and_vice_versa():
    korean = query_terms("배포 절차")
    assert korean["deploy"] < 1.0 and korean["배포"] == 1.0
    english = query_terms("how do we deploy")
    assert 0 < english["배포"] < 1.0
    assert query_terms("how do we deploy", expansion_weight=0) == {"deploy": 1.0}


def test_function_words_leave_a_query_unless_nothing_else_is_left():
    assert set(query_terms("How do I run the tests?")) == {
        "run", "test", "방법", "실행", "테스", "스트"}  # "how" still expands to 방법
    assert set(query_terms("what is it", expansion_weight=0)) == {"what", "is", "it"}


@settings(max_examples=300, derandomize=True)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=60))
def test_the_ascii_fast_path_of_loose_key_gives_the_words_the_pattern_finds(text: str):
    from osk.search.tokenize import _word, normalise

    assert loose_key(text) == " ".join(_word().findall(normalise(text)))
