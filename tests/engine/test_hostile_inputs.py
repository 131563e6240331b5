"""Inputs a careless or hostile caller sends through the engine: each gets a named refusal
(never an internal error, never a slow path), and nothing is written."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import writekit
from writekit import create, make_repo, snapshot

from osk.calls.request import NewNode, NodeEdit
from osk.capture.raw import record_name
from osk.engine.core import Engine
from osk.errors import HubMissing, LimitError, TitleError, ValidityError
from osk.store.ids import MAX_IDENTIFIER_CHARS
from osk.store.vault import Vault

repo, eng, hub = writekit.repo, writekit.eng, writekit.hub  # shared fixtures


def _refused(vault: Vault, error: type[Exception], call) -> Exception:
    before = snapshot(vault)
    with pytest.raises(error) as caught:
        call()
    assert snapshot(vault) == before, "a refused call changed the vault"
    return caught.value


# -- validity times (issue 16 item 6b) --------------------------------------------------------
@pytest.mark.parametrize(("name", "value"), [
    ("valid_from", "tomorrow"),
    ("valid_to", "2026-13-45"),
    ("valid_to", "2026-13-45T10:00+00:00"),  # the right shape, but no thirteenth month
    ("valid_from", "2026-11-29T18:02"),  # no offset: never guessed
])
def test_an_unparsable_validity_time_is_refused_by_name(eng: Engine, vault: Vault, hub: str,
                                                        name: str, value: str):
    error = _refused(vault, ValidityError, lambda: eng.create_node(
        NewNode("Expiry", "When tokens expire", "Tokens expire.\n", space="Scope", cluster="auth",
                drafter="test-model", **{name: value})))
    assert name in str(error) and repr(value) in str(error)
    assert error.rule == "validity-time"


def test_an_unparsable_validity_time_is_refused_on_update_too(eng: Engine, vault: Vault,
                                                              hub: str):
    create(eng, "Expiry")
    error = _refused(vault, ValidityError,
                     lambda: eng.update_node("Expiry", NodeEdit(valid_to="next tuesday")))
    assert "valid_to 'next tuesday' is not a time" in str(error)


# -- titles (item 6d) ---------------------------------------------------------------------------
@pytest.mark.parametrize("title", ["\u200b", "\u200b\u200d", "\u2060", "\u0301", "a\u202eb",
                                   "\u202eevil\u202c", "left\u2066right\u2069", "x\u200f"])
def test_titles_that_print_as_nothing_or_spoof_direction_are_refused(eng: Engine, vault: Vault,
                                                                     hub: str, title: str):
    error = _refused(vault, TitleError, lambda: create(eng, title))
    assert "prints as nothing" in str(error) or "bidirectional control" in str(error)


def test_a_cluster_folder_named_invisibly_is_refused_like_a_title(eng: Engine, vault: Vault):
    _refused(vault, Exception, lambda: eng.create_node(
        NewNode("\u200b", "hub", "Hub.\n", space="Scope", cluster="\u200b", drafter="test-model")))


def test_visible_unicode_titles_are_still_accepted(eng: Engine, hub: str):
    for title in ("토큰 만료", "café", "naïve résumé", "עברית", "مرحبا"):  # RTL text itself is fine
        assert create(eng, title).title == title


# -- identifier lengths (item 6c) ---------------------------------------------------------------
def test_an_overlong_conversation_id_is_refused_quickly(eng: Engine, vault: Vault):
    started = time.process_time()
    error = _refused(vault, LimitError,
                     lambda: eng.append_raw("c" * 300_000, user="hi", assistant="hello"))
    assert time.process_time() - started < 1.0  # was 3.6 s: the cap is checked before any work
    assert "300,000 characters" in str(error) and f"{MAX_IDENTIFIER_CHARS:,}" in str(error)


@pytest.mark.parametrize("field", ["completion", "host"])
def test_an_overlong_completion_or_host_is_refused(eng: Engine, vault: Vault, field: str):
    error = _refused(vault, LimitError, lambda: eng.append_raw(
        "talk", user="hi", assistant="hello", **{field: "x" * (MAX_IDENTIFIER_CHARS + 1)}))
    assert field in str(error)


def test_overlong_node_references_and_coordinates_are_refused(eng: Engine, vault: Vault,
                                                              hub: str):
    long = "x" * (MAX_IDENTIFIER_CHARS + 1)
    for call in (lambda: eng.read_node(long), lambda: eng.read_raw(long),
                 lambda: eng.update_node(long, NodeEdit(summary="s")),
                 lambda: create(eng, "Cites", derived_from=(f"[[{long}]]",))):
        _refused(vault, LimitError, call)


def test_an_identifier_at_the_cap_still_works(eng: Engine):
    result = eng.append_raw("c" * MAX_IDENTIFIER_CHARS, user="hi", assistant="hello")
    assert result.number == 1
    assert eng.read_raw(result.coordinate).text


def test_long_names_keep_the_record_name_they_always_had():
    # A record's file name must never change for an id that already has one (values from the
    # character-by-character shortening this replaced).
    assert record_name("é" * 200) == "é" * 55 + "-df20b2aa"
    assert record_name("x" * 130 + "!") == "x" * 111 + "-6d726c9c"
    assert record_name("ab.." * 60 + "z") == "ab.." * 27 + "ab-71c2985c"
    assert record_name("한국어 대화 " * 30) == "한국어-대화-" * 6 + "한국어-3f65c751"


# -- read_node paging (item 6e) ---------------------------------------------------------------
def test_the_replacement_hash_comes_once_every_page_of_a_long_body_was_read(eng: Engine,
                                                                           hub: str):
    body = "".join(f"line {i:05d} of a long node\n" for i in range(400))  # ~10,400 characters
    created = create(eng, "Long", body=body)
    first = eng.read_node("Long")
    assert not first.complete and first.hash is None and first.next_start is not None
    pages = [first]
    while pages[-1].next_start is not None:
        pages.append(eng.read_node("Long", start=pages[-1].next_start))
    assert all(p.hash is None for p in pages[:-1])
    assert pages[-1].hash == created.hash
    assert "".join(p.text for p in pages) == body
    replaced = eng.update_node("Long", NodeEdit(body="short now\n", expect_hash=pages[-1].hash))
    assert replaced.action == "updated"


def test_pages_of_an_older_version_do_not_earn_the_current_hash(eng: Engine, hub: str):
    body = "".join(f"line {i:05d} of a long node\n" for i in range(400))
    create(eng, "Long", body=body)
    first = eng.read_node("Long")
    eng.update_node("Long", NodeEdit(old_text="line 00399", new_text="line 99999"))
    rest = eng.read_node("Long", start=first.next_start)
    while rest.next_start is not None:
        assert rest.hash is None
        rest = eng.read_node("Long", start=rest.next_start)
    assert rest.hash is None, "the first page was of the version before the edit"
    again = eng.read_node("Long")
    assert again.hash is not None  # now every page of the current version has been read


# -- taken titles in hidden scopes (item 6f) ----------------------------------------------------
def test_a_title_taken_in_a_hidden_scope_is_refused_without_saying_where(
        eng: Engine, vault: Vault, hub: str, tmp_path: Path):
    other = Engine.open(vault, cwd=make_repo(tmp_path / "work" / "secretproj"))
    other.create_node(NewNode("plans", "Plans", "Plans.\n", space="Scope", cluster="plans",
                              drafter="test-model"))
    other.create_node(NewNode("Acquisition target", "Who we buy", "Them.\n", space="Scope",
                              cluster="plans", drafter="test-model"))
    error = _refused(vault, TitleError, lambda: create(eng, "Acquisition target"))
    assert "secretproj" not in str(error) and "plans" not in str(error)
    assert "is taken;" in str(error) and "scope" not in str(error).split(";")[0]
    assert error.facts.get("paths") == []


def test_a_hub_title_taken_in_a_hidden_scope_is_refused_without_saying_where(
        eng: Engine, vault: Vault, hub: str, tmp_path: Path):
    other = Engine.open(vault, cwd=make_repo(tmp_path / "work" / "secretproj"))
    other.create_node(NewNode("ahub", "A hub", "Hub.\n", space="Scope", cluster="ahub",
                              drafter="test-model"))
    error = _refused(vault, HubMissing, lambda: eng.create_node(NewNode(
        "Inside", "A node in a cluster whose hub title is taken", "Body.\n", space="Scope",
        cluster="ahub", drafter="test-model")))
    assert "secretproj" not in str(error) and "ahub.md" not in str(error)
    assert "'ahub' is already taken, so this cluster needs another folder name" in str(error)


def test_a_hub_title_taken_in_a_visible_place_names_the_holder(eng: Engine, vault: Vault,
                                                               hub: str):
    eng.create_node(NewNode("bhub", "A shared hub", "Hub.\n", space="Domain", cluster="bhub",
                            drafter="test-model"))
    error = _refused(vault, HubMissing, lambda: eng.create_node(NewNode(
        "Inside", "A node in a cluster whose hub title is taken", "Body.\n", space="Scope",
        cluster="bhub", drafter="test-model")))
    assert "already used by Domain/bhub/bhub.md" in str(error)


def test_a_title_taken_in_a_visible_scope_still_names_the_node(eng: Engine, vault: Vault,
                                                              hub: str):
    create(eng, "Tokens")
    error = _refused(vault, TitleError, lambda: create(eng, "tokens"))
    assert "Scope/proj/auth/Tokens.md" in str(error)
