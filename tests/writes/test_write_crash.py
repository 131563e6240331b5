"""Writers killed with SIGKILL at the worst moments (issue 16 items 1 and 6a).

A real child process writes through the engine and kills itself at a chosen point: inside a
node's or object's atomic write (temp file written, not yet renamed), or between a node file's
replace and its audit append. Afterwards the vault must hold no temp file where sync looks, and
every node version must carry its audit record, so `osk log` never calls it a hand edit. A
second test kills a real `osk import` at seeded random moments (``OSK_CRASH_TRIALS`` trials,
3 in CI) and checks the same invariants.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from writekit import import_command, killed_imports, make_repo

from osk.authority import audit
from osk.engine.core import Engine
from osk.store import objects
from osk.store.catalog import Catalog
from osk.store.ledger import Ledger
from osk.store.vault import Vault
from osk.surfaces.cli import main
from osk.verbs import validate

pytestmark = [pytest.mark.crash,
              pytest.mark.skipif(os.name == "nt", reason="SIGKILL is POSIX")]

CHILD = r'''
import os, signal, sys
from pathlib import Path
import osk.store.ledger as ledger
from osk.engine.core import Engine
from osk.calls.request import NewNode, NodeEdit

vault, project, action, point = sys.argv[1:5]
armed = False

def die():
    os.kill(os.getpid(), signal.SIGKILL)

real_replace = os.replace
def replace(source, target):
    target = Path(target)
    if armed and point == "node-temp" and target.suffix == ".md":
        die()  # the temp file is written and fsynced, the rename never happens
    if armed and point == "object-temp" and "_objects" in target.parts:
        die()
    if armed and target.name == {"journal": "audit-intent.json",
                                 "snapshot": "snapshot.json"}.get(point):
        die()  # a device-state file's temp is written, not yet renamed
    real_replace(source, target)

real_append = ledger.append_durably
def append(path, data):
    if armed and point == "audit" and path.name == "audit.jsonl":
        die()  # the node file is replaced, its audit record is not appended
    real_append(path, data)

os.replace = replace
ledger.append_durably = append
eng = Engine.open(vault, cwd=Path(project))
eng.create_node(NewNode("auth", "How auth works", "The auth cluster.\n", space="Scope",
                        cluster="auth", drafter="test-model"))
if action not in ("create", "batch-create"):
    eng.create_node(NewNode("Tokens", "Token rules", "Tokens expire.\n", space="Scope",
                            cluster="auth", drafter="test-model"))
armed = action != "batch-create"
if action == "create":
    eng.create_node(NewNode("Tokens", "Token rules", "Tokens expire.\n", space="Scope",
                            cluster="auth", drafter="test-model"))
elif action == "batch-create":  # as osk import writes: under one hold of the lock
    with eng.batch():
        eng.create_node(NewNode("Keys", "Key rules", "Keys rotate.\n", space="Scope",
                                cluster="auth", drafter="test-model"))
        armed = True
        eng.create_node(NewNode("Tokens", "Token rules", "Tokens expire.\n", space="Scope",
                                cluster="auth", drafter="test-model"))
elif action == "update":
    eng.update_node("Tokens", NodeEdit(old_text="expire", new_text="expire hourly"))
elif action in ("confirm", "reject"):
    from osk.authority import protection, tombstones, trust
    protection.require_person = lambda verb: None  # the person's verbs, as at a terminal
    print(eng.read_node("Tokens").id, flush=True)
    if action == "confirm":
        trust.confirm(eng.vault, "Tokens")
    else:
        tombstones.reject(eng.vault, "Tokens", reason="wrong")
else:
    eng.move_nodes(["Tokens"], space="Scope", cluster="auth/old")
if point == "snapshot":
    eng.catalog.save_snapshot()
print("NOT KILLED", flush=True)
'''


def _run_child(vault: Vault, project: Path, action: str, point: str) -> str:
    done = subprocess.run([sys.executable, "-c", CHILD, str(vault.root), str(project), action,
                           point], capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, (done.stdout, done.stderr)
    return done.stdout


def _debris_outside_state(vault: Vault) -> list[str]:
    return validate.links_and_debris(vault)[1]


def _unaudited(vault: Vault) -> list[str]:
    """Node files whose bytes are not the last version their audit history records."""
    catalog = Catalog(vault)
    catalog.refresh()
    history = audit.by_node(vault)
    return [node.path for node in catalog.nodes()
            if not history.get(node.id) or history[node.id][-1].after != node.file_hash
            or history[node.id][-1].path_after != node.path]


@pytest.mark.parametrize("point", ["node-temp", "object-temp"])
def test_a_write_killed_inside_its_atomic_replace_leaves_no_temp_file_where_sync_looks(
        vault: Vault, tmp_path: Path, point: str):
    project = make_repo(tmp_path / "work" / "proj")
    _run_child(vault, project, "create", point)
    assert _debris_outside_state(vault) == []  # it used to sit beside the node or object
    left = list(vault.temp_dir.iterdir())
    assert left, "the child was killed before its temp file existed: the test proves nothing"
    Engine.open(vault, cwd=project)  # opening the vault removes a dead writer's temp files
    assert list(vault.temp_dir.iterdir()) == []
    assert not [f for f in validate.run(vault) if f.rule == "crash-debris"]


def test_a_live_writers_temp_file_is_kept_when_another_process_opens_the_vault(vault: Vault):
    vault.temp_dir.mkdir(parents=True, exist_ok=True)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        mine = vault.temp_dir / f".{live.pid}.Tokens.md.abcd.tmp"
        mine.write_text("being written", encoding="utf-8")
        dead = vault.temp_dir / f".{_dead_pid()}.Other.md.abcd.tmp"
        dead.write_text("left by a killed writer", encoding="utf-8")
        assert vault.clear_debris() == 1
        assert mine.exists() and not dead.exists()
    finally:
        live.kill()
        live.wait()


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid  # reaped: no process has this pid now (barring reuse within the test)


@pytest.mark.parametrize("action", ["create", "update", "move", "confirm"])
def test_a_kill_between_the_node_file_and_its_audit_record_is_finished_not_a_hand_edit(
        vault: Vault, tmp_path: Path, action: str, capsys: pytest.CaptureFixture[str]):
    project = make_repo(tmp_path / "work" / "proj")
    _run_child(vault, project, action, "audit")
    assert vault.audit_intent_path().exists(), "the kill came before the intent was journalled"
    assert main(["log", "Tokens"]) == 0
    out = capsys.readouterr().out
    assert "outside osk" not in out, out
    last = audit.history(vault, Engine.open(vault, cwd=project).read_node("Tokens").id)[-1]
    assert last.action == action and last.detail.get("recovered") is True
    assert _unaudited(vault) == []
    assert not vault.audit_intent_path().exists()


def test_a_reject_killed_between_removing_the_file_and_its_audit_record_is_finished(
        vault: Vault, tmp_path: Path):
    project = make_repo(tmp_path / "work" / "proj")
    node_id = _run_child(vault, project, "reject", "audit").split()[0]
    assert vault.audit_intent_path().exists(), "the kill came before the intent was journalled"
    Engine.open(vault, cwd=project)  # taking the mutation lock finishes the record
    last = audit.history(vault, node_id)[-1]
    assert (last.action, last.after, last.detail.get("recovered")) == ("reject", None, True)
    assert not vault.audit_intent_path().exists()


def test_a_kill_before_the_node_file_is_replaced_records_nothing(vault: Vault, tmp_path: Path):
    project = make_repo(tmp_path / "work" / "proj")
    _run_child(vault, project, "update", "node-temp")  # intent journalled, file untouched
    assert vault.audit_intent_path().exists()
    eng = Engine.open(vault, cwd=project)
    node = eng.read_node("Tokens")
    assert [e.action for e in audit.history(vault, node.id)] == ["create"]
    assert eng.read_node("Tokens").text == "Tokens expire.\n"
    assert _unaudited(vault) == []


@pytest.mark.parametrize("point", ["audit", "node-temp"])
def test_a_batch_killed_around_a_node_file_leaves_its_journal_finished_or_dropped(
        vault: Vault, tmp_path: Path, point: str):
    """Inside a batch (``osk import``), as outside: a kill after a node file (``audit``) is
    finished as a recovered record, one before it (``node-temp``) leaves the node unwritten and
    nothing recorded, and the write before it in the batch stays whole."""
    project = make_repo(tmp_path / "work" / "proj")
    _run_child(vault, project, "batch-create", point)
    journal = json.loads(vault.audit_intent_path().read_text(encoding="utf-8"))
    assert journal["records"][0]["path"].endswith("Tokens.md")  # the second write's, whole
    eng = Engine.open(vault, cwd=project)  # the next open takes the lock: finished
    assert not vault.audit_intent_path().exists()
    assert eng.read_node("Keys").text.endswith("Keys rotate.\n")
    if point == "audit":
        last = audit.history(vault, eng.read_node("Tokens").id)[-1]
        assert (last.action, last.detail.get("recovered")) == ("create", True)
    else:
        assert "Tokens" not in {node.title for node in eng.catalog.nodes()}
    assert _unaudited(vault) == []


@pytest.mark.parametrize("point", ["journal", "snapshot"])
def test_a_kill_inside_a_device_state_write_leaves_debris_the_next_open_removes(
        vault: Vault, tmp_path: Path, point: str):
    """The audit journal's and the catalog snapshot's temp files are made in the write path's
    temp folder, which every open sweeps (the rest of device state: hourly), so `osk validate`
    finds no debris after the next open, however soon."""
    project = make_repo(tmp_path / "work" / "proj")
    _run_child(vault, project, "create", point)
    eng = Engine.open(vault, cwd=project)  # within the hour of the child's own open
    findings = [f for f in validate.run(vault) if f.rule == "crash-debris"]
    assert findings == []
    assert _unaudited(vault) == []
    if point == "journal":  # killed before the node file: nothing was written
        assert "Tokens" not in {node.title for node in eng.catalog.nodes()}


def _ledger_problems(vault: Vault) -> list[str]:
    """What a killed import may not leave in the ledgers: a line cut short, an audit record
    whose version is not a stored object, a recheck line about a node no file holds."""
    problems = []
    catalog = Catalog(vault)
    catalog.refresh()
    ids = {node.id for node in catalog.nodes()}
    for name in ("audit", "rechecks"):
        path = vault.ledger_path(name)
        data = path.read_bytes() if path.exists() else b""
        if data and not data.endswith(b"\n"):
            problems.append(f"{name}: its last line is cut short")
    for entry in audit.entries(vault):
        if entry.after is not None and not objects.has(vault, entry.after):
            problems.append(f"audit {entry.id}: version {entry.after} is not stored")
    problems += [f"rechecks {record.id}: about {record.subject}, which no file holds"
                 for record in Ledger(vault, "rechecks").read().records
                 if record.subject.removeprefix("citing:") not in ids]
    return problems


def test_osk_import_killed_at_random_moments_leaves_ledgers_whole_and_files_audited(
        vault: Vault, tmp_path: Path):
    """Every node cites the one before it, so each write appends to the audit and the
    rechecks ledger; a kill anywhere in a batch leaves whole lines only, each about a file that
    exists with the version it names, and the next open finishes what a landed file owes."""
    lines = tmp_path / "nodes.jsonl"
    lines.write_text("\n".join(json.dumps({
        "title": f"Linked {i:04d}", "summary": f"Linked node {i}", "body": f"Body {i}.\n" * 8,
        "space": "domain", "cluster": "chain",
        "derived_from": [f"Linked {i - 1:04d}"] if i else []}) for i in range(300)) + "\n",
        encoding="utf-8")
    command = import_command(vault, lines)
    for _ in killed_imports(command, seed=20261204, latest=1.0):
        Engine.open(vault, cwd=tmp_path)  # the next open finishes a journal left
        assert not vault.audit_intent_path().exists()
        assert _ledger_problems(vault) == []
        assert _unaudited(vault) == []
    subprocess.run(command, capture_output=True, timeout=300)  # the rest (the others: taken)
    titles = {node.title for node in Engine.open(vault, cwd=tmp_path).catalog.nodes()}
    assert {f"Linked {i:04d}" for i in range(300)} <= titles
    assert _ledger_problems(vault) == [] and _unaudited(vault) == []
    assert not vault.audit_intent_path().exists()


def _import_lines(path: Path, count: int) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for i in range(count):
            handle.write(json.dumps({
                "title": f"Imported {i:04d}", "summary": f"About imported node {i}",
                "body": f"Body of imported node {i}.\n" * 15, "space": "domain",
                "cluster": "bulk"}) + "\n")


def test_osk_import_killed_at_random_moments_leaves_no_debris_and_no_unaudited_version(
        vault: Vault, tmp_path: Path):
    rng = random.Random(20261202)
    trials = int(os.environ.get("OSK_CRASH_TRIALS", "3"))
    lines = tmp_path / "nodes.jsonl"
    _import_lines(lines, 120)
    command = [sys.executable, "-m", "osk", "--vault", str(vault.root), "import", str(lines)]
    for _ in range(trials):
        child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        assert child.stderr is not None
        child.stderr.readline()  # the first progress line: the import is under way
        time.sleep(rng.uniform(0.0, 1.5))
        child.send_signal(signal.SIGKILL)
        child.communicate(timeout=60)
        assert _debris_outside_state(vault) == []
    subprocess.run(command, capture_output=True, timeout=300)  # the rest (the others: taken)
    catalog = Catalog(vault)
    catalog.refresh()
    titles = {node.title for node in catalog.nodes()}
    assert {f"Imported {i:04d}" for i in range(120)} <= titles
    assert _unaudited(vault) == []
    assert not vault.temp_dir.exists() or not any(vault.temp_dir.iterdir())
    findings = [f for f in validate.run(vault)
                if f.rule in {"crash-debris", "inside-the-vault", "node-contract"}]
    assert findings == []
