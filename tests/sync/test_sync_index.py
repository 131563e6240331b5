"""What a sync lands reaches the stores a fresh process reads (``osk.verbs.syncing.caught_up``):
the next `osk search` or `osk read` after `osk sync` answers from them, as the engine would."""

from __future__ import annotations

import sqlite3
import threading
from contextlib import closing
from pathlib import Path

import pytest
from sync_support import append_raw, git, make_devices, write_node

from osk.engine.core import Engine
from osk.errors import OskError
from osk.reads import quick_read, quick_search
from osk.search import recallfile
from osk.store.locks import file_lock
from osk.store.vault import Vault
from osk.sync.cycle import sync_once
from osk.sync.cycle_state import SyncResult, index_owed, owe_index, settle_index
from osk.verbs import syncing

LANDED = quick_search.EDITS + 6  # more hand-made files than a fresh search reads on its own


def _hits(vault: Vault, cwd: Path, query: str) -> list[tuple[str, str]] | None:
    found = quick_search.search(vault.root, cwd, None, query, None)
    return None if found is None else [(hit.id, repr(hit.score)) for hit in found.hits]


def _engine_hits(vault: Vault, cwd: Path, query: str) -> list[tuple[str, str]]:
    found = Engine.open(vault, cwd=cwd).search(query)
    return [(hit.id, repr(hit.score)) for hit in found.hits]


@pytest.fixture
def devices(tmp_path: Path) -> tuple[Vault, Vault, Vault]:
    """Three devices of one remote; the last two each with a look recorded by an engine."""
    _remote, (first, second, third) = make_devices(tmp_path, 3)
    for device in (second, third):
        Engine.open(device, cwd=tmp_path).search("anything")
    return first, second, third


def test_a_fresh_search_after_a_sync_that_landed_many_nodes_answers_from_the_stores(
        devices, tmp_path):
    writer, caught, plain = devices
    for number in range(LANDED):
        write_node(writer, f"Domain/Fish/Lanternfish {number}.md",
                   f"Lanternfish number {number} glows{' brightly' * (number % 5)}.\n")
    sync_once(writer)
    result = syncing.once(caught)
    assert result.landed >= LANDED and not result.notices
    assert git(caught.root, "status", "--porcelain") == ""  # the catch-up claimed no name
    assert sync_once(plain).landed >= LANDED  # the cycle alone: nothing takes them in
    assert _hits(plain, tmp_path, "lanternfish glows") is None  # the engine would be opened
    hits = _hits(caught, tmp_path, "lanternfish glows")
    assert hits
    assert hits == _engine_hits(caught, tmp_path, "lanternfish glows")
    page = quick_read.read(caught.root, tmp_path, None, "Lanternfish 7")
    assert page is not None and "Lanternfish number 7 glows" in page.text


def test_a_sync_that_lands_only_raw_rounds_opens_no_engine(devices, monkeypatch, tmp_path):
    writer, caught, _plain = devices
    append_raw(writer, "proj", "talk", "round one")
    sync_once(writer)
    opened: list[Vault] = []
    monkeypatch.setattr(Engine, "catch_up", lambda self: opened.append(self.vault))
    result = syncing.once(caught)
    assert result.pulled == 1 and result.landed == 0 and opened == []
    write_node(writer, "Domain/Fish/Hatchetfish.md", "Silver sides.\n")
    sync_once(writer)
    assert syncing.once(caught).landed == 1 and opened == [caught]


def test_a_failed_catch_up_leaves_the_sync_done_and_says_so(devices, monkeypatch):
    writer, caught, _plain = devices

    def refuse(self: Engine) -> None:
        raise OskError("the index is locked by a test")

    monkeypatch.setattr(Engine, "catch_up", refuse)
    write_node(writer, "Domain/Fish/Viperfish.md", "Long teeth.\n")
    sync_once(writer)
    result = syncing.once(caught)
    assert caught.abs("Domain/Fish/Viperfish.md").exists()
    assert result.notices == ["the search index has not taken what landed yet (the index is "
                              "locked by a test); the next search takes it in"]
    assert "Note: the search index has not taken what landed yet" in result.line()
    opened: list[Vault] = []
    monkeypatch.setattr(Engine, "catch_up", lambda self: opened.append(self.vault))
    assert syncing.once(caught).pulled == 0 and opened == [caught]  # tried again, nothing new
    assert syncing.once(caught).pulled == 0 and opened == [caught]  # and then settled


