"""Raw rounds in search: captured by the Stop hook, found by a later session of the same project
only, gone once redacted, and ranked below a node that cites them."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
from hookkit import CLAUDE_SESSION, copy_fixture, make_project, payload, run_hook
from recallkit import rounds_in

from osk.calls.request import NewNode
from osk.engine.core import Engine
from osk.search import round_postings
from osk.search.rounds import MAP_BYTES, MARKER, RoundIndex, _densest, _word_terms, excerpt
from osk.search.tokenize import tokenize_prose
from osk.store.vault import Vault
from osk.verbs import redaction


def captured(vault: Vault, project: Path, tmp_path: Path) -> None:
    transcript = copy_fixture("claude", "session.jsonl", tmp_path / "t" / "session.jsonl")
    data = json.loads(payload("claude", "stop", transcript=transcript, cwd=project))
    done = run_hook("stop", "claude", json.dumps(data).encode(), cwd=project)
    assert done.returncode == 0, done.stderr


def rounds_of(engine: Engine, query: str) -> list[str]:
    return [hit.id for hit in engine.search(query, k=10).hits if MARKER in hit.markers]


def test_a_round_captured_by_the_stop_hook_is_found_by_its_project_only(vault, tmp_path):
    shop = make_project(tmp_path / "shop")
    other = make_project(tmp_path / "other")
    captured(vault, shop, tmp_path)
    assert RoundIndex(vault).refresh() == 0  # the Stop hook indexed what it captured
    later = Engine.open(vault, cwd=shop)  # a later session of the same project
    found = rounds_of(later, "why does the checkout test fail on CI")
    assert found and found[0] == f"_raw/shop/{CLAUDE_SESSION}#Round 1"
    hit = next(h for h in later.search("checkout test fails", k=10).hits if h.id == found[0])
    assert hit.scope == "shop" and hit.summary.startswith("2026-03-14 · ")
    assert rounds_of(Engine.open(vault, cwd=other), "why does the checkout test fail") == []
    assert rounds_of(later, "checkout") and later.search(
        "checkout", k=10, kind="nodes").hits == ()


def test_a_redacted_round_is_not_found_by_the_redacted_words(vault, tmp_path, monkeypatch):
    shop = make_project(tmp_path / "shop")
    engine = Engine.open(vault, cwd=shop)
    engine.append_raw("talk", user="the NAS login is tulip-7-orbit-lamp", assistant="Mounted.")
    assert rounds_of(engine, "tulip orbit lamp") == ["_raw/shop/talk#Round 1"]
    assert shown(vault, "tulip orbit lamp") == ["_raw/shop/talk#Round 1"]
    target = redaction.parse("_raw/shop/talk")
    monkeypatch.setattr("sys.stdin.isatty", lambda: True, raising=False)
    monkeypatch.setattr("osk.authority.protection.require_person", lambda *a, **k: None)
    redaction.redact(vault, target, "tulip-7-orbit-lamp")
    assert rounds_of(engine, "tulip orbit lamp") == [] and shown(vault, "tulip orbit lamp") == []
    assert rounds_of(engine, "NAS login") == ["_raw/shop/talk#Round 1"]
    # the index keeps a round's text for excerpts: the redacted text is gone from it too
    hit = next(h for h in engine.search("NAS login", k=5).hits if h.id.startswith("_raw/"))
    assert "tulip" not in hit.summary and "REDACTED" in hit.summary


def test_a_node_that_cites_a_round_ranks_above_it(vault, tmp_path):
    shop = make_project(tmp_path / "shop")
    engine = Engine.open(vault, cwd=shop)
    ref = engine.append_raw("talk", user="the invoice totals round half up to cents, always",
                            assistant="Rounding invoice totals half up to cents.")
    engine.create_node(NewNode("billing", "Billing", "Billing hub.\n", space="Scope",
                               cluster="billing", drafter="test-model"))
    engine.create_node(NewNode("Invoice rounding", "Totals round half up",
                               "Invoice totals round half up to cents.\n", space="Scope",
                               cluster="billing", drafter="test-model",
                               derived_from=(ref.coordinate,)))
    ids = [hit.id for hit in engine.search("invoice totals round half up cents", k=10).hits]
    node = next(i for i, hit in enumerate(ids) if not hit.startswith("_raw/"))
    assert ref.coordinate in ids and node < ids.index(ref.coordinate)


def test_rounds_beside_nodes_keep_the_nodes_order_and_a_title_asked_for_first(vault, tmp_path):
    shop = make_project(tmp_path / "shop")
    engine = Engine.open(vault, cwd=shop)
    engine.append_raw("talk", user="how do we cut a release", assistant="Tag it, then publish.")
    engine.create_node(NewNode("ship", "Ship", "Ship hub.\n", space="Scope", cluster="ship",
                               drafter="test-model"))
    engine.create_node(NewNode("Release", "How a release goes", "Short.\n", space="Scope",
                               cluster="ship", drafter="test-model"))
    engine.create_node(NewNode("Release checklist", "Release steps",
                               "release release release: tag the release, publish the release\n",
                               space="Scope", cluster="ship", drafter="test-model"))
    nodes = engine.search("release", k=10, kind="nodes").hits
    both = engine.search("release", k=10).hits
    assert nodes[0].title == "Release" and nodes[0].score < nodes[1].score  # title precedence
    assert any(MARKER in hit.markers for hit in both)
    # the rounds go among the nodes; the nodes' own order (a title asked for first) stands
    assert [hit.id for hit in both if MARKER not in hit.markers] == [hit.id for hit in nodes]


def test_nodes_and_rounds_merged_each_keep_the_order_search_gave_them():
    """Fusion's order is not always by score (meaning keeps words' first hits in place), for
    rounds as for nodes: merged, neither list is re-sorted, and a hit goes before one of the
    other list only when it or a hit after it in its own list outscores that one."""
    from types import SimpleNamespace

    from osk.search.rounds import KIND, merged

    def hits(space: str, *scores: float) -> list[SimpleNamespace]:
        return [SimpleNamespace(id=f"{space}{n}", space=space, score=score)
                for n, score in enumerate(scores)]

    nodes = hits("node", 5.0, 9.0, 3.0)  # a title asked for first, below a higher score
    rounds = hits(KIND, 4.0, 8.0, 1.0)  # a round fusion kept first, below a higher score
    order = [hit.id for hit in merged(nodes, rounds, {}, 10)]
    assert [n for n in order if n.startswith("node")] == ["node0", "node1", "node2"]
    assert [n for n in order if not n.startswith("node")] == [f"{KIND}0", f"{KIND}1", f"{KIND}2"]
    assert order == ["node0", "node1", f"{KIND}0", f"{KIND}1", "node2", f"{KIND}2"]


def test_the_index_catches_up_with_a_record_changed_behind_it(vault, tmp_path):
    shop = make_project(tmp_path / "shop")
    engine = Engine.open(vault, cwd=shop)
    engine.append_raw("talk", user="first words", assistant="ok")
    index = RoundIndex(vault)
    assert index.refresh() == 1 and index.refresh() == 0
    engine.append_raw("talk", user="zeppelin arrives", assistant="ok")
    # round 2 by its words, round 1 by its neighbour's (its context gained round 2's words);
    # each once: the append added round 2 and re-indexed round 1
    assert [h.coordinate for h in index.search("zeppelin", k=5, visible=lambda key: True)] \
        == ["_raw/shop/talk#Round 2", "_raw/shop/talk#Round 1"]
    assert [h.coordinate for h in index.search("zeppelin", k=5, visible=lambda key: True,
                                               context=0.0)] == ["_raw/shop/talk#Round 2"]
    assert [h.coordinate for h in index.search("first words", k=5, visible=lambda key: True)] \
        == ["_raw/shop/talk#Round 1", "_raw/shop/talk#Round 2"]
    assert index.search("zeppelin", k=5, visible=lambda key: False) == []


def test_a_query_reads_the_index_as_it_began_while_another_process_writes(vault, tmp_path,
                                                                            monkeypatch):
    """Another process's refresh may commit between a query's statements (here: a record
    removed, so its only word's blocks are deleted between the query reading the word's
    block heads and reading its first block): the query reads one state of the index
    throughout, the one it began in, and finds what was there."""
    shop = make_project(tmp_path / "shop")
    engine = Engine.open(vault, cwd=shop)
    engine.append_raw("talk", user="the zeppelin arrives", assistant="ok")
    index = RoundIndex(vault)
    before = index.search("zeppelin", k=5, visible=lambda key: True)
    assert [h.coordinate for h in before] == ["_raw/shop/talk#Round 1"]
    take = round_postings.Search._take
    writes: list[int] = []

    def written_meanwhile(search: object, term: int) -> None:
        if not writes:
            writes.append(1)
            (vault.raw_dir / "shop" / "talk.md").unlink()
            assert RoundIndex(vault).refresh() == 0  # the word's blocks deleted, committed
        take(search, term)

    monkeypatch.setattr(round_postings.Search, "_take", written_meanwhile)
    assert index.search("zeppelin", k=5, visible=lambda key: True, refresh=False) == before
    assert writes
    assert index.search("zeppelin", k=5, visible=lambda key: True) == []  # the next: gone



def _index_rows(index: RoundIndex) -> list[tuple]:
    """Every round the index holds, with its terms and their counts in its own words and its
    neighbours' (row ids and vocabulary ids aside)."""
    import sqlite3

    from osk.search.rounds import round_terms

    with sqlite3.connect(index.path) as db:
        found = db.execute(
            "SELECT r.row, r.rel, r.key, r.coordinate, r.number, r.at, r.host, r.excerpt, "
            "r.length FROM rounds r ORDER BY r.rel, r.number").fetchall()
        held = round_terms(db, [row for row, *_ in found])
        return [(*rest, sorted(held[row])) for row, *rest in found]


