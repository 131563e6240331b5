"""The MCP surface, driven in-process with the official client (`mcp.Client(server)`)."""

from __future__ import annotations

import logging
import subprocess
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import mcp
import pytest
from serverkit import ok, snapshot

from osk.engine.core import Engine
from osk.errors import SurfaceError
from osk.store.ledger import Ledger
from osk.store.vault import Vault
from osk.surfaces import server as server_mod
from osk.surfaces import tool_models
from osk.surfaces.server import TOOL_NAMES, build_server

pytestmark = pytest.mark.anyio

HUB = {"title": "cache", "summary": "What we know about the cache", "body": "The cache hub.\n",
       "space": "scope", "cluster": "cache", "drafter": "test-model"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=path, check=True)
    subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "root"], cwd=path, check=True)
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "work" / "app")


@pytest.fixture
def server(vault: Vault, repo: Path):
    return build_server(lambda: Engine.open(vault, cwd=repo))


async def refused(client: mcp.Client, name: str, args: dict[str, Any]) -> str:
    result = await client.call_tool(name, args)
    assert result.is_error, result.structured_content
    return result.content[0].text


async def create(client: mcp.Client, title: str, body: str = "Body.\n", **extra: Any) -> dict:
    args = {**HUB, "title": title, "summary": f"about {title}", "body": body, **extra}
    return await ok(client, "create_node", args)


# -- the tool list and its contract -----------------------------------------------------------
async def test_the_server_lists_exactly_the_twelve_tools(server):
    async with mcp.Client(server) as client:
        tools = (await client.list_tools()).tools
    assert [t.name for t in tools] == list(TOOL_NAMES)
    assert len(tools) == 12


async def test_every_input_schema_forbids_additional_properties_at_every_level(server):
    async with mcp.Client(server) as client:
        tools = (await client.list_tools()).tools
    for tool in tools:
        schema = tool.input_schema
        assert schema["additionalProperties"] is False, tool.name
        for name, definition in schema.get("$defs", {}).items():
            if definition.get("type") == "object":
                assert definition["additionalProperties"] is False, (tool.name, name)
        assert tool.output_schema is not None and "scope" in tool.output_schema["properties"]


async def test_no_tool_is_named_for_deleting_or_a_persons_decision(server):
    async with mcp.Client(server) as client:
        names = [t.name for t in (await client.list_tools()).tools]
    for verb in ("delete", "remove", "approve", "revert", "protect", "confirm", "reject",
                 "exclude", "include"):
        assert not any(verb in name for name in names)


VALID_ARGS: dict[str, dict[str, Any]] = {
    "search": {"query": "cache"},
    "read_node": {"node": "cache"},
    "read_raw": {"coordinate": "_raw/app/c1#Round 1"},
    "overview": {},
    "run_validators": {},
    "create_node": {**HUB, "title": "New node"},
    "update_node": {"node": "cache", "old_text": "hub", "new_text": "hub!"},
    "move_nodes": {"nodes": ["cache"], "space": "domain", "cluster": "cache"},
    "move_cluster": {"cluster": "cache", "space": "scope", "to_space": "domain"},
    "record_candidate": {"type": "duplication", "parties": ["cache", "other"]},
    "append_raw": {"conversation": "c1", "user": "hi", "assistant": "hello"},
    "scope_memory": {"action": "replace", "text": "note", "expect_hash": "0" * 64},
}


@pytest.mark.parametrize("tool", TOOL_NAMES)
async def test_a_misspelt_argument_is_rejected_by_name_and_nothing_is_written(
        vault: Vault, server, tool: str):
    assert set(VALID_ARGS) == set(TOOL_NAMES)
    before = snapshot(vault.root)
    async with mcp.Client(server) as client:
        text = await refused(client, tool, {**VALID_ARGS[tool], "expect_hsah": "abc"})
    assert "unknown argument(s) 'expect_hsah'" in text
    assert "Nothing was done" in text
    assert snapshot(vault.root) == before


async def test_an_invalid_value_is_explained_per_argument(server):
    async with mcp.Client(server) as client:
        text = await refused(client, "search", {"query": "x", "k": 500})
        missing = await refused(client, "create_node", {"title": "x"})
        memory = await refused(client, "scope_memory", {"action": "replace", "text": "x"})
        pasted = await refused(client, "search", {"query": "word " * 1000})
    assert "k: Input should be less than or equal to 50" in text
    assert "query: String should have at most 4000 characters" in pasted
    assert "missing required argument 'summary'" in missing
    assert "action 'replace' needs expect_hash" in memory


