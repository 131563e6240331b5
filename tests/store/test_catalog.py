"""The catalog: finding nodes by title or id, refusing duplicates, noticing changes."""

from __future__ import annotations

import gc
import os

import pytest

from osk.errors import ContractError, DuplicateId, NodeNotFound, TitleError
from osk.store import contract, node
from osk.store.catalog import Catalog
from osk.store.fsutil import atomic_write
from osk.store.vault import Vault


def write_node(vault: Vault, rel: str, node_id: str, body: str = "Body.\n") -> None:
    meta = contract.Frontmatter.model_validate({
        "id": node_id, "created": "2026-11-29T18:00+00:00", "updated": "2026-11-29T18:00+00:00",
        "author": "user", "drafter": "human", "summary": f"About {rel}.",
    })
    atomic_write(vault.abs(rel), node.render(meta, body))


def test_a_node_is_found_by_title_case_insensitively_and_by_id(vault: Vault):
    write_node(vault, "Domain/rust/Cargo features.md", "id-1")
    catalog = Catalog(vault)
    assert catalog.refresh().added == ("Domain/rust/Cargo features.md",)
    assert catalog.get("cargo FEATURES").id == "id-1"
    assert catalog.get("id-1").title == "Cargo features"
    with pytest.raises(NodeNotFound):
        catalog.get("nothing")


def test_two_files_with_one_id_make_every_read_by_id_or_title_refuse_naming_both(vault: Vault):
    write_node(vault, "Domain/A.md", "same")
    write_node(vault, "Person/B.md", "same")
    catalog = Catalog(vault)
    catalog.refresh()
    for ref in ("same", "A", "B"):
        with pytest.raises(DuplicateId) as caught:
            catalog.get(ref)
        assert "Domain/A.md" in str(caught.value) and "Person/B.md" in str(caught.value)
    assert catalog.duplicate_ids() == {"same": ["Domain/A.md", "Person/B.md"]}
    write_node(vault, "Scope/app/C.md", "same")  # a third claimant, then two leave
    catalog.refresh()
    assert catalog.duplicate_ids() == {"same": ["Domain/A.md", "Person/B.md", "Scope/app/C.md"]}
    for rel in ("Domain/A.md", "Scope/app/C.md"):
        vault.abs(rel).unlink()
        catalog.refresh()
    assert catalog.duplicate_ids() == {} and catalog.get("same").path == "Person/B.md"
    assert catalog.paths_with_title("b") == ["Person/B.md"] and catalog.paths_with_title("a") == []


def test_titles_colliding_after_case_folding_are_reported_and_refused(vault: Vault):
    write_node(vault, "Domain/Release.md", "id-1")
    write_node(vault, "Scope/app/RELEASE.md", "id-2")
    catalog = Catalog(vault)
    catalog.refresh()
    with pytest.raises(TitleError):
        catalog.get("release")
    assert list(catalog.duplicate_titles().values()) == [["Domain/Release.md",
                                                          "Scope/app/RELEASE.md"]]


def test_a_hand_edit_that_breaks_the_contract_is_reported_not_fixed(vault: Vault):
    write_node(vault, "Domain/A.md", "id-1")
    catalog = Catalog(vault)
    catalog.refresh()
    path = vault.abs("Domain/A.md")
    broken = path.read_text(encoding="utf-8").replace("author: user", "author: robot")
    path.write_text(broken, encoding="utf-8")
    changes = catalog.refresh()
    assert changes.changed == ("Domain/A.md",)
    assert [type(e) for e in catalog.errors()] == [ContractError]
    assert path.read_text(encoding="utf-8") == broken
    with pytest.raises(ContractError):
        catalog.get("A")


def test_refresh_reports_added_changed_and_removed_files_and_skips_non_node_folders(vault: Vault):
    write_node(vault, "Domain/A.md", "id-1")
    write_node(vault, "Domain/B.md", "id-2")
    (vault.root / "Workbench" / "scratch.md").write_text("not a node", encoding="utf-8")
    catalog = Catalog(vault)
    assert sorted(catalog.refresh().added) == ["Domain/A.md", "Domain/B.md"]
    write_node(vault, "Domain/A.md", "id-1", body="Changed.\n")
    os.unlink(vault.abs("Domain/B.md"))
    write_node(vault, "Person/C.md", "id-3")
    changes = catalog.refresh()
    assert changes.added == ("Person/C.md",)
    assert changes.changed == ("Domain/A.md",)
    assert changes.removed == ("Domain/B.md",)
    assert not catalog.refresh()


