"""A fresh `osk read` answers from the persisted index and the node's own file while they vouch
for the node (``osk.reads.quick_read``), with the engine's answer; anything they cannot vouch
for goes to the engine. Real processes on a real vault, and the engine beside in process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_quick_search import (
    CHILD,
    NOT_IMPORTED,
    _Terminal,
    age,
    folders_settle,
    imported_citing,
    node_text,
    populated,
    saved,
    search,
    write,
)

from osk.store.vault import Vault


def read(vault: Vault, ref: str, cwd: Path, *options: str) -> tuple[str, int, str, str]:
    """(which path answered, exit code, stdout, stderr without that line) of one `osk read`."""
    env = {**os.environ, "OSK_SEMANTIC": "0"}
    done = subprocess.run([sys.executable, "-c", CHILD, "--vault", str(vault.root), "read",
                           ref, *options], cwd=cwd, capture_output=True, text=True,
                          encoding="utf-8", env=env)
    *said, which = done.stderr.strip().splitlines()
    return which, done.returncode, done.stdout, "\n".join(said)


def as_the_engine(vault: Vault, cwd: Path, ref: str, **page: object) -> object:
    """The store's answer (never the engine's), after checking it is the one a fresh engine
    gives with no related nodes: every field, the hash and the markers too."""
    from osk.engine.core import Engine
    from osk.reads.quick_read import read as quick

    answered = quick(vault.root, cwd, None, ref, **page)  # type: ignore[arg-type]
    assert answered is not None, "the store did not answer"
    engine = Engine.open(vault, cwd=cwd, actor="user")
    assert answered == engine.read_node(ref, related=False, **page)  # type: ignore[arg-type]
    return answered


def engine_looks(vault: Vault, cwd: Path) -> None:
    """An engine's search: it takes what changed by hand into the index on disk, with its look
    (a fresh search reads such files for itself and writes nothing)."""
    from osk.engine.core import Engine

    Engine.open(vault, cwd=cwd, actor="user").search("walrus")


LONG_BODY = "\n".join(["## Habits", "walrus on the ice " * 200, "## Diet", "clams " * 300])


def test_a_read_answers_from_the_store_as_the_engine_does(vault: Vault, tmp_path: Path):
    populated(vault)
    write(vault, "Domain/animals/Walrus book.md", node_text(5, LONG_BODY, summary="Long."))
    folders_settle()
    assert read(vault, "Walrus diet", tmp_path)[0] == "ENGINE"  # no index yet: nothing vouches
    search(vault, "walrus", tmp_path)  # the engine builds the index and records its look
    which, code, out, _ = read(vault, "walrus DIET", tmp_path)  # titles compare case-folded
    assert (which, code) == ("QUICK", 0)
    assert out.startswith("# Walrus diet  (Domain/animals/Walrus diet.md)\n")
    assert "walrus and clams" in out
    whole = as_the_engine(vault, tmp_path, "quick-0001")  # by id
    assert whole.hash is not None and whole.complete  # type: ignore[attr-defined]
    first = as_the_engine(vault, tmp_path, "Walrus book")
    assert first.hash is None and first.next_start == 4000  # type: ignore[attr-defined]
    as_the_engine(vault, tmp_path, "Walrus book", start=4000, length=500)
    diet = as_the_engine(vault, tmp_path, "Walrus book", section="Diet")
    assert diet.section == "Diet" and diet.text.startswith("## Diet")  # type: ignore[attr-defined]
    which, code, out, _ = read(vault, "Walrus book", tmp_path, "--section", "Diet")
    assert (which, code) == ("QUICK", 0) and "## Diet" in out and "on the ice" not in out


@pytest.mark.parametrize("options", [(), ("--json",)])
def test_a_read_from_the_store_imports_no_engine(vault: Vault, tmp_path: Path,
                                                 options: tuple[str, ...]):
    populated(vault)
    search(vault, "walrus", tmp_path)
    child = CHILD.replace("print('ENGINE' if 'osk.engine.core' in sys.modules else 'QUICK', ",
                          "print(' '.join(sorted(sys.modules)), ")
    done = subprocess.run([sys.executable, "-c", child, "--vault", str(vault.root), "read",
                           "Seal songs", *options], cwd=tmp_path, capture_output=True,
                          text=True, encoding="utf-8", env={**os.environ, "OSK_SEMANTIC": "0"},
                          check=True)
    modules = set(done.stderr.split())
    assert "osk.reads.quick_read" in modules and "seals sing" in done.stdout
    # with its related nodes: printed without dataclasses (--json reads fastclass's fields)
    assert ("osk.calls.related" in modules) == bool(options)
    # the node's front matter, in osk's own form and hashing to what the index validated, is
    # read without the contract (pydantic); YAML's resolver table answers which plain values
    # are strings. The page is the engine's NodeRead (made without dataclasses: fastclass),
    # its links as osk.store.edges writes them; the command line's argparse
    read_needs = {"yaml", "argparse", "osk.calls.results", "osk.store.edges"}
    assert modules & (set(NOT_IMPORTED) - read_needs) == set()
    assert {"numpy", "osk.engine.core", "osk.search.semantic", "pydantic"} <= set(NOT_IMPORTED)
    assert "osk.store.contract" not in modules


@pytest.mark.parametrize(("options", "frozen"), [((), True), (("--as-of", "2030-01-01"), False)])
def test_a_read_from_the_store_leaves_the_collector_nothing_to_do_at_exit(
        vault: Vault, tmp_path: Path, options: tuple[str, ...], frozen: bool):
    """As a plain search: what is alive as the process ends is frozen, so the exit's collection
    passes over none of it (10 ms of a 70 ms read); a read the engine answers (a past date) is
    left as it was."""
    populated(vault)
    search(vault, "walrus", tmp_path)
    child = CHILD.replace("code = main(", "import atexit, gc\n"
                          "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0, "
                          "file=sys.stderr))\ncode = main(")
    done = subprocess.run([sys.executable, "-c", child, "--vault", str(vault.root), "read",
                           "Seal songs", *options], cwd=tmp_path, capture_output=True,
                          text=True, encoding="utf-8", env={**os.environ, "OSK_SEMANTIC": "0"},
                          check=True)
    *_, which, last = done.stderr.strip().splitlines()
    assert (which, last) == ("ENGINE" if options else "QUICK", f"frozen {frozen}")


def test_front_matter_in_another_form_is_validated_as_the_engine_validates_it(
        vault: Vault, tmp_path: Path):
    """A node written by hand in YAML's other forms (flow lists, plain dates, an empty
    property) is read through the contract, as the engine reads it, with the same answer."""
    populated(vault)
    text = ("---\nid: quick-0042\ncreated: 2026-11-29T18:00+00:00\n"
            "updated: 2026-11-30T09:15+00:00\nauthor: user\ndrafter: by hand\n"
            "summary: Seals haul out on ice floes\nderived-from: ['[[Walrus diet]]']\n"
            "conflicts: []\ntrust:\n---\nSeals rest on ice floes between dives.\n")
    write(vault, "Domain/animals/Seal rest.md", text)
    folders_settle()
    search(vault, "walrus", tmp_path)
    page = as_the_engine(vault, tmp_path, "Seal rest")
    assert page.derived_from == ("[[Walrus diet]]",)  # type: ignore[attr-defined]
    assert page.trust == "confirmed" and page.author == "user"  # type: ignore[attr-defined]
    assert read(vault, "Seal rest", tmp_path)[:2] == ("QUICK", 0)


def test_what_the_store_cannot_vouch_for_is_the_engines(vault: Vault, tmp_path: Path):
    """Errors are the engine's, in its words; a past version and a node changed by hand since
    the look go to it too, and `--json` (with its related nodes) while any file is."""
    populated(vault)
    search(vault, "walrus", tmp_path)
    which, code, _, said = read(vault, "Seal songs", tmp_path, "--section", "Nowhere")
    assert (which, code) == ("ENGINE", 3) and "no heading 'Nowhere'" in said
    assert read(vault, "Seal songs", tmp_path, "--as-of", "2099-01-01")[:2] == ("ENGINE", 0)
    which, code, out, _ = read(vault, "Seal songs", tmp_path, "--json")
    assert (which, code) == ("QUICK", 0) and json.loads(out)["title"] == "Seal songs"
    seal = vault.root / "Domain/animals/Seal songs.md"
    with open(seal, "r+", encoding="utf-8") as handle:  # in place: its folder's stat kept
        text = handle.read().replace("seals sing", "seals hum")
        handle.seek(0)
        handle.write(text)
        handle.truncate()
    which, code, out, _ = read(vault, "Seal songs", tmp_path)
    assert (which, code) == ("ENGINE", 0) and "seals hum" in out
    # another node is still vouched for: the changed file claims neither its title nor its id
    assert read(vault, "Walrus diet", tmp_path)[:2] == ("QUICK", 0)
    # but not its related nodes: the changed file may be one of them
    assert read(vault, "Walrus diet", tmp_path, "--json")[:2] == ("ENGINE", 0)
    age(seal)
    engine_looks(vault, tmp_path)
    which, code, out, _ = read(vault, "Seal songs", tmp_path)
    assert (which, code) == ("QUICK", 0) and "seals hum" in out


def test_a_file_changed_by_hand_that_claims_the_name_sends_the_read_to_the_engine(
        vault: Vault, tmp_path: Path):
    """The catalog's rule: an id or title two files claim is refused, an id before a title.
    A file made or changed by hand since the look counts, read here."""
    populated(vault)
    search(vault, "walrus", tmp_path)
    seal = vault.root / "Domain/animals/Seal songs.md"
    seal.write_text(seal.read_text(encoding="utf-8").replace("quick-0002", "quick-0001"),
                    encoding="utf-8")  # in place, now holding Walrus diet's id
    which, code, _, said = read(vault, "quick-0001", tmp_path)
    assert which == "ENGINE" and code != 0 and "carried by 2 files" in said
    which, code, _, said = read(vault, "Walrus diet", tmp_path)
    assert which == "ENGINE" and "carried by 2 files" in said
    write(vault, "Domain/other/WALRUS HABITS.md", node_text(9, "another walrus"))
    folders_settle()
    which, code, _, said = read(vault, "Walrus habits", tmp_path)
    assert which == "ENGINE" and "claimed by 2 files" in said
    # and the same once an engine has taken the changes into the index and its look
    engine_looks(vault, tmp_path)
    which, code, _, said = read(vault, "Walrus diet", tmp_path)
    assert which == "ENGINE" and "carried by 2 files" in said
    which, code, _, said = read(vault, "Walrus habits", tmp_path)
    assert which == "ENGINE" and "claimed by 2 files" in said
    (vault.root / "Domain/other/WALRUS HABITS.md").unlink()
    write(vault, "Domain/animals/Seal songs.md", node_text(2, "seals sing under water"))
    write(vault, "Domain/other/walrus diet.md", "no front matter\n")  # a title, no valid node
    folders_settle()
    engine_looks(vault, tmp_path)
    assert read(vault, "Walrus habits", tmp_path)[:2] == ("QUICK", 0)
    which, code, _, said = read(vault, "Walrus diet", tmp_path)
    assert which == "ENGINE" and "claimed by 2 files" in said


def test_a_name_no_node_claims_is_refused_from_the_store_in_the_engines_words(
        vault: Vault, tmp_path: Path):
    """A reference nothing claims, in an index the look vouches for, is refused without the
    engine, as the engine refuses it; a file made by hand since that claims it is the
    engine's to read."""
    from osk.engine.core import Engine
    from osk.errors import NodeNotFound
    from osk.reads.quick_read import read as quick

    populated(vault)
    search(vault, "walrus", tmp_path)
    which, code, out, said = read(vault, "Narwhal", tmp_path)
    assert (which, code, out) == ("QUICK", 3, "")
    with pytest.raises(NodeNotFound) as engine_said:
        Engine.open(vault, cwd=tmp_path, actor="user").read_node("Narwhal")
    assert said == f"Error: {engine_said.value}"
    assert read(vault, "quick-0404", tmp_path, "--json")[:2] == ("QUICK", 3)  # nor an id
    with pytest.raises(NodeNotFound) as store_said:
        quick(vault.root, tmp_path, None, "narwhal", related=True)
    assert store_said.value.facts == {"ref": "narwhal"}
    write(vault, "Domain/animals/Narwhal.md", node_text(7, "the narwhal's tusk"))
    which, code, out, _ = read(vault, "NARWHAL", tmp_path)
    assert (which, code) == ("ENGINE", 0) and "the narwhal's tusk" in out