def test_an_append_reads_only_the_record_s_last_rounds_and_indexes_what_a_rebuild_would(
        vault, tmp_path, monkeypatch):
    """The Stop hook's refresh after a capture costs the same at round 1,000 as at round 10:
    the rounds before the mark are not parsed (a whole read fails here), and the index ends
    exactly as one built from nothing."""
    from osk.capture import raw

    shop = make_project(tmp_path / "shop")
    engine = Engine.open(vault, cwd=shop)
    for number in range(12):
        engine.append_raw("talk", user=f"question {number} about kites",
                          assistant=f"answer {number}")
    index = RoundIndex(vault)
    index.refresh()
    whole = raw.scan_record

    def refused(*args, **kwargs):
        raise AssertionError("the whole record was parsed")

    monkeypatch.setattr(raw, "scan_record", refused)
    for number in range(3):
        engine.append_raw("talk", user=f"zeppelin {number} lands", assistant="noted")
        assert index.refresh() == 1
    monkeypatch.setattr(raw, "scan_record", whole)
    appended = _index_rows(index)
    index.path.unlink()
    for stale in index.path.parent.glob(index.path.name + "-*"):
        stale.unlink()
    rebuilt = RoundIndex(vault)
    assert rebuilt.refresh() == 1
    assert appended == _index_rows(rebuilt) and len(appended) == 15


