"""A fresh `osk search` in a vault whose nodes cite their sources answers from the store, with
the engine's hits and markers (``recheck`` included) whatever happened to what they cite: the
hits' recorded citations come from the rechecks table kept on disk
(``osk.provenance.recheck_store``), their targets from the files. When that table cannot vouch
for the ledger (two devices' lines merged, a sync that reordered it) the search gives way to
the engine, which mends it. Real engines, real files; each answer from the store is compared
with a fresh engine's, and ``quick_search.search`` returning an answer (not None) is the store
path taken."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import writekit
from test_quick_search import CHILD, NOT_IMPORTED, age
from writekit import create

from osk.calls.request import NodeEdit
from osk.engine.core import Engine
from osk.provenance import recheck_store
from osk.provenance.recheck_table import LEDGER, build_table
from osk.reads import quick_search
from osk.search.ranking import SearchResult
from osk.store.ledger import Ledger, Mark
from osk.store.vault import Vault

repo, eng, hub = writekit.repo, writekit.eng, writekit.hub  # shared fixtures
QUERY = "walrus"


def settle(vault: Vault, *more: Path) -> None:
    """Every node file (and ``more``) an hour old, and the folders past their race window: a
    look taken now vouches for all of it (``test_quick_search.folders_settle``)."""
    for path in [*vault.root.glob("Scope/**/*.md"), *vault.root.glob("Domain/**/*.md"),
                 *vault.root.glob("_raw/**/*.md"), *more]:
        age(path)
    time.sleep(2.1)


def markers(result: SearchResult) -> dict[str, list[str]]:
    return {hit.title: list(hit.markers) for hit in result.hits}


def engine_answer(vault: Vault, repo: Path, query: str = QUERY) -> SearchResult:
    """A fresh engine's answer (it records the look the store path checks, and mends the
    rechecks table on disk)."""
    return Engine.open(vault, cwd=repo, actor="user").search(query)


def quick(vault: Vault, repo: Path, query: str = QUERY) -> SearchResult | None:
    return quick_search.search(vault.root, repo, None, query, None)


def same_from_store(vault: Vault, repo: Path) -> dict[str, list[str]]:
    """The engine's answer, then the store's: equal, hit for hit and marker for marker."""
    engine = engine_answer(vault, repo)
    assert quick(vault, repo) == engine
    return markers(engine)


def stored_mark(vault: Vault) -> Mark:
    with sqlite3.connect(vault.state(*recheck_store.FILE)) as db:
        (value,) = db.execute("SELECT value FROM meta WHERE key = 'mark'").fetchone()
    mark = Mark.from_json(json.loads(value))
    assert mark is not None
    return mark


def store_matches_ledger(vault: Vault) -> None:
    """The table on disk, read for every citing node, is the table read from the whole
    ledger, and covers all of it."""
    whole = build_table(Ledger(vault, LEDGER).read())
    stored = recheck_store.citations_of(vault, Ledger(vault, LEDGER), whole)
    assert stored == whole
    assert stored_mark(vault).size == vault.ledger_path(LEDGER).stat().st_size
    # and who cites each node, row for row (``osk read --json``'s citers)
    cites = {(node_id, citing_id) for citing_id, value in whole.items()
             for node_id in recheck_store.cited_nodes(value)}
    with sqlite3.connect(vault.state(*recheck_store.FILE)) as db:
        assert set(db.execute("SELECT node, citing FROM cited")) == cites
    for node_id in {node_id for node_id, _ in cites} | set(whole):
        assert recheck_store.citers_of(vault, Ledger(vault, LEDGER), node_id) == {
            citing_id for cited, citing_id in cites if cited == node_id}


@pytest.fixture
def chain(eng: Engine, hub: str, repo: Path) -> Engine:
    """Source <- Claim <- Summary, plus a node citing a project file: every body says walrus."""
    create(eng, "Source", body="The walrus limit is 10.\n")
    create(eng, "Claim", body="We allow 10 walrus requests.\n", derived_from=("[[Source]]",))
    create(eng, "Summary", body="Walrus limits: see Claim.\n", derived_from=("[[Claim]]",))
    create(eng, "Entry", body="The walrus app starts here.\n", derived_from=("file:src/app.py",))
    return eng


def test_hand_edits_engine_rewrites_and_file_changes_are_marked_as_the_engine_marks_them(
        chain: Engine, vault: Vault, repo: Path):
    settle(vault)
    assert all("recheck" not in found for found in same_from_store(vault, repo).values())
    store_matches_ledger(vault)  # the writes kept it in step

    # a cited node rewritten through the engine: its citer is stale
    chain.update_node("Source", NodeEdit(old_text="10", new_text="20"))
    settle(vault)
    found = same_from_store(vault, repo)
    assert "recheck" in found["Claim"] and "recheck" not in found["Summary"]

    # a cited node edited by hand, and a project file changed: their citers are stale
    claim = next(vault.root.glob("Scope/**/Claim.md"))
    claim.write_text(claim.read_text(encoding="utf-8").replace("allow", "permit"),
                     encoding="utf-8")
    (repo / "src" / "app.py").write_text("print('walrus')\n", encoding="utf-8")
    settle(vault)
    found = same_from_store(vault, repo)
    assert {"Claim", "Summary", "Entry"} <= {t for t, m in found.items() if "recheck" in m}

    # a citation removed by hand is no candidate (the next write drops its pair)
    entry = next(vault.root.glob("Scope/**/Entry.md"))
    text = entry.read_text(encoding="utf-8")
    entry.write_text(text.replace('derived-from:\n  - "file:src/app.py"\n', "derived-from: []\n")
                     .replace("  - file:src/app.py\n", ""), encoding="utf-8")
    settle(vault)
    found = same_from_store(vault, repo)
    assert "recheck" not in found["Entry"], found
    store_matches_ledger(vault)


def test_a_cited_raw_round_redacted_is_marked_as_the_engine_marks_it(
        eng: Engine, vault: Vault, repo: Path, hub: str, monkeypatch: pytest.MonkeyPatch):
    from osk.authority import protection
    from osk.verbs import redaction

    secret = "tulip-7-orbit-lamp"
    ref = eng.append_raw("talk", user=f"the walrus login is {secret}", assistant="Mounted.")
    create(eng, "Mount", body="Mounted the walrus share.\n", derived_from=(ref.coordinate,))
    monkeypatch.setattr(protection, "require_person", lambda verb: None)  # as at a terminal
    redaction.redact(vault, redaction.parse("_raw/proj/talk"), secret)
    settle(vault)
    assert "recheck" in same_from_store(vault, repo)["Mount"]
    [cand] = Engine.open(vault, cwd=repo).recheck().candidates
    assert cand.reason == "target-redacted"  # the reason the shared rule found


def test_a_writer_killed_before_its_row_leaves_a_table_readers_bring_up_to_date(
        chain: Engine, vault: Vault, repo: Path):
    chain.update_node("Source", NodeEdit(old_text="10", new_text="20"))
    settle(vault)
    assert "recheck" in same_from_store(vault, repo)["Claim"]
    behind = stored_mark(vault)
    # Another process re-cites Claim and is killed between the ledger line and its row.
    script = (
        "import os, sys\n"
        "from pathlib import Path\n"
        "from osk.engine.core import Engine\n"
        "from osk.store.ledger import Ledger\n"
        "append = Ledger.append\n"
        "def killed(self, *args, **kwargs):\n"
        "    append(self, *args, **kwargs)\n"
        "    if self.name == 'rechecks':\n"
        "        os._exit(9)\n"
        "Ledger.append = killed\n"
        "eng = Engine.open(Path(sys.argv[1]), cwd=Path(sys.argv[2]))\n"
        "eng.read_node('Source')\n"
        "eng.recite([c.id for c in eng.recheck().candidates if c.citing_title == 'Claim'])\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(vault.root), str(repo)],
                          capture_output=True, text=True, env={**os.environ, "OSK_SEMANTIC": "0"})
    assert done.returncode == 9, done.stderr
    assert stored_mark(vault) == behind  # the line is in the ledger, not in the table
    assert vault.ledger_path(LEDGER).stat().st_size > behind.size
    answer = quick(vault, repo)  # before any engine: the tail is read and applied
    assert answer is not None and "recheck" not in markers(answer)["Claim"]
    assert answer == engine_answer(vault, repo)
    store_matches_ledger(vault)  # the engine's read of the ledger caught the table up


def test_a_citer_the_table_on_disk_has_not_taken_is_listed_from_the_ledger_after_it(
        chain: Engine, vault: Vault, repo: Path):
    """A node citing Source whose writer left the table on disk behind (as if killed before
    its row, above): a fresh `osk read --json` of Source lists it from the ledger's lines after
    the table's mark, as the engine lists it."""
    from osk.reads import quick_read

    settle(vault)
    engine_answer(vault, repo)
    behind = stored_mark(vault)
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from osk.calls.request import NewNode\n"
        "from osk.engine.core import Engine\n"
        "from osk.provenance.recheck_store import CitationStore\n"
        "CitationStore.catch_up = lambda self, *args, **kwargs: None\n"
        "eng = Engine.open(Path(sys.argv[1]), cwd=Path(sys.argv[2]))\n"
        "eng.create_node(NewNode('Digest', 'About Digest', 'The walrus digest.\\n',\n"
        "                        space='Scope', cluster='auth', drafter='test-model',\n"
        "                        derived_from=('[[Source]]',)))\n"
        "eng.search('walrus')\n"  # its index takes the write, and records its look
    )
    subprocess.run([sys.executable, "-c", script, str(vault.root), str(repo)], check=True,
                   capture_output=True, env={**os.environ, "OSK_SEMANTIC": "0"})
    assert stored_mark(vault) == behind  # the line is in the ledger, not in the table
    found = quick_read.read(vault.root, repo, None, "Source", related=True)
    assert found is not None
    assert {near.title for near in found.related if near.why.startswith("cites")} == {
        "Claim", "Digest"}
    with sqlite3.connect(vault.state(*recheck_store.FILE)) as db:
        assert db.execute("SELECT count(*) FROM cited").fetchone() == (2,)  # no Digest row
    assert found == Engine.open(vault, cwd=repo, actor="user").read_node("Source")


