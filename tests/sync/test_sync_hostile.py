"""What a remote brings that must not land: a second clone pushes each hostile change through a
bare remote with plain git, and `osk sync` on the first refuses it by name, lands nothing,
keeps every local commit, and leaves no scratch behind; once the change is repaired upstream,
the next cycle goes through."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing
from pathlib import Path

import pytest
from sync_support import git, head, make_devices, write_node

from osk.errors import SyncError
from osk.store.ids import uuid7
from osk.store.ledger import Ledger
from osk.store.vault import Vault
from osk.surfaces.cli import main
from osk.sync import node_ids
from osk.sync.cycle import sync_once
from osk.sync.gitrepo import GitRepo


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Vault, Vault]:
    remote, (first, second) = make_devices(tmp_path, 2)
    sync_once(second)
    return remote, first, second


def _push_by_hand(vault: Vault, message: str) -> str:
    """Commit everything with plain git and push, as anyone with push access could."""
    git(vault.root, "add", "-A")
    git(vault.root, "commit", "-q", "-m", message)
    git(vault.root, "push", "-q", "origin", "main")
    return head(vault)


def _refused(pair: tuple[Path, Vault, Vault], hostile: Callable[[Vault], None],
             *named: str) -> SyncError:
    """``hostile`` changes the second clone; it is pushed; the first clone, holding an
    unpublished node of its own, must refuse it by name and keep everything it had."""
    remote, first, second = pair
    write_node(first, "Domain/local/local.md", "Written here, not yet pushed.\n")
    hostile(second)
    _push_by_hand(second, "hostile change")
    upstream = git(remote, "rev-parse", "main")
    with pytest.raises(SyncError) as caught:
        sync_once(first)
    message = str(caught.value)
    for name in named:
        assert name in message, message
    assert "none of it was landed" in message
    assert git(remote, "rev-parse", "main") == upstream, "the refused cycle pushed"
    assert (first.root / "Domain/local/local.md").is_file(), "a local node was lost"
    assert "Domain/local/local.md" in git(first.root, "ls-files")
    assert git(first.root, "status", "--porcelain") == ""
    assert not first.state("sync", "scratch").exists(), "the refused cycle left its scratch"
    assert upstream not in git(first.root, "rev-list", "HEAD"), "the remote's commit landed"
    return caught.value


def _repaired_then_synced(pair: tuple[Path, Vault, Vault]) -> None:
    """The second clone reverts the hostile commit; the first now syncs and publishes."""
    remote, first, second = pair
    git(second.root, "revert", "--no-edit", "HEAD")
    git(second.root, "push", "-q", "origin", "main")
    sync_once(first)
    assert "Domain/local/local.md" in git(remote, "ls-tree", "-r", "--name-only", "main")


def _append_line(vault: Vault, line: bytes) -> None:
    with open(vault.ledger_path("audit"), "ab") as handle:
        handle.write(line)


def test_a_ledger_line_that_is_not_a_json_object_is_refused_by_line(pair):
    error = _refused(pair, lambda v: _append_line(v, b"[1, 2, 3]\n"),
                     "_ledger/audit.jsonl: line", "not a JSON object")
    assert str(pair[1].root) not in str(error).split(". On the device")[0]
    first = pair[1]
    Ledger(first, "audit").read()  # this device's ledger is whole: its writes go on
    _repaired_then_synced(pair)


def test_a_ledger_line_whose_parent_is_not_in_the_ledger_is_refused(pair):
    record = {"id": uuid7(), "parents": [uuid7()], "device": "bad", "at": "2026-11-29T18:02Z",
              "kind": "note", "subject": "x"}
    _refused(pair, lambda v: _append_line(v, (json.dumps(record) + "\n").encode()),
             "_ledger/audit.jsonl: line", "names parent")
    _repaired_then_synced(pair)


def test_a_ledger_line_with_a_malformed_id_is_refused(pair):
    record = {"id": "not-a-uuid", "parents": [], "device": "bad", "at": "2026-11-29T18:02Z",
              "kind": "note", "subject": "x"}
    _refused(pair, lambda v: _append_line(v, (json.dumps(record) + "\n").encode()),
             "'not-a-uuid' is not a UUIDv7")


def test_a_file_over_the_default_limit_is_refused_naming_it(pair):
    def big(vault: Vault) -> None:
        (vault.root / "Workbench" / "dump.bin").write_bytes(os.urandom(10_500_000))

    _refused(pair, big, "Workbench/dump.bin is 10.5 MB, over the 10 MB limit",
             "[sync] max_file_mb")
    _repaired_then_synced(pair)


def test_the_size_limit_is_read_from_this_devices_osk_toml(pair):
    first = pair[1]
    toml = first.root / "osk.toml"
    toml.write_text(toml.read_text(encoding="utf-8") + "\n[sync]\nmax_file_mb = 0.5\n",
                    encoding="utf-8")

    def medium(vault: Vault) -> None:
        (vault.root / "Workbench" / "photo.jpg").write_bytes(os.urandom(600_000))

    _refused(pair, medium, "Workbench/photo.jpg is 0.6 MB, over the 0.5 MB limit")


def test_a_copy_of_a_node_under_another_name_is_refused_as_a_duplicate_id(pair):
    _remote, first, second = pair
    node_id = write_node(second, "Domain/real/real.md", "The real node.\n")
    _push_by_hand(second, "a real node")
    sync_once(first)

    def copy(vault: Vault) -> None:
        (vault.root / "Domain/real/copy.md").write_bytes(
            (vault.root / "Domain/real/real.md").read_bytes().replace(b"The real", b"A fake"))

    _refused(pair, copy, f"node id {node_id}", "Domain/real/copy.md", "Domain/real/real.md")
    assert (first.root / "Domain/real/real.md").is_file()
    _repaired_then_synced(pair)


def test_a_copy_whose_id_is_quoted_is_refused_and_a_node_naming_the_id_is_not(pair):
    _remote, first, second = pair
    node_id = write_node(second, "Domain/real/real.md", "The real node.\n")
    write_node(second, "Domain/real/mention.md", f"Follows from {node_id}.\n")
    _push_by_hand(second, "a real node, and one that names it in its body")
    assert sync_once(first).pulled == 1  # naming an id is not carrying it
    assert (first.root / "Domain/real/mention.md").is_file()

    def copy(vault: Vault) -> None:
        text = (vault.root / "Domain/real/real.md").read_text(encoding="utf-8")
        assert f"id: {node_id}\n" in text
        quoted = text.replace(f"id: {node_id}", f"id: '{node_id}'")  # to YAML, the same id
        (vault.root / "Domain/real/copy.md").write_text(quoted, encoding="utf-8")

    _refused(pair, copy, f"node id {node_id}", "Domain/real/copy.md", "Domain/real/real.md")


def test_a_copy_of_a_node_with_an_id_of_its_own_making_is_refused(pair):
    """An id need not be a UUID (a person may write ``id: auth-decision`` by hand); the check
    holds every id as the catalog does, case and all."""
    _remote, first, second = pair
    write_node(second, "Domain/real/real.md", "The real node.\n", node_id="auth-decision")
    write_node(second, "Domain/real/other.md", "Another node.\n", node_id="Auth-Decision")
    _push_by_hand(second, "two nodes whose ids differ in case")
    assert sync_once(first).pulled == 1  # two ids to the catalog: both land
    assert first.abs("Domain/real/other.md").is_file()

    def copy(vault: Vault) -> None:
        (vault.root / "Domain/real/copy.md").write_bytes(
            (vault.root / "Domain/real/real.md").read_bytes().replace(b"The real", b"A fake"))

    _refused(pair, copy, "node id auth-decision", "Domain/real/copy.md", "Domain/real/real.md")
    _repaired_then_synced(pair)


def test_a_brought_node_whose_id_an_unpushed_node_here_carries_is_refused(pair):
    """Each tree alone is sound; once this device's commits are rebased onto the remote's, the
    id would be carried twice. Nothing lands or leaves until the person gives one node another
    id; then both nodes land and are pushed."""
    remote, first, second = pair
    write_node(second, "Domain/there/there.md", "Written there.\n", node_id="auth-decision")
    _push_by_hand(second, "a node whose id a person wrote")
    upstream = git(remote, "rev-parse", "main")
    write_node(first, "Domain/here/here.md", "Written here.\n", node_id="auth-decision")
    with pytest.raises(SyncError) as caught:
        sync_once(first)
    message = str(caught.value)
    assert ("node id auth-decision is carried by both Domain/there/there.md (brought) and "
            "Domain/here/here.md (this device's, not yet pushed)") in message, message
    assert "nothing was landed or pushed" in message
    assert git(remote, "rev-parse", "main") == upstream, "the refused cycle pushed"
    assert upstream not in git(first.root, "rev-list", "HEAD"), "the remote's commit landed"
    assert "Domain/here/here.md" in git(first.root, "ls-files")  # committed, kept
    assert git(first.root, "status", "--porcelain") == ""
    assert not first.abs("Domain/there/there.md").exists()
    assert "auth-decision" in first.abs("Domain/here/here.md").read_text(encoding="utf-8")
    assert not first.state("sync", "scratch").exists(), "the refused cycle left its scratch"

    here = first.abs("Domain/here/here.md")
    here.write_text(here.read_text(encoding="utf-8").replace(
        "id: auth-decision", "id: auth-decision-here"), encoding="utf-8")
    result = sync_once(first)
    assert result.pulled == 1 and result.pushed >= 1
    landed = git(remote, "ls-tree", "-r", "--name-only", "main").splitlines()
    assert {"Domain/there/there.md", "Domain/here/here.md"} <= set(landed)


def test_a_node_moved_here_and_edited_there_lands_once(pair):
    """git follows the move: the edit lands in the moved file, and the old path the rebase
    removed is no clash."""
    remote, first, second = pair
    write_node(second, "Domain/real/real.md", "The real node.\n")
    _push_by_hand(second, "a node")
    sync_once(first)
    first.abs("Domain/moved").mkdir()
    first.abs("Domain/real/real.md").rename(first.abs("Domain/moved/real.md"))
    _rewrite_body(second, "Domain/real/real.md", "Edited there.\n")
    _push_by_hand(second, "the node edited")
    assert sync_once(first).pulled == 1
    landed = git(remote, "ls-tree", "-r", "--name-only", "main").splitlines()
    assert "Domain/moved/real.md" in landed and "Domain/real/real.md" not in landed
    assert "Edited there." in first.abs("Domain/moved/real.md").read_text(encoding="utf-8")


def test_a_node_moved_and_rewritten_here_and_edited_there_is_refused_not_carried_twice(pair):
    """Too changed for git to see the move, the rebase would keep the remote's edit where the
    node was beside this device's file: two files, one id. Refused; once the person removes
    this device's file, the edit lands and one file carries the id."""
    remote, first, second = pair
    node_id = write_node(second, "Domain/real/real.md", "The real node.\n")
    _push_by_hand(second, "a node")
    sync_once(first)
    first.abs("Domain/moved").mkdir()
    first.abs("Domain/real/real.md").rename(first.abs("Domain/moved/real.md"))
    _rewrite_body(first, "Domain/moved/real.md", "Every line rewritten here.\n" * 30)
    _rewrite_body(second, "Domain/real/real.md", "Edited there.\n")
    _push_by_hand(second, "the node edited")
    with pytest.raises(SyncError) as caught:
        sync_once(first)
    message = str(caught.value)
    assert (f"node id {node_id} is carried by both Domain/real/real.md (brought) and "
            f"Domain/moved/real.md (this device's, not yet pushed)") in message, message
    assert "put this device's file back where the remote keeps it" in message

    first.abs("Domain/moved/real.md").unlink()
    sync_once(first)
    landed = git(remote, "ls-tree", "-r", "--name-only", "main").splitlines()
    assert "Domain/real/real.md" in landed and "Domain/moved/real.md" not in landed
    assert "Edited there." in first.abs("Domain/real/real.md").read_text(encoding="utf-8")


