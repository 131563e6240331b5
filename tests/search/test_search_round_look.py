"""The rounds' index in a process without a watch (a hook, a fresh `osk search`): it stats no
record file while the last look holds (``osk.search.round_look``), and still finds what every
osk writer of a record, a record created or replaced by hand, and a sync landing changed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hookkit import make_project

from osk.capture import raw
from osk.engine.core import Engine
from osk.search import round_look
from osk.search.rounds import RoundIndex
from osk.store import generation
from osk.store.vault import Vault
from osk.verbs import redaction

EVERYONE = {"k": 5, "visible": lambda key: True, "context": 0.0}


@pytest.fixture
def walks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that grows by one each time a round index stats every record file."""
    calls: list[int] = []
    real = RoundIndex._records_on_disk

    def counted(self: RoundIndex) -> dict[str, tuple[str, tuple[int, int, int]]]:
        calls.append(1)
        return real(self)

    monkeypatch.setattr(RoundIndex, "_records_on_disk", counted)
    return calls


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every change counts as settled at once (else a look within two seconds of a write
    re-stats the record, or is not kept: tested below with the real window)."""
    monkeypatch.setattr(round_look, "RACE_WINDOW_NS", 0)


def found(vault: Vault, query: str) -> list[str]:
    """What a new process's index (no watch) finds."""
    return [hit.coordinate for hit in RoundIndex(vault).search(query, **EVERYONE)]


def test_a_new_process_stats_no_record_while_the_last_look_holds_and_finds_every_append(
        vault, tmp_path, walks, settled, monkeypatch):
    shop = make_project(tmp_path / "shop")
    engine = Engine.open(vault, cwd=shop)
    engine.append_raw("talk", user="the zeppelin arrives", assistant="ok")
    assert found(vault, "zeppelin") == ["_raw/shop/talk#Round 1"] and walks == [1]
    walks.clear()
    assert found(vault, "zeppelin") == ["_raw/shop/talk#Round 1"] and walks == []
    # another process appends to the same record: no folder moves, the stamp does
    with monkeypatch.context() as other:  # its bump is not this process's own
        other.setattr(generation, "_own", {})
        Engine.open(vault, cwd=shop).append_raw("talk", user="a kestrel hovers", assistant="ok")
    assert found(vault, "kestrel") == ["_raw/shop/talk#Round 2"] and walks == [1]
    walks.clear()
    assert found(vault, "kestrel") == ["_raw/shop/talk#Round 2"] and walks == []
    Engine.open(vault, cwd=make_project(tmp_path / "yard")).append_raw(
        "chat", user="a heron waits", assistant="ok")  # a new project's folder
    assert found(vault, "heron") == ["_raw/yard/chat#Round 1"]
    walks.clear()
    redaction.drop_caches(vault)  # the index file gone: the look no longer holds
    assert found(vault, "heron") == ["_raw/yard/chat#Round 1"] and walks == [1]


def test_a_record_created_removed_or_replaced_by_hand_moves_its_folder(vault, tmp_path,
                                                                        walks, settled):
    """A `git pull` run by hand, an editor's save by rename, a file copied in or deleted:
    none bumps the stamp, each moves the folder the look recorded."""
    shop = make_project(tmp_path / "shop")
    engine = Engine.open(vault, cwd=shop)
    engine.append_raw("talk", user="the zeppelin arrives", assistant="ok")
    engine.append_raw("more", user="an osprey dives", assistant="ok")
    assert found(vault, "zeppelin") == ["_raw/shop/talk#Round 1"]
    stamp = generation.current(vault, generation.RECORDS)
    record = vault.raw_dir / "shop" / "talk.md"
    replaced = record.with_name("talk.md.new")
    replaced.write_bytes(record.read_bytes().replace(b"zeppelin", b"airships"))
    os.replace(replaced, record)
    walks.clear()
    assert found(vault, "zeppelin") == [] and found(vault, "airships") \
        == ["_raw/shop/talk#Round 1"] and walks == [1]
    (vault.raw_dir / "shop" / "copy.md").write_bytes(record.read_bytes())  # copied in
    assert sorted(found(vault, "airships")) == ["_raw/shop/copy#Round 1",
                                                "_raw/shop/talk#Round 1"]
    (vault.raw_dir / "shop" / "more.md").unlink()
    assert found(vault, "osprey") == []
    assert generation.current(vault, generation.RECORDS) == stamp  # none of it was osk's


