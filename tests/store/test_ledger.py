"""Ledgers: structure checks, monotone ids, causal parents, forks after a union merge."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from osk.errors import LedgerError, LedgerFork
from osk.store import ids
from osk.store import ledger as ledger_module
from osk.store.ledger import Ledger, device_id
from osk.store.vault import Vault


def lines_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_append_writes_one_parseable_line_with_parents_set_to_the_heads(vault: Vault):
    ledger = Ledger(vault, "routing")
    first = ledger.append("bind", "app", {"scope": "app"})
    second = ledger.append("bind", "web", {"scope": "web"})
    rows = lines_of(ledger.path)
    assert [row["id"] for row in rows] == [first.id, second.id]
    assert rows[0]["parents"] == [] and rows[1]["parents"] == [first.id]
    assert rows[1]["scope"] == "web" and rows[1]["device"] == device_id(vault)
    assert ledger.read().heads == (second.id,)


def test_ids_grow_even_when_the_ledger_holds_an_id_from_a_clock_in_the_future(vault: Vault):
    ledger = Ledger(vault, "audit")
    future = ids._build(2**47, 0xABC, 12345)  # a device whose clock reads year ~6429
    ledger.path.parent.mkdir(parents=True, exist_ok=True)
    ledger.path.write_text(
        json.dumps({"id": future, "parents": [], "device": "other", "at": "x",
                    "kind": "k", "subject": "s"}) + "\n",
        encoding="utf-8",
    )
    record = ledger.append("k", "s")
    assert record.id > future
    assert ids.is_uuid7(record.id)


@pytest.mark.parametrize(
    ("content", "line", "fragment"),
    [
        ('{"id": "x"}\n', 1, "missing"),
        ("not json\n", 1, "not a JSON object"),
        ("VALID\n{\"half\": \n", 2, "not a JSON object"),
        ("VALID\nDUPLICATE\n", 2, "appears twice"),
        ("ORPHAN\n", 1, "not in the ledger"),
    ],
)
def test_a_damaged_ledger_is_refused_naming_the_line_and_nothing_is_appended(
    vault: Vault, content: str, line: int, fragment: str
):
    ledger = Ledger(vault, "rechecks")
    valid = json.dumps({"id": ids.uuid7(), "parents": [], "device": "d", "at": "t",
                        "kind": "k", "subject": "s"})
    orphan = json.dumps({"id": ids.uuid7(), "parents": [ids.uuid7()], "device": "d", "at": "t",
                         "kind": "k", "subject": "s"})
    text = content.replace("VALID", valid).replace("DUPLICATE", valid).replace("ORPHAN", orphan)
    ledger.path.write_text(text, encoding="utf-8")
    before = ledger.path.read_bytes()
    with pytest.raises(LedgerError) as caught:
        ledger.append("k", "s")
    assert f"line {line}" in str(caught.value) and fragment in str(caught.value)
    assert caught.value.line == line
    assert ledger.path.read_bytes() == before


def _clone_device(vault: Vault, target: Path) -> Vault:
    shutil.copytree(vault.root, target, ignore=shutil.ignore_patterns(".osk"))
    return Vault(target)


def _union(base: bytes, ours: bytes, theirs: bytes) -> bytes:
    """What git's union driver produces for two appends to a common base."""
    assert ours.startswith(base) and theirs.startswith(base)
    return base + ours[len(base):] + theirs[len(base):]


def test_union_merge_yields_a_reported_fork_that_the_next_append_joins(
    vault: Vault, tmp_path: Path
):
    Ledger(vault, "routing").append("bind", "app", {"scope": "app"})
    other = _clone_device(vault, tmp_path / "laptop")
    base = Ledger(vault, "routing").path.read_bytes()
    a = Ledger(vault, "routing").append("bind", "app", {"scope": "app-desktop"})
    b = Ledger(other, "routing").append("bind", "app", {"scope": "app-laptop"})
    merged = _union(base, Ledger(vault, "routing").path.read_bytes(),
                    Ledger(other, "routing").path.read_bytes())
    Ledger(vault, "routing").path.write_bytes(merged)

    ledger = Ledger(vault, "routing")
    view = ledger.read()
    assert set(view.heads) == {a.id, b.id}
    forks = view.forks()
    assert [f.subject for f in forks] == ["app"]
    assert {r.id for r in forks[0].records} == {a.id, b.id}
    with pytest.raises(LedgerFork) as caught:
        view.current("app")
    assert a.id in str(caught.value) and b.id in str(caught.value)

    # An append about another subject joins the branches but decides nothing about "app".
    join = ledger.append("bind", "web", {"scope": "web"})
    assert set(join.parents) == {a.id, b.id}
    view = ledger.read()
    assert view.heads == (join.id,)
    assert [f.subject for f in view.forks()] == ["app"]
    # A new record about "app" supersedes both branches: the fork is closed explicitly.
    decided = ledger.append("bind", "app", {"scope": "app-desktop"})
    view = ledger.read()
    assert view.forks() == []
    assert view.current("app").id == decided.id


