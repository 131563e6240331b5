"""Two agent sessions (two processes) writing one vault at once lose nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import writekit

from osk.authority import audit
from osk.engine.core import Engine
from osk.provenance.rechecks import Rechecks
from osk.store.catalog import Catalog
from osk.store.ledger import Ledger
from osk.store.vault import Vault

repo, eng, hub = writekit.repo, writekit.eng, writekit.hub  # shared fixtures

WRITER = """
import random, sys
from pathlib import Path
from osk.engine.core import Engine
from osk.calls.request import NewNode, NodeEdit

vault, repo, tag, count, seed = sys.argv[1:]
rng = random.Random(int(seed))
engine = Engine.open(vault, cwd=Path(repo))
edited = []
for i in range(int(count)):
    title = f"{tag} note {i}"
    engine.create_node(NewNode(title, f"note {i} of {tag}", f"body {i}\\n", space="Scope",
                               cluster="auth", drafter="m", derived_from=["[[auth]]"]))
    if rng.random() < 0.5:
        engine.update_node(title, NodeEdit(old_text=f"body {i}", new_text=f"body {i} edited"))
        edited.append(title)
print("\\n".join(edited))
"""

TRIALS = int(os.environ.get("OSK_CONCURRENCY_TRIALS", "1"))
PER_PROCESS = 8


@pytest.mark.parametrize("trial", range(TRIALS))
def test_two_processes_writing_one_vault_lose_nothing(eng: Engine, vault: Vault, repo: Path,
                                                      hub: str, trial: int):
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(vault.root), str(repo), tag,
                          str(PER_PROCESS), str(1000 * trial + n)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for n, tag in enumerate(("left", "right"))
    ]
    edited: set[str] = set()
    for proc in procs:
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
        edited |= {line for line in out.splitlines() if line}
    catalog = Catalog(vault)
    catalog.refresh()
    titles = {n.title for n in catalog.nodes()}
    expected = {f"{tag} note {i}" for tag in ("left", "right") for i in range(PER_PROCESS)}
    assert expected <= titles and not catalog.errors()
    for title in edited:
        assert catalog.get(title).body.endswith("edited\n")
    for name in ("routing", "rechecks", "audit"):
        Ledger(vault, name).read()  # every line parses, every parent exists
    table = Rechecks(vault).table()
    hub_id = catalog.get("auth").id
    for title in expected:
        pairs = table[catalog.get(title).id].pairs
        assert list(pairs) == [f"node:{hub_id}"]
    assert Rechecks(vault).candidates(catalog) == []
    actions = [e.action for e in audit.entries(vault)]
    assert actions.count("create") == 1 + 2 * PER_PROCESS
    assert actions.count("update") == len(edited)
    binds = [r for r in Ledger(vault, "routing").read().records if r.kind == "bind"]
    assert len(binds) == 1