def _rewrite_body(vault: Vault, rel: str, body: str) -> None:
    front, _, _old = vault.abs(rel).read_text(encoding="utf-8").partition("\n---\n")
    vault.abs(rel).write_text(f"{front}\n---\n{body}", encoding="utf-8")


def test_a_node_copied_here_with_its_id_lands_what_is_brought_and_is_not_pushed(pair):
    """A note duplicated in an editor keeps its front matter, id and all. The pull still lands
    (the clash is this device's own, not the remote's), but nothing is pushed: every other
    device's admission would refuse the copy and stop syncing. Once the copy has an id of its
    own, everything goes out."""
    remote, first, second = pair
    node_id = write_node(first, "Domain/a/a.md", "One.\n")
    sync_once(first)
    sync_once(second)
    first.abs("Domain/b").mkdir()
    first.abs("Domain/b/b.md").write_bytes(first.abs("Domain/a/a.md").read_bytes())
    write_node(second, "Domain/there/there.md", "Written there.\n")
    _push_by_hand(second, "an unrelated node")
    upstream = git(remote, "rev-parse", "main")
    with pytest.raises(SyncError) as caught:
        sync_once(first)
    message = str(caught.value)
    assert (f"node id {node_id} is carried by both Domain/a/a.md and Domain/b/b.md"
            in message), message
    assert "nothing was pushed" in message
    assert git(remote, "rev-parse", "main") == upstream, "the copy was pushed"
    assert first.abs("Domain/there/there.md").is_file()  # what was brought landed
    assert "Domain/b/b.md" in git(first.root, "ls-files")  # committed here, kept
    assert sync_once(second).pulled == 0  # the other device goes on syncing

    copy = first.abs("Domain/b/b.md")
    copy.write_text(copy.read_text(encoding="utf-8").replace(
        f"id: {node_id}", "id: a-copy-of-its-own"), encoding="utf-8")
    assert sync_once(first).pushed >= 1
    assert sync_once(second).pulled >= 1
    assert second.abs("Domain/b/b.md").is_file()


