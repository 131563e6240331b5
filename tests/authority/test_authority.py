"""The person's verbs work only at a terminal: refused through a pipe, allowed at a real pty."""

from __future__ import annotations

import sys

import pytest
from authority_support import agent_write, edit_body, node_text, osk, read

from osk.authority import approvals, audit, protection, tombstones
from osk.errors import AuthorityError
from osk.store.fsutil import sha256_text
from osk.store.vault import Vault

NODE = "Person/prefs/Editor.md"


def snapshot(vault: Vault) -> dict[str, bytes]:
    """Every file osk could write for these verbs (nodes, ledgers, objects)."""
    found = {}
    for top in ("Person", "Domain", "Scope", "_ledger", "_objects"):
        for path in sorted((vault.root / top).rglob("*")):
            if path.is_file():
                found[vault.rel(path)] = path.read_bytes()
    return found


@pytest.fixture
def populated(vault: Vault) -> Vault:
    agent_write(vault, NODE, node_text(body="The person edits in Helix.\n"))
    return vault


@pytest.mark.parametrize("args", [
    ["protect", "Person/prefs"],
    ["unprotect", "Person/prefs"],
    ["approve", "Person/prefs"],
    ["revert", "Person/prefs"],
    ["approve", "Person/prefs", "--yes"],  # --yes decides nothing, and never skips the terminal
    ["confirm", "Editor"],
    ["reject", "Editor", "--reason", "wrong"],
    ["lift", "abcdef123456"],
    ["exclude", "_raw/app/c1#Round 1"],
    ["include", "_raw/app/c1"],
])
def test_each_person_verb_is_refused_when_stdin_is_a_pipe(populated: Vault, args: list[str]):
    before = snapshot(populated)
    result = osk(populated, *args)
    assert result.code == 5, result.err
    assert result.err.startswith(f"Error: `osk {args[0]}` is reserved for a person at a terminal")
    assert "it is not a defence against a process that fakes a terminal" in result.err
    assert snapshot(populated) == before  # refused: nothing written


def test_there_is_no_flag_that_skips_the_terminal_check(populated: Vault):
    for flag in ("--yes", "--force", "--no-tty"):
        result = osk(populated, "protect", "Person/prefs", flag)
        assert result.code != 0
    assert protection.regions(populated) == ()


def test_the_engine_verbs_check_the_terminal_themselves(populated: Vault,
                                                        monkeypatch: pytest.MonkeyPatch):
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # what an MCP server's stdin looks like
    with pytest.raises(AuthorityError):
        approvals.protect(populated, "Person/prefs")
    with pytest.raises(AuthorityError):
        tombstones.reject(populated, "Editor", reason="wrong")
    monkeypatch.setattr(sys, "stdin", None)  # a detached process
    with pytest.raises(AuthorityError):
        approvals.approve(populated, "Person/prefs")
    assert protection.regions(populated) == ()


def test_the_whole_review_lane_runs_at_a_real_terminal(populated: Vault):
    vault = populated
    approved = read(vault, NODE)
    result = osk(vault, "protect", "Person/prefs", tty=True)
    assert result.code == 0, result.err
    assert "Protected Person/prefs: 1 node file(s)" in result.out

    # ``updated`` kept: a minute turning since the fixture wrote would add a changed line
    edited = edit_body(vault, NODE, "The person edits in Vim.\n", keep_updated=True)
    agent_write(vault, NODE, edited)
    review = osk(vault, "review")
    assert "+The person edits in Vim." in review.out and "1 pending change(s)" in review.out

    code = protection.changes_code(approvals.to_revert(vault, "Person/prefs"))
    result = osk(vault, "revert", "Person/prefs", tty=True, answer=f"{code}\n")
    assert result.code == 0, result.err
    assert result.out.startswith("Pending under Person/prefs:\n"
                                 "  update  Person/prefs/Editor.md  (+1 -1 lines)\n"
                                 f"Type {code} to revert these 1 change(s) (anything else "
                                 f"changes nothing): ")
    assert "Reverted update: Person/prefs/Editor.md" in result.out
    assert read(vault, NODE) == approved

    agent_write(vault, NODE, edited)
    result = osk(vault, "approve", NODE, tty=True, answer="n\n")
    assert (result.code, result.out.splitlines()[-1][-17:]) == (0, "Nothing approved.")
    assert protection.served(vault, NODE, edited).pending  # declined: nothing decided
    code = protection.changes_code(approvals.to_approve(vault, NODE))
    result = osk(vault, "approve", NODE, tty=True, answer=f"{code.lower()}\n")
    assert result.code == 0, result.err
    assert "Approved update: Person/prefs/Editor.md" in result.out
    assert protection.served(vault, NODE, edited) == protection.Served(edited, False)

    result = osk(vault, "unprotect", "Person/prefs", tty=True)
    assert result.code == 0, result.err
    assert protection.regions(vault) == ()


