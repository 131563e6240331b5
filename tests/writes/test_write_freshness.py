"""The write path's cheap freshness check and the incremental recheck candidates stay exact.

Most tests turn the once-a-second full refresh off (``FULL_REFRESH_SECONDS``), so whatever a
write sees of another process's or a person's change it sees through the folder check and the
per-file re-reads alone. The randomized tests compare against a catalog and a rechecks table
built from scratch; ``OSK_FRESHNESS_TRIALS`` runs them longer by hand.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
import writekit
from writekit import create, make_repo, snapshot

from osk.calls.request import NewNode, NodeEdit
from osk.capture import raw
from osk.engine.core import Engine
from osk.errors import OskError, StaleHash, TitleError
from osk.provenance import pairs as pairs_mod
from osk.provenance.rechecks import Rechecks
from osk.store import catalog as catalog_mod
from osk.store import freshness as freshness_mod
from osk.store import ids
from osk.store.catalog import Catalog
from osk.store.fsutil import atomic_write
from osk.store.vault import Vault

repo, eng, hub = writekit.repo, writekit.eng, writekit.hub  # shared fixtures

SEED = 20261130
TRIALS = int(os.environ.get("OSK_FRESHNESS_TRIALS", "60"))


@pytest.fixture
def no_full_refresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """Writes see changes through the folder check and per-file re-reads only."""
    monkeypatch.setattr(freshness_mod, "FULL_REFRESH_SECONDS", float("inf"))


@pytest.fixture
def second(vault: Vault, repo: Path) -> Engine:
    """Another session of the same project: another MCP server process would open this."""
    return Engine.open(vault, cwd=repo)


def hand_write(vault: Vault, rel: str, text: str) -> None:
    path = vault.abs(rel)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def edit_in_place(vault: Vault, rel: str, old: str, new: str) -> None:
    """What an editor that writes in place does: same file (same inode), new bytes."""
    path = vault.abs(rel)
    text = path.read_text(encoding="utf-8").replace(old, new, 1)
    inode = path.stat().st_ino
    with open(path, "r+", encoding="utf-8") as handle:
        handle.write(text)
        handle.truncate()
    assert path.stat().st_ino == inode


def with_new_id(engine: Engine, title: str) -> str:
    """A copy of a node's text under a fresh id (a node a person wrote by hand)."""
    node = engine.catalog.get(title)
    return node.text.replace(f"id: {node.id}", f"id: {ids.uuid7()}", 1)


def catalog_view(catalog: Catalog) -> dict[str, str | None]:
    return {rel: (entry.node.text if entry.node else None)
            for rel, entry in catalog.entries.items()}


def fresh_view(vault: Vault) -> dict[str, str | None]:
    catalog = Catalog(vault)
    catalog.refresh()
    return catalog_view(catalog)


# -- title uniqueness and places -----------------------------------------------------------------
def test_a_title_another_process_just_took_is_refused_without_a_full_refresh(
        eng: Engine, second: Engine, vault: Vault, hub: str, no_full_refresh: None):
    create(eng, "Tokens")  # eng's full refresh is now done; only folder checks follow
    second.create_node(NewNode("billing", "Billing hub", "Billing.\n", space="Scope",
                               cluster="billing", drafter="m"))
    second.create_node(NewNode("Invoices", "Invoices", "Invoices.\n", space="Scope",
                               cluster="billing", drafter="m"))
    before = snapshot(vault)
    with pytest.raises(TitleError, match="is taken"):
        create(eng, "invoices")
    assert snapshot(vault) == before
    create(eng, "Receipts", cluster="billing")  # the other process's hub is seen too


def test_a_node_written_by_hand_in_a_new_nested_folder_takes_its_title(
        eng: Engine, vault: Vault, hub: str, no_full_refresh: None):
    create(eng, "Tokens")
    hand_write(vault, "Domain/notes/deep/er/Sessions.md", with_new_id(eng, "Tokens"))
    with pytest.raises(TitleError, match="Domain/notes/deep/er/Sessions.md"):
        create(eng, "Sessions")


def test_a_node_deleted_by_hand_frees_its_title_at_once(eng: Engine, vault: Vault, hub: str,
                                                        no_full_refresh: None):
    rel = create(eng, "Tokens").path
    vault.abs(rel).unlink()
    assert create(eng, "Tokens").action == "created"


def test_a_hand_edit_in_place_of_the_node_being_changed_is_seen_before_the_write(
        eng: Engine, vault: Vault, hub: str, no_full_refresh: None):
    rel = create(eng, "Tokens", body="Tokens last an hour.\n").path
    seen = eng.read_node("Tokens").hash
    edit_in_place(vault, rel, "an hour", "a day")
    with pytest.raises(StaleHash):
        eng.update_node("Tokens", NodeEdit(body="Tokens last a week.\n", expect_hash=seen))
    eng.update_node("Tokens", NodeEdit(old_text="a day", new_text="two days"))
    assert "two days" in vault.abs(rel).read_text(encoding="utf-8")


