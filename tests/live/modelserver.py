"""Scripted model servers on 127.0.0.1 that stand in for the vendors' APIs in the live suite.

Two wire formats, one brain:

- the Anthropic Messages API, streamed as server-sent events (what Claude Code speaks when
  ``ANTHROPIC_BASE_URL`` points here);
- the OpenAI Responses API, streamed likewise (what Codex speaks through a ``model_providers``
  entry with ``wire_api = "responses"``).

Every request is recorded whole (path, headers, JSON body), so a test can assert what reached
the model: the injected session note, the tool list, the tool results. What the "model" answers
comes from a ``Brain``: a function of the conversation so far (the last person's text, the tool
results since then, the tools offered) that returns either tool calls or a final text. The
brains are deterministic: the same conversation always gets the same answer.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Call:
    """One tool call the model makes (``name`` as the host named the tool in the request)."""

    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True)
class Reply:
    """What the model says in one response: tool calls, else a final text."""

    text: str = ""
    calls: tuple[Call, ...] = ()


@dataclass(frozen=True)
class Turn:
    """The conversation as a brain sees it, normalised across the two APIs."""

    api: str                     # "anthropic" or "responses"
    prompt: str                  # the last text the person (or the host for them) sent
    results: tuple[str, ...]     # tool outputs since that text, in order
    called: tuple[str, ...]      # tool names called since that text, in order
    tools: tuple[str, ...]       # tool names the request offers the model
    body: Mapping[str, Any]      # the raw request


Brain = Callable[[Turn], Reply]


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class ModelServer:
    """A threaded HTTP server on 127.0.0.1 with a swappable brain; ``url`` is its base URL."""

    brain: Brain
    requests: list[Recorded] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # what the brain raised, per request
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> ModelServer:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass  # quiet: the recorded requests are the log

            def do_GET(self) -> None:  # noqa: N802
                owner._record(self.path, dict(self.headers), None)
                if self.path.rstrip("/").endswith("/models"):
                    self._json({"data": [], "models": []})
                else:
                    self._json({})

            def do_HEAD(self) -> None:  # noqa: N802
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else {}
                except ValueError:
                    body = {"_raw": raw.decode("utf-8", "replace")}
                owner._record(self.path, dict(self.headers), body)
                path = self.path.split("?", 1)[0]
                try:
                    if path.endswith("/messages/count_tokens"):
                        self._json({"input_tokens": 100})
                    elif path.endswith("/messages"):
                        self._stream(anthropic_events(owner.brain(anthropic_turn(body)), body))
                    elif path.endswith("/responses"):
                        self._stream(responses_events(owner.brain(responses_turn(body)), body))
                    else:
                        self._json({})
                except Exception as exc:  # a broken script: fail the CLI at once, say why
                    owner.errors.append(f"{path}: {exc.__class__.__name__}: {exc}")
                    self._json({"type": "error", "error": {
                        "type": "invalid_request_error", "message": f"scripted model: {exc}"}},
                        status=400)

            def _json(self, data: object, status: int = 200) -> None:
                payload = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _stream(self, events: Iterator[tuple[str, dict[str, Any]]]) -> None:
                chunks = [f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
                          for name, data in events]
                payload = b"".join(chunks)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def _record(self, path: str, headers: dict[str, str], body: Any) -> None:
        with self._lock:
            self.requests.append(Recorded(path, headers, body))

    def model_requests(self) -> list[Recorded]:
        """The requests that asked the model for an answer (not token counts or model lists)."""
        with self._lock:
            return [r for r in self.requests if isinstance(r.body, dict)
                    and r.path.split("?", 1)[0].endswith(("/messages", "/responses"))]


# -- Anthropic Messages ---------------------------------------------------------------------

def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = []
    for block in content:
        if isinstance(block, Mapping) and block.get("type") in ("text", "input_text",
                                                                  "output_text"):
            parts.append(str(block.get("text", "")))
    return "\n".join(parts)


def anthropic_turn(body: Mapping[str, Any]) -> Turn:
    messages = body.get("messages") or []
    prompt, results, called = "", [], []
    for message in messages:
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        if message.get("role") == "user":
            tool_results = [b for b in blocks if isinstance(b, Mapping)
                            and b.get("type") == "tool_result"]
            if tool_results:
                results.extend(_text_of(b.get("content")) for b in tool_results)
                continue
            texts = [b for b in blocks if isinstance(b, Mapping) and b.get("type") == "text"
                     and not str(b.get("text", "")).lstrip().startswith("<system-reminder>")]
            prompt, results, called = _text_of(texts), [], []
        else:
            called.extend(str(b.get("name")) for b in blocks
                          if isinstance(b, Mapping) and b.get("type") == "tool_use")
    tools = tuple(str(t.get("name")) for t in body.get("tools") or [] if isinstance(t, Mapping))
    return Turn("anthropic", prompt, tuple(results), tuple(called), tools, body)


_ids = itertools.count(1)


def anthropic_events(reply: Reply, body: Mapping[str, Any]) -> Iterator[tuple[str, dict]]:
    number = next(_ids)
    usage = {"input_tokens": 100, "output_tokens": 20, "cache_creation_input_tokens": 0,
             "cache_read_input_tokens": 0}
    yield "message_start", {"type": "message_start", "message": {
        "id": f"msg_live{number:06d}", "type": "message", "role": "assistant",
        "model": body.get("model", "scripted"), "content": [], "stop_reason": None,
        "stop_sequence": None, "usage": usage}}
    index = 0
    if reply.text:
        yield "content_block_start", {"type": "content_block_start", "index": index,
                                      "content_block": {"type": "text", "text": ""}}
        yield "content_block_delta", {"type": "content_block_delta", "index": index,
                                      "delta": {"type": "text_delta", "text": reply.text}}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
        index += 1
    for call_number, call in enumerate(reply.calls):
        yield "content_block_start", {"type": "content_block_start", "index": index,
                                      "content_block": {
                                          "type": "tool_use", "input": {},
                                          "id": f"toolu_live{number:06d}{call_number}",
                                          "name": call.name}}
        yield "content_block_delta", {"type": "content_block_delta", "index": index,
                                      "delta": {"type": "input_json_delta",
                                                "partial_json": json.dumps(call.arguments)}}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
        index += 1
    stop = "tool_use" if reply.calls else "end_turn"
    yield "message_delta", {"type": "message_delta",
                            "delta": {"stop_reason": stop, "stop_sequence": None},
                            "usage": {"output_tokens": 20}}
    yield "message_stop", {"type": "message_stop"}


# -- OpenAI Responses -----------------------------------------------------------------------

def responses_turn(body: Mapping[str, Any]) -> Turn:
    prompt, results, called = "", [], []
    for item in body.get("input") or []:
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        if kind == "message" and item.get("role") == "user":
            text = _text_of(item.get("content"))
            if _host_context(text):
                continue
            prompt, results, called = text, [], []
        elif kind in ("function_call", "custom_tool_call", "tool_search_call"):
            name = str(item.get("name") or kind)
            namespace = item.get("namespace")
            called.append(f"{namespace}__{name}" if namespace else name)
        elif kind in ("function_call_output", "custom_tool_call_output",
                      "tool_search_output"):
            output = item.get("output")
            results.append(output if isinstance(output, str)
                           else json.dumps(output if output is not None else item))
    tools = tuple(_tool_names(body.get("tools") or []))
    return Turn("responses", prompt, tuple(results), tuple(called), tools, body)


def _host_context(text: str) -> bool:
    """Codex sends AGENTS.md, environment and hook context as user messages too."""
    head = text.lstrip()[:40]
    return head.startswith(("<environment_context", "<user_instructions", "# AGENTS.md",
                            "<permissions", "<hook", "<INSTRUCTIONS"))


def _tool_names(tools: list[Any]) -> Iterator[str]:
    for tool in tools:
        if not isinstance(tool, Mapping):
            continue
        if tool.get("type") == "namespace":
            for inner in tool.get("tools") or []:
                if isinstance(inner, Mapping):
                    yield f"{tool.get('name')}__{inner.get('name')}"
        yield str(tool.get("name") or tool.get("type"))


def responses_events(reply: Reply, body: Mapping[str, Any]) -> Iterator[tuple[str, dict]]:
    number = next(_ids)
    response_id = f"resp_live{number:06d}"
    yield "response.created", {"type": "response.created",
                               "response": {"id": response_id, "status": "in_progress"}}
    items: list[dict[str, Any]] = []
    if reply.text:
        items.append({"type": "message", "role": "assistant", "id": f"msg_live{number:06d}",
                      "status": "completed",
                      "content": [{"type": "output_text", "text": reply.text,
                                   "annotations": []}]})
    namespaces = [str(t.get("name")) for t in body.get("tools") or []
                  if isinstance(t, Mapping) and t.get("type") == "namespace"]
    for call_number, call in enumerate(reply.calls):
        item = {"type": "function_call", "id": f"fc_live{number:06d}{call_number}",
                "call_id": f"call_live{number:06d}{call_number}", "name": call.name,
                "arguments": json.dumps(call.arguments), "status": "completed"}
        for namespace in namespaces:  # Codex routes a namespaced tool by both parts
            if call.name.startswith(namespace + "__"):
                item.update(namespace=namespace, name=call.name[len(namespace) + 2:])
        items.append(item)
    for index, item in enumerate(items):
        yield "response.output_item.added", {"type": "response.output_item.added",
                                             "output_index": index, "item": item}
        if item["type"] == "message":
            yield "response.output_text.delta", {"type": "response.output_text.delta",
                                                 "output_index": index, "content_index": 0,
                                                 "item_id": item["id"],
                                                 "delta": reply.text}
        yield "response.output_item.done", {"type": "response.output_item.done",
                                            "output_index": index, "item": item}
    yield "response.completed", {"type": "response.completed", "response": {
        "id": response_id, "status": "completed", "output": items,
        "usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens": 20, "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": 120}}}