def test_a_node_of_a_scope_the_session_cannot_see_is_not_found(vault: Vault, tmp_path: Path):
    from osk.engine.core import Engine
    from osk.errors import NodeNotFound

    populated(vault)
    write(vault, "Scope/alpha/Alpha plan.md", node_text(20, "the alpha walrus plan"))
    write(vault, "Scope/beta/Beta plan.md", node_text(21, "the beta walrus plan"))
    folders_settle()
    engine = Engine.open(vault, cwd=tmp_path, scope="beta", actor="user")
    engine.search("walrus")  # builds the index and records the look
    with pytest.raises(NodeNotFound) as engine_said:
        engine.read_node("Alpha plan", related=False)
    from osk.reads.quick_read import read as quick

    with pytest.raises(NodeNotFound) as store_said:
        quick(vault.root, tmp_path, "beta", "Alpha plan")
    assert str(store_said.value) == str(engine_said.value)
    seen = quick(vault.root, tmp_path, "beta", "Beta plan")
    assert seen is not None and seen == engine.read_node("Beta plan", related=False)


def test_a_cited_node_carries_the_engines_markers(vault: Vault, tmp_path: Path):
    """A node citing one whose body changed since has a recheck candidate: its marker comes
    from the rechecks table on disk by the engine's rule, as a search hit's does."""
    imported_citing(vault, tmp_path)
    habits = next(vault.root.glob("Domain/**/Walrus habits.md"))
    habits.write_text(habits.read_text(encoding="utf-8").replace("on ice", "on rocks"),
                      encoding="utf-8")
    for path in vault.root.glob("Domain/**/*.md"):
        age(path)
    folders_settle()
    engine_looks(vault, tmp_path)
    diet = as_the_engine(vault, tmp_path, "Walrus diet")
    assert "recheck" in diet.markers  # type: ignore[attr-defined]
    which, code, out, _ = read(vault, "Walrus diet", tmp_path)
    assert (which, code) == ("QUICK", 0) and "markers: " in out and "recheck" in out