def test_a_citation_binds_to_the_body_another_process_just_wrote(
        eng: Engine, second: Engine, hub: str, no_full_refresh: None):
    create(eng, "Source", body="The limit is 10.\n")
    second.update_node("Source", NodeEdit(old_text="10", new_text="20"))
    create(eng, "Claim", derived_from=("[[Source]]",))
    assert eng.recheck().candidates == ()


# -- randomized: the folder check keeps the catalog exact --------------------------------------
def test_the_catalog_a_write_sees_matches_a_fresh_walk_after_any_file_moves(
        eng: Engine, vault: Vault, hub: str, no_full_refresh: None):
    """Creations, deletions, renames and folder moves (by osk or by hand, never an in-place
    edit) are all seen by the next write's folder check."""
    rng = random.Random(SEED)
    made: list[str] = []
    for trial in range(TRIALS):
        action = rng.choice(["write", "hand-new", "delete", "rename", "move-folder", "replace"])
        folder = rng.choice(["Domain/a", "Domain/a/b", "Domain/c", "Person/p", "Scope/proj/auth"])
        if action == "write" or not made:
            create(eng, f"n{trial}", cluster="auth")
            made.append(eng.catalog.get(f"n{trial}").path)
        elif action == "hand-new":
            rel = f"{folder}/h{trial}.md"
            hand_write(vault, rel, with_new_id(eng, "auth"))
            made.append(rel)
        elif action == "delete":
            rel = made.pop(rng.randrange(len(made)))
            vault.abs(rel).unlink(missing_ok=True)
        elif action == "rename":
            rel = made.pop(rng.randrange(len(made)))
            target = f"{folder}/r{trial}.md"
            if vault.abs(rel).exists():
                vault.abs(target).parent.mkdir(parents=True, exist_ok=True)
                os.rename(vault.abs(rel), vault.abs(target))
                made.append(target)
        elif action == "move-folder":
            source = vault.abs("Domain/a")
            if source.is_dir():
                destination = vault.abs(f"Person/moved{trial}")
                os.rename(source, destination)
                made = [m.replace("Domain/a/", f"Person/moved{trial}/", 1) for m in made]
        else:  # another process's atomic replace of an existing node
            rel = rng.choice(made)
            if vault.abs(rel).exists():
                text = vault.abs(rel).read_text(encoding="utf-8")
                atomic_write(vault.abs(rel), text + f"\nline {trial}\n")
        eng._ctx.keep(eng._ctx.fresh.quick())
        assert catalog_view(eng.catalog) == fresh_view(vault), f"after {action} (trial {trial})"


