"""The stdio front of `osk mcp` (osk.surfaces.stdio) in process: what it answers before the SDK is
there, what it leaves for the SDK, and how it learns a changed handshake."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from osk.surfaces import stdio
from osk.surfaces.stdio import Front, Handshake, Refusal, Wire

TOOLS = {"tools": [{"name": "search", "inputSchema": {"type": "object"}}]}
INIT_RESULT = {"capabilities": {"tools": {"listChanged": True}},
               "serverInfo": {"name": "osk", "version": "0"}, "instructions": "hello"}


class Pipe:
    """A front whose wire is a pipe this test reads."""

    def __init__(self, tmp_path: Path, cached: Handshake | None, *, own: bool = True) -> None:
        self.read_fd, write_fd = os.pipe()
        self.path = tmp_path / "handshake.json"
        self.front = Front(Wire(write_fd), self.path, cached, own=own)

    def send(self, message: dict[str, Any]) -> None:
        self.front.handle(json.dumps(message).encode("utf-8") + b"\n")

    def answers(self) -> list[dict[str, Any]]:
        os.close(self.front.wire.fd)
        with os.fdopen(self.read_fd, "rb") as stream:
            return [json.loads(line) for line in stream]

    def queued(self) -> list[object]:
        found = []
        while not self.front.inbox.empty():
            item = self.front.inbox.get_nowait()
            found.append(item.get("id", item.get("method")) if item else None)
        return found


def kept() -> Handshake:
    return Handshake(["2025-03-26", "2025-06-18"], "2025-06-18", INIT_RESULT, TOOLS)


def initialize(id_: object = 1, version: str = "2025-03-26") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {},
                       "clientInfo": {"name": "t", "version": "0"}}}


def test_before_the_sdk_is_up_the_front_answers_the_handshake_and_queues_the_rest(
        tmp_path: Path) -> None:
    pipe = Pipe(tmp_path, kept())

    pipe.send(initialize(1, "1999-01-01"))
    pipe.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    pipe.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    pipe.send({"jsonrpc": "2.0", "id": 3, "method": "ping"})
    pipe.send({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
               "params": {"name": "search", "arguments": {"query": "x"}}})

    assert pipe.answers() == [
        {"jsonrpc": "2.0", "id": 1, "result": {**INIT_RESULT, "protocolVersion": "2025-06-18"}},
        {"jsonrpc": "2.0", "id": 2, "result": TOOLS},
        {"jsonrpc": "2.0", "id": 3, "result": {}},
    ]
    # The SDK still opens its session with the host's initialize; the tool call waits for it.
    assert pipe.queued() == [1, "notifications/initialized", stdio.PRIVATE_ID, 4]


def test_once_the_sdk_serves_it_answers_tools_list_and_its_initialize_answer_is_dropped(
        tmp_path: Path) -> None:
    pipe = Pipe(tmp_path, kept())
    pipe.send(initialize(7))
    pipe.front.ready.set()

    pipe.send({"jsonrpc": "2.0", "id": 8, "method": "tools/list"})
    sdk_init = {"jsonrpc": "2.0", "id": 7, "result": {**INIT_RESULT, "protocolVersion": "x"}}
    pipe.front.deliver(7, json.dumps(sdk_init))
    pipe.front.deliver(8, json.dumps({"jsonrpc": "2.0", "id": 8, "result": TOOLS}))

    answers = pipe.answers()
    assert [a["id"] for a in answers] == [7, 8]
    assert answers[0]["result"]["protocolVersion"] == "2025-03-26"  # the front's, not the SDK's
    assert pipe.queued() == [7, 8]


def test_a_changed_tool_list_is_kept_for_next_time_and_the_host_is_told(tmp_path: Path) -> None:
    pipe = Pipe(tmp_path, kept())
    pipe.send(initialize(1))
    pipe.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    pipe.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})  # the old list, at once
    pipe.front.ready.set()
    newer = {"tools": [{"name": "search", "description": "new words",
                        "inputSchema": {"type": "object"}}]}

    pipe.front.deliver(1, json.dumps({"jsonrpc": "2.0", "id": 1, "result": INIT_RESULT}))
    pipe.front.deliver(stdio.PRIVATE_ID, json.dumps({"jsonrpc": "2.0", "id": stdio.PRIVATE_ID,
                                                     "result": newer}))

    assert pipe.answers()[-1] == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    saved = Handshake.load(pipe.path)
    assert saved is not None and saved.tools == newer
    assert saved.initialize == INIT_RESULT


def test_without_a_kept_handshake_the_sdk_answers_and_the_front_learns_it(
        tmp_path: Path) -> None:
    pipe = Pipe(tmp_path, None)
    pipe.send(initialize(1))
    pipe.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    pipe.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})

    sdk_init = {"jsonrpc": "2.0", "id": 1, "result": {**INIT_RESULT, "protocolVersion": "v"}}
    pipe.front.deliver(1, json.dumps(sdk_init))
    pipe.front.deliver(stdio.PRIVATE_ID, json.dumps({"jsonrpc": "2.0", "id": stdio.PRIVATE_ID,
                                                     "result": TOOLS}))

    assert pipe.answers() == [sdk_init]  # nothing from the front itself, no list_changed
    assert pipe.queued() == [1, "notifications/initialized", stdio.PRIVATE_ID, 2]
    saved = Handshake.load(pipe.path)
    assert saved is not None and saved.tools == TOOLS and "protocolVersion" not in saved.initialize


def test_a_vault_without_its_own_handshake_is_answered_from_the_shipped_one_and_keeps_its_own(
        tmp_path: Path) -> None:
    shipped = Handshake.load(stdio.SHIPPED_HANDSHAKE)
    assert shipped is not None and shipped.classic
    pipe = Pipe(tmp_path, shipped, own=False)
    pipe.send(initialize(1, "2025-06-18"))
    pipe.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    pipe.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})  # before the SDK is there

    pipe.front.deliver(1, json.dumps({"jsonrpc": "2.0", "id": 1, "result": {
        **shipped.initialize, "protocolVersion": "2025-06-18"}}))
    pipe.front.deliver(stdio.PRIVATE_ID, json.dumps({"jsonrpc": "2.0", "id": stdio.PRIVATE_ID,
                                                     "result": shipped.tools}))

    assert pipe.answers() == [  # the SDK agreed with what shipped: no list_changed
        {"jsonrpc": "2.0", "id": 1, "result": {**shipped.initialize,
                                               "protocolVersion": "2025-06-18"}},
        {"jsonrpc": "2.0", "id": 2, "result": shipped.tools},
    ]
    saved = Handshake.load(pipe.path)  # the vault's own from now on, though the same
    assert saved is not None and saved.to_json() == shipped.to_json()


def test_a_server_side_that_failed_answers_every_waiting_and_later_request(
        tmp_path: Path) -> None:
    pipe = Pipe(tmp_path, None)
    pipe.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "search", "arguments": {"query": "x"}}})
    pipe.send({"jsonrpc": "2.0", "method": "notifications/cancelled"})

    pipe.front.fail("the osk MCP server could not start (ImportError: no mcp)")
    pipe.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})

    answers = pipe.answers()
    assert [(a["id"], a["error"]["code"]) for a in answers] == [(1, -32603), (2, -32603)]
    assert all("ImportError: no mcp" in a["error"]["message"] for a in answers)


def deep(levels: int) -> object:
    value: object = "leaf"
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize(("value", "where"), [
    ({"a": [{"b": "x\ud800"}]}, ["params", "a", 0, "b"]),
    ({"\udfff": 1}, ["params"]),
    (deep(stdio.MAX_DEPTH + 5), ["params", *[0] * stdio.MAX_DEPTH]),
    (deep(5000), ["params", *[0] * stdio.MAX_DEPTH]),  # deeper than Python's recursion limit
])
def test_the_first_problem_is_found_without_recursion(value: object, where: list[object]) -> None:
    found = stdio.first_problem({"params": value})
    assert found is not None and found[0] == where


def test_an_unparsable_line_is_answered_with_the_id_read_off_its_text() -> None:
    refused = stdio.parse(b'{"id": "abc", "method": "tools/call", "params": {')
    assert isinstance(refused, Refusal)
    assert refused.answer["id"] == "abc" and refused.answer["error"]["code"] == -32700


@pytest.mark.parametrize(("params", "phrase"), [
    (None, "needs params, an object with name and arguments (got nothing)"),
    ({"arguments": {}}, "needs params.name, the tool's name as a string (got nothing)"),
    ({"name": "search", "arguments": [1]}, "search: params.arguments must be an object"),
])
def test_a_tool_call_of_the_wrong_shape_is_refused_by_what_is_wrong(
        params: object, phrase: str) -> None:
    refused = stdio.parse(json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                                      "params": params}).encode("utf-8"))
    assert isinstance(refused, Refusal)
    assert refused.answer["id"] == 5 and phrase in refused.answer["error"]["message"]


def test_a_handshake_that_cannot_be_kept_is_reported_and_serving_goes_on(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("", encoding="utf-8")
    pipe = Pipe(tmp_path, None)
    pipe.front.handshake_path = blocker / "handshake.json"
    pipe.send(initialize(1))
    pipe.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    pipe.front.deliver(1, json.dumps({"jsonrpc": "2.0", "id": 1, "result": INIT_RESULT}))

    pipe.front.deliver(stdio.PRIVATE_ID, json.dumps({"jsonrpc": "2.0", "id": stdio.PRIVATE_ID,
                                                     "result": TOOLS}))
    pipe.front.deliver(2, json.dumps({"jsonrpc": "2.0", "id": 2, "result": {}}))

    assert [a["id"] for a in pipe.answers()] == [1, 2]
    assert "the handshake could not be kept" in capsys.readouterr().err


# -- one protocol generation per connection ----------------------------------------------------
ENVELOPE_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                 "io.modelcontextprotocol/clientCapabilities": {}}
DISCOVER_RESULT = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
                   "resultType": "complete"}
ENVELOPE_TOOLS = {**TOOLS, "resultType": "complete"}


def probe(id_: object = "probe-1") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": "server/discover",
            "params": {"_meta": ENVELOPE_META}}


def enveloped(id_: object, method: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": {"_meta": ENVELOPE_META}}


def test_after_a_probe_an_initialize_is_left_to_the_sdk_not_answered_from_the_classic_cache(
        tmp_path: Path) -> None:
    """Claude Code's opening: the probe, then (not answered in time) an initialize. The SDK
    takes the probe's generation; the front must not answer the initialize as classic."""
    pipe = Pipe(tmp_path, kept())
    pipe.send(probe())
    pipe.send(initialize(0, "2025-11-25"))
    pipe.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})

    assert pipe.front.committed == stdio.ENVELOPE
    assert pipe.answers() == []  # nothing kept for the envelope: all of it is the SDK's
    assert pipe.queued() == ["probe-1", 0, 1]