def _age(vault: Vault, rel: str, seconds: int = 10) -> None:
    """Move a file's mtime into the past, out of the race window, as time would."""
    path = vault.abs(rel)
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns - seconds * 1_000_000_000))


def test_a_new_process_restores_unchanged_nodes_from_the_snapshot_without_reading_them(
    vault: Vault, monkeypatch
):
    import osk.store.catalog as catalog_mod

    for name in ("A", "B"):
        write_node(vault, f"Domain/{name}.md", f"id-{name}", body=f"Body {name}.\n")
        _age(vault, f"Domain/{name}.md")
    first = Catalog(vault)
    first.refresh()
    first.save_snapshot()
    assert (vault.state("catalog", "snapshot.json")).is_file()
    write_node(vault, "Domain/B.md", "id-B", body="Changed while no osk ran.\n")

    reads: list[str] = []
    real = catalog_mod._read_text
    monkeypatch.setattr(catalog_mod, "_read_text", lambda p: reads.append(p) or real(p))
    second = Catalog(vault)
    second.refresh()
    assert [os.path.basename(p) for p in reads] == ["B.md"]  # A came from the snapshot
    a = second.get("A")
    assert a.body_hash == first.get("A").body_hash
    assert a.body == "Body A.\n" and a.text.startswith("---\n")
    assert second.get("B").body == "Changed while no osk ran.\n"


@pytest.mark.parametrize(("last", "keep"), [(False, True), (True, True), (False, False),
                                            ("again", True), (False, "bulk")])
def test_a_snapshot_save_encodes_only_entries_put_since_the_last_and_writes_the_same_file(
    vault: Vault, monkeypatch, last: bool | str, keep: bool | str
):
    """``last`` (osk import's end; "again": a last save after a save left nothing to write)
    and a catalog that keeps nothing encoded (``keep_encoded``, osk import's; "bulk": as
    ``osk import`` sets it up, its nodes let go to a spool, copied from it): the encoded
    entries are not kept, so a later save encodes every entry again, and writes the same
    file."""
    import json

    import osk.store.catalog as catalog_mod

    names = [f"N{n}" for n in range(6)]
    for name in names:
        write_node(vault, f"Domain/{name}.md", f"id-{name}", body=f"Body {name}.\n")
        _age(vault, f"Domain/{name}.md")
    if keep == "bulk":
        monkeypatch.setattr(catalog_mod, "HELD_TEXTS", 2)
    catalog = Catalog(vault, keep_encoded=keep is True)
    if keep == "bulk":
        catalog.bulk_load()
    catalog.refresh()
    if keep == "bulk":
        assert len(_spooled(catalog)) == 4
    catalog._dirty = True
    catalog.save_snapshot(last=last is True)
    if last == "again":
        catalog.save_snapshot(last=True)  # nothing changed since: writes nothing, lets go
    encoded: list[str] = []
    real = catalog_mod._encode
    monkeypatch.setattr(catalog_mod, "_encode", lambda rel, e: encoded.append(rel) or real(rel, e))
    write_node(vault, "Domain/N2.md", "id-N2", body="Changed.\n")
    _age(vault, "Domain/N2.md")
    vault.abs("Domain/N4.md").unlink()
    catalog.note_written("Domain/N2.md")
    catalog.note_removed("Domain/N4.md")
    catalog.save_snapshot()
    assert encoded == (list(catalog.entries) if last or keep is not True else ["Domain/N2.md"])
    path = vault.state("catalog", "snapshot.json")
    whole = {rel: {"stat": list(e.stat), "read_at": e.read_at_ns, "meta": e.node.meta_fields(),
                   "file_hash": e.node.file_hash, "body_hash": e.node.body_hash}
             for rel, e in catalog.entries.items()}
    assert path.read_text(encoding="utf-8") == json.dumps(
        {"version": catalog_mod._SNAPSHOT_VERSION, "entries": whole}, ensure_ascii=False,
        separators=(",", ":"))
    restored = Catalog(vault)
    restored.refresh()
    assert {rel: e.node.file_hash for rel, e in restored.entries.items()} == {
        rel: e.node.file_hash for rel, e in catalog.entries.items()}
    assert "Domain/N4.md" not in restored.entries


