"""The real `osk mcp` process over stdio, driven by the official `mcp` client."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import mcp
import pytest
from serverkit import HUB, ok, params, snapshot

from osk.calls.request import NewNode
from osk.engine.core import REFRESH_SECONDS
from osk.store.ledger import Ledger
from osk.store.vault import Vault
from osk.surfaces.server import TOOL_NAMES
from osk.verbs import validate

pytestmark = pytest.mark.anyio

async def test_the_real_server_lists_twelve_strict_tools_and_rejects_a_misspelling(
        vault: Vault, repo: Path):
    async with mcp.Client(params(vault, repo), mode="legacy") as client:
        tools = (await client.list_tools()).tools
        assert [t.name for t in tools] == list(TOOL_NAMES)
        assert all(t.input_schema["additionalProperties"] is False for t in tools)
        await ok(client, "create_node", HUB)
        before = snapshot(vault.root)
        result = await client.call_tool("update_node", {"node": "cache", "body": "Gone.\n",
                                                        "expect_hahs": "whatever"})
        assert result.is_error
        assert "unknown argument(s) 'expect_hahs'" in result.content[0].text
        assert snapshot(vault.root) == before


async def test_cite_search_change_the_source_see_the_candidate_read_recite_and_close_over_stdio(
        vault: Vault, repo: Path):
    async with mcp.Client(params(vault, repo)) as client:
        raw = await ok(client, "append_raw", {"conversation": "c1", "user": "Cache TTL?",
                                              "assistant": "60 seconds, set in config.py."})
        await ok(client, "create_node", HUB)
        await ok(client, "create_node", {**HUB, "title": "TTL source", "summary": "the TTL",
                                          "body": "The TTL is 60 seconds.\n"})
        cited = await ok(client, "create_node", {
            **HUB, "title": "Cache policy", "summary": "how long entries live",
            "body": "Entries live a while.\n",
            "derived_from": ["[[TTL source]]", f"[[{raw['coordinate']}]]"]})
        assert cited["scope"] == "app" and cited["bound"]
        hits = (await ok(client, "search", {"query": "entries live"}))["hits"]
        assert hits[0]["title"] == "Cache policy" and hits[0]["markers"] == []

        source = vault.root / "Scope/app/cache/TTL source.md"  # a person edits it by hand
        # Only the body's words: a bare "60" could also occur in the node's hex id.
        source.write_text(source.read_text(encoding="utf-8").replace("60 seconds", "90 seconds"),
                          encoding="utf-8")
        os.utime(source, ns=(source.stat().st_atime_ns, source.stat().st_mtime_ns + 10**9))
        view = await ok(client, "overview", {})
        (candidate,) = [c for c in view["rechecks"] if c["citing_title"] == "Cache policy"]
        assert candidate["target"] == "[[TTL source]]" and candidate["next"] == []
        hits = (await ok(client, "search", {"query": "entries live"}))["hits"]
        assert "recheck" in hits[0]["markers"]

        unread = await client.call_tool("update_node", {"node": "Cache policy",
                                                        "recheck_of": [candidate["id"]]})
        assert unread.is_error and "recheck-read-first" in unread.content[0].text
        page = await ok(client, "read_node", {"node": "TTL source"})
        assert "90 seconds" in page["text"]
        recited = await ok(client, "update_node", {"node": "Cache policy",
                                                   "recheck_of": [candidate["id"]]})
        assert recited["action"] == "recited" and recited["closed"] == [candidate["id"]]
        view = await ok(client, "overview", {})
        assert [c for c in view["rechecks"] if c["citing_title"] == "Cache policy"] == []


async def test_two_server_processes_writing_at_once_lose_nothing(vault: Vault, repo: Path,
                                                                 tmp_path: Path):
    """Each write one server acknowledges is found through the other server at once: the
    vault generation (osk.store.generation) makes reads exact for osk's own writers, with no
    waiting, however the two sessions interleave."""
    other = tmp_path / "work" / "other-checkout"
    subprocess.run(["git", "worktree", "add", "-q", "--detach", str(other)], cwd=repo,
                   check=True)
    per_session = int(os.environ.get("OSK_CONCURRENT_WRITES", "6"))  # raise by hand to soak
    async with mcp.Client(params(vault, repo)) as first, \
            mcp.Client(params(vault, other)) as second:
        await ok(first, "create_node", {**HUB, "title": "shared", "cluster": "shared",
                                         "space": "domain"})
        start = await ok(first, "scope_memory", {"action": "read"})
        await ok(first, "scope_memory", {"action": "replace", "text": "<!-- end -->\n",
                                         "expect_hash": start["hash"]})

        async def session(client: mcp.Client, peer: mcp.Client, name: str) -> None:
            for i in range(per_session):
                title = f"{name} fact {i}"
                await ok(client, "create_node", {**HUB, "title": title,
                                                  "summary": f"fact {i} from {name}",
                                                  "body": f"Draft {name}{i}.\n",
                                                  "space": "domain", "cluster": "shared"})
                found = (await ok(peer, "search", {"query": title, "k": 50}))["hits"]
                assert title in {h["title"] for h in found}
                await ok(client, "update_node", {"node": title, "old_text": f"Draft {name}{i}",
                                                  "new_text": f"Final {name}{i}"})
                assert f"Final {name}{i}" in (await ok(peer, "read_node",
                                                       {"node": title}))["text"]
                await ok(client, "append_raw", {"conversation": f"conv-{name}", "user": f"q{i}",
                                                "assistant": f"a{i}"})
                await ok(client, "scope_memory", {"action": "edit", "edits": [
                    {"old_text": "<!-- end -->", "new_text": f"- {name} {i}\n<!-- end -->"}]})
            await ok(client, "record_candidate", {"type": "duplication",
                                                  "parties": [f"{name} fact 0", f"{name} fact 1"]})

        async with anyio.create_task_group() as group:
            group.start_soon(session, first, second, "A")
            group.start_soon(session, second, first, "B")
        hits = (await ok(second, "search", {"query": "fact", "k": 50}))["hits"]

    titles = {h["title"] for h in hits}
    assert {f"{n} fact {i}" for n in "AB" for i in range(per_session)} <= titles
    note = (vault.memory_dir / "app.md").read_text(encoding="utf-8")
    assert sorted(line for line in note.splitlines() if line.startswith("- ")) == sorted(
        f"- {n} {i}" for n in "AB" for i in range(per_session))
    for path in sorted(vault.ledger_dir.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            json.loads(line)
        assert Ledger(vault, path.stem).read().forks() == []
    assert len(Ledger(vault, "candidates").read().records) == 2
    assert validate.run(vault) == []


async def test_a_hand_edit_is_found_by_a_search_a_second_after_it(vault: Vault, repo: Path):
    """What the generation cannot show (an editor's change) the once-a-second walk finds:
    a search that starts REFRESH_SECONDS after the edit sees it (docs/search.md)."""
    async with mcp.Client(params(vault, repo)) as client:
        await ok(client, "create_node", HUB)
        assert (await ok(client, "search", {"query": "cache"}))["hits"]  # the walk has run
        path = vault.root / "Scope/app/cache/cache.md"
        path.write_text(path.read_text(encoding="utf-8").replace(
            "The cache hub.", "The cache hub, rewritten by hand: zeppelin."), encoding="utf-8")
        await anyio.sleep(REFRESH_SECONDS)  # the documented bound, counted from the edit
        hits = (await ok(client, "search", {"query": "zeppelin"}))["hits"]
        assert [h["title"] for h in hits] == ["cache"]
        page = await ok(client, "read_node", {"node": "cache"})
        assert "zeppelin" in page["text"]


def test_the_server_writes_nothing_but_protocol_messages_to_stdout(vault: Vault, repo: Path):
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw-test", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "create_node", "arguments": HUB}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "search", "arguments": {"query": "cache", "bogus": True}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/list"},
    ]
    stdin = "".join(json.dumps(m) + "\n" for m in messages)
    env = {k: v for k, v in os.environ.items() if k != "OSK_VAULT"}
    env["OSK_VAULT"] = str(vault.root)
    process = subprocess.Popen([sys.executable, "-m", "osk", "mcp"], cwd=repo, env=env,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, encoding="utf-8")
    replies: dict[int, dict[str, Any]] = {}
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(stdin)
    process.stdin.flush()
    watchdog = threading.Timer(60, process.kill)  # bounds the wait if the server hangs
    watchdog.start()
    try:
        for line in process.stdout:  # the server answers four requests, then we close stdin
            message = json.loads(line)
            assert message["jsonrpc"] == "2.0"
            replies[message["id"]] = message
            if len(replies) == 4:
                break
        rest, _err = process.communicate(timeout=60)
    finally:
        watchdog.cancel()
        if process.poll() is None:
            process.kill()
            process.wait()
    assert rest.strip() == ""
    assert sorted(replies) == [1, 2, 3, 4]
    assert replies[2]["result"]["structuredContent"]["path"] == "Scope/app/cache/cache.md"
    assert replies[3]["result"]["isError"] is True
    assert len(replies[4]["result"]["tools"]) == 12


def test_osk_mcp_without_a_vault_exits_with_a_clear_error(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if k != "OSK_VAULT"}
    result = subprocess.run([sys.executable, "-m", "osk", "mcp"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, encoding="utf-8", timeout=60,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 2
    assert result.stdout == ""
    assert "no osk vault found" in result.stderr


# -- the stdio front: a handshake at once, an answer to every line ------------------------------
def _spawn(vault: Vault, cwd: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "OSK_VAULT"}
    return subprocess.Popen([sys.executable, "-m", "osk", "--vault", str(vault.root), "mcp"],
                            cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "raw-test", "version": "0"}}}


def _handshake(vault: Vault, repo: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """initialize and tools/list answered by a fresh server; a search closes the run."""
    from osk.hosts.connect import ReplyLines, close_server, send_message

    proc = _spawn(vault, repo)
    deadline = __import__("time").monotonic() + 120
    try:
        lines = ReplyLines(proc)
        send_message(proc, INITIALIZE)
        init = lines.response(1, deadline)
        send_message(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        send_message(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        listed = lines.response(2, deadline)
        send_message(proc, {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                            "params": {"name": "search", "arguments": {"query": "cache"}}})
        assert lines.response(3, deadline)["result"]["isError"] is False
    finally:
        close_server(proc)
    return init, listed


def test_a_later_server_answers_the_handshake_the_sdk_gave_the_first_one(vault: Vault,
                                                                         repo: Path):
    kept = vault.state("mcp", "handshake.json")
    assert not kept.exists()

    first = _handshake(vault, repo)  # answered by the SDK, which the front learns from

    assert kept.is_file()
    again = _handshake(vault, repo)  # answered by the front from what it kept
    assert again == first
    assert first[0]["result"]["protocolVersion"] == "2025-06-18"
    assert first[0]["result"]["capabilities"]["tools"]["listChanged"] is True
    assert [t["name"] for t in again[1]["result"]["tools"]] == list(TOOL_NAMES)


def test_the_shipped_handshake_is_what_the_sdk_answers_now(tmp_path: Path):
    """A vault's first server answers from osk/surfaces/handshake.json before the SDK is
    imported: it must be what the SDK would say (else hosts get a stale list first)."""
    import importlib.util

    from osk.surfaces.stdio import SHIPPED_HANDSHAKE

    generator = Path(__file__).resolve().parents[2] / "scripts" / "gen_handshake.py"
    spec = importlib.util.spec_from_file_location("gen_handshake", generator)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    learned = module.learn(tmp_path)

    assert learned == json.loads(SHIPPED_HANDSHAKE.read_text(encoding="utf-8")), (
        "osk/surfaces/handshake.json is out of date: run `.venv/bin/python "
        "scripts/gen_handshake.py`")


MALFORMED: list[tuple[bytes, object, str]] = [  # a line, the id its answer carries, a phrase
    (b'{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"create_node",'
     b'"arguments":{"title":"a\\ud800b"}}}', 10,
     "argument 'title' holds a lone surrogate (\\ud800)"),
    (b'{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"create_node",'
     b'"arguments":{"derived_from":' + b"[" * 200 + b"]" * 200 + b"}}}", 11,
     "argument 'derived_from'"),
    (b'{"jsonrpc":"2.0","id":12,"method":"tools/call","params":' + b"[" * 100_000
     + b"]" * 100_000 + b"}", 12, "nested more than"),
    (b'{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":', 13, "Parse error"),
    (b'{"jsonrpc":"2.0","id":"x14","method":"ping","params":{"a":"\xff"}}', "x14", "not UTF-8"),
    (b'{"jsonrpc":"2.0","id":15,"method":5}', 15, "Invalid request"),
    (b'{"jsonrpc":"2.0","id":16,"method":"no/such/method"}', 16, "not found"),
    (b'{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"search",'
     b'"arguments":{"query":"' + b"q" * (9 * 1024 * 1024) + b'"}}}', 17, "longer than"),
    (b'{"jsonrpc":"2.0","id":19,"method":"resources/read","params":{"uri":5}}', 19,
     "Invalid params: resources/read: uri: Input should be a valid string"),
    (b'[{"jsonrpc":"2.0","id":18,"method":"ping"}]', None, "batches"),
    (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', None, "id must be"),
]


def test_every_malformed_line_gets_an_answer_that_says_what_is_wrong(vault: Vault, repo: Path):
    from osk.hosts.connect import ReplyLines, close_server, send_message

    proc = _spawn(vault, repo)
    deadline = __import__("time").monotonic() + 120
    try:
        lines = ReplyLines(proc)
        send_message(proc, INITIALIZE)
        lines.response(1, deadline)
        send_message(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert proc.stdin is not None
        for line, _id, _phrase in MALFORMED:
            proc.stdin.write(line + b"\n")
        proc.stdin.flush()
        # still serving after all
        send_message(proc, {"jsonrpc": "2.0", "id": 99, "method": "ping"})
        answers: dict[object, str] = {}
        unnamed: list[str] = []
        # every line answered (the ping may be the front's, before the SDK answers the rest)
        named = {id_ for _, id_, _ in MALFORMED if id_ is not None} | {99}
        while not named <= answers.keys() or len(unnamed) < 2:
            while b"\n" not in lines.buffer:
                assert lines.selector.select(deadline - __import__("time").monotonic())
                lines.buffer += os.read(lines.fd, 65536)
            raw, lines.buffer = lines.buffer.split(b"\n", 1)
            message = json.loads(raw)
            text = json.dumps(message.get("error") or message.get("result"))
            if message.get("id") is None:
                unnamed.append(text)
            else:
                answers[message["id"]] = text
    finally:
        close_server(proc)
    for line, id_, phrase in MALFORMED:
        found = answers.get(id_) if id_ is not None else " ".join(unnamed)
        assert found is not None, f"no answer to {line[:80]!r}"
        assert phrase in found.replace("\\\\", "\\"), (line[:80], found)


# -- one protocol generation per connection ----------------------------------------------------
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "raw-test", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": {}}


def _probe_then_initialize(vault: Vault, repo: Path) -> tuple[str, dict[str, Any]]:
    """Claude Code's opening (2.1.332): a server/discover probe and, before its answer, an
    initialize. The host keeps the generation whose answer succeeds first and makes a search
    in it; returns that generation and the search's answer."""
    from osk.hosts.connect import ReplyLines, close_server, send_message

    proc = _spawn(vault, repo)
    deadline = __import__("time").monotonic() + 120
    try:
        lines = ReplyLines(proc)
        send_message(proc, {"jsonrpc": "2.0", "id": "probe", "method": "server/discover",
                            "params": {"_meta": ENVELOPE}})
        send_message(proc, {**INITIALIZE, "id": 0})
        first = lines.next_answer(deadline, {"probe", 0})
        if "error" in first:
            first = lines.next_answer(deadline, {"probe", 0} - {first["id"]})
        chosen = "envelope" if first["id"] == "probe" else "classic"
        params: dict[str, Any] = {"name": "search", "arguments": {"query": "cache"}}
        if chosen == "envelope":
            params["_meta"] = ENVELOPE
        else:
            send_message(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        send_message(proc, {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": params})
        return chosen, lines.response(5, deadline)
    finally:
        close_server(proc)


def test_a_probe_then_an_initialize_is_served_in_one_generation(vault: Vault, repo: Path):
    """The handshake a classic client left behind (doctor's) must not answer Claude Code's
    initialize while the SDK serves its probe: every tool call then failed."""
    _handshake(vault, repo)  # a classic run keeps its handshake, as `osk doctor` did
    for run in range(2):  # the second run answers the probe from what the first kept
        chosen, called = _probe_then_initialize(vault, repo)
        assert "error" not in called and called["result"]["isError"] is False, (run, called)
        assert chosen == "envelope"


# -- a first search while the SDK loads --------------------------------------------------------
def _three_searches(vault: Vault, repo: Path, envelope: bool) -> tuple[dict[str, Any], ...]:
    """A search sent with the handshake (the front answers it while the SDK loads, when it
    kept what it needs), then, once the SDK serves (an overview answered), the same search
    (the front answers it with the open engine), then the same with ``as_of`` given as null
    (an argument only the SDK's side takes: the SDK answers it)."""
    from osk.hosts.connect import ReplyLines, close_server, send_message

    proc = _spawn(vault, repo)
    deadline = __import__("time").monotonic() + 120
    meta = {"_meta": ENVELOPE} if envelope else {}
    search = {"name": "search", "arguments": {"query": "cache hub", "k": 5}, **meta}
    try:
        lines = ReplyLines(proc)
        if envelope:
            send_message(proc, {"jsonrpc": "2.0", "id": "probe", "method": "server/discover",
                                "params": {"_meta": ENVELOPE}})
        else:
            send_message(proc, INITIALIZE)
            send_message(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        send_message(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": search})
        first = lines.response(2, deadline)
        send_message(proc, {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                            "params": {"name": "overview", "arguments": {}, **meta}})
        lines.response(3, deadline)
        send_message(proc, {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": search})
        served = lines.response(4, deadline)
        by_sdk = {**search, "arguments": {**search["arguments"], "as_of": None}}
        send_message(proc, {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": by_sdk})
        return first, served, lines.response(5, deadline)
    finally:
        close_server(proc)


def test_the_early_answer_has_the_fields_of_the_sdks_result_models():
    """The early search builds the result without pydantic (``plain_search_out``): its field
    lists must be the models' own, and its dump theirs."""
    from osk.search.ranking import Hit, SearchResult
    from osk.surfaces import early
    from osk.surfaces.search_models import HitOut, SearchOut, as_search_out

    assert tuple(SearchOut.model_fields) == early.SEARCH_FIELDS
    assert tuple(HitOut.model_fields) == early.HIT_FIELDS
    result = SearchResult("atlas", "캐시 hub", (
        Hit("캐시 정책", "Scope/atlas/x/캐시 정책.md", "n1", "요약 \u2028 \"q\"", "2026-12-01",
            12.5, ("pending", "inferred"), space="Scope", scope="atlas"),
        Hit("Round 3", "_raw/k/c", "_raw/k/c#Round 3", "an excerpt", "2026-11-30", 0.25)))
    dumped = as_search_out(result)
    assert early.plain_search_out(result) == dumped.model_dump(mode="json", by_alias=True)
    import pydantic_core

    assert early.json_text(early.plain_search_out(result)) == pydantic_core.to_json(
        dumped, indent=2).decode()


@pytest.mark.parametrize("envelope", [False, True], ids=["classic", "envelope"])
def test_a_search_the_front_answers_is_the_one_the_sdk_gives(
        vault: Vault, repo: Path, envelope: bool):
    """Before the SDK serves (from the store or the engine) and after (the open engine)."""
    from osk.engine.core import Engine

    Engine.open(vault, cwd=repo).create_node(NewNode(
        **{**HUB, "derived_from": []}))
    _three_searches(vault, repo, envelope)  # keeps the handshake of this generation
    early, served, by_sdk = _three_searches(vault, repo, envelope)
    assert early["result"]["isError"] is False, early
    assert [h["title"] for h in early["result"]["structuredContent"]["hits"]] == ["cache"]
    assert early["result"] == served["result"] == by_sdk["result"]