def test_an_envelope_connection_is_answered_from_its_own_kept_handshake_and_learns_it(
        tmp_path: Path) -> None:
    pipe = Pipe(tmp_path, None)
    pipe.send(probe())
    pipe.send(enveloped(3, "tools/list"))
    pipe.front.deliver("probe-1", json.dumps({"jsonrpc": "2.0", "id": "probe-1",
                                              "result": DISCOVER_RESULT}))
    pipe.front.deliver(3, json.dumps({"jsonrpc": "2.0", "id": 3, "result": ENVELOPE_TOOLS}))
    assert [a["id"] for a in pipe.answers()] == ["probe-1", 3]
    saved = Handshake.load(pipe.path)
    assert saved is not None and saved.envelope and not saved.classic

    again = Pipe(tmp_path, saved)
    again.send(probe("p"))
    again.send(initialize(0))  # the host's fallback, sent before it saw the answer
    again.send(enveloped(4, "tools/list"))
    again.send({"jsonrpc": "2.0", "id": 5, "method": "server/discover",
                "params": {"_meta": {**ENVELOPE_META,
                                     "io.modelcontextprotocol/protocolVersion": "2099-01-01"}}})
    again.front.deliver("p", json.dumps({"jsonrpc": "2.0", "id": "p", "result": {}}))
    assert again.answers() == [{"jsonrpc": "2.0", "id": "p", "result": DISCOVER_RESULT},
                               {"jsonrpc": "2.0", "id": 4, "result": ENVELOPE_TOOLS}]
    assert again.queued() == ["p", 0, 5]  # the SDK refuses the initialize and the odd version


