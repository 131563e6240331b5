"""SearchIndex: ranking rules, exclusions, isolation, markers, freshness and persistence."""

from __future__ import annotations

import itertools
import os
import time
from array import array
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from rank_bm25 import BM25Okapi

from osk.errors import SearchError
from osk.search import SearchIndex, recallfile, regions, scope_visibility, tokenize
from osk.search import index as index_mod
from osk.store import contract, node
from osk.store.catalog import Catalog
from osk.store.fsutil import RACE_WINDOW_NS, atomic_write
from osk.store.vault import Vault

_ids = itertools.count(1)


def write_node(vault: Vault, rel: str, body: str, summary: str = "A note.", **meta: object):
    data = {
        "id": f"id-{next(_ids)}", "created": "2026-11-29T18:00+00:00",
        "updated": "2026-11-29T18:00+00:00", "author": "user", "drafter": "human",
        "summary": summary, **meta,
    }
    frontmatter = contract.Frontmatter.model_validate(data)
    atomic_write(vault.abs(rel), node.render(frontmatter, body))
    return frontmatter.id


def titles(hits) -> list[str]:
    return [hit.title for hit in hits]


def fresh(vault: Vault, **kwargs) -> SearchIndex:
    """An index that walks the files before every search (no throttle), for exact tests."""
    return SearchIndex(vault, refresh_interval=kwargs.pop("refresh_interval", 0.0), **kwargs)


# -- ranking ---------------------------------------------------------------------------------
def test_scores_equal_bm25okapi_over_title_summary_and_body(vault: Vault):
    notes = {
        "Domain/Cargo features.md": ("Features must be additive.", "cargo features unify across "
                                     "the graph so a feature must only add code"),
        "Domain/Tick rate.md": ("Server tick.", "the server runs its simulation at a fixed tick"),
        "Domain/Logging.md": ("What we log.", "tracing spans go to stderr; the server logs json"),
    }
    for rel, (summary, body) in notes.items():
        write_node(vault, rel, body, summary=summary)
    corpus = [tokenize(f"{Path(rel).stem} {summary} {body}") for rel, (summary, body)
              in notes.items()]
    query = "server tick features"
    expected = dict(zip(notes, BM25Okapi(corpus).get_scores(tokenize(query)), strict=True))
    hits = fresh(vault).search(query, k=10)
    assert hits
    for hit in hits:
        assert hit.bm25 == pytest.approx(float(expected[hit.path]), abs=1e-9)


def test_a_query_equal_to_a_title_puts_that_node_first_whatever_the_scores(vault: Vault):
    write_node(vault, "Domain/Release.md", "short", summary="Short.")
    write_node(vault, "Domain/Release checklist.md",
               "release release release: tag the release, publish the release", summary="r")
    for i in range(4):  # a corpus where "release" is a rare word, as it would be
        write_node(vault, f"Domain/Other {i}.md", "unrelated words about ducks")
    hits = fresh(vault).search(" RELEASE ")
    assert titles(hits)[:2] == ["Release", "Release checklist"]
    assert hits[0].match == "title" and hits[0].bm25 < hits[1].bm25


def test_a_title_typed_with_punctuation_titles_cannot_hold_still_ranks_first(vault: Vault):
    write_node(vault, "Domain/Lag compensation - server-side rewind.md", "We rewind 200 ms.")
    write_node(vault, "Domain/Rewind notes.md", "rewind rewind rewind server side lag")
    hits = fresh(vault).search("Lag compensation: server-side rewind")
    assert hits[0].title == "Lag compensation - server-side rewind"
    assert hits[0].match == "title-loose"


def test_korean_and_mixed_notes_are_found_by_korean_and_by_english_queries(vault: Vault):
    write_node(vault, "Domain/틱 스파이크 원인.md",
               "매치 중에 틱이 40ms 넘게 튀는 원인은 LOH 할당과 gen2 GC 이다.")
    write_node(vault, "Domain/Unrelated.md", "release notes for the launcher")
    index = fresh(vault)
    assert titles(index.search("틱이 튀는 원인")) == ["틱 스파이크 원인"]
    assert titles(index.search("gen2 GC spikes")) == ["틱 스파이크 원인"]
    assert titles(index.search("what causes the spike")) == ["틱 스파이크 원인"]  # 원인 ← cause