@pytest.mark.parametrize("bound", [None, 6])
def test_a_read_with_its_related_nodes_answers_from_the_store_as_the_engine_does(
        vault: Vault, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bound: int | None):
    """`osk read --json` lists the related nodes from the stores on disk by the engine's rule:
    the nodes it cites, its citers from the rechecks table on disk, the similar ones by the
    same bounded ranking (``bound``: one that leaves common words unread, known by their
    document frequency and each node's own terms); a later page lists none, as the engine's
    does."""
    from osk.calls import related
    from osk.engine.core import Engine
    from osk.reads.quick_read import read as quick

    if bound is not None:
        monkeypatch.setattr(related, "RELATED_POSTINGS", bound)
    imported_citing(vault, tmp_path)  # Walrus diet cites Walrus habits, in the ledger
    write(vault, "Domain/animals/Walrus tusks.md", node_text(
        40, "walrus tusks on the ice", derived_from=("[[Walrus diet]]",)))
    write(vault, "Domain/animals/Seal songs.md", node_text(41, "seals sing under water"))
    # "diet" in three nodes, "walrus" in nine: a bound of 6 reads diet and clams, and knows
    # which candidates hold walrus from their own terms (it puts the walrus notes first)
    for number, (title, body) in enumerate([("Seal diet notes", "seals eat fish"),
                                            ("Walrus diet notes", "walrus eat fish")]):
        write(vault, f"Domain/animals/{title}.md", node_text(42 + number, body, summary="Fish."))
    for number in range(5):
        write(vault, f"Domain/animals/Walrus part {number}.md", node_text(
            44 + number, f"walrus on rocks {number}", summary="Part."))
    for path in vault.root.glob("Domain/**/*.md"):
        age(path)
    folders_settle()
    engine_looks(vault, tmp_path)
    why: set[str] = set()
    for ref in ("Walrus habits", "Walrus diet", "Walrus tusks", "Seal songs"):
        found = quick(vault.root, tmp_path, None, ref, related=True)
        assert found is not None, f"the store did not answer {ref!r}"
        assert found == Engine.open(vault, cwd=tmp_path, actor="user").read_node(ref)
        why.update(near.why for near in found.related)
    assert {"cites this node (derived-from)", "cited by this node (derived-from)",
            "similar: shares its words"} <= why
    which, code, out, _ = read(vault, "Walrus habits", tmp_path, "--json")
    assert (which, code) == ("QUICK", 0)
    assert [near["title"] for near in json.loads(out)["related"]][0] == "Walrus diet"
    later = quick(vault.root, tmp_path, None, "Walrus habits", start=3, related=True)
    assert later is not None and later.related == ()
    assert later == Engine.open(vault, cwd=tmp_path, actor="user").read_node(
        "Walrus habits", start=3)


