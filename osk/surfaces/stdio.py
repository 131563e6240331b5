"""`osk mcp` over stdio: a front that is ready at once and answers every line it is sent.

The MCP SDK's own stdio transport falls short in two ways, and this module (standard library
only, so it runs before the SDK is imported) stands in front of it:

* **Ready at once.** Importing the SDK and pydantic takes about a second, opening and warming
  the engine more on a large vault; a host whose model looks for osk's tools before the server
  is up is told there are none. So the front answers the handshake and ``tools/list`` from what
  the SDK gave on earlier runs (kept in the vault's state folder; a vault's first run answers
  from the handshake shipped with osk, ``SHIPPED_HANDSHAKE``); then a thread
  imports the SDK and builds the server, and another opens and warms the engine (they start
  once the host has the tool list, so they do not slow the handshake down). Everything else
  waits for the SDK, and a tool call waits for the engine. Each run asks the SDK for its
  handshake again; when it differs (osk was upgraded) it is saved, and a host that was already
  given the old tool list is sent ``notifications/tools/list_changed``.
* **One protocol per connection.** A host may speak either generation of MCP: the classic
  ``initialize`` handshake, or the per-request envelope of 2026-07-28 opened by a
  ``server/discover`` probe (Claude Code sends the probe and, when it is not answered at once,
  an ``initialize`` too, taking whichever succeeds first). The SDK commits a connection to the
  generation of its first request and refuses the other's requests from then on, so the front
  commits by the same rule (``generation``) and answers only in that generation: after a probe,
  an ``initialize`` goes to the SDK, which refuses it, instead of being answered from the kept
  classic handshake while the SDK serves the envelope.
* **An answer to every line.** The SDK drops a line it cannot parse (invalid JSON, a lone
  surrogate escape, nesting past its parser's limit) without answering, so the host's call
  hangs until its own timeout. Here each line is parsed by the standard library and checked
  (its size, its nesting depth, lone surrogates) before the SDK sees it; a refused request gets
  a JSON-RPC error (for a tool call, an ``isError`` result naming the argument), carrying its
  id whenever one can be read.
* **Searches without the SDK's framing.** Once the SDK serves, a plain ``search`` call is
  answered by the front with the open engine (``osk.surfaces.early``: the same result the SDK
  would give) whenever none of the host's requests awaits the SDK's answer, so no call
  overtakes an earlier one; the SDK's message models and threads cost more than the search.

Stdout carries only protocol messages: the front writes through a private copy of file
descriptor 1 and points 1 at stderr, so a stray print elsewhere cannot corrupt the stream; the
same is done for stdin, so child processes (git) read nothing of the host's messages.
"""

from __future__ import annotations

import json
import os
import queue
import re
import select
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osk.surfaces.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    error,
    tool_error,
)

if TYPE_CHECKING:  # annotations only: the front answers before the engine is imported
    from osk.engine.core import Engine
    from osk.engine.vaults import Vault

MAX_LINE = 8 * 1024 * 1024  # bytes in one message; a node body is far smaller
START_AFTER = 0.2  # seconds after spawn by which the SDK starts loading whatever the host does
ENGINE_FIRST = 5.0  # seconds the SDK's import waits at most for the engine to open
STORE_FIRST = 2.0  # seconds the loading waits at most for searches answered from the store
MAX_DEPTH = 32  # nesting levels in one message (osk's deepest argument is 5 levels down)
HANDSHAKE_FILE = ("mcp", "handshake.json")
# What this osk's SDK answers a classic host's handshake (``scripts/gen_handshake.py`` writes
# it; a test checks it against the SDK): a vault's first server answers from it at once, where
# importing the SDK first took 1 s of CPU, 10 s on a loaded box, past the 10 s Claude Code
# waits for a server before its first request.
SHIPPED_HANDSHAKE = Path(__file__).with_name("handshake.json")
PRIVATE_ID = "osk-handshake-tools"  # the id of the tools/list the front asks the SDK itself


_LEARNED = object()  # initialize_id once the SDK's answer to it has been seen
ENVELOPE_KEY = "io.modelcontextprotocol/protocolVersion"  # only a 2026-07-28 request carries it
CLASSIC, ENVELOPE = "classic", "envelope"
SUBSCRIPTION_KEY = "io.modelcontextprotocol/subscriptionId"
CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
CLIENT_KEY = "io.modelcontextprotocol/clientInfo"
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
LISTEN = "subscriptions/listen"
# Lists a host asks for while it connects, answered from the cache while the SDK loads.
LISTS = ("tools/list", "prompts/list", "resources/list", "resources/templates/list")
_ID = re.compile(rb'"id"\s*:\s*(-?\d{1,18}(?![\d.eE])|"(?:[^"\\]|\\.){0,200}")')