def test_k_defaults_to_eight_and_is_capped_at_fifty(vault: Vault):
    for i in range(60):
        write_node(vault, f"Domain/Note {i}.md", f"common word number {i}")
    index = fresh(vault)
    assert len(index.search("common")) == 8
    assert len(index.search("common", k=500)) == 50
    with pytest.raises(SearchError):
        index.search("common", k=0)
    with pytest.raises(SearchError):
        index.search("   ")


def test_workbench_and_governance_nodes_never_appear_beside_a_found_control(vault: Vault):
    write_node(vault, "Domain/Zebra control.md", "the zebra quokka note")
    write_node(vault, "Workbench/Zebra transit.md", "zebra quokka zebra quokka")
    write_node(vault, "_governance/Zebra rule.md", "zebra quokka zebra quokka")
    (vault.root / "_governance").joinpath("zebra.md").write_text("zebra quokka", "utf-8")
    index = fresh(vault)
    assert titles(index.search("zebra quokka", k=50)) == ["Zebra control"]
    assert titles(index.search("Zebra transit")) == ["Zebra control"]  # not its own title
    catalog_like = Catalog(vault)  # even when handed such a path, sync ignores it
    index.sync(catalog_like, _changes(added=("Workbench/Zebra transit.md",)))
    assert titles(index.search("zebra quokka", k=50)) == ["Zebra control"]


def test_own_scope_ranks_above_domain_and_person_which_rank_above_other_scopes(vault: Vault):
    body = "how we ship a release: build, tag, upload"
    write_node(vault, "Scope/api/Release api.md", body)
    write_node(vault, "Scope/web/Release web.md", body)
    write_node(vault, "Domain/Release in general.md", body)
    index = fresh(vault)
    assert titles(index.search("ship release", scope="web")) == [
        "Release web", "Release in general", "Release api"]
    assert titles(index.search("ship release", scope="api"))[0] == "Release api"


def test_isolation_hides_another_scope_and_a_shared_scope_stays_visible(vault: Vault):
    write_node(vault, "Scope/alpha/Secret plan.md", "the walrus migration plan")
    write_node(vault, "Domain/Walrus basics.md", "a walrus is a marine mammal")
    index = fresh(vault)
    from_beta = scope_visibility(vault, "beta")
    assert titles(index.search("walrus plan", scope="beta", visible=from_beta)) == [
        "Walrus basics"]
    assert "Secret plan" in titles(index.search("walrus plan", scope="alpha",
                                                visible=scope_visibility(vault, "alpha")))
    settings = vault.root / "osk.toml"
    text = settings.read_text("utf-8")
    assert "shared_scopes = []" in text
    settings.write_text(text.replace("shared_scopes = []", 'shared_scopes = ["alpha"]'), "utf-8")
    shared = scope_visibility(vault, "beta")
    assert "Secret plan" in titles(index.search("walrus plan", scope="beta", visible=shared))


def test_an_invisible_node_is_not_returned_even_for_its_exact_title(vault: Vault):
    write_node(vault, "Scope/alpha/Secret plan.md", "the walrus migration plan")
    hits = fresh(vault).search("Secret plan", scope="beta",
                               visible=scope_visibility(vault, "beta"))
    assert hits == []


def test_markers_from_the_callback_appear_on_the_hits_they_name(vault: Vault):
    stale = write_node(vault, "Domain/Stale citation.md", "pelican facts that cite a source")
    clean = write_node(vault, "Domain/Clean note.md", "pelican facts without trouble")
    asked: list[list[str]] = []

    def markers(ids: list[str]) -> dict[str, list[str]]:
        asked.append(ids)
        return {stale: ["recheck", "conflict"]}

    hits = {hit.id: hit for hit in fresh(vault).search("pelican", markers=markers)}
    assert hits[stale].markers == ("conflict", "recheck")
    assert hits[clean].markers == ()
    assert sorted(asked[0]) == sorted([stale, clean])