def _as_saved(catalog: Catalog) -> str:
    """The snapshot file ``catalog`` should write: every entry encoded whole, in its order."""
    import json

    import osk.store.catalog as catalog_mod

    whole = {rel: {"stat": list(e.stat), "read_at": e.read_at_ns, "meta": e.node.meta_fields(),
                   "file_hash": e.node.file_hash, "body_hash": e.node.body_hash}
             for rel, e in catalog.entries.items()}
    return json.dumps({"version": catalog_mod._SNAPSHOT_VERSION, "entries": whole},
                      ensure_ascii=False, separators=(",", ":"))


def test_saves_copy_unchanged_entries_from_the_file_they_wrote_even_once_it_was_replaced(
    vault: Vault, monkeypatch
):
    """Each save copies the runs of entries it wrote before from its own file, kept open (and
    encodes the rest): changes at the start, the middle and the end, a node added, one removed,
    and another process's save replacing the file in between all leave the file a whole
    encoding would write, and a catalog that keeps nothing holds no file open."""
    import osk.store.catalog as catalog_mod

    monkeypatch.setattr(catalog_mod, "_BATCH_BYTES", 300)  # encoded entries written in parts
    names = [f"N{n}" for n in range(12)]
    for name in names:
        write_node(vault, f"Domain/{name}.md", f"id-{name}", body=f"Body {name}.\n")
        _age(vault, f"Domain/{name}.md")
    catalog = Catalog(vault)
    catalog.refresh()
    catalog._dirty = True
    catalog.save_snapshot()
    path = vault.state("catalog", "snapshot.json")
    assert path.read_text(encoding="utf-8") == _as_saved(catalog)
    encoded: list[str] = []
    real = catalog_mod._encode
    monkeypatch.setattr(catalog_mod, "_encode", lambda rel, e: encoded.append(rel) or real(rel, e))

    def change(name: str, body: str) -> None:
        write_node(vault, f"Domain/{name}.md", f"id-{name}", body=body)
        _age(vault, f"Domain/{name}.md")
        catalog.note_written(f"Domain/{name}.md")

    steps = [("N0", "First changed.\n"), ("N6", "Middle changed, and longer than it was.\n"),
             ("N11", "Last.\n"), ("N12", "Added.\n")]
    for step, (name, body) in enumerate(steps):
        change(name, body)
        if step == 1:
            vault.abs("Domain/N3.md").unlink()
            catalog.note_removed("Domain/N3.md")
        if step == 2:  # another process saves its own catalog over the file
            other = Catalog(vault)
            other.refresh()
            other._dirty = True
            other.save_snapshot()
            path.write_text(path.read_text(encoding="utf-8").replace("Body", "Bxdy"),
                            encoding="utf-8")
        encoded.clear()  # (what the other catalog's first save encoded)
        catalog.save_snapshot()
        assert encoded == [f"Domain/{name}.md"]
        assert path.read_text(encoding="utf-8") == _as_saved(catalog)
    restored = Catalog(vault)
    restored.refresh()
    assert {rel: e.node.body_hash for rel, e in restored.entries.items()} == {
        rel: e.node.body_hash for rel, e in catalog.entries.items()}
    catalog.keep_encoded = False
    change("N1", "Once more.\n")
    catalog.save_snapshot()
    assert catalog._written is None and path.read_text(encoding="utf-8") == _as_saved(catalog)