def test_a_catch_up_within_a_budget_commits_part_by_part_and_ends_as_a_whole_refresh(
        vault, tmp_path, monkeypatch):
    """A hook's refresh stops after its budget (here none: one record a refresh) with what it
    indexed committed; an exclusion or inclusion is applied whole in the first part, so no
    part ever holds an excluded round; the parts end exactly as one refresh from nothing."""
    from osk.capture.exclusions import Excluded
    from osk.search import rounds

    shop = make_project(tmp_path / "shop")
    engine = Engine.open(vault, cwd=shop)
    for talk in ("talk1", "talk2", "talk3", "talk4"):
        engine.append_raw(talk, user=f"zeppelin hangar in {talk}", assistant="noted")
    index = RoundIndex(vault)
    assert index.refresh() == 4
    secret = "_raw/shop/talk1#Round 1"
    hidden = Excluded(rounds=frozenset({secret}))
    monkeypatch.setattr(rounds, "excluded", lambda vault: hidden)
    for talk in ("talk2", "talk3", "talk4"):
        engine.append_raw(talk, user=f"kite festival in {talk}", assistant="noted")

    def found(query: str) -> list[str]:
        return [hit.coordinate for hit in RoundIndex(vault).search(
            query, k=10, visible=lambda key: True, refresh=False, context=0.0)]

    assert index.refresh(budget=0.0) == 2  # talk1 again without its round, then one append
    assert secret not in found("zeppelin hangar") and len(found("kite festival")) == 1
    assert index.refresh(budget=0.0) == 1 and secret not in found("zeppelin hangar")
    monkeypatch.setattr(rounds, "excluded", lambda vault: Excluded())  # included again
    assert index.refresh(budget=0.0) == 2 and secret in found("zeppelin hangar")
    assert index.refresh(budget=0.0) == 0 and len(found("kite festival")) == 3
    parts = _index_rows(index)
    index.path.unlink()
    for stale in index.path.parent.glob(index.path.name + "-*"):
        stale.unlink()
    rebuilt = RoundIndex(vault)
    assert rebuilt.refresh() == 4 and parts == _index_rows(rebuilt) and len(parts) == 7


def test_a_record_rewritten_before_its_mark_is_read_whole_again(vault, tmp_path):
    """A change to a round the tail read skips (a redaction re-frames it) is not missed: the
    bytes before the mark no longer match, so the record is indexed anew."""
    shop = make_project(tmp_path / "shop")
    engine = Engine.open(vault, cwd=shop)
    for word in ("albatross", "buzzard", "cormorant", "dipper"):
        engine.append_raw("talk", user=f"a {word} flew past", assistant="seen")
    index = RoundIndex(vault)
    index.refresh()
    record = vault.root / "_raw" / "shop" / "talk.md"
    record.write_bytes(record.read_bytes().replace(b"albatross", b"aardvarks"))  # same length
    assert index.refresh() == 1
    assert index.search("albatross", k=5, visible=lambda key: True) == []
    assert [h.coordinate for h in index.search("aardvarks", k=5, visible=lambda key: True,
                                               context=0.0)] == ["_raw/shop/talk#Round 1"]


def test_the_rounds_count_and_length_a_query_ranks_by_are_kept_whole(vault, tmp_path):
    """A query reads the rounds' count and total length from ``totals`` (kept by triggers, not
    counted per query): equal to the rows after appends, a record read anew, a record gone."""
    import sqlite3

    shop = make_project(tmp_path / "shop")
    engine = Engine.open(vault, cwd=shop)
    index = RoundIndex(vault)

    def kept_and_counted() -> tuple[tuple[int, int], tuple[int, int]]:
        index.refresh()
        with sqlite3.connect(index.path) as db:
            return (db.execute("SELECT rounds, length FROM totals").fetchone(),
                    db.execute("SELECT count(*), total(length) FROM rounds").fetchone())

    for number in range(3):
        engine.append_raw("talk", user=f"question {number} about kites", assistant="answer")
    engine.append_raw("other", user="a single round", assistant="ok")
    kept, counted = kept_and_counted()
    assert kept == counted and kept[0] == 4
    other = vault.root / "_raw" / "shop" / "other.md"
    other.write_text(other.read_text(encoding="utf-8").replace("a single round", "one round"),
                     encoding="utf-8")  # changed behind the index: read anew
    assert kept_and_counted()[0] == kept_and_counted()[1]
    other.unlink()
    kept, counted = kept_and_counted()
    assert kept == counted and kept[0] == 3


