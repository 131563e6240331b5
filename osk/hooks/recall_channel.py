"""The recall channel: the prompt-submit hook asks the session's running MCP server to rank.

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
   hook's confidence (``recall.recalled``), and whether both channels rank the fused order's
   first node among their own first three (``recall.AGREE_DEPTH``), and how close in meaning
   the semantic order's first node is (its cosine similarity to the prompt);
3. then applies the same ``recall.select`` as on the lexical path (trust, tombstones, the
   file still as indexed, validity markers, shown before), at the fused path's floor, or
   at the lower floor when the channels agree or the closeness reaches ``recall.MEANING_FLOOR``;
   when that shows nothing, the lexical order's hits at a higher floor (``recall.choose``).

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

import json
import math
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING

from osk.store.fastclass import dataclass

if TYPE_CHECKING:
    from osk.hooks.hits import Recalled
    from osk.store.vault import Vault

CONNECT_TIMEOUT = 0.05  # seconds: a live server accepts at once (the kernel does)
ANSWER_TIMEOUT = 0.3    # seconds for the whole exchange; past it the hook ranks lexically
TIMEOUT_ENV = "OSK_RECALL_TIMEOUT"  # seconds, to wait longer (tests on a loaded machine)
SOCKETS_TRIED = 2       # newest first: a stale socket of a server that died is skipped
MAX_REQUEST = 64 * 1024
MAX_ANSWER = 1 << 20
SOCKET_PATH_MAX = 100   # AF_UNIX paths hold about 108 bytes; keep a margin


@dataclass(frozen=True)
class Answer:
    hits: list[Recalled]   # the fused order (the lexical one when the model does not read it)
    agree: bool  # both channels rank the fused order's first node near their own head
    words: list[Recalled]  # the lexical order alone (``recall.choose``: its rescue)
    closeness: float = 0.0  # cosine similarity of the semantic order's first node to the prompt


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


def _private(folder: Path) -> bool:
    """Ours and closed to others: a socket found elsewhere is not asked."""
    try:
        st = os.stat(folder)
    except OSError:
        return False
    return st.st_uid == os.getuid() and not st.st_mode & 0o077


# -- the hook's side --------------------------------------------------------------------------
def ask(vault: Vault, scope: str, prompt: str) -> Answer | None:
    """The running server's answer for this prompt, or None (ask the recall file)."""
    if not hasattr(socket, "AF_UNIX"):  # Windows' Python has no Unix sockets: the file only
        return None
    folder = socket_dir(vault)
    try:
        names = [entry for entry in os.scandir(folder) if entry.name.endswith(".sock")]
    except OSError:
        return None
    if not names or not _private(folder):
        return None
    names.sort(key=_mtime, reverse=True)
    request = json.dumps({"scope": scope, "prompt": prompt}).encode("utf-8") + b"\n"
    for entry in names[:SOCKETS_TRIED]:
        reply = _exchange(entry.path, request)
        if reply is not None:
            return _parse(reply)
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
            _remove(path)  # nobody listens: a server that died without cleaning up
            return None
        except OSError:
            return None
        try:
            conn.sendall(request)
            return _read_line(conn, deadline, MAX_ANSWER)
        except OSError:
            return None


def _read_line(conn: socket.socket, deadline: float, limit: int) -> bytes | None:
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


def _parse(reply: bytes) -> Answer | None:
    """The server's answer as Recalled hits; None for anything malformed."""
    from osk.hooks.hits import Recalled

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


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