def test_neither_yes_nor_the_yes_flag_approves_at_a_terminal(populated: Vault):
    """`yes | script -qec "osk approve PATH --yes"` approved an agent's own change: a faked
    terminal passes the gate, so deciding takes a code made from the diff, typed back."""
    vault = populated
    assert osk(vault, "protect", "Person/prefs", tty=True).code == 0
    edited = edit_body(vault, NODE, "The person edits in Vim.\n")
    agent_write(vault, NODE, edited)
    flagged = osk(vault, "approve", NODE, "--yes", tty=True, answer="y\n" * 5)
    assert flagged.code == 5 and "type the code it shows; nothing was approved" in flagged.err
    piped = osk(vault, "approve", NODE, tty=True, answer="y\n" * 5)
    assert piped.code == 0 and piped.out.endswith("Nothing approved.\n")
    assert protection.served(vault, NODE, edited).pending  # neither decided anything
    shown = approvals.to_approve(vault, NODE)
    agent_write(vault, NODE, edit_body(vault, NODE, "The person edits in Emacs.\n"))
    stale = osk(vault, "approve", NODE, tty=True, answer=f"{protection.changes_code(shown)}\n")
    assert stale.out.endswith("Nothing approved.\n")  # the diff changed, and so did its code
    assert protection.served(vault, NODE, read(vault, NODE)).pending


def test_confirm_reject_and_lift_run_at_a_real_terminal(populated: Vault):
    vault = populated
    result = osk(vault, "confirm", "Editor", tty=True)
    assert result.code == 0, result.err
    assert "trust: confirmed" in read(vault, NODE)

    result = osk(vault, "reject", "Editor", "--reason", "I switched editors", tty=True)
    assert result.code == 0, result.err
    assert not vault.abs(NODE).exists()
    listing = osk(vault, "tombstones")
    assert "Editor" in listing.out and "I switched editors" in listing.out
    key = tombstones.active(vault)[0].key

    result = osk(vault, "lift", key[:12], tty=True)
    assert result.code == 0, result.err
    assert tombstones.active(vault) == []
    assert [e.action for e in audit.entries(vault)] == ["create", "confirm", "reject", "lift"]


def test_log_and_show_print_a_nodes_history_and_any_recorded_version(populated: Vault):
    vault = populated
    first = read(vault, NODE)
    second = edit_body(vault, NODE, "The person edits in Vim.\n")
    agent_write(vault, NODE, second)
    log = osk(vault, "log", "Editor")
    assert log.code == 0, log.err
    lines = log.out.splitlines()
    assert [line.split()[1] for line in lines] == ["create", "update"]
    assert sha256_text(second)[:12] in lines[1]

    shown = osk(vault, "show", f"Editor@{sha256_text(first)[:10]}")
    assert shown.code == 0, shown.err
    assert shown.out == first

    vault.abs(NODE).write_text(second + "hand edit\n", encoding="utf-8")
    assert "changed outside osk" in osk(vault, "log", "Editor").out


def test_show_refuses_a_hash_that_is_not_in_the_nodes_history(populated: Vault):
    result = osk(populated, "show", "Editor@" + "0" * 12)
    assert result.code == 3
    assert "no recorded version(s) of 'Editor'" in result.err


def test_log_finds_a_rejected_node_by_its_title(populated: Vault):
    result = osk(populated, "reject", "Editor", "--reason", "wrong", tty=True)
    assert result.code == 0, result.err
    log = osk(populated, "log", "Editor")
    assert [line.split()[1] for line in log.out.splitlines()[:2]] == ["create", "reject"]