def test_an_index_of_an_older_schema_is_rebuilt_on_open_without_its_text_table(vault, tmp_path):
    """Since schema 12 no ``terms`` table is kept (a round's terms are in its forward list):
    an index of schema 11, which held one, is rebuilt whole by the next refresh, its old tables gone
    and their pages given back to the disk, and its rounds are found again; a round dropped
    after (an append re-indexes the record's last round) takes its terms' counts from its
    forward list."""
    import sqlite3

    from osk.search.rounds import SCHEMA

    shop = make_project(tmp_path / "shop")
    engine = Engine.open(vault, cwd=shop)
    engine.append_raw("talk", user="the kite string snapped at noon", assistant="noted")
    index = RoundIndex(vault)
    index.refresh()
    with sqlite3.connect(index.path) as db:
        built = db.execute("SELECT value FROM meta WHERE key='built'").fetchone()
        db.execute("CREATE TABLE terms (row INTEGER PRIMARY KEY, body TEXT, context TEXT)")
        db.executemany("INSERT INTO terms VALUES (?, ?, '')",
                       [(row, "kite " * 800) for row in range(400)])  # some 1.6 MB
        db.execute("UPDATE meta SET value='11' WHERE key='schema'")
        old_pages = db.execute("PRAGMA page_count").fetchone()[0]
    again = RoundIndex(vault)
    assert again.refresh() == 1  # every record indexed anew
    with sqlite3.connect(index.path) as db:  # the old tables' pages given back, not kept free
        assert db.execute("PRAGMA freelist_count").fetchone() == (0,)
        assert db.execute("PRAGMA page_count").fetchone()[0] < old_pages // 4
    engine.append_raw("talk", user="a second kite flew", assistant="fine")
    assert again.refresh() == 1
    with sqlite3.connect(index.path) as db:
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
        assert db.execute("SELECT value FROM meta WHERE key='schema'").fetchone() == (
            f"{SCHEMA}",) and SCHEMA == 13
        assert db.execute("SELECT value FROM meta WHERE key='built'").fetchone() != built
        assert "terms" not in tables
        # each term's document counts are the live rounds' (the dropped round's taken off)
        kite = db.execute("SELECT body, any FROM vocab WHERE term='kite'").fetchone()
    assert kite == (2, 2)
    assert [h.coordinate for h in again.search("kite string", k=5, visible=lambda key: True)
            ][0] == "_raw/shop/talk#Round 1"


def test_a_word_in_over_half_the_rounds_still_counts_and_a_round_holding_only_it_is_found(
        vault, tmp_path):
    """A word in over half the rounds has FTS5's idf of 1e-6: it still adds to a score (the
    round holding the rarer word and it comes first), and a round holding only it is found
    when the rarer word fills fewer places than asked."""
    engine = Engine.open(vault, cwd=make_project(tmp_path / "shop"))
    for number in range(5):
        engine.append_raw("talk", user=f"kites {number}", assistant="ok")
    engine.append_raw("talk", user="kites and a heron", assistant="ok")
    index = RoundIndex(vault)
    index.refresh()
    assert [hit.excerpt for hit in index.search("heron kites", k=1, visible=lambda key: True)
            ] == ["kites and a heron ok"]
    found = index.search("heron kites", k=6, visible=lambda key: True)
    assert len(found) == 6 and found[0].excerpt == "kites and a heron ok"
    assert found[1].score < found[0].score and all(hit.score > 0 for hit in found)


# -- per-prompt recall falls back to rounds ------------------------------------------------------
def recalled_for(project: Path, text: str, tmp_path: Path, session: str) -> str:
    data = json.loads(payload("claude", "prompt_submit", transcript=tmp_path / "t.jsonl",
                              cwd=project, prompt_id="p-1", prompt=text))
    data["session_id"] = session
    done = run_hook("prompt-submit", "claude", json.dumps(data).encode(), cwd=project)
    assert done.returncode == 0 and "failed" not in done.stderr, done.stderr
    return json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"] \
        if done.stdout else ""


def test_recall_falls_back_to_a_captured_round_in_a_later_session_of_its_project(vault,
                                                                               tmp_path):
    shop = make_project(tmp_path / "shop")
    other = make_project(tmp_path / "other")
    captured(vault, shop, tmp_path)
    question = "why does the checkout test fail on CI but pass locally"
    later = recalled_for(shop, question, tmp_path, "a-later-session")
    record = f"_raw/shop/{CLAUDE_SESSION}"
    # the head says once what a raw round is and how to read one; the conversation's date and
    # path once, then its round: path and round make the coordinate read_raw takes
    assert "raw rounds osk captured" in later and "person and agent" in later
    assert f"\n- 2026-03-14 {record}\n  #Round 1: " in later
    assert "`read_raw` path#Round N" in later
    assert record not in recalled_for(other, question, tmp_path, "elsewhere")
    # the conversation that holds the round has it in its context: never shown to it again
    assert record not in recalled_for(shop, question, tmp_path, CLAUDE_SESSION)


def test_a_round_is_found_by_the_words_of_its_date_and_of_dates_it_writes(vault, tmp_path,
                                                                          monkeypatch):
    shop = make_project(tmp_path / "shop")
    monkeypatch.setenv("OSK_NOW", "2023-05-08T13:56+00:00")
    engine = Engine.open(vault, cwd=shop)
    engine.append_raw("talk", user="we shipped the quokka release", assistant="Noted.")
    monkeypatch.setenv("OSK_NOW", "2023-06-20T09:00+00:00")
    engine.append_raw("talk", user="the audit is due 2024-02-29", assistant="Booked.")
    assert rounds_of(engine, "May 2023")[0] == "_raw/shop/talk#Round 1"
    assert rounds_of(engine, "what happened on 20 June")[0] == "_raw/shop/talk#Round 2"
    assert rounds_of(engine, "February 2024")[0] == "_raw/shop/talk#Round 2"
    assert rounds_of(engine, "29 February")[0] == "_raw/shop/talk#Round 2"


