"""Rounds the person keeps out of recall (`osk exclude`, `osk include`): an excluded round, or
every round of an excluded conversation, is found by neither search nor per-prompt recall, not
even by its words through a neighbour, on this device or on another after sync; included again,
it is found again; a bad target is refused and records nothing; only a person at a terminal
decides."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from authority_support import FakeTerminal, osk
from hookkit import make_project, payload, run_hook
from recallkit import rounds_in

from osk.capture import exclusions
from osk.engine.core import Engine
from osk.errors import ExclusionError
from osk.hooks.recall import per_prompt
from osk.search.rounds import MARKER, RoundIndex
from osk.store.locks import file_lock
from osk.store.vault import Vault
from osk.verbs import exclusion

FILLER = ["we renamed the billing module", "the linter wants shorter lines", "lunch at noon",
          "the staging box reboots nightly", "merge the docs branch first",
          "coverage dropped on the parser", "the release notes need a date"]
ZEPPELIN = "_raw/shop/talk#Round 8"  # "the zeppelin timetable moved to fridays"
QUESTION = "zeppelin timetable?"


@pytest.fixture
def shop(vault: Vault, tmp_path: Path) -> Path:
    """A project whose conversation ``talk`` holds eight rounds, the eighth about a zeppelin,
    and whose conversation ``other`` holds one about a walrus."""
    project = make_project(tmp_path / "shop")
    engine = Engine.open(vault, cwd=project)
    for user in [*FILLER, "the zeppelin timetable moved to fridays"]:
        engine.append_raw("talk", user=user, assistant="Noted.")
    engine.append_raw("talk", user="and the ferry?", assistant="It sails at noon.")
    engine.append_raw("other", user="the walrus exhibit reopens in June", assistant="Noted.")
    return project


@pytest.fixture
def person(monkeypatch: pytest.MonkeyPatch) -> None:
    """A person at a terminal (the guard itself: the pipe tests below and test_authority.py)."""
    monkeypatch.setattr(sys, "stdin", FakeTerminal())


def searched(vault: Vault, project: Path, query: str, kind: str = "all") -> list[str]:
    return [hit.id for hit in Engine.open(vault, cwd=project).search(query, k=10, kind=kind).hits
            if MARKER in hit.markers]


def recalled(vault: Vault, prompt: str) -> list[str]:
    return [hit.id for hit in per_prompt.rounds_recalled(vault, "shop", prompt, {}, None)]


def prompt_hook(project: Path, prompt: str, tmp_path: Path) -> str:
    """What the real prompt-submit hook injects, in a later session of the project."""
    data = json.loads(payload("claude", "prompt_submit", transcript=tmp_path / "t.jsonl",
                              cwd=project, prompt_id="p-1", prompt=prompt))
    data["session_id"] = "a-later-session"
    done = run_hook("prompt-submit", "claude", json.dumps(data).encode(), cwd=project)
    assert done.returncode == 0 and "failed" not in done.stderr, done.stderr
    return json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"] \
        if done.stdout else ""


def test_an_excluded_round_is_found_by_neither_search_nor_recall_until_included(
        vault: Vault, shop: Path, tmp_path: Path, person: None):
    assert searched(vault, shop, "zeppelin timetable")[0] == ZEPPELIN
    assert recalled(vault, QUESTION)[0] == ZEPPELIN
    assert ZEPPELIN in rounds_in(prompt_hook(shop, QUESTION, tmp_path))

    done = exclusion.exclude(vault, f"[[{ZEPPELIN}]]", reason="a private trip")
    assert done.name == ZEPPELIN
    # nothing is found by its words: not the round, nor its neighbours through their context
    for kind in ("all", "rounds"):
        assert searched(vault, shop, "zeppelin timetable", kind) == []
    assert recalled(vault, QUESTION) == []
    assert "zeppelin" not in prompt_hook(shop, QUESTION, tmp_path)
    # its neighbours are still found by their own words; the record is unchanged
    assert searched(vault, shop, "ferry sails")[0] == "_raw/shop/talk#Round 9"
    assert "zeppelin timetable" in (vault.raw_dir / "shop" / "talk.md").read_text("utf-8")
    [listed] = exclusions.current(vault)
    assert (listed.target, listed.reason) == (ZEPPELIN, "a private trip")

    exclusion.include(vault, ZEPPELIN)
    assert exclusions.current(vault) == ()
    assert searched(vault, shop, "zeppelin timetable")[0] == ZEPPELIN
    assert recalled(vault, QUESTION)[0] == ZEPPELIN


def test_an_excluded_conversation_keeps_every_round_out_even_those_captured_later(
        vault: Vault, shop: Path, person: None):
    exclusion.exclude(vault, "_raw/shop/talk")
    assert searched(vault, shop, "zeppelin timetable") == []
    assert searched(vault, shop, "ferry") == []
    assert searched(vault, shop, "walrus exhibit") == ["_raw/shop/other#Round 1"]
    Engine.open(vault, cwd=shop).append_raw("talk", user="the zeppelin hangar is full",
                                            assistant="Noted.")
    assert searched(vault, shop, "zeppelin hangar") == []

    before = vault.ledger_path(exclusions.LEDGER).read_bytes()
    with pytest.raises(ExclusionError, match="already excluded with its whole conversation"):
        exclusion.exclude(vault, ZEPPELIN)
    with pytest.raises(ExclusionError, match=r"`osk include _raw/shop/talk` takes the conv"):
        exclusion.include(vault, ZEPPELIN)
    assert vault.ledger_path(exclusions.LEDGER).read_bytes() == before  # refused: nothing

    exclusion.include(vault, "_raw/shop/talk.md")
    assert searched(vault, shop, "zeppelin hangar")[0] == "_raw/shop/talk#Round 10"
    assert searched(vault, shop, "zeppelin timetable")[0] == ZEPPELIN


@pytest.mark.parametrize(("target", "says"), [
    ("_raw/shop/nowhere#Round 1", "no raw record _raw/shop/nowhere.md"),
    ("_raw/shop/talk#Round 99", "has no round 99"),
    ("_raw/shop/talk#Rnd 1", "is malformed"),
    ("_raw/shop", "is malformed"),
    ("Release process", "is not a raw round or conversation"),
])
def test_a_target_that_is_no_round_of_this_vault_is_refused_and_nothing_is_recorded(
        vault: Vault, shop: Path, person: None, target: str, says: str):
    with pytest.raises(ExclusionError, match=says):
        exclusion.exclude(vault, target)
    with pytest.raises(ExclusionError):
        exclusion.include(vault, target)
    assert not vault.ledger_path(exclusions.LEDGER).exists()


def test_excluding_twice_or_including_what_is_not_excluded_is_refused(
        vault: Vault, shop: Path, person: None):
    with pytest.raises(ExclusionError, match="is not excluded"):
        exclusion.include(vault, ZEPPELIN)
    assert not vault.ledger_path(exclusions.LEDGER).exists()
    exclusion.exclude(vault, ZEPPELIN)
    before = vault.ledger_path(exclusions.LEDGER).read_bytes()
    with pytest.raises(ExclusionError, match="is already excluded; nothing recorded"):
        exclusion.exclude(vault, ZEPPELIN)
    assert vault.ledger_path(exclusions.LEDGER).read_bytes() == before


def test_a_query_that_cannot_refresh_the_index_still_leaves_an_excluded_round_out(
        vault: Vault, shop: Path, person: None):
    """Recall ranks what the index holds when another process is indexing (the lock is
    held): an exclusion made meanwhile is applied by name, and no neighbour is found by the
    excluded round's words."""
    index = RoundIndex(vault)
    index.refresh()
    with file_lock(index.path.with_name("rounds.lock")):
        exclusion.exclude(vault, ZEPPELIN)  # recorded; the index could not be brought in step
        assert recalled(vault, QUESTION) == []
        assert index.search("zeppelin timetable", k=10, visible=lambda key: True,
                            refresh=False) == []
    assert index.refresh() == 1  # then the next refresh drops the round from the index
    assert index.search("zeppelin", k=10, visible=lambda key: True, context=0.0) == []