def lax_specs() -> tuple[server_mod.Spec, ...]:
    class LaxSearchArgs(tool_models.ArgModelBase):
        query: str

    return tuple(replace(s, args=LaxSearchArgs) if s.name == "search" else s
                 for s in server_mod.SPECS)


def test_the_server_refuses_to_start_when_an_argument_model_drops_unknown_fields(
        monkeypatch, vault):
    monkeypatch.setattr(server_mod, "SPECS", lax_specs())
    with pytest.raises(SurfaceError) as caught:
        build_server(lambda: None)
    message = str(caught.value)
    assert "will not start" in message and "search:" in message
    assert "does not forbid unknown fields" in message
    assert "additionalProperties: false" in message


def test_the_server_refuses_to_start_when_the_early_rejection_is_missing(monkeypatch):
    monkeypatch.setattr(server_mod.StrictTool, "unknown_arguments", lambda self, args: [])
    with pytest.raises(SurfaceError, match="does not name unknown arguments"):
        build_server(lambda: None)


def test_the_server_refuses_to_start_when_the_published_schema_is_open(monkeypatch):
    real = server_mod._tool

    def open_schema(spec, surface):
        tool = real(spec, surface)
        tool.parameters = {k: v for k, v in tool.parameters.items()
                           if k != "additionalProperties"}
        return tool

    monkeypatch.setattr(server_mod, "_tool", open_schema)
    with pytest.raises(SurfaceError, match="additionalProperties: false"):
        build_server(lambda: None)


def test_the_server_refuses_to_start_with_a_tool_missing_or_extra(monkeypatch):
    monkeypatch.setattr(server_mod, "SPECS", server_mod.SPECS[:-1])
    with pytest.raises(SurfaceError, match="expected exactly"):
        build_server(lambda: None)


# -- results and errors ---------------------------------------------------------------------
async def test_every_result_names_the_active_scope(server):
    async with mcp.Client(server) as client:
        results = [
            await ok(client, "overview", {}),
            await ok(client, "create_node", HUB),
            await ok(client, "search", {"query": "cache"}),
            await ok(client, "read_node", {"node": "cache"}),
            await ok(client, "append_raw", {"conversation": "c1", "user": "u", "assistant": "a"}),
            await ok(client, "read_raw", {"coordinate": "_raw/app/c1#Round 1"}),
            await ok(client, "scope_memory", {"action": "read"}),
            await ok(client, "run_validators", {}),
        ]
    assert {r["scope"] for r in results} == {"app"}


async def test_a_refusal_returns_its_message_and_rule_and_writes_nothing(vault: Vault, server):
    async with mcp.Client(server) as client:
        await ok(client, "create_node", HUB)
        before = snapshot(vault.root)
        text = await refused(client, "create_node", {**HUB, "title": "Cache"})
    assert "title 'Cache' is taken" in text and "(rule: unique-portable-titles)" in text
    assert snapshot(vault.root) == before


async def test_an_unexpected_exception_is_logged_with_its_traceback_and_reported_as_a_bug(
        caplog):
    class Broken:
        scope = "app"
        calls = threading.RLock()  # what the surface holds around each call, as Engine's

        def overview(self):
            raise RuntimeError("kaboom in the engine")

    async with mcp.Client(build_server(lambda: Broken())) as client:
        with caplog.at_level(logging.ERROR, logger="osk.surfaces.server"):
            text = await refused(client, "overview", {})
    assert "internal error (RuntimeError)" in text and "kaboom" not in text
    record = next(r for r in caplog.records if r.name == "osk.surfaces.server")
    assert record.exc_info is not None and "kaboom in the engine" in str(record.exc_info[1])


async def test_the_engine_is_opened_once_for_all_calls(vault: Vault, repo: Path):
    opened = []

    def factory():
        opened.append(1)
        return Engine.open(vault, cwd=repo)

    async with mcp.Client(build_server(factory)) as client:
        await ok(client, "overview", {})
        await ok(client, "scope_memory", {"action": "read"})
    assert opened == [1]