def test_a_classic_connection_is_not_answered_from_the_envelope_cache(tmp_path: Path) -> None:
    both = kept()
    both.discover, both.lists = DISCOVER_RESULT, {"envelope tools/list": ENVELOPE_TOOLS}
    pipe = Pipe(tmp_path, both)
    pipe.send(initialize(1))
    pipe.send(probe("late"))
    pipe.send(enveloped(2, "tools/list"))
    assert pipe.front.committed == stdio.CLASSIC
    assert [a["id"] for a in pipe.answers()] == [1]
    assert pipe.queued() == [1, "late", 2]


@pytest.mark.parametrize(("message", "expected"), [
    (probe(), stdio.ENVELOPE),
    (enveloped(1, "tools/list"), stdio.ENVELOPE),
    ({**initialize(1), "params": {"_meta": ENVELOPE_META}}, stdio.CLASSIC),
    (initialize(1), stdio.CLASSIC),
    ({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"_meta": {"progressToken": 1}}},
     stdio.CLASSIC),
])
def test_the_generation_rule_is_the_sdks(message: dict[str, Any], expected: str) -> None:
    from mcp.server.runner import _has_modern_envelope

    sdk = ("envelope" if message["method"] != "initialize"
           and _has_modern_envelope(message.get("params")) else "classic")
    assert stdio.generation(message) == expected == sdk


