"""The recall channel, the hook's half: the prompt-submit hook asks the session's running MCP
server to rank (the server's half: ``osk.search.recall_server``; what both share, the socket
folder and the messages: ``osk.search.recall_wire``).

The hook cannot load the semantic model (its import path is the standard library and the
light search modules), but the MCP server has the index and, when installed, the model
loaded. Each server whose semantic channel is on listens on a Unix domain socket of its own
(``<pid>.sock`` in ``socket_dir``: the vault's device state, or a private folder under the
temp directory when that path is too long for a socket). For a prompt the hook

1. connects to the newest socket there (``CONNECT_TIMEOUT``), sends one JSON line
   ``{"scope": ..., "prompt": ...}`` and waits for one JSON line back (``ANSWER_TIMEOUT``
   for the whole exchange);
2. gets the hits of the order ``search`` ranks by for a session bound to that scope
   (``SearchIndex.channels``: the same isolation, locality, served versions of protected
   regions and validity; the fused order when the model reads the prompt), each with the
   hook's confidence (``osk.search.recall_hits.recalled``), and whether both channels rank the
   fused order's first node among their own first three (``recall_server.AGREE_DEPTH``), and
   how close in meaning
   the semantic order's first node is (its cosine similarity to the prompt);
3. then applies the same ``per_prompt.select`` as on the lexical path (trust, tombstones, the
   file still as indexed, validity markers, shown before), at the fused path's floor, or
   at the lower floor when the channels agree or the closeness reaches
   ``per_prompt.MEANING_FLOOR``; when that shows nothing, the lexical order's hits at a higher
   floor (``per_prompt.choose``).

Freshness: the engine hands its own writes to the index; before answering, the server walks
the vault for changes only when the vault generation (``osk.store.generation``) moved since its last
walk, i.e. another osk process wrote. A hand edit is found at the next such walk; until then
the hook's own check (the file's stat key against the indexed one) keeps a changed or deleted
node out, and a node added by hand is not yet found this way.

No socket, a refused or slow connection, or an answer that does not parse: ``ask`` returns
None and the hook ranks over the recall file as before. ``[recall] server`` in ``osk.toml``
turns the channel off (on by default; off: servers do not listen, hooks do not ask).

A fresh ``osk search`` asks the same way for the search tool's answer (``ask_search``, from
``osk.reads.quick_search.served``), waiting up to ``SEARCH_TIMEOUT``: a person at a terminal
can spare more than a hook, and far less than loading the model takes.

Top-level imports: standard library only (the hook imports this module).
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING

from osk.search.recall_wire import (
    MAX_ANSWER,
    Answer,
    SearchAsk,
    decode,
    decode_result,
    encode_request,
    encode_search,
    private,
    read_line,
    remove,
    socket_dir,
)

if TYPE_CHECKING:
    from osk.search.ranking import SearchResult
    from osk.store.vault import Vault

CONNECT_TIMEOUT = 0.05  # seconds: a live server accepts at once (the kernel does)
ANSWER_TIMEOUT = 0.3    # seconds for the whole exchange; past it the hook ranks lexically
TIMEOUT_ENV = "OSK_RECALL_TIMEOUT"  # seconds, to wait longer (tests on a loaded machine)
SOCKETS_TRIED = 2       # newest first: a stale socket of a server that died is skipped
SEARCH_TIMEOUT = 1.0    # seconds for a fresh `osk search`'s exchange (a search with meaning
                        # takes a server tens of ms; loading the model here, about 2 s)


def ask(vault: Vault, scope: str, prompt: str) -> Answer | None:
    """The running server's answer for this prompt, or None (ask the recall file)."""
    reply = _newest_reply(vault, encode_request(scope, prompt), answer_timeout())
    return decode(reply) if reply is not None else None


def ask_search(vault: Vault, asked: SearchAsk) -> SearchResult | None:
    """A running server's search tool's answer to a fresh ``osk search``, or None (no server
    of this vault answered within ``SEARCH_TIMEOUT``, or ``$OSK_RECALL_TIMEOUT``)."""
    reply = _newest_reply(vault, encode_search(asked), answer_timeout(SEARCH_TIMEOUT))
    return decode_result(reply) if reply is not None else None


def _newest_reply(vault: Vault, request: bytes, timeout: float) -> bytes | None:
    """The first answer to ``request`` from this vault's newest sockets, or None. ``socket`` is
    imported only once there is one to ask (3-4 ms a process that finds none is spared)."""
    if os.name == "nt":  # Windows' Python has no Unix sockets: the file only
        return None
    folder = socket_dir(vault)
    try:
        names = [entry for entry in os.scandir(folder) if entry.name.endswith(".sock")]
    except OSError:
        return None
    if not names or not private(folder):
        return None
    import socket

    if not hasattr(socket, "AF_UNIX"):  # a build without Unix sockets
        return None
    names.sort(key=_mtime, reverse=True)
    for entry in names[:SOCKETS_TRIED]:
        reply = _exchange(entry.path, request, timeout)
        if reply is not None:
            return reply
    return None


def _mtime(entry: os.DirEntry[str]) -> float:
    try:
        return entry.stat().st_mtime
    except OSError:
        return 0.0


def answer_timeout(default: float = ANSWER_TIMEOUT) -> float:
    """``default``, or ``$OSK_RECALL_TIMEOUT`` seconds when that is a positive number."""
    try:
        value = float(os.environ.get(TIMEOUT_ENV, ""))
    except ValueError:
        return default
    return value if 0 < value < math.inf else default


def _exchange(path: str, request: bytes, timeout: float) -> bytes | None:
    import socket
    import time

    deadline = time.monotonic() + timeout
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(CONNECT_TIMEOUT)
        try:
            conn.connect(path)
        except ConnectionRefusedError:
            remove(path)  # nobody listens: a server that died without cleaning up
            return None
        except OSError:
            return None
        try:
            conn.sendall(request)
            return read_line(conn, deadline, MAX_ANSWER)
        except OSError:
            return None
