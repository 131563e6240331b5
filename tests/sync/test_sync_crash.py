"""A real `python -m osk sync` killed mid-cycle leaves a vault the next cycle completes."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
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
    wait_for,
    write_node,
)

from osk.store import conflict_copies
from osk.store.ledger import Ledger
from osk.store.vault import init
from osk.sync import cycle as sync
from osk.sync import node_ids
from osk.sync.gitrepo import open_repo

pytestmark = pytest.mark.crash


def _diverged(tmp_path: Path):
    """Two devices whose next sync needs a rebase with a node conflict, ledgers and raw."""
    _remote, (a, b) = make_devices(tmp_path, 2)
    write_node(a, "Domain/Tea.md", "v1\n")
    sync.sync_once(a)
    sync.sync_once(b)
    edit_node(a, "Domain/Tea.md", "v2 from a\n")
    edit_node(b, "Domain/Tea.md", "v2 from b\n")
    ids = [Ledger(a, "routing").append("bind", "repo-x", {"scope": "a"}).id,
           Ledger(b, "routing").append("bind", "repo-x", {"scope": "b"}).id,
           Ledger(b, "audit").append("create", "n1", {}).id]
    append_raw(a, "repo-x", "conv-a", "round from a")
    append_raw(b, "repo-x", "conv-b", "round from b")
    write_node(b, "Domain/Only b.md", "b\n")
    sync.sync_once(a)
    return a, b, ids


def _kill_sync_at(vault_root: Path, checkpoint: str, tmp_path: Path) -> None:
    signal_file = tmp_path / f"paused-{checkpoint}"
    env = {**os.environ, "OSK_SYNC_PAUSE_AT": checkpoint, "OSK_SYNC_PAUSE_FILE": str(signal_file)}
    process = subprocess.Popen(
        [sys.executable, "-m", "osk", "--vault", str(vault_root), "sync"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )
    try:
        wait_for(lambda: signal_file.exists() or process.poll() is not None,
                 f"the sync to reach {checkpoint}")
        assert process.poll() is None, process.communicate()
    finally:
        os.killpg(process.pid, signal.SIGKILL)  # the whole group: git children die too
        process.communicate()


@pytest.mark.parametrize("checkpoint", sync.CHECKPOINTS)
def test_a_sync_killed_at_any_checkpoint_is_completed_by_the_next_cycle(tmp_path, checkpoint):
    a, b, ids = _diverged(tmp_path)
    _kill_sync_at(b.root, checkpoint, tmp_path)
    left = {"rebase-stopped": b.state("sync", "scratch", ".git", "rebase-merge"),
            "rebased": b.state("sync", "scratch"), "landing": b.state("sync", "landing.json")}
    if checkpoint in left:
        assert left[checkpoint].exists()  # the kill really left that state behind
    assert not (b.root / ".git" / "rebase-merge").exists()  # the vault itself never rebases
    sync.sync_once(b)
    sync.sync_once(a)
    sync.sync_once(b)
    assert head(a) == head(b)
    assert tracked(a) == tracked(b)
    for device in (a, b):
        assert_settled(device)
        records = {r.id for name in ("routing", "audit")
                   for r in Ledger(device, name).read().records}
        assert set(ids) <= records
        assert device.abs("_raw/repo-x/conv-a.md").read_text(encoding="utf-8") == "round from a\n"
        assert device.abs("_raw/repo-x/conv-b.md").read_text(encoding="utf-8") == "round from b\n"
        assert body_of(device, "Domain/Only b.md") == "b\n"
        copies = conflict_copies.conflict_copies(device)
        assert len(copies) == 1
        kept = {body_of(device, "Domain/Tea.md"),
                device.abs(copies[0]).read_text(encoding="utf-8").split("---\n")[-1]}
        assert kept == {"v2 from a\n", "v2 from b\n"}


def test_a_stale_index_lock_left_by_a_killed_sync_is_cleared(tmp_path):
    a, b, _ids = _diverged(tmp_path)
    _kill_sync_at(b.root, "committed", tmp_path)
    (b.root / ".git" / "index.lock").write_bytes(b"")  # as if git itself had been killed
    result = sync.sync_once(b)
    assert result.pushed == 1
    assert_settled(b)


def test_an_index_lock_held_by_someone_else_is_not_taken_away(tmp_path):
    a, b, _ids = _diverged(tmp_path)
    lock = b.root / ".git" / "index.lock"
    lock.write_bytes(b"")
    with pytest.raises(sync.SyncError, match="another git command is using"):
        sync.sync_once(b)
    assert lock.exists()


# Asks the id map about a tree in a process of its own, which the test kills.
_ID_MAP_CHILD = """
import sys
from pathlib import Path
from osk.store.vault import Vault
from osk.sync.gitrepo import open_repo
from osk.sync.node_ids import carried_ids
vault = Vault(Path(sys.argv[1]))
with open_repo(vault.root) as repo:
    print("asking", flush=True)
    carried_ids(vault, repo, sys.argv[2], ())
