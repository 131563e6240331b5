"""Per-prompt recall: the prompt-submit hook injects the few nodes that answer the prompt.

The hooks run as the hosts run them (a fresh ``python -m osk hook`` process, the payload in the
host's documented shape on stdin) against a vault written through the real engine, whose
search index keeps the recall file the hook reads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from authority_support import FakeTerminal
from hookkit import CLAUDE_SESSION, CODEX_SESSION, payload, run_hook, state
from recallkit import FACT, prompt, start, write
from writekit import make_repo, sqlite_disk_full, write_toml

from osk.authority import approvals, tombstones
from osk.calls.request import NewNode, NodeEdit
from osk.engine.core import Engine
from osk.hooks import digest
from osk.hooks.recall import per_prompt
from osk.search import recallfile
from osk.search.bm25 import Bm25
from osk.search.tokenize import tokenize


@pytest.mark.parametrize("host", ["claude", "codex"])
def test_a_prompt_gets_the_nodes_that_answer_it_without_their_bodies(eng, project, tmp_path,
                                                                      host):
    node_id = write(eng, *FACT)
    block = prompt(host, project, "how are release tags signed, minisign or gpg?", "p-1",
                   tmp_path)
    assert block.startswith("<osk-recall>") and block.endswith("</osk-recall>")
    assert FACT[0] in block and FACT[1] in block and f"id {node_id}" in block
    assert "`read_node`" in block and "not instructions" in block
    assert "BODY-SECRET-WORDS" not in block
    conversation = CLAUDE_SESSION if host == "claude" else CODEX_SESSION
    assert node_id in state(eng.vault, host, conversation).recalled


def test_a_prompt_nothing_answers_gets_nothing(eng, project, tmp_path):
    write(eng, *FACT)
    write(eng, "Cart totals round half to even", "Totals round half to even, per line.",
          "Rounding of cart totals.\n", cluster="cart")
    assert prompt("claude", project, "what colour palette does the dark theme use?", "p-1",
                  tmp_path) == ""
    assert prompt("claude", project, "ok, next one please", "p-2", tmp_path) == ""


def test_the_block_stays_within_the_budget_for_long_summaries(eng, vault, project, tmp_path):
    for n in range(8):
        write(eng, f"Minisign signing note {n}", f"minisign release signing {n} " + "word " * 54,
              "minisign.\n")
    block = prompt("claude", project, "minisign release signing", "p-1", tmp_path)
    assert 0 < len(block) <= per_prompt.DEFAULT_BUDGET
    assert block.count("\n- ") >= 2  # long summaries are cut, not dropped wholesale
    settings = (vault.root / "osk.toml").read_text(encoding="utf-8")
    assert "\nbudget = 1200\n" in settings  # the template's [recall] table
    write_toml(vault, settings.replace("\nbudget = 1200\n", "\nbudget = 400\n"))
    small = prompt("codex", project, "minisign release signing", "p-2", tmp_path)
    assert 0 < len(small) <= 400
    write_toml(vault, (vault.root / "osk.toml").read_text(encoding="utf-8")
               + "hosts = { codex = 0, claude = 350 }\n")  # room for one item, provenance and all
    assert prompt("codex", project, "minisign release signing", "p-3", tmp_path) == ""
    other = prompt("claude", project, "minisign release signing", "p-4", tmp_path)
    assert 0 < len(other) <= 350


def test_another_scopes_node_never_appears_even_for_its_exact_title(eng, vault, project,
                                                                    tmp_path):
    other = Engine.open(vault, cwd=make_repo(tmp_path / "work" / "billing"))
    other.warm()
    write(other, "Invoices are numbered per fiscal year", "Invoice numbers restart each "
          "fiscal year.", "Invoices.\n", cluster="invoices")
    own = write(eng, "Carts expire after thirty days", "Abandoned carts are purged after thirty "
                "days.", "Carts.\n", cluster="cart")
    eng.search("anything")  # the index has walked and seen the other session's node
    assert prompt("claude", project, "Invoices are numbered per fiscal year", "p-1",
                  tmp_path) == ""
    control = prompt("claude", project, "Carts expire after thirty days", "p-2", tmp_path)
    assert f"id {own}" in control


def test_a_node_in_a_protected_region_is_injected_as_its_approved_version(
        eng, vault, project, tmp_path, monkeypatch):
    node_id = write(eng, "Editor of choice is Helix", "The person edits in Helix.",
                    "Helix.\n", space="Person", cluster="prefs")
    with monkeypatch.context() as person:
        person.setattr(sys, "stdin", FakeTerminal())
        approvals.protect(vault, "Person/prefs")
    eng.update_node("Editor of choice is Helix", NodeEdit(summary="The person edits in Zed now."))
    eng.search("editor")  # the index takes the change (served: the approved version)
    block = prompt("claude", project, "which editor of choice, Helix?", "p-1", tmp_path)
    assert f"id {node_id}" in block
    assert "The person edits in Helix." in block and "Zed" not in block
    assert "pending" in block


def test_a_rejected_claim_never_appears_even_when_its_file_comes_back(
        eng, vault, project, tmp_path, monkeypatch):
    node_id = write(eng, *FACT)
    path = vault.abs(eng.read_node(node_id).path)
    text = path.read_text(encoding="utf-8")
    assert f"id {node_id}" in prompt("claude", project, "minisign release tags", "p-1", tmp_path)
    with monkeypatch.context() as person:
        person.setattr(sys, "stdin", FakeTerminal())
        tombstones.reject(vault, node_id, reason="we moved to sigstore")
    assert prompt("codex", project, "minisign release tags", "p-2", tmp_path) == ""
    path.write_text(text, encoding="utf-8")  # restored by hand, or synced from a stale device
    eng.search("minisign")
    assert per_prompt.ranked(vault, eng.scope, "minisign release tags")  # search still ranks it
    assert prompt("codex", project, "minisign release tags", "p-3", tmp_path) == ""


def test_the_same_node_is_not_injected_twice_in_one_conversation(eng, project, tmp_path):
    node_id = write(eng, *FACT)
    first = prompt("claude", project, "how are release tags signed?", "p-1", tmp_path)
    again = prompt("claude", project, "release tags signed with minisign?", "p-2", tmp_path)
    assert f"id {node_id}" in first and again == ""
    eng.update_node(FACT[0],
                    NodeEdit(summary="Release tags are signed with minisign and sigstore."))
    changed = prompt("claude", project, "how are release tags signed?", "p-3", tmp_path)
    assert f"id {node_id}" in changed  # a new version is news


def test_a_compaction_lets_recalled_nodes_be_shown_again(eng, project, tmp_path):
    node_id = write(eng, *FACT)
    for n in range(digest.USED + 1):  # newer nodes: the digest will not list FACT
        write(eng, f"Cart rule {n}", f"Cart rule number {n}.", "Cart.\n", cluster="cart")
    assert f"id {node_id}" in prompt("claude", project, "release tags signed?", "p-1", tmp_path)
    assert prompt("claude", project, "release tags signed?", "p-2", tmp_path) == ""
    compacted = start("claude", project, tmp_path, source="compact")
    assert node_id not in compacted
    assert f"id {node_id}" in prompt("claude", project, "release tags signed?", "p-3", tmp_path)


@pytest.mark.parametrize("allowed", [True, False])
def test_inferred_person_facts_follow_inject_inferred_person(eng, vault, project, tmp_path,
                                                             allowed):
    node_id = write(eng, "Prefers tabs over spaces", "The person prefers tabs over spaces.",
                    "Tabs.\n", space="Person", cluster="style")
    settings = (vault.root / "osk.toml").read_text(encoding="utf-8")
    write_toml(vault, settings.replace("inject_inferred_person = true",
                                       f"inject_inferred_person = {str(allowed).lower()}"))
    block = prompt("claude", project, "tabs or spaces, what does the person prefer?", "p-1",
                   tmp_path)
    if allowed:
        assert f"id {node_id}" in block and "inferred" in block
    else:
        assert block == ""


def test_recall_ranks_exactly_as_search_does(eng, vault, tmp_path):
    for n, words in enumerate(["minisign signing keys", "release checklist tags",
                               "signing the release tags by hand", "cart totals rounding",
                               "docs deploy preview tags"]):
        write(eng, f"Note {n} on {words}", f"About {words}.", f"{words} body {n}.\n",
              cluster="general" if n == 3 else f"c{n % 2}", space="Domain" if n == 3 else "Scope")
    for query in ("release tags", "signing", "Note 3 on cart totals rounding", "tags preview"):
        searched = [hit.id for hit in eng.search(query, k=5).hits]
        recalled = [hit.id for hit in per_prompt.ranked(vault, eng.scope, query, depth=5)]
        assert recalled == searched, query


class Watched:
    """A read-only connection to the recall file that keeps every statement run on it and
    every row it returned."""

    def __init__(self, db: object) -> None:
        self.db, self.statements, self.rows = db, [], []

    def execute(self, sql: str, args: tuple[object, ...] = ()) -> Rows:
        rows = self.db.execute(sql, args).fetchall()  # type: ignore[attr-defined]
        self.statements.append(sql)
        self.rows.extend(rows)
        return Rows(rows)

    def close(self) -> None:
        self.db.close()  # type: ignore[attr-defined]


class Rows(list):  # type: ignore[type-arg]
    def fetchone(self) -> object:
        return self[0] if self else None

    def fetchall(self) -> list[object]:
        return list(self)


def test_the_hook_reads_the_counts_of_dfs_only_for_a_word_in_over_half_the_documents(
        eng, vault, monkeypatch):
    """The counts of document frequencies (a row a distinct df, 2,000 at 100,000 nodes) are
    what rank-bm25's floor for a word in over half the documents sums: a prompt without one
    reads none of them; one with it ranks as search does, from them."""
    node_id = write(eng, *FACT)
    for n in range(3):
        write(eng, f"Release note {n}", f"Release {n} of the shop.", f"release {n}\n")
    opened: list[Watched] = []
    real = recallfile.open_reader
    monkeypatch.setattr(recallfile, "open_reader",
                        lambda directory: opened.append(Watched(real(directory))) or opened[-1])
    assert [hit.id for hit in per_prompt.ranked(vault, eng.scope, "minisign")] == [node_id]
    assert opened[-1].rows
    assert not [sql for sql in opened[-1].statements if recallfile.COUNTS in sql.split()]
    # "release" in the fact, the three notes and the hub: in over half the documents
    bm25 = eng._index._corpus.bm25
    assert 2 * bm25.df(tokenize("release")[0]) > bm25.size
    recalled = [hit.id for hit in per_prompt.ranked(vault, eng.scope, "release minisign",
                                                    depth=5)]
    assert recalled == [hit.id for hit in eng.search("release minisign", k=5).hits]
    assert [sql for sql in opened[-1].statements if recallfile.COUNTS in sql.split()]


def test_the_recall_file_is_rebuilt_or_mended_by_the_next_index_load(eng, vault, project,
                                                                     tmp_path):
    node_id = write(eng, *FACT)
    directory = vault.state("index")
    recallfile.remove(directory)
    assert per_prompt.ranked(vault, eng.scope, "minisign") == []
    Engine.open(vault, cwd=project).warm()  # a new process loads the index: rebuilt
    assert [hit.id for hit in per_prompt.ranked(vault, eng.scope, "minisign")] == [node_id]
    path = eng.read_node(node_id).path  # a change it missed (killed before mirroring)
    recallfile.RecallWriter(directory).mirror([["del", path]], {})
    assert per_prompt.ranked(vault, eng.scope, "minisign") == []
    Engine.open(vault, cwd=project).warm()
    assert [hit.id for hit in per_prompt.ranked(vault, eng.scope, "minisign")] == [node_id]


def test_a_new_process_finding_the_recall_file_current_writes_nothing_to_it(
        eng, vault, project, monkeypatch):
    write(eng, *FACT)
    for path in vault.root.glob("Scope/**/*.md"):  # written long ago: no file is racy
        os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns - 3600 * 10**9))
    eng.search("minisign")  # the index reads them again at their new stat
    writes: list[object] = []
    monkeypatch.setattr(recallfile.RecallWriter, "mirror",
                        lambda self, ops, meta: writes.append(("mirror", ops)))
    monkeypatch.setattr(recallfile.RecallBuild, "__init__",
                        lambda self, *args: writes.append("rebuild"))
    expected = eng.search("release minisign").hits  # "release": in both, its idf floored
    monkeypatch.setattr(Bm25, "all_terms", lambda self: pytest.fail("mean idf recounted"))
    fresh = Engine.open(vault, cwd=project)  # what `osk search` does in a new process
    assert fresh.search("release minisign").hits == expected  # the file's mean idf
    assert writes == []  # before: its meta rewritten (and the mean idf computed) on every load


def test_a_hand_edit_is_not_shown_from_the_stale_copy(eng, vault, project, tmp_path):
    node_id = write(eng, *FACT)
    path = vault.abs(eng.read_node(node_id).path)
    path.write_text(path.read_text(encoding="utf-8").replace("docs/KEY", "docs/OTHER-KEY"),
                    encoding="utf-8")
    assert prompt("claude", project, "minisign release tags", "p-1", tmp_path) == ""
    eng.refresh()
    eng.search("minisign")  # the index reads the edit
    block = prompt("claude", project, "minisign release tags", "p-2", tmp_path)
    assert "docs/OTHER-KEY" in block


def test_a_bad_recall_setting_costs_the_block_not_the_turn(eng, vault, project, tmp_path):
    write(eng, *FACT)
    write_toml(vault, (vault.root / "osk.toml").read_text(encoding="utf-8").replace(
        "\nbudget = 1200\n", "\nbudgte = 400\n"))
    assert prompt("claude", project, "minisign release tags", "p-1", tmp_path) == ""
    log = (vault.state("logs", "hooks.log")).read_text(encoding="utf-8")
    assert "recall failed" in log and "budgte" in log


def test_the_hook_recalls_on_the_standard_library_alone(eng, project, tmp_path):
    write(eng, *FACT)
    for n in range(digest.USED + 1):  # newer nodes: the digest will not list FACT
        write(eng, f"Cart rule {n}", f"Cart rule number {n}.", "Cart.\n", cluster="cart")
    start = payload("claude", "session_start", transcript=tmp_path / "t.jsonl", cwd=project)
    assert run_hook("session-start", "claude", start, cwd=project).returncode == 0
    data = payload("claude", "prompt_submit", transcript=tmp_path / "t.jsonl", cwd=project,
                   prompt_id="p-1", prompt="how are release tags signed?")
    script = "\n".join([
        "import io, sys",
        "from osk.hooks.main import run",
        f"sys.stdin = io.TextIOWrapper(io.BytesIO({data!r}))",
        "assert run(['prompt-submit', '--host', 'claude']) == 0",
        "print(' '.join(sys.modules), file=sys.stderr)",
    ])
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=project, env={**os.environ, "OSK_GROWTH": "off"}, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "<osk-recall>" in done.stdout
    loaded = set(done.stderr.split())
    assert "osk.search.recallfile" in loaded
    assert not loaded & {"pydantic", "yaml", "mcp", "git", "rank_bm25", "numpy"}
    assert "osk.search.index" not in loaded  # the fast path: no index load
    assert "osk.provenance.sessions" not in loaded  # the scope the session start resolved, reused


# -- the session-start digest -------------------------------------------------------------------
def test_session_start_lists_the_newest_and_the_most_cited_nodes(eng, vault, project,
                                                                 tmp_path):
    other = Engine.open(vault, cwd=make_repo(tmp_path / "work" / "billing"))
    other.warm()
    write(other, "Invoices are numbered per fiscal year", "Invoice numbers restart yearly.",
          "Invoices.\n", cluster="invoices")
    cited = write(eng, *FACT)
    for n in range(3):
        eng.read_node(cited)
        eng.create_node(NewNode(f"Release step {n}", f"Step {n} of a release.", f"Step {n}.\n",
                                space="Scope", cluster="release", drafter="test-model",
                                derived_from=[f"[[{FACT[0]}]]"]))
    eng.search("anything")
    text = start("claude", project, tmp_path)
    used = text.split("## Nodes this scope's work uses", 1)[1].split("## ", 1)[0]
    assert "Release step 2" in used and "Invoices" not in text
    assert used.index(FACT[0]) < used.index("Release step 2")  # cited first, then newest
    assert f"{FACT[0]} (id {cited}; agent, inferred; cites nothing; cited by 3): {FACT[1]}" in used
    # what the digest showed is not recalled again on the next prompt of the conversation
    assert cited in state(vault, "claude", CLAUDE_SESSION).recalled
    assert prompt("claude", project, "how are release tags signed?", "p-1", tmp_path) == ""


def test_a_recall_file_of_another_schema_leaves_the_session_start_without_a_digest_only(
        eng, vault, project, tmp_path):
    import sqlite3

    write(eng, *FACT)
    eng.search("anything")  # the index writes its recall file
    path = vault.state("index", "recall.sqlite")
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = '999' WHERE key = 'schema'")
    db.close()
    text = start("claude", project, tmp_path)
    assert "## Scope memory" in text  # the rest of the block still reaches the model
    assert FACT[0] not in text  # nothing read from a file this hook cannot read


@pytest.mark.parametrize("allowed", [True, False])
def test_session_start_carries_person_facts_as_inject_inferred_person_says(
        eng, vault, project, tmp_path, allowed):
    node_id = write(eng, "Prefers tabs over spaces", "The person prefers tabs over spaces.",
                    "Tabs.\n", space="Person", cluster="style")
    settings = (vault.root / "osk.toml").read_text(encoding="utf-8")
    write_toml(vault, settings.replace("inject_inferred_person = true",
                                       f"inject_inferred_person = {str(allowed).lower()}"))
    text = start("codex", project, tmp_path)
    if allowed:
        person = text.split("## About the person (Person space)", 1)[1].split("## ", 1)[0]
        assert f"Prefers tabs over spaces (id {node_id}; agent, inferred; cites nothing)" in person
    else:
        assert "Prefers tabs over spaces" not in text and node_id not in text


# -- related nodes in read_node -------------------------------------------------------------------
def fact_citing_its_source(eng: Engine) -> str:
    """FACT, written citing a node "Signing key custody" (read first, as the write path asks)."""
    source = write(eng, "Signing key custody", "The minisign key lives on the release box.",
                   "Key custody.\n")
    eng.read_node(source)
    return eng.create_node(NewNode(FACT[0], FACT[1], FACT[2], space="Scope", cluster="release",
                                   drafter="test-model",
                                   derived_from=["[[Signing key custody]]"])).id


def test_read_node_lists_citation_neighbours_both_ways_then_similar_nodes(eng, vault,
                                                                         tmp_path):
    other = Engine.open(vault, cwd=make_repo(tmp_path / "work" / "billing"))
    write(other, "Minisign keys for billing releases", "Billing signs with minisign too.",
          "minisign release tags billing.\n", cluster="keys")
    node_id = fact_citing_its_source(eng)
    eng.read_node(node_id)
    eng.create_node(NewNode("Release checklist", "Tag, sign with minisign, push.", "Checklist.\n",
                            space="Scope", cluster="release", drafter="test-model",
                            derived_from=[f"[[{FACT[0]}]]"]))
    similar = write(eng, "Verifying minisign release tag signatures",
                    "Verify a release tag's minisign signature with the docs KEY.", "Verify.\n")
    related = {r.title: r.why for r in eng.read_node(node_id).related}
    assert related["Signing key custody"] == "cited by this node (derived-from)"
    assert related["Release checklist"] == "cites this node (derived-from)"
    assert related["Verifying minisign release tag signatures"].startswith("similar: ")
    assert "Minisign keys for billing releases" not in related  # another scope: invisible
    assert FACT[0] not in related
    assert list(related)[:2] == ["Signing key custody", "Release checklist"]
    assert similar in {r.id for r in eng.read_node(node_id).related}


def test_read_node_finds_similar_nodes_by_the_rarest_words_within_a_bounded_read(
        eng, monkeypatch):
    """Similar nodes come from the postings of the node's rarest words only (as many as
    ``RELATED_POSTINGS`` allow), so a read costs the same in any vault; the nodes found are
    still ordered by the node's commoner words too."""
    import osk.calls.related

    monkeypatch.setattr(osk.calls.related, "RELATED_POSTINGS", 5)  # calibration (1+1), quasar (3)
    node = write(eng, "Quasar widget calibration", "How the widget is calibrated.", "Steps.\n")
    alike = write(eng, "Quasar widget notes", "Widget notes.", "Notes.\n")
    rare_only = write(eng, "Quasar sky notes", "Sky notes.", "Notes.\n")
    common_only = [write(eng, f"Widget part {n}", "A widget part.", "Part.\n") for n in range(4)]
    similar = [r.id for r in eng.read_node(node).related if r.why.startswith("similar")]
    assert similar == [alike, rare_only]  # "widget" is in 6 nodes: its postings are not read
    monkeypatch.setattr(osk.calls.related, "RELATED_POSTINGS", 1000)  # room for every word
    unbounded = [r.id for r in eng.read_node(node).related if r.why.startswith("similar")]
    assert unbounded[0] == alike and rare_only in unbounded
    assert set(unbounded) & set(common_only)  # what the bound left out: "widget" alone