# == the wire ==================================================================================
class Wire:
    """The protocol's stdout: one JSON message a line, written whole under a lock."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.lock = threading.Lock()

    def send(self, message: dict[str, Any]) -> None:
        self.send_text(json.dumps(message, separators=(",", ":")))

    def send_text(self, text: str) -> None:
        data = text.encode("utf-8", "backslashreplace") + b"\n"  # never fails on a surrogate
        with self.lock:
            view = memoryview(data)
            while view:
                try:
                    written = os.write(self.fd, view)
                except BrokenPipeError:
                    return  # the host has gone; nothing is listening for answers any more
                view = view[written:]


# == reading and checking one line =============================================================
@dataclass(frozen=True)
class Refusal:
    """Why a line gets an answer from the front instead of reaching the server."""

    answer: dict[str, Any]


def sniff_id(raw: bytes) -> object:
    """The request id of a line that cannot be parsed, when it can be read off the text."""
    match = _ID.search(raw[:65536])
    if match is None:
        return None
    try:
        found = json.loads(match.group(1))
    except ValueError:
        return None
    return found if isinstance(found, int | str) else None


def parse(raw: bytes) -> dict[str, Any] | Refusal:
    """One line as a JSON-RPC message object, or the answer that refuses it."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Refusal(error(sniff_id(raw), PARSE_ERROR,
                             f"Parse error: the message is not UTF-8 (byte {exc.start})"))
    try:
        message = json.loads(text)
    except RecursionError:
        return Refusal(error(sniff_id(raw), PARSE_ERROR, "Parse error: the message is nested "
                                                         f"more than {MAX_DEPTH} levels deep"))
    except ValueError as exc:
        return Refusal(error(sniff_id(raw), PARSE_ERROR, f"Parse error: {exc}"))
    if not isinstance(message, dict):
        return Refusal(error(None, INVALID_REQUEST, "Invalid request: a message is one JSON "
                                                     "object (batches are not part of MCP)"))
    id_ = message.get("id")
    if "id" in message and (isinstance(id_, bool) or not isinstance(id_, int | str)):
        return Refusal(error(None, INVALID_REQUEST,
                             "Invalid request: id must be a string or an integer"))
    problem = first_problem(message)
    if problem is not None:
        return Refusal(_refuse_argument(message, *problem))
    shape = _tool_call_shape(message) if message.get("method") == "tools/call" else None
    if shape is not None:
        return Refusal(error(id_, INVALID_PARAMS, f"Invalid params: tools/call {shape}"))
    return message


def _tool_call_shape(message: dict[str, Any]) -> str | None:
    """What is wrong with a tool call's envelope (the SDK only says "Invalid request
    parameters"), or None."""
    params = message.get("params")
    if not isinstance(params, dict):
        return f"needs params, an object with name and arguments (got {_kind(params)})"
    if not isinstance(params.get("name"), str):
        return f"needs params.name, the tool's name as a string (got {_kind(params.get('name'))})"
    arguments = params.get("arguments")
    if arguments is not None and not isinstance(arguments, dict):
        return (f"{params['name']}: params.arguments must be an object of argument names and "
                f"values (got {_kind(arguments)})")
    return None


def _kind(value: object) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
             int: "a number", float: "a number", type(None): "null"}
    return "nothing" if value is None else names.get(type(value), type(value).__name__)


def first_problem(value: object) -> tuple[list[str | int], str] | None:
    """The first place in a parsed message that no tool could take: where, and what is wrong.

    Walked without recursion, so a message deeper than Python's own limit is still answered."""
    stack: list[tuple[object, list[str | int]]] = [(value, [])]
    while stack:
        item, path = stack.pop()
        if len(path) > MAX_DEPTH:
            return path, f"is nested more than {MAX_DEPTH} levels deep"
        if isinstance(item, str):
            bad = _lone_surrogate(item)
            if bad is not None:
                return path, (f"holds a lone surrogate (\\u{ord(bad):04x}), which is not "
                              f"Unicode text; send the text as valid UTF-8")
        elif isinstance(item, dict):
            for key, child in reversed(item.items()):
                if _lone_surrogate(key) is not None:
                    return path, "has a name holding a lone surrogate, which is not Unicode text"
                stack.append((child, [*path, key]))
        elif isinstance(item, list):
            stack.extend((child, [*path, n]) for n, child in reversed(list(enumerate(item))))
    return None


