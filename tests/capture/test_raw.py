"""Raw records: the file format, append-only refusals, torn tails, idempotent captures,
concurrency across processes, crash safety under SIGKILL, and the capped review view."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from osk.capture import raw, raw_text
from osk.capture.raw import RoundInput, append_round, read_record, read_round
from osk.capture.raw_review import REVIEW_CAP, review
from osk.errors import RawNotFound, RawRecordError
from osk.store.edges import RawTarget, _portable_name, parse_target
from osk.store.vault import Vault

AT = "2025-11-29T18:00+09:00"
KEY, CONV = "proj", "conv-1"


def rnd(n: int, completion: str = "", **extra) -> RoundInput:
    return RoundInput(user=f"question {n}", assistant=f"answer {n}", completion=completion,
                      host="claude", at=AT, **extra)


def record_file(vault: Vault, key: str = KEY, conv: str = CONV) -> Path:
    return vault.raw_dir / key / f"{conv}.md"


def state_file(vault: Vault, key: str = KEY, conv: str = CONV) -> Path:
    return vault.state("raw", key, f"{conv}.json")


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def fake_github_token() -> str:
    return "gh" + "p_" + "".join(random.Random(3).choice("abcdefXYZ0123456789") for _ in range(36))


# -- the format ----------------------------------------------------------------------------

def test_the_first_append_writes_front_matter_and_one_framed_round_exactly(vault: Vault):
    ref = append_round(vault, KEY, CONV, RoundInput(
        "Hello", "Hi there", ("Bash: ls",), completion="c1", host="claude", at=AT))
    content = "### User\n\nHello\n\n### Assistant\n\nHi there\n\n### Tools\n\nBash: ls"
    assert record_file(vault).read_text(encoding="utf-8") == (
        "---\n"
        "osk-raw: 1\n"
        'key: "proj"\n'
        'conversation: "conv-1"\n'
        'host-conversation: "conv-1"\n'
        'host: "claude"\n'
        'created: "2025-11-29T18:00+09:00"\n'
        "---\n"
        "\n"
        "> Raw conversation record kept by osk: append-only, one section per round. Editing it "
        "makes further captures refuse; see docs/FORMAT.md.\n"
        "\n"
        "## Round 1\n"
        f"<!-- osk-round n=1 at=2025-11-29T18:00+09:00 host=claude completion=c1 "
        f"bytes={len(content)} sha256={sha(content)} parts=user:5,assistant:8,tool:8 "
        f"redacted= -->\n"
        f"{content}\n"
        "<!-- /osk-round 1 -->\n"
    )
    assert (ref.number, ref.hash, ref.duplicate) == (1, sha(content), False)


def test_rounds_are_numbered_and_their_coordinates_name_the_record_file(vault: Vault):
    refs = [append_round(vault, KEY, CONV, rnd(n)) for n in range(1, 4)]
    assert [r.number for r in refs] == [1, 2, 3]
    assert refs[2].coordinate == "_raw/proj/conv-1#Round 3"
    assert refs[2].link == "[[_raw/proj/conv-1#Round 3]]"
    target = parse_target(refs[2].link)
    assert target == RawTarget("proj", "conv-1", 3)
    assert vault.abs(target.record_path) == record_file(vault)
    assert read_round(vault, target).assistant == "answer 3"


TRICKY_USER = (
    "\n\nleading blank lines\r\nCRLF line\n## Round 2\n<!-- osk-round n=2 at=x host=y "
    "completion=z bytes=1 sha256=" + "0" * 64 + " parts=user:1,assistant:1 redacted= -->\n"
    "<!-- /osk-round 1 -->\n### Assistant\n\nnot really\n---\nosk-raw: 1\n-->\x00\ttab 한국어 🙂"
)
TRICKY_ASSISTANT = "### User\n\n<!-- /osk-round 2 -->\n\n## Round 1\n끝"
TRICKY_TOOLS = ("### Tools\n\nfake", "", "<!-- osk-round n=9 -->")


def test_a_round_reads_back_verbatim_even_when_it_contains_our_own_headings_and_markers(
        vault: Vault):
    append_round(vault, KEY, CONV, RoundInput(TRICKY_USER, TRICKY_ASSISTANT, TRICKY_TOOLS,
                                              completion="c1", at=AT))
    second = append_round(vault, KEY, CONV, rnd(2))
    record = read_record(vault, KEY, CONV)
    first = record.rounds[0]
    assert (first.user, first.assistant, first.tools) == (TRICKY_USER, TRICKY_ASSISTANT,
                                                          TRICKY_TOOLS)
    assert first.hash == first.recorded_hash == sha(first.text.rstrip("\n"))
    assert [r.number for r in record.rounds] == [1, 2]
    assert record.rounds[1].hash == second.hash and record.torn_tail == 0


def test_trailing_newlines_are_not_part_of_a_round_or_its_hash(vault: Vault):
    plain = append_round(vault, KEY, "a", RoundInput("q", "a", at=AT))
    padded = append_round(vault, KEY, "b", RoundInput("q\n\n", "a\r\n\n\n", at=AT))
    assert plain.hash == padded.hash
    assert read_round(vault, padded.target).assistant == "a"


def test_appending_never_changes_the_bytes_or_hashes_of_earlier_rounds(vault: Vault):
    path = record_file(vault)
    hashes: list[str] = []
    before = b""
    for n in range(1, 6):
        hashes.append(append_round(vault, KEY, CONV, rnd(n)).hash)
        now = path.read_bytes()
        assert now.startswith(before)
        before = now
    record = read_record(vault, KEY, CONV)
    assert [r.hash for r in record.rounds] == hashes
    assert all(raw.round_hash(vault, RawTarget(KEY, CONV, n)) == hashes[n - 1]
               for n in range(1, 6))


def test_an_unclosed_code_fence_is_closed_by_the_framing_and_not_added_to_the_text(
        vault: Vault):
    append_round(vault, KEY, CONV, RoundInput("```python\nprint(1)", "~~~~\nstill open", at=AT))
    append_round(vault, KEY, CONV, rnd(2))
    text = record_file(vault).read_text(encoding="utf-8")
    assert raw_text._open_fence(text) == ""  # Obsidian renders round 2 as Markdown, not as code
    assert "parts=user:18:b3,assistant:15:t4" in text
    first = read_round(vault, RawTarget(KEY, CONV, 1))
    assert (first.user, first.assistant) == ("```python\nprint(1)", "~~~~\nstill open")


def test_lone_surrogates_become_replacement_characters_so_the_record_stays_utf8(vault: Vault):
    append_round(vault, KEY, CONV, RoundInput("bad \ud800 half", "pair \ud83d\ude00", at=AT))
    found = read_round(vault, RawTarget(KEY, CONV, 1))
    assert (found.user, found.assistant) == ("bad \ufffd half", "pair \U0001F600")


def test_a_round_time_is_kept_at_minute_precision_with_its_offset(vault: Vault):
    append_round(vault, KEY, CONV, RoundInput("q", "a", at="2025-11-29T09:15:42.123Z"))
    assert read_round(vault, RawTarget(KEY, CONV, 1)).at == "2025-11-29T09:15+00:00"


def test_without_a_time_the_round_takes_the_clock(vault: Vault, monkeypatch):
    monkeypatch.setenv("OSK_NOW", "2030-01-02T03:04+05:00")
    append_round(vault, KEY, CONV, RoundInput("q", "a"))
    assert read_round(vault, RawTarget(KEY, CONV, 1)).at == "2030-01-02T03:04+05:00"


@pytest.mark.parametrize("bad", [
    RoundInput("q", "a", at="yesterday"),
    RoundInput("q", "a", at="2025-11-29T09:15"),  # no offset: refused, never guessed
    RoundInput(None, "a"),  # type: ignore[arg-type]
    RoundInput("q", "a", tools=("ok", 3)),  # type: ignore[arg-type]
    RoundInput("q", "a", completion=7),  # type: ignore[arg-type]
], ids=["words", "no-offset", "user-none", "tool-int", "completion-int"])
def test_a_malformed_round_is_refused_and_nothing_is_written(vault: Vault, bad: RoundInput):
    with pytest.raises(RawRecordError):
        append_round(vault, KEY, CONV, bad)
    assert not record_file(vault).exists() and not state_file(vault).exists()


# -- the secret filter ------------------------------------------------------------------------

def test_secrets_are_filtered_before_anything_reaches_disk(vault: Vault):
    token = fake_github_token()
    ref = append_round(vault, KEY, CONV, RoundInput(
        f"use {token} please", "export DB_PASSWORD=hunter2x", (f"curl -u a:{token}",),
        at=AT))
    data = record_file(vault).read_bytes()
    assert token.encode() not in data and b"hunter2x" not in data
    assert b"redacted=github-token:2,password:1 -->" in data
    assert ref.redacted == (("github-token", 2), ("password", 1))
    found = read_round(vault, ref.target)
    assert found.user == "use [REDACTED:github-token] please"
    assert found.redacted == (("github-token", 2), ("password", 1))


# -- idempotent captures ------------------------------------------------------------------

def test_a_completion_already_captured_is_a_no_op_that_reports_its_round(vault: Vault):
    first = append_round(vault, KEY, CONV, rnd(1, "done-1"))
    append_round(vault, KEY, CONV, rnd(2, "done-2"))
    before = record_file(vault).read_bytes()
    again = append_round(vault, KEY, CONV, RoundInput("other text", "x", completion="done-1"))
    assert (again.number, again.hash, again.duplicate) == (1, first.hash, True)
    assert record_file(vault).read_bytes() == before


def test_duplicates_are_still_recognised_after_device_state_is_lost(vault: Vault):
    append_round(vault, KEY, CONV, rnd(1, "done-1"))
    second = append_round(vault, KEY, CONV, rnd(2, "done-2"))
    shutil.rmtree(vault.state("raw"))
    again = append_round(vault, KEY, CONV, rnd(2, "done-2"))
    assert (again.number, again.hash, again.duplicate) == (2, second.hash, True)
    assert append_round(vault, KEY, CONV, rnd(3, "done-3")).number == 3


def test_a_completion_far_back_in_a_long_record_is_still_a_duplicate(vault: Vault):
    # More rounds than the JSON state's window of latest ids, and past the index's first
    # doubling: the early ids are answered from the index file.
    refs = [append_round(vault, KEY, CONV, rnd(n, f"done-{n}")) for n in range(1, 81)]
    for n in (1, 2, 40, 64, 80):
        again = append_round(vault, KEY, CONV, rnd(n, f"done-{n}"))
        assert (again.number, again.hash, again.duplicate) == (n, refs[n - 1].hash, True)
    assert read_record(vault, KEY, CONV).rounds[-1].number == 80


def test_a_lost_or_stale_completion_index_is_rebuilt_from_the_record(vault: Vault):
    index = vault.state("raw", KEY, f"{CONV}.ids")
    first = [append_round(vault, KEY, CONV, rnd(n, f"done-{n}")) for n in range(1, 31)]
    stale = index.read_bytes()  # accounts for 30 rounds
    for n in range(31, 41):
        append_round(vault, KEY, CONV, rnd(n, f"done-{n}"))
    index.write_bytes(stale)  # as if the last ten index writes were lost
    again = append_round(vault, KEY, CONV, rnd(35, "done-35"))
    assert (again.number, again.duplicate) == (35, True)
    index.unlink()
    again = append_round(vault, KEY, CONV, rnd(3, "done-3"))
    assert (again.number, again.hash, again.duplicate) == (3, first[2].hash, True)
    index.write_bytes(b"OSKI" + bytes(40))  # damaged
    assert append_round(vault, KEY, CONV, rnd(7, "done-7")).duplicate
    assert append_round(vault, KEY, CONV, rnd(41, "done-41")).number == 41


def test_device_state_stays_the_same_size_as_the_conversation_grows(vault: Vault):
    for n in range(1, 21):
        append_round(vault, KEY, CONV, rnd(n, f"completion-{n:06d}"))
    early = state_file(vault).stat().st_size
    for n in range(21, 301):
        append_round(vault, KEY, CONV, rnd(n, f"completion-{n:06d}"))
    # Only the round numbers in it grow (by a digit each, here): not the set of ids.
    assert state_file(vault).stat().st_size <= early + 2 * (raw.RECENT_COMPLETIONS + 1)
    state = json.loads(state_file(vault).read_text(encoding="utf-8"))
    assert len(state["completions"]) == raw.RECENT_COMPLETIONS


def test_rounds_without_a_completion_id_are_never_deduplicated(vault: Vault):
    refs = [append_round(vault, KEY, CONV, rnd(1)) for _ in range(3)]
    assert [r.number for r in refs] == [1, 2, 3]
    assert not any(r.duplicate for r in refs)


# -- refusals: nothing is written ---------------------------------------------------------

@pytest.fixture
def three_rounds(vault: Vault) -> Vault:
    for n in range(1, 4):
        append_round(vault, KEY, CONV, rnd(n, f"c{n}"))
    return vault


def assert_refused(vault: Vault, *needles: str) -> RawRecordError:
    """Append once more; it must be refused and leave the record and the state untouched."""
    path, state = record_file(vault), state_file(vault)
    before = path.read_bytes() if path.exists() else None
    state_before = state.read_bytes() if state.exists() else None
    with pytest.raises(RawRecordError) as caught:
        append_round(vault, KEY, CONV, rnd(99, "c99"))
    message = str(caught.value)
    for needle in needles:
        assert needle in message
    assert "Nothing was written" in message or "restore it from Git history" in message
    assert (path.read_bytes() if path.exists() else None) == before
    assert (state.read_bytes() if state.exists() else None) == state_before
    return caught.value


def offset_of_round(vault: Vault, number: int) -> int:
    return read_record(vault, KEY, CONV, strict=False).rounds[number - 1].offset


def test_an_earlier_round_edited_in_place_is_refused_naming_the_round(three_rounds: Vault):
    path = record_file(three_rounds)
    path.write_bytes(path.read_bytes().replace(b"answer 2", b"answer X"))
    offset = offset_of_round(three_rounds, 2)
    error = assert_refused(three_rounds, "round 2", f"byte offset {offset}",
                           "no longer matches the hash")
    assert (error.round, error.path) == (2, "_raw/proj/conv-1.md")


def test_an_edit_that_changes_a_rounds_length_is_refused_as_damaged_framing(
        three_rounds: Vault):
    path = record_file(three_rounds)
    offset = offset_of_round(three_rounds, 2)
    path.write_bytes(path.read_bytes().replace(b"answer 2", b"answer two"))
    assert_refused(three_rounds, "round 2", f"byte offset {offset}", "not", "bytes long")


def test_a_record_cut_short_inside_an_acknowledged_round_is_refused(three_rounds: Vault):
    path = record_file(three_rounds)
    cut = offset_of_round(three_rounds, 3) + 40
    path.write_bytes(path.read_bytes()[:cut])
    assert_refused(three_rounds, "acknowledged 3 round(s)", "2 complete round(s)",
                   "round 3 is missing or incomplete")


def test_bytes_added_by_hand_after_the_last_round_are_refused(three_rounds: Vault):
    path = record_file(three_rounds)
    end = path.stat().st_size
    with path.open("ab") as handle:
        handle.write(b"\nmy own note\n")
    assert_refused(three_rounds, "round 4", f"byte offset {end}", "found other bytes")


def test_a_hand_edit_that_also_fixes_the_hash_is_refused_while_this_device_remembers(
        three_rounds: Vault):
    path = record_file(three_rounds)
    data = path.read_bytes()
    old = read_round(three_rounds, RawTarget(KEY, CONV, 2))
    new_text = old.text.replace("answer 2", "answer X")
    data = data.replace(b"answer 2", b"answer X").replace(old.hash.encode(),
                                                          sha(new_text).encode())
    path.write_bytes(data)
    assert read_record(three_rounds, KEY, CONV).rounds[1].intact  # well-formed on its own
    assert_refused(three_rounds, "were changed", ".osk/raw/proj/conv-1.json")


def test_without_device_state_a_well_formed_record_is_accepted_as_it_is(three_rounds: Vault):
    # The documented way to accept an intended edit, and what a fresh clone sees.
    path = record_file(three_rounds)
    old = read_round(three_rounds, RawTarget(KEY, CONV, 2))
    new_text = old.text.replace("answer 2", "answer X")
    path.write_bytes(path.read_bytes().replace(b"answer 2", b"answer X")
                     .replace(old.hash.encode(), sha(new_text).encode()))
    state_file(three_rounds).unlink()
    assert append_round(three_rounds, KEY, CONV, rnd(4, "c4")).number == 4


def test_an_edited_front_matter_is_refused(three_rounds: Vault):
    path = record_file(three_rounds)
    path.write_bytes(path.read_bytes().replace(b'host: "claude"', b'host: "codex!"'))
    assert_refused(three_rounds, "were changed")


def test_a_removed_record_is_refused_while_this_device_acknowledged_rounds_in_it(
        three_rounds: Vault):
    record_file(three_rounds).unlink()
    assert_refused(three_rounds, "the record is gone", "acknowledged 3 round(s)")


def test_a_file_that_is_not_a_raw_record_is_refused(vault: Vault):
    path = record_file(vault)
    path.parent.mkdir(parents=True)
    path.write_text("# my notes\n", encoding="utf-8")
    assert_refused(vault, "does not start with the osk-raw front matter")


def test_a_record_of_a_newer_format_is_refused(three_rounds: Vault):
    path = record_file(three_rounds)
    path.write_bytes(path.read_bytes().replace(b"osk-raw: 1", b"osk-raw: 2"))
    assert_refused(three_rounds, "osk-raw format 2")


def test_a_record_moved_to_another_conversation_is_refused(three_rounds: Vault):
    moved = record_file(three_rounds, conv="conv-2")
    shutil.copyfile(record_file(three_rounds), moved)
    with pytest.raises(RawRecordError, match="front matter names key 'proj' and conversation "
                                             "'conv-1'"):
        append_round(three_rounds, KEY, "conv-2", rnd(4))


# -- interrupted appends ------------------------------------------------------------------

def frame_of_next_round(vault: Vault, round_input: RoundInput) -> bytes:
    """The exact bytes the next append would add, made on a copy of the vault."""
    scratch = Vault(vault.root.parent / "scratch")
    shutil.rmtree(scratch.root, ignore_errors=True)
    shutil.copytree(vault.root, scratch.root)
    before = record_file(scratch).read_bytes() if record_file(scratch).exists() else b""
    append_round(scratch, KEY, CONV, round_input)
    after = record_file(scratch).read_bytes()
    shutil.rmtree(scratch.root)
    assert after.startswith(before)
    return after[len(before):]


def test_an_append_cut_at_any_byte_is_ignored_by_readers_and_replaced_by_the_next_append(
        three_rounds: Vault):
    vault = three_rounds
    path, state = record_file(vault), state_file(vault)
    good, good_state = path.read_bytes(), state.read_bytes()
    torn = frame_of_next_round(vault, rnd(4, "c4"))
    retry = frame_of_next_round(vault, rnd(44, "c44"))
    for cut in range(1, len(torn)):
        path.write_bytes(good + torn[:cut])  # the crash: a partial frame, state not updated
        state.write_bytes(good_state)
        record = read_record(vault, KEY, CONV)
        assert (len(record.rounds), record.torn_tail) == (3, cut)
        ref = append_round(vault, KEY, CONV, rnd(44, "c44"))
        assert (ref.number, ref.duplicate) == (4, False)
        assert path.read_bytes() == good + retry, f"cut at {cut}"


def test_a_tail_read_resumes_at_its_mark_and_refuses_a_record_changed_before_it(
        three_rounds: Vault):
    """``read_tail``: the rounds from the mark on (a torn append left out), the same rounds a
    whole read gives, and a new mark before the last ``keep``; None once a byte before the
    mark changed."""
    vault = three_rounds
    first = raw.read_tail(vault, KEY, CONV, since=None)
    assert first is not None and [r.number for r in first.rounds] == [1, 2, 3]
    assert first.resume is not None and first.resume.number == 2  # before the last two
    append_round(vault, KEY, CONV, rnd(4, "c4"))
    path = record_file(vault)
    whole = path.read_bytes()
    path.write_bytes(whole + frame_of_next_round(vault, rnd(5, "c5"))[:40])  # a torn append
    tail = raw.read_tail(vault, KEY, CONV, since=first.resume)
    assert tail is not None and [r.number for r in tail.rounds] == [2, 3, 4]
    assert tail.rounds == read_record(vault, KEY, CONV).rounds[1:]
    assert tail.resume is not None and tail.resume.number == 3
    path.write_bytes(whole.replace(b"question 1", b"question X"))  # before the mark
    assert raw.read_tail(vault, KEY, CONV, since=first.resume) is None
    assert raw.read_tail(vault, KEY, CONV, since=tail.resume) is None


def test_a_complete_but_unacknowledged_round_is_kept_and_its_retry_is_a_duplicate(
        three_rounds: Vault):
    vault = three_rounds
    path, state = record_file(vault), state_file(vault)
    good_state = state.read_bytes()
    written = append_round(vault, KEY, CONV, rnd(4, "c4"))
    state.write_bytes(good_state)  # the crash came after the fsync, before the state update
    again = append_round(vault, KEY, CONV, rnd(4, "c4"))
    assert (again.number, again.hash, again.duplicate) == (4, written.hash, True)
    assert append_round(vault, KEY, CONV, rnd(5, "c5")).number == 5
    assert len(read_record(vault, KEY, CONV).rounds) == 5 and path.exists()


def test_a_creation_cut_at_any_byte_is_replaced_by_the_next_append(vault: Vault):
    whole = frame_of_next_round(vault, rnd(1, "c1"))
    path = record_file(vault)
    path.parent.mkdir(parents=True)
    for cut in range(0, len(whole), 3):
        path.write_bytes(whole[:cut])
        with pytest.raises(RawNotFound if cut == 0 else RawRecordError):
            read_record(vault, KEY, CONV).round(1)
        ref = append_round(vault, KEY, CONV, rnd(1, "c1"))
        assert (ref.number, ref.duplicate) == (1, False)
        assert path.read_bytes() == whole, f"cut at {cut}"
        shutil.rmtree(vault.state("raw"))


def test_garbage_after_the_last_round_is_not_mistaken_for_an_interrupted_append(
        three_rounds: Vault):
    path = record_file(three_rounds)
    with path.open("ab") as handle:
        handle.write(b"\n## Round 4\n<!-- something else entirely")
    assert_refused(three_rounds, "round 4", "found other bytes")


# -- the fast path ------------------------------------------------------------------------

def test_appends_to_an_unchanged_file_never_reread_the_record(vault: Vault, monkeypatch):
    calls: list[int] = []
    real_scan = raw_text.scan_record

    def counting_scan(data: bytes, rel: str):
        calls.append(len(data))
        return real_scan(data, rel)

    monkeypatch.setattr(raw, "scan_record", counting_scan)
    for n in range(1, 6):
        append_round(vault, KEY, CONV, rnd(n, f"c{n}"))
    assert calls == []
    os.utime(record_file(vault), ns=(1, 1))  # a touched file is verified once, then trusted
    append_round(vault, KEY, CONV, rnd(6, "c6"))
    append_round(vault, KEY, CONV, rnd(7, "c7"))
    assert len(calls) == 1


def test_a_rewrite_with_identical_bytes_is_verified_and_accepted(three_rounds: Vault):
    path = record_file(three_rounds)
    copy = path.with_name("copy.tmp")
    shutil.copyfile(path, copy)
    os.replace(copy, path)  # what a git checkout or a sync tool does: a new inode, same bytes
    assert append_round(three_rounds, KEY, CONV, rnd(4, "c4")).number == 4


def test_damaged_device_state_costs_a_verification_not_a_refusal(three_rounds: Vault):
    state_file(three_rounds).write_text("{not json", encoding="utf-8")
    assert append_round(three_rounds, KEY, CONV, rnd(3, "c3")).duplicate
    assert append_round(three_rounds, KEY, CONV, rnd(4, "c4")).number == 4


# -- reading ------------------------------------------------------------------------------

def test_reading_a_missing_record_or_round_raises_raw_not_found(three_rounds: Vault):
    with pytest.raises(RawNotFound, match="no raw record _raw/proj/nope.md") as caught:
        read_round(three_rounds, RawTarget(KEY, "nope", 1))
    assert caught.value.exit_code == 3
    with pytest.raises(RawNotFound, match="has no round 7; it has rounds 1-3"):
        read_round(three_rounds, RawTarget(KEY, CONV, 7))


def test_a_changed_round_is_refused_by_read_round_but_round_hash_reports_its_current_text(
        three_rounds: Vault):
    target = RawTarget(KEY, CONV, 2)
    recorded = raw.round_hash(three_rounds, target)
    path = record_file(three_rounds)
    path.write_bytes(path.read_bytes().replace(b"answer 2", b"answer X"))
    with pytest.raises(RawRecordError, match="round 2 .* no longer matches"):
        read_round(three_rounds, target)
    current = raw.round_hash(three_rounds, target)
    assert current != recorded
    assert current == sha(read_round(three_rounds, target, strict=False).text)
    assert read_round(three_rounds, RawTarget(KEY, CONV, 3)).intact  # others stay readable
    with pytest.raises(RawRecordError):
        read_record(three_rounds, KEY, CONV)
    assert read_record(three_rounds, KEY, CONV, strict=False).damaged == (2,)


def test_record_names_keep_portable_ids_and_make_others_portable_and_distinct():
    assert raw.record_name("0195f1a2-7b3c-7def-8a90-1b2c3d4e5f60") == (
        "0195f1a2-7b3c-7def-8a90-1b2c3d4e5f60")
    assert raw.record_name("내프로젝트") == "내프로젝트"
    odd = ["a b", "a/b", "a:b", "a#b", "[x]", ".hidden", "CON", "x" * 300, "é", "e\u0301"]
    names = [raw.record_name(text) for text in odd]
    assert len(set(names)) == len(odd)
    for name in names:
        assert raw.record_name(name) == name
        assert _portable_name(name)
        parse_target(f"_raw/k/{name}#Round 1")  # usable in a coordinate
    with pytest.raises(RawRecordError):
        raw.record_name("  ")


def test_a_host_conversation_id_that_is_no_file_name_is_kept_in_the_front_matter(
        vault: Vault):
    ref = append_round(vault, KEY, "thread: 42/7", rnd(1))
    assert ref.conversation == raw.record_name("thread: 42/7") != "thread: 42/7"
    record = read_record(vault, KEY, "thread: 42/7")
    assert record.host_conversation == "thread: 42/7"
    assert record.path == vault.root / ref.path


def test_record_key_of_reads_coordinates_links_and_paths():
    expected = raw.RecordId("proj", "conv-1")
    for text in ("_raw/proj/conv-1#Round 3", "[[_raw/proj/conv-1#Round 3]]",
                 "_raw/proj/conv-1.md", "_raw/proj/conv-1"):
        assert raw.record_key_of(text) == expected
    assert expected.path == "_raw/proj/conv-1.md"
    with pytest.raises(RawRecordError):
        raw.record_key_of("Scope/app/Note")


def test_list_records_names_every_record(vault: Vault):
    append_round(vault, "a", "one", rnd(1))
    append_round(vault, "b", "two", rnd(1))
    assert raw.list_records(vault) == [raw.RecordId("a", "one"), raw.RecordId("b", "two")]


# -- the review view ----------------------------------------------------------------------

def test_a_review_of_short_rounds_shows_them_whole_and_says_nothing_was_cut(vault: Vault):
    append_round(vault, KEY, CONV, rnd(1))
    append_round(vault, KEY, CONV, RoundInput("pw", "password=hunter2x", host="", at=AT))
    assert review(vault, KEY, CONV).text == (
        "# Raw record _raw/proj/conv-1.md: rounds 1-2 of 2\n\n"
        "## _raw/proj/conv-1#Round 1 · 2025-11-29T18:00+09:00 · claude\n"
        "### User\n\nquestion 1\n\n### Assistant\n\nanswer 1\n\n"
        "## _raw/proj/conv-1#Round 2 · 2025-11-29T18:00+09:00 · redacted password ×1\n"
        "### User\n\npw\n\n### Assistant\n\npassword=[REDACTED:password]\n\n"
    )
    assert not review(vault, KEY, CONV).cut


def test_a_review_never_exceeds_its_cap_and_says_how_to_read_on(vault: Vault):
    for n in range(1, 13):
        append_round(vault, KEY, CONV, RoundInput(f"q{n}", f"{n:02d} " * 300, at=AT))
    view = review(vault, KEY, CONV)
    assert len(view.text) <= REVIEW_CAP and view.cut
    assert view.shown[0] == 1 and view.next_rounds[-1] == 12
    assert view.next_rounds[0] in (view.shown[-1], view.shown[-1] + 1)
    assert view.text.endswith(
        f"To read on, ask for rounds {view.next_rounds[0]}-12"
        + (f" with skip {view.next_skip}.]\n" if view.next_skip else ".]\n"))
    assert "[cut at the 6,000-character cap" in view.text


def test_paging_through_a_long_round_shows_every_character_in_order(vault: Vault):
    long_text = "".join(f"line {i:05d}\n" for i in range(3000))
    append_round(vault, KEY, CONV, RoundInput("q", long_text, at=AT))
    append_round(vault, KEY, CONV, rnd(2))
    text = read_round(vault, RawTarget(KEY, CONV, 1)).text
    rounds: tuple[int, ...] | None = None
    skip, pages, seen_round_two = 0, 0, False
    while True:
        page = review(vault, KEY, CONV, rounds=rounds, cap=2500, skip=skip)
        assert len(page.text) <= 2500
        pages += 1
        if 1 in page.shown:
            upto = page.next_skip if page.next_rounds[:1] == (1,) else len(text)
            assert text[skip:upto] in page.text
        seen_round_two = seen_round_two or 2 in page.shown
        if not page.cut:
            break
        rounds, skip = page.next_rounds, page.next_skip
    assert seen_round_two and pages >= len(text) // 2500


def test_a_review_takes_a_selection_and_refuses_rounds_that_do_not_exist(three_rounds: Vault):
    view = review(three_rounds, KEY, CONV, rounds="2-3")
    assert view.shown == (2, 3) and "rounds 2-3 of 3" in view.text
    assert review(three_rounds, KEY, CONV, rounds=[3, 1]).shown == (1, 3)
    with pytest.raises(RawNotFound, match="has no round 4-5; it has rounds 1-3"):
        review(three_rounds, KEY, CONV, rounds="2-5")
    with pytest.raises(RawRecordError, match="malformed"):
        review(three_rounds, KEY, CONV, rounds="two")
    with pytest.raises(RawRecordError, match="at least 1,000"):
        review(three_rounds, KEY, CONV, cap=50)


def test_a_review_flags_a_round_whose_text_changed_since_capture(three_rounds: Vault):
    path = record_file(three_rounds)
    path.write_bytes(path.read_bytes().replace(b"answer 2", b"answer X"))
    view = review(three_rounds, KEY, CONV, rounds=[2]).text
    assert "WARNING: text changed since capture" in view and "answer X" in view


# -- processes: concurrency and crashes -------------------------------------------------------

CHILD = r'''
import os, signal, sys
from pathlib import Path
from osk.capture import raw
from osk.store.vault import Vault

vault = Vault(Path(sys.argv[1]))
key, conv, plan = sys.argv[2], sys.argv[3], sys.argv[4].split(",")
size, kill_round, kill_after = int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
armed = False
sent = 0
real_write = os.write
real_save = raw.save_state

def write(fd, data):
    # Let kill_after bytes of the armed round through, then die mid-append.
    global sent
    if not armed:
        return real_write(fd, data)
    room = kill_after - sent
    if room <= 0:
        os.kill(os.getpid(), signal.SIGKILL)
    written = real_write(fd, bytes(data[:room]))
    sent += written
    if sent >= kill_after:
        os.kill(os.getpid(), signal.SIGKILL)
    return written

def save_state(path, state):
    if armed:  # the whole round was written and fsynced, the acknowledgement was not
        os.kill(os.getpid(), signal.SIGKILL)
    real_save(path, state)

os.write = write
raw.save_state = save_state
for index, completion in enumerate(plan, start=1):
    body = (completion + " ") * (size // (len(completion) + 1))
    armed = index == kill_round
    print("BEGIN", completion, flush=True)
    ref = raw.append_round(vault, key, conv, raw.RoundInput(
        user="question " + completion, assistant=body, completion=completion, host="test"))
    print("ACK", ref.number, ref.hash, completion, int(ref.duplicate), flush=True)
'''


def spawn(vault: Vault, plan: list[str], size: int = 300, kill_round: int = 0,
          kill_after: int = 0) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(vault.root), KEY, CONV, ",".join(plan), str(size),
         str(kill_round), str(kill_after)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8",
    )


def acks(output: str) -> list[tuple[int, str, str, bool]]:
    found = []
    for line in output.splitlines():
        parts = line.split()
        if parts and parts[0] == "ACK":
            found.append((int(parts[1]), parts[2], parts[3], parts[4] == "1"))
    return found


def assert_acknowledged_rounds_intact(vault: Vault, acknowledged: dict[int, str]) -> None:
    record = read_record(vault, KEY, CONV)
    assert [r.number for r in record.rounds] == list(range(1, len(record.rounds) + 1))
    for number, digest in acknowledged.items():
        found = record.round(number)
        assert found.intact and found.hash == digest


def test_concurrent_appends_from_several_processes_lose_nothing(vault: Vault):
    plans = [[f"p{p}-{i}" for i in range(10)] + ["shared-a", "shared-b"] for p in range(3)]
    for plan in plans:
        random.Random(len(plan[0])).shuffle(plan)
    children = [spawn(vault, plan) for plan in plans]
    deadline = time.monotonic() + 120
    while any(c.poll() is None for c in children) and time.monotonic() < deadline:
        if record_file(vault).exists():  # readers never see a damaged record mid-append
            read_record(vault, KEY, CONV)
    outputs = [c.communicate(timeout=60) for c in children]
    assert all(c.returncode == 0 for c in children), [err for _, err in outputs]
    record = read_record(vault, KEY, CONV)
    completions = [r.completion for r in record.rounds]
    assert sorted(completions) == sorted({c for plan in plans for c in plan})
    assert [r.number for r in record.rounds] == list(range(1, 33))
    written = [a for out, _ in outputs for a in acks(out) if not a[3]]
    assert sorted(a[0] for a in written) == list(range(1, 33))
    for number, digest, completion, _ in (a for out, _ in outputs for a in acks(out)):
        assert record.round(number).hash == digest
        assert record.round(number).completion == completion


def crash_trials(default: int) -> int:
    return int(os.environ.get("OSK_CRASH_TRIALS", default))


@pytest.mark.crash
def test_a_process_killed_at_a_random_byte_of_an_append_never_damages_acknowledged_rounds(
        vault: Vault):
    rng = random.Random(20251129)
    acknowledged: dict[int, str] = {}
    counter = 0
    for trial in range(crash_trials(6)):
        plan = [f"t{trial}-{i}" for i in range(rng.randint(1, 3))]
        kill_round = rng.randint(1, len(plan))
        size = rng.choice([50, 400, 3000])
        kill_after = rng.randrange(size + 600)  # past the frame's end: killed before the ack
        child = spawn(vault, plan, size, kill_round, kill_after)
        out, err = child.communicate(timeout=120)
        assert child.returncode == -signal.SIGKILL, err
        acknowledged.update({n: h for n, h, _, _ in acks(out)})
        assert_acknowledged_rounds_intact(vault, acknowledged)
        counter += 1
        ref = append_round(vault, KEY, CONV, rnd(counter, f"after-{trial}"))
        assert ref.number == len(read_record(vault, KEY, CONV).rounds)
        acknowledged[ref.number] = ref.hash
        assert read_record(vault, KEY, CONV).torn_tail == 0
        assert_acknowledged_rounds_intact(vault, acknowledged)


@pytest.mark.crash
def test_a_process_killed_from_outside_while_writing_large_rounds_loses_no_acknowledged_round(
        vault: Vault):
    rng = random.Random(7)
    acknowledged: dict[int, str] = {}
    path = record_file(vault)
    for trial in range(crash_trials(3)):
        plan = [f"x{trial}-{i}" for i in range(3)]
        victim = rng.choice(plan)
        size = 3_000_000
        child = spawn(vault, plan, size)
        assert child.stdout is not None
        while (line := child.stdout.readline()) and line.split()[:2] != ["BEGIN", victim]:
            parts = line.split()
            if parts[0] == "ACK":
                acknowledged[int(parts[1])] = parts[2]
        start = path.stat().st_size if path.exists() else 0
        threshold = rng.randrange(size)
        deadline = time.monotonic() + 60
        while child.poll() is None and time.monotonic() < deadline:
            if path.exists() and path.stat().st_size - start > threshold:
                break  # the append is on its way to disk: kill it now
        child.kill()
        out, _ = child.communicate(timeout=60)
        acknowledged.update({n: h for n, h, _, _ in acks(out)})
        assert_acknowledged_rounds_intact(vault, acknowledged)
        ref = append_round(vault, KEY, CONV, rnd(trial, f"after-{trial}"))
        acknowledged[ref.number] = ref.hash
        record = read_record(vault, KEY, CONV)
        assert record.torn_tail == 0 and ref.number == len(record.rounds)
        assert_acknowledged_rounds_intact(vault, acknowledged)


def test_the_raw_module_imports_nothing_heavy():
    code = "import sys, osk.capture.raw; print(*sys.modules)"
    out = subprocess.check_output([sys.executable, "-c", code], text=True)
    assert not set(out.split()) & {"pydantic", "yaml", "mcp", "git", "numpy", "rank_bm25"}


def test_device_state_holds_no_text_of_the_record(three_rounds: Vault):
    state = json.loads(state_file(three_rounds).read_text(encoding="utf-8"))
    assert set(state) == {"v", "identity", "rounds", "chain", "completions"}
    assert state["rounds"] == 3 and set(state["completions"]) == {"c1", "c2", "c3"}