@pytest.mark.anyio
async def test_read_node_returns_related_through_the_mcp_tool(vault, project):
    import mcp

    from osk.surfaces.server import build_server

    server = build_server(lambda: Engine.open(vault, cwd=project))
    engine = Engine.open(vault, cwd=project)
    write(engine, *FACT)
    write(engine, "Verifying minisign release tags", "Verify a tag's minisign signature.",
          "Verify.\n")
    async with mcp.Client(server) as client:
        result = await client.call_tool("read_node", {"node": FACT[0]})
    assert not result.is_error
    related = result.structured_content["related"]
    assert {"title": "Verifying minisign release tags", "id": related[0]["id"],
            "why": related[0]["why"]} == related[0]
    assert related[0]["why"].startswith("similar: ")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_the_hooks_names_for_marker_files_are_their_owners():
    from osk.authority import protection
    from osk.provenance import candidates, markers

    assert markers.CANDIDATES_LEDGER == candidates.LEDGER
    assert markers.APPROVALS_LEDGER == protection.APPROVALS


def test_a_hit_carries_the_recheck_marker_when_a_node_it_cites_changed(eng, vault, project,
                                                                      tmp_path):
    node_id = fact_citing_its_source(eng)
    eng.update_node("Signing key custody", NodeEdit(old_text="Key custody.",
                                                    new_text="Key custody, "
                             "moved to a hardware key."))
    assert "recheck" in eng.search("minisign release tags").hits[0].markers
    block = prompt("claude", project, "are release tags signed with minisign?", "p-1",
                   tmp_path)
    assert f"(id {node_id}; agent, inferred; cites 1 node; recheck)" in block