def test_a_landing_whose_catch_up_never_ran_is_caught_up_by_the_next_sync(devices, tmp_path):
    writer, caught, _plain = devices
    for number in range(LANDED):
        write_node(writer, f"Domain/Fish/Dragonfish {number}.md",
                   f"Dragonfish number {number} hunts{' deep' * (number % 4)}.\n")
    sync_once(writer)
    assert sync_once(caught).landed >= LANDED  # the cycle alone: as if killed right after it
    assert _hits(caught, tmp_path, "dragonfish hunts") is None
    result = syncing.once(caught)
    assert result.pulled == 0 and result.landed == 0 and not result.notices
    hits = _hits(caught, tmp_path, "dragonfish hunts")
    assert hits and hits == _engine_hits(caught, tmp_path, "dragonfish hunts")
    assert git(caught.root, "status", "--porcelain") == ""


def _indexed(vault: Vault) -> set[str]:
    """The node paths the index on disk holds."""
    with closing(sqlite3.connect(recallfile.path_in(vault.state("index")))) as db:
        return {path for (path,) in db.execute("SELECT path FROM docs")}


def test_the_daemon_has_the_index_take_what_each_cycle_landed_in_a_process_of_its_own(
        devices, monkeypatch, tmp_path):
    writer, caught, _plain = devices
    write_node(writer, "Domain/Fish/Anglerfish.md", "A lure.\n")
    sync_once(writer)
    lines: list[str] = []

    def run_daemon() -> int:
        return syncing.daemon(caught, interval=60.0, poll=0.05, max_cycles=1, remote="origin",
                              stop=threading.Event(), report=lines.append)

    monkeypatch.setattr(Engine, "catch_up", lambda self: pytest.fail("caught up in process"))
    assert run_daemon() == 1 and "pulled 1 commit(s)" in lines[0] and "Note" not in lines[0]
    assert "Domain/Fish/Anglerfish.md" in _indexed(caught)  # the child's engine took it in
    refused = syncing._catch_up_apart(Vault(tmp_path / "gone"))  # the child: not a vault
    assert refused is not None and "is not an osk vault" in refused, refused
    assert not (tmp_path / "gone").exists()


def test_a_catch_up_process_that_cannot_start_is_told_not_raised(tmp_path, monkeypatch):
    def cannot(*args: object, **kwargs: object) -> None:
        raise OSError("no such interpreter")

    monkeypatch.setattr(syncing.subprocess, "run", cannot)
    owe_index(Vault(tmp_path))  # as a landing of two nodes leaves it
    result = SyncResult("origin", "main", landed=2)
    syncing.caught_up_apart(Vault(tmp_path), result)
    assert result.notices == ["the search index has not taken what landed yet (the catch-up "
                              "process did not start: no such interpreter); the next search "
                              "takes it in"]


def test_the_owed_note_is_settled_under_the_sync_lock(tmp_path):
    """A landing writes its token while it holds the sync lock: settling the note takes that
    lock too, so no token written between its read and its removal is removed. While a cycle
    holds the lock, the note stays for the catch-up after that cycle."""
    _remote, (vault,) = make_devices(tmp_path, 1)
    owe_index(vault)
    token = index_owed(vault)
    assert token is not None
    with file_lock(vault.lock_path("sync")):  # a cycle under way: it may land again
        settle_index(vault, token)
        assert index_owed(vault) == token
    settle_index(vault, token)
    assert index_owed(vault) is None