"""


def test_an_id_map_killed_mid_write_answers_as_one_made_anew(tmp_path):
    """``osk.sync.node_ids`` writes the map of a tree in one SQLite transaction. A real process
    bringing it from one tree to another and killed there (held inside the transaction, or at
    a random moment) leaves a map whose next answer is the one a map made from nothing gives.
    Seeded; eight kills (more with OSK_CRASH_TRIALS)."""
    rng = random.Random(20261207)
    _remote, (vault,) = make_devices(tmp_path, 1)
    trees = []
    for version in range(2):  # the same 1,000 paths, every id different, some carried twice
        for number in range(1000):
            vault.abs(f"Domain/many/n{number}.md").parent.mkdir(parents=True, exist_ok=True)
            vault.abs(f"Domain/many/n{number}.md").write_text(
                f"---\nid: v{version}-{number // (1 + version)}\n---\nNode {number}.\n",
                encoding="utf-8")
        git(vault.root, "add", "-A")
        git(vault.root, "commit", "-q", "-m", f"version {version}")
        trees.append(git(vault.root, "rev-parse", "HEAD").strip())
    fresh = init(tmp_path / "fresh")
    asked = [f"Domain/many/n{number}.md" for number in rng.sample(range(1000), 20)]
    journal = vault.state("sync", node_ids.FILE + "-journal")
    for trial in range(int(os.environ.get("OSK_CRASH_TRIALS", "8"))):
        held = trial % 2 == 0
        _kill_id_map(vault.root, trees[trial % 2], tmp_path / f"paused-{trial}",
                     None if held else rng.uniform(0.0, 0.15))
        if held:
            assert journal.stat().st_size > 0  # killed inside the transaction
        with open_repo(vault.root) as repo:  # the killed question asked again
            kept = node_ids.carried_ids(vault, repo, trees[trial % 2], asked)
            fresh.state("sync", node_ids.FILE).unlink(missing_ok=True)
            assert kept == node_ids.carried_ids(fresh, repo, trees[trial % 2], asked), trial


def _kill_id_map(vault_root: Path, tree: str, signal_file: Path, after: float | None) -> None:
    """Ask the id map about ``tree`` in a child; kill it inside the map's transaction (``after``
    None) or ``after`` seconds once it asks."""
    env = {**os.environ, "OSK_SYNC_PAUSE_AT": "id-map" if after is None else "",
           "OSK_SYNC_PAUSE_FILE": str(signal_file)}
    child = subprocess.Popen([sys.executable, "-c", _ID_MAP_CHILD, str(vault_root), tree],
                             env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "asking\n"
        if after is None:
            wait_for(lambda: signal_file.exists() or child.poll() is not None,
                     "the id map's transaction")
            assert child.poll() is None
        else:
            time.sleep(after)
    finally:
        child.kill()
        child.communicate()
