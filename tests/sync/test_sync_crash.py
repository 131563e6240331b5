"""A real `python -m osk sync` killed mid-cycle leaves a vault the next cycle completes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from sync_support import (
    append_raw,
    assert_settled,
    body_of,
    edit_node,
    head,
    make_devices,
    tracked,
    wait_for,
    write_node,
)

from osk.store import conflict_copies
from osk.store.ledger import Ledger
from osk.sync import cycle as sync

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