def _device_b(vault: Vault, tmp_path: Path, repo: Path) -> tuple[Vault, Engine]:
    other = tmp_path / "device-b"
    shutil.copytree(vault.root, other)
    (other / ".osk" / "device-id").unlink()
    shutil.rmtree(other / ".osk" / "index", ignore_errors=True)
    return Vault(other), Engine.open(Vault(other), cwd=repo)


def test_two_devices_lines_merged_give_way_to_the_engine_which_mends_the_table(
        chain: Engine, vault: Vault, repo: Path, tmp_path: Path):
    b_vault, device_b = _device_b(vault, tmp_path, repo)
    chain.update_node("Source", NodeEdit(old_text="10", new_text="20"))
    device_b.update_node("Source", NodeEdit(old_text="10", new_text="20"))
    chain.read_node("Source")
    chain.recite([c.id for c in chain.recheck().candidates])
    device_b.update_node("Claim", NodeEdit(old_text="allow", new_text="permit"))
    settle(vault)
    same_from_store(vault, repo)
    path = vault.ledger_path(LEDGER)
    ours = path.read_bytes().splitlines(keepends=True)
    theirs = b_vault.ledger_path(LEDGER).read_bytes().splitlines(keepends=True)
    with open(path, "ab") as handle:  # what a union merge adds after our lines, in place
        handle.write(b"".join(line for line in theirs if line not in ours))
    assert quick(vault, repo) is None  # their lines name other heads: not a plain append
    found = same_from_store(vault, repo)  # the engine read it whole, and mended the table
    assert "recheck" in found["Claim"]
    store_matches_ledger(vault)


