"""Hand edits reported by the kernel (``osk.store.watch``): a watched engine's periodic look
re-stats only the files named in the report, and still sees every change a full look would.

The randomized test uses a fixed seed and a bounded number of trials.
"""

from __future__ import annotations

import random
import sys

import pytest
import writekit

from osk.calls.request import NewNode
from osk.engine import core as engine_mod
from osk.engine.core import Engine
from osk.search import index as index_mod
from osk.search import recallfile
from osk.store import catalog as catalog_mod
from osk.store import freshness as freshness_mod
from osk.store import ids, watch
from osk.store.catalog import Catalog
from osk.store.vault import SPACES, Vault

repo, eng, hub = writekit.repo, writekit.eng, writekit.hub  # shared fixtures

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify")

SEED = 20261204
TRIALS = 16


@pytest.fixture
def watched(eng: Engine, hub: str, vault: Vault, repo, monkeypatch: pytest.MonkeyPatch
            ) -> Engine:
    """A watched engine over 12 nodes, every read a periodic look; a sweep of one file a look
    (so the sweep alone would need a dozen looks to find an edit in place)."""
    settings = ((freshness_mod, "SWEEP_FILES", 1), (engine_mod, "REFRESH_SECONDS", 0.0),
                (catalog_mod, "_RACE_WINDOW_NS", 0), (freshness_mod, "RACE_NS", 0))
    for module, name, value in settings:
        monkeypatch.setattr(module, name, value)
    for n in range(12):
        eng.create_node(NewNode(f"n{n}", "s", f"body {n}\n", space="Scope", cluster=hub,
                                drafter="m"))
    server = Engine.open(vault, cwd=repo, watch=True)  # as the MCP server opens it
    assert server._ctx.fresh._watch is not None
    return server