def test_a_round_is_found_by_another_form_of_its_words(vault, tmp_path):
    from osk.search.expand import query_terms
    from osk.search.recall_hits import confidence, coverage

    shop = make_project(tmp_path / "shop")
    engine = Engine.open(vault, cwd=shop)
    talk(engine, ("the pelican script was rejected again today", "Sorry to hear."),
         ("they made a decision about the parade", "Good."))
    # a derived form meets its word (a note's stem keeps "rejection" and "rejected" apart) …
    assert rounds_of(engine, "pelican script rejection")[0] == "_raw/shop/talk#Round 8"
    assert shown(vault, "the pelican rejection?")[0] == "_raw/shop/talk#Round 8"
    # … and a caller holding the nodes' terms ("rejection") reads the round's statistics,
    # kept in its own ("reject"), as recall's gate does
    found, stats = RoundIndex(vault).search_with_stats("pelican rejection", k=3,
                                                       visible=lambda key: True)
    assert found[0].coordinate == "_raw/shop/talk#Round 8" and stats is not None
    weights = query_terms("pelican rejection")
    assert "rejection" in weights and stats.df("rejection") == 1
    assert coverage(stats, weights, 0) == 1.0
    assert confidence(stats, weights, 0) == confidence(
        stats, query_terms("pelican rejection", prose=True), 0) > 0
    # a final e is kept where Snowball keeps it: "made" is not "mad"
    assert rounds_of(engine, "mad") == [] and rounds_of(engine, "made decision")


# -- which rounds recall shows ------------------------------------------------------------------
FILLER = ["we renamed the billing module", "the linter wants shorter lines", "lunch at noon",
          "the staging box reboots nightly", "merge the docs branch first",
          "coverage dropped on the parser", "the release notes need a date"]


def talk(engine: Engine, *pairs: tuple[str, str]) -> None:
    for user, assistant in [*((f, "Ok.") for f in FILLER), *pairs]:
        engine.append_raw("talk", user=user, assistant=assistant)


def shown(vault: Vault, prompt: str) -> list[str]:
    from osk.hooks.recall import per_prompt

    return [hit.id for hit in per_prompt.rounds_recalled(vault, "shop", prompt, {}, None)]


def recalled_rounds(vault: Vault, prompt: str) -> tuple[str, list[str], list[str]]:
    """The rounds block ``decide`` gives ``prompt`` in the shop project, the coordinates an
    agent reads off it (a round's ``#Round N`` after the path on the line above it), and the
    ids of the rounds the outcome says it shows."""
    from osk.hooks.adapters import get
    from osk.hooks.recall import per_prompt

    adapter = get("claude")
    outcome = per_prompt.decide(vault, "shop", prompt, adapter.budget,
                                per_prompt.limit_for(vault, adapter), {})
    assert all(line.startswith(("- ", "  #Round ")) for line in outcome.block.splitlines()[2:-1])
    return outcome.block, rounds_in(outcome.block), [hit.id for hit in outcome.shown]


def test_recalled_rounds_come_under_their_conversation_and_each_reads_back(vault, tmp_path):
    shop = make_project(tmp_path / "shop")
    engine = Engine.open(vault, cwd=shop)
    talk(engine, ("the zeppelin hangar lock jammed again", "Ok."),
         ("a brass zeppelin hangar lock arrived", "Ok."))
    engine.append_raw("notes", user="zeppelin hangar lock: the depot has spares",
                      assistant="Ok.")
    block, read, shown_ids = recalled_rounds(vault, "zeppelin hangar lock")
    # each conversation named once, on its date, its rounds under it
    assert block.count("\n- ") == 2 and block.count("_raw/shop/talk") == 1
    assert re.search(r"\n- \d{4}-\d\d-\d\d _raw/shop/notes\n  #Round 1: zeppelin hangar", block)
    assert {"_raw/shop/talk#Round 8", "_raw/shop/talk#Round 9", "_raw/shop/notes#Round 1"} \
        <= set(read)
    assert sorted(read) == sorted(shown_ids) and len(read) == len(set(read))
    for coordinate in read:  # what read_raw takes, and the round the line quoted
        got = Engine.open(vault, cwd=shop).read_raw(coordinate)
        assert got.kind == "round" and got.coordinate == coordinate


def test_the_rounds_block_stays_within_its_cap_and_names_only_the_rounds_it_shows(vault,
                                                                                 tmp_path):
    from osk.hooks.recall import per_prompt

    shop = make_project(tmp_path / "shop")
    engine = Engine.open(vault, cwd=shop)
    talk(engine, *((f, "Ok.") for f in FILLER))
    for n in range(per_prompt.MAX_ROUNDS + 1):  # each in a conversation of its own
        engine.append_raw(f"talk-{n}", user=f"the zeppelin hangar lock, take {n}: " + "so " * 40,
                          assistant="Ok.")
    block, read, shown_ids = recalled_rounds(vault, "zeppelin hangar lock")
    # a path line for every round: not all of them fit, the last one shown may be cut
    assert 0 < len(read) < per_prompt.MAX_ROUNDS and len(block) <= per_prompt.ROUND_CHARS
    assert sorted(read) == sorted(shown_ids)


def test_recall_shows_a_round_by_the_share_of_the_prompt_it_holds(vault, tmp_path):
    shop = make_project(tmp_path / "shop")
    talk(Engine.open(vault, cwd=shop),
         ("the zeppelin timetable moved to fridays", "Noted."),
         ("quokka walrus pelican", "Odd trio."))
    zeppelin = "_raw/shop/talk#Round 8"
    # two rare words, both held: shown (a floor on confidence alone, 2.5, kept it back)
    assert shown(vault, "zeppelin timetable?")[0] == zeppelin
    # three rare words held among eight the prompt asks: not enough of it, though as many
    # held words as a short prompt's
    assert shown(vault, "quokka walrus pelican marmot ibex tapir gecko lemur") == []
    assert shown(vault, "quokka walrus pelican")[0] == "_raw/shop/talk#Round 9"


