"""`osk redact`: the person removes a text from a raw record, end to end.

The real CLI in a real pseudo-terminal (and refused from a pipe), a record cited by a node, the
redactions ledger, the capture that follows, and `osk sync` carrying the redacted record to a
second device through a bare remote on disk.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from authority_support import osk
from sync_support import git, make_devices
from writekit import make_repo

from osk.calls.request import NewNode, NodeEdit
from osk.capture import raw
from osk.capture.secrets import mask_secrets
from osk.engine.core import Engine
from osk.store.vault import Vault
from osk.sync.cycle import sync_once
from osk.verbs import redaction, validate

# Not a pattern the secret filter knows: what a person pastes that no detector can catch.
SPAN = "tulip-7-orbit-lamp"


def conversation(vault: Vault, repo: Path) -> tuple[Engine, list[raw.RoundRef]]:
    eng = Engine.open(vault, cwd=repo)
    refs = [eng.append_raw("talk", user=f"the NAS login is {SPAN}, can you mount it?",
                           assistant="Mounted with the login you gave."),
            eng.append_raw("talk", user="and the backup?",
                           assistant=f"Backed up using {SPAN} as well."),
            eng.append_raw("talk", user="thanks", assistant="You are welcome.")]
    eng.create_node(NewNode("nas", "The NAS", "The NAS hub.\n", space="Scope", cluster="nas",
                            drafter="test-model"))
    eng.create_node(NewNode("Mounting the NAS", "How the NAS is mounted", "Mounted over SMB.\n",
                            space="Scope", cluster="nas", drafter="test-model",
                            derived_from=(refs[0].coordinate, refs[2].coordinate)))
    return eng, refs


def holding(vault: Vault) -> list[Path]:
    """The objects in ``_objects/`` whose bytes still hold the span."""
    return [p for p in (vault.root / "_objects").rglob("*")
            if p.is_file() and SPAN.encode() in p.read_bytes()]


def run_redact(vault: Vault, target: str, code: str | None = None):
    if code is None:
        code = redaction.code_of(redaction.preview(vault, redaction.parse(target), SPAN))
    return osk(vault, "redact", target, tty=True, answer=f"{SPAN}\n{code}\n")


def test_redact_rewrites_the_rounds_records_it_and_syncs_to_a_second_device(tmp_path: Path):
    assert not mask_secrets(f"the NAS login is {SPAN}").changed  # the filter let it through
    remote, (first, second) = make_devices(tmp_path, 2)
    repo = make_repo(tmp_path / "work" / "proj")
    eng, refs = conversation(first, repo)
    record = first.abs(refs[0].path)
    sync_once(first)
    sync_once(second)
    assert SPAN in second.abs(refs[0].path).read_text(encoding="utf-8")

    run = run_redact(first, "_raw/proj/talk")
    assert run.code == 0, run.err
    assert "2 occurrence(s) of a 18-character text in round(s) 1, 2" in run.out
    assert "1 citation(s) of it will become recheck candidates" in run.out
    assert "git filter-repo --replace-text" in run.out and "rotate the secret" in run.out
    text = record.read_text(encoding="utf-8")
    assert SPAN not in text and text.count("[REDACTED:by-person]") == 2
    assert "redacted=by-person:1" in text

    # The record is whole: every round matches its new hash; untouched rounds kept theirs.
    rounds = raw.read_record(first, "proj", "talk").rounds
    assert all(r.intact for r in rounds)
    assert rounds[2].hash == refs[2].hash and rounds[0].hash != refs[0].hash

    # The ledger says who, what and when, never the text.
    ledger = (first.root / "_ledger" / "redactions.jsonl").read_text(encoding="utf-8")
    assert SPAN not in ledger
    (entry,) = [json.loads(line) for line in ledger.splitlines()]
    assert entry["kind"] == "redact" and entry["subject"] == "raw:_raw/proj/talk.md"
    assert entry["length"] == len(SPAN) and entry["by"]
    assert [(r["n"], r["before"], r["spans"]) for r in entry["rounds"]] == [
        (1, refs[0].hash, 1), (2, refs[1].hash, 1)]
    assert [a["target"] for a in entry["affected"]] == ["raw:_raw/proj/talk#Round 1"]

    # The citation of round 1 is a recheck candidate; the one of round 3 is not.
    reopened = Engine.open(first, cwd=repo)
    (cand,) = reopened.recheck().candidates
    assert (cand.target, cand.reason) == ("[[_raw/proj/talk#Round 1]]", "target-redacted")

    # Capture carries on: the device state was rebuilt from the new bytes.
    after = reopened.append_raw("talk", user="one more", assistant="Sure.")
    assert after.number == 4
    assert [f for f in validate.run(first) if "raw" in f.rule] == []

    sync_once(first)
    sync_once(second)
    synced = second.abs(refs[0].path).read_text(encoding="utf-8")
    assert SPAN not in synced and "## Round 4" in synced
    assert all(r.intact for r in raw.read_record(second, "proj", "talk").rounds)
    assert (second.root / "_ledger" / "redactions.jsonl").read_text(encoding="utf-8") == ledger
    # The old bytes are still in history: what the printed instructions are for.
    assert SPAN in git(second.root, "log", "-p", "--", "_raw/proj/talk.md")
    assert remote.exists()


def test_one_round_only_and_a_wrong_code_changes_nothing(vault: Vault, tmp_path: Path):
    _, refs = conversation(vault, make_repo(tmp_path / "work" / "proj"))
    record = vault.abs(refs[0].path)
    before = record.read_bytes()
    run = run_redact(vault, "_raw/proj/talk#Round 2", code="NOPE")
    assert run.code == 0 and "Nothing redacted." in run.out
    assert record.read_bytes() == before and not (vault.root / "_ledger/redactions.jsonl").exists()
    run = run_redact(vault, "_raw/proj/talk#Round 2")
    assert run.code == 0, run.err
    text = record.read_text(encoding="utf-8")
    assert text.count(SPAN) == 1 and text.count("[REDACTED:by-person]") == 1


def test_redact_is_refused_from_a_pipe_and_for_text_that_is_not_there(vault: Vault,
                                                                      tmp_path: Path):
    _, refs = conversation(vault, make_repo(tmp_path / "work" / "proj"))
    before = vault.abs(refs[0].path).read_bytes()
    piped = osk(vault, "redact", "_raw/proj/talk")
    assert piped.code == 5 and "reserved for a person at a terminal" in piped.err
    absent = osk(vault, "redact", "_raw/proj/talk", tty=True, answer="not-in-the-record\nX\n")
    assert absent.code == 1 and "does not occur in _raw/proj/talk.md" in absent.err
    short = osk(vault, "redact", "_raw/proj/talk", tty=True, answer="NAS\nX\n")
    assert short.code == 1 and "at least 4 characters" in short.err
    missing = osk(vault, "redact", "_raw/proj/other#Round 1", tty=True, answer=f"{SPAN}\nX\n")
    assert missing.code == 1 and "no raw record _raw/proj/other.md" in missing.err
    assert vault.abs(refs[0].path).read_bytes() == before
    assert SPAN not in piped.out + absent.out + short.out + missing.out  # osk never prints it


def test_redacting_a_node_rewrites_it_as_the_person_and_purges_earlier_versions(
        tmp_path: Path):
    _, (vault, second) = make_devices(tmp_path, 2)
    repo = make_repo(tmp_path / "work" / "proj")
    eng = Engine.open(vault, cwd=repo)
    source = eng.append_raw("talk", user="how do we reach the NAS?", assistant="Over SMB.")
    eng.create_node(NewNode("nas", "The NAS", "The NAS hub.\n", space="Scope", cluster="nas",
                            drafter="test-model"))
    created = eng.create_node(NewNode("NAS access", f"log in with {SPAN}",
                                      f"Mount it over SMB.\n\nLogin: {SPAN}\n", space="Scope",
                                      cluster="nas", drafter="test-model",
                                      derived_from=(source.coordinate,)))
    edited = eng.update_node("NAS access", NodeEdit(old_text="Mount it", new_text="Mount the NAS"))
    eng.create_node(NewNode("Backups", "Where backups go", "To the NAS.\n", space="Scope",
                            cluster="nas", drafter="test-model", derived_from=("NAS access",)))
    assert len(holding(vault)) == 2  # the created version and the edited (current) one
    sync_once(vault)
    sync_once(second)
    assert len(holding(second)) == 2

    run = run_redact(vault, "NAS access")
    assert run.code == 0, run.err
    assert "2 occurrence(s) of a 18-character text in its body or summary" in run.out
    assert "2 recorded version(s) in _objects/ hold it and will be purged" in run.out
    path = vault.abs(created.path)
    text = path.read_text(encoding="utf-8")
    assert SPAN not in text and "Login: [REDACTED:by-person]" in text
    assert "log in with [REDACTED:by-person]" in text
    assert not holding(vault)

    ledger = (vault.root / "_ledger" / "redactions.jsonl").read_text(encoding="utf-8")
    assert SPAN not in ledger
    (entry,) = [json.loads(line) for line in ledger.splitlines()]
    assert entry["subject"] == f"node:{created.id}" and entry["before"] == edited.hash
    assert entry["purged"] == [created.hash, edited.hash] and entry["length"] == len(SPAN)

    reopened = Engine.open(vault, cwd=repo)
    (cand,) = reopened.recheck().candidates  # Backups' citation; NAS access's own carried on
    assert (cand.citing_title, cand.reason) == ("Backups", "target-redacted")
    history = osk(vault, "log", "NAS access")
    assert history.code == 0 and "user" in history.out
    shown = osk(vault, "show", f"NAS access@{created.hash[:12]}")
    assert shown.code == 1 and "purged by osk redact" in shown.err

    sync_once(vault)  # the second device gets the redacted node and loses the purged versions
    sync_once(second)
    assert "Login: [REDACTED:by-person]" in second.abs(created.path).read_text(encoding="utf-8")
    assert not holding(second)


def test_a_node_redaction_refuses_a_title_and_a_protected_region(vault: Vault, tmp_path: Path):
    eng = Engine.open(vault, cwd=make_repo(tmp_path / "work" / "proj"))
    eng.create_node(NewNode("nas", "The NAS", f"Login {SPAN}.\n", space="Scope", cluster="nas",
                            drafter="test-model"))
    eng.create_node(NewNode(f"Note {SPAN}", "A note", "Nothing here.\n", space="Scope",
                            cluster="nas",
                            drafter="test-model"))
    titled = osk(vault, "redact", f"Note {SPAN}", tty=True, answer=f"{SPAN}\nX\n")
    assert titled.code == 1 and "part of the node's title" in titled.err
    assert osk(vault, "protect", "Scope/proj/nas", tty=True).code == 0
    guarded = osk(vault, "redact", "nas", tty=True, answer=f"{SPAN}\nX\n")
    assert guarded.code == 1 and "protected region Scope/proj/nas" in guarded.err
    assert SPAN in vault.abs("Scope/proj/nas/nas.md").read_text(encoding="utf-8")


def test_a_record_that_changed_since_it_was_shown_is_not_redacted(
        vault: Vault, tmp_path: Path, monkeypatch):
    from osk.authority import protection
    from osk.errors import RedactError

    eng, refs = conversation(vault, make_repo(tmp_path / "work" / "proj"))
    target = redaction.parse("_raw/proj/talk")
    shown = redaction.preview(vault, target, SPAN)
    eng.append_raw("talk", user=f"once more: {SPAN}", assistant="Noted.")  # not in the preview
    record = vault.abs(refs[0].path)
    before = record.read_bytes()
    monkeypatch.setattr(protection, "require_person", lambda verb: None)  # as at a terminal
    with pytest.raises(RedactError, match="changed since it was shown"):
        redaction.redact(vault, target, SPAN, shown=shown)
    assert record.read_bytes() == before
    assert not (vault.root / "_ledger/redactions.jsonl").exists()


def test_redact_reaches_the_drafter_and_names_every_place_it_cannot(vault: Vault,
                                                                    tmp_path: Path):
    # issue 25: `osk redact` said "Redacted" and left the text in drafter, the audit ledger and
    # the raw file's name. Now the drafter is redacted with the body, and every place left is
    # named with why: the audit ledger's lines, the raw record named after it.
    repo = make_repo(tmp_path / "work" / "proj")
    eng = Engine.open(vault, cwd=repo)
    ref = eng.append_raw(f"chat-{SPAN}", user="hello", assistant="hi")
    eng.create_node(NewNode("nas", "The NAS", "The NAS hub.\n", space="Scope", cluster="nas",
                            drafter="test-model"))
    node = eng.create_node(NewNode("NAS access", "How we log in", f"Login: {SPAN}\n",
                                   space="Scope", cluster="nas", drafter=f"model {SPAN}"))
    assert [h.title for h in eng.search("orbit lamp").hits] == ["NAS access"]
    cached = [c for c in redaction.CACHES if (vault.root / c).exists()]
    assert ".osk/index/recall.sqlite" in cached
    run = run_redact(vault, "NAS access")
    assert run.code == 0, run.err
    assert "2 occurrence(s) of a 18-character text" in run.out  # body and drafter
    text = vault.abs(node.path).read_text(encoding="utf-8")
    assert SPAN not in text and 'drafter: "model [REDACTED:by-person]"' in text
    left = redaction.remaining(vault, SPAN)
    where = {(r.path, r.line, r.place) for r in left}
    audit = next(r.line for r in left if r.path == "_ledger/audit.jsonl")
    assert ("_ledger/audit.jsonl", audit, "ledger") in where  # the create named the drafter
    assert (ref.path, None, "name") in where  # the record's file name ...
    assert any(p == ref.path and line and place == "name" for p, line, place in where)  # ... and id
    assert {r.place for r in left} == {"ledger", "name", "state"}  # state: capture files
    assert all(r.path.startswith((".osk/raw/proj/chat-", ".osk/locks/raw/proj/chat-"))
               for r in left if r.place == "state")  # no cache: those that held it are gone
    assert f"    _ledger/audit.jsonl line {audit}\n" in run.out
    assert "    _raw/proj/chat-<the text>.md\n" in run.out and "does not rename it" in run.out
    assert "sync merges ledgers line by line" in run.out
    assert SPAN not in run.out  # the places are named, never the text
    deleted = next(line for line in run.out.splitlines()
                   if line.startswith("Deleted this device's caches of the vault"))
    assert all(cache in deleted for cache in cached), deleted
    assert not any((vault.root / c).exists() for c in cached)
    again = Engine.open(vault, cwd=repo)  # rebuilt from the vault: the words are gone
    assert again.search("orbit lamp").hits == () or all(
        h.title != "NAS access" for h in again.search("orbit lamp").hits)
    assert [h.title for h in again.search("login").hits] == ["NAS access"]


def test_remaining_finds_text_in_names_content_and_device_state_but_not_git(vault: Vault):
    (vault.root / "Domain" / f"x-{SPAN}").mkdir(parents=True)
    (vault.root / ".osk" / "index").mkdir(parents=True, exist_ok=True)
    (vault.root / ".osk" / "index" / "journal.jsonl").write_text(f"a\nb {SPAN}\n",
                                                                 encoding="utf-8")
    (vault.root / ".git").mkdir(exist_ok=True)
    (vault.root / ".git" / "COMMIT_EDITMSG").write_text(SPAN, encoding="utf-8")
    left = redaction.remaining(vault, SPAN)
    assert [(r.path, r.line, r.place) for r in left] == [
        (".osk/index/journal.jsonl", 2, "state"), (f"Domain/x-{SPAN}", None, "name")]


def test_what_a_raw_redaction_leaves_in_the_record_itself_is_named_as_such(vault: Vault,
                                                                            tmp_path: Path):
    repo = make_repo(tmp_path / "work" / "proj")
    eng = Engine.open(vault, cwd=repo)
    ref = eng.append_raw("talk", user=f"the login is {SPAN}", assistant="ok",
                         completion=f"turn-{SPAN}")
    run = run_redact(vault, "_raw/proj/talk")
    assert run.code == 0, run.err
    left = redaction.remaining(vault, SPAN, ref.path)
    assert [(r.path, r.place) for r in left if r.path == ref.path] == [(ref.path, "header")]
    assert "outside what osk redact rewrites" in run.out and f"    {ref.path} line" in run.out
    assert "in another raw record" not in run.out and SPAN not in run.out
