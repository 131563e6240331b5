"""Citations bound to body hashes: candidates, next, cascade, re-citation and corrections."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest
import writekit
from writekit import create, make_repo, snapshot, sqlite_disk_full

from osk.calls.request import NewNode, NodeEdit
from osk.engine.core import Engine
from osk.errors import CascadeStop, OskError, RecheckError, RecheckUnread
from osk.provenance.pairs import ReadLog
from osk.provenance.recheck_summary import scope_notes
from osk.store.ledger import Ledger
from osk.store.vault import Vault

repo, eng, hub = writekit.repo, writekit.eng, writekit.hub  # shared fixtures


def refused(vault: Vault, call, error: type[OskError], rule: str) -> OskError:
    before = snapshot(vault)
    with pytest.raises(error) as caught:
        call()
    assert caught.value.rule == rule
    assert snapshot(vault) == before, "a refused call changed the vault"
    return caught.value


def candidates(engine: Engine) -> list:
    return list(engine.recheck().candidates)


@pytest.fixture
def chain(eng: Engine, hub: str) -> Engine:
    """Source <- Claim <- Summary: Claim cites Source, Summary cites Claim."""
    create(eng, "Source", body="The limit is 10.\n")
    create(eng, "Claim", body="We allow 10 requests.\n", derived_from=("[[Source]]",))
    create(eng, "Summary", body="Rate limits: see Claim.\n", derived_from=("[[Claim]]",))
    return eng


def test_the_recheck_cycle_closes_only_after_the_changed_source_is_read(
        chain: Engine, vault: Vault):
    assert candidates(chain) == []
    old_hash = chain.catalog.get("Source").body_hash
    assert chain.read_node("Source").complete  # reading the old version does not count later
    chain.update_node("Source", NodeEdit(old_text="10", new_text="20"))
    [cand] = candidates(chain)
    assert (cand.citing_title, cand.target, cand.reason) == ("Claim", "[[Source]]",
                                                            "target-changed")
    assert cand.recorded_hash == old_hash
    assert cand.current_hash == chain.catalog.get("Source").body_hash != old_hash
    assert (cand.next, cand.cascade, cand.scope) == (("Summary",), False, "proj")
    error = refused(vault, lambda: chain.recite([cand.id]), RecheckUnread,
                    "recheck-read-first")
    assert error.code == "recheck_unread" and error.candidates == [cand.id]
    chain.read_node("Source")
    result = chain.recite([cand.id])
    assert (result.closed, result.nodes, result.scope) == ((cand.id,), ("Claim",), "proj")
    assert candidates(chain) == []


def test_update_node_with_recheck_of_and_no_changes_is_a_re_citation(chain: Engine):
    chain.update_node("Source", NodeEdit(old_text="10", new_text="20"))
    [cand] = candidates(chain)
    chain.read_node("Source")
    result = chain.update_node("Claim", NodeEdit(recheck_of=[cand.id]))
    assert result.closed == (cand.id,) and candidates(chain) == []


def test_a_correction_may_not_run_ahead_of_its_unresolved_source(chain: Engine, vault: Vault):
    chain.update_node("Source", NodeEdit(old_text="10", new_text="20"))
    [cand] = candidates(chain)
    error = refused(vault, lambda: chain.update_node("Summary", NodeEdit(old_text="see",
                                                                         new_text="read")),
                    CascadeStop, "recheck-cascade-stop")
    assert error.candidates == [cand.id] and "'Claim'" in str(error)


def test_a_correction_names_only_a_source_state_the_session_read(chain: Engine, vault: Vault):
    chain.update_node("Source", NodeEdit(old_text="10", new_text="20"))
    [cand] = candidates(chain)
    refused(vault, lambda: chain.update_node("Claim", NodeEdit(old_text="10", new_text="20",
                                                      recheck_of=[cand.id])),
            RecheckUnread, "recheck-read-first")


def test_a_correction_closes_its_candidate_and_the_next_correction_stops_at_the_cascade(
        chain: Engine, vault: Vault):
    chain.update_node("Source", NodeEdit(old_text="10", new_text="20"))
    [first] = candidates(chain)
    chain.read_node("Source")
    result = chain.update_node("Claim", NodeEdit(old_text="10", new_text="20",
                                                 recheck_of=[first.id]))
    assert result.closed == (first.id,)
    [second] = candidates(chain)
    assert (second.citing_title, second.target, second.cascade) == ("Summary", "[[Claim]]",
                                                                   True)
    chain.read_node("Claim")
    refused(vault, lambda: chain.update_node("Summary", NodeEdit(old_text="see", new_text="read",
                                                      recheck_of=[second.id])),
            CascadeStop, "recheck-cascade-stop")
    refused(vault, lambda: chain.update_node("Summary", NodeEdit(summary="other words")),
            CascadeStop,
            "recheck-cascade-stop")
    # re-citing unchanged is always allowed: it propagates nothing
    chain.update_node("Summary", NodeEdit(recheck_of=[second.id]))
    assert candidates(chain) == []


def test_a_person_corrects_past_the_cascade_stop(chain: Engine, vault: Vault, repo: Path):
    chain.update_node("Source", NodeEdit(old_text="10", new_text="20"))
    person = Engine.open(vault, cwd=repo, actor="user")
    person.update_node("Summary", NodeEdit(old_text="see", new_text="read"))
    assert person.catalog.get("Summary").body == "Rate limits: read Claim.\n"


def test_cascade_ends_once_the_target_is_edited_again_without_a_recheck(chain: Engine):
    chain.update_node("Source", NodeEdit(old_text="10", new_text="20"))
    [first] = candidates(chain)
    chain.read_node("Source")
    chain.update_node("Claim", NodeEdit(old_text="10", new_text="20", recheck_of=[first.id]))
    chain.update_node("Claim", NodeEdit(old_text="allow", new_text="permit"))
    [cand] = candidates(chain)
    assert cand.citing_title == "Summary" and cand.cascade is False


def test_dropping_a_stale_citation_closes_it_without_reading(chain: Engine):
    chain.update_node("Source", NodeEdit(old_text="10", new_text="20"))
    [cand] = candidates(chain)
    chain.update_node("Claim", NodeEdit(derived_from=[], recheck_of=[cand.id]))
    assert candidates(chain) == []


def test_a_body_change_carries_complete_pairs_forward(chain: Engine, vault: Vault):
    ref = chain.append_raw("talk", user="what is the limit?", assistant="ten")
    chain.update_node("Claim", NodeEdit(derived_from=["[[Source]]", ref.coordinate]))
    chain.update_node("Claim", NodeEdit(old_text="allow", new_text="permit"))
    # Claim's own citations stay current; Summary, which cites Claim, now needs a recheck
    assert [c.citing_title for c in candidates(chain)] == ["Summary"]
    record = Ledger(vault, "rechecks").read().records[-1]
    body = chain.catalog.get("Claim").body_hash
    assert [p["citing_hash"] for p in record.data["pairs"]] == [body, body]


def test_a_stale_pair_stays_stale_across_an_unrelated_update(chain: Engine):
    chain.update_node("Source", NodeEdit(old_text="10", new_text="20"))
    [cand] = candidates(chain)
    chain.update_node("Claim", NodeEdit(summary="A claim about limits"))
    assert [c.id for c in candidates(chain)] == [cand.id]


def test_a_hand_edit_of_the_citing_node_reopens_its_citations(chain: Engine, vault: Vault):
    path = vault.abs(chain.catalog.get("Claim").path)
    path.write_text(path.read_text(encoding="utf-8").replace("10 requests", "12 requests"),
                    encoding="utf-8")
    chain.refresh()
    [cand, downstream] = candidates(chain)
    assert (cand.citing_title, cand.reason) == ("Claim", "citing-edited")
    assert (downstream.citing_title, downstream.reason) == ("Summary", "target-changed")
    chain.read_node("Source")
    chain.recite([cand.id])
    assert [c.citing_title for c in candidates(chain)] == ["Summary"]


def test_a_target_deleted_by_hand_cannot_be_re_cited(chain: Engine, vault: Vault):
    vault.abs(chain.catalog.get("Source").path).unlink()
    chain.refresh()
    [cand] = candidates(chain)
    assert (cand.reason, cand.current_hash) == ("target-missing", None)
    refused(vault, lambda: chain.recite([cand.id]), RecheckError, "rechecks")
    chain.update_node("Claim", NodeEdit(derived_from=[], recheck_of=[cand.id]))
    assert candidates(chain) == []


def test_an_unknown_candidate_is_refused(chain: Engine, vault: Vault):
    refused(vault, lambda: chain.recite(["000000000000"]), RecheckError, "rechecks")
    refused(vault, lambda: chain.update_node("Claim", NodeEdit(old_text="10", new_text="11",
                                                      recheck_of=["000000000000"])),
            RecheckError, "rechecks")


def test_reading_a_long_target_in_pages_counts_once_every_page_was_read(eng: Engine,
                                                                       hub: str):
    long_body = "".join(f"line {i:05d}\n" for i in range(900))  # 10,800 characters
    create(eng, "Long source", body=long_body)
    create(eng, "Digest", derived_from=("[[Long source]]",))
    eng.update_node("Long source", NodeEdit(old_text="line 00000", new_text="LINE 00000"))
    [cand] = candidates(eng)
    page = eng.read_node("Long source")
    assert not page.complete and page.hash is None and page.next_start == 4000
    with pytest.raises(RecheckUnread):
        eng.recite([cand.id])
    eng.read_node("Long source", start=4000)
    with pytest.raises(RecheckUnread):
        eng.recite([cand.id])
    eng.read_node("Long source", start=8000)
    eng.recite([cand.id])
    assert candidates(eng) == []


def test_a_raw_round_whose_bytes_changed_reopens_and_closes_after_reading(
        eng: Engine, vault: Vault, hub: str):
    ref = eng.append_raw("talk", user="which port?", assistant="port 8080")
    create(eng, "Port", derived_from=(ref.coordinate,))
    record = vault.abs(ref.path)
    assert ref.path == "_raw/proj/talk.md"
    record.write_bytes(record.read_bytes().replace(b"port 8080", b"port 9090"))
    [cand] = candidates(eng)
    assert (cand.target, cand.reason) == ("[[_raw/proj/talk#Round 1]]", "target-changed")
    with pytest.raises(RecheckUnread):
        eng.recite([cand.id])
    assert eng.read_raw(ref.coordinate).complete
    eng.recite([cand.id])
    assert candidates(eng) == []


def test_a_project_file_citation_reopens_when_the_file_changes(eng: Engine, repo: Path,
                                                               hub: str):
    create(eng, "Entry point", derived_from=("file:src/app.py",))
    (repo / "src" / "app.py").write_text("print('changed')\n", encoding="utf-8")
    [cand] = candidates(eng)
    assert cand.target == "[[file:src/app.py]]"
    with pytest.raises(RecheckUnread):
        eng.recite([cand.id])
    assert eng.read_raw("file:src/app.py").text == "print('changed')\n"
    eng.recite([cand.id])
    assert candidates(eng) == []


def test_another_engine_sees_pairs_and_candidates_as_soon_as_they_are_written(
        chain: Engine, vault: Vault, repo: Path):
    second = Engine.open(vault, cwd=repo)
    assert candidates(second) == []
    create(second, "Late claim", derived_from=("[[Source]]",))
    chain.update_node("Source", NodeEdit(old_text="10", new_text="30"))
    second.refresh()
    assert sorted(c.citing_title for c in candidates(second)) == ["Claim", "Late claim"]


def _fork_claims_pair(chain: Engine, vault: Vault, tmp_path: Path) -> None:
    """Two devices disagree about Claim's pair with Source: device A re-cites after a change
    while device B rewrites Claim; B's rechecks lines are then merged into A's (a Git union)."""
    other_root = tmp_path / "device-b"
    shutil.copytree(vault.root, other_root)
    (other_root / ".osk" / "device-id").unlink()
    shutil.rmtree(other_root / ".osk" / "index", ignore_errors=True)
    device_b = Engine.open(Vault(other_root), cwd=chain.session.key.repo_root)
    chain.update_node("Source", NodeEdit(old_text="10", new_text="20"))
    device_b.update_node("Source", NodeEdit(old_text="10", new_text="20"))
    chain.read_node("Source")
    chain.recite([candidates(chain)[0].id])
    device_b.update_node("Claim", NodeEdit(old_text="allow", new_text="permit"))
    ours = vault.ledger_path("rechecks").read_bytes().splitlines(keepends=True)
    theirs = (other_root / "_ledger" / "rechecks.jsonl").read_bytes().splitlines(keepends=True)
    vault.ledger_path("rechecks").write_bytes(b"".join(ours + [x for x in theirs
                                                               if x not in ours]))


def test_concurrent_changes_to_one_nodes_citations_are_a_fork_until_re_cited(
        chain: Engine, vault: Vault, tmp_path: Path):
    _fork_claims_pair(chain, vault, tmp_path)
    [cand] = candidates(chain)
    assert (cand.citing_title, cand.reason) == ("Claim", "forked")
    chain.read_node("Source")
    chain.recite([cand.id])
    assert candidates(chain) == []
    assert Ledger(vault, "rechecks").read().forks() == []


def test_an_edit_of_the_citing_node_keeps_a_citation_fork_reported(
        chain: Engine, vault: Vault, tmp_path: Path):
    """A write that is not a re-citation joins the ledger's branches (its line names every
    head), but must not settle the pair the devices disagree on: the fork stays a candidate,
    for this engine and for a fresh one, until a person re-cites."""
    _fork_claims_pair(chain, vault, tmp_path)
    [cand] = candidates(chain)
    assert cand.reason == "forked"
    chain.update_node("Claim", NodeEdit(old_text="requests", new_text="calls"))

    def claims(engine: Engine) -> list[tuple[str, str]]:
        return [(c.citing_title, c.reason) for c in candidates(engine)
                if c.citing_title == "Claim"]

    assert claims(chain) == [("Claim", "forked")]
    fresh = Engine.open(vault, cwd=chain.session.key.repo_root)
    assert claims(fresh) == [("Claim", "forked")]
    [cand] = [c for c in candidates(fresh) if c.citing_title == "Claim"]
    fresh.read_node("Source")
    fresh.recite([cand.id])
    assert claims(fresh) == []
    assert claims(Engine.open(vault, cwd=chain.session.key.repo_root)) == []


def test_the_hook_summary_lists_a_scopes_candidates(chain: Engine, vault: Vault):
    assert scope_notes(vault, "proj") == []
    chain.update_node("Source", NodeEdit(old_text="10", new_text="20"))
    [cand] = candidates(chain)
    [item] = scope_notes(vault, "proj")
    assert item == {"id": cand.id, "citing": "Claim", "path": cand.citing_path,
                    "target": "[[Source]]", "reason": "target-changed", "cascade": False,
                    "next": ["Summary"]}
    assert scope_notes(vault, "elsewhere") == []
    stored = json.loads(vault.state("rechecks", "summary.json").read_text(encoding="utf-8"))
    assert list(stored["scopes"]) == ["proj"]


def test_importing_the_hook_summary_stays_light():
    code = ("import sys; from osk.provenance.recheck_summary import scope_notes; "
            "heavy = {'pydantic', 'yaml', "
            "'mcp', 'rank_bm25', 'numpy'} & set(sys.modules); print(sorted(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"


def test_the_read_log_merges_pages_and_ignores_other_versions():
    log = ReadLog()
    assert not log.note("node:x", "h1", 0, 10, 30)
    assert not log.note("node:x", "h1", 20, 30, 30)
    assert not log.has_read("node:x", "h1")
    assert log.note("node:x", "h1", 5, 25, 30)
    assert log.has_read("node:x", "h1") and not log.has_read("node:x", "h2")
    assert not log.has_read("node:x", None)


def test_a_round_appended_after_a_recheck_pass_is_citable_at_once(eng: Engine, hub: str):
    first = eng.append_raw("talk", user="q1", assistant="a1")
    create(eng, "One", derived_from=(first.coordinate,))
    assert candidates(eng) == []  # a pass that has read the record at one round
    second = eng.append_raw("talk", user="q2", assistant="a2")
    create(eng, "Two", derived_from=(second.coordinate,))
    assert candidates(eng) == []


def test_domain_candidates_are_in_every_scopes_hook_summary(eng: Engine, vault: Vault):
    eng.create_node(NewNode("patterns", "hub", "Patterns.\n", space="Domain", cluster="patterns",
                            drafter="m"))
    create(eng, "Retry", space="Domain", cluster="patterns", derived_from=("[[patterns]]",))
    eng.update_node("patterns", NodeEdit(old_text="Patterns", new_text="All patterns"))
    candidates(eng)
    assert [i["citing"] for i in scope_notes(vault, "")] == ["Retry"]
    assert scope_notes(vault, "proj") == scope_notes(vault, "elsewhere") == []


def test_a_file_citation_stays_bound_to_its_project_when_another_project_edits_the_node(
        eng: Engine, vault: Vault, tmp_path: Path):
    other = Engine.open(vault, cwd=make_repo(tmp_path / "work" / "other", files={
        "src/app.py": "print('a different file')\n"}))
    eng.create_node(NewNode("patterns", "hub", "x\n", space="Domain", cluster="patterns",
                            drafter="m"))
    create(eng, "Entry", space="Domain", cluster="patterns", body="Starts in app.py.\n",
           derived_from=("file:src/app.py",))
    other.update_node("Entry", NodeEdit(old_text="Starts", new_text="It starts"))
    assert candidates(eng) == [] and candidates(other) == []
    [pair] = eng.rechecks.citations(eng.catalog.get("Entry").id).pairs
    assert pair == "file:proj:src/app.py"


def test_a_correction_stopped_at_the_cascade_waits_in_the_persons_queue(
        chain: Engine, vault: Vault):
    from authority_support import osk

    assert osk(vault, "candidates").out == "No open candidates.\n"
    chain.update_node("Source", NodeEdit(old_text="10", new_text="20"))
    [first] = candidates(chain)
    chain.read_node("Source")
    chain.update_node("Claim", NodeEdit(old_text="10", new_text="20", recheck_of=[first.id]))
    [stopped] = candidates(chain)
    listed = osk(vault, "candidates")
    assert listed.code == 0, listed.err
    assert listed.out.splitlines()[:3] == [
        "1 correction(s) stopped at a cascade, waiting for you (governance/ledgers.md rule 6):",
        f"{stopped.id}  cascade",
        "    [[Summary]] cites [[Claim]], whose text is itself a recheck correction"]
    (item,) = json.loads(osk(vault, "candidates", "--json").out)
    assert (item["type"], item["key"], item["citing"]) == ("cascade", stopped.id, "Summary")
    chain.read_node("Claim")
    # the agent re-cites: queue empty
    chain.update_node("Summary", NodeEdit(recheck_of=[stopped.id]))
    assert osk(vault, "candidates").out == "No open candidates.\n"


def test_a_new_table_starts_from_the_store_and_reads_the_ledger_whole_only_when_it_cannot(
        chain: Engine, vault: Vault, monkeypatch: pytest.MonkeyPatch):
    """A long-running engine's recheck table starts from the rows kept on disk (the ledger's
    tip checked, no record kept); a damaged row, or a store behind a rewrite of the ledger,
    sends it to the ledger read whole, and the answer is the same every way."""
    import sqlite3

    from osk.provenance import recheck_store
    from osk.provenance.recheck_table import LEDGER, build_table
    from osk.provenance.rechecks import Rechecks

    chain.update_node("Source", NodeEdit(old_text="10", new_text="20"))
    whole = build_table(Ledger(vault, LEDGER).read())
    expected = candidates(chain)
    assert expected and len(whole) == 2

    def refusing(name: str) -> object:
        original = getattr(Ledger, name)

        def read(self: Ledger) -> object:
            assert self.name != LEDGER, "the rechecks ledger was read whole"
            return original(self)
        return read

    with monkeypatch.context() as patched:
        patched.setattr(Ledger, "read_tipped", refusing("read_tipped"))
        patched.setattr(Ledger, "read", refusing("read"))
        fresh = Rechecks(vault)
        assert dict(fresh.table()) == whole
        assert fresh.candidates(chain.catalog) == chain.rechecks.candidates(chain.catalog)
        assert fresh.citing(chain.catalog.get("Source").id) == {chain.catalog.get("Claim").id}

    with sqlite3.connect(vault.state(*recheck_store.FILE)) as db:
        db.execute("UPDATE citing SET citations = 'not json' WHERE id = ?",
                   (chain.catalog.get("Claim").id,))
    read: list[bool] = []
    original = Ledger.read_tipped
    monkeypatch.setattr(Ledger, "read_tipped", lambda self: read.append(True) or original(self))
    mended = Rechecks(vault)
    assert dict(mended.table()) == whole and read == [True]
    assert mended.candidates(chain.catalog) == chain.rechecks.candidates(chain.catalog)
    monkeypatch.undo()
    with sqlite3.connect(vault.state(*recheck_store.FILE)) as db:  # rebuilt from the ledger
        rows = dict(db.execute("SELECT id, citations FROM citing"))
    assert {i: recheck_store.decoded(i, text) for i, text in rows.items()} == whole


def test_a_row_on_disk_gives_back_every_pair_as_it_was():
    """The store's rows pack hex digests and leave out a kind the key starts with: what is
    decoded is what was encoded, for any digest text, kind or fork mark."""
    from osk.provenance.pairs import Citations, Pair, TargetRef
    from osk.provenance.recheck_store import decoded, encoded

    digest = "0f" * 32
    odd = ["0F" * 32, "!" + digest[1:], " " + digest[1:], "g" * 64, "abc", "", "!"]
    pairs = {f"raw:{i}": Pair("c", TargetRef(f"raw:{i}", "raw", f"[[{i}]]"), text,
                              text or None, "create")  # no target hash is None, as ever
             for i, text in enumerate(odd)}
    pairs["node:x"] = Pair("c", TargetRef("node:x", "node", "[[X]]"), digest, digest, "update")
    pairs["file:k:p"] = Pair("c", TargetRef("file:k:p", "file", "[[p]]", "/w"), digest, None,
                             "recite", forked=True)
    pairs["a:b:c"] = Pair("c", TargetRef("a:b:c", "a:b", "[[c]]"), digest, "ba" * 32, "correct")
    pairs["plain"] = Pair("c", TargetRef("plain", "", "[[plain]]"), digest, digest, "write")
    for citations in (Citations("c", pairs, digest, "r", forked=True),
                      Citations("c", {}, None), Citations("c", pairs, "not hex")):
        assert decoded("c", encoded(citations)) == citations
    assert digest not in encoded(Citations("c", pairs, None))  # packed, not as 64 characters


@pytest.mark.parametrize("schema", ["1", "2"])
def test_a_store_of_an_older_schema_is_brought_up_in_place_not_rebuilt_from_the_ledger(
        chain: Engine, vault: Vault, monkeypatch: pytest.MonkeyPatch, schema: str):
    """Rows kept in the ledger's line form (schema 1) are rewritten packed, and the rows of who
    cites whom (schema 3's ``cited``) made from the rows, by the next writer that opens the
    store, the ledger not read whole; the table is the same, and so are the citers."""
    import json
    import sqlite3

    from osk.provenance import recheck_store
    from osk.provenance.recheck_table import LEDGER, build_table
    from osk.provenance.rechecks import Rechecks

    chain.update_node("Source", NodeEdit(old_text="10", new_text="20"))
    whole = build_table(Ledger(vault, LEDGER).read())
    with sqlite3.connect(vault.state(*recheck_store.FILE)) as db:
        rows = dict(db.execute("SELECT id, citations FROM citing"))
        cited = sorted(db.execute("SELECT node, citing FROM cited"))
        for key, text in rows.items() if schema == "1" else ():
            value = recheck_store.decoded(key, text)
            pairs = list(value.pairs.values())
            old = json.dumps([[pair.to_data() for pair in pairs],
                              [pair.target.key for pair in pairs if pair.forked],
                              value.corrected, value.record_id, value.forked])
            db.execute("UPDATE citing SET citations = ? WHERE id = ?", (old, key))
        db.execute("DROP TABLE cited")  # neither older schema had it
        db.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (schema,))
    assert len(cited) == 2  # Claim cites Source, Summary cites Claim
    monkeypatch.setattr(Ledger, "read_tipped", lambda self: pytest.fail("read whole"))
    fresh = Rechecks(vault)
    assert dict(fresh.table()) == whole
    with sqlite3.connect(vault.state(*recheck_store.FILE)) as db:
        assert db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone() == ("3",)
        packed = dict(db.execute("SELECT id, citations FROM citing"))
        assert sorted(db.execute("SELECT node, citing FROM cited")) == cited
    assert packed.keys() == rows.keys()
    assert {i: recheck_store.decoded(i, text) for i, text in packed.items()} == whole


def test_a_store_the_disk_refuses_stays_behind_and_catches_up_when_the_disk_takes_writes(
        chain: Engine, vault: Vault, repo: Path):
    from osk.provenance import recheck_store
    from osk.provenance.recheck_table import LEDGER, build_table
    from osk.provenance.rechecks import Rechecks

    store = vault.state(*recheck_store.FILE)

    def kept() -> dict[str, object]:
        with closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True)) as db:
            return {i: recheck_store.decoded(i, text)
                    for i, text in db.execute("SELECT id, citations FROM citing")}

    rounds = [chain.append_raw("talk", user=f"limit note {n}", assistant="Ok.").coordinate
              for n in range(40)]
    before = kept()
    assert len(before) == 2
    with sqlite_disk_full(store.name):  # a row of 40 citations needs pages the file lacks
        other = Engine.open(vault, cwd=repo)  # a process that opens the store from now on
        create(other, "Digest", body="All the limit notes.\n", derived_from=tuple(rounds))
    assert kept() == before  # behind, as it was: not removed as a damaged store is
    whole = build_table(Ledger(vault, LEDGER).read())
    assert other.catalog.get("Digest").id in whole
    assert dict(Rechecks(vault).table()) == whole  # read past the store's mark
    chain.update_node("Source", NodeEdit(old_text="10", new_text="20"))  # the disk takes it
    assert kept() == build_table(Ledger(vault, LEDGER).read())
