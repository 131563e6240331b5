"""Receipts of injections: every session start and prompt's recall leaves one in device state,
`osk recall log` reads them back, `osk recall why` explains a prompt exactly as the hook decides
it, and `osk stats` joins them with the MCP server's call log and the raw record.

The hooks run as the hosts run them (``python -m osk hook`` with the host's payload on stdin),
the commands as a person runs them (real processes).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from authority_support import FakeTerminal
from hookkit import CLAUDE_SESSION, CODEX_SESSION, context_of, payload, run_hook
from recallkit import FACT, prompt, start, write
from recallkit import recall_log as log

from osk.authority import tombstones
from osk.calls.request import NodeEdit
from osk.engine.core import Engine
from osk.hooks import receipts
from osk.store.vault import Vault

OTHER = ("Deploys go out on Tuesdays only", "Production deploys happen on Tuesdays.",
         "We deploy to production on Tuesdays.")
THIRD = ("Invoices are numbered per fiscal year", "Invoice numbers restart each fiscal year.",
         "Invoice numbering restarts every fiscal year.")


def osk(vault: Vault, *args: str, cwd: Path) -> str:
    done = subprocess.run([sys.executable, "-m", "osk", "--vault", str(vault.root), *args],
                          cwd=cwd, capture_output=True, text=True, encoding="utf-8", timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("host", ["claude", "codex"])
def test_each_injection_leaves_a_receipt_the_log_reads_back(eng, vault, project, tmp_path,
                                                            host):
    node_id = write(eng, *FACT)
    started = start(host, project, tmp_path)
    asked = "how are release tags signed, minisign or gpg?"
    recall_block = prompt(host, project, asked, "p-1", tmp_path)
    found = log(vault, project)
    assert [r["event"] for r in found] == ["session-start", "prompt-submit"]
    conversation = CLAUDE_SESSION if host == "claude" else CODEX_SESSION
    assert {r["host"] for r in found} == {host}
    assert {r["conversation"] for r in found} == {conversation}
    assert {r["scope"] for r in found} == {eng.scope}
    session, recalled = found
    assert session["chars"] == len(started)
    assert node_id in {i["id"] for i in session["items"]}
    assert {i["channel"] for i in session["items"]} <= {
        "digest-used", "digest-person"}
    # shown at session start, so the prompt holds it back instead of showing it twice
    assert recalled["chars"] == len(recall_block) == 0
    held = {h["id"]: h["reason"] for h in recalled["held"]}
    assert held.pop(node_id) == "shown-before"
    assert set(held.values()) <= {"below-floor", "hub"}  # the cluster's hub: not about it
    assert recalled["prompt"] == receipts.prompt_hash(asked)
    text = receipts.RECEIPTS.path(vault).read_text(encoding="utf-8")
    assert "minisign or gpg" not in text  # the prompt itself is never kept


def test_a_prompt_receipt_names_each_item_with_its_score_channel_floor_and_hash(
        eng, vault, project, tmp_path):
    node_id = write(eng, *FACT)
    block = prompt("claude", project, "how are release tags signed, minisign or gpg?", "p-1",
                   tmp_path)
    (receipt,) = log(vault, project)
    assert receipt["chars"] == len(block) > 0
    (item,) = receipt["items"]
    assert item["id"] == node_id and item["title"] == FACT[0]
    assert item["channel"] == "recall-file" and item["score"] >= item["floor"] > 0
    eng.update_node(FACT[0], NodeEdit(summary="Release tags are signed with minisign only."))
    prompt("claude", project, "how are release tags signed, minisign or gpg?", "p-2", tmp_path)
    changed = log(vault, project)[-1]["items"][0]
    assert changed["id"] == node_id and changed["hash"] != item["hash"]  # the version shown


def test_held_back_candidates_carry_their_reason(eng, vault, project, tmp_path, monkeypatch):
    kept = write(eng, *FACT)
    rejected = write(eng, "Release tags name the minisign key id",
                     "Each signed release tag names the minisign key id it was signed with.",
                     "Release tags carry the minisign key id.")
    path = vault.abs(eng.read_node(rejected).path)
    text = path.read_text(encoding="utf-8")
    with monkeypatch.context() as person:
        person.setattr(sys, "stdin", FakeTerminal())
        tombstones.reject(vault, rejected, reason="wrong key id")
    path.write_text(text, encoding="utf-8")  # restored by hand: the index ranks it again
    eng.search("minisign")
    prompt("claude", project, "which minisign key signs release tags?", "p-1", tmp_path)
    prompt("claude", project, "which minisign key signs release tags?", "p-2", tmp_path)
    first, second = log(vault, project)
    hub = eng.read_node("release").id  # the cluster's hub holds few of the prompt's words
    assert [i["id"] for i in first["items"]] == [kept]
    assert {h["id"]: h["reason"] for h in first["held"]} == {
        rejected: "tombstone", hub: "below-floor"}
    assert second["items"] == [] and second["chars"] == 0
    assert {h["id"]: h["reason"] for h in second["held"]} == {
        rejected: "tombstone", kept: "shown-before", hub: "below-floor"}


def ask(project: Path, tmp_path: Path, conversation: str, text: str) -> str:
    """One prompt of a new conversation, through the real prompt-submit hook."""
    data = json.loads(payload("claude", "prompt_submit", transcript=tmp_path / "t.jsonl",
                              cwd=project, prompt_id="p-1", prompt=text))
    done = run_hook("prompt-submit", "claude",
                    json.dumps({**data, "session_id": conversation}).encode(), cwd=project)
    assert done.returncode == 0 and "failed" not in done.stderr, done.stderr
    return context_of(done.stdout, "UserPromptSubmit") if done.stdout else ""


def test_why_agrees_with_what_the_hook_injects_for_the_same_prompt(eng, vault, project,
                                                                   tmp_path):
    write(eng, *FACT)
    write(eng, *OTHER, cluster="deploys")
    for number, asked in enumerate(["how are release tags signed, minisign or gpg?",
                                    "which weekday do production deploys happen?",
                                    "what colour is the office cat?"]):
        explained = json.loads(osk(vault, "recall", "why", asked, "--json", cwd=project))
        conversation = f"5b0c7a52-8f1e-4d7a-9a63-2c4f1e9d0b{number:02}"
        block = ask(project, tmp_path, conversation, asked)
        assert explained["block"] == block
        (receipt,) = log(vault, project, "--conversation", conversation)
        assert [i["id"] for i in explained["items"]] == [i["id"] for i in receipt["items"]]
        assert [(h["id"], h["reason"]) for h in explained["held"]] == [
            (h["id"], h["reason"]) for h in receipt["held"]]


def test_why_prints_what_would_be_shown_and_what_was_held_back(eng, vault, project):
    write(eng, *FACT)
    text = osk(vault, "recall", "why", "how are release tags signed?", cwd=project)
    assert f"scope {eng.scope}, host claude" in text
    assert "Would inject" in text and FACT[0] in text
    nothing = osk(vault, "recall", "why", "what colour is the office cat?", cwd=project)
    assert "Would inject nothing." in nothing


def test_receipts_are_bounded_and_rotated(vault, monkeypatch):
    monkeypatch.setattr(receipts, "MAX_BYTES", 2000)
    for number in range(200):
        receipts.write(vault, receipts.receipt("prompt-submit", "claude", f"c{number}", "s",
                                               0, [], []))
    path = receipts.RECEIPTS.path(vault)
    files = sorted(p.name for p in path.parent.iterdir())
    assert files == ["receipts.jsonl", "receipts.jsonl.1", "receipts.jsonl.2"]
    assert all(p.stat().st_size < 2000 + 300 for p in path.parent.iterdir())
    kept = [r["conversation"] for r in receipts.RECEIPTS.read(vault)]
    assert kept == [f"c{n}" for n in range(200 - len(kept), 200)]  # the newest, in order
    assert len(kept) < 200


def test_a_damaged_receipt_line_is_skipped_not_fatal(vault):
    receipts.write(vault, receipts.receipt("prompt-submit", "claude", "a", "s", 0, [], []))
    with open(receipts.RECEIPTS.path(vault), "a", encoding="utf-8") as handle:
        handle.write('{"cut in the mid')
    receipts.write(vault, receipts.receipt("prompt-submit", "claude", "b", "s", 0, [], []))
    assert [r["conversation"] for r in receipts.RECEIPTS.read(vault)] == ["a", "b"]


@pytest.mark.anyio
async def test_stats_counts_cost_blocks_and_what_the_model_then_used(eng, vault, project,
                                                                     tmp_path):
    import mcp

    from osk.surfaces.server import build_server

    read, _, answered = (write(eng, *FACT), write(eng, *OTHER, cluster="deploys"),
                         write(eng, *THIRD, cluster="billing"))
    blocks = [ask(project, tmp_path, f"conversation-{n}", text) for n, text in enumerate([
        "how are release tags signed, minisign or gpg?",
        "which weekday do production deploys happen?",
        "are invoice numbers restarted each fiscal year?",
        "what colour is the office cat?"])]
    assert [bool(b) for b in blocks] == [True, True, True, False]
    server = build_server(lambda: Engine.open(vault, cwd=project))
    async with mcp.Client(server) as client:
        assert not (await client.call_tool("read_node", {"node": read})).is_error
        done = await client.call_tool("create_node", {
            "title": "Deploy freeze on holidays", "summary": "No Tuesday deploy on a holiday.",
            "body": "A holiday Tuesday skips the deploy.\n", "space": "scope",
            "cluster": "deploys", "drafter": "test-model", "derived_from": [f"[[{OTHER[0]}]]"]})
        assert not done.is_error, done.content
    eng.append_raw("conversation-2", user="and invoices?",
                   assistant=f"Per node {answered}, numbering restarts each fiscal year.")
    (row,) = json.loads(osk(vault, "stats", "--json", cwd=project))
    assert (row["scope"], row["prompts"], row["with_block"]) == (eng.scope, 4, 3)
    assert row["prompt_chars"] == sum(len(b) for b in blocks)
    assert row["chars_per_prompt"] == round(sum(len(b) for b in blocks) / 4, 1)
    assert row["block_share"] == 0.75
    assert (row["injected"], row["opened"], row["cited"], row["used_share"]) == (3, 1, 2, 1.0)
    table = osk(vault, "stats", cwd=project)
    assert eng.scope in table and "75%" in table and "100%" in table


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _recall_showed_the_second_round(eng, vault) -> str:
    """Two rounds captured, and the receipt rounds recall writes for the second (per_prompt
    names a round by its bare coordinate): that coordinate."""
    from osk.search.recall_hits import Recalled

    eng.append_raw("earlier", user="which branch ships?", assistant="The release branch.")
    shown = eng.append_raw("earlier", user="how do we sign?", assistant="With minisign.")
    coordinate = shown.coordinate.removeprefix("[[").removesuffix("]]")
    hit = Recalled("raw round", coordinate, coordinate, "", (), 5.0, coordinate, "round",
                   (0, 0, 0))
    receipts.write(vault, receipts.receipt("prompt-submit", "claude", "now", eng.scope, 200,
                                           [receipts.item(hit, "rounds", 4.0)], []))
    return coordinate


@pytest.mark.anyio
@pytest.mark.parametrize(("read", "opened"), [
    ("{round}", 1),                             # the round's own coordinate, as shown
    ("[[{round}]]", 1),                         # ... as a link
    ("{record}|2", 1),                          # its record, asking for that round
    ("[[{record}]]", 1),                        # its record as a link: a view of every round
    ("{record}|1", 0),                          # its record, another round only
], ids=["round", "round-link", "record-rounds", "record-link", "record-other-round"])
async def test_a_raw_round_recall_showed_counts_as_opened_when_the_model_reads_it(
        eng, vault, project, read, opened):
    import mcp

    from osk.surfaces.server import build_server

    coordinate = _recall_showed_the_second_round(eng, vault)
    asked, _, rounds = read.format(round=coordinate,
                                   record=coordinate.partition("#")[0]).partition("|")
    arguments = {"coordinate": asked, **({"rounds": [int(rounds)]} if rounds else {})}
    server = build_server(lambda: Engine.open(vault, cwd=project))
    async with mcp.Client(server) as client:
        assert not (await client.call_tool("read_raw", arguments)).is_error
    (row,) = json.loads(osk(vault, "stats", "--json", cwd=project))
    assert (row["injected"], row["opened"]) == (1, opened)
