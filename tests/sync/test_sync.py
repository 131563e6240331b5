"""`osk sync` against a real bare remote with two or three real clones."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from sync_support import (
    append_raw,
    assert_settled,
    body_of,
    edit_node,
    git,
    head,
    make_devices,
    tracked,
    write_node,
)

from osk.errors import SyncError
from osk.store import conflict_copies
from osk.store.catalog import Catalog
from osk.store.ledger import Ledger, device_id
from osk.store.vault import Vault, init
from osk.surfaces.cli import main
from osk.sync import cycle as sync
from osk.sync import daemon, gitrepo, node_ids
from osk.sync.gitrepo import open_repo

NOW = "2026-11-29T18:02+09:00"


@pytest.fixture
def pinned_clock(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("OSK_NOW", NOW)
    return NOW


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Vault, Vault]:
    _remote, (first, second) = make_devices(tmp_path, 2)
    return first, second


def test_a_node_written_on_one_device_arrives_on_the_other(pair):
    a, b = pair
    write_node(a, "Domain/Tea/Green tea.md", "Steep at 80 degrees.\n")
    result = sync.sync_once(a)
    assert result.pushed == 1 and not result.offline
    pulled = sync.sync_once(b)
    assert pulled.pulled == 1
    assert body_of(b, "Domain/Tea/Green tea.md") == "Steep at 80 degrees.\n"
    assert head(a) == head(b)
    assert_settled(a)
    assert_settled(b)


def test_the_commit_message_names_what_changed(pair):
    a, _b = pair
    write_node(a, "Domain/Tea/Green tea.md", "one\n")
    write_node(a, "Domain/Tea/Black tea.md", "two\n")
    sync.sync_once(a)
    edit_node(a, "Domain/Tea/Green tea.md", "one, revised\n")
    a.abs("Domain/Tea/Black tea.md").unlink()
    Ledger(a, "routing").append("bind", "repo-x", {"scope": "x"})
    Ledger(a, "routing").append("bind", "repo-y", {"scope": "y"})
    append_raw(a, "repo-x", "conv-1", "## Round 1")
    append_raw(a, "repo-x", "conv-1", "hello")
    a.abs("_memory/x.md").write_text("note\n", encoding="utf-8")
    result = sync.sync_once(a)
    message = git(a.root, "log", "-1", "--format=%B")
    assert message == (
        "osk sync: nodes: 1 changed, 1 removed; 2 ledger line(s); 1 raw record(s) grown; "
        "1 other file(s)\n"
        "\n"
        "Nodes changed: Green tea\n"
        "Nodes removed: Black tea\n"
        "Ledgers appended: routing +2\n"
        "Raw records grown: repo-x/conv-1 +2 lines\n"
        "Other files: _memory/x.md\n"
        f"Device: {device_id(a)}\n"
        "\n"
    )
    assert [c.sha for c in result.commits] == [head(a)]


def test_a_moved_node_is_reported_as_moved(pair):
    a, _b = pair
    write_node(a, "Domain/Tea/Green tea.md", "one\n")
    sync.sync_once(a)
    a.abs("Domain/Drinks").mkdir()
    a.abs("Domain/Tea/Green tea.md").rename(a.abs("Domain/Drinks/Sencha.md"))
    result = sync.sync_once(a)
    assert result.commits[0].nodes_moved == (("Green tea", "Sencha"),)
    assert result.commits[0].subject == "osk sync: nodes: 1 moved"


def test_device_state_is_never_committed_even_without_the_gitignore_line(pair):
    a, b = pair
    a.abs(".gitignore").write_text("# emptied by hand\n", encoding="utf-8")
    a.state("index").mkdir(parents=True, exist_ok=True)
    a.state("index", "postings.bin").write_bytes(b"\0" * 64)
    write_node(a, "Domain/Tea/Green tea.md", "one\n")
    sync.sync_once(a)
    committed = git(a.root, "ls-tree", "-r", "--name-only", "HEAD")
    assert ".osk" not in committed
    sync.sync_once(b)
    assert not b.state("index").exists()
    assert b.abs("Domain/Tea/Green tea.md").exists()


def test_concurrent_ledger_appends_keep_every_line_and_the_fork_is_joined_by_the_next_append(
    pair,
):
    a, b = pair
    first = Ledger(a, "routing").append("bind", "repo-x", {"scope": "alpha"})
    sync.sync_once(a)
    sync.sync_once(b)
    on_a = [Ledger(a, "routing").append("bind", "repo-x", {"scope": "beta"}),
            Ledger(a, "routing").append("bind", "repo-z", {"scope": "zeta"})]
    on_b = [Ledger(b, "routing").append("bind", "repo-x", {"scope": "gamma"}),
            Ledger(b, "audit").append("create", "node-1", {"path": "Domain/x.md"})]
    sync.sync_once(a)
    steps: list[str] = []
    rebased = sync.sync_once(b, checkpoint=steps.append)
    assert rebased.pulled == 1 and rebased.pushed == 1  # b's commit was replayed onto a's
    assert "rebased" in steps and "rebase-stopped" not in steps  # git's union driver merged it
    sync.sync_once(a)
    for device in (a, b):
        view = Ledger(device, "routing").read()
        assert {r.id for r in view.records} == {first.id, on_a[0].id, on_a[1].id, on_b[0].id}
        assert [f.subject for f in view.forks()] == ["repo-x"]
        assert Ledger(device, "audit").read().records[0].id == on_b[1].id
    joined = Ledger(b, "routing").append("bind", "repo-x", {"scope": "beta"})
    assert set(joined.parents) == set(Ledger(a, "routing").read().heads)
    sync.sync_once(b)
    sync.sync_once(a)
    view = Ledger(a, "routing").read()
    assert view.forks() == []
    assert view.current("repo-x").id == joined.id
    assert tracked(a) == tracked(b)
    assert_settled(a)
    assert_settled(b)


def test_a_ledger_created_on_both_devices_is_merged_by_union(pair):
    a, b = pair
    on_a = Ledger(a, "candidates").append("open", "pair-1", {"note": "from a"})
    on_b = Ledger(b, "candidates").append("open", "pair-2", {"note": "from b"})
    sync.sync_once(a)
    sync.sync_once(b)
    sync.sync_once(a)
    for device in (a, b):
        assert {r.id for r in Ledger(device, "candidates").read().records} == {on_a.id, on_b.id}


def test_a_ledger_still_merges_line_by_line_when_the_union_rule_was_removed(pair):
    a, b = pair
    a.abs(".gitattributes").write_text("# the union line was deleted by hand\n",
                                        encoding="utf-8")
    sync.sync_once(a)
    sync.sync_once(b)
    on_a = Ledger(a, "routing").append("bind", "repo-x", {"scope": "a"})
    on_b = Ledger(b, "routing").append("bind", "repo-x", {"scope": "b"})
    sync.sync_once(a)
    steps: list[str] = []
    sync.sync_once(b, checkpoint=steps.append)
    assert "rebase-stopped" in steps  # git saw a conflict; osk merged the lines itself
    sync.sync_once(a)
    for device in (a, b):
        assert {r.id for r in Ledger(device, "routing").read().records} == {on_a.id, on_b.id}
        assert conflict_copies.conflict_copies(device) == []
        assert_settled(device)


def test_a_ledger_line_that_reached_both_devices_separately_is_kept_once(pair):
    a, b = pair
    base = Ledger(a, "routing").append("bind", "repo-w", {"scope": "w"})
    sync.sync_once(a)
    sync.sync_once(b)
    Ledger(a, "routing").append("bind", "repo-x", {"scope": "x"})
    shared = Ledger(b, "routing").append("bind", "repo-y", {"scope": "y"})
    with a.ledger_path("routing").open("a", encoding="utf-8") as handle:
        handle.write(shared.to_json() + "\n")  # a person copied one line across by hand
    Ledger(b, "routing").append("bind", "repo-z", {"scope": "z"})
    sync.sync_once(a)
    sync.sync_once(b)
    sync.sync_once(a)
    for device in (a, b):
        lines = device.ledger_path("routing").read_text(encoding="utf-8").splitlines()
        assert len(lines) == len(set(lines)) == 4
        assert base.id in {r.id for r in Ledger(device, "routing").read().records}
    assert git(b.root, "log", "-1", "--format=%s") == (
        "osk sync: removed 1 repeated ledger line(s) left by a merge\n")


def test_the_same_node_edited_on_two_devices_keeps_both_versions_and_a_validator_finding(
    pinned_clock, pair,
):
    a, b = pair
    node_id = write_node(a, "Domain/Tea/Green tea.md", "Steep at 80 degrees.\n")
    sync.sync_once(a)
    sync.sync_once(b)
    edit_node(a, "Domain/Tea/Green tea.md", "Steep at 75 degrees.\n")
    edit_node(b, "Domain/Tea/Green tea.md", "Steep at 85 degrees.\n")
    sync.sync_once(a)
    result = sync.sync_once(b)
    sync.sync_once(a)
    copy = f"Domain/Tea/Green tea (sync conflict 2026-11-29 1802 {device_id(b)}).md"
    assert result.conflict_copies == [copy]
    for device in (a, b):
        # The version the remote already had keeps the path; this device's is beside it.
        assert body_of(device, "Domain/Tea/Green tea.md") == "Steep at 75 degrees.\n"
        copy_text = device.abs(copy).read_text(encoding="utf-8")
        assert copy_text.endswith("---\nSteep at 85 degrees.\n")
        assert (f"# sync conflict copy of id {node_id}: merge it into the node by hand, then "
                f"delete this file\n") in copy_text
        assert conflict_copies.conflict_copies(device) == [copy]
        assert conflict_copies.original_of(copy) == "Domain/Tea/Green tea.md"
        catalog = Catalog(device)
        catalog.refresh()
        assert catalog.get(node_id).path == "Domain/Tea/Green tea.md"  # still readable
        assert catalog.duplicate_ids() == {}
        assert_settled(device)
    message = git(b.root, "log", "-1", "--format=%B", "--", copy)
    assert f"- Domain/Tea/Green tea.md: this device's version is in {copy}\n" in message
    from osk.verbs import validate

    findings = [f for f in validate.run(a) if f.rule == "sync-conflicts"]
    assert [f.path for f in findings] == [copy]


def test_a_node_deleted_on_one_device_and_edited_on_the_other_keeps_the_edit(pair):
    a, b = pair
    write_node(a, "Domain/Tea/Green tea.md", "one\n")
    sync.sync_once(a)
    sync.sync_once(b)
    a.abs("Domain/Tea/Green tea.md").unlink()
    edit_node(b, "Domain/Tea/Green tea.md", "one, and more\n")
    sync.sync_once(b)
    sync.sync_once(a)  # a's deletion meets b's published edit: the edit stays at the path
    sync.sync_once(b)
    for device in (a, b):
        assert body_of(device, "Domain/Tea/Green tea.md") == "one, and more\n"
        assert conflict_copies.conflict_copies(device) == []
        assert_settled(device)


def test_an_edit_to_a_node_the_remote_deleted_is_kept_as_a_conflict_copy(pinned_clock, pair):
    a, b = pair
    write_node(a, "Domain/Tea/Green tea.md", "one\n")
    sync.sync_once(a)
    sync.sync_once(b)
    a.abs("Domain/Tea/Green tea.md").unlink()
    edit_node(b, "Domain/Tea/Green tea.md", "one, and more\n")
    sync.sync_once(a)
    sync.sync_once(b)
    sync.sync_once(a)
    copy = f"Domain/Tea/Green tea (sync conflict 2026-11-29 1802 {device_id(b)}).md"
    for device in (a, b):
        assert not device.abs("Domain/Tea/Green tea.md").exists()
        assert device.abs(copy).read_text(encoding="utf-8").endswith("one, and more\n")
        assert_settled(device)


def test_raw_records_from_both_devices_all_arrive(tmp_path):
    _remote, devices = make_devices(tmp_path, 3)
    written: dict[str, list[str]] = {}
    for number, device in enumerate(devices):
        for line in range(5):
            rel = f"_raw/repo-x/conv-{number}.md"
            text = f"round {line} from device {number}"
            append_raw(device, "repo-x", f"conv-{number}", text)
            written.setdefault(rel, []).append(text + "\n")
            if line % 2:
                sync.sync_once(device)
    for _ in range(2):
        for device in devices:
            sync.sync_once(device)
    for device in devices:
        for rel, lines in written.items():
            assert device.abs(rel).read_text(encoding="utf-8") == "".join(lines)
        assert_settled(device)


def test_a_torn_ledger_line_is_not_committed_until_it_is_complete(pair):
    a, _b = pair
    record = Ledger(a, "routing").append("bind", "repo-x", {"scope": "x"})
    with a.ledger_path("routing").open("ab") as handle:
        handle.write(b'{"id":"0190')  # an append caught half-way
    sync.sync_once(a)
    committed = git(a.root, "show", "HEAD:_ledger/routing.jsonl")
    assert committed == record.to_json() + "\n"
    with a.ledger_path("routing").open("ab") as handle:
        handle.write(b'-rest"}\n')
    sync.sync_once(a)
    assert git(a.root, "show", "HEAD:_ledger/routing.jsonl").endswith('{"id":"0190-rest"}\n')


def test_a_rejected_push_is_fetched_rebased_and_retried(pair):
    a, b = pair
    write_node(a, "Domain/From a.md", "a\n")
    write_node(b, "Domain/From b.md", "b\n")
    seen: list[str] = []

    def b_pushes_first(name: str) -> None:
        seen.append(name)
        if name == "fetched" and seen.count("fetched") == 1:
            sync.sync_once(b)

    result = sync.sync_once(a, checkpoint=b_pushes_first)
    assert seen.count("fetched") == 2  # the rejection sent the cycle round again
    assert result.pushed == 1 and result.pulled == 1
    sync.sync_once(b)
    for device in (a, b):
        assert device.abs("Domain/From a.md").exists() and device.abs("Domain/From b.md").exists()
    assert head(a) == head(b)


def test_an_unreachable_remote_keeps_commits_locally_and_they_are_pushed_later(
    pinned_clock, pair, capsys,
):
    a, b = pair
    url = git(a.root, "remote", "get-url", "origin").strip()
    git(a.root, "remote", "set-url", "origin", str(a.root.parent / "unplugged.git"))
    write_node(a, "Domain/Offline one.md", "1\n")
    assert main(["--vault", str(a.root), "sync"]) == 75
    printed = capsys.readouterr().out
    assert printed.startswith("Offline: origin is unreachable (fatal: ")
    assert printed.endswith("Committed nodes: 1 added (" + head(a)[:8] + ") locally; "
                            "1 commit(s) wait to be pushed; run `osk sync` again when the "
                            "remote is reachable.\n")
    write_node(a, "Domain/Offline two.md", "2\n")
    offline = sync.sync_once(a)
    assert offline.offline and offline.ahead == 2
    status = daemon.status(a)
    assert status.line() == (
        f"main: 2 ahead, 0 behind origin/main (as of {NOW}); 0 local change(s) pending; "
        f"last synced {NOW}; offline since {NOW} ({status.reason})"
    )
    git(a.root, "remote", "set-url", "origin", url)
    back = sync.sync_once(a)
    assert not back.offline and back.pushed == 2
    sync.sync_once(b)
    assert b.abs("Domain/Offline one.md").exists() and b.abs("Domain/Offline two.md").exists()
    assert daemon.status(a).line() == (
        f"main: 0 ahead, 0 behind origin/main (as of {NOW}); 0 local change(s) pending; "
        f"last synced {NOW}; online"
    )


# What OpenSSH prints (then exits 255) for an unknown host and for a key the server refuses.
SSH_SAYS = {
    "no-dns": "ssh: Could not resolve hostname vault.example: Name or service not known",
    "refused": "git@vault.example: Permission denied (publickey).",
}


def ssh_stand_in(tmp_path: Path, case: str) -> str:
    script = tmp_path / f"ssh-{case}"
    script.write_text(f"#!/bin/sh\necho '{SSH_SAYS[case]}' >&2\nexit 255\n", encoding="utf-8")
    script.chmod(0o755)
    return str(script)


@pytest.mark.parametrize("case", ["no-dns", "refused"])
def test_a_refused_key_is_an_error_to_fix_while_an_unknown_host_is_offline(
    pinned_clock, pair, tmp_path, monkeypatch, capsys, case,
):
    a, _ = pair
    git(a.root, "remote", "set-url", "origin", "git@vault.example:me/vault.git")
    monkeypatch.setenv("GIT_SSH_COMMAND", ssh_stand_in(tmp_path, case))
    write_node(a, "Domain/Written on the train.md", "1\n")
    code = main(["--vault", str(a.root), "sync"])
    out, err = capsys.readouterr()
    assert git(a.root, "log", "-1", "--format=%s").startswith("osk sync: nodes: 1 added")
    status = daemon.status(a)
    if case == "no-dns":
        assert code == 75 and out.startswith("Offline: origin is unreachable (")
        assert status.offline_since == NOW and status.failed_at is None
        return
    assert code == 1 and out == ""
    assert err.startswith("Error: origin refused access (git@vault.example: Permission denied "
                          "(publickey).); the remote was reached, so this is not a network "
                          "outage.")
    assert err.rstrip().endswith("every commit is kept locally")
    assert status.offline_since is None and status.failed_at == NOW
    assert status.line().endswith(f"online; last attempt failed at {NOW}: origin refused "
                                  f"access (git@vault.example: Permission denied (publickey).)")


def test_status_counts_pending_changes_and_commits_behind(pinned_clock, pair, capsys):
    a, b = pair
    write_node(a, "Domain/New.md", "1\n")
    sync.sync_once(a)
    write_node(b, "Domain/Local.md", "1\n")
    git(b.root, "fetch", "-q", "origin")
    assert main(["--vault", str(b.root), "sync", "--status"]) == 0
    assert capsys.readouterr().out == (
        "main: 0 ahead, 1 behind origin/main; 1 local change(s) pending; never synced; online\n"
    )
    assert main(["--vault", str(b.root), "sync", "--status", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["behind"], data["pending"], data["offline_since"]) == (1, 1, None)


def test_appends_made_while_the_cycle_runs_are_carried_over_and_synced_next_time(pair):
    a, b = pair
    Ledger(a, "routing").append("bind", "repo-a", {"scope": "a"})
    sync.sync_once(a)
    Ledger(b, "routing").append("bind", "repo-b", {"scope": "b"})
    during: list[str] = []

    def append_mid_cycle(name: str) -> None:
        if name == "rebased":  # between the rebase and the landing, as a hook would
            during.append(Ledger(b, "routing").append("bind", "repo-c", {"scope": "c"}).id)
            append_raw(b, "repo-b", "conv-1", "appended mid-cycle")

    sync.sync_once(b, checkpoint=append_mid_cycle)
    ids = {r.id for r in Ledger(b, "routing").read().records}
    assert during[0] in ids and len(ids) == 3
    sync.sync_once(b)
    sync.sync_once(a)
    assert {r.id for r in Ledger(a, "routing").read().records} == ids
    assert a.abs("_raw/repo-b/conv-1.md").read_text(encoding="utf-8") == "appended mid-cycle\n"
    assert_settled(b)


def test_a_node_edited_by_hand_while_the_cycle_lands_is_kept_as_a_conflict_copy(
    pinned_clock, pair,
):
    a, b = pair
    write_node(a, "Domain/Tea.md", "v1\n")
    sync.sync_once(a)
    sync.sync_once(b)
    edit_node(a, "Domain/Tea.md", "v2 from a\n")
    sync.sync_once(a)
    write_node(b, "Domain/Other.md", "b\n")

    def person_types(name: str) -> None:
        if name == "rebased":
            edit_node(b, "Domain/Tea.md", "typed in Obsidian\n")

    result = sync.sync_once(b, checkpoint=person_types)
    copy = f"Domain/Tea (sync conflict 2026-11-29 1802 {device_id(b)}).md"
    assert result.conflict_copies == [copy]
    assert body_of(b, "Domain/Tea.md") == "v2 from a\n"
    assert b.abs(copy).read_text(encoding="utf-8").endswith("typed in Obsidian\n")
    sync.sync_once(a)
    assert a.abs(copy).exists()
    assert_settled(b)


def test_a_landing_commits_again_only_what_it_kept_of_this_devices_writes(
    pair, monkeypatch: pytest.MonkeyPatch,
):
    """Landing a pull leaves nothing of this device's uncommitted unless it kept a write beside
    or after what landed (the conflict copy above is committed and pushed by its cycle), so
    it commits then only; a write elsewhere during the landing waits for the next cycle, as a
    write after the cycle does, and is not lost."""
    from osk.sync import landing

    a, b = pair
    write_node(a, "Domain/Tea.md", "v1\n")
    sync.sync_once(a)
    commits: list[str] = []
    commit_into = landing.commit_into
    monkeypatch.setattr(landing, "commit_into", lambda cycle: (
        commits.append(cycle.result.line()), commit_into(cycle)))

    def person_writes(name: str) -> None:
        if name == "landing":
            write_node(b, "Domain/Elsewhere.md", "written while the pull landed\n")

    assert sync.sync_once(b, checkpoint=person_writes).pulled == 1
    assert commits == [] and body_of(b, "Domain/Tea.md") == "v1\n"
    assert "Domain/Elsewhere.md" not in tracked(b)
    assert sync.sync_once(b).pushed == 1
    assert_settled(b)


@pytest.mark.parametrize(("leftover", "what", "verb"), [
    ("rebase-merge", "a rebase", "rebase"),
    ("MERGE_HEAD", "a merge", "merge"),
])
def test_a_merge_or_rebase_a_person_started_in_the_vault_is_refused_and_nothing_is_written(
    pair, leftover, what, verb,
):
    a, _b = pair
    marker = a.root / ".git" / leftover
    if leftover == "MERGE_HEAD":
        marker.write_text(head(a) + "\n", encoding="utf-8")
    else:
        marker.mkdir()
    write_node(a, "Domain/Waiting.md", "1\n")
    before = head(a)
    with pytest.raises(SyncError) as caught:
        sync.sync_once(a)
    assert str(caught.value) == (
        f"{what} started outside osk is in progress in {a.root}; finish it (resolve, then "
        f"`git {verb} --continue`) or abort it (`git {verb} --abort`), then sync again"
    )
    assert head(a) == before
    line = daemon.status(a).line()
    assert f"blocked: {what} started outside osk" in line
    assert line.endswith(f"; last attempt failed at {daemon.status(a).failed_at}: {what} started "
                         f"outside osk is in progress in {a.root}")


def test_a_vault_without_the_remote_is_refused_with_what_to_do(tmp_path, capsys):
    from osk.store.vault import init

    vault = init(tmp_path / "alone")
    assert main(["--vault", str(vault.root), "sync"]) == 1
    assert capsys.readouterr().err == (
        f"Error: the vault has no git remote 'origin'; add one with "
        f"`git -C {vault.root} remote add origin URL`\n"
    )


def test_the_first_sync_publishes_to_an_empty_remote(tmp_path, capsys):
    from osk.store.vault import init

    vault = init(tmp_path / "vault")
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(tmp_path / "r.git"))
    git(vault.root, "remote", "add", "origin", str(tmp_path / "r.git"))
    assert main(["--vault", str(vault.root), "sync", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["pushed"], result["offline"], result["head"]) == (1, False, head(vault))
    assert git(tmp_path / "r.git", "rev-parse", "main").strip() == head(vault)


def test_conflict_copy_names_are_recognised_and_lead_back_to_the_node():
    copy = "Scope/p/c/Plan (sync conflict 2026-11-29 1802 3f9a1c0b2d4e 2).md"
    assert conflict_copies.is_conflict_copy(copy)
    assert conflict_copies.original_of(copy) == "Scope/p/c/Plan.md"
    assert not conflict_copies.is_conflict_copy("Scope/p/c/Plan (sync conflict notes).md")
    assert conflict_copies.is_conflict_copy(copy.rpartition("/")[2])  # a file name alone
    # The name is the copy's, not a folder's: a node under such a folder is no copy.
    assert not conflict_copies.is_conflict_copy(copy.removesuffix(".md") + "/Plan.md")
    assert conflict_copies.original_of("_raw/k/conv (sync conflict 2026-11-29 1802 ab).md") == \
        "_raw/k/conv.md"


def test_blobs_are_read_a_batch_at_a_time_and_a_missing_one_is_named(tmp_path, monkeypatch):
    """``GitRepo.blobs`` (what a pull reads node files with): each object's bytes exactly,
    across batches, empty and binary ones too; an object git lacks stops it by name."""
    git(tmp_path, "init", "-q")
    contents = [b"", b"---\nid: a\n---\nbody\n", bytes(range(256)) * 3, b"no newline"]
    with open_repo(tmp_path) as repo:
        shas = [repo.store(data) for data in contents]
        monkeypatch.setattr(gitrepo, "BATCH", 3)
        assert list(repo.blobs([*shas, shas[1]])) == [
            *zip(shas, contents, strict=True), (shas[1], contents[1])]
        missing = "0" * 40
        with pytest.raises(SyncError, match=f"cannot read object {missing}"):
            list(repo.blobs([shas[0], missing]))


def test_the_id_map_brought_from_tree_to_tree_answers_as_one_made_anew(tmp_path):
    """``node_ids.carried_ids`` applies what differs between the tree it holds and the one
    asked about; asked about random trees of a random history, in random order, each answer
    is the one a map made from nothing gives. The history adds, rewrites, moves and deletes
    node files whose ids come from a small pool (so some ids are carried twice), beside files
    that are no nodes and submodule entries at node paths."""
    rng = random.Random(20261207)
    _remote, (vault,) = make_devices(tmp_path, 1)
    pool = ["plan", "Plan", "deploy", "0190a0b2-0000-7000-8000-000000000001"]
    commits: list[str] = []
    for step in range(24):
        nodes = [rel for rel in git(vault.root, "ls-files", "Domain").splitlines()
                 if rel.endswith(".md")]
        choice = rng.random()
        if choice < 0.4 or not nodes:
            rel = f"Domain/t{rng.randrange(3)}/n{step}.md"
            vault.abs(rel).parent.mkdir(parents=True, exist_ok=True)
            vault.abs(rel).write_text(f"---\nid: {rng.choice(pool)}\n---\nStep {step}.\n",
                                      encoding="utf-8")
        elif choice < 0.6:
            vault.abs(rng.choice(nodes)).write_text(
                f"---\nid: {rng.choice(pool)}\n---\nRewritten at {step}.\n", encoding="utf-8")
        elif choice < 0.75:
            git(vault.root, "mv", rng.choice(nodes), f"Domain/moved-{step}.md")
        elif choice < 0.9:
            git(vault.root, "rm", "-q", rng.choice(nodes))
        else:
            (vault.root / f"notes-{step}.txt").write_text("no node\n", encoding="utf-8")
        git(vault.root, "add", "-A")
        if step in (5, 17):  # a submodule's entry at a node's path: a commit this repo lacks
            git(vault.root, "update-index", "--add", "--cacheinfo",
                f"160000,{step:040x},Domain/sub-{step}.md")
        git(vault.root, "commit", "-q", "--allow-empty", "-m", f"step {step}")
        commits.append(git(vault.root, "rev-parse", "HEAD").strip())
    fresh = tmp_path / "fresh"
    init(fresh)
    twice = 0
    with open_repo(vault.root) as repo:
        for _ in range(40):
            commit = rng.choice(commits)
            files = [line.split("\t", 1)[1] for line in git(
                vault.root, "ls-tree", "-r", commit, "--", "Domain").splitlines()
                if " blob " in line and line.endswith(".md")]
            asked = rng.sample(files, min(len(files), rng.randrange(1, 5)))
            kept = node_ids.carried_ids(vault, repo, commit, asked)
            fresh.joinpath(".osk", "sync", node_ids.FILE).unlink(missing_ok=True)
            made = node_ids.carried_ids(Vault(fresh), repo, commit, asked)
            assert kept == made, commit
            assert set(kept.ids) == set(asked)
            twice += any(len(paths) > 1 for paths in kept.holders.values())
    assert twice  # the pool gives some id to two files