# -- randomized: incremental candidates equal a computation from scratch ------------------------
def test_incremental_candidates_match_a_fresh_computation_after_random_changes(
        vault: Vault, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # Without the race guards every file written in the last two seconds would be re-read
    # (and every citer recomputed) on each call, hiding a dependency the tracking missed.
    # Each change below alters a file's size, so its stat changes even within one tick.
    monkeypatch.setattr(catalog_mod, "_RACE_WINDOW_NS", 0)
    monkeypatch.setattr(pairs_mod, "_RACE_NS", 0)
    rng = random.Random(SEED + 1)
    project = make_repo(tmp_path / "work" / "proj", files={"src/app.py": "v0\n"})
    one = Engine.open(vault, cwd=project)
    two = Engine.open(vault, cwd=project)  # another process appending to the same ledgers
    one.create_node(NewNode("auth", "hub", "Hub.\n", space="Scope", cluster="auth", drafter="m"))
    coordinate = one.append_raw("talk", user="q", assistant="a").coordinate
    titles = ["auth"]
    for trial in range(TRIALS):
        engine = rng.choice([one, one, two])
        action = rng.choice(["create", "create", "update", "hand-edit", "raw", "file",
                             "delete", "recite", "correct", "correct", "correct"])
        try:
            if action == "create":
                cites = rng.sample(titles, min(len(titles), rng.randint(0, 2)))
                links = [f"[[{t}]]" for t in cites]
                if rng.random() < 0.3:
                    links.append(f"[[{coordinate}]]")
                if rng.random() < 0.2:
                    links.append("[[file:src/app.py]]")
                title = f"t{trial}"
                engine.create_node(NewNode(title, "s", f"body {trial}\n", space="Scope",
                                           cluster="auth", drafter="m", derived_from=links))
                titles.append(title)
            elif action == "update":
                title = rng.choice(titles)
                engine.update_node(title, NodeEdit(body=f"new body {trial}\n",
                                            expect_hash=engine.read_node(title).hash))
            elif action == "hand-edit":
                rel = engine.catalog.get(rng.choice(titles)).path
                path = vault.abs(rel)
                path.write_text(path.read_text(encoding="utf-8") + f"hand {trial}\n",
                                encoding="utf-8")
            elif action == "raw":
                raw.append_round(vault, engine.session.key.key, "talk",
                                 raw.RoundInput(user="more", assistant=f"answer {trial}"))
            elif action == "file":
                (project / "src" / "app.py").write_text(f"v{trial}\n", encoding="utf-8")
            elif action == "delete" and len(titles) > 1:
                title = titles.pop(rng.randrange(1, len(titles)))
                vault.abs(engine.catalog.get(title).path).unlink()
            elif action == "recite":
                found = engine.recheck().candidates
                if found:
                    cand = rng.choice(found)
                    if cand.target_key.startswith("node:"):
                        engine.read_node(cand.target_key[len("node:"):])
                        engine.recite([cand.id])
            elif action == "correct":
                found = [c for c in engine.recheck().candidates
                         if c.target_key.startswith("node:")]
                if found:
                    cand = rng.choice(found)
                    engine.read_node(cand.target_key[len("node:"):])
                    engine.update_node(cand.citing_id, NodeEdit(body=f"corrected {trial}\n",
                                                expect_hash=engine.read_node(cand.citing_id).hash,
                                                recheck_of=[cand.id]))
        except OskError:
            pass  # a refused write (cascade stop, hub, unread...) changes nothing
        for session in (one, two):
            session.refresh()
            expected = Rechecks(vault).candidates()
            assert session.rechecks.candidates(session.catalog) == expected, \
                f"after {action} (trial {trial})"


# -- the search index ------------------------------------------------------------------------------
def test_writes_hand_the_index_their_changes_and_never_rebuild_it(
        eng: Engine, hub: str, monkeypatch: pytest.MonkeyPatch):
    create(eng, "Tokens", body="Tokens expire hourly.\n")
    assert [h.title for h in eng.search("expire hourly").hits][:1] == ["Tokens"]
    index = eng._search_index()

    def no_rebuild(*_args: object) -> None:
        raise AssertionError("a write rebuilt the search index")

    monkeypatch.setattr(type(index), "_build", no_rebuild)
    monkeypatch.setattr(type(index), "rebuild", no_rebuild)
    create(eng, "Sessions", body="Sessions idle out after ten minutes.\n")
    eng.update_node("Tokens", NodeEdit(old_text="hourly", new_text="daily"))
    assert [h.title for h in eng.search("idle out").hits][:1] == ["Sessions"]
    assert [h.title for h in eng.search("expire daily").hits][:1] == ["Tokens"]
    assert "Tokens" not in [h.title for h in eng.search("hourly").hits]


def test_opening_an_engine_lists_each_folder_of_the_vault_once(
        vault: Vault, repo: Path, eng: Engine, hub: str, monkeypatch: pytest.MonkeyPatch):
    create(eng, "Token lifetimes")
    eng.create_node(NewNode("Glossary", "Words we use", "Terms.\n", space="Domain",
                            cluster="Glossary",
                            drafter="test-model"))
    real = os.scandir
    listed: list[str] = []

    def counting(path: str | os.PathLike[str] = ".") -> object:
        listed.append(os.path.relpath(path, vault.root))
        return real(path)

    with monkeypatch.context() as patched:  # the open only (the test's teardown lists too)
        patched.setattr(os, "scandir", counting)
        again = Engine.open(vault, cwd=repo)  # the folder listing and the catalog's stats: one walk
    spaces = [rel for rel in listed if rel.split(os.sep)[0] in ("Scope", "Domain", "Person")]
    assert spaces and sorted(spaces) == sorted(set(spaces))
    assert again.catalog.paths_with_title("Token lifetimes")  # and the catalog holds them


def test_a_folder_listing_takes_a_written_name_in_and_a_removed_one_out_once():
    """What a write notes of a folder it listed (``Freshness.noted``): a name added once
    however often it is written, a removed one gone, and no other name touched, one that
    begins or ends like it included."""
    folder = freshness_mod._Folder((0, 0, 0), 0, "", set(), Path("."))
    for name in ("ba.md", "b.md", "a.md", "a.md", "b.md"):
        folder.add(name)
    assert folder.files == {"a.md", "b.md", "ba.md"}
    assert folder.names.count("a.md\0") == 2  # "a.md" and the end of "ba.md", each once
    for name, left in (("a.md", {"b.md", "ba.md"}), ("missing.md", {"b.md", "ba.md"}),
                       ("b.md", {"ba.md"})):
        folder.discard(name)
        assert folder.files == left
    folder.discard("ba.md")
    assert folder.files == set() and folder.names == ""
