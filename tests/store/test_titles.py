"""Titles are file names: portable on Windows, macOS and Linux, unique after NFC + casefold."""

from __future__ import annotations

import unicodedata

import pytest

from osk.errors import TitleError
from osk.store.titles import check_portable, title_key


@pytest.mark.parametrize(
    ("title", "fragment"),
    [
        ("a/b", "'/'"),
        ("what?", "'?'"),
        ("x:y", "':'"),
        ("link [[x]]", "'['"),
        ("tab\there", "'\\t'"),
        ("ends with dot.", "ends with a dot"),
        (" padded", "whitespace"),
        ("padded ", "whitespace"),
        ("CON", "reserved"),
        ("lpt1.notes", "reserved"),
        (".hidden", "starts with a dot"),
        ("가" * 70, "bytes in UTF-8"),
        ("", "non-empty"),
    ],
)
def test_unportable_titles_are_refused_with_the_reason(title: str, fragment: str):
    with pytest.raises(TitleError) as caught:
        check_portable(title)
    assert fragment in str(caught.value)


def test_portable_titles_come_back_in_nfc():
    decomposed = unicodedata.normalize("NFD", "한국어 노트 café")
    assert check_portable(decomposed) == unicodedata.normalize("NFC", decomposed)
    assert check_portable("Release v2.1 (final)") == "Release v2.1 (final)"


def test_titles_that_differ_only_in_case_or_normal_form_share_one_key():
    assert title_key("Café Notes") == title_key(unicodedata.normalize("NFD", "CAFÉ notes"))
    assert title_key("Straße") == title_key("STRASSE")
    assert title_key("a") != title_key("b")