def test_recall_shows_rounds_that_each_hold_part_of_the_prompt_together(vault, tmp_path):
    from osk.hooks.recall import per_prompt

    shop = make_project(tmp_path / "shop")
    talk(Engine.open(vault, cwd=shop),
         ("the zeppelin hangar needs a new lock", "Ok."),
         ("the walrus timetable slipped again", "Ok."),
         ("zeppelin crews and the walrus shift overlap", "Ok."),
         ("the hangar timetable is on the wiki", "Ok."),
         ("a zeppelin timetable for spring", "Ok."),
         ("the hangar walrus is a mascot", "Ok."))
    # each round holds two of the four rare words (each word three times): no round holds
    # over half of the prompt (a single round's share of 0.6 was needed before), but the
    # first five hold 2.5 prompts' worth together: a topic the conversation had
    found = shown(vault, "zeppelin hangar walrus timetable")
    assert len(found) == per_prompt.MAX_ROUNDS
    assert set(found) <= {f"_raw/shop/talk#Round {n}" for n in range(8, 14)}


def test_recall_leaves_a_lone_round_holding_part_of_the_prompt_unshown(vault, tmp_path):
    shop = make_project(tmp_path / "shop")
    talk(Engine.open(vault, cwd=shop), ("the zeppelin hangar walrus", "Ok."))
    # one round holds two of the four rare words and no other round any: a stray match
    assert shown(vault, "zeppelin hangar timetable marmot") == []
    # the whole prompt in one round is shown (its neighbour after it, as search ranks)
    assert shown(vault, "zeppelin hangar walrus")[0] == "_raw/shop/talk#Round 8"


def test_a_translation_the_vault_never_uses_leaves_no_part_of_the_prompt_unanswered(
        vault, tmp_path):
    from osk.hooks.recall import per_prompt
    from osk.search.recall_hits import coverage

    shop = make_project(tmp_path / "shop")
    talk(Engine.open(vault, cwd=shop), ("the flamingo test failed on staging", "Ok."))
    found = per_prompt.round_candidates(vault, "shop", "flamingo test failed", None)
    assert found is not None
    first = found.found[0]
    assert first.coordinate == "_raw/shop/talk#Round 8"
    assert set(found.weights) > found.typed  # "test" and "fail" bring their Korean words
    # the round holds every word typed: the whole prompt, whatever the glossary adds
    assert coverage(found.stats, found.weights, first.slot, found.typed) == 1.0
    assert coverage(found.stats, found.weights, first.slot) < 1.0  # counting them unheld
    assert shown(vault, "flamingo test failed")[0] == "_raw/shop/talk#Round 8"


def test_recall_shows_the_answer_in_the_round_after_the_question(vault, tmp_path):
    shop = make_project(tmp_path / "shop")
    talk(Engine.open(vault, cwd=shop),
         ("which port does the mock ledger server listen on?", "Let me look."),
         ("and?", "It listens on 7311, set in conftest."))
    found = shown(vault, "mock ledger server port")
    # the question's round by its words, the answer's by its neighbour's (as search ranks)
    assert found[:2] == ["_raw/shop/talk#Round 8", "_raw/shop/talk#Round 9"]


def test_a_round_is_excerpted_where_the_prompt_s_words_are(vault, tmp_path):
    from osk.hooks.recall import per_prompt

    shop = make_project(tmp_path / "shop")
    opening = "We spent the morning on many small things. " * 4
    talk(Engine.open(vault, cwd=shop),
         (opening + "Finally the flamingo cache was cleared by hand.", "Done."))
    hits = per_prompt.rounds_recalled(vault, "shop", "flamingo cache cleared", {}, None)
    assert hits[0].id == "_raw/shop/talk#Round 8"
    summary = hits[0].summary
    assert "flamingo cache was cleared" in summary and summary.startswith("…")
    assert len(summary) <= per_prompt.ROUND_EXCERPT
    hit = next(h for h in Engine.open(vault, cwd=shop).search("flamingo cache", k=5).hits
               if h.id == "_raw/shop/talk#Round 8")
    assert "flamingo cache" in hit.summary


@pytest.mark.parametrize("ending", ["by hand.", "at the café, by hand."])
def test_an_excerpt_is_cut_where_the_words_are_whatever_their_letter_case(ending):
    """The words asked are found in any letter case, in ASCII text and in other text alike
    (found by ``str.find`` in the one, a case-blind pattern in the other)."""
    opening = "We spent the morning on many small things. " * 6
    text = opening + "Finally the FLAMINGO Cache was Cleared " + ending
    cut = excerpt(text, 80, tokenize_prose("flamingo cache cleared"))
    assert cut.startswith("…") and "FLAMINGO Cache was Cleared" in cut and len(cut) <= 80
    assert excerpt(text, 80, tokenize_prose("pelican")) == text[:79] + "…"