def test_concurrent_records_that_agree_are_not_a_fork(vault: Vault, tmp_path: Path):
    other = _clone_device(vault, tmp_path / "laptop")
    Ledger(vault, "candidates").append("open", "k1", {"type": "duplication"})
    Ledger(other, "candidates").append("open", "k1", {"type": "duplication"})
    merged = _union(b"", Ledger(vault, "candidates").path.read_bytes(),
                    Ledger(other, "candidates").path.read_bytes())
    Ledger(vault, "candidates").path.write_bytes(merged)
    view = Ledger(vault, "candidates").read()
    assert len(view.heads) == 2
    assert view.forks() == []
    assert view.current("k1").data == {"type": "duplication"}


def test_a_real_git_union_merge_keeps_every_line_of_both_devices(vault: Vault, tmp_path: Path):
    def git(cwd: Path, *args: str) -> str:
        return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                              text=True).stdout

    Ledger(vault, "audit").append("create", "n1")
    git(vault.root, "add", "-A")
    git(vault.root, "commit", "-qm", "base")
    laptop = tmp_path / "laptop"
    git(tmp_path, "clone", "-q", str(vault.root), str(laptop))
    for i in range(3):
        Ledger(vault, "audit").append("update", f"d{i}")
        Ledger(Vault(laptop), "audit").append("update", f"l{i}")
    git(vault.root, "commit", "-qam", "desktop")
    git(laptop, "commit", "-qam", "laptop")
    git(vault.root, "pull", "-q", "--no-rebase", "--no-edit", str(laptop), "main")
    view = Ledger(vault, "audit").read()
    assert sorted(r.subject for r in view.records) == sorted(
        ["n1", "d0", "d1", "d2", "l0", "l1", "l2"]
    )
    assert len(view.heads) == 2
    joined = Ledger(vault, "audit").append("update", "after")
    assert len(joined.parents) == 2


WRITER = """
import sys
from pathlib import Path
from osk.store.ledger import Ledger
from osk.store.vault import Vault
ledger = Ledger(Vault(Path(sys.argv[1])), "audit")
for i in range(int(sys.argv[3])):
    ledger.append("update", f"{sys.argv[2]}-{i}", {"n": i})
"""


def test_concurrent_appends_from_several_processes_lose_nothing(vault: Vault):
    writers, per_writer = 4, 25
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(vault.root), f"w{w}",
                          str(per_writer)])
        for w in range(writers)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0] * writers
    view = Ledger(vault, "audit").read()  # parses every line or raises
    subjects = {r.subject for r in view.records}
    assert subjects == {f"w{w}-{i}" for w in range(writers) for i in range(per_writer)}
    assert len(view.heads) == 1
    ordered = [r.id for r in view.records]
    assert ordered == sorted(ordered)


def test_a_reader_sees_another_process_append_and_a_hand_edit_before_the_end(vault: Vault):
    ledger = Ledger(vault, "audit")
    first = ledger.append("create", "a")
    assert ledger.read().heads == (first.id,)
    subprocess.run([sys.executable, "-c", WRITER, str(vault.root), "other", "2"], check=True)
    view = ledger.read()
    assert [r.subject for r in view.records] == ["a", "other-0", "other-1"]
    assert view.heads == (view.records[-1].id,)
    assert view.is_ancestor(view.records[0], view.records[2])
    # A hand edit earlier in the file, followed by growth, must not slip past the cache.
    text = ledger.path.read_text(encoding="utf-8")
    damaged = text.replace('"kind":"create"', '"kind":"create"', 1).replace('{"id"', '{"di"', 1)
    ledger.path.write_text(damaged + text.splitlines()[-1] + "\n", encoding="utf-8")
    # audit keeps history only: the damaged line is left out and named, not a refusal
    assert ledger.read().damaged[0].startswith("_ledger/audit.jsonl: line 1 is damaged")


