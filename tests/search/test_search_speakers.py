"""Who said a round's words (``osk.search.speakers``): a prompt naming one speaker of a
transcript counts only that speaker's lines."""

from __future__ import annotations

from osk.search.expand import query_terms
from osk.search.speakers import turns, unsaid
from osk.search.tokenize import tokenize_prose


def asked(prompt: str) -> set[str]:
    """The prompt's terms as the hook hands them over (stop words gone, a round's forms)."""
    return set(query_terms(prompt, prose=True))


CALL = ("Standup notes. Alice: I fixed the flaky cache test. Bob: Did you fix the deploy "
        "too? Alice: Not yet. Bob: I rotated the signing keys.")


def test_a_transcript_is_cut_at_its_speakers_labels():
    assert [who for who, _ in turns(CALL)] == ["", "Alice", "Bob", "Alice", "Bob"]
    assert turns("Alice: hi")[0] == ("Alice", " hi")
    assert turns("no labels here: none")[0][0] == ""  # a lower-case word is no speaker


def test_the_words_another_speaker_said_do_not_count_for_the_one_named():
    assert unsaid(CALL, asked("What did Alice rotate?")) == frozenset(tokenize_prose("rotate"))
    assert unsaid(CALL, asked("What did Bob rotate?")) == frozenset()
    # Bob only asked whether the deploy was fixed: asking is not saying; Alice said "fixed"
    assert unsaid(CALL, asked("Did Bob fix the deploy?")) == frozenset(tokenize_prose("fix"))
    assert unsaid(CALL, asked("Which cache test did Bob fix?")) >= frozenset(
        tokenize_prose("cache test"))


def test_a_round_is_left_as_it_is_unless_one_of_its_speakers_is_named_alone():
    assert unsaid(CALL, asked("Who rotated the signing keys?")) == frozenset()
    assert unsaid(CALL, asked("Did Alice and Bob rotate the keys?")) == frozenset()
    assert unsaid("Alice: I rotated the keys.", asked("Did Alice rotate keys?")) == frozenset()
    assert unsaid("the cache: rotated keys", asked("Did Carol rotate keys?")) == frozenset()


def test_a_sentence_addressed_to_someone_speaks_of_them():
    thanks = "Alice: Thanks, you rotated the signing keys! Bob: No problem."
    assert unsaid(thanks, asked("When did Bob rotate the signing keys?")) == frozenset()
    praise = "Bob: Your key rotation went well. Alice: I rotated the signing keys."
    assert unsaid(praise, asked("Did Bob rotate the signing keys?")) >= frozenset(
        tokenize_prose("rotated"))
