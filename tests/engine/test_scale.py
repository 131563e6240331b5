"""Costs that must not grow with the vault stay exact: the recheck candidates a write
recomputes come from the catalog's change log (what changed), never a pass over every entry,
and still equal a computation from scratch.

The randomized test uses a fixed seed; ``OSK_SCALE_TRIALS`` runs it longer by hand.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
import writekit
from writekit import make_repo

from osk.authority import audit
from osk.calls.request import NewNode, NodeEdit
from osk.engine import core as engine_mod
from osk.engine.core import Engine
from osk.errors import OskError
from osk.provenance import pairs as pairs_mod
from osk.provenance.rechecks import Rechecks
from osk.search import index as index_mod
from osk.search import recallfile
from osk.store import catalog as catalog_mod
from osk.store import freshness as freshness_mod
from osk.store.catalog import Catalog, Changes
from osk.store.fsutil import append_durably, atomic_write, synced_at_exit
from osk.store.locks import file_lock
from osk.store.vault import Vault
from osk.verbs import importer, validate
from osk.verbs.importer import Importer, read_lines

repo, eng, hub = writekit.repo, writekit.eng, writekit.hub  # shared fixtures

SEED = 20261202
TRIALS = int(os.environ.get("OSK_SCALE_TRIALS", "40"))


class CountingEntries(dict):
    """A catalog's entries that count passes over every entry."""

    passes = 0

    def __iter__(self):
        CountingEntries.passes += 1
        return super().__iter__()

    def items(self):
        CountingEntries.passes += 1
        return super().items()

    def values(self):
        CountingEntries.passes += 1
        return super().values()


def test_the_candidates_after_a_write_never_pass_over_every_catalog_entry(
        eng: Engine, hub: str):
    for n in range(12):
        eng.create_node(NewNode(f"note {n}", "s", f"body {n}\n", space="Scope", cluster=hub,
                                drafter="m", derived_from=[f"[[note {n - 1}]]"] if n else []))
    eng.update_node("note 3", NodeEdit(old_text="body 3", new_text="body three"))
    before = eng.rechecks.candidates(eng.catalog)
    assert [c.citing_title for c in before] == ["note 4"]
    eng.update_node("note 7", NodeEdit(old_text="body 7", new_text="body seven"))
    eng.catalog.note_written(eng.catalog.get("note 9").path)
    eng.catalog.entries = CountingEntries(eng.catalog.entries)
    CountingEntries.passes = 0
    found = eng.rechecks.candidates(eng.catalog)  # what changed since the write's own pass
    assert CountingEntries.passes == 0
    assert [c.citing_title for c in found] == ["note 4", "note 8"]
    assert found == Rechecks(eng.vault).candidates()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the server's inotify watch")