def test_a_replaced_body_is_no_longer_found_by_its_old_text_but_by_its_new(vault: Vault):
    write_node(vault, "Domain/Control.md", "the heron flies over the marsh")
    write_node(vault, "Domain/Changing.md", "the heron nests in the reeds")
    catalog = Catalog(vault)
    index = SearchIndex(vault, refresh_interval=3600)
    index.sync(catalog, catalog.refresh())
    assert set(titles(index.search("heron"))) == {"Control", "Changing"}
    write_node(vault, "Domain/Changing.md", "the kingfisher dives for fish")
    index.sync(catalog, catalog.refresh())
    assert titles(index.search("heron")) == ["Control"]  # positive control still found
    assert titles(index.search("kingfisher")) == ["Changing"]
    assert titles(index.search("nests reeds")) == []


def test_a_superseded_node_is_marked_and_ranked_below_the_node_that_replaces_it(vault: Vault):
    write_node(vault, "Domain/Tick rate 20 Hz.md", "the server tick rate is 20 Hz")
    write_node(vault, "Domain/Tick rate raised.md", "we raised it to 30 Hz in season 3",
               supersedes="[[Tick rate 20 Hz]]", valid_from="2026-05-01T00:00+00:00")
    hits = fresh(vault).search("server tick rate")
    assert titles(hits) == ["Tick rate raised", "Tick rate 20 Hz"]
    assert hits[1].markers == ("superseded",)
    assert hits[0].markers == ()


@pytest.mark.parametrize("statement", [
    '**Supersedes** "Tick rate: 20 Hz" from season 2.',  # a title as a person types it
    "This replaces [[Tick rate 20 Hz]].",
    '**"Tick rate 20 Hz" 결정을 대체** (시즌 3).',
])
def test_a_node_whose_text_says_it_supersedes_another_ranks_as_its_successor(
        vault: Vault, statement: str):
    write_node(vault, "Domain/Tick rate 20 Hz.md", "the server tick rate is 20 Hz")
    write_node(vault, "Domain/Tick rate raised.md", f"{statement}\n\nNow 30 Hz on the server.")
    hits = fresh(vault).search("server tick rate 20 Hz")
    assert titles(hits) == ["Tick rate raised", "Tick rate 20 Hz"]
    assert hits[1].markers == ("superseded",) and hits[0].markers == ()


@pytest.mark.parametrize(("older", "newer"), [
    # the other way round: the older node saying what replaced it names no successor of its own
    ('It is superseded by "Tick rate raised".', ""),
    ("It was replaced by [[Tick rate raised]].", ""),
    ("", 'Supersedes "Tick rate 10 Hz", which no node is.'),
    ("", "The rate replaces nothing; see Tick rate 20 Hz."),  # the verb, but no quoted title
])
def test_text_that_names_no_supersession_changes_nothing(vault: Vault, older: str, newer: str):
    write_node(vault, "Domain/Tick rate 20 Hz.md", f"the server tick rate is 20 Hz. {older}")
    write_node(vault, "Domain/Tick rate raised.md", f"{newer} Now 30 Hz on the server.")
    hits = fresh(vault).search("server tick rate")
    assert set(titles(hits)) == {"Tick rate 20 Hz", "Tick rate raised"}
    assert all(hit.markers == () for hit in hits)


def test_as_of_returns_only_nodes_valid_then(vault: Vault):
    write_node(vault, "Domain/Old host.md", "docs are hosted on netlify",
               created="2025-06-01T00:00+00:00", valid_to="2026-02-01T00:00+00:00")
    write_node(vault, "Domain/New host.md", "docs are hosted on pages",
               created="2026-01-20T00:00+00:00", valid_from="2026-02-01T00:00+00:00",
               supersedes="[[Old host]]")
    write_node(vault, "Domain/Site costs.md", "what the docs site costs",
               created="2026-03-01T00:00+00:00")
    index = fresh(vault)
    assert titles(index.search("docs hosted", as_of="2026-01-15T00:00+00:00")) == ["Old host"]
    assert titles(index.search("docs hosted", as_of="2026-02-15")) == ["New host"]
    now = index.search("docs hosted")
    assert titles(now)[:2] == ["New host", "Old host"]
    assert set(now[1].markers) == {"expired", "superseded"}
    with pytest.raises(SearchError):
        index.search("docs", as_of="last tuesday")