def _lone_surrogate(text: str) -> str | None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return text[exc.start]
    return None


def _refuse_argument(message: dict[str, Any], path: list[str | int], what: str) -> dict[str, Any]:
    id_ = message.get("id")
    params = message.get("params")
    name = params.get("name") if isinstance(params, dict) else None
    if (message.get("method") == "tools/call" and isinstance(name, str) and len(path) > 2
            and path[:2] == ["params", "arguments"]):
        where = _where(path[3:])
        return tool_error(id_, f"Error executing tool {name}: argument {path[2]!r}{where} "
                               f"{what}. Nothing was done; fix the argument and call it again.")
    where = _where(path).lstrip(".")
    return error(id_, INVALID_PARAMS, f"Invalid params: {where or 'the message'} {what}")


def _where(path: list[str | int]) -> str:
    """A path inside an argument, its first steps only (a deep one would fill the message)."""
    shown = "".join(f"[{p}]" if isinstance(p, int) else f".{p}"[:40] for p in path[:4])
    return shown + ("…" if len(path) > 4 else "")


class Drained:
    """``read_lines``' mark: every message that has arrived was handed out, and the next read
    would wait for the host. What can wait (the SDK's loading) starts there, so it never takes
    the CPU from a request the host has already sent."""


DRAINED = Drained()
_CHUNK = 1 << 16


def read_lines(fd: int) -> Iterator[bytes | Refusal | Drained]:
    """The lines of ``fd``, and ``DRAINED`` whenever no whole line is left to hand out and
    none is waiting in the pipe; a line longer than ``MAX_LINE`` is skipped and refused."""
    buffer = bytearray()
    scanned = 0  # bytes of ``buffer`` known to hold no newline
    while True:
        end = buffer.find(b"\n", scanned, MAX_LINE + 1)
        if end >= 0:
            line = bytes(buffer[: end + 1])
            del buffer[: end + 1]
            scanned = 0
            if line.strip():
                yield line
            continue
        if len(buffer) > MAX_LINE:
            id_ = sniff_id(bytes(buffer[:65536]))
            end = buffer.find(b"\n", MAX_LINE + 1)
            if end >= 0:
                del buffer[: end + 1]
            else:
                buffer.clear()
                _skip_line(fd, buffer)
            scanned = 0
            yield Refusal(error(id_, INVALID_REQUEST, f"Invalid request: the message is longer "
                                                      f"than {MAX_LINE} bytes"))
            continue
        scanned = len(buffer)
        if not _waiting(fd):
            yield DRAINED
        chunk = os.read(fd, _CHUNK)
        if not chunk:  # the host closed stdin: a last line without its newline still counts
            if buffer.strip():
                yield bytes(buffer)
            return
        buffer += chunk


def _skip_line(fd: int, rest: bytearray) -> None:
    """Read on to the end of the current line (or of input); what follows is left in
    ``rest``."""
    while chunk := os.read(fd, _CHUNK):
        end = chunk.find(b"\n")
        if end >= 0:
            rest += chunk[end + 1:]
            return


def _waiting(fd: int) -> bool:
    """Whether the host has written more than was read (False where a pipe cannot be asked)."""
    try:
        return bool(select.select([fd], [], [], 0)[0])
    except (OSError, ValueError):
        return False


# == the handshake kept from the last run ======================================================
def generation(message: dict[str, Any]) -> str:
    """The protocol generation a connection's first request commits it to, by the SDK's rule
    (``mcp.server.runner.serve_dual_era_loop``): an ``initialize`` is classic even when it
    carries the envelope; any other request carrying the envelope's version key opens an
    envelope connection; anything else is classic."""
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    if message.get("method") != "initialize" and isinstance(meta, dict) and ENVELOPE_KEY in meta:
        return ENVELOPE
    return CLASSIC