def test_a_torn_last_line_is_invisible_to_readers_and_set_aside_by_the_next_append(
    vault: Vault,
):
    ledger = Ledger(vault, "audit")
    kept = ledger.append("create", "a")
    torn = b'{"id":"0193-half-a-rec'
    with open(ledger.path, "ab") as handle:  # what a power cut mid-write leaves behind
        handle.write(torn)
    assert [r.id for r in Ledger(vault, "audit").read().records] == [kept.id]
    after = Ledger(vault, "audit").append("update", "a")
    assert after.parents == (kept.id,)
    assert ledger.path.read_bytes().endswith(b"\n") and torn not in ledger.path.read_bytes()
    aside = list(vault.state("ledger-torn").iterdir())
    assert [p.read_bytes() for p in aside] == [torn]
    assert [r.id for r in Ledger(vault, "audit").read().records] == [kept.id, after.id]


def test_a_whole_record_missing_only_its_newline_is_kept(vault: Vault):
    ledger = Ledger(vault, "audit")
    first = ledger.append("create", "a")
    second = ledger.append("update", "a")
    ledger.path.write_bytes(ledger.path.read_bytes()[:-1])  # the newline never reached disk
    assert [r.id for r in Ledger(vault, "audit").read().records] == [first.id]
    third = Ledger(vault, "audit").append("update", "b")
    assert [r.id for r in Ledger(vault, "audit").read().records] == [first.id, second.id,
                                                                     third.id]
    assert not vault.state("ledger-torn").exists()


KILLED_WRITER = """
import sys
from pathlib import Path
from osk.store.ledger import Ledger
from osk.store.vault import Vault
ledger = Ledger(Vault(Path(sys.argv[1])), "audit")
i = 0
while True:
    record = ledger.append("update", f"{sys.argv[2]}-{i}", {"pad": "x" * (i % 700)})
    print(record.id, flush=True)  # printed only once the append returned: acknowledged
    i += 1
"""


@pytest.mark.crash
def test_appenders_killed_at_random_moments_lose_no_acknowledged_record(vault: Vault):
    import os
    import random
    import signal
    import time

    rng = random.Random(20261129)
    trials = int(os.environ.get("OSK_CRASH_TRIALS", "4"))
    acknowledged: set[str] = set()
    for _ in range(trials):
        procs = [subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(vault.root),
                                   f"w{n}"], stdout=subprocess.PIPE, text=True)
                 for n in range(3)]
        assert procs[0].stdout is not None
        first = procs[0].stdout.readline().strip()  # an acknowledged append: the race is on
        assert first, "a writer died before its first append"
        acknowledged.add(first)
        time.sleep(rng.random() * 0.7)  # the kill point, not a wait for a condition
        for proc in procs:
            proc.send_signal(signal.SIGKILL)
        for proc in procs:
            out, _ = proc.communicate(timeout=30)
            acknowledged.update(line for line in out.split() if line)
    final = Ledger(vault, "audit").append("check", "end")
    view = Ledger(vault, "audit").read()
    assert acknowledged, "the writers never got an append acknowledged"
    assert acknowledged <= set(view.by_id)
    assert view.heads == (final.id,)
    lines = Ledger(vault, "audit").path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(view.records)
    assert all(isinstance(json.loads(line), dict) for line in lines)


