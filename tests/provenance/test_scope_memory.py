"""Scope memory: a capped shared note; refused over the cap, evictions recorded before change."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from osk.errors import AnchorError, LimitError, ScopeError, StaleHash
from osk.provenance.scope_memory import CAP, Edit, ScopeMemory, pending_evictions
from osk.store.fsutil import sha256_text
from osk.store.vault import Vault

PRIVATE_KEY = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    + "\n".join("MIIEowIBAAKCAQEA7v0c3xQ1r2s3t4u5v6w7x8y9z0A1B2C3D4E5F6G7H8I9J0K1"
                for _ in range(8))
    + "\n-----END RSA PRIVATE KEY-----"
)


def evictions_lines(vault: Vault) -> list[dict]:
    path = vault.ledger_path("evictions")
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def lines(count: int, width: int = 60) -> str:
    return "".join(f"{i:03d} " + "x" * (width - 5) + "\n" for i in range(count))


def test_a_missing_note_reads_as_empty_with_the_hash_of_empty(vault: Vault):
    assert ScopeMemory(vault, "app").read() == ("", sha256_text(""))


def test_a_full_replacement_with_the_read_hash_writes_the_note(vault: Vault):
    memory = ScopeMemory(vault, "app")
    _, empty = memory.read()
    result = memory.write(text="- build with make\n", expect_hash=empty)
    assert (vault.memory_dir / "app.md").read_text(encoding="utf-8") == "- build with make\n"
    assert memory.read() == ("- build with make\n", result.hash)
    assert result.changed and result.chars == len("- build with make\n") and result.cap == CAP


def test_a_full_replacement_without_or_with_a_stale_hash_is_refused(vault: Vault):
    memory = ScopeMemory(vault, "app")
    memory.write(text="v1\n", expect_hash=memory.read()[1])
    with pytest.raises(StaleHash, match="needs expect_hash"):
        memory.write(text="v2\n")
    with pytest.raises(StaleHash, match="changed since you read it"):
        memory.write(text="v2\n", expect_hash=sha256_text("v0\n"))
    assert memory.read()[0] == "v1\n"


def test_an_edit_replaces_a_unique_anchor(vault: Vault):
    memory = ScopeMemory(vault, "app")
    memory.write(text="- db: postgres 15\n- cache: redis\n", expect_hash=memory.read()[1])
    memory.write(edits=[Edit("postgres 15", "postgres 16")])
    assert memory.read()[0] == "- db: postgres 16\n- cache: redis\n"


@pytest.mark.parametrize(("anchor", "fragment"), [("- ", "occurs 2 times"),
                                                  ("mysql", "does not occur"),
                                                  ("", "empty")])
def test_a_missing_ambiguous_or_empty_anchor_is_refused_and_nothing_changes(vault: Vault,
                                                                          anchor, fragment):
    memory = ScopeMemory(vault, "app")
    memory.write(text="- a\n- b\n", expect_hash=memory.read()[1])
    with pytest.raises(AnchorError, match=fragment):
        memory.write(edits=[Edit(anchor, "z")])
    assert memory.read()[0] == "- a\n- b\n"


def test_text_and_edits_together_or_neither_are_refused(vault: Vault):
    memory = ScopeMemory(vault, "app")
    with pytest.raises(AnchorError):
        memory.write()
    with pytest.raises(AnchorError):
        memory.write(text="x", expect_hash=memory.read()[1], edits=[Edit("a", "b")])


def test_a_write_over_the_cap_is_refused_with_size_and_cap_and_nothing_is_written(vault: Vault):
    memory = ScopeMemory(vault, "app")
    memory.write(text="keep\n", expect_hash=memory.read()[1])
    too_long = "y" * (CAP + 1)
    with pytest.raises(LimitError) as caught:
        memory.write(text=too_long, expect_hash=memory.read()[1])
    message = str(caught.value)
    assert "1,501" in message and "1,500" in message and "node" in message
    assert caught.value.size == CAP + 1 and caught.value.cap == CAP
    assert memory.read()[0] == "keep\n"
    assert evictions_lines(vault) == []


def test_exactly_the_cap_is_accepted(vault: Vault):
    memory = ScopeMemory(vault, "app")
    memory.write(text="z" * CAP, expect_hash=memory.read()[1])
    assert len(memory.read()[0]) == CAP


def test_the_cap_is_measured_after_the_secret_filter(vault: Vault):
    from osk.capture.secrets import mask_secrets

    filler = "n" * (CAP - len(mask_secrets(PRIVATE_KEY).text) - 10) + "\n"
    text = filler + PRIVATE_KEY + "\n"
    assert len(text) > CAP
    memory = ScopeMemory(vault, "app")
    result = memory.write(text=text, expect_hash=memory.read()[1])
    stored = memory.read()[0]
    assert "PRIVATE KEY-----\nMIIE" not in stored and len(stored) <= CAP
    assert result.redactions and stored == result.text


def test_the_first_shrinking_write_after_a_refusal_records_the_removed_lines(vault: Vault):
    memory = ScopeMemory(vault, "app")
    original = lines(20)
    memory.write(text=original, expect_hash=memory.read()[1])
    with pytest.raises(LimitError):
        memory.write(edits=[Edit("000 ", "000 " + "w" * CAP)])
    kept = "".join(original.splitlines(keepends=True)[:5]) + "- details moved to [[Node]]\n"
    result = memory.write(text=kept, expect_hash=memory.read()[1])
    rows = evictions_lines(vault)
    assert len(rows) == 1 and rows[0]["kind"] == "evict" and rows[0]["scope"] == "app"
    assert rows[0]["lines"] == original.splitlines()[5:]
    assert rows[0]["before_hash"] == sha256_text(original)
    assert result.eviction is not None and result.eviction.id == rows[0]["subject"]
    assert [e.id for e in memory.pending_evictions()] == [rows[0]["subject"]]
    # Only the first shrinking write after the refusal records an eviction.
    memory.write(text="short\n", expect_hash=memory.read()[1])
    assert len(evictions_lines(vault)) == 1


def test_shrinking_without_a_refusal_records_nothing(vault: Vault):
    memory = ScopeMemory(vault, "app")
    memory.write(text=lines(10), expect_hash=memory.read()[1])
    memory.write(text="short\n", expect_hash=memory.read()[1])
    assert evictions_lines(vault) == []


def test_a_growing_write_after_a_refusal_keeps_the_refusal_for_the_next_shrink(vault: Vault):
    memory = ScopeMemory(vault, "app")
    memory.write(text=lines(5), expect_hash=memory.read()[1])
    with pytest.raises(LimitError):
        memory.write(text="q" * (CAP + 5), expect_hash=memory.read()[1])
    memory.write(text=lines(6), expect_hash=memory.read()[1])
    assert evictions_lines(vault) == []
    memory.write(text=lines(2), expect_hash=memory.read()[1])
    assert len(evictions_lines(vault)[0]["lines"]) == 4


def test_the_eviction_is_in_the_ledger_before_the_file_changes(vault: Vault, monkeypatch):
    memory = ScopeMemory(vault, "app")
    memory.write(text=lines(10), expect_hash=memory.read()[1])
    with pytest.raises(LimitError):
        memory.write(text="q" * (CAP + 5), expect_hash=memory.read()[1])

    def crash(self, path, data):
        raise OSError("disk gone")

    monkeypatch.setattr(Vault, "write_file", crash)
    with pytest.raises(OSError):
        memory.write(text=lines(3), expect_hash=memory.read()[1])
    assert memory.read()[0] == lines(10)
    assert len(evictions_lines(vault)) == 1


def test_settling_an_eviction_removes_it_from_pending(vault: Vault):
    memory = ScopeMemory(vault, "app")
    memory.write(text=lines(10), expect_hash=memory.read()[1])
    with pytest.raises(LimitError):
        memory.write(text="q" * (CAP + 5), expect_hash=memory.read()[1])
    memory.write(text=lines(3), expect_hash=memory.read()[1])
    (eviction,) = memory.pending_evictions()
    with pytest.raises(ScopeError, match="must name the node"):
        memory.settle(eviction.id, "distilled")
    memory.settle(eviction.id, "distilled", node="Build notes")
    assert memory.pending_evictions() == [] and pending_evictions(vault) == []
    with pytest.raises(ScopeError, match="no pending eviction"):
        memory.settle(eviction.id, "dismissed")


def test_pending_evictions_are_per_scope(vault: Vault):
    for scope in ("app", "web"):
        memory = ScopeMemory(vault, scope)
        memory.write(text=lines(4), expect_hash=memory.read()[1])
        with pytest.raises(LimitError):
            memory.write(text="q" * (CAP + 5), expect_hash=memory.read()[1])
        memory.write(text=lines(1), expect_hash=memory.read()[1])
    assert {e.scope for e in pending_evictions(vault)} == {"app", "web"}
    assert {e.scope for e in ScopeMemory(vault, "web").pending_evictions()} == {"web"}


@pytest.mark.parametrize("scope", ["../etc", "a/b", "", ".hidden", "CON"])
def test_a_scope_name_that_is_not_a_portable_file_name_is_refused(vault: Vault, scope: str):
    with pytest.raises(ScopeError):
        ScopeMemory(vault, scope)


def test_the_module_imports_only_light_modules():
    code = (
        "import sys, osk.provenance.scope_memory\n"
        "heavy = {'pydantic', 'yaml', 'mcp', 'git', 'rank_bm25', 'numpy'} & set(sys.modules)\n"
        "print(sorted(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, encoding="utf-8")
    assert out.stdout.strip() == "[]"