def test_a_look_taken_within_the_race_window_is_not_trusted_blindly(vault, tmp_path, walks):
    """With the real window: a record changed just before the look is stat-ed again (an edit
    in place right after a capture is found), and a look taken while a folder had just changed
    is not kept at all (a file added in the same clock tick might not have moved it)."""
    shop = make_project(tmp_path / "shop")
    engine = Engine.open(vault, cwd=shop)
    for word in ("albatross", "buzzard"):
        engine.append_raw("talk", user=f"a {word} flew past", assistant="seen")
    look = vault.state("index", round_look.FILE)
    assert found(vault, "albatross") == ["_raw/shop/talk#Round 1"]
    assert not look.exists()  # the folder got the record a moment ago
    old = (os.stat(vault.raw_dir / "shop").st_mtime_ns - 3_000_000_000,) * 2
    os.utime(vault.raw_dir / "shop", ns=old)  # as if it had changed long ago
    os.utime(vault.raw_dir, ns=old)
    assert found(vault, "albatross") == ["_raw/shop/talk#Round 1"] and look.exists()
    walks.clear()
    assert found(vault, "albatross") == ["_raw/shop/talk#Round 1"] and walks == []
    record = vault.raw_dir / "shop" / "talk.md"
    record.write_bytes(record.read_bytes().replace(b"albatross", b"aardvarks"))  # in place
    assert found(vault, "albatross") == [] and walks == [1]
    assert found(vault, "aardvarks") == ["_raw/shop/talk#Round 1"]


def test_an_edit_in_place_after_the_record_settled_is_found_within_the_walk_period(
        vault, tmp_path, settled, monkeypatch):
    """What docs/search.md states: a record edited by hand in place (keeping the file) long
    after its last write moves neither the stamp nor a folder; a look whose walk is older than
    ``WALK_EVERY_NS`` is not trusted, so the edit is found then (the MCP server's watch sees
    it at once, tests/search/test_search_rounds.py), or sooner, when another process's write
    sends every process back to the records."""
    shop = make_project(tmp_path / "shop")
    engine = Engine.open(vault, cwd=shop)
    engine.append_raw("talk", user="a kestrel hovers", assistant="ok")
    assert found(vault, "kestrel") == ["_raw/shop/talk#Round 1"]
    record = vault.raw_dir / "shop" / "talk.md"
    record.write_bytes(record.read_bytes().replace(b"kestrel", b"merlins"))  # in place
    assert found(vault, "kestrel") == ["_raw/shop/talk#Round 1"]  # not seen yet
    monkeypatch.setattr(round_look, "WALK_EVERY_NS", -1)  # the period is over
    assert found(vault, "kestrel") == [] and found(vault, "merlins") == ["_raw/shop/talk#Round 1"]


def test_a_capture_killed_before_its_stamp_is_found_within_the_walk_period(
        vault, tmp_path, monkeypatch, settled, walks):
    shop = make_project(tmp_path / "shop")
    engine = Engine.open(vault, cwd=shop)
    engine.append_raw("talk", user="the zeppelin arrives", assistant="ok")
    engine.append_raw("more", user="an osprey dives", assistant="ok")
    assert found(vault, "zeppelin") == ["_raw/shop/talk#Round 1"]
    with monkeypatch.context() as killed:
        killed.setattr(raw, "written", lambda vault, rel: None)  # the bytes, never the stamp
        engine.append_raw("talk", user="a kestrel hovers", assistant="ok")
    assert found(vault, "kestrel") == []  # the look still holds: nothing told it
    engine.append_raw("more", user="a heron waits", assistant="ok")  # this process's own
    walks.clear()
    assert found(vault, "heron") == ["_raw/shop/more#Round 2"] and walks == []
    assert found(vault, "kestrel") == []  # only the record this process wrote was read
    monkeypatch.setattr(round_look, "WALK_EVERY_NS", -1)
    assert found(vault, "kestrel") == ["_raw/shop/talk#Round 2"] and walks == [1]


def test_every_osk_writer_of_a_record_moves_the_stamp(vault, tmp_path):
    shop = make_project(tmp_path / "shop")
    engine = Engine.open(vault, cwd=shop)
    seen = [generation.current(vault, generation.RECORDS)]
    engine.append_raw("talk", user="the token is zebra-crossing", assistant="ok")
    seen.append(generation.current(vault, generation.RECORDS))
    from osk.capture.raw_reframe import reframe_rounds

    assert reframe_rounds(vault, "shop", "talk", None, "zebra-crossing", "secret")
    seen.append(generation.current(vault, generation.RECORDS))
    assert len(set(seen)) == 3