def test_a_search_at_an_agents_pace_passes_over_no_entry_while_an_invalid_node_waits(
        vault: Vault, eng: Engine, hub: str, repo, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(engine_mod, "REFRESH_SECONDS", 0.0)  # every read makes the look
    monkeypatch.setattr(freshness_mod, "_racy_folder", lambda folder: False)  # looks vouch
    for n in range(6):
        eng.create_node(NewNode(f"note {n}", "s", f"body {n}\n", space="Scope", cluster=hub,
                                drafter="m"))
    folder = vault.abs(eng.catalog.get("note 0").path).parent
    (folder / "broken.md").write_text("no front matter here\n", encoding="utf-8")
    server = Engine.open(vault, cwd=repo, watch=True)  # as the MCP server opens it
    server.search("body")
    broken = f"{vault.rel(folder)}/broken.md"
    assert broken in server.catalog.entries and server._search_index().doc(broken) is None
    server.catalog.entries = CountingEntries(server.catalog.entries)
    CountingEntries.passes = 0
    for _ in range(3):  # what the look hands a fresh process (osk.reads.quick_search) is kept
        assert [hit.title for hit in server.search("body 3").hits][:1] == ["note 3"]
    assert CountingEntries.passes == 0
    held = json.loads((vault.state("index") / "look.json").read_text(encoding="utf-8"))
    assert list(held["others"]) == [broken]
    (folder / "broken.md").write_text("still no front matter, longer\n", encoding="utf-8")
    server.search("body")  # a changed entry: its stat taken again
    held = json.loads((vault.state("index") / "look.json").read_text(encoding="utf-8"))
    assert held["others"][broken] == list(server.catalog.entries[broken].stat)


def server_beside_a_look_on_file(vault: Vault, eng: Engine, hub: str, repo: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> tuple[Engine, Path, bytes]:
    """A watched engine (as the MCP server opens it) at an agent's pace, over three notes
    whose look another process recorded first: the server, the look's file and its bytes."""
    monkeypatch.setattr(engine_mod, "REFRESH_SECONDS", 0.0)  # every read makes the look
    monkeypatch.setattr(freshness_mod, "_racy_folder", lambda folder: False)  # looks vouch
    monkeypatch.setattr(index_mod, "RACE_WINDOW_NS", 0)
    for n in range(3):
        eng.create_node(NewNode(f"note {n}", "s", f"body {n}\n", space="Scope", cluster=hub,
                                drafter="m"))
    hour_ago = time.time() - 3600  # files older than any look: a look may vouch for them
    for rel in list(eng.catalog.entries):
        os.utime(vault.abs(rel), (hour_ago, hour_ago))
    Engine.open(vault, cwd=repo).search("body")  # another process records its look
    look = vault.state("index") / "look.json"
    recorded = look.read_bytes()
    server = Engine.open(vault, cwd=repo, watch=True)  # as the MCP server opens it
    server.search("body")
    return server, look, recorded


def test_a_server_at_an_agents_pace_reads_the_look_on_file_only_when_the_file_moved(
        vault: Vault, eng: Engine, hub: str, repo, monkeypatch: pytest.MonkeyPatch):
    """A server that finds the look it would record already on file (another process's)
    compares with it on every call at an agent's pace: it reads the file again only once it
    was replaced."""
    server, look, recorded = server_beside_a_look_on_file(vault, eng, hub, repo, monkeypatch)
    assert look.read_bytes() == recorded  # it saw the same: the look on file stands
    reads: list[int] = []
    real = recallfile.read_look
    monkeypatch.setattr(recallfile, "read_look",
                        lambda directory: reads.append(1) or real(directory))
    for _ in range(3):
        assert [hit.title for hit in server.search("body 1").hits][:1] == ["note 1"]
    assert reads == [] and look.read_bytes() == recorded
    atomic_write(look, recorded.decode("utf-8"))  # replaced by another process
    server.search("body 1")
    assert reads == [1]


def test_a_look_is_built_again_only_once_a_folder_was_listed_anew(
        vault: Vault, eng: Engine, hub: str, repo, monkeypatch: pytest.MonkeyPatch):
    """At an agent's pace every call hands the engine's look to the index; while no folder
    was listed anew (nor the generation moved) it is the look already built (its moment
    moved on), and a hand edit that lists a folder anew makes another."""
    monkeypatch.setattr(engine_mod, "REFRESH_SECONDS", 0.0)  # every read makes the look
    monkeypatch.setattr(freshness_mod, "_racy_folder", lambda folder: False)  # looks vouch
    for n in range(3):
        eng.create_node(NewNode(f"note {n}", "s", f"body {n}\n", space="Scope", cluster=hub,
                                drafter="m"))
    server = Engine.open(vault, cwd=repo, watch=True)  # as the MCP server opens it
    server.search("body")
    fresh = server._ctx.fresh
    first = fresh.look()
    assert first is not None
    for _ in range(3):
        assert [hit.title for hit in server.search("body 1").hits][:1] == ["note 1"]
    again = fresh.look()
    assert again is not None and again["folders"] is first["folders"]
    # the same look but for its moment: a watched look vouches from the last report it took
    assert {**again, "seen_ns": 0} == {**first, "seen_ns": 0}
    assert again["seen_ns"] > first["seen_ns"]
    note = vault.abs(server.catalog.get("note 0").path)
    (note.parent / "hand.md").write_text(note.read_text(encoding="utf-8").replace(
        "body 0", "hand body"), encoding="utf-8")
    server.search("hand")
    after = fresh.look()
    assert after is not None and after != first and after["folders"] is not first["folders"]


def test_a_server_at_an_agents_pace_compares_with_an_unchanged_look_on_file_once(
        vault: Vault, eng: Engine, hub: str, repo, monkeypatch: pytest.MonkeyPatch):
    """The comparison of the server's look with the one on file (every folder's stat) is made
    once while neither moved, and again once another process replaced the file: a look on
    file that saw something else is then replaced by the server's own."""
    server, look, recorded = server_beside_a_look_on_file(vault, eng, hub, repo, monkeypatch)
    file_seen = json.loads(recorded)["seen_ns"]  # the other process's moment, not the server's
    compared: list[int] = []  # the moment of each look compared
    real = index_mod._beside_seen
    monkeypatch.setattr(index_mod, "_beside_seen",
                        lambda seen: compared.append(seen["seen_ns"]) or real(seen))
    for _ in range(3):
        assert [hit.title for hit in server.search("body 1").hits][:1] == ["note 1"]
    assert look.read_bytes() == recorded  # the look on file stands
    # compared with the server's looks alone (at rest, none: its first call compared)
    assert file_seen not in compared
    other = json.loads(recorded)
    other["sweep"] += 1  # another process's look that saw something else
    atomic_write(look, json.dumps(other))
    server.search("body 1")
    assert file_seen in compared  # the replaced file is compared with again
    assert json.loads(look.read_bytes()) != other  # and the server's own look replaces it


@pytest.mark.parametrize("keep", [catalog_mod.CHANGE_LOG_KEEP, 3])
def test_incremental_candidates_equal_a_full_recomputation_after_random_catalog_changes(
        vault: Vault, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keep: int):
    # keep=3: the catalog's change log is cut short all the time, so the candidates must
    # notice they fell behind it and compare every entry instead.
    monkeypatch.setattr(catalog_mod, "CHANGE_LOG_KEEP", keep)
    monkeypatch.setattr(catalog_mod, "_RACE_WINDOW_NS", 0)
    monkeypatch.setattr(pairs_mod, "_RACE_NS", 0)
    rng = random.Random(SEED + keep)
    project = make_repo(tmp_path / "work" / "proj")
    one, two = Engine.open(vault, cwd=project), Engine.open(vault, cwd=project)
    one.create_node(NewNode("auth", "hub", "Hub.\n", space="Scope", cluster="auth", drafter="m"))
    one.create_node(NewNode("shared", "hub", "Hub.\n", space="Domain", cluster="shared",
                            drafter="m"))
    titles = ["auth"]
    for trial in range(TRIALS):
        engine = rng.choice([one, one, two])
        action = rng.choice(["create", "create", "update", "hand-edit", "hand-add", "delete",
                             "move", "correct"])
        try:
            _act(engine, vault, rng, action, trial, titles)
        except OskError:
            pass  # a refused write (cascade stop, a node moved away) changes nothing
        for session in (one, two):
            session.refresh()
            fresh = Rechecks(vault)
            assert session.rechecks.candidates(session.catalog) == fresh.candidates(), \
                f"after {action} (trial {trial}, log kept {keep})"
            assert session.rechecks.most_cited() == fresh.most_cited(), \
                f"most cited after {action} (trial {trial}, log kept {keep})"


def _act(engine: Engine, vault: Vault, rng: random.Random, action: str, trial: int,
         titles: list[str]) -> None:
    if action == "create":
        cites = rng.sample(titles, min(len(titles), rng.randint(0, 3)))
        engine.create_node(NewNode(f"t{trial}", "s", f"body {trial}\n", space="Scope",
                                   cluster="auth",
                                   drafter="m", derived_from=[f"[[{t}]]" for t in cites]))
        titles.append(f"t{trial}")
    elif action == "update":
        title = rng.choice(titles)
        engine.update_node(title, NodeEdit(body=f"new body {trial}\n",
                                    expect_hash=engine.read_node(title).hash))
    elif action == "hand-edit":
        path = vault.abs(engine.catalog.get(rng.choice(titles)).path)
        path.write_text(path.read_text(encoding="utf-8") + f"hand {trial}\n", encoding="utf-8")
    elif action == "hand-add" and len(titles) > 1:
        # a copy under a new title and id: a person's new node citing what the original cited
        node = engine.catalog.get(rng.choice(titles[1:]))
        text = node.text.replace(f"id: {node.id}", "id: " + _fresh_id(), 1)
        (vault.abs(node.path).parent / f"h{trial}.md").write_text(text, encoding="utf-8")
        titles.append(f"h{trial}")
    elif action == "delete" and len(titles) > 1:
        title = titles.pop(rng.randrange(1, len(titles)))
        vault.abs(engine.catalog.get(title).path).unlink()
    elif action == "move" and len(titles) > 1:
        title = rng.choice(titles[1:])
        engine.move_nodes([title], space="Domain", cluster="shared")
    elif action == "correct":  # read a changed source, then correct its citer
        found = engine.recheck().candidates
        for cand in [rng.choice(found)] if found else []:
            source, citing = cand.target_key.partition(":")[2], cand.citing_id
            if cand.target_key.startswith("node:") and engine.read_node(source):
                current = engine.read_node(citing).hash
                engine.update_node(citing, NodeEdit(body=f"fixed {trial}\n", expect_hash=current,
                                            recheck_of=[cand.id]))


def _fresh_id() -> str:
    from osk.store import ids

    return ids.uuid7()


def test_the_change_log_names_what_changed_since_a_mark_and_says_when_it_cannot(
        vault: Vault, eng: Engine, hub: str, monkeypatch: pytest.MonkeyPatch):
    catalog = eng.catalog
    mark = catalog.mark
    eng.create_node(NewNode("Tokens", "s", "Tokens expire.\n", space="Scope", cluster=hub,
                            drafter="m"))
    rel = catalog.get("Tokens").path
    assert rel in (catalog.changed_since(mark) or [])
    monkeypatch.setattr(catalog_mod, "CHANGE_LOG_KEEP", 2)
    later = catalog.mark
    for n in range(4):
        eng.create_node(NewNode(f"Extra {n}", "s", "x\n", space="Scope", cluster=hub, drafter="m"))
    assert catalog.changed_since(mark) is None  # the log no longer reaches back to it
    assert catalog.changed_since(later) is None or rel not in catalog.changed_since(later)
    assert Catalog(vault).changed_since(10**6) is None  # a mark from another catalog


# -- the bulk import -------------------------------------------------------------------------------
def _lines(*rows: dict[str, object]) -> list[str]:
    return [json.dumps(row) for row in rows]


def _node(title: str, **extra: object) -> dict[str, object]:
    return {"title": title, "summary": "s", "body": f"About {title}.", **extra}


def test_the_bulk_import_keeps_every_rule_and_audits_every_node_across_batches(
        vault: Vault, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(importer, "BATCH_LINES", 2)  # many batches, each its own lock hold
    work = make_repo(tmp_path / "work" / "proj")
    other = tmp_path / "other.py"
    other.write_text(OTHER_WRITER, encoding="utf-8")
    loader = Importer(vault, cwd=work)
    ended = loader._end_batch
    batches = []

    def end_and_let_another_process_write() -> None:
        was_open = loader._batch is not None
        ended()
        if was_open and len(batches) == 1:  # between the second and third batch
            done = subprocess.run([sys.executable, str(other), str(vault.root), str(work)],
                                  capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stderr
        batches.append(was_open)

    monkeypatch.setattr(loader, "_end_batch", end_and_let_another_process_write)
    lines, _, _ = read_lines(_lines(
        _node("Alpha one", space="scope", scope="alpha"),
        _node("Beta one", space="scope", scope="beta", derived_from=["Later one"]),
        _node("Domain one", space="domain", derived_from=["Later one"]),  # cites line 7
        _node("Alpha one", space="scope", scope="alpha"),  # a taken title
        _node("Taken by another", space="domain"),  # the other process took it first
        _node("Bad/title", space="person"),
        _node("Later one", space="domain"),
        _node("Orphan", space="domain", derived_from=["Nowhere"]),
        _node("Beta two", space="scope", scope="beta", derived_from=["Alpha one"]),  # isolated
    ))
    report = loader.run(lines)
    assert sorted(t for _, t, _ in report.created) == [
        "Alpha one", "Beta one", "Domain one", "Later one"]
    reasons = {r.number: r.reason for r in report.rejected}
    assert sorted(reasons) == [4, 5, 6, 8, 9]
    assert "is taken" in reasons[4] and "is taken" in reasons[5] and "'/'" in reasons[6]
    assert "scopes this session can see" in reasons[9]
    assert sum(batches) >= 4
    with file_lock(vault.mutation_lock_path(), timeout=0):
        pass  # the import let go of the lock
    engine = Engine.open(vault, cwd=work)
    audited = audit.by_node(vault)
    for title in ("Alpha one", "Beta one", "Domain one", "Later one", "Taken by another"):
        node = engine.catalog.get(title)
        assert [e.action for e in audited[node.id]] == ["create"], title
    pairs = Rechecks(vault).table()
    assert {p.target.link for p in pairs[engine.catalog.get("Domain one").id].pairs.values()} \
        == {"[[Later one]]"}
    assert validate.run(vault) == []
    assert Rechecks(vault).candidates() == []



def test_a_bulk_import_recounts_recheck_candidates_once_a_batch_not_once_a_write(
        vault: Vault, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(importer, "BATCH_LINES", 3)
    monkeypatch.setattr(importer, "BATCH_SECONDS", 3600.0)  # batches by lines alone
    counted: list[int] = []
    real = Rechecks.candidates
    monkeypatch.setattr(Rechecks, "candidates",
                        lambda self, *a, **k: counted.append(1) or real(self, *a, **k))
    work = make_repo(tmp_path / "work" / "proj")
    lines, _, _ = read_lines(_lines(*(
        _node(f"Note {n}", space="domain", **({"derived_from": [f"Note {n - 1}"]} if n else {}))
        for n in range(6))))
    report = Importer(vault, cwd=work).run(lines)
    assert len(report.created) == 6 and len(counted) == 2  # two batches of three lines
    assert Rechecks(vault).candidates() == []


OTHER_WRITER = """
import sys
from pathlib import Path
from osk.engine.core import Engine
from osk.calls.request import NewNode

engine = Engine.open(sys.argv[1], cwd=Path(sys.argv[2]), actor="user")
engine.create_node(NewNode("elsewhere", "s", "Another process's cluster.", space="Domain",
                           cluster="elsewhere", drafter="other"))
engine.create_node(NewNode("Taken by another", "s", "Another process wrote it.", space="Domain",
                           cluster="elsewhere", drafter="other"))
"""


def test_writes_inside_a_synced_block_are_made_durable_once_at_its_end(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    calls: list[str] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append("fsync"), real_fsync(fd)))
    monkeypatch.setattr(os, "sync", lambda: calls.append("sync"))
    atomic_write(tmp_path / "alone.md", "x")
    assert calls == ["fsync", "fsync"]  # the file and its folder, at once
    calls.clear()
    with synced_at_exit():
        atomic_write(tmp_path / "a" / "x.md", "x")
        with synced_at_exit():  # nested: still one sync, at the outer end
            append_durably(tmp_path / "l.jsonl", b"1\n")
        assert calls == []
        assert (tmp_path / "a" / "x.md").read_text(encoding="utf-8") == "x"
    if sys.platform.startswith("linux"):
        assert calls == ["sync"]
    else:  # every file and folder written, one fsync each
        assert calls == ["fsync"] * 4


# -- the periodic look for hand edits in a large vault ---------------------------------------------
def _view(catalog: Catalog) -> dict[str, str | None]:
    return {rel: (e.node.text if e.node else None) for rel, e in catalog.entries.items()}


def test_hand_changes_are_seen_within_the_sweep_bound_without_a_full_walk(
        vault: Vault, eng: Engine, hub: str, monkeypatch: pytest.MonkeyPatch):
    # A vault larger than one sweep: every look is the folder check plus a turn of the sweep.
    monkeypatch.setattr(freshness_mod, "SWEEP_FILES", 4)
    monkeypatch.setattr(engine_mod, "REFRESH_SECONDS", 0.0)  # every read makes the look
    monkeypatch.setattr(catalog_mod, "_RACE_WINDOW_NS", 0)
    monkeypatch.setattr(freshness_mod, "RACE_NS", 0)
    rng = random.Random(SEED)
    for n in range(14):
        eng.create_node(NewNode(f"n{n}", "s", f"body {n}\n", space="Scope", cluster=hub,
                                drafter="m"))
    walks = []
    monkeypatch.setattr(eng.catalog, "refresh", lambda: walks.append(1) or Changes())
    folder = vault.abs(eng.catalog.get("n0").path).parent
    for trial in range(TRIALS // 4):
        files = sorted(p for p in folder.glob("*.md") if p.stem != hub)
        pick = rng.choice(files)
        action = rng.choice(["in-place", "in-place", "add", "delete", "rename"])
        if action == "in-place":  # same inode: no folder changes, only the sweep finds it
            with open(pick, "a", encoding="utf-8") as handle:
                handle.write(f"hand {trial}\n")
        elif action == "add":
            text = pick.read_text(encoding="utf-8")
            old_id = next(line for line in text.splitlines() if line.startswith("id: "))
            (folder / f"hand {trial}.md").write_text(
                text.replace(old_id, "id: " + _fresh_id(), 1), encoding="utf-8")
        elif action == "delete" and len(files) > 3:
            pick.unlink()
        elif action == "rename":
            pick.rename(folder / f"renamed {trial}.md")
        if action != "in-place":  # the folder check finds these at the next look
            eng.search("body")
            assert set(eng.catalog.entries) == set(fresh_catalog(vault).entries), action
        looks = -(-len(eng.catalog.entries) // freshness_mod.SWEEP_FILES)
        for _ in range(looks):
            eng.search("body")
        assert _view(eng.catalog) == _view(fresh_catalog(vault)), f"{action} (trial {trial})"
    assert walks == []


def test_an_edit_in_place_is_found_by_the_sweep_alone_within_its_bound(
        vault: Vault, eng: Engine, hub: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(freshness_mod, "SWEEP_FILES", 3)
    monkeypatch.setattr(engine_mod, "REFRESH_SECONDS", 0.0)
    monkeypatch.setattr(catalog_mod, "_RACE_WINDOW_NS", 0)
    monkeypatch.setattr(freshness_mod, "RACE_NS", 0)
    for n in range(10):
        eng.create_node(NewNode(f"n{n}", "s", f"body {n}\n", space="Scope", cluster=hub,
                                drafter="m"))
    eng.search("body")
    # The folder no longer changes below, so its listing stays good: the folder check alone
    # can never see an edit in place (same inode, same folder stat).
    monkeypatch.setattr(freshness_mod, "_racy_folder", lambda folder: False)
    bound = -(-len(eng.catalog.entries) // 3)
    for n in (2, 7, 9):
        node = eng.catalog.get(f"n{n}")
        with open(vault.abs(node.path), "a", encoding="utf-8") as handle:
            handle.write("edited in place\n")
        eng._ctx.fresh.quick()
        assert "edited in place" not in eng.catalog.get(f"n{n}").body
        for _look in range(bound):
            eng.search("body")
            if "edited in place" in eng.catalog.get(f"n{n}").body:
                break
        assert "edited in place" in eng.catalog.get(f"n{n}").body, (n, bound)


def fresh_catalog(vault: Vault) -> Catalog:
    catalog = Catalog(vault)
    catalog.refresh()
    return catalog
