"""Random writes on three devices, synced in random order: nothing acknowledged goes missing.

50 rounds by default (a few seconds); set OSK_SYNC_ROUNDS to run longer, OSK_SYNC_SEED to vary.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from pathlib import Path

from sync_support import (
    append_raw,
    assert_settled,
    body_of,
    edit_node,
    head,
    make_devices,
    tracked,
    write_node,
)

from osk.store.catalog import Catalog
from osk.store.ledger import Ledger
from osk.store.vault import Vault
from osk.sync import cycle as sync

ROUNDS = int(os.environ.get("OSK_SYNC_ROUNDS", "50"))
SEED = int(os.environ.get("OSK_SYNC_SEED", "20261129"))
# Few titles, so devices collide on purpose; half of them Korean, so paths are not ASCII.
TITLES = [f"Domain/Topic {n}.md" for n in range(3)] + [f"Domain/주제 {n}.md" for n in range(3)]
LEDGERS = ("routing", "audit")
SUBJECTS = ("repo-a", "repo-b", "repo-c")


@dataclass
class Acknowledged:
    """Every write whose call returned: each must survive somewhere on every device."""

    node_lines: set[str] = field(default_factory=set)
    ledger_ids: set[str] = field(default_factory=set)
    raw_lines: dict[str, list[str]] = field(default_factory=dict)


def _node_paths(device: Vault) -> list[str]:
    catalog = Catalog(device)
    catalog.refresh()
    return sorted(node.path for node in catalog.nodes())


def _operate(rng: random.Random, number: int, device: Vault, step: int,
             seen: Acknowledged) -> None:
    token = f"d{number}-s{step}"
    choice = rng.random()
    if choice < 0.25:
        rel = rng.choice(TITLES)
        if device.abs(rel).exists():
            edit_node(device, rel, body_of(device, rel) + f"edit {token}\n")
        else:
            write_node(device, rel, f"created {token}\n")
        seen.node_lines.add(token)
    elif choice < 0.45:
        nodes = _node_paths(device)
        if nodes:
            rel = rng.choice(nodes)
            edit_node(device, rel, body_of(device, rel) + f"edit {token}\n")
            seen.node_lines.add(token)
    elif choice < 0.75:
        record = Ledger(device, rng.choice(LEDGERS)).append(
            "set", rng.choice(SUBJECTS), {"value": token})
        seen.ledger_ids.add(record.id)
    else:
        conversation = f"conv-{number}-{rng.randrange(2)}"
        append_raw(device, "repo-x", conversation, f"line {token}")
        rel = f"_raw/repo-x/{conversation}.md"
        seen.raw_lines.setdefault(rel, []).append(f"line {token}\n")


def _assert_nothing_missing(device: Vault, seen: Acknowledged) -> None:
    texts = [p.read_text(encoding="utf-8") for p in (device.root / "Domain").rglob("*.md")]
    for token in seen.node_lines:
        assert any(f" {token}\n" in text for text in texts), (device.root, token)
    ids = {r.id for name in LEDGERS for r in Ledger(device, name).read().records}
    assert seen.ledger_ids <= ids
    for rel, lines in seen.raw_lines.items():
        assert device.abs(rel).read_text(encoding="utf-8") == "".join(lines)
    catalog = Catalog(device)
    catalog.refresh()
    assert catalog.duplicate_ids() == {}  # conflict copies never make a node unreadable


def test_random_writes_and_syncs_on_three_devices_converge_without_losing_a_write(
    tmp_path: Path,
):
    rng = random.Random(SEED)
    _remote, devices = make_devices(tmp_path, 3)
    seen = Acknowledged()
    for step in range(ROUNDS):
        number = rng.randrange(len(devices))
        _operate(rng, number, devices[number], step, seen)
        if rng.random() < 0.45:
            sync.sync_once(devices[rng.randrange(len(devices))])
    for _ in range(2):  # twice around: the last device's commits reach the first
        for device in devices:
            sync.sync_once(device)
    first = devices[0]
    for device in devices:
        assert head(device) == head(first)
        assert tracked(device) == tracked(first)
        assert_settled(device)
        _assert_nothing_missing(device, seen)
    assert seen.node_lines and seen.ledger_ids and seen.raw_lines