# -- freshness -----------------------------------------------------------------------------
def test_a_hand_edit_add_and_delete_are_searchable_one_interval_later(vault: Vault):
    write_node(vault, "Domain/Existing.md", "the otter sleeps")
    write_node(vault, "Domain/Doomed.md", "the badger digs")
    index = SearchIndex(vault)  # the default throttle: one walk per second at most
    assert titles(index.search("otter")) == ["Existing"]
    write_node(vault, "Domain/Existing.md", "the otter swims with a narwhal")
    write_node(vault, "Domain/Added by hand.md", "a capybara appears")
    os.remove(vault.abs("Domain/Doomed.md"))
    # The bound: a search that starts one interval after the edits walks (the interval is
    # counted from when the last walk began), however slowly the machine runs.
    time.sleep(index.refresh_interval)
    assert titles(index.search("narwhal")) == ["Existing"]
    assert titles(index.search("capybara")) == ["Added by hand"]
    assert titles(index.search("badger")) == []


def test_searches_within_the_throttle_interval_do_not_walk_the_files(vault: Vault, monkeypatch):
    write_node(vault, "Domain/Otter.md", "the otter sleeps")
    walks = []
    real_walk = index_mod._walk
    monkeypatch.setattr(index_mod, "_walk", lambda root: walks.append(1) or real_walk(root))
    index = SearchIndex(vault, refresh_interval=3600)
    for _ in range(20):
        index.search("otter")
    assert len(walks) == 1  # the initial build; no search stat-ed the files again
    eager = SearchIndex(vault, refresh_interval=0.0)
    for _ in range(3):
        eager.search("otter")
    assert len(walks) == 1 + 3


