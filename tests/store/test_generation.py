"""The vault generation makes reads exact for every osk writer, at one stat per read.

Every test here turns both once-a-second walks off (the engine's read refresh and the write
path's full refresh), so whatever a reader sees of another process's write it sees through the
generation alone. The stdio test of two real servers is in test_server_stdio.py.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import writekit
from authority_support import FakeTerminal
from sync_support import make_devices, write_node

from osk.authority import approvals, trust
from osk.calls.request import NewNode, NodeEdit
from osk.engine import core as engine_mod
from osk.engine.core import Engine
from osk.search import SearchIndex
from osk.store import freshness as freshness_mod
from osk.store import generation
from osk.store.freshness import Freshness
from osk.store.vault import Vault
from osk.sync.cycle import sync_once

repo, eng, hub = writekit.repo, writekit.eng, writekit.hub  # shared fixtures
OSK = Path(__file__).resolve().parents[2] / "osk"


@pytest.fixture(autouse=True)
def no_walks(monkeypatch: pytest.MonkeyPatch) -> None:
    """No walk after the first: not the engine's, the write path's, or the search index's."""
    monkeypatch.setattr(engine_mod, "REFRESH_SECONDS", float("inf"))
    monkeypatch.setattr(freshness_mod, "FULL_REFRESH_SECONDS", float("inf"))
    made = SearchIndex.__init__

    def walks_once(self: SearchIndex, vault: Vault, **_: object) -> None:
        made(self, vault, refresh_interval=float("inf"))

    monkeypatch.setattr(SearchIndex, "__init__", walks_once)


@pytest.fixture
def second(vault: Vault, repo: Path) -> Engine:
    """Another session of the same project: another MCP server process would open this."""
    return Engine.open(vault, cwd=repo)


@pytest.fixture
def looks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per folder check a reader or writer runs."""
    calls: list[int] = []
    quick = Freshness.quick

    def counted(self: Freshness) -> object:
        calls.append(1)
        return quick(self)

    monkeypatch.setattr(Freshness, "quick", counted)
    return calls


def titles(engine: Engine, query: str) -> list[str]:
    return [hit.title for hit in engine.search(query, k=50).hits]


def test_another_sessions_create_update_and_move_are_read_at_once(
        eng: Engine, second: Engine, hub: str):
    assert titles(eng, "zeppelin") == []  # the index exists and has walked
    second.create_node(NewNode("Airship", "a zeppelin note", "Draft about zeppelins.\n",
                               space="scope", cluster="auth", drafter="test-model"))
    assert titles(eng, "zeppelin") == ["Airship"]
    second.update_node("Airship", NodeEdit(old_text="Draft", new_text="Final"))
    assert eng.read_node("Airship").text.startswith("Final about zeppelins.")
    second.create_node(NewNode("hangar", "the hangar hub", "Hub.\n", space="scope",
                               cluster="hangar",
                               drafter="test-model"))
    moved = second.move_nodes(["Airship"], space="scope", cluster="hangar")
    assert eng.read_node("Airship").path == moved.moved[0].after
    assert [h.path for h in eng.search("zeppelin").hits] == [moved.moved[0].after]


def test_a_read_with_no_write_since_looks_at_no_folder(eng: Engine, second: Engine, hub: str,
                                                       looks: list[int]):
    eng.search("authenticates")
    looks.clear()
    eng.search("authenticates")
    eng.read_node(hub)
    assert looks == []  # the generation stood still: one stat each
    second.create_node(NewNode("Airship", "a note", "Zeppelins.\n", space="scope", cluster="auth",
                               drafter="test-model"))
    looks.clear()
    assert titles(eng, "zeppelins") == ["Airship"]
    eng.search("zeppelins")
    assert looks == [1]  # one folder check for the one write, then none


def test_a_persons_verb_moves_the_generation(eng: Engine, vault: Vault, hub: str,
                                             monkeypatch: pytest.MonkeyPatch):
    eng.search("authenticates")
    before = generation.current(vault)
    monkeypatch.setattr(sys, "stdin", FakeTerminal())
    trust.confirm(vault, hub)
    assert generation.current(vault) != before
    assert "inferred" not in eng.search("authenticates").hits[0].markers


def test_an_approval_is_served_at_once(eng: Engine, second: Engine, vault: Vault, hub: str,
                                       monkeypatch: pytest.MonkeyPatch):
    """Approving changes what readers are served without changing any node file."""
    monkeypatch.setattr(sys, "stdin", FakeTerminal())
    rel = eng.read_node(hub).path
    approvals.protect(vault, rel)
    second.update_node(hub, NodeEdit(old_text="The auth cluster.", new_text="Zeppelin auth."))
    assert titles(eng, "zeppelin") == []  # the change waits for the person
    approvals.approve(vault, rel)
    assert titles(eng, "zeppelin") == [hub]
    assert eng.read_node(hub).text.startswith("Zeppelin auth.")


def test_a_sync_landing_is_read_at_once(tmp_path: Path):
    _remote, (first, other) = make_devices(tmp_path, 2)
    reader = Engine.open(other, cwd=tmp_path)
    assert [h.title for h in reader.search("zeppelin").hits] == []
    write_node(first, "Domain/air/air.md", "All about the zeppelin.\n")
    sync_once(first)
    sync_once(other)
    assert [h.title for h in reader.search("zeppelin").hits] == ["air"]


def test_nothing_takes_the_mutation_lock_but_through_the_generation():
    """A writer that took the lock directly would leave other processes' reads behind."""
    taking = re.compile(r"file_lock\([^)]*mutation_lock_path")
    for path in sorted(OSK.rglob("*.py")):
        if path.name != "mutation.py":
            assert not taking.search(path.read_text(encoding="utf-8")), path


def test_the_stamp_moves_on_every_bump_and_after_being_deleted(vault: Vault):
    seen = [generation.current(vault)]
    for _ in range(3):
        generation.bump(vault)
        seen.append(generation.current(vault))
    assert len(set(seen)) == 4 and [s[1] for s in seen] == [0, 1, 2, 3]  # size counts bumps
    vault.state(generation.FILE).unlink()
    generation.bump(vault)
    assert generation.current(vault) != seen[-1]