def test_an_envelope_host_is_acknowledged_and_listed_at_once_from_what_the_sdk_gave(
        tmp_path: Path) -> None:
    """Claude Code waits for its subscription's acknowledgement and for three lists before it
    calls a tool: from the second run on, all come from the front while the SDK loads."""
    asked = {"toolsListChanged": True}
    ack = {"_meta": {stdio.SUBSCRIPTION_KEY: "listen:0"}, "notifications": asked}
    listen = {"jsonrpc": "2.0", "id": "listen:0", "method": "subscriptions/listen",
              "params": {"_meta": ENVELOPE_META, "notifications": asked}}
    prompts = {"prompts": [], "resultType": "complete"}
    first = Pipe(tmp_path, None)
    first.send(probe())
    first.send(listen)
    first.send(enveloped(1, "prompts/list"))
    first.send(enveloped(2, "tools/list"))
    first.front.deliver("probe-1", json.dumps({"jsonrpc": "2.0", "id": "probe-1",
                                               "result": DISCOVER_RESULT}))
    first.front.deliver(None, json.dumps({"jsonrpc": "2.0", "method": stdio.ACKNOWLEDGED,
                                          "params": ack}))
    first.front.deliver(1, json.dumps({"jsonrpc": "2.0", "id": 1, "result": prompts}))
    first.front.deliver(2, json.dumps({"jsonrpc": "2.0", "id": 2, "result": ENVELOPE_TOOLS}))
    assert len(first.answers()) == 4  # all of them the SDK's

    again = Pipe(tmp_path, Handshake.load(first.path))
    again.send(probe())
    again.send(listen)
    again.send(enveloped(1, "prompts/list"))
    again.send(enveloped(2, "tools/list"))
    call = enveloped(3, "tools/call")
    call["params"].update(name="search", arguments={"query": "x"})
    again.send(call)
    # The SDK's own acknowledgement, when it comes, is not given twice.
    again.front.deliver(None, json.dumps({"jsonrpc": "2.0", "method": stdio.ACKNOWLEDGED,
                                          "params": ack}))
    assert again.answers() == [
        {"jsonrpc": "2.0", "id": "probe-1", "result": DISCOVER_RESULT},
        {"jsonrpc": "2.0", "method": stdio.ACKNOWLEDGED, "params": ack},
        {"jsonrpc": "2.0", "id": 1, "result": prompts},
        {"jsonrpc": "2.0", "id": 2, "result": ENVELOPE_TOOLS},
    ]
    assert again.queued() == ["probe-1", "listen:0", 3]


def test_a_search_while_the_sdk_loads_goes_to_the_early_searcher_and_back_when_it_cannot(
        tmp_path: Path) -> None:
    taken: list[tuple[object, Any, Any]] = []

    def early(message: dict[str, Any], answer: Any, pass_on: Any) -> bool:
        if message["params"]["name"] != "search":
            return False
        taken.append((message["id"], answer, pass_on))
        return True

    pipe = Pipe(tmp_path, kept())
    pipe.front.early = early
    call = {"jsonrpc": "2.0", "method": "tools/call",
            "params": {"name": "search", "arguments": {"query": "x"}}}
    pipe.send({**call, "id": 0})  # before initialize: no session, the SDK says so
    pipe.send(initialize(1))
    pipe.send({**call, "id": 2})
    pipe.send({**call, "id": 3})
    pipe.send({**call, "id": 4, "params": {"name": "overview", "arguments": {}}})
    taken[0][1]({"content": [], "isError": False})  # answered early
    taken[1][2]()  # given back: the SDK's
    pipe.front.ready.set()
    pipe.send({**call, "id": 5})  # the SDK serves: no early search any more

    assert [t[0] for t in taken] == [2, 3]
    assert [a["id"] for a in pipe.answers()] == [1, 2]
    assert pipe.queued() == [0, 1, 4, 3, 5]


