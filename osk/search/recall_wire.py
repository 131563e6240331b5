"""What the two halves of the recall channel share: where the sockets live, what a request and
an answer look like on the socket, and whether the channel is on.

The hook's half (``osk.hooks.recall.channel``) asks; the server's half
(``osk.search.recall_server``), inside a running MCP server, answers. One JSON line each way:
the request ``{"scope": ..., "prompt": ...}`` (at most ``MAX_REQUEST`` bytes), the answer
``{"hits": [...], "agree": ..., "words": [...], "closeness": ...}`` (at most ``MAX_ANSWER``),
each hit a ``Recalled`` as a JSON object (``encode`` and ``decode``, here so the two halves
cannot drift apart).

A fresh ``osk search`` asks the same socket for the search tool's answer
(``osk.reads.quick_search.served``): the request ``{"search": {...}}`` (a ``SearchAsk``), the
answer ``{"result": {"scope": ..., "query": ..., "hits": [...]}}``, each hit a
``osk.search.ranking.Hit`` as a JSON object (``encode_search``, ``decode_search``,
``encode_result``, ``decode_result``).

Top-level imports: standard library only (the hook imports this module).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osk.errors import OskError
from osk.search.recall_hits import Recalled
from osk.store.fastclass import dataclass

if TYPE_CHECKING:
    import socket

    from osk.search.ranking import SearchResult
    from osk.store.vault import Vault

MAX_REQUEST = 64 * 1024
MAX_ANSWER = 1 << 20
SOCKET_PATH_MAX = 100   # AF_UNIX paths hold about 108 bytes; keep a margin


@dataclass(frozen=True)
class Answer:
    """A server's ranking of one prompt, as the hook's gate reads it."""

    hits: list[Recalled]   # the fused order (the lexical one when the model does not read it)
    agree: bool  # both channels rank the fused order's first node near their own head
    words: list[Recalled]  # the lexical order alone (the gate's rescue)
    closeness: float = 0.0  # cosine similarity of the semantic order's first node to the prompt


def server_enabled(vault: Vault) -> bool:
    """``[recall] server`` (default true): servers listen, and the hook asks them before the
    recall file. On by default: on the dev set it injects 44 of 54 answers against the recall
    file's 40, with as much silence (docs/performance.md)."""
    section = vault.settings().extra.get("recall", {})
    value = section.get("server", True) if isinstance(section, Mapping) else True
    if not isinstance(value, bool):
        raise OskError(f"osk.toml: [recall] server must be true or false (got {value!r})")
    return value


# -- where ------------------------------------------------------------------------------------
def socket_dir(vault: Vault) -> Path:
    """The folder the vault's servers listen in: device state, or when a socket path there
    would be too long, ``/tmp/osk-UID/HASH`` (private to this user; /tmp rather than
    ``$TMPDIR``, which can itself be too long for a socket path)."""
    preferred = vault.state("recall")
    if len(os.fsencode(preferred)) + len("/4194304.sock") <= SOCKET_PATH_MAX:
        return preferred
    import hashlib

    digest = hashlib.sha256(os.fsencode(vault.state_dir)).hexdigest()[:16]
    return Path("/tmp") / f"osk-{os.getuid()}" / digest


def private(folder: Path) -> bool:
    """Ours and closed to others: a socket found elsewhere is neither asked nor bound."""
    try:
        st = os.stat(folder)
    except OSError:
        return False
    return st.st_uid == os.getuid() and not st.st_mode & 0o077


def remove(path: str) -> None:
    """Remove a socket file (one nobody listens on, or our own on close)."""
    try:
        os.unlink(path)
    except OSError:
        pass


# -- on the socket ----------------------------------------------------------------------------
def read_line(conn: socket.socket, deadline: float, limit: int) -> bytes | None:
    """One line from ``conn`` by ``deadline`` (``time.monotonic``), or None: past the deadline,
    over ``limit`` bytes, or the peer closed first."""
    import time

    data = b""
    while not data.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or len(data) > limit:
            return None
        conn.settimeout(left)
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    return data