def test_a_ledger_whose_earlier_lines_a_sync_moved_gives_way_to_the_engine(
        chain: Engine, vault: Vault, repo: Path, tmp_path: Path):
    b_vault, device_b = _device_b(vault, tmp_path, repo)
    create(device_b, "Remote note", body="A walrus from afar.\n", derived_from=("[[Source]]",))
    chain.update_node("Claim", NodeEdit(old_text="allow", new_text="permit"))  # a line here too
    settle(vault)
    same_from_store(vault, repo)
    path = vault.ledger_path(LEDGER)
    ours = path.read_bytes().splitlines(keepends=True)
    theirs = b_vault.ledger_path(LEDGER).read_bytes().splitlines(keepends=True)
    common = [line for line in ours if line in theirs]
    # A sync lands the remote's lines after the common ones and ours after those (osk.sync
    # landing: new + tail). Written in place here, same inode: the digest before the mark
    # is what sees it.
    with open(path, "r+b") as handle:
        handle.write(b"".join(common + [x for x in theirs if x not in ours]
                              + [x for x in ours if x not in common]))
    assert os.stat(path).st_size > stored_mark(vault).size
    assert Ledger(vault, LEDGER).read_after(stored_mark(vault)) is None
    assert quick(vault, repo) is None
    same_from_store(vault, repo)
    store_matches_ledger(vault)