def test_the_node_that_supersedes_another_is_recalled_in_its_place(eng, project, tmp_path):
    old = write(eng, "Match tick rate is 30 Hz", "The match server ticks at 30 Hz.",
                "The match server simulation ticks at 30 Hz.\n", cluster="net")
    new = eng.create_node(NewNode("Simulation rate raised",
                                  "Since v2 the simulation runs at 60 Hz.",
                                  "Raised to 60 Hz for v2.\n", space="Scope", cluster="net",
                                  drafter="test-model", supersedes="Match tick rate is 30 Hz")).id
    block = prompt("claude", project, "what tick rate does the match server run at?", "p-1",
                   tmp_path)
    assert f"id {new}" in block and f"id {old}" not in block


def test_a_node_whose_text_says_it_supersedes_another_is_recalled_in_its_place(
        eng, project, tmp_path):
    old = write(eng, "Match tick rate is 30 Hz", "The match server ticks at 30 Hz.",
                "The match server simulation ticks at 30 Hz.\n", cluster="net")
    new = write(eng, "Simulation rate raised", "Since v2 the simulation runs at 60 Hz.",
                '**Supersedes** "Match tick rate is 30 Hz".\n\nRaised to 60 Hz for v2.\n',
                cluster="net")
    block = prompt("claude", project, "what tick rate does the match server run at?", "p-1",
                   tmp_path)
    assert f"id {new}" in block and f"id {old}" not in block