# -- writing and reading ------------------------------------------------------------------------
async def test_create_search_read_and_replace_with_the_read_hash(vault: Vault, server):
    async with mcp.Client(server) as client:
        hub = await ok(client, "create_node", HUB)
        assert hub["action"] == "created" and hub["path"] == "Scope/app/cache/cache.md"
        await create(client, "Cache TTL", "The TTL is 60 seconds.\n")
        hits = (await ok(client, "search", {"query": "TTL seconds"}))["hits"]
        assert hits[0]["title"] == "Cache TTL"
        assert set(hits[0]) == {"title", "path", "id", "summary", "updated", "score", "markers"}
        page = await ok(client, "read_node", {"node": "Cache TTL"})
        assert page["complete"] and page["hash"]
        stale = await refused(client, "update_node", {"node": "Cache TTL", "body": "x\n",
                                                      "expect_hash": "0" * 64})
        assert "changed since you read it" in stale
        done = await ok(client, "update_node", {"node": "Cache TTL", "expect_hash": page["hash"],
                                                "body": "The TTL is 90 seconds.\n"})
        assert done["action"] == "updated" and done["hash"] != page["hash"]
        partial = await ok(client, "read_node", {"node": "Cache TTL", "length": 5})
        assert partial["text"] == "The T" and partial["hash"] is None
    assert "90 seconds" in (vault.root / "Scope/app/cache/Cache TTL.md").read_text(
        encoding="utf-8")


async def test_a_raw_round_is_captured_read_and_cited_and_the_vault_validates(server):
    async with mcp.Client(server) as client:
        raw = await ok(client, "append_raw", {"conversation": "c1", "user": "What TTL?",
                                              "assistant": "60 seconds.", "completion": "t1"})
        assert raw["coordinate"] == "_raw/app/c1#Round 1" and not raw["duplicate"]
        again = await ok(client, "append_raw", {"conversation": "c1", "user": "What TTL?",
                                                "assistant": "60 seconds.", "completion": "t1"})
        assert again["duplicate"]
        read = await ok(client, "read_raw", {"coordinate": raw["coordinate"]})
        assert "60 seconds." in read["text"]
        await ok(client, "create_node", HUB)
        await create(client, "Cache TTL", derived_from=[f"[[{raw['coordinate']}]]"])
        report = await ok(client, "run_validators", {})
    assert report["clean"] and report["findings"] == []


async def test_run_validators_reports_a_broken_file_and_changes_nothing(vault: Vault, server):
    (vault.root / "Domain" / "Broken.md").write_text("no front matter\n", encoding="utf-8")
    async with mcp.Client(server) as client:
        await ok(client, "overview", {})
        before = snapshot(vault.root)
        report = await ok(client, "run_validators", {})
    assert not report["clean"]
    assert report["findings"] == [{"rule": "node-contract", "path": "Domain/Broken.md",
                                   "message": report["findings"][0]["message"]}]
    assert snapshot(vault.root) == before


async def test_moves_keep_titles_and_report_before_and_after(server):
    async with mcp.Client(server) as client:
        await ok(client, "create_node", HUB)
        await create(client, "Cache TTL")
        moved = await ok(client, "move_cluster", {"cluster": "cache", "space": "scope",
                                                  "to_space": "Domain"})
        assert {m["after"] for m in moved["moved"]} == {"Domain/cache/cache.md",
                                                        "Domain/cache/Cache TTL.md"}
        await ok(client, "create_node", {**HUB, "title": "redis", "cluster": "redis",
                                         "space": "domain"})
        one = await ok(client, "move_nodes", {"nodes": ["Cache TTL"], "space": "domain",
                                              "cluster": "redis"})
        assert one["moved"][0]["after"] == "Domain/redis/Cache TTL.md"
        assert (await ok(client, "read_node", {"node": "Cache TTL"}))["path"] == \
            "Domain/redis/Cache TTL.md"


# -- candidates -------------------------------------------------------------------------------
async def test_a_candidate_is_filed_once_and_marks_its_parties(vault: Vault, server):
    async with mcp.Client(server) as client:
        await ok(client, "create_node", HUB)
        await create(client, "TTL is 60s", "The TTL is 60 seconds.\n")
        await create(client, "TTL is 5m", "The TTL is five minutes.\n")
        args = {"type": "contradiction", "parties": ["TTL is 60s", "TTL is 5m"],
                "note": "which holds?"}
        first = await ok(client, "record_candidate", args)
        again = await ok(client, "record_candidate",
                         {**args, "parties": ["TTL is 5m", "TTL is 60s"]})
        assert first["created"] and not again["created"]
        assert again["candidate"]["key"] == first["candidate"]["key"]
        view = await ok(client, "overview", {})
        assert [c["type"] for c in view["conflicts"]] == ["contradiction"]
        hits = (await ok(client, "search", {"query": "TTL"}))["hits"]
        assert all("conflict" in h["markers"] for h in hits if h["title"].startswith("TTL is"))
        bad = await refused(client, "record_candidate", {"type": "contradiction",
                                                         "parties": ["TTL is 60s", "Nowhere"]})
        assert "Nowhere" in bad
    assert len(Ledger(vault, "candidates").read().records) == 1