def test_a_same_size_rewrite_within_the_mtime_window_is_still_re_read(vault: Vault):
    rel = "Domain/Racy.md"
    write_node(vault, rel, "the word is apple")
    path = vault.abs(rel)
    index = fresh(vault)
    assert titles(index.search("apple")) == ["Racy"]
    before = path.stat()
    with open(path, "r+", encoding="utf-8") as handle:  # same inode, same size
        text = handle.read()
        handle.seek(0)
        handle.write(text.replace("apple", "melon"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (
        before.st_size, before.st_mtime_ns, before.st_ino)  # the stat key cannot tell
    assert titles(index.search("melon")) == ["Racy"]
    assert titles(index.search("apple")) == []


def test_a_file_older_than_the_race_window_is_trusted_by_its_stat_key(vault: Vault):
    rel = "Domain/Settled.md"
    write_node(vault, rel, "the word is apple")
    path = vault.abs(rel)
    old = time.time_ns() - 3600 * 10**9
    os.utime(path, ns=(old, old))
    index = fresh(vault)
    assert titles(index.search("apple")) == ["Settled"]
    reads = []
    real_read = SearchIndex._read_file
    SearchIndex._read_file = lambda self, *a: reads.append(a[0]) or real_read(self, *a)
    try:
        for _ in range(3):
            index.search("apple")
    finally:
        SearchIndex._read_file = real_read
    assert reads == []  # walks compared stat keys only


def test_sync_takes_what_the_catalog_read_without_walking_or_rebuilding(vault: Vault,
                                                                          monkeypatch):
    write_node(vault, "Domain/First.md", "the lynx hunts")
    catalog = Catalog(vault)
    index = SearchIndex(vault, refresh_interval=3600)
    index.sync(catalog, catalog.refresh())
    index.search("lynx")
    monkeypatch.setattr(index_mod, "_walk", _forbidden("walk"))
    monkeypatch.setattr(SearchIndex, "_build", _forbidden("rebuild"))
    monkeypatch.setattr(recallfile, "RecallBuild", _forbidden("recall file rewrite"))
    write_node(vault, "Domain/Second.md", "the lynx and the ocelot")
    catalog.note_written("Domain/Second.md")
    index.sync(catalog, _changes(added=("Domain/Second.md",)))
    assert titles(index.search("ocelot")) == ["Second"]
    with closing(recallfile.open_reader(index.directory)) as db:  # committed there, in place
        assert db.execute("SELECT count(*) FROM docs WHERE path = 'Domain/Second.md'"
                          ).fetchone() == (1,)


def _recall_lengths(index: SearchIndex) -> tuple[list[int], dict[int, int]]:
    """(the recall file's length array, each document row's own length column)."""
    import sqlite3
    from array import array

    db = sqlite3.connect(recallfile.path_in(index.directory))
    try:
        lengths = array("I", db.execute("SELECT data FROM blobs WHERE name = 'lengths'"
                                        ).fetchone()[0])
        rows = dict(db.execute("SELECT row, length FROM docs").fetchall())
    finally:
        db.close()
    return list(lengths), rows


def test_the_recall_file_sets_a_length_in_place_with_room_for_the_next_creates(vault: Vault):
    write_node(vault, "Domain/Built.md", "the heron stands")
    catalog = Catalog(vault)
    index = SearchIndex(vault, refresh_interval=3600)
    index.sync(catalog, catalog.refresh())
    index.search("heron")
    sizes = []
    for name, body in (("Added", "the heron and the egret"), ("Next", "an egret fishes"),
                       ("Third", "the egret flies off")):
        write_node(vault, f"Domain/{name}.md", body)
        catalog.note_written(f"Domain/{name}.md")
        index.sync(catalog, _changes(added=(f"Domain/{name}.md",)))
        lengths, rows = _recall_lengths(index)
        sizes.append(len(lengths))
        assert len(lengths) > max(rows) + 1  # room: the next create sets 4 bytes in place
        assert all(lengths[row] == length > 0 for row, length in rows.items())
        assert not any(lengths[row] for row in range(len(lengths)) if row not in rows)
    assert sizes[0] == sizes[1] == sizes[2]  # the creates after the first grew nothing
    (vault.root / "Domain/Next.md").unlink()
    catalog.note_removed("Domain/Next.md")
    index.sync(catalog, _changes(removed=("Domain/Next.md",)))
    lengths, rows = _recall_lengths(index)
    assert len(rows) == 3 and not any(lengths[row] for row in range(len(lengths))
                                      if row not in rows)
    assert set(titles(index.search("egret"))) == {"Added", "Third"}


# -- persistence -----------------------------------------------------------------------------
def test_a_new_process_loads_the_index_from_device_state_with_committed_changes(vault: Vault):
    write_node(vault, "Domain/Persisted.md", "the ibis wades")
    first = SearchIndex(vault, refresh_interval=3600)
    assert titles(first.search("ibis")) == ["Persisted"]
    write_node(vault, "Domain/Committed.md", "the ibis and the stork")
    catalog = Catalog(vault)
    first.sync(catalog, catalog.refresh())
    second = SearchIndex(vault, refresh_interval=3600)
    assert len(second) == 2 and second.load_report == "loaded"
    assert titles(second.search("stork")) == ["Committed"]
    assert (vault.root / ".gitignore").read_text("utf-8").find(".osk") >= 0


def _damage_recall_file(directory: Path, damage: str) -> None:
    """Damage the index's one store (``recallfile``) as ``damage`` says."""
    import sqlite3

    path = recallfile.path_in(directory)
    with closing(sqlite3.connect(path, isolation_level=None)) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every page in the file itself
        if damage == "other schema":
            db.execute("UPDATE meta SET value = '99' WHERE key = 'schema'")
        elif damage == "other parameters":
            db.execute("UPDATE meta SET value = '{\"k1\": 9}' WHERE key = 'params'")
        elif damage == "a block's type":
            db.execute("UPDATE postings SET rows = x'5a0001' "
                       "WHERE term = (SELECT min(term) FROM postings)")
        elif damage == "a length":
            db.execute("UPDATE docs SET length = length + 1 WHERE path = 'Domain/Crane.md'")
        elif damage == "a record":
            db.execute("UPDATE docs SET record = '[\"not\", \"a record\"]' "
                       "WHERE path = 'Domain/Crane.md'")
    data = path.read_bytes()
    if damage == "missing":
        recallfile.remove(directory)
    elif damage == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        path.write_bytes(b"\x00\xff not an index" * 300)


@pytest.mark.parametrize("damage", ["missing", "truncated", "garbage", "other schema",
                                    "other parameters", "a block's type", "a length",
                                    "a record"])
def test_a_missing_or_damaged_index_is_rebuilt_and_answers_the_same(vault: Vault, damage):
    write_node(vault, "Domain/Crane.md", "the crane dances")
    write_node(vault, "Scope/app/Heron.md", "the heron and the crane fish")
    catalog = Catalog(vault)
    first = SearchIndex(vault, refresh_interval=3600)
    expected = first.search("crane")
    write_node(vault, "Domain/Later.md", "a crane again")  # one committed change
    first.sync(catalog, catalog.refresh())
    expected = first.search("crane")
    _damage_recall_file(first.directory, damage)
    second = SearchIndex(vault, refresh_interval=0.0)
    assert second.search("crane") == expected
    assert second.load_report.startswith(("rebuilt", "built")), second.load_report
    third = SearchIndex(vault, refresh_interval=3600)  # and the repaired file loads cleanly
    assert third.search("crane") == expected and third.load_report == "loaded"


def test_a_file_read_again_past_the_mtime_race_is_not_read_again_after_a_load(
        vault: Vault, monkeypatch: pytest.MonkeyPatch):
    """A file read within the race window of its mtime is read again by every walk until it
    is old enough; found the same then, only its stat and read time change, and the store
    keeps the read time, so a new process does not read it again on every load."""
    write_node(vault, "Domain/Stilt.md", "the stilt wades")
    first = SearchIndex(vault, refresh_interval=0.0)
    assert titles(first.search("stilt")) == ["Stilt"]
    assert first.doc("Domain/Stilt.md").racy  # type: ignore[union-attr]  # just written
    real_ns = time.time_ns
    with monkeypatch.context() as later:
        later.setattr(index_mod.time, "time_ns", lambda: real_ns() + 2 * RACE_WINDOW_NS)
        first.search("stilt")  # the walk reads it again: past the race now
    assert not first.doc("Domain/Stilt.md").racy  # type: ignore[union-attr]
    reads: list[str] = []
    real_read = SearchIndex._read_file
    monkeypatch.setattr(SearchIndex, "_read_file",
                        lambda self, *a, **k: reads.append(a[0]) or real_read(self, *a, **k))
    second = SearchIndex(vault, refresh_interval=0.0)
    assert titles(second.search("stilt")) == ["Stilt"] and second.load_report == "loaded"
    assert reads == []


def test_an_older_osks_snapshot_and_journal_are_removed_as_the_store_loads(vault: Vault):
    """Before the recall file was the index's one store, the index kept a snapshot and a
    journal beside it (107 MB at 100,000 nodes): the first load removes them, unread."""
    write_node(vault, "Domain/Egret.md", "the egret")
    first = SearchIndex(vault, refresh_interval=3600)
    first.search("egret")
    for name in ("snapshot.bin", "journal.jsonl"):
        (first.directory / name).write_bytes(b"an older osk's")
    second = SearchIndex(vault, refresh_interval=3600)
    assert titles(second.search("egret")) == ["Egret"] and second.load_report == "loaded"
    assert not (first.directory / "snapshot.bin").exists()
    assert not (first.directory / "journal.jsonl").exists()


def test_a_node_that_breaks_the_contract_is_not_indexed_until_fixed(vault: Vault):
    write_node(vault, "Domain/Good.md", "the puffin")
    vault.abs("Domain/Broken.md").write_text("no front matter, puffin", "utf-8")
    index = fresh(vault)
    assert titles(index.search("puffin")) == ["Good"]
    write_node(vault, "Domain/Broken.md", "a puffin, fixed")
    assert set(titles(index.search("puffin"))) == {"Good", "Broken"}


# -- helpers ---------------------------------------------------------------------------------
def _changes(added=(), changed=(), removed=()):
    from osk.store.catalog import Changes

    return Changes(tuple(added), tuple(changed), tuple(removed))


def _forbidden(what: str):
    def refuse(*args, **kwargs):
        raise AssertionError(f"{what} must not happen on a single change")

    return refuse


class _Terminal:
    def isatty(self) -> bool:
        return True


def test_a_protected_node_is_found_by_its_approved_text_until_the_person_approves(
        vault: Vault, monkeypatch):
    from osk.authority import approvals, protection

    assert regions.APPROVALS_LEDGER == protection.APPROVALS
    rel = "Person/prefs/Editor.md"
    write_node(vault, rel, "the person edits in kestrel")
    index = fresh(vault)
    assert titles(index.search("kestrel")) == ["Editor"]
    monkeypatch.setattr("sys.stdin", _Terminal())
    approvals.protect(vault, "Person/prefs")
    write_node(vault, rel, "the person edits in falcon")  # a hand edit inside the region
    write_node(vault, "Person/prefs/New pref.md", "falcon mode everywhere")  # pending creation
    assert titles(index.search("falcon")) == []
    assert titles(index.search("kestrel")) == ["Editor"]
    approvals.approve(vault, "Person/prefs")
    assert set(titles(index.search("falcon"))) == {"Editor", "New pref"}
    assert titles(index.search("kestrel")) == []


def test_the_top_k_is_always_a_prefix_of_a_longer_ranking(vault: Vault):
    """Pruning (fewer candidates looked at for a small k) never changes the order."""
    import random

    rng = random.Random(17)
    words = [f"w{i}" for i in range(40)]
    weights = [1 / (i + 1) for i in range(40)]
    places = ["Scope/alpha", "Scope/beta", "Scope/gamma", "Domain", "Person"]
    for number in range(90):
        body = " ".join(rng.choices(words, weights, k=rng.randint(5, 40)))
        extra = {}
        if number % 15 == 1:
            extra["supersedes"] = f"[[Note {number - 1}]]"
        write_node(vault, f"{rng.choice(places)}/c/Note {number}.md", body, **extra)
    index = fresh(vault)
    index.search("w0")
    index.refresh_interval = 3600
    trials = int(os.environ.get("OSK_SEARCH_TRIALS", "25"))
    for _ in range(trials):
        query = " ".join(rng.choices(words, k=rng.randint(1, 4)))
        scope = rng.choice(["alpha", "beta", None])
        visible = scope_visibility(vault, scope) if rng.random() < 0.5 else None
        longest = index.search(query, k=50, scope=scope, visible=visible)
        for k in (1, 3, 8):
            assert index.search(query, k=k, scope=scope, visible=visible) == longest[:k]


def postings_table(tmp_path: Path) -> Any:
    import sqlite3

    db = sqlite3.connect(tmp_path / "recall.sqlite", isolation_level=None)
    db.execute(recallfile._TABLES.strip().split(";")[-1])  # the postings table
    return db


def held_postings(db: Any, term: str = "heron") -> list[tuple[int, int]]:
    """(row, count) of a term, block after block as a reader unpacks them."""
    return [pair for block in db.execute("SELECT first, rows, tfs FROM postings WHERE term = ? "
                                         "ORDER BY first", (term,))
            for pair in zip(*recallfile.unpack(*block), strict=True)]


def test_the_recall_file_leaves_a_terms_postings_alone_when_its_count_is_unchanged(tmp_path):
    db = postings_table(tmp_path)
    for row in (3, 1, 2):
        recallfile._post(db, "heron", row, 2)
    writes: list[str] = []
    db.set_trace_callback(lambda sql: writes.append(sql) if "postings VALUES" in sql else None)
    recallfile._post(db, "heron", 2, 2)  # the same count: nothing written
    assert writes == []
    recallfile._post(db, "heron", 2, 5)
    recallfile._post(db, "heron", 1, 0)
    assert len(writes) == 2 and held_postings(db) == [(2, 5), (3, 2)]
    # two offsets from the block's base, row 1, and two counts, each array in 8 bits behind
    # the byte naming its type
    assert db.execute("SELECT first, length(rows), length(tfs) FROM postings").fetchone() == (
        1, 3, 3)


def test_the_recall_file_keeps_a_terms_postings_in_blocks_a_write_rewrites_one_of(tmp_path):
    db = postings_table(tmp_path)
    rows = list(range(0, 6 * recallfile.BLOCK, 2))  # three blocks' worth, written whole
    counts = array("I", [row % 5 + 1 for row in rows])
    db.executemany("INSERT INTO postings VALUES (?, ?, ?, ?)",
                   recallfile.blocks("heron", array("I", rows), counts))
    written: list[int] = []
    db.set_trace_callback(lambda sql: written.append(len(sql)) if "VALUES" in sql else None)
    recallfile._post(db, "heron", 6 * recallfile.BLOCK + 9, 2)  # a new last row
    assert len(written) == 1 and max(written) < 8 * recallfile.BLOCK  # the last block alone
    firsts = [first for (first,) in db.execute("SELECT first FROM postings ORDER BY first")]
    assert firsts == [0, 2 * recallfile.BLOCK, 4 * recallfile.BLOCK]
    assert held_postings(db) == [*zip(rows, counts, strict=True), (6 * recallfile.BLOCK + 9, 2)]
    recallfile._post(db, "heron", 0, 0)  # the first row goes: its block keeps its base
    assert held_postings(db)[0] == (2, 3)
    assert db.execute("SELECT min(first) FROM postings").fetchone() == (0,)


def test_a_damaged_postings_block_is_refused_by_readers_and_mended_by_the_next_write(
        vault: Vault):
    import sqlite3

    from osk.search.expand import query_terms

    write_node(vault, "Domain/Crane.md", "the crane dances")
    index = SearchIndex(vault, refresh_interval=3600)
    assert titles(index.search("crane")) == ["Crane"]
    path = recallfile.path_in(index.directory)
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("UPDATE postings SET rows = CAST(x'51' || rows AS BLOB)")  # no such type
    reader = recallfile.open_reader(index.directory)
    with pytest.raises(recallfile.Unusable, match="postings block"):
        recallfile.RecallCorpus(reader, query_terms("crane"))
    reader.close()
    write_node(vault, "Domain/Crane.md", "the crane dances again")
    catalog = Catalog(vault)
    index.sync(catalog, catalog.refresh())  # the write reaches the index and its mirror
    assert titles(index.search("again")) == ["Crane"]  # search goes on from memory
    assert not path.exists()  # the writer removed what it could not read; the next load builds
    later = SearchIndex(vault)  # it from the files again
    assert len(later) == 1 and later.load_report == "built: no index on disk" and path.exists()
    assert titles(later.search("again")) == ["Crane"]


def test_a_terms_postings_written_one_at_a_time_read_as_written_whole(tmp_path):
    """A build (``RecallBuild``) cuts a term's sorted postings into blocks whole; the same
    postings set one at a time, in any order, read back the same, and a block that passes
    twice ``BLOCK`` postings is cut in two (a write rewrites one block of bounded size)."""
    import random

    rng = random.Random(26)
    db = postings_table(tmp_path)
    rows = sorted({0, 70_000, *rng.sample(range(24 * recallfile.BLOCK), 12 * recallfile.BLOCK)})
    counts = {row: rng.choice([1, 2, 9, 300, 70_000]) for row in rows}
    for row in rng.sample(rows, len(rows)):
        recallfile._post(db, "heron", row, counts[row])
    assert held_postings(db) == sorted(counts.items())
    sizes = [len(recallfile.unpack(*block)[1])
             for block in db.execute("SELECT first, rows, tfs FROM postings")]
    assert len(sizes) > 1 and max(sizes) <= 2 * recallfile.BLOCK
    (tmp_path / "whole").mkdir()
    whole = postings_table(tmp_path / "whole")
    whole.executemany("INSERT INTO postings VALUES (?, ?, ?, ?)", recallfile.blocks(
        "heron", array("I", rows), array("I", [counts[row] for row in rows])))
    assert held_postings(whole) == held_postings(db)


def test_a_loaded_index_holds_the_catalogs_objects_where_its_values_are_equal(vault: Vault):
    """A document loaded from the recall file takes the catalog entry's path, stat, id and
    file hash (``Corpus.from_store``'s ``known``) rather than keeping copies of its own."""
    write_node(vault, "Domain/Crane.md", "the crane dances")
    write_node(vault, "Scope/app/Heron.md", "the heron fishes")
    first = SearchIndex(vault, refresh_interval=3600)
    assert len(first) == 2  # built and written whole
    catalog = Catalog(vault)
    catalog.refresh()
    second = SearchIndex(vault, refresh_interval=3600)
    second.reconcile(catalog)
    assert second.load_report == "loaded"
    for rel in ("Domain/Crane.md", "Scope/app/Heron.md"):
        doc, entry = second.doc(rel), catalog.entries[rel]
        assert doc is not None and entry.node is not None
        assert doc.path is entry.path and doc.stat is entry.stat
        assert doc.id is entry.node.id and doc.file_hash is entry.node.file_hash
    assert titles(second.search("heron")) == ["Heron"]