def test_related_nodes_meaning_would_rank_are_the_engines_where_words_decide_they_are_the_stores(
        vault: Vault, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """With the semantic channel on and a model that reads the node's words, the engine embeds
    them only where meaning can count (``words_decide``); the store answers where it cannot,
    as words alone rank, and leaves the rest to the engine."""
    from osk.reads import quick_read
    from osk.search import semantic

    populated(vault)
    search(vault, "walrus", tmp_path)

    def listed() -> list[object] | None:
        found = quick_read.read(vault.root, tmp_path, None, "Walrus diet", related=True)
        return None if found is None else list(found.related)

    reads = {"text": True}

    class Held:  # the vectors of a vault whose model reads what ``reads`` says
        model = type("Model", (), {"reads": staticmethod(lambda text: reads["text"])})

    monkeypatch.setenv("OSK_SEMANTIC", "1")
    monkeypatch.setattr(semantic.Vectors, "for_index", classmethod(lambda cls, path: Held))
    assert listed() is None  # three nodes: too few hits for the words to decide
    assert quick_read.read(vault.root, tmp_path, None, "Walrus diet") is not None
    reads["text"] = False
    assert listed() is not None  # a text the model does not read is ranked by words
    monkeypatch.setenv("OSK_SEMANTIC", "0")
    for number in range(8):
        write(vault, f"Domain/animals/Walrus note {number}.md",
              node_text(50 + number, f"walrus diet note {number}"))
    folders_settle()
    engine_looks(vault, tmp_path)
    alone = listed()
    monkeypatch.setenv("OSK_SEMANTIC", "1")
    reads["text"] = True
    assert alone is not None and listed() == alone and len(alone) == 6


def test_a_protected_vault_is_read_from_the_store_while_no_change_waits_for_approval(
        vault: Vault, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Protected regions whose every file is the version approved serve each file as it is:
    reads (with their related nodes, and a name nothing claims) are the store's, as the
    engine gives them. While a change there waits for the person's approval (an edit, a node
    made and not approved yet), what protection serves is the engine's to judge, so every read
    goes to it until the person approves."""
    from osk.authority import approvals
    from osk.engine.core import Engine
    from osk.errors import NodeNotFound
    from osk.reads.quick_read import read as quick

    def same(ref: str, related: bool) -> None:
        found = quick(vault.root, tmp_path, None, ref, related=related)
        assert found is not None, f"the store did not answer {ref!r}"
        assert found == Engine.open(vault, cwd=tmp_path, actor="user").read_node(
            ref, related=related)

    populated(vault)
    write(vault, "Person/prefs/Walrus keeper.md", node_text(30, "the walrus keeper's notes"))
    monkeypatch.setattr("sys.stdin", _Terminal())
    approvals.protect(vault, "Person/prefs")
    folders_settle()
    search(vault, "walrus", tmp_path)  # the engine records its look under these approvals
    assert read(vault, "Walrus keeper", tmp_path)[:2] == ("QUICK", 0)
    for ref in ("Walrus keeper", "Walrus diet"):
        same(ref, related=False)
        same(ref, related=True)
    assert read(vault, "Narwhal", tmp_path)[:2] == ("QUICK", 3)

    keeper = vault.root / "Person/prefs/Walrus keeper.md"
    saved(vault, "Person/prefs/Walrus keeper.md", keeper.read_text(encoding="utf-8").replace(
        "keeper's notes", "keeper's secret notes"))
    folders_settle()
    engine_looks(vault, tmp_path)  # the index takes the change, serving the approved text
    which, code, out, _ = read(vault, "Walrus keeper", tmp_path)
    assert (which, code) == ("ENGINE", 0) and "secret" not in out  # what protection serves
    assert read(vault, "Walrus diet", tmp_path, "--json")[:2] == ("ENGINE", 0)
    approvals.approve(vault, "Person/prefs")
    folders_settle()
    engine_looks(vault, tmp_path)
    which, code, out, _ = read(vault, "Walrus keeper", tmp_path)
    assert (which, code) == ("QUICK", 0) and "secret" in out
    same("Walrus keeper", related=True)

    write(vault, "Person/prefs/Walrus twin.md", node_text(31, "made, not approved yet"))
    folders_settle()
    engine_looks(vault, tmp_path)  # a creation waiting: the index leaves it out
    with pytest.raises(NodeNotFound, match="waiting for the person's approval"):
        Engine.open(vault, cwd=tmp_path, actor="user").read_node("quick-0031")
    assert quick(vault.root, tmp_path, None, "quick-0031") is None  # the engine's words
    assert read(vault, "Walrus diet", tmp_path)[:2] == ("ENGINE", 0)


TRIALS = int(os.environ.get("OSK_READ_TRIALS", "12"))


def test_random_hand_changes_leave_every_read_from_the_store_the_engines(
        vault: Vault, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Hand changes of every kind (an edit in place, a file made, removed or renamed, an id or
    a title a second file claims, a file that is no valid node), some taken into the index by
    an engine's look and some not, half the trials in a vault where one folder is protected
    and the person approves what waits there now and then: each read the store answers, with
    its related nodes or without, is the fresh engine's, field for field; where the engine
    refuses, the store does not answer, or refuses a name no node claims in the engine's
    words. ``OSK_READ_TRIALS`` runs it longer by hand."""
    import random

    from osk.authority import approvals
    from osk.engine.core import Engine
    from osk.errors import ContractError, NodeNotFound, OskError
    from osk.reads.quick_read import read as quick

    rng = random.Random(20261206)
    folders = ["Domain/animals", "Domain/plants"]
    for number in range(10):  # each cites the one before it and one by its id
        write(vault, f"{folders[number % 2]}/Note {number}.md",
              node_text(number, f"body of note {number}", derived_from=(
                  f"[[Note {number - 1}]]", f"[[quick-{rng.randrange(14):04d}]]")))
    folders_settle()
    engine_looks(vault, tmp_path)
    monkeypatch.setattr("sys.stdin", _Terminal())  # the person's verbs, at a terminal
    answered, refused, not_found, listed = 0, 0, 0, set()
    nearby = 0  # reads the store answered with related nodes listed
    protected_answers = 0  # reads it answered once a folder was protected
    for trial in range(TRIALS):
        for _ in range(rng.randint(1, 3)):
            hand_change(vault, rng, folders, trial)
        if trial == TRIALS // 2:
            approvals.protect(vault, "Domain/plants")
        elif trial > TRIALS // 2 and rng.random() < 0.5:
            try:
                approvals.approve(vault, "Domain/plants")
            except ContractError:  # a file no valid node: the person takes the region back
                approvals.revert(vault, "Domain/plants")
            folders_settle()
            engine_looks(vault, tmp_path)  # the next engine reads under the approvals now
        if rng.random() < 0.4:
            folders_settle()
            engine_looks(vault, tmp_path)
        files = sorted(vault.root.glob("Domain/*/*.md"))
        refs = [rng.choice(files).stem for _ in range(3)] if files else []
        refs += [f"quick-{rng.randrange(14):04d}", rng.choice(refs or ["none"]).upper()]
        for ref in refs:
            related = rng.random() < 0.5
            try:
                found: object = quick(vault.root, tmp_path, None, ref, related=related)
            except NodeNotFound as error:
                found = error
            try:
                expected = Engine.open(vault, cwd=tmp_path, actor="user").read_node(
                    ref, related=related)
            except OskError as error:
                if isinstance(found, NodeNotFound):
                    assert type(error) is NodeNotFound and str(found) == str(error)
                    not_found += 1
                else:
                    assert found is None, (trial, ref)
                refused += 1
                continue
            assert not isinstance(found, NodeNotFound), (trial, ref, found)
            if found is not None:
                assert found == expected, (trial, ref)
                answered += 1
                protected_answers += trial > TRIALS // 2
                nearby += bool(found.related)  # type: ignore[attr-defined]
                listed.update(near.why.split(":")[0] for near in expected.related)
    assert answered and refused and not_found and nearby  # every side of the rule exercised
    assert protected_answers  # and reads of a protected vault with nothing waiting
    assert listed == {"cited by this node (derived-from)", "similar"}


def hand_change(vault: Vault, rng: Any, folders: list[str], trial: int) -> None:
    """One change a person or a tool might make outside osk, chosen at random."""
    files = sorted(vault.root.glob("Domain/*/*.md"))
    kind = rng.choice(["edit", "make", "remove", "rename", "id", "title", "invalid"])
    if not files or kind == "make":
        write(vault, f"{rng.choice(folders)}/Made {trial} {rng.randrange(99)}.md",
              node_text(20 + rng.randrange(80), "made by hand"), settled=rng.random() < 0.5)
        return
    path = rng.choice(files)
    if kind == "edit":
        text = path.read_text(encoding="utf-8").replace("body", "edited body", 1)
        with open(path, "r+", encoding="utf-8") as handle:  # in place: the folder's stat kept
            handle.write(text)
            handle.truncate()
    elif kind == "remove":
        path.unlink()
    elif kind == "rename":
        path.rename(path.with_name(f"Renamed {trial} {rng.randrange(99)}.md"))
    elif kind == "id":  # a second file takes another's id
        other = rng.choice(files).read_text(encoding="utf-8").split("\n", 2)[1]
        lines = path.read_text(encoding="utf-8").split("\n")
        path.write_text("\n".join([lines[0], other, *lines[2:]]), encoding="utf-8")
    elif kind == "title":  # a second file, in the other folder, claims a title case-folded
        folder = next(f for f in folders if not str(path.parent).endswith(f))
        write(vault, f"{folder}/{path.stem.upper()}.md", node_text(
            30 + rng.randrange(70), "the same title"), settled=rng.random() < 0.5)
    else:
        write(vault, f"{rng.choice(folders)}/{path.stem.lower()}.md", "no front matter\n")