def test_an_older_view_keeps_the_ledger_as_it_was_and_can_still_grow_its_own_way(vault: Vault):
    # Views of one ledger share what was parsed (an append costs the new record, not a copy),
    # so each must still answer only for the records it was made with.
    ledger = Ledger(vault, "audit")
    first = ledger.append("create", "a")
    old = ledger.read()
    second = ledger.append("update", "a")
    new = ledger.read()
    assert [r.id for r in old.records] == [first.id] and len(old.by_id) == 1
    assert second.id not in old.by_id and old.for_subject("a") == [first]
    assert old.heads == (first.id,) and old.current("a") == first
    assert [r.id for r in new.records] == [first.id, second.id]
    assert new.current("a") == second and new.is_ancestor(first, second)
    assert list(old.subjects()) == ["a"] and old.records[-1] == first
    with pytest.raises(IndexError):
        old.records[1]
    # The older view grown another way (as a reader that missed the second record would):
    third = dataclasses.replace(second, id=ids.uuid7(after=second.id), kind="delete")
    branch = old.extended([third])
    assert branch is not None and [r.id for r in branch.records] == [first.id, third.id]
    assert [r.id for r in new.records] == [first.id, second.id]  # untouched by the branch
    assert [r.id for r in ledger.read().records] == [first.id, second.id]
    assert old.extended([second]) is not None and old.extended([first]) is None  # a repeat


APPEND_ELSEWHERE = """
import sys
from osk.store.ledger import Ledger
from osk.store.vault import Vault
from pathlib import Path
Ledger(Vault(Path(sys.argv[1])), "rechecks").append("pairs", "citing:x", {"n": 9})
"""


def test_the_tip_is_what_the_whole_view_says_and_follows_appends_from_elsewhere(
        vault: Vault, tmp_path: Path):
    """``Ledger.tip`` (all an appender keeps) agrees with the view read whole, through
    appends made here, appends another process made (read as a tail), a union merge (read
    whole again) and the append that joins it."""
    ledger = Ledger(vault, "rechecks")
    assert ledger.tip().max_id is None and ledger.tip().count == 0

    def agrees() -> None:
        tip, view = ledger.tip(), ledger.read()
        assert (tip.max_id, tip.heads, tip.count) == (view.max_id, view.heads, len(view.records))

    for number in range(3):
        ledger.append("pairs", f"citing:{number}", {"n": number})
    agrees()
    before = ledger.tip()
    other = subprocess.run([sys.executable, "-c", APPEND_ELSEWHERE, str(vault.root)],
                           capture_output=True, text=True)
    assert other.returncode == 0, other.stderr
    grown = ledger.after(before)
    assert grown is not None and [r.subject for r in grown[0]] == ["citing:x"]
    assert grown[1].heads == (grown[0][0].id,) and grown[1].count == 4
    agrees()

    clone = _clone_device(vault, tmp_path / "laptop")
    base = ledger.path.read_bytes()
    ours = ledger.append("pairs", "citing:0", {"n": "desktop"})
    theirs = Ledger(clone, "rechecks").append("pairs", "citing:0", {"n": "laptop"})
    tip = ledger.tip()
    ledger.path.write_bytes(_union(base, ledger.path.read_bytes(),
                                   Ledger(clone, "rechecks").path.read_bytes()))
    assert ledger.after(tip) is None  # a rewritten file is no tail: read it whole
    agrees()
    assert ledger.tip().heads == tuple(sorted((ours.id, theirs.id)))
    join = ledger.append("pairs", "citing:1", {"n": "join"})
    assert join.parents == tuple(sorted((ours.id, theirs.id)))
    agrees()


def test_a_long_ledger_keeps_no_view_between_reads_and_appends_keep_no_record(
        vault: Vault, monkeypatch: pytest.MonkeyPatch):
    """A ledger longer than ``KEEP_VIEW_BYTES`` (one that grows with the vault: audit,
    rechecks) is read on demand and let go; an append reads only its tip."""
    monkeypatch.setattr(ledger_module, "KEEP_VIEW_BYTES", 0)
    ledger = Ledger(vault, "audit")
    first = ledger.append("create", "n1", {"path": "a"})
    assert ledger.read().current("n1").id == first.id
    assert ledger.path not in ledger_module._CACHE
    def no_parse(*_: object) -> None:
        raise AssertionError("an append parsed the ledger whole")
    monkeypatch.setattr(ledger_module, "parse_lines", no_parse)
    second = ledger.append("update", "n1", {"path": "a"})
    assert second.parents == (first.id,)
    monkeypatch.undo()
    view = ledger.read()
    assert [r.id for r in view.records] == [first.id, second.id] and view.heads == (second.id,)