def test_an_envelope_search_is_taken_early_only_with_a_kept_probe_answer_and_a_whole_envelope(
        tmp_path: Path) -> None:
    stamped = {**DISCOVER_RESULT, "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "osk"}}}
    both = kept()
    both.discover, both.lists = stamped, {"envelope tools/list": ENVELOPE_TOOLS}
    pipe = Pipe(tmp_path, both)
    pipe.front.early = lambda message, answer, pass_on: answer({"isError": False}) or True
    pipe.send(probe())
    call = enveloped(2, "tools/call")
    call["params"].update(name="search", arguments={"query": "x"})
    pipe.send(call)
    half = json.loads(json.dumps(call))
    half["id"] = 3
    del half["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]
    pipe.send(half)

    answers = pipe.answers()
    assert answers[1] == {"jsonrpc": "2.0", "id": 2, "result": {
        "isError": False, "resultType": "complete", "_meta": stamped["_meta"]}}
    assert len(answers) == 2 and pipe.queued() == ["probe-1", 3]


def test_once_the_sdk_serves_a_search_is_the_fronts_while_the_sdk_owes_the_host_nothing(
        tmp_path: Path) -> None:
    """The front answers a search itself (``served``) only when every earlier request of the
    host has its answer: a call never overtakes one the SDK still holds."""
    served: list[object] = []

    def serve(message: dict[str, Any], answer: Any) -> bool:
        if message["params"]["name"] != "search" or message["params"]["arguments"].get(
                "query") == "unusual":
            return False  # given back: the SDK's
        served.append(message["id"])
        answer({"content": [], "isError": False})
        return True

    pipe = Pipe(tmp_path, kept())
    pipe.front.served = serve
    search = {"jsonrpc": "2.0", "method": "tools/call",
              "params": {"name": "search", "arguments": {"query": "x"}}}
    pipe.send({**search, "id": 0})  # the SDK does not serve yet: it waits for it
    pipe.front.ready.set()
    pipe.send(initialize(1))
    pipe.front.deliver(0, json.dumps({"jsonrpc": "2.0", "id": 0, "result": {}}))
    pipe.send({**search, "id": 2})  # the initialize not answered yet: the SDK's
    pipe.front.deliver(1, json.dumps({"jsonrpc": "2.0", "id": 1, "result": INIT_RESULT}))
    pipe.front.deliver(2, json.dumps({"jsonrpc": "2.0", "id": 2, "result": {}}))
    pipe.send({**search, "id": 3})  # nothing owed: the front's
    pipe.send({**search, "id": 4, "params": {"name": "overview", "arguments": {}}})
    pipe.send({**search, "id": 5})  # the overview unanswered: the SDK's
    pipe.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
               "params": {"requestId": 4}})
    pipe.front.deliver(5, json.dumps({"jsonrpc": "2.0", "id": 5, "result": {}}))
    pipe.send({**search, "id": 6})  # the overview cancelled, the search answered: the front's
    unusual = {"name": "search", "arguments": {"query": "unusual"}}
    pipe.send({**search, "id": 7, "params": unusual})  # given back by ``served``

    assert pipe.front.pending == {7}
    pipe.front.refuse({**search, "id": 7, "params": unusual}, "refused by the SDK's model")
    pipe.send({**search, "id": 8})  # the SDK refused 7 (answered it): nothing owed

    assert served == [3, 6, 8]
    assert pipe.queued() == [0, 1, 2, 4, 5, "notifications/cancelled", 7]
    assert [a["id"] for a in pipe.answers()] == [1, 0, 2, 3, 5, 6, 7, 8]  # 1: the kept handshake
    assert not pipe.front.pending
