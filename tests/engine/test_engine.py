"""The Engine: reading with pages, raw and file reads, search wiring, isolation, overview."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import writekit
from writekit import create, make_repo, snapshot, write_toml

from osk.calls.outline import Heading, outline_of
from osk.calls.pages import PAGE_CHARS
from osk.calls.request import NewNode, NodeEdit
from osk.engine.core import Engine
from osk.errors import EdgeError, LedgerFork, NodeNotFound, OskError, RawNotFound
from osk.provenance.candidates import Candidates
from osk.provenance.sessions import Routing
from osk.reads.raw_reads import RAW_CHARS
from osk.store.vault import Vault

repo, eng, hub = writekit.repo, writekit.eng, writekit.hub  # shared fixtures

LONG = (
    "Intro line.\n"
    + "## First\n" + "a" * 3000 + "\n"
    + "### Detail\n" + "b" * 3000 + "\n"
    + "## Second\n" + "c" * 3000 + "\n"
    + "```\n# not a heading\n```\n"
)


@pytest.fixture
def other(vault: Vault, tmp_path: Path) -> Engine:
    engine = Engine.open(vault, cwd=make_repo(tmp_path / "work" / "other"))
    engine.create_node(NewNode("billing", "How the other project bills", "Invoices in euros.\n",
                               space="Scope", cluster="billing", drafter="m"))
    engine.append_raw("talk", user="price?", assistant="ten euros")
    return engine


# -- read_node -------------------------------------------------------------------------------
def test_a_short_node_is_read_whole_with_the_hash_for_a_replacement(eng: Engine, hub: str):
    read = eng.read_node("auth")
    node = eng.catalog.get("auth")
    assert (read.complete, read.hash, read.text) == (True, node.file_hash, node.body)
    assert (read.next_start, read.scope, read.path) == (None, "proj", "Scope/proj/auth/auth.md")
    assert eng.read_node(node.id).title == "auth"


def test_a_long_body_comes_in_pages_and_only_a_complete_read_carries_the_hash(eng: Engine,
                                                                             hub: str):
    create(eng, "Long", body=LONG)
    first = eng.read_node("Long")
    assert (len(first.text), first.start, first.end, first.next_start) == (PAGE_CHARS, 0,
                                                                          PAGE_CHARS, PAGE_CHARS)
    assert first.hash is None and not first.complete and first.total_chars == len(LONG)
    rest = eng.read_node("Long", start=first.next_start, length=10_000)
    assert len(rest.text) == PAGE_CHARS and rest.hash is None
    assert first.text + rest.text + eng.read_node("Long", start=8000).text == LONG


def test_the_outline_lists_headings_outside_code_and_a_section_is_read_by_name(eng: Engine,
                                                                               hub: str):
    create(eng, "Long", body=LONG)
    read = eng.read_node("Long", length=10)
    assert [(h.level, h.title) for h in read.outline] == [(2, "First"), (3, "Detail"),
                                                          (2, "Second")]
    second = eng.read_node("Long", section="## second")
    assert second.section == "Second"
    assert second.text == "## Second\n" + "c" * 3000 + "\n```\n# not a heading\n```\n"
    assert second.next_start is None and second.hash is None
    first = eng.read_node("Long", section="First")
    assert first.text.startswith("## First\n") and len(first.text) == PAGE_CHARS
    assert first.next_start == PAGE_CHARS
    with pytest.raises(NodeNotFound) as caught:
        eng.read_node("Long", section="Nope")
    assert "First; Detail; Second" in str(caught.value)


def test_outline_spans_end_at_the_next_heading_of_the_same_or_higher_level():
    body = "# A\nx\n## B\ny\n# C\nz\n"
    assert outline_of(body) == (Heading(1, "A", 0, 13), Heading(2, "B", 6, 13),
                                Heading(1, "C", 13, 19))


def test_another_projects_node_is_invisible_unless_its_scope_is_shared(eng: Engine,
                                                                       other: Engine,
                                                                       vault: Vault):
    with pytest.raises(NodeNotFound):
        eng.read_node("billing")
    with pytest.raises(NodeNotFound):
        eng.read_node(other.catalog.get("billing").id)
    write_toml(vault, '[vault]\nshared_scopes = ["other"]\n')
    eng.refresh()
    assert eng.read_node("billing").node_scope == "other"


def test_with_isolation_off_every_scope_is_readable(eng: Engine, other: Engine, vault: Vault):
    write_toml(vault, "[vault]\nscope_isolation = false\n")
    eng.refresh()
    assert eng.read_node("billing").text == "Invoices in euros.\n"
    assert eng.read_raw("_raw/other/talk#Round 1").complete


# -- read_raw --------------------------------------------------------------------------------
def test_read_raw_returns_a_round_a_record_view_or_a_project_file(eng: Engine, repo: Path):
    first = eng.append_raw("talk", user="which port?", assistant="8080")
    eng.append_raw("talk", user="and the host?", assistant="localhost")
    round_read = eng.read_raw(f"[[{first.coordinate}]]")
    assert (round_read.kind, round_read.hash, round_read.complete) == ("round", first.hash, True)
    assert "which port?" in round_read.text and "localhost" not in round_read.text
    record = eng.read_raw("_raw/proj/talk")
    assert (record.kind, record.rounds) == ("record", (1, 2))
    assert "which port?" in record.text and "localhost" in record.text
    assert len(record.text) <= RAW_CHARS
    file_read = eng.read_raw("file:src/app.py")
    assert (file_read.kind, file_read.text) == ("file", "print('hello')\n")


def test_a_long_round_is_paged_at_the_raw_cap(eng: Engine):
    ref = eng.append_raw("talk", user="dump", assistant="z" * 13_000)
    first = eng.read_raw(ref.coordinate)
    assert len(first.text) == RAW_CHARS and first.next_start == RAW_CHARS
    assert not first.complete and first.hash == ref.hash
    assert eng.read_raw(ref.coordinate, start=RAW_CHARS, length=100).end == RAW_CHARS + 100


def test_read_raw_refuses_what_it_cannot_show(eng: Engine, other: Engine, hub: str):
    with pytest.raises(NodeNotFound):
        eng.read_raw("_raw/other/talk#Round 1")  # another project's conversation
    with pytest.raises(RawNotFound):
        eng.read_raw("_raw/proj/missing#Round 1")
    with pytest.raises(EdgeError):
        eng.read_raw("auth")
    with pytest.raises(NodeNotFound):
        eng.read_raw("file:src/nothing.py")


def test_append_raw_is_idempotent_per_completion(eng: Engine):
    first = eng.append_raw("talk", user="q", assistant="a", completion="turn-1", host="claude")
    again = eng.append_raw("talk", user="q", assistant="a", completion="turn-1", host="claude")
    assert (first.duplicate, again.duplicate, again.number) == (False, True, 1)
    assert first.path == "_raw/proj/talk.md" and first.scope == "proj"


# -- search ----------------------------------------------------------------------------------
def test_a_node_is_searchable_as_soon_as_create_returns(eng: Engine, hub: str):
    assert eng.search("quokka").hits == ()
    create(eng, "Mascot", body="Our mascot is a quokka.\n")
    result = eng.search("quokka")
    assert result.scope == "proj" and [h.title for h in result.hits] == ["Mascot"]
    eng.update_node("Mascot", NodeEdit(old_text="quokka", new_text="wombat"))
    assert eng.search("quokka").hits == ()  # the replaced text no longer finds it
    assert [h.title for h in eng.search("wombat").hits] == ["Mascot"]


def test_search_hides_other_projects_unless_shared(eng: Engine, other: Engine, vault: Vault):
    assert eng.search("invoices euros").hits == ()
    both = ["billing", "_raw/other/talk#Round 1"]  # the node, then the project's round
    assert [h.title for h in other.search("invoices euros").hits] == both
    write_toml(vault, '[vault]\nshared_scopes = ["other"]\n')
    eng.refresh()
    assert [h.title for h in eng.search("invoices euros").hits] == both


def test_search_hits_carry_recheck_and_conflict_markers(eng: Engine, vault: Vault, hub: str):
    create(eng, "Source", body="Limit ten.\n")
    create(eng, "Claim", body="We allow ten quokkas.\n", derived_from=("[[Source]]",))
    create(eng, "Rival", body="We allow five quokkas.\n")
    eng.update_node("Source", NodeEdit(old_text="ten", new_text="twelve"))
    Candidates(vault).record("contradiction", [eng.catalog.get("Claim"),
                                               eng.catalog.get("Rival")], "ten or five?")
    hits = {h.title: h.markers for h in eng.search("quokkas").hits}
    assert hits == {"Claim": ("conflict", "recheck"), "Rival": ("conflict",)}
    assert eng.read_node("Claim").markers == ("conflict", "recheck")


def test_a_fresh_engine_marks_only_the_stale_hits_as_a_warm_one_does(
        eng: Engine, vault: Vault, repo: Path, hub: str):
    # A new process's first search checks just its hits for the recheck marker; it must give
    # the answer the engine that saw every write gives.
    create(eng, "Source", body="Limit ten.\n")
    create(eng, "Claim", body="We allow ten quokkas.\n", derived_from=("[[Source]]",))
    create(eng, "Steady", body="Quokkas sleep by day.\n", derived_from=("[[Claim]]",))
    eng.update_node("Source", NodeEdit(old_text="ten", new_text="twelve"))
    warm = {h.title: h.markers for h in eng.search("quokkas").hits}
    fresh = Engine.open(vault, cwd=repo)
    assert {h.title: h.markers for h in fresh.search("quokkas").hits} == warm == {
        "Claim": ("recheck",), "Steady": ()}
    ids = [fresh.catalog.get(title).id for title in ("Claim", "Steady")]
    assert fresh.rechecks.stale_among(ids, fresh.catalog) == {ids[0]}


def test_a_warmed_engine_s_first_searches_import_nothing(eng: Engine, vault: Vault, repo: Path,
                                                        hub: str):
    """The MCP server warms its engine as it opens it: the first searches then find what they
    use loaded (before, numpy for the rounds' top-k, the node contract's pydantic models and
    YAML were imported by the searches that first met them, 80-160 ms of CPU each at 100,000
    records). Asked in a fresh interpreter, watched as the server's engine is, of nodes and of
    rounds enough for the top-k on arrays."""
    create(eng, "Kestrel", body="A kestrel hovers over the ridge.\n")
    for number in range(300):  # more postings of "kestrel" than round_arrays.SMALL
        eng.append_raw("talk", user=f"did kestrel {number} hover?", assistant="over the ridge",
                       completion=f"c-{number}")
    script = "\n".join([
        "import sys",
        "from pathlib import Path",
        "from osk.engine.core import Engine",
        f"engine = Engine.open(Path({str(vault.root)!r}), cwd=Path({str(repo)!r}), watch=True)",
        "engine.warm()",
        "before = set(sys.modules)",
        "kinds = [{h.space for h in engine.search(q).hits} for q in ('kestrel ridge', 'hover')]",
        "print(sorted(set(sys.modules) - before), sorted(set().union(*kinds)))",
    ])
    env = {**os.environ, "OSK_SEMANTIC": "0"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == "[] ['Scope', 'round']"


def test_k_is_capped_at_fifty(eng: Engine, hub: str):
    for i in range(3):
        create(eng, f"Note {i}", body="shared word\n")
    assert len(eng.search("shared word", k=500).hits) == 3
    assert len(eng.search("shared word", k=2).hits) == 2


# -- overview -------------------------------------------------------------------------------
def test_overview_reports_binding_counts_candidates_and_forks(eng: Engine, other: Engine,
                                                              vault: Vault, hub: str,
                                                              tmp_path: Path):
    create(eng, "Source")
    create(eng, "Claim", derived_from=("[[Source]]",))
    eng.create_node(NewNode("patterns", "hub", "x\n", space="Domain", cluster="patterns",
                            drafter="m"))
    eng.update_node("Source", NodeEdit(old_text="Source body", new_text="changed"))
    seen = eng.overview()
    assert (seen.scope, seen.session_key, seen.bound, seen.isolation) == ("proj", "proj", True,
                                                                          True)
    assert seen.counts == {"Scope": 3, "Domain": 1, "Person": 0, "scope": 3}
    assert [c.citing_title for c in seen.rechecks] == ["Claim"]
    assert seen.forks == () and seen.damaged_ledgers == () and seen.problems == ()
    # a second device binds another key differently; after the union merge overview shows it
    device_b = Vault(tmp_path / "device-b")
    shutil.copytree(vault.root, device_b.root)
    (device_b.state("device-id")).unlink()
    Routing(vault).bind("lab", "alpha")
    Routing(device_b).bind("lab", "beta")
    ours = vault.ledger_path("routing").read_bytes().splitlines(keepends=True)
    theirs = device_b.ledger_path("routing").read_bytes().splitlines(keepends=True)
    vault.ledger_path("routing").write_bytes(b"".join(ours + [x for x in theirs
                                                              if x not in ours]))
    forks = eng.overview().forks
    assert [(f.ledger, f.subject) for f in forks] == [("routing", "key:lab")]


def test_overview_lists_damaged_ledgers_and_unreadable_nodes(eng: Engine, vault: Vault,
                                                             hub: str):
    vault.ledger_path("candidates").write_text('{"broken": \n', encoding="utf-8")
    (vault.abs("Scope/proj/auth") / "Broken.md").write_text("no front matter\n",
                                                            encoding="utf-8")
    seen = eng.overview()
    assert len(seen.damaged_ledgers) == 1 and "candidates.jsonl" in seen.damaged_ledgers[0]
    assert any("Broken.md" in p for p in seen.problems)


def test_every_result_names_the_active_scope(eng: Engine, hub: str):
    results = [eng.read_node("auth"), eng.append_raw("t", user="u", assistant="a"),
               eng.overview(), eng.search("auth"), eng.recheck(),
               create(eng, "X"), eng.update_node("X", NodeEdit(summary="y")),
               eng.move_nodes(["X"], space="Scope", cluster="auth/sub")]
    for result in results:
        assert dataclasses.is_dataclass(result) and result.scope == "proj"


def test_an_explicit_scope_acts_for_that_scope_without_binding_the_key(vault: Vault,
                                                                      repo: Path):
    engine = Engine.open(vault, cwd=repo, scope="platform")
    result = engine.create_node(NewNode("api", "hub", "x\n", space="Scope", cluster="api",
                                        drafter="m"))
    assert result.path == "Scope/platform/api/api.md" and result.scope == "platform"
    assert not Routing(vault).route("proj")[1]


def test_engine_open_finds_the_vault_from_the_environment(vault: Vault, repo: Path):
    engine = Engine.open(cwd=repo)
    assert engine.vault.root == vault.root and engine.session.key.key == "proj"
    with pytest.raises(ValueError):
        Engine.open(vault, cwd=repo, actor="robot")


def test_a_forked_binding_keeps_reads_working_and_refuses_scope_writes(vault: Vault,
                                                                       repo: Path,
                                                                       tmp_path: Path):
    device_b = Vault(tmp_path / "device-b")
    shutil.copytree(vault.root, device_b.root)
    Routing(vault).bind("proj", "alpha")
    (device_b.state("device-id")).unlink(missing_ok=True)
    Routing(device_b).bind("proj", "beta")
    ours = vault.ledger_path("routing").read_bytes().splitlines(keepends=True)
    theirs = device_b.ledger_path("routing").read_bytes().splitlines(keepends=True)
    vault.ledger_path("routing").write_bytes(b"".join(ours + [x for x in theirs
                                                              if x not in ours]))
    engine = Engine.open(vault, cwd=repo)
    assert engine.session.fork and "key:proj" in engine.session.fork
    assert [f.subject for f in engine.overview().forks] == ["key:proj"]
    before = snapshot(vault)
    with pytest.raises(LedgerFork):
        engine.create_node(NewNode("api", "hub", "x\n", space="Scope", cluster="api", drafter="m"))
    assert snapshot(vault) == before


def test_a_hand_edit_that_a_read_notices_first_reaches_search_too(
        eng: Engine, vault: Vault, hub: str, monkeypatch: pytest.MonkeyPatch):
    import os
    import time

    from osk.engine import core as engine_mod

    done = eng.create_node(NewNode("Widgets", "about widgets", "Widgets are blue.\n", space="Scope",
                                   cluster=hub, drafter="test-model"))
    assert [h.title for h in eng.search("widgets").hits] == ["Widgets"]
    path = vault.abs(done.path)
    path.write_text(path.read_text(encoding="utf-8").replace(
        "Widgets are blue.", "Widgets are blue. Zanzibarite inside."), encoding="utf-8")
    old = time.time() - 3600  # an editor that keeps the mtime: only a read's re-stat sees it
    os.utime(path, (old, old))
    eng._ctx.fresh.full_at = time.monotonic()  # as if the periodic look had just run
    assert "Zanzibarite" in eng.read_node("Widgets").text
    monkeypatch.setattr(engine_mod, "REFRESH_SECONDS", 0.0)  # every search looks again
    assert [h.title for h in eng.search("zanzibarite").hits] == ["Widgets"]


def test_settling_an_eviction_through_the_engine_names_what_is_missing(eng: Engine):
    """The tool's model requires both; a direct engine call without them is refused by name,
    and the note is left as it was."""
    before = eng.scope_memory("read")
    with pytest.raises(OskError, match="names the pending eviction and the node"):
        eng.scope_memory("settle", eviction="abc12345")
    assert eng.scope_memory("read") == before