def test_an_exclusion_synced_from_another_device_is_honoured_there(tmp_path: Path,
                                                                   person: None):
    from sync_support import make_devices

    from osk.sync.cycle import sync_once

    _, (first, second) = make_devices(tmp_path, 2)
    project = make_project(tmp_path / "shop")
    Engine.open(first, cwd=project).append_raw("talk", user="the zeppelin timetable moved",
                                               assistant="Noted.")
    sync_once(first)
    sync_once(second)
    assert searched(second, project, "zeppelin timetable") == ["_raw/shop/talk#Round 1"]
    exclusion.exclude(first, "_raw/shop/talk#Round 1")
    sync_once(first)
    sync_once(second)  # lands the exclusion beside the index second built before
    assert searched(second, project, "zeppelin timetable") == []


def test_the_verbs_run_at_a_real_terminal_and_osk_search_honours_them(vault: Vault,
                                                                      shop: Path):
    result = osk(vault, "exclude", ZEPPELIN, "--reason", "private", tty=True)
    assert result.code == 0, result.err
    assert result.out.startswith(f"Excluded round {ZEPPELIN} from search and recall; "
                                 f"recorded in _ledger/exclusions.jsonl.")
    listing = osk(vault, "exclusions")
    assert listing.out.startswith(f"{ZEPPELIN}  ") and "reason: private" in listing.out
    found = osk(vault, "search", "zeppelin timetable", "--scope", "shop", "--json")
    assert found.code == 0 and ZEPPELIN not in found.out, found.out
    result = osk(vault, "include", ZEPPELIN, tty=True)
    assert result.code == 0 and result.out == f"Included {ZEPPELIN} again: search and " \
                                              f"recall find it.\n", result.err
    found = osk(vault, "search", "zeppelin timetable", "--scope", "shop", "--json")
    assert ZEPPELIN in found.out, found.out
    assert osk(vault, "exclusions").out == "Nothing is excluded.\n"


def test_read_raw_still_reads_an_excluded_round_and_says_it_is_excluded(
        vault: Vault, shop: Path, person: None):
    engine = Engine.open(vault, cwd=shop)
    assert engine.read_raw(ZEPPELIN).excluded == ()
    exclusion.exclude(vault, ZEPPELIN)
    found = engine.read_raw(ZEPPELIN)
    assert "zeppelin timetable moved to fridays" in found.text and found.excluded == (8,)
    assert engine.read_raw("_raw/shop/talk", rounds=[7, 8, 9]).excluded == (8,)
    exclusion.exclude(vault, "_raw/shop/talk")
    assert engine.read_raw("_raw/shop/talk", rounds=[1, 2]).excluded == (1, 2)
    assert engine.read_raw("_raw/shop/other#Round 1").excluded == ()