def encode_request(scope: str, prompt: str) -> bytes:
    """A prompt to rank for a session bound to ``scope``, as the hook sends it."""
    return json.dumps({"scope": scope, "prompt": prompt}).encode("utf-8") + b"\n"


def decode_request(line: bytes) -> tuple[str, str] | None:
    """(scope, prompt) of a request; None when either is not text. Not JSON (or not an object)
    raises: the server logs it."""
    request = json.loads(line)
    scope, prompt = request.get("scope"), request.get("prompt")
    if not isinstance(scope, str) or not isinstance(prompt, str):
        return None
    return scope, prompt


def encode(answer: Answer) -> bytes:
    """The answer as the server sends it: one JSON line."""
    payload = {"hits": [plain(hit) for hit in answer.hits], "agree": answer.agree,
               "words": [plain(hit) for hit in answer.words], "closeness": answer.closeness}
    return json.dumps(payload, ensure_ascii=False).encode("utf-8") + b"\n"


def plain(hit: Any) -> dict[str, Any]:
    """One hit (a ``Recalled`` or a search ``Hit``) as a JSON object."""
    from dataclasses import asdict  # the server's side: the asking processes never import it

    return asdict(hit)


def decode(reply: bytes) -> Answer | None:
    """The server's answer as Recalled hits; None for anything malformed."""
    try:
        message = json.loads(reply)
        hits, words = ([Recalled(**{**item, "markers": tuple(item["markers"]),
                                    "stat": tuple(item["stat"])}) for item in message[key]]
                       for key in ("hits", "words"))
        closeness = message.get("closeness", 0.0)
        if isinstance(closeness, bool) or not isinstance(closeness, int | float):
            return None
        return Answer(hits, message["agree"] is True, words, float(closeness))
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


# -- a fresh `osk search` asking for the search tool's answer ------------------------------------
@dataclass(frozen=True)
class SearchAsk:
    """What a fresh ``osk search`` asks a running server: its vault, the directory it runs in
    and its command line's search options, so the server searches for the session that
    process would have (``Engine.search_as``)."""

    vault: str  # the vault's root as the asking process found it: a server of another refuses
    cwd: str
    scope: str | None
    query: str
    k: int | None
    kind: str
    as_of: str | None


_ASK_TYPES: dict[str, tuple[type, ...]] = {
    "vault": (str,), "cwd": (str,), "scope": (str, type(None)), "query": (str,),
    "k": (int, type(None)), "kind": (str,), "as_of": (str, type(None))}


def encode_search(ask: SearchAsk) -> bytes:
    """The search request as the asking process sends it: one JSON line."""
    fields = {name: getattr(ask, name) for name in _ASK_TYPES}
    return json.dumps({"search": fields}).encode("utf-8") + b"\n"


def decode_search(line: bytes) -> SearchAsk | None:
    """The search request in ``line``; None when it is not one (a hook's request) or a field
    is missing or of another type. Not JSON raises, as ``decode_request``."""
    message = json.loads(line)
    fields = message.get("search") if isinstance(message, dict) else None
    if not isinstance(fields, dict) or set(fields) != set(_ASK_TYPES):
        return None
    if any(isinstance(value, bool) or not isinstance(value, _ASK_TYPES[name])
           for name, value in fields.items()):
        return None
    return SearchAsk(**fields)


def encode_result(result: SearchResult) -> bytes:
    """The search tool's answer, every field of every hit, as the server sends it."""
    payload = {"scope": result.scope, "query": result.query,
               "hits": [plain(hit) for hit in result.hits]}
    return json.dumps({"result": payload}, ensure_ascii=False).encode("utf-8") + b"\n"


def decode_result(reply: bytes) -> SearchResult | None:
    """The server's ``SearchResult``; None for anything malformed."""
    from osk.search.ranking import Hit, SearchResult

    try:
        found = json.loads(reply)["result"]
        hits = tuple(Hit(**{**item, "markers": tuple(item["markers"])}) for item in found["hits"])
        if not isinstance(found["scope"], str) or not isinstance(found["query"], str):
            return None
        return SearchResult(found["scope"], found["query"], hits)
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