def stats_of_node_files(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The node files the periodic look stats one by one, recorded as it goes."""
    seen: list[str] = []
    real = freshness_mod._file_stat

    def counting(path):
        seen.append(str(path))
        return real(path)

    monkeypatch.setattr(freshness_mod, "_file_stat", counting)
    return seen


def folders_stat_ed(monkeypatch: pytest.MonkeyPatch, vault: Vault) -> list[str]:
    """The folders a look stats, relative to the vault, recorded as it goes."""
    seen: list[str] = []
    real = freshness_mod.folder_stat

    def counting(path, *, top):
        seen.append(path.relative_to(vault.root).as_posix())
        return real(path, top=top)

    monkeypatch.setattr(freshness_mod, "folder_stat", counting)
    return seen


def view(catalog: Catalog) -> dict[str, str | None]:
    return {rel: (e.node.text if e.node else None) for rel, e in catalog.entries.items()}


def on_disk(vault: Vault) -> dict[str, str | None]:
    catalog = Catalog(vault)
    catalog.refresh()
    return view(catalog)


def test_an_edit_in_place_is_seen_at_the_next_look_restating_only_that_file(
        watched: Engine, vault: Vault, monkeypatch: pytest.MonkeyPatch):
    node = watched.catalog.get("n5")
    watched.search("body")
    stats = stats_of_node_files(monkeypatch)
    with open(vault.abs(node.path), "a", encoding="utf-8") as handle:  # same inode and folder
        handle.write("edited in place\n")
    watched.search("body")  # a search: read_node would re-stat the file it reads anyway
    assert "edited in place" in watched.catalog.get("n5").body
    assert stats == [str(vault.abs(node.path))]  # no sweep of the rest
    stats.clear()
    watched.search("body")  # nothing changed: nothing re-stat-ed
    assert stats == []


def test_hand_changes_of_every_kind_are_seen_at_the_next_look(
        watched: Engine, vault: Vault):
    rng = random.Random(SEED)
    folder = vault.abs(watched.catalog.get("n0").path).parent
    for trial in range(TRIALS):
        files = sorted(p for p in folder.rglob("*.md") if p.stem != folder.name)
        pick = rng.choice(files)
        action = rng.choice(["in-place", "in-place", "add", "delete", "rename", "new folder"])
        if action == "in-place":
            with open(pick, "a", encoding="utf-8") as handle:
                handle.write(f"hand {trial}\n")
        elif action in ("add", "new folder"):
            text = pick.read_text(encoding="utf-8")
            old_id = next(line for line in text.splitlines() if line.startswith("id: "))
            target = folder / f"sub{trial}" if action == "new folder" else folder
            target.mkdir(exist_ok=True)
            (target / f"hand {trial}.md").write_text(
                text.replace(old_id, f"id: {ids.uuid7()}", 1), encoding="utf-8")
        elif action == "delete" and len(files) > 3:
            pick.unlink()
        elif action == "rename":
            pick.rename(pick.parent / f"renamed {trial}.md")
        watched.search("body")
        assert view(watched.catalog) == on_disk(vault), f"{action} (trial {trial})"
        for sub in folder.glob("sub*"):  # an edit in place inside a folder made after watching
            for path in sub.glob("*.md"):
                with open(path, "a", encoding="utf-8") as handle:
                    handle.write(f"later {trial}\n")
        watched.search("body")
        assert view(watched.catalog) == on_disk(vault), f"after {action} (trial {trial})"


def test_a_folder_removed_and_made_again_under_its_name_is_watched_again(
        watched: Engine, vault: Vault, monkeypatch: pytest.MonkeyPatch):
    # A folder listed just after a change is listed again at every look until it is older;
    # here it never is, so only the kernel's report can tell of an edit in place.
    monkeypatch.setattr(freshness_mod, "_racy_folder", lambda folder: False)
    folder = vault.abs(watched.catalog.get("n0").path).parent
    sub = folder / "inner"
    sub.mkdir()
    text = (folder / "n1.md").read_text(encoding="utf-8")
    old_id = next(line for line in text.splitlines() if line.startswith("id: "))
    for round_ in range(2):  # made, then removed and made again: a new folder, the same name
        if sub.exists():
            for path in sub.iterdir():
                path.unlink()
            sub.rmdir()
            sub.mkdir()  # between two looks: the folder check sees one folder, changed
        (sub / "inner node.md").write_text(text.replace(old_id, f"id: {ids.uuid7()}", 1),
                                           encoding="utf-8")
        watched.search("body")
        with open(sub / "inner node.md", "a", encoding="utf-8") as handle:
            handle.write(f"edited in place {round_}\n")
        watched.search("body")  # (read_node would re-stat the file it reads in any case)
        assert f"edited in place {round_}" in watched.catalog.get("inner node").body


def test_a_look_stats_only_the_space_folders_and_those_the_report_names(
        watched: Engine, vault: Vault, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(freshness_mod, "_racy_folder", lambda folder: False)
    folder = vault.abs(watched.catalog.get("n0").path).parent
    text = (folder / "n1.md").read_text(encoding="utf-8")
    old_id = next(line for line in text.splitlines() if line.startswith("id: "))
    for number in range(6):
        (folder / f"part{number}").mkdir()
        (folder / f"part{number}" / f"part node {number}.md").write_text(
            text.replace(old_id, f"id: {ids.uuid7()}", 1), encoding="utf-8")
    watched.search("body")  # lists the new folders, watched first
    seen = folders_stat_ed(monkeypatch, vault)
    watched.search("body")
    assert sorted(seen) == sorted(SPACES)  # nothing reported: no folder below them stat-ed
    seen.clear()
    with open(folder / "part3" / "part node 3.md", "a", encoding="utf-8") as handle:
        handle.write("edited in place\n")
    (folder / "part4" / "added by hand.md").write_text(
        text.replace(old_id, f"id: {ids.uuid7()}", 1), encoding="utf-8")
    watched.search("body")
    assert "edited in place" in watched.catalog.get("part node 3").body
    assert watched.catalog.get("added by hand") is not None
    assert view(watched.catalog) == on_disk(vault)
    inside = folder.relative_to(vault.root).as_posix()
    assert set(seen) == {*SPACES, f"{inside}/part3", f"{inside}/part4"}  # part4 re-listed


def test_a_report_that_may_have_lost_changes_ends_the_watch_with_one_full_look(
        watched: Engine, vault: Vault, monkeypatch: pytest.MonkeyPatch):
    fresh = watched._ctx.fresh
    node = watched.catalog.get("n7")
    fresh._watch.lost = True  # as after a queue overflow
    with open(vault.abs(node.path), "a", encoding="utf-8") as handle:
        handle.write("edited while the report was lost\n")
    walks: list[int] = []
    real = fresh.full
    monkeypatch.setattr(fresh, "full", lambda: walks.append(1) or real())
    watched.search("body")
    assert "edited while the report was lost" in watched.catalog.get("n7").body
    assert walks == [1] and fresh._watch is None  # from now on, the stat sweep


def test_no_watch_where_the_report_could_miss_a_change(
        vault: Vault, repo, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(watch, "file_system", lambda path: "nfs")  # other machines write too
    assert Engine.open(vault, cwd=repo, watch=True)._ctx.fresh._watch is None


def test_the_file_system_of_a_path_is_read_from_the_mount_table(tmp_path):
    assert watch.file_system(tmp_path) != ""


def test_an_engine_opened_watching_watches_every_folder_its_first_look_listed(
        watched: Engine, vault: Vault, monkeypatch: pytest.MonkeyPatch):
    server = watched
    fresh = server._ctx.fresh
    assert fresh._watch is not None
    assert sorted(fresh._watch._folders.values()) == sorted(fresh._folders)
    node = server.catalog.get("n3")
    stats = stats_of_node_files(monkeypatch)
    with open(vault.abs(node.path), "a", encoding="utf-8") as handle:
        handle.write("edited in place\n")
    server.search("body")
    assert "edited in place" in server.catalog.get("n3").body
    assert stats == [str(vault.abs(node.path))]


def test_a_dropped_engine_gives_its_watch_back(vault: Vault, repo):
    import gc
    import os

    def open_descriptors() -> int:
        return len(os.listdir("/proc/self/fd"))

    Engine.open(vault, cwd=repo, watch=True)
    gc.collect()
    before = open_descriptors()
    for _ in range(3):
        Engine.open(vault, cwd=repo, watch=True)
        gc.collect()
    assert open_descriptors() == before


def test_a_watched_write_checks_only_the_folders_the_report_names_and_sees_another_writer(
        watched: Engine, eng: Engine, hub: str, vault: Vault, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(engine_mod, "REFRESH_SECONDS", 3600.0)  # no periodic look: the check
    monkeypatch.setattr(freshness_mod, "FULL_REFRESH_SECONDS", 3600.0)
    monkeypatch.setattr(freshness_mod, "_racy_folder", lambda folder: False)
    for number in range(3):  # clusters nothing is reported in below
        eng.create_node(NewNode(f"far node {number}", "s", "x\n", space="Domain",
                                cluster=f"far{number}", drafter="m"))
    watched.search("body")  # lists the new folders, watched first
    scope = watched.catalog.get("n0").path.rsplit("/", 2)[0]
    eng.create_node(NewNode("other", "s", "x\n", space="Scope", cluster="elsewhere",
                            drafter="m"))  # another writer: a new cluster folder, its hub
    seen = folders_stat_ed(monkeypatch, vault)
    with pytest.raises(Exception, match="other"):  # its title is taken: the report said so
        watched.create_node(NewNode("other", "s", "y\n", space="Scope", cluster=hub,
                                    drafter="m"))
    # the folder the report named, re-listed, and its sub-folders; no cluster of Domain
    assert set(seen) - {*SPACES, scope} <= {f"{scope}/{hub}", f"{scope}/elsewhere"}
    assert f"{scope}/elsewhere/other.md" in watched.catalog.entries
    seen.clear()
    watched.create_node(NewNode("n12", "s", "z\n", space="Scope", cluster=hub, drafter="m"))
    assert set(seen) == set(SPACES)  # nothing reported since: no folder below them stat-ed
    assert view(watched.catalog) == on_disk(vault)


# -- the look skipped while nothing moved (``Freshness.idle``) ----------------------------------
@pytest.fixture
def resting(watched: Engine, monkeypatch: pytest.MonkeyPatch) -> Engine:
    """``watched`` with no race window anywhere (a look vouches for what it saw at once), after
    two looks: the first hands its look over, the second finds it kept, so it is at rest."""
    monkeypatch.setattr(index_mod, "RACE_WINDOW_NS", 0)
    monkeypatch.setattr(freshness_mod, "FINE_RACE_NS", 0)
    watched.search("body")
    watched.search("body")
    assert watched._at_rest()
    return watched


def looks_run(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry for each periodic look the engine runs from now on."""
    fresh = engine._ctx.fresh
    ran: list[int] = []
    real = fresh.periodic
    monkeypatch.setattr(fresh, "periodic", lambda: ran.append(1) or real())
    return ran


def test_a_look_that_could_find_nothing_is_skipped_until_the_kernel_reports_a_change(
        resting: Engine, vault: Vault, monkeypatch: pytest.MonkeyPatch):
    looks = looks_run(resting, monkeypatch)
    stats = stats_of_node_files(monkeypatch)
    for _ in range(3):
        resting.search("body")
    assert looks == [] and stats == []  # each a few system calls, no look
    node = resting.catalog.get("n4")
    with open(vault.abs(node.path), "a", encoding="utf-8") as handle:
        handle.write("edited while at rest\n")
    resting.search("body")
    assert looks == [1] and "edited while at rest" in resting.catalog.get("n4").body
    assert view(resting.catalog) == on_disk(vault)


def test_after_its_own_write_a_server_s_look_vouches_again_and_it_comes_to_rest(
        resting: Engine, vault: Vault, hub: str, monkeypatch: pytest.MonkeyPatch):
    """A look vouches from the last report it took, not from its oldest listing: so a node
    the server wrote does not keep its look from ever vouching (and from being written to
    disk again at every call)."""
    written: list[int] = []
    real = recallfile.write_look
    monkeypatch.setattr(recallfile, "write_look",
                        lambda directory, look: written.append(1) or real(directory, look))
    resting.create_node(NewNode("written by the server", "s", "body new\n", space="Scope",
                                cluster=hub, drafter="m"))
    for _ in range(2):  # a look from before the new file's time, then one from after it
        resting.search("body")
    assert resting._at_rest()
    settled = len(written)
    looks = looks_run(resting, monkeypatch)
    for _ in range(3):
        assert resting.search("written by the server").hits
    assert len(written) == settled and looks == []


def test_a_report_read_while_at_rest_is_not_lost_to_the_look_after(
        resting: Engine, vault: Vault, monkeypatch: pytest.MonkeyPatch):
    # at rest but for the settings: ``idle`` is not asked, and the look takes the report
    node = resting.catalog.get("n2")
    with open(vault.abs(node.path), "a", encoding="utf-8") as handle:
        handle.write("reported once\n")
    fresh = resting._ctx.fresh
    assert not fresh.idle()  # the report is read here, and kept
    resting.search("body")
    assert "reported once" in resting.catalog.get("n2").body


@pytest.mark.parametrize("change", ["space made", "space removed", "space moved away",
                                    "settings", "approvals"])
def test_what_the_kernel_does_not_report_still_ends_the_rest(
        change: str, watched: Engine, vault: Vault, hub: str, eng: Engine,
        monkeypatch: pytest.MonkeyPatch):
    """A Space folder made, removed or moved away (the vault above them is not watched: its
    own watch reports the last two), osk.toml and the approvals ledger (outside every Space
    folder) end the rest."""
    monkeypatch.setattr(index_mod, "RACE_WINDOW_NS", 0)
    monkeypatch.setattr(freshness_mod, "FINE_RACE_NS", 0)
    person = vault.root / "Person"
    if change == "space made":  # absent when the server first looked
        (person / ".gitkeep").unlink()
        person.rmdir()
    elif change in ("space removed", "space moved away"):
        eng.create_node(NewNode("far", "s", "body far\n", space="Domain", cluster="far",
                                drafter="m"))
    watched.search("body")
    watched.search("body")
    assert watched._at_rest()
    looks = looks_run(watched, monkeypatch)
    watched.search("body")
    assert looks == []
    text = vault.abs(watched.catalog.get("n1").path).read_text(encoding="utf-8")
    old_id = next(line for line in text.splitlines() if line.startswith("id: "))
    if change == "space made":
        (person / "people").mkdir(parents=True)
        (person / "people" / "made by hand.md").write_text(
            text.replace(old_id, f"id: {ids.uuid7()}", 1), encoding="utf-8")
    elif change == "space removed":
        import shutil

        shutil.rmtree(vault.root / "Domain")
    elif change == "space moved away":  # no file in it changes: only its own watch tells
        (vault.root / "Domain").rename(vault.root.parent / "Domain elsewhere")
    elif change == "settings":
        with open(vault.root / "osk.toml", "a", encoding="utf-8") as handle:
            handle.write("\n# edited by hand\n")
    else:
        vault.ledger_path("approvals").write_text("", encoding="utf-8")
    watched.search("body")
    assert looks == [1]
    assert view(watched.catalog) == on_disk(vault)
    if change == "space made":
        assert watched.catalog.get("made by hand") is not None
    elif change in ("space removed", "space moved away"):
        assert not any(rel.startswith("Domain/") for rel in watched.catalog.entries)