@dataclass
class Handshake:
    """What the SDK answered on previous runs, per protocol generation: for a classic
    connection ``initialize`` and ``tools/list``, for an envelope one ``server/discover``, the
    acknowledgement of a ``subscriptions/listen``; for both, the first page of each list the
    hosts ask for while connecting (``lists``, keyed "GENERATION METHOD"). A generation's part
    stays empty until a host of that generation has connected."""

    versions: list[str]  # protocol versions the handshake can agree on
    latest: str  # the one offered when the host asks for another
    initialize: dict[str, Any]
    tools: dict[str, Any]
    discover: dict[str, Any] = field(default_factory=dict)
    lists: dict[str, dict[str, Any]] = field(default_factory=dict)
    listen: dict[str, Any] = field(default_factory=dict)  # {"asked": {...}, "params": {...}}

    @classmethod
    def load(cls, path: Path) -> Handshake | None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            found = cls(list(data["versions"]), str(data["latest"]), dict(data["initialize"]),
                        dict(data["tools"]), dict(data.get("discover") or {}),
                        {str(k): dict(v) for k, v in (data.get("lists") or {}).items()},
                        dict(data.get("listen") or {}))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None  # none yet, or unreadable: the SDK answers, and the next run is fast
        return found if found.classic or found.envelope else None

    @property
    def classic(self) -> bool:
        return bool(self.versions and self.initialize and _listing(self.tools))

    @property
    def envelope(self) -> bool:
        return bool(self.discover and _listing(self.lists.get(f"{ENVELOPE} tools/list", {})))

    def to_json(self) -> str:
        return json.dumps({"versions": self.versions, "latest": self.latest,
                           "initialize": self.initialize, "tools": self.tools,
                           "discover": self.discover, "lists": self.lists,
                           "listen": self.listen},
                          ensure_ascii=False, sort_keys=True, indent=1) + "\n"

    def initialize_result(self, params: object) -> dict[str, Any]:
        asked = params.get("protocolVersion") if isinstance(params, dict) else None
        agreed = asked if asked in self.versions else self.latest
        return {**self.initialize, "protocolVersion": agreed}

    def discover_result(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """The kept answer to a probe, when it asks for a version that answer supports."""
        asked = message["params"]["_meta"].get(ENVELOPE_KEY)
        supported = self.discover.get("supportedVersions")
        return self.discover if isinstance(supported, list) and asked in supported else None

    def listing(self, generation: str, method: str) -> dict[str, Any] | None:
        if generation == CLASSIC and method == "tools/list":
            return self.tools if self.classic else None
        return self.lists.get(f"{generation} {method}")

    def acknowledgement(self, params: object) -> dict[str, Any] | None:
        """The kept acknowledgement of a subscription that asks for the same notifications."""
        asked = params.get("notifications") if isinstance(params, dict) else None
        return self.listen.get("params") if self.listen and self.listen.get("asked") == asked \
            else None

    def with_part(self, **parts: Any) -> Handshake:
        return Handshake(**{**self.__dict__, **parts})


def _listing(tools: dict[str, Any]) -> bool:
    return isinstance(tools.get("tools"), list)


# == the front =================================================================================
@dataclass
class Front:
    """Reads the host's lines, answers what it can at once, queues the rest for the SDK."""

    wire: Wire
    handshake_path: Path
    cached: Handshake | None = None
    own: bool = True  # ``cached`` is this vault's own (else the shipped one: always saved)
    inbox: queue.Queue[dict[str, Any] | None] = field(default_factory=queue.Queue)
    ready: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    failed: str | None = None
    committed: str | None = None  # the generation the first request chose (CLASSIC, ENVELOPE)
    initialize_id: object = None  # the host's initialize request (a classic session)
    answered: bool = False  # the front answered the opening request from the cache
    listed_from_cache: bool = False
    # called once the host has the cached tool list and the front has answered all it sent
    listed: Callable[[], None] = lambda: None
    learned_initialize: dict[str, Any] | None = None
    learning: dict[object, str] = field(default_factory=dict)  # request id -> what it teaches
    dropped: set[object] = field(default_factory=set)  # ids the front answered for the SDK
    listens: dict[object, object] = field(default_factory=dict)  # subscription id -> asked
    acknowledged: set[object] = field(default_factory=set)  # subscriptions the front acked
    # A tool call taken while the SDK loads (osk.surfaces.early): (message, answer, pass_on).
    early: Callable[[dict[str, Any], Callable[[dict[str, Any]], None], Callable[[], None]],
                    bool] | None = None
    # A tool call answered by the front once the SDK serves (``EarlySearch.served``): (message,
    # answer) -> whether it was answered (else it goes to the SDK).
    served: Callable[[dict[str, Any], Callable[[dict[str, Any]], None]], bool] | None = None
    pending: set[object] = field(default_factory=set)  # the host's requests the SDK has

    def handle(self, item: bytes | Refusal | Drained) -> None:
        if isinstance(item, Drained):
            if self.listed_from_cache:  # the host has its tools and has asked all it asked
                self.listed()
            return
        message = parse(item) if isinstance(item, bytes) else item
        if isinstance(message, Refusal):
            self.wire.send(message.answer)
            return
        method, id_ = message.get("method"), message.get("id")
        with self.lock:
            if self.failed is not None:
                if id_ is not None and method is not None:
                    self.wire.send(error(id_, INTERNAL_ERROR, self.failed))
                return
            if self.committed is None and id_ is not None and isinstance(method, str):
                self.committed = generation(message)  # as the SDK will on this same request
            serve = self._served_call(message, method, id_)
            if serve is None:
                if self._answer_early(message, method, id_):
                    return
                self._to_sdk(message)
                if method == "notifications/initialized" and self.initialize_id is not None:
                    # Learn the SDK's tool list on every run, after the host's own handshake.
                    self.inbox.put({"jsonrpc": "2.0", "id": PRIVATE_ID, "method": "tools/list"})
                return
        serve()  # on the reader's thread, outside the lock: the host's next line waits for it

    def _to_sdk(self, message: dict[str, Any]) -> None:
        """Queue a message for the SDK, keeping which of the host's requests it has not yet
        answered (a cancelled one it will not answer)."""
        id_, method = message.get("id"), message.get("method")
        if id_ is not None and method is not None and method != LISTEN:  # a stream, open long
            self.pending.add(id_)
        elif method == "notifications/cancelled" and isinstance(message.get("params"), dict):
            self.pending.discard(message["params"].get("requestId"))
        self.inbox.put(message)

    def _served_call(self, message: dict[str, Any], method: object, id_: object
                     ) -> Callable[[], None] | None:
        """A tool call the front answers itself once the SDK serves (``served``): only when
        the SDK has none of the host's requests unanswered (so no call overtakes an earlier
        one), in an opened session of the connection's generation. What ``served`` gives back
        goes to the SDK after all."""
        if (method != "tools/call" or id_ is None or self.served is None
                or not self.ready.is_set() or self.pending
                or generation(message) != self.committed):
            return None
        extra = self._session_extra(message)
        if extra is None:
            return None
        served, answer = self.served, self._answering(id_, extra)

        def serve() -> None:
            if not served(message, answer):
                self._pass_on(message)

        return serve

    def _answer_early(self, message: dict[str, Any], method: object, id_: object) -> bool:
        """Answer a handshake request from the cache; True when it must not reach the SDK."""
        if id_ is None:
            return False
        if method == "tools/call" and self._early_call(message, id_):
            return True
        if self.committed == ENVELOPE:
            return self._answer_envelope(message, method, id_)
        if method == "initialize" and self.initialize_id is None:
            self.initialize_id = id_  # the SDK still gets it: it opens the SDK's session
            if self.cached is not None and self.cached.classic:
                self.answered = True  # and the SDK's own answer is dropped
                self.wire.send({"jsonrpc": "2.0", "id": id_,
                                "result": self.cached.initialize_result(message.get("params"))})
            return False
        if generation(message) != CLASSIC:  # the SDK refuses an envelope here
            return False
        if method in LISTS:
            return self._answer_list(message, method, id_)
        if method == "ping" and self._early():
            self.wire.send({"jsonrpc": "2.0", "id": id_, "result": {}})
            return True
        return False

    def _answer_envelope(self, message: dict[str, Any], method: object, id_: object) -> bool:
        """An envelope connection: a probe answered from the cache (the SDK still gets it, as
        it decides the SDK's generation too), a subscription acknowledged, the lists; an
        ``initialize`` is the SDK's to refuse."""
        if generation(message) != ENVELOPE:
            return False
        kept = self.cached if self.cached is not None and self.cached.envelope else None
        if method == "server/discover":
            self.learning[id_] = "discover"
            result = kept.discover_result(message) if kept is not None else None
            if result is not None:
                self.answered = True
                self.dropped.add(id_)
                self.wire.send({"jsonrpc": "2.0", "id": id_, "result": result})
            return False
        if method == LISTEN:
            self.listens[id_] = message["params"].get("notifications")
            ack = kept.acknowledgement(message["params"]) if kept is not None else None
            if ack is not None and self._early():  # the SDK still holds the subscription
                self.acknowledged.add(id_)
                self.wire.send({"jsonrpc": "2.0", "method": ACKNOWLEDGED,
                                "params": {"_meta": {SUBSCRIPTION_KEY: id_}, **ack}})
            return False
        if method in LISTS:
            return self._answer_list(message, method, id_)
        return False

    def _answer_list(self, message: dict[str, Any], method: str, id_: object) -> bool:
        """A first page of a list from the cache while the SDK loads; else the SDK answers
        and (but for the classic tool list, which the front asks itself) the cache learns."""
        if not _first_page(message):
            return False
        generation_ = self.committed or CLASSIC
        kept = self.cached.listing(generation_, method) if self.cached is not None else None
        if kept is None or not self._early():
            if not (generation_ == CLASSIC and method == "tools/list"):
                self.learning[id_] = f"{generation_} {method}"
            return False
        self.wire.send({"jsonrpc": "2.0", "id": id_, "result": kept})
        if method == "tools/list":
            self.listed_from_cache = True  # the loading starts once the front is drained
        return True

    def _early_call(self, message: dict[str, Any], id_: object) -> bool:
        """Hand a tool call to ``early`` while the SDK loads, in an opened session of the
        connection's generation; the answer carries what that generation's results carry."""
        if self.early is None or self.ready.is_set() or generation(message) != self.committed:
            return False
        extra = self._session_extra(message)
        if extra is None:
            return False
        return self.early(message, self._answering(id_, extra), lambda: self._pass_on(message))

    def _answering(self, id_: object, extra: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
        """What sends a tool's result the front made as the answer to request ``id_``, with
        what its session's results carry (``_session_extra``)."""

        def answer(result: dict[str, Any]) -> None:
            self.wire.send({"jsonrpc": "2.0", "id": id_, "result": {**result, **extra}})

        return answer

    def _session_extra(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """What a result the front gives carries beyond the tool's own (the envelope's
        completion and meta); None when the SDK would not serve the call in this session (no
        classic session opened yet, an envelope it would refuse)."""
        if self.committed == ENVELOPE:
            discover = self.cached.discover if self.cached is not None else {}
            if not (discover.get("_meta") and _complete_envelope(message, discover)):
                return None
            return {"resultType": "complete", "_meta": discover["_meta"]}
        return {} if self.initialize_id is not None else None

    def _pass_on(self, message: dict[str, Any]) -> None:
        """A call ``early`` gave back: the SDK's after all."""
        with self.lock:
            if self.failed is not None:
                self.wire.send(error(message["id"], INTERNAL_ERROR, self.failed))
            else:
                self._to_sdk(message)

    def _early(self) -> bool:
        """Whether the front still answers for the SDK: it answered this connection's opening
        from the cache, and the SDK is not serving yet."""
        return self.answered and self.cached is not None and not self.ready.is_set()

    # -- called from the SDK's side --------------------------------------------------------
    def deliver(self, response_id: object, text: str) -> None:
        """One message from the SDK (``response_id``: the id it answers, None for requests
        and notifications): to the host, unless it is the front's own business."""
        with self.lock:
            self.pending.discard(response_id)
            if response_id == PRIVATE_ID:
                self._keep(lambda: self._learn_tools(text))
                return
            if response_id is not None and response_id == self.initialize_id:
                self.initialize_id = _LEARNED
                result = json.loads(text).get("result")
                self.learned_initialize = result if isinstance(result, dict) else None
                if self.answered:
                    return
            if response_id is not None and response_id in self.learning:
                part = self.learning.pop(response_id)
                self._keep(lambda: self._learn(text, part))
                if response_id in self.dropped:
                    self.dropped.discard(response_id)
                    return
            if response_id is None and ACKNOWLEDGED in text and not self._acknowledge(text):
                return
        self.wire.send_text(text)

    def refuse(self, message: dict[str, Any], reason: str) -> None:
        """A message the SDK's own message model refuses: answered when it asked something."""
        if message.get("id") is not None:
            with self.lock:
                self.pending.discard(message["id"])
            self.wire.send(error(message["id"], INVALID_REQUEST, f"Invalid request: {reason}"))

    def _keep(self, learn: Callable[[], None]) -> None:
        try:
            learn()
        except (OSError, ValueError) as exc:  # a cache, never a reason to stop serving
            print(f"osk mcp: the handshake could not be kept in {self.handshake_path} "
                  f"({exc}); the next start answers once the SDK is loaded", file=sys.stderr)

    def _learn_tools(self, text: str) -> None:
        tools = json.loads(text).get("result")
        if not isinstance(tools, dict) or self.learned_initialize is None:
            return
        versions, latest = _sdk_versions()
        initialize = {k: v for k, v in self.learned_initialize.items() if k != "protocolVersion"}
        base = self.cached or Handshake([], "", {}, {})
        learned = base.with_part(versions=versions, latest=latest, initialize=initialize,
                                 tools=tools)
        if self.listed_from_cache and (self.cached is None or self.cached.tools != tools):
            self.wire.send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        self._save(learned)

    def _learn(self, text: str, part: str) -> None:
        """The SDK's answer to a probe or to a list, kept for the next run."""
        result = json.loads(text).get("result")
        if not isinstance(result, dict):
            return
        base = self.cached or Handshake([], "", {}, {})
        if part == "discover":
            self._save(base.with_part(discover=result))
        else:
            self._save(base.with_part(lists={**base.lists, part: result}))

    def _acknowledge(self, text: str) -> bool:
        """The SDK's acknowledgement of a subscription: kept for the next run; False when the
        front already gave it to the host."""
        params = json.loads(text).get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        sub = meta.get(SUBSCRIPTION_KEY) if isinstance(meta, dict) else None
        if sub not in self.listens:
            return True
        asked = self.listens.pop(sub)
        ack = {k: v for k, v in params.items() if k != "_meta"}
        base = self.cached or Handshake([], "", {}, {})
        self._keep(lambda: self._save(base.with_part(listen={"asked": asked, "params": ack})))
        if sub in self.acknowledged:
            self.acknowledged.discard(sub)
            return False
        return True

    def _save(self, learned: Handshake) -> None:
        from osk.store.fsutil import atomic_write

        if self.own and self.cached is not None and learned.to_json() == self.cached.to_json():
            return
        self.handshake_path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.handshake_path, learned.to_json())
        self.cached, self.own = learned, True

    def fail(self, reason: str) -> None:
        """The SDK side could not start or has stopped: every waiting request gets the reason."""
        with self.lock:
            self.failed = reason
            while True:
                try:
                    message = self.inbox.get_nowait()
                except queue.Empty:
                    break
                if message is not None and message.get("id") is not None and "method" in message:
                    self.wire.send(error(message["id"], INTERNAL_ERROR, reason))


def _complete_envelope(message: dict[str, Any], discover: dict[str, Any]) -> bool:
    """An envelope the SDK would serve: a version the probe's answer supports, and the
    client's capabilities."""
    meta = message["params"].get("_meta")
    supported = discover.get("supportedVersions")
    return (isinstance(meta, dict) and isinstance(supported, list)
            and meta.get(ENVELOPE_KEY) in supported
            and isinstance(meta.get(CAPABILITIES_KEY), dict)
            and isinstance(meta.get(CLIENT_KEY, {}), dict))


def _first_page(message: dict[str, Any]) -> bool:
    """A tools/list that asks for the list from its start (no cursor)."""
    params = message.get("params")
    return not params or (isinstance(params, dict) and not params.get("cursor"))


def _sdk_versions() -> tuple[list[str], str]:
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION

    return list(HANDSHAKE_PROTOCOL_VERSIONS), LATEST_HANDSHAKE_VERSION


# == running ===================================================================================
def _claim_stdio() -> tuple[int, int]:
    """Private copies of stdin and stdout for the protocol; fds 0 and 1 then point elsewhere."""
    wire_in, wire_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    return wire_in, wire_out


def run(handshake: Path, backend: Callable[[Front], None],
        early: Callable[..., bool] | None = None, served: Callable[..., bool] | None = None
        ) -> int:
    """Serve the host on stdin/stdout until it closes stdin. ``backend(front)`` runs the SDK on
    a thread: it takes messages from ``front.inbox`` (None: the host has gone), hands each
    answer to ``front.deliver`` and sets ``front.ready`` once it is serving. ``handshake`` is
    the file the SDK's handshake is kept in between runs; ``early`` takes a tool call while the
    SDK loads (``Front.early``), ``served`` one once it serves (``Front.served``)."""
    wire_in, wire_out = _claim_stdio()
    own = Handshake.load(handshake)
    front = Front(Wire(wire_out), handshake, own or Handshake.load(SHIPPED_HANDSHAKE),
                  own=own is not None, early=early, served=served)
    thread = threading.Thread(target=_guarded, args=(backend, front), name="osk-mcp", daemon=True)
    start = _once(thread.start)
    # The loading threads take the CPU (and the GIL) from the front: they start once the host
    # has the tool list and the front has answered all the host sent (``DRAINED``: a search
    # sent with the handshake goes first), or at once when there is no kept handshake to
    # answer from, and START_AFTER seconds after spawn at the latest (a host that waits).
    front.listed = start
    timer = threading.Timer(0 if front.cached is None else START_AFTER, start)
    timer.daemon = True
    timer.start()
    for item in read_lines(wire_in):
        front.handle(item)
    start()
    front.inbox.put(None)
    thread.join()
    return 0


def _once(call: Callable[[], None]) -> Callable[[], None]:
    lock, done = threading.Lock(), [False]

    def once() -> None:
        with lock:
            if not done[0]:
                done[0] = True
                call()

    return once


def _guarded(backend: Callable[[Front], None], front: Front) -> None:
    try:
        backend(front)
    except BaseException as exc:  # the front must still answer: report, never hang
        import traceback

        traceback.print_exc(file=sys.stderr)
        front.fail(f"the osk MCP server could not start or has stopped "
                   f"({type(exc).__name__}: {exc}); run `osk doctor` to see why")
    else:
        front.fail("the osk MCP server has stopped")


# == osk mcp ===================================================================================
class EngineOpener:
    """Opens and warms the engine on a thread of its own (``start``); ``get`` waits for it."""

    def __init__(self, vault: Vault, cwd: Path) -> None:
        self._done = threading.Event()
        self._engine: Engine | None = None
        self._listener: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._open, args=(vault, cwd), name="osk-open",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _open(self, vault: Vault, cwd: Path) -> None:
        try:
            from osk.engine.core import Engine

            # watch: hand edits reported by the kernel, not found by stat sweeps
            engine = Engine.open(vault, cwd=cwd, watch=True)
            engine.warm()  # the index and recheck table the first search would load
            engine.embed_after_writes = True  # the semantic vectors, off the request path
            engine.embed_in_background()
            self._listener = engine.listen_for_recall()
            self._engine = engine
        except BaseException as exc:  # given to every tool call, which shows it to the agent
            self._error = exc
        finally:
            self._done.set()

    def close(self) -> None:
        """Stop answering the hooks (the socket file goes with it)."""
        if self._done.is_set() and self._listener is not None:
            self._listener.close()

    def wait(self, timeout: float) -> None:
        """Until the engine is open (or could not be), ``timeout`` seconds at most."""
        self._done.wait(timeout)

    def opened(self) -> bool:
        """Whether the engine is open (without waiting for it)."""
        return self._done.is_set() and self._error is None

    def get(self) -> Engine:
        self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._engine is not None  # set before done, when opening raised nothing
        return self._engine


def serve(vault: str | None, cwd: Path) -> int:
    """`osk mcp`: find the vault (a missing one fails here, before anything is served), then
    answer the host at once while the SDK loads and the engine opens behind the handshake."""
    from osk.engine.vaults import open_vault
    from osk.surfaces.early import EarlySearch

    found = open_vault(vault, cwd)
    opener = EngineOpener(found, cwd)

    def quick(query: str, k: int, kind: str) -> Any:  # the index, when it vouches for itself
        from osk.reads import quick_search

        return quick_search.search(found.root, cwd, None, query, k, kind)

    early = EarlySearch(opener.get, quick, opener.opened)

    def engine() -> Engine:  # the SDK's side takes the engine over from the early searches
        opened = opener.get()
        early.close()
        return opened

    def backend(front: Front) -> None:
        early.wait_for_store(STORE_FIRST)  # a search sent with the handshake goes first
        opener.start()
        # The engine first (a first search needs it, not the SDK) when the front can answer
        # either generation's handshake meanwhile; never for long (an index being rebuilt).
        kept = front.cached is not None and front.cached.classic and front.cached.envelope
        opener.wait(ENGINE_FIRST if kept else 0)
        from osk.surfaces.server import run_backend

        run_backend(front, engine)

    try:
        return run(found.state(*HANDSHAKE_FILE), backend, early.take, early.served)
    finally:
        opener.close()