def test_a_sync_landing_moves_the_stamp_and_its_rounds_are_found(tmp_path, walks, settled):
    from sync_support import make_devices

    from osk.sync import cycle as sync

    _remote, (a, b) = make_devices(tmp_path, 2)
    landed = raw.RoundInput(user="the zeppelin arrives", assistant="ok", host="test")
    raw.append_round(a, "repo-x", "conv-1", landed)
    sync.sync_once(a)
    sync.sync_once(b)
    assert found(b, "zeppelin") == ["_raw/repo-x/conv-1#Round 1"]
    raw.append_round(a, "repo-x", "conv-1", raw.RoundInput(user="a kestrel hovers",
                                                           assistant="ok", host="test"))
    sync.sync_once(a)
    before = generation.current(b, generation.RECORDS)
    sync.sync_once(b)  # lands the record appended on the other device
    assert generation.current(b, generation.RECORDS) != before
    walks.clear()
    assert found(b, "kestrel") == ["_raw/repo-x/conv-1#Round 2"] and walks == [1]


def test_a_look_of_another_format_or_damaged_is_not_read(vault, tmp_path, walks, settled):
    shop = make_project(tmp_path / "shop")
    Engine.open(vault, cwd=shop).append_raw("talk", user="the zeppelin arrives",
                                            assistant="ok")
    assert found(vault, "zeppelin") == ["_raw/shop/talk#Round 1"]
    look: Path = vault.state("index", round_look.FILE)
    whole = look.read_bytes()
    for text in (b"{", b"[]", whole.replace(b'"format":2', b'"format":1'),
                 whole.replace(b'"folders"', b'"held"'),
                 whole.replace(b'"records":1', b'"records":[]')):
        look.write_bytes(text)
        walks.clear()
        assert found(vault, "zeppelin") == ["_raw/shop/talk#Round 1"] and walks == [1]


def test_a_process_that_captured_reads_only_its_own_records_when_no_other_wrote(
        vault, tmp_path, walks, settled, monkeypatch):
    """The Stop hook after its capture: the stamp moved by this process's bumps alone, so its
    refresh reads the records it wrote and stats no other; another process's bump in between
    sends it back to every record, and what it appended is found."""
    shop = make_project(tmp_path / "shop")
    engine = Engine.open(vault, cwd=shop)
    engine.append_raw("talk", user="the zeppelin arrives", assistant="ok")
    engine.append_raw("more", user="an osprey dives", assistant="ok")
    assert found(vault, "zeppelin") == ["_raw/shop/talk#Round 1"]
    walks.clear()
    for word in ("kestrel", "buzzard"):
        engine.append_raw("talk", user=f"a {word} hovers", assistant="ok")
    assert RoundIndex(vault).refresh() == 1 and walks == []
    assert found(vault, "buzzard") == ["_raw/shop/talk#Round 3"] and walks == []
    with monkeypatch.context() as other:  # another process's capture: not this one's bump
        other.setattr(generation, "_own", {})
        engine.append_raw("more", user="a heron waits", assistant="ok")
    engine.append_raw("talk", user="a merlin stoops", assistant="ok")
    assert RoundIndex(vault).refresh() == 2 and walks == [1]
    assert found(vault, "heron") == ["_raw/shop/more#Round 2"]
    assert found(vault, "merlin") == ["_raw/shop/talk#Round 4"]


def test_captures_in_a_row_read_their_own_record_though_it_just_changed(vault, tmp_path, walks):
    """With the real window: the record a process appends to every turn is always within it;
    being this process's own, it is read again, not a reason to stat every record."""
    shop = make_project(tmp_path / "shop")
    engine = Engine.open(vault, cwd=shop)
    engine.append_raw("talk", user="the zeppelin arrives", assistant="ok")
    old = (os.stat(vault.raw_dir / "shop").st_mtime_ns - 3_000_000_000,) * 2
    os.utime(vault.raw_dir / "shop", ns=old)  # the folder settled long ago
    os.utime(vault.raw_dir, ns=old)
    assert found(vault, "zeppelin") == ["_raw/shop/talk#Round 1"]
    walks.clear()
    for number, word in enumerate(("kestrel", "buzzard", "merlin"), start=2):
        engine.append_raw("talk", user=f"a {word} hovers", assistant="ok")
        assert RoundIndex(vault).refresh() == 1
        assert found(vault, word) == [f"_raw/shop/talk#Round {number}"]
    assert walks == []