@pytest.mark.parametrize("layout", ["as written", "re-indented"])
def test_a_first_save_copies_the_entries_restored_from_the_snapshot_it_read(
    vault: Vault, monkeypatch, layout: str
):
    """A new process's first save copies the runs of entries it restored from the snapshot it
    read, held open (another process may replace the file meanwhile), and encodes only the
    entries read since; the file is what encoding every entry would write. A snapshot not laid
    out as osk writes one is still restored from, and its first save encodes every entry."""
    import json

    import osk.store.catalog as catalog_mod

    monkeypatch.setattr(catalog_mod, "_BATCH_BYTES", 300)
    rels = [f"Domain/{name}.md" for name in ("바다 {0}", 'Odd "q" {1}', *map(str, range(2, 12)))]
    for number, rel in enumerate(rels):
        write_node(vault, rel, f"id-{number}", body=f"본문 {number}: {{x}}, \"quoted\".\n")
        _age(vault, rel)
    first = Catalog(vault)
    first.refresh()
    first._dirty = True
    first.save_snapshot()
    path = vault.state("catalog", "snapshot.json")
    if layout == "re-indented":
        path.write_text(json.dumps(json.loads(path.read_text(encoding="utf-8")), indent=1,
                                   ensure_ascii=False), encoding="utf-8")
    write_node(vault, rels[3], "id-3", body="Changed while no osk ran.\n")
    _age(vault, rels[3])
    vault.abs(rels[7]).unlink()
    write_node(vault, "Domain/Added.md", "id-added")
    _age(vault, "Domain/Added.md")
    encoded: list[str] = []
    real = catalog_mod._encode
    monkeypatch.setattr(catalog_mod, "_encode", lambda rel, e: encoded.append(rel) or real(rel, e))
    second = Catalog(vault)
    with monkeypatch.context() as held:
        held.setattr(Catalog, "save_if_due", lambda self: None)
        second.refresh()
    replaced = path.with_name("replaced.json")  # another process's save, a new file
    replaced.write_text("{}", encoding="utf-8")
    os.replace(replaced, path)
    second.save_snapshot()
    read_since = [rel for rel in second.entries if rel in (rels[3], "Domain/Added.md")]
    assert encoded == (read_since if layout == "as written" else list(second.entries))
    assert path.read_text(encoding="utf-8") == _as_saved(second)
    assert rels[7] not in path.read_text(encoding="utf-8")


def test_a_dropped_catalog_closes_the_file_it_kept_open(vault: Vault):
    write_node(vault, "Domain/A.md", "id-A")
    _age(vault, "Domain/A.md")
    catalog = Catalog(vault)
    catalog.refresh()
    catalog._dirty = True
    catalog.save_snapshot()
    kept = catalog._written
    assert kept is not None
    fd = kept._fd
    assert os.fstat(fd).st_size == vault.state("catalog", "snapshot.json").stat().st_size
    closing = kept._closing
    del catalog, kept
    gc.collect()
    assert not closing.alive  # the finalizer ran: the descriptor is closed