def _blobs_read(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every blob read through ``GitRepo.blobs`` from now on (what the id map reads)."""
    read: list[str] = []
    real = GitRepo.blobs

    def counted(repo: GitRepo, shas: Sequence[str]) -> Iterator[tuple[str, bytes]]:
        read.extend(shas)
        return real(repo, shas)

    monkeypatch.setattr(GitRepo, "blobs", counted)
    return read


def _held(vault: Vault) -> tuple[str, int]:
    """The tree the id map holds, and how many node files it holds of it."""
    with closing(sqlite3.connect(vault.state("sync", node_ids.FILE))) as db:
        return (db.execute("SELECT tree FROM held").fetchone()[0],
                db.execute("SELECT count(*) FROM files").fetchone()[0])


def _node_files(vault: Vault, rev: str = "HEAD") -> list[str]:
    return [rel for rel in git(vault.root, "ls-tree", "-r", "--name-only", rev).splitlines()
            if rel.endswith(".md") and rel.startswith("Domain/")]


def test_a_cycle_reads_only_the_node_files_it_changes(pair, monkeypatch):
    """The ids of a tree's node files are kept in device state, with the tree they are of: a
    pull reads the blobs it brings, a push the blobs it sends, never every node file of the
    tree again; a map damaged costs blobs read again, never a wrong answer."""
    _remote, first, second = pair
    for number in range(5):
        write_node(second, f"Domain/many/n{number}.md", f"Node {number}.\n")
    _push_by_hand(second, "five nodes")
    sync_once(first)
    tree = git(first.root, "rev-parse", "origin/main^{tree}").strip()
    assert _held(first) == (tree, len(_node_files(first))) and len(_node_files(first)) >= 5
    read = _blobs_read(monkeypatch)

    write_node(second, "Domain/many/n5.md", "Node 5.\n")
    _push_by_hand(second, "one more")
    assert sync_once(first).pulled == 1
    assert read == [git(second.root, "rev-parse", "HEAD:Domain/many/n5.md").strip()]

    read.clear()
    write_node(first, "Domain/mine/mine.md", "Written here.\n")
    assert sync_once(first).pushed == 1  # the push's check reads the one node it sends
    assert read == [git(first.root, "rev-parse", "HEAD:Domain/mine/mine.md").strip()]
    assert _held(first) == (git(first.root, "rev-parse", "HEAD^{tree}").strip(),
                            len(_node_files(first)))

    sync_once(second)  # the copy below is made on top of what this device pushed
    first.state("sync", node_ids.FILE).write_bytes(b"not a database " * 100)
    read.clear()

    def copy(vault: Vault) -> None:
        (vault.root / "Domain/many/copy.md").write_bytes(
            (vault.root / "Domain/many/n1.md").read_bytes().replace(b"Node 1", b"A fake"))

    _refused(pair, copy, "Domain/many/copy.md", "Domain/many/n1.md")
    upstream = git(first.root, "rev-parse", "origin/main^{tree}").strip()
    assert _held(first) == (upstream, len(_node_files(first, "origin/main")))
    assert len(read) == len(set(read)) == len(_node_files(first, "origin/main"))  # all, once


def test_an_upgraded_device_reads_no_node_file_its_text_map_knew(pair, monkeypatch):
    """The text map of blobs and ids osk kept before (``.osk/sync/node-ids``) seeds the new
    file on its first use, and is removed; a tree the file holds that git no longer has is
    listed whole, again without reading a blob the file knows."""
    _remote, first, second = pair
    for number in range(3):
        write_node(second, f"Domain/old/n{number}.md", f"Node {number}.\n")
    _push_by_hand(second, "three nodes")
    sync_once(first)
    first.state("sync", node_ids.FILE).unlink()
    lines = git(first.root, "ls-tree", "-r", "HEAD", "--", "Domain/old").splitlines()
    legacy = first.state("sync", node_ids.LEGACY)
    legacy.write_text("".join(f"{line.split()[2]} {_id_in(first, line.split(chr(9))[1])}\n"
                              for line in lines) + "a damaged line\n", encoding="utf-8")
    read = _blobs_read(monkeypatch)
    write_node(second, "Domain/new/new.md", "New.\n")
    _push_by_hand(second, "one more")
    assert sync_once(first).pulled == 1
    known = {line.split()[2] for line in lines}
    assert read and not known & set(read)  # the files it lacked (.gitkeep ones), none it knew
    assert not legacy.exists()

    with closing(sqlite3.connect(first.state("sync", node_ids.FILE))) as db:
        db.execute("UPDATE held SET tree = ?", ("0" * 40,))  # an object git does not have
        db.commit()
    read.clear()
    write_node(second, "Domain/new/newer.md", "Newer.\n")
    _push_by_hand(second, "and one more")
    assert sync_once(first).pulled == 1
    assert read == [git(second.root, "rev-parse", "HEAD:Domain/new/newer.md").strip()]


def _id_in(vault: Vault, rel: str) -> str:
    text = vault.abs(rel).read_text(encoding="utf-8")
    return text.split("\nid: ", 1)[1].split("\n", 1)[0]


def test_a_gitattributes_that_drops_the_union_merge_lands_with_a_notice(pair):
    remote, first, second = pair
    path = second.root / ".gitattributes"
    path.write_text(path.read_text(encoding="utf-8").replace("merge=union", ""),
                    encoding="utf-8")
    _push_by_hand(second, "union dropped")
    result = sync_once(first)
    assert "no longer says `_ledger/*.jsonl merge=union`" in result.line()
    assert "merge=union" not in (first.root / ".gitattributes").read_text(encoding="utf-8")


def test_a_gitattributes_that_lets_git_rewrite_ledgers_or_raw_records_is_refused(pair):
    def override(vault: Vault) -> None:
        with open(vault.root / ".gitattributes", "a", encoding="utf-8") as handle:
            handle.write("*.jsonl text eol=crlf\n_raw/**/*.md filter=lfs\n")

    _refused(pair, override, ".gitattributes sets text, eol on ledgers",
             ".gitattributes sets filter on raw records")
    _repaired_then_synced(pair)


def test_the_attribute_reading_follows_gits_last_match_rule():
    from osk.sync.admission import attribute_problems

    template = "_ledger/*.jsonl merge=union\n_raw/** -text\n"
    assert attribute_problems(template) == ([], [])
    refused, noted = attribute_problems(template + "*.jsonl binary\n")
    assert refused == [] and any("merge=union" in n for n in noted)
    refused, _ = attribute_problems(template + "_raw/** text=auto\n")
    assert refused and "raw records" in refused[0]
    assert attribute_problems(template + "_raw/** text\n_raw/** -text\n") == ([], [])
    assert attribute_problems("# a comment\n" + template + "*.png binary\n") == ([], [])


def test_an_unreadable_osk_toml_is_refused(pair):
    def break_it(vault: Vault) -> None:
        (vault.root / "osk.toml").write_text("[vault\nscope_isolation = maybe\n",
                                             encoding="utf-8")

    _refused(pair, break_it, "osk.toml is not valid TOML")


def test_device_state_pushed_by_hand_is_refused(pair):
    def plant(vault: Vault) -> None:
        planted = vault.root / ".osk" / "device-id"
        git(vault.root, "add", "-f", str(planted))

    _refused(pair, plant, ".osk/device-id is device state")


def test_a_link_brought_by_a_remote_leaves_no_scratch_behind(pair, tmp_path: Path):
    outside = tmp_path / "outside"
    outside.mkdir()

    def link(vault: Vault) -> None:
        (vault.root / "_raw" / "planted").symlink_to(outside, True)

    _refused(pair, link, "_raw/planted is a symbolic link")
    assert not os.path.lexists(pair[1].root / "_raw" / "planted")


def test_every_problem_of_a_commit_is_named_at_once(pair):
    def several(vault: Vault) -> None:
        _append_line(vault, b"not json\n")
        (vault.root / "Workbench" / "dump.bin").write_bytes(os.urandom(10_200_000))

    _refused(pair, several, "_ledger/audit.jsonl: line", "Workbench/dump.bin")


# -- a rewritten remote (force-push) -------------------------------------------------------------
def test_a_force_pushed_remote_is_refused_until_a_person_accepts_it(pair, capsys):
    remote, first, second = pair
    write_node(first, "Domain/mine/mine.md", "Pushed by the first device.\n")
    sync_once(first)
    sync_once(second)
    pushed = head(first)
    # The second clone throws the first device's commit away and force-pushes.
    git(second.root, "reset", "-q", "--hard", "HEAD~1")
    write_node(second, "Domain/theirs/theirs.md", "Written on the rewritten history.\n")
    git(second.root, "add", "-A")
    git(second.root, "commit", "-q", "-m", "rewritten")
    git(second.root, "push", "-q", "--force", "origin", "main")
    rewritten = git(remote, "rev-parse", "main").strip()
    write_node(first, "Domain/later/later.md", "Written here after the rewrite.\n")
    for _attempt in range(2):  # refused every time, not only the first
        with pytest.raises(SyncError) as caught:
            sync_once(first)
        message = str(caught.value)
        assert "was rewritten (a force-push)" in message and pushed[:8] in message
        assert "1 of them made on this device" in message
        assert "osk sync --accept-rewrite" in message
        assert git(remote, "rev-parse", "main").strip() == rewritten
        assert not (first.root / "Domain/theirs").exists(), "the rewritten history landed"
    assert main(["--vault", str(first.root), "sync"]) == 1
    assert "force-push" in capsys.readouterr().err
    assert main(["--vault", str(first.root), "sync", "--accept-rewrite"]) == 0
    files = git(remote, "ls-tree", "-r", "--name-only", "main")
    for rel in ("Domain/mine/mine.md", "Domain/theirs/theirs.md", "Domain/later/later.md"):
        assert rel in files, rel
    sync_once(first)  # accepted once: later cycles go on as usual


def test_an_id_shaped_like_a_pattern_is_no_pattern(pair):
    """A node whose id line is a regular expression is not taken for a copy of every node."""
    remote, first, second = pair
    write_node(second, "Domain/real/real.md", "The real node.\n")
    node = second.root / "Domain/real/odd.md"
    write_node(second, "Domain/real/odd.md", "An odd node.\n")
    text = node.read_text(encoding="utf-8")
    node.write_text("\n".join("id: .*" if line.startswith("id:") else line
                              for line in text.split("\n")), encoding="utf-8")
    _push_by_hand(second, "an odd id")
    sync_once(first)  # lands: nothing else carries that (invalid) id
    assert (first.root / "Domain/real/odd.md").is_file()
    assert git(remote, "rev-parse", "main").strip() == head(first)


def test_a_remote_that_removes_ledger_records_is_refused(pair):
    _remote, first, second = pair
    for number in range(3):
        Ledger(second, "audit").append("note", f"subject-{number}")
    _push_by_hand(second, "three records")
    sync_once(first)

    def remove_one(vault: Vault) -> None:
        path = vault.ledger_path("audit")
        lines = path.read_bytes().splitlines(keepends=True)
        path.write_bytes(b"".join(lines[:-2] + lines[-1:]))  # the middle record of the three

    _refused(pair, remove_one, "_ledger/audit.jsonl: 1 record(s) removed")
    _repaired_then_synced(pair)