def test_a_write_while_another_writer_holds_the_recall_file_reaches_it_later(
        eng, vault, project, tmp_path, monkeypatch):
    import sqlite3

    write(eng, *FACT)
    monkeypatch.setattr(recallfile, "BUSY_MS", 50)
    holder = sqlite3.connect(recallfile.path_in(vault.state("index")), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process in the middle of its own change
    try:
        held = write(eng, "Cart totals round half to even", "Totals round half to even.",
                     "Rounding.\n", cluster="cart")
        assert not [h for h in per_prompt.ranked(vault, eng.scope, "cart totals round")
                    if h.id == held]
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert recallfile.path_in(vault.state("index")).exists()  # kept, not thrown away
    write(eng, "Cart lines merge by SKU", "Lines with one SKU merge.", "Merge.\n", cluster="cart")
    assert held in [h.id for h in per_prompt.ranked(vault, eng.scope, "cart totals round")]


def test_a_write_the_disk_refuses_the_recall_file_reaches_it_once_the_disk_takes_writes(
        eng, vault, project, tmp_path, caplog):
    write(eng, *FACT)
    words = " ".join(f"ledgerword{n}" for n in range(400))  # more postings than a page holds
    with sqlite_disk_full(recallfile.FILE):
        held = write(eng, "Cart totals round half to even", "Totals round half to even.",
                     f"Rounding. {words}\n", cluster="cart")
    assert "the recall file stays behind until the disk takes writes again" in caplog.text
    assert "(ENOSPC" in caplog.text
    assert recallfile.path_in(vault.state("index")).exists()  # kept whole, not thrown away
    assert not [h for h in per_prompt.ranked(vault, eng.scope, "cart totals round")
                if h.id == held]
    write(eng, "Cart lines merge by SKU", "Lines with one SKU merge.", "Merge.\n", cluster="cart")
    assert held in [h.id for h in per_prompt.ranked(vault, eng.scope, "cart totals round")]
    assert held in [h.id for h in per_prompt.ranked(vault, eng.scope, "ledgerword7")]


def test_a_recall_file_the_disk_refuses_for_longer_than_the_backlog_holds_is_built_again(
        eng, vault, project, tmp_path, monkeypatch, caplog):
    from osk.search import recall_mirror

    write(eng, *FACT)
    monkeypatch.setattr(recall_mirror, "BACKLOG_MOST", 1)
    words = " ".join(f"ledgerword{n}" for n in range(400))  # more postings than a page holds
    with sqlite_disk_full(recallfile.FILE):
        first = write(eng, "Cart totals round half to even", "Totals round half to even.",
                      f"Rounding. {words}\n", cluster="cart")
        assert recallfile.path_in(vault.state("index")).exists()
        write(eng, "Cart lines merge by SKU", "Lines with one SKU merge.", f"Merge. {words}\n",
              cluster="cart")
    assert "removing it (rebuilt on next load)" in caplog.text
    assert not recallfile.path_in(vault.state("index")).exists()
    Engine.open(vault, cwd=project).search("cart", k=5)  # the next load builds it again
    assert first in [h.id for h in per_prompt.ranked(vault, eng.scope, "cart totals round")]


# -- hubs (issue 24 item 6) ------------------------------------------------------------------------
HUB_WORDS = "How minisign signing keys for release tags are rotated and stored"


def test_a_hub_is_never_in_the_session_start_digest_even_when_most_cited(eng, vault, project,
                                                                        tmp_path):
    made = eng.create_node(NewNode(FACT[0], FACT[1], FACT[2], space="Scope", cluster="release",
                                   drafter="test-model", hub_summary=HUB_WORDS))
    for n in range(2):  # the hub, cited by two nodes: the most cited node of the scope
        eng.create_node(NewNode(f"Release step {n}", f"Step {n} of a release.", f"Step {n}.\n",
                                space="Scope", cluster="release", drafter="test-model",
                                derived_from=["[[release]]"]))
    eng.search("anything")
    text = start("claude", project, tmp_path)
    assert made.hub and FACT[0] in text and "Release step 1" in text
    assert HUB_WORDS not in text and "(id " + eng.read_node("release").id not in text


def test_a_hub_is_recalled_only_for_a_prompt_about_its_cluster(eng, vault, project, tmp_path):
    eng.create_node(NewNode(FACT[0], FACT[1], FACT[2], space="Scope", cluster="release",
                            drafter="test-model", hub_summary=HUB_WORDS))
    eng.search("anything")
    hub_id = eng.read_node("release").id
    block = prompt("claude", project, "how are minisign signing keys rotated and stored?",
                   "p-1", tmp_path)
    assert hub_id not in block
    about = prompt("claude", project, "what does the release cluster say about minisign "
                   "signing keys being rotated and stored?", "p-2", tmp_path)
    assert f"id {hub_id}" in about


# -- the digest ranks by use (issue 24 item 7) -----------------------------------------------------
IMPORTED = 1000


@pytest.mark.anyio
async def test_a_bulk_import_does_not_push_the_agents_nodes_out_of_the_digest(
        vault, project, tmp_path):
    import mcp

    from osk.surfaces.server import build_server

    agent = [(f"Checkout rule {n}", f"Checkout rule {n} the agent settled.") for n in range(3)]
    async with mcp.Client(build_server(lambda: Engine.open(vault, cwd=project))) as client:
        for title, summary in agent:  # the agents' work, through the real MCP server
            done = await client.call_tool("create_node", {
                "title": title, "summary": summary, "body": f"{summary}\n", "space": "scope",
                "cluster": "checkout", "drafter": "test-model",
                "hub_summary": "How checkout works"})
            assert not done.is_error, done.content[0].text
        assert not (await client.call_tool("read_node", {"node": agent[0][0]})).is_error
    notes = tmp_path / "notes.jsonl"  # then the person imports a pile of notes, all newer
    notes.write_text("".join(json.dumps({
        "title": f"Imported note {n}", "summary": f"An old note, number {n}.",
        "body": f"Note {n}.\n", "space": "scope", "scope": "shop", "cluster": "notes"}) + "\n"
        for n in range(IMPORTED)), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "osk", "import", str(notes)], cwd=project,
                          capture_output=True, text=True, encoding="utf-8")
    assert done.returncode == 0 and f"Imported {IMPORTED} node(s)" in done.stdout, done.stderr
    text = start("claude", project, tmp_path)
    assert [title for title, _ in agent if title not in text] == []  # before: all pushed out
    used = text.split("## Nodes this scope's work uses", 1)[1].split("## ", 1)[0]
    shown = [line for line in used.splitlines() if line.startswith("- ")]
    titles = [line.split(" (id ")[0] for line in shown]
    assert titles[0] == "- Checkout rule 0"  # written and read
    assert set(titles[1:3]) == {"- Checkout rule 1", "- Checkout rule 2"}  # written
    assert "used 2x lately" in shown[0] and "used 1x lately" in shown[1]
    assert len(shown) == digest.USED and "Imported note" in shown[-1]  # the rest: the newest