def test_the_stretch_chosen_holds_the_most_words_asked_of_any_stretch_the_rule_allows():
    """``_densest`` walks its stretches in one pass; each stretch is checked here whole, in
    random texts (a fixed seed) of repeated words, long tokens and Hangul."""
    rng = random.Random(2026)
    words = ["cache", "caches", "flamingo", "cleared", "pelican", "deploy", "the", "of",
             "Kubernetes", "메모리", "캐시를", "x" * 150, "build", "errors"]
    for _ in range(300):
        flat = " ".join(rng.choice(words) for _ in range(rng.randint(1, 300)))
        terms = frozenset(tokenize_prose(" ".join(rng.sample(words, rng.randint(1, 4)))))
        limit = rng.choice([40, 80, 200])
        starts = {flat.rfind(" ", 0, at) + 1 for at in range(len(flat)) if flat[at] != " "}
        held = {at: _word_terms(flat[at:].split(" ", 1)[0]) & terms for at in starts}
        best, best_start = 0, 0
        for at in sorted(at for at in held if held[at]):
            start = flat.rfind(" ", 0, at - limit // 8) + 1 if at > limit // 8 else 0
            within = set().union(*(held[w] for w in held if start <= w < start + limit - 2))
            if len(within) > best:
                best, best_start = len(within), start
        assert _densest(flat, terms, limit) == best_start


def _calls_of(monkeypatch, name: str) -> list[int]:
    """A list that grows by one at each call of ``RoundIndex.<name>`` (which still runs)."""
    calls: list[int] = []
    real = getattr(RoundIndex, name)

    def counted(self):
        calls.append(1)
        return real(self)

    monkeypatch.setattr(RoundIndex, name, counted)
    return calls


def test_a_search_opens_the_rounds_index_only_when_something_moved(vault, tmp_path,
                                                                   monkeypatch):
    """The rounds' index is a cache of the raw records: while no record, no exclusion and not
    the file itself changed since this process last refreshed it, a search does not open it
    to refresh (and a vault that never captured a round does not open it at all); whatever
    moves is still found by the next search."""
    opened = _calls_of(monkeypatch, "_open")
    shop = make_project(tmp_path / "shop")
    engine = Engine.open(vault, cwd=shop)
    assert rounds_of(engine, "zeppelin") == []
    opened.clear()
    assert rounds_of(engine, "zeppelin") == [] and opened == []
    engine.append_raw("talk", user="the zeppelin arrives", assistant="ok")
    assert rounds_of(engine, "zeppelin") == ["_raw/shop/talk#Round 1"]
    opened.clear()
    assert rounds_of(engine, "zeppelin") == ["_raw/shop/talk#Round 1"]
    assert len(opened) == 1  # the query's, no refresh
    redaction.drop_caches(vault)  # the file deleted behind the engine: rebuilt, found again
    assert rounds_of(engine, "zeppelin") == ["_raw/shop/talk#Round 1"]
    other = Engine.open(vault, cwd=shop)  # another process's write moves the file
    other.append_raw("more", user="the zeppelin leaves", assistant="ok")
    assert sorted(rounds_of(engine, "zeppelin")) == ["_raw/shop/more#Round 1",
                                                     "_raw/shop/talk#Round 1"]


def test_a_watched_index_stats_no_record_until_the_kernel_reports_a_change(vault, tmp_path,
                                                                           monkeypatch):
    """With a watch (a long-running process's), a query that finds no change reported in the
    raw folders since the index last agreed with them stats no record file; an append, an
    edit in place, a record removed, a new project's folder and the index file rewritten by
    another process are each found by the next query all the same."""
    from osk.store.watch import Watch

    probe = Watch.start(vault.root)
    if probe is None:  # not Linux, or no inotify watch to be had: every query stats, as tested
        pytest.skip("no complete kernel report of changes on this system")
    probe.close()
    looks = _calls_of(monkeypatch, "_records_on_disk")
    shop = make_project(tmp_path / "shop")
    engine = Engine.open(vault, cwd=shop)
    engine.append_raw("talk", user="the zeppelin arrives", assistant="ok")
    index = RoundIndex(vault, watch=True)
    everyone = {"k": 5, "visible": lambda key: True}

    def found(query: str) -> list[str]:
        return [hit.coordinate for hit in index.search(query, **everyone)]

    assert found("zeppelin") == ["_raw/shop/talk#Round 1"]
    looks.clear()
    assert found("zeppelin") == ["_raw/shop/talk#Round 1"] and looks == []
    engine.append_raw("talk", user="a kestrel hovers", assistant="ok")
    assert found("kestrel") == ["_raw/shop/talk#Round 2", "_raw/shop/talk#Round 1"]
    assert looks == [1]
    record = vault.root / "_raw" / "shop" / "talk.md"
    record.write_bytes(record.read_bytes().replace(b"kestrel", b"merlins"))  # in place
    assert found("kestrel") == [] and found("merlins")[0] == "_raw/shop/talk#Round 2"
    Engine.open(vault, cwd=make_project(tmp_path / "yard")).append_raw(
        "chat", user="a heron waits", assistant="ok")  # a new project's folder
    assert found("heron") == ["_raw/yard/chat#Round 1"]
    record.unlink()
    assert found("zeppelin") == []
    redaction.drop_caches(vault)  # the file deleted behind the kept connection: built anew
    assert found("heron") == ["_raw/yard/chat#Round 1"] and index.path.exists()
    looks.clear()
    RoundIndex(vault).refresh()  # another index (process) finds nothing to do
    other = Engine.open(vault, cwd=shop)
    other.append_raw("more", user="the zeppelin leaves", assistant="ok")
    RoundIndex(vault).refresh()  # ... and then indexes a round: the file moved
    assert found("zeppelin") == ["_raw/shop/more#Round 1"]


def test_a_kept_connection_reads_its_map_again_after_another_process_shrinks_the_file(
        vault, tmp_path):
    """A long-running process's connection maps the index file (``MAP_BYTES``). Another
    process that rebuilds the index in place (an older schema's, its pages given back by
    VACUUM: the file shrinks to a fraction) leaves that connection reading the new file: the
    rounds still held are found, the one removed is not, and nothing reads past the end."""
    import sqlite3
    import subprocess
    import sys

    shop = make_project(tmp_path / "shop")
    engine = Engine.open(vault, cwd=shop)
    engine.append_raw("talk", user="the kite string snapped at noon", assistant="noted")
    engine.append_raw("yarn", user="the kite tail tangled", assistant="ok")
    index = RoundIndex(vault, watch=True)
    everyone = {"k": 5, "visible": lambda key: True}
    assert len(index.search("kite", **everyone)) == 2  # built, and its connection kept
    with index._open() as kept:
        assert 0 < kept.execute("PRAGMA mmap_size").fetchone()[0] <= MAP_BYTES  # SQLite's cap
    with sqlite3.connect(index.path) as db:  # some 3 MB of pages the rebuild gives back
        db.execute("CREATE TABLE ballast (row INTEGER PRIMARY KEY, body TEXT)")
        db.executemany("INSERT INTO ballast VALUES (?, ?)",
                       [(row, "kite " * 800) for row in range(800)])
        db.commit()
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # into the file the map covers
    grown = index.path.stat().st_size
    assert sorted(h.coordinate for h in index.search("kite", **everyone)) == [
        "_raw/shop/talk#Round 1", "_raw/shop/yarn#Round 1"]  # the grown file mapped
    (vault.root / "_raw" / "shop" / "yarn.md").unlink()
    with sqlite3.connect(index.path) as db:
        db.execute("DROP TABLE ballast")
        db.execute("UPDATE meta SET value='11' WHERE key='schema'")
    rebuild = ("import sys; from pathlib import Path; from osk.store.vault import Vault; "
               "from osk.search.rounds import RoundIndex; "
               "print(RoundIndex(Vault(Path(sys.argv[1]))).refresh())")
    done = subprocess.run([sys.executable, "-c", rebuild, str(vault.root)], check=True,
                          capture_output=True, text=True)
    assert done.stdout.strip() == "1"  # the one record left, indexed anew
    with sqlite3.connect(index.path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert index.path.stat().st_size < grown // 4
    assert [h.coordinate for h in index.search("kite", **everyone)] == ["_raw/shop/talk#Round 1"]
    assert [h.coordinate for h in index.search("tangled", **everyone)] == []


def test_a_round_is_recalled_for_the_speaker_who_said_the_words(vault, tmp_path):
    shop = make_project(tmp_path / "shop")
    talk(Engine.open(vault, cwd=shop),
         ("Notes from the call. Alice: I moved the zeppelin timetable to fridays. "
          "Bob: Great, thanks!", "Noted."))
    notes = "_raw/shop/talk#Round 8"
    # Alice said it: her lines hold the prompt's words
    assert shown(vault, "Why did Alice move the zeppelin timetable?")[:1] == [notes]
    # the round holds Bob's name and the same words, but only in Alice's lines
    assert shown(vault, "Why did Bob move the zeppelin timetable?") == []
    # no speaker named: the round's words count as they are
    assert shown(vault, "Why was the zeppelin timetable moved?")[:1] == [notes]


def test_the_rounds_gate_reads_its_floors_where_they_are_set(vault, tmp_path, monkeypatch):
    from osk.hooks.recall import per_prompt

    shop = make_project(tmp_path / "shop")
    talk(Engine.open(vault, cwd=shop), ("the zeppelin timetable moved to fridays", "Noted."))
    assert shown(vault, "zeppelin timetable?")
    monkeypatch.setattr(per_prompt, "ROUND_ALONE", 1.01)
    monkeypatch.setattr(per_prompt, "ROUND_AGREEMENT", 9.0)
    assert shown(vault, "zeppelin timetable?") == []  # the same round, the floors out of reach


def test_an_index_whose_schema_cannot_be_read_is_not_taken_for_a_new_one(vault, tmp_path):
    import sqlite3
    from contextlib import closing

    engine = Engine.open(vault, cwd=make_project(tmp_path / "shop"))
    engine.append_raw("talk", user="the staging box reboots nightly", assistant="Ok.")
    assert rounds_of(engine, "staging reboots") == ["_raw/shop/talk#Round 1"]
    index = RoundIndex(vault)

    class Refusing:  # a connection whose read of the schema fails as on a full disk
        def __init__(self, db: sqlite3.Connection) -> None:
            self.db, self.statements = db, []

        def execute(self, sql: str, *args: object) -> object:
            self.statements.append(sql)
            if "FROM meta" in sql:
                raise sqlite3.OperationalError("disk I/O error")
            return self.db.execute(sql, *args)

        def executescript(self, sql: str) -> object:
            self.statements.append(sql)
            return self.db.executescript(sql)

    with closing(sqlite3.connect(index.path, isolation_level=None)) as db:
        refusing = Refusing(db)
        with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):
            index._schema(refusing)  # type: ignore[arg-type]
    assert len(refusing.statements) == 1  # the read alone: no table dropped
    assert rounds_of(Engine.open(vault, cwd=tmp_path / "shop"), "staging reboots") == [
        "_raw/shop/talk#Round 1"]
