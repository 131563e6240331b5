"""Who said a round's words (``osk.search.speakers``): a prompt naming one speaker of a
transcript counts only that speaker's lines."""

from __future__ import annotations

from osk.search.expand import query_terms
from osk.search.speakers import names_in, turns
from osk.search.speakers import unsaid as unsaid_in
from osk.search.tokenize import tokenize_prose


def unsaid(text: str, prompt: str) -> frozenset[str]:
    """``speakers.unsaid`` as the hook asks it: the prompt's terms (stop words gone, a round's
    forms) and the names it writes."""
    return unsaid_in(text, query_terms(prompt, prose=True), names_in(prompt))


CALL = ("Standup notes. Alice: I fixed the flaky cache test. Bob: Did you fix the deploy "
        "too? Alice: Not yet. Bob: I rotated the signing keys.")


def test_a_transcript_is_cut_at_its_speakers_labels():
    assert [who for who, _ in turns(CALL)] == ["", "Alice", "Bob", "Alice", "Bob"]
    assert turns("Alice: hi")[0] == ("Alice", " hi")
    assert turns("no labels here: none")[0][0] == ""  # a lower-case word is no speaker


def test_the_words_another_speaker_said_do_not_count_for_the_one_named():
    assert unsaid(CALL, "What did Alice rotate?") == frozenset(tokenize_prose("rotate"))
    assert unsaid(CALL, "What did Bob rotate?") == frozenset()
    # Bob only asked whether the deploy was fixed: asking is not saying; Alice said "fixed"
    assert unsaid(CALL, "Did Bob fix the deploy?") == frozenset(tokenize_prose("fix"))
    assert unsaid(CALL, "Which cache test did Bob fix?") >= frozenset(
        tokenize_prose("cache test"))


def test_a_round_is_left_as_it_is_unless_one_of_its_speakers_is_named_alone():
    assert unsaid(CALL, "Who rotated the signing keys?") == frozenset()
    assert unsaid(CALL, "Did Alice and Bob rotate the keys?") == frozenset()
    assert unsaid("Alice: I rotated the keys.", "Did Alice rotate keys?") == frozenset()
    assert unsaid("the cache: rotated keys", "Did Carol rotate keys?") == frozenset()


def test_a_sentence_addressed_to_someone_speaks_of_them():
    thanks = "Alice: Thanks, you rotated the signing keys! Bob: No problem."
    assert unsaid(thanks, "When did Bob rotate the signing keys?") == frozenset()
    praise = "Bob: Your key rotation went well. Alice: I rotated the signing keys."
    assert unsaid(praise, "Did Bob rotate the signing keys?") >= frozenset(
        tokenize_prose("rotated"))


def test_a_label_is_named_only_where_the_prompt_writes_it_as_a_name():
    log = "Error: the build failed on the cache step. Note: the cache volume was full."
    assert unsaid(log, "why did the error mention the cache volume?") == frozenset()
    assert unsaid(log, "Did Error say the volume was full?") >= frozenset(
        tokenize_prose("volume full"))
