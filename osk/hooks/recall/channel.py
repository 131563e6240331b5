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

Top-level imports: standard library only (the hook imports this module).
"""

from __future__ import annotations

import math
import os
import socket
from typing import TYPE_CHECKING

from osk.search.recall_wire import (
    MAX_ANSWER,
    Answer,
    decode,
    encode_request,
    private,
    read_line,
    remove,
    socket_dir,
)

if TYPE_CHECKING:
    from osk.store.vault import Vault

CONNECT_TIMEOUT = 0.05  # seconds: a live server accepts at once (the kernel does)
ANSWER_TIMEOUT = 0.3    # seconds for the whole exchange; past it the hook ranks lexically
TIMEOUT_ENV = "OSK_RECALL_TIMEOUT"  # seconds, to wait longer (tests on a loaded machine)
SOCKETS_TRIED = 2       # newest first: a stale socket of a server that died is skipped


def ask(vault: Vault, scope: str, prompt: str) -> Answer | None:
    """The running server's answer for this prompt, or None (ask the recall file)."""
    if not hasattr(socket, "AF_UNIX"):  # Windows' Python has no Unix sockets: the file only
        return None
    folder = socket_dir(vault)
    try:
        names = [entry for entry in os.scandir(folder) if entry.name.endswith(".sock")]
    except OSError:
        return None
    if not names or not private(folder):
        return None
    names.sort(key=_mtime, reverse=True)
    request = encode_request(scope, prompt)
    for entry in names[:SOCKETS_TRIED]:
        reply = _exchange(entry.path, request)
        if reply is not None:
            return decode(reply)
    return None


def _mtime(entry: os.DirEntry[str]) -> float:
    try:
        return entry.stat().st_mtime
    except OSError:
        return 0.0


def answer_timeout() -> float:
    """``ANSWER_TIMEOUT``, or ``$OSK_RECALL_TIMEOUT`` seconds when that is a positive number."""
    try:
        value = float(os.environ.get(TIMEOUT_ENV, ""))
    except ValueError:
        return ANSWER_TIMEOUT
    return value if 0 < value < math.inf else ANSWER_TIMEOUT


def _exchange(path: str, request: bytes) -> bytes | None:
    import time

    deadline = time.monotonic() + answer_timeout()
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