# -- scope memory -------------------------------------------------------------------------------
async def test_scope_memory_read_replace_edit_and_refuse_over_the_cap(vault: Vault, server):
    async with mcp.Client(server) as client:
        empty = await ok(client, "scope_memory", {"action": "read"})
        wrote = await ok(client, "scope_memory", {"action": "replace", "expect_hash":
                                                  empty["hash"], "text": "- build: make\n"})
        assert wrote["changed"] and wrote["text"] == "- build: make\n" and wrote["cap"] == 1500
        edited = await ok(client, "scope_memory", {"action": "edit", "edits": [
            {"old_text": "make", "new_text": "make all"}]})
        assert edited["text"] == "- build: make all\n"
        over = await refused(client, "scope_memory", {"action": "replace",
                                                      "expect_hash": edited["hash"],
                                                      "text": "x" * 1501})
        assert "1,501" in over and "1,500" in over and "(rule: refuse-over-cap)" in over
        bad_edit = await refused(client, "scope_memory", {"action": "edit", "edits": [
            {"old_text": "make", "new_text": "x", "typo": 1}]})
        assert "unknown argument 'edits.0.typo'" in bad_edit
    assert (vault.memory_dir / "app.md").read_text(encoding="utf-8") == "- build: make all\n"


async def test_evicted_lines_are_pending_in_overview_until_settled_into_a_node(server):
    note = "".join(f"- fact {i}: {'detail ' * 6}\n" for i in range(20))
    async with mcp.Client(server) as client:
        start = await ok(client, "scope_memory", {"action": "read"})
        wrote = await ok(client, "scope_memory", {"action": "replace", "text": note,
                                                  "expect_hash": start["hash"]})
        await refused(client, "scope_memory", {"action": "replace", "text": note * 3,
                                               "expect_hash": wrote["hash"]})
        short = await ok(client, "scope_memory", {"action": "replace", "text": "- see [[cache]]\n",
                                                  "expect_hash": wrote["hash"]})
        assert short["eviction"] and len(short["eviction"]["lines"]) == 20
        view = await ok(client, "overview", {})
        assert [e["id"] for e in view["pending_evictions"]] == [short["eviction"]["id"]]
        await ok(client, "create_node", HUB)
        settled = await ok(client, "scope_memory", {"action": "settle", "node": "cache",
                                                    "eviction": short["eviction"]["id"]})
        assert settled["pending_evictions"] == []
        assert (await ok(client, "overview", {}))["pending_evictions"] == []


# -- rechecks -----------------------------------------------------------------------------------
async def test_a_changed_source_reopens_its_citer_until_it_is_read_and_recited(server):
    async with mcp.Client(server) as client:
        await ok(client, "create_node", HUB)
        await create(client, "TTL source", "The TTL is 60 seconds.\n")
        await create(client, "Cache policy", "Entries live 60 s.\n",
                     derived_from=["[[TTL source]]"])
        assert (await ok(client, "overview", {}))["rechecks"] == []
        await ok(client, "update_node", {"node": "TTL source", "old_text": "60 seconds",
                                         "new_text": "60 seconds (per region)"})
        (candidate,) = (await ok(client, "overview", {}))["rechecks"]
        assert candidate["citing_title"] == "Cache policy"
        assert candidate["target"] == "[[TTL source]]"
        hits = (await ok(client, "search", {"query": "Cache policy"}))["hits"]
        assert "recheck" in hits[0]["markers"]
        unread = await refused(client, "update_node", {"node": "Cache policy",
                                                       "recheck_of": [candidate["id"]]})
        assert "recheck-read-first" in unread
        await ok(client, "read_node", {"node": "TTL source"})
        recited = await ok(client, "update_node", {"node": "Cache policy",
                                                   "recheck_of": [candidate["id"]]})
        assert recited["action"] == "recited" and recited["closed"] == [candidate["id"]]
        assert recited["recited"] == ["Cache policy"] and recited["pending"] is False
        assert (await ok(client, "overview", {}))["rechecks"] == []