def test_a_damaged_or_foreign_snapshot_is_ignored(vault: Vault):
    write_node(vault, "Domain/A.md", "id-A")
    _age(vault, "Domain/A.md")
    path = vault.state("catalog", "snapshot.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    for junk in ("{not json", '{"version": "0:old", "entries": {}}',
                 '{"version": "%s", "entries": {"Domain/A.md": {"stat": 5}}}'):
        import osk.store.catalog as catalog_mod

        path.write_text(junk.replace("%s", catalog_mod._SNAPSHOT_VERSION), encoding="utf-8")
        catalog = Catalog(vault)
        catalog.refresh()
        assert catalog.get("A").id == "id-A"


def test_a_snapshot_entry_missing_contract_fields_is_read_from_the_file(vault: Vault):
    import json as json_mod

    import osk.store.catalog as catalog_mod

    write_node(vault, "Domain/A.md", "id-A")
    _age(vault, "Domain/A.md")
    first = Catalog(vault)
    first.refresh()
    first.save_snapshot()
    path = vault.state("catalog", "snapshot.json")
    data = json_mod.loads(path.read_text(encoding="utf-8"))
    del data["entries"]["Domain/A.md"]["meta"]["summary"]
    path.write_text(json_mod.dumps(data), encoding="utf-8")
    assert data["version"] == catalog_mod._SNAPSHOT_VERSION
    second = Catalog(vault)
    second.refresh()
    assert second.get("A").meta.summary == "About Domain/A.md."


def test_a_live_catalog_saves_its_snapshot_at_exit_and_a_dropped_one_is_freed(vault: Vault):
    import gc
    import json as json_mod
    import subprocess
    import sys

    import osk.store.catalog as catalog_mod

    script = (
        "import sys\n"
        "from osk.store.catalog import Catalog\n"
        "from osk.store.vault import Vault\n"
        "from tests.store.test_catalog import write_node\n"
        "v = Vault(__import__('pathlib').Path(sys.argv[1]))\n"
        "c = Catalog(v); c.refresh()\n"
        "from tests.store.test_catalog import _age\n"
        "write_node(v, 'Domain/Late.md', 'id-late'); _age(v, 'Domain/Late.md')\n"
        "c.note_written('Domain/Late.md')\n"
    )
    subprocess.run([sys.executable, "-c", script, str(vault.root)], check=True,
                   cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    saved = json_mod.loads(vault.state("catalog", "snapshot.json").read_text(encoding="utf-8"))
    assert "Domain/Late.md" in saved["entries"]

    dropped = Catalog(vault)
    dropped.refresh()
    assert dropped in catalog_mod._LIVE
    del dropped
    gc.collect()
    assert not any(c.vault == vault for c in catalog_mod._LIVE)


def test_what_a_paused_collector_let_load_is_not_swept_as_young_objects_after():
    from osk.store.fsutil import collector_paused

    passes: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            passes.append(info["generation"])

    was_on = gc.isenabled()
    gc.enable()
    gc.callbacks.append(seen)
    try:
        with collector_paused():
            loaded = [[] for _ in range(50_000)]  # a snapshot's worth of tracked objects
            passes.clear()
        # Turned back on, the collector owes no pass over them: they are already in the
        # oldest generation (before: 50,000 young objects, a pass started at once).
        assert passes == []
        assert len(loaded) == 50_000
    finally:
        gc.callbacks.remove(seen)
        if not was_on:
            gc.disable()


def test_a_written_node_is_taken_only_while_the_file_holds_its_text(vault: Vault,
                                                                    monkeypatch):
    """``note_written`` reuses the node the writer parsed (no second parse) only when the
    file holds exactly that text; a file changed since is parsed from what it holds."""
    rel = "Domain/Mine.md"
    write_node(vault, rel, "id-mine", body="What osk wrote.\n")
    written = node.parse(rel, vault.abs(rel).read_text(encoding="utf-8"))
    catalog = Catalog(vault)
    catalog.refresh()
    parsed: list[str] = []
    real = node.parse
    monkeypatch.setattr(node, "parse", lambda path, text: parsed.append(path) or real(path, text))
    catalog.note_written(rel, written)
    assert parsed == [] and catalog.get("Mine").body == "What osk wrote.\n"
    write_node(vault, rel, "id-mine", body="Changed by hand since.\n")
    catalog.note_written(rel, written)
    assert parsed == [rel] and catalog.get("Mine").body == "Changed by hand since.\n"


def _let_go_and_held(catalog: Catalog) -> tuple[list[str], list[str]]:
    entries = sorted(catalog.entries.items())
    return ([rel for rel, e in entries if e.node is not None and not e.node.text_held],
            [rel for rel, e in entries if e.node is not None and e.node.text_held])


def _spooled(catalog: Catalog) -> list[str]:
    """The nodes that keep their fields and hashes in the catalog's spool, not in memory."""
    return sorted(rel for rel, e in catalog.entries.items()
                  if e.node is not None and isinstance(e.node._fields, int))


def _catalog(vault: Vault, bulk: bool) -> Catalog:
    catalog = Catalog(vault)
    if bulk:
        catalog.bulk_load()
    return catalog


@pytest.mark.parametrize("bulk", [False, True])
def test_only_the_nodes_put_last_keep_their_text_the_others_read_it_again_as_it_was(
        vault: Vault, monkeypatch, bulk: bool):
    """A catalog that reads or writes every node (``osk import``) holds a bounded share of
    their texts and models; a node that let them go answers as before, from its file (and,
    in a bulk load, its fields and hashes from the spool)."""
    import osk.store.catalog as catalog_mod

    monkeypatch.setattr(catalog_mod, "HELD_TEXTS", 2)
    for i in range(5):
        write_node(vault, f"Domain/N{i}.md", f"id-{i}", body=f"Body {i}.\n")
    catalog = _catalog(vault, bulk)
    catalog.refresh()
    let_go, held = _let_go_and_held(catalog)
    assert len(held) == 2 and len(let_go) == 3
    assert _spooled(catalog) == (let_go if bulk else [])
    for i in range(5):
        found = catalog.get(f"N{i}")
        parsed = node.parse(found.path, vault.abs(found.path).read_text(encoding="utf-8"))
        assert found.id == f"id-{i}" and found.trust_state == parsed.trust_state
        assert found.field("summary") == f"About Domain/N{i}.md."
        assert found.derived_from == [] and found.known_file_hash in (None, parsed.file_hash)
        assert found.meta_fields() == parsed.meta_fields()
        assert found.meta.summary == f"About Domain/N{i}.md."
        assert found.body == f"Body {i}.\n" and found.body_hash == node.body_hash(found.body)
        assert found.file_hash == parsed.file_hash and found.holds(parsed.text)
        assert found == parsed


def test_a_spooled_node_answers_from_the_spool_without_its_file_until_its_text_is_needed(
        vault: Vault, monkeypatch):
    """A node a bulk load let go reads its fields and hashes back from the spool (the file
    may be gone meanwhile); the spool keeps records past its buffer in its file."""
    import osk.store.catalog as catalog_mod

    monkeypatch.setattr(catalog_mod, "HELD_TEXTS", 1)
    monkeypatch.setattr(node, "_SPOOL_BUFFER", 300)  # a record or two: most go to the file
    for i in range(6):
        write_node(vault, f"Domain/N{i}.md", f"id-{i}", body=f"Body {i}.\n")
    expected = {f"Domain/N{i}.md": node.parse(f"Domain/N{i}.md", vault.abs(
        f"Domain/N{i}.md").read_text(encoding="utf-8")) for i in range(6)}
    catalog = _catalog(vault, True)
    catalog.refresh()
    assert len(_spooled(catalog)) == 5
    for rel in _spooled(catalog):
        vault.abs(rel).unlink()
        found = catalog.by_path(rel)
        assert found is not None and not found.text_held
        want = expected[rel]
        assert (found.id, found.file_hash, found.body_hash, found.known_file_hash) == (
            want.id, want.file_hash, want.body_hash, want.file_hash)
        assert found.field("summary") == want.meta.summary
        assert found.plain_record() == node.plain_record(want.meta_fields(), want.file_hash,
                                                         want.body_hash)
        with pytest.raises(FileNotFoundError):
            found.text  # noqa: B018


@pytest.mark.parametrize("bulk", [False, True])
def test_a_node_that_let_its_text_go_is_still_seen_changed_at_the_same_stat(
        vault: Vault, monkeypatch, bulk: bool):
    """A file read within the race window is read again on the next refresh; rewritten in that
    window to the same size and mtime, it is reported changed even though the text the catalog
    held is gone (compared by hash: reading it now would give the new text)."""
    import osk.store.catalog as catalog_mod

    monkeypatch.setattr(catalog_mod, "HELD_TEXTS", 1)
    for name in ("A", "B", "C"):
        write_node(vault, f"Domain/{name}.md", f"id-{name}", body=f"Body {name}.\n")
    catalog = _catalog(vault, bulk)
    catalog.refresh()
    rel = _let_go_and_held(catalog)[0][0]
    assert _spooled(catalog)[:1] == ([rel] if bulk else [])
    path = vault.abs(rel)
    before = path.stat()
    text = path.read_text(encoding="utf-8")
    with open(path, "r+", encoding="utf-8", newline="") as handle:  # same inode and size
        handle.write(text.replace("Body ", "Edit "))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_ino) == (before.st_size, before.st_ino)
    changes = catalog.refresh()
    assert rel in changes.changed
    assert catalog.by_path(rel) is not None and "Edit " in catalog.by_path(rel).body


@pytest.mark.parametrize("bulk", [False, True])
def test_an_index_built_from_nodes_that_let_their_text_go_parses_no_file(
        vault: Vault, monkeypatch, bulk: bool):
    import osk.search.index as index_mod
    import osk.store.catalog as catalog_mod
    from osk.search import SearchIndex

    monkeypatch.setattr(catalog_mod, "HELD_TEXTS", 1)
    for name in ("A", "B", "C"):
        write_node(vault, f"Domain/{name}.md", f"id-{name}", body=f"Walrus {name} facts.\n")
        _age(vault, f"Domain/{name}.md")
    catalog = _catalog(vault, bulk)
    catalog.refresh()
    assert len(_let_go_and_held(catalog)[0]) == 2 == len(_spooled(catalog)) + 2 * (not bulk)
    parsed: list[str] = []
    real = index_mod.parse_node
    monkeypatch.setattr(index_mod, "parse_node",
                        lambda rel, text: parsed.append(rel) or real(rel, text))
    index = SearchIndex(vault)
    index.reconcile(catalog)
    assert parsed == [] and len(index) == 3
    assert sorted(h.path for h in index.search("walrus")) == [
        "Domain/A.md", "Domain/B.md", "Domain/C.md"]
