"""Hostile requests through the real `osk mcp` process: every one gets an answer, none an
internal error.

A single server process is driven over its pipes with raw JSON-RPC (no client library to
tidy the input): calls of every tool whose arguments hypothesis draws from plausible values
and hostile ones (lone surrogate escapes, nesting hundreds of levels deep, strings of
megabytes where an identifier goes, NaN, huge integers, unknown names). Each call must be
answered within ``REPLY_TIMEOUT`` by a result or a clear error; ``internal error`` (a bug in
osk) counts as a failure. The seed is fixed and the count bounded for CI; ``OSK_FUZZ_CALLS``
raises it by hand (tests/README.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from osk.hosts.connect import ReplyLines, close_server, send_message
from osk.store.vault import Vault
from osk.surfaces.server import SPECS, TOOL_NAMES

CALLS = int(os.environ.get("OSK_FUZZ_CALLS", "120"))
REPLY_TIMEOUT = 30.0  # seconds; a healthy answer takes milliseconds
SEED = 20261202

PLAUSIBLE = ["cache", "Cache eviction", "scope", "domain", "person", "[[cache]]",
             "[[_raw/app/c1#Round 1]]", "_raw/app/c1#Round 1", "_raw/app/c1", "file:README.md",
             "[[file:README.md]]", "2026-11-29T18:02+09:00", "tomorrow", "2026-13-45", "",
             "read", "replace", "edit", "settle", "contradiction", "c1", "test-model",
             "sha256:0", "../../etc/passwd", "Scope/app/cache/cache.md", " ", "\u200b",
             "\u202eevil\u202c", "캐시", "a/b/c"]


def _nest(depth: int, leaf: object) -> object:
    for level in range(depth):
        leaf = [leaf] if level % 2 else {"k": leaf}
    return leaf


scalars = (st.none() | st.booleans() | st.integers(-10**30, 10**30)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=20)
           | st.sampled_from(PLAUSIBLE))
surrogated = st.tuples(st.text(max_size=5), st.characters(categories=["Cs"]),
                       st.text(max_size=5)).map("".join)
huge = st.integers(10_000, 3_000_000).map(lambda n: "x" * n)
deep = st.integers(30, 400).flatmap(lambda d: st.sampled_from(PLAUSIBLE).map(
    lambda leaf: _nest(d, leaf)))
shallow = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=6)
values = (scalars | st.sampled_from(PLAUSIBLE) | st.lists(st.sampled_from(PLAUSIBLE), max_size=3)
          | surrogated | huge | deep | shallow)


def plausible(schema: dict[str, Any], defs: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values of the shape a tool's published schema asks for (hostile only in their words)."""
    if "$ref" in schema:
        return plausible(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "anyOf" in schema:
        return st.one_of([plausible(option, defs) for option in schema["anyOf"]])
    kind = schema.get("type")
    if kind == "integer":
        return st.integers(-2, 70)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        return st.lists(plausible(schema.get("items", {}), defs), max_size=3)
    if kind == "object":
        props = schema.get("properties", {})
        return st.fixed_dictionaries({k: plausible(v, defs) for k, v in props.items()})
    return st.sampled_from(PLAUSIBLE) | st.text(max_size=30)


SCHEMAS = {spec.name: spec.args.model_json_schema() for spec in SPECS}


@st.composite
def calls(draw: st.DrawFn) -> tuple[str, Any]:
    """A tool name (nearly always a real one) and its arguments: half the time every required
    argument in its published shape, then up to two arguments made hostile."""
    name = draw(st.sampled_from(TOOL_NAMES) | st.text(max_size=10)
                if draw(st.integers(0, 19)) == 0 else st.sampled_from(TOOL_NAMES))
    if draw(st.integers(0, 29)) == 0:
        return name, draw(values)  # not an object at all
    schema = SCHEMAS.get(name, {})
    props, defs = schema.get("properties", {}), schema.get("$defs", {})
    arguments: dict[str, Any] = {}
    if draw(st.booleans()):
        for key in schema.get("required", []):
            arguments[key] = draw(plausible(props[key], defs))
    for key in draw(st.lists(st.sampled_from(sorted(props)), unique=True, max_size=4)) \
            if props else []:
        arguments[key] = draw(plausible(props[key], defs))
    hostile = sorted(props) if props else ["x"]
    count = min(len(hostile), draw(st.sampled_from([0, 0, 1, 2])))
    for key in draw(st.lists(st.sampled_from(hostile), unique=True, min_size=count,
                             max_size=count)):
        arguments[key] = draw(values)
    if draw(st.integers(0, 9)) == 0:
        arguments[draw(st.text(max_size=12) | surrogated)] = draw(values)
    return name, arguments


@dataclass
class Tally:
    calls: int = 0
    results: int = 0  # the tool ran and returned
    refused: int = 0  # an is_error result or a JSON-RPC error: a clear refusal
    no_reply: list[str] = field(default_factory=list)
    internal: list[str] = field(default_factory=list)


def _describe(name: str, arguments: Any) -> str:
    text = json.dumps({"name": name, "arguments": arguments})
    return text if len(text) < 300 else text[:300] + f"… ({len(text)} chars)"


def _is_internal(reply: dict[str, Any]) -> bool:
    if "error" in reply:
        return reply["error"].get("code") == -32603 or "internal" in str(reply["error"]).lower()
    result = reply.get("result") or {}
    texts = " ".join(str(c.get("text", "")) for c in result.get("content", []))
    return bool(result.get("isError")) and "internal error" in texts.lower()


def test_every_hostile_tool_call_over_stdio_is_answered_and_none_is_an_internal_error(
        vault: Vault, tmp_path: Path) -> None:
    repo = tmp_path / "work" / "app"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    (repo / "README.md").write_text("the app\n", encoding="utf-8")
    tally = Tally()
    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen([sys.executable, "-m", "osk", "--vault", str(vault.root), "mcp"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors,
                                cwd=repo)
        try:
            lines = ReplyLines(proc)
            send_message(proc, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "fuzz", "version": "0"}}})
            lines.response(0, time.monotonic() + 120)
            send_message(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
            hub = {"title": "cache", "summary": "What we know about the cache",
                   "body": "The cache hub.\n", "space": "scope", "cluster": "cache",
                   "drafter": "test-model"}
            send_message(proc, {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                "params": {"name": "create_node", "arguments": hub}})
            assert lines.response(1, time.monotonic() + 120)["result"]["isError"] is False

            @seed(SEED)
            @settings(max_examples=CALLS, deadline=None, database=None,
                      suppress_health_check=list(HealthCheck))
            @given(call=calls())
            def one(call: tuple[str, Any]) -> None:
                if tally.no_reply:
                    return  # a server that stopped answering answers nothing more
                name, arguments = call
                tally.calls += 1
                call_id = tally.calls + 1
                send_message(proc, {"jsonrpc": "2.0", "id": call_id, "method": "tools/call",
                                    "params": {"name": name, "arguments": arguments}})
                try:
                    reply = lines.response(call_id, time.monotonic() + REPLY_TIMEOUT)
                except (TimeoutError, ValueError) as exc:
                    tally.no_reply.append(f"{_describe(name, arguments)}: {exc}")
                    return
                if _is_internal(reply):
                    tally.internal.append(f"{_describe(name, arguments)} -> "
                                          f"{json.dumps(reply)[:400]}")
                elif "error" in reply or reply["result"].get("isError"):
                    tally.refused += 1
                    if os.environ.get("OSK_FUZZ_SHOW"):
                        print(json.dumps(reply)[:300])
                else:
                    tally.results += 1

            one()
        finally:
            close_server(proc)
        errors.seek(0)
        log = errors.read().decode("utf-8", "replace")[-3000:]
    print(f"fuzz: {tally.calls} calls ({tally.results} results, {tally.refused} refusals), "
          f"{len(tally.no_reply)} without a reply, {len(tally.internal)} internal errors")
    assert tally.calls >= min(CALLS, 50)
    assert tally.no_reply == [], f"{tally.no_reply[:3]}\nserver log: {log}"
    assert tally.internal == [], f"{tally.internal[:5]}\nserver log: {log}"