def test_a_fresh_osk_search_in_a_vault_that_cites_answers_from_the_store(
        chain: Engine, vault: Vault, repo: Path):
    chain.update_node("Source", NodeEdit(old_text="10", new_text="20"))
    settle(vault)
    engine = engine_answer(vault, repo)
    env = {**os.environ, "OSK_SEMANTIC": "0"}
    done = subprocess.run([sys.executable, "-c", CHILD, "--vault", str(vault.root), "search",
                           QUERY, "--json"], cwd=repo, capture_output=True, text=True,
                          encoding="utf-8", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "QUICK"
    hits = {hit["title"]: hit.get("markers", []) for hit in json.loads(done.stdout)["hits"]}
    assert hits == markers(engine) and "recheck" in hits["Claim"]
    # and a hit citing a node costs it none of the heavy imports a plain search leaves out
    # (the link parser, osk.store.edges, it does need)
    child = CHILD.replace("print('ENGINE' if 'osk.engine.core' in sys.modules else 'QUICK', ",
                          "print(' '.join(sorted(sys.modules)), ")
    done = subprocess.run([sys.executable, "-c", child, "--vault", str(vault.root), "search",
                           "requests", "--json"], cwd=repo, capture_output=True, text=True,
                          encoding="utf-8", env=env, check=True)
    assert [hit["title"] for hit in json.loads(done.stdout)["hits"]] == ["Claim"]
    modules = set(done.stderr.split())
    assert "osk.provenance.pairs" in modules
    heavy = set(NOT_IMPORTED) - {"osk.store.edges"}
    assert modules.isdisjoint(heavy), modules & heavy


def test_a_damaged_table_on_disk_is_never_read_and_the_next_engine_rebuilds_it(
        chain: Engine, vault: Vault, repo: Path):
    chain.update_node("Source", NodeEdit(old_text="10", new_text="20"))
    settle(vault)
    same_from_store(vault, repo)
    store = vault.state(*recheck_store.FILE)
    for suffix in ("-wal", "-shm"):
        Path(f"{store}{suffix}").unlink(missing_ok=True)
    store.write_bytes(b"not a database, whatever it was" * 100)
    assert quick(vault, repo) is None
    assert "recheck" in same_from_store(vault, repo)["Claim"]  # one engine mended it
    store_matches_ledger(vault)


def test_a_cited_node_edited_by_hand_is_read_by_the_store_and_its_citer_marked(
        chain: Engine, vault: Vault, repo: Path):
    """No engine between the hand edit and the fresh search: the store reads the edited
    node (``quick_search._amend``) and judges its citers against its body as it is now, as
    a fresh engine does, with both queries: a word two nodes hold, and one every body says
    (walrus: its floor after the edit summed from the counts of dfs the index on disk keeps,
    moved for the words the edit gained and lost)."""
    settle(vault)
    engine_answer(vault, repo)  # the look the store path checks
    claim = next(vault.root.glob("Scope/**/Claim.md"))
    aside = claim.with_name(".Claim.md.swp")  # saved as an editor saves: renamed over it
    aside.write_text(claim.read_text(encoding="utf-8").replace("allow", "permit"),
                     encoding="utf-8")
    os.replace(aside, claim)
    answers = {query: quick(vault, repo, query) for query in (QUERY, "limits")}
    for query, answered in answers.items():  # the first engine takes the edit into the index
        assert answered is not None, f"the store did not answer {query!r}"
        assert answered == engine_answer(vault, repo, query)
        assert "recheck" in markers(answered)["Summary"]
