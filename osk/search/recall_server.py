"""The recall channel's server half (``osk.hooks.recall.channel`` is the hook's; what both share
is ``osk.search.recall_wire``): a running MCP server with the semantic channel listens on its
own socket and answers a prompt with the hits of the orders ``search`` ranks by, each with the
hook's confidence (``osk.search.recall_hits``). Imported by the engine when it serves; never on
the hook path.

The same socket answers a fresh ``osk search`` (``osk.reads.quick_search.served``) with the
search tool's own answer for the session that process would have (``Engine.search_as``), so
the command line ranks by meaning without loading the model; a request naming another vault
is not answered.
"""

from __future__ import annotations

import math
import os
import socket
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osk.search import recall_hits
from osk.search.recall_wire import (
    MAX_REQUEST,
    Answer,
    SearchAsk,
    decode_request,
    decode_search,
    encode,
    encode_result,
    private,
    read_line,
    remove,
    server_enabled,
    socket_dir,
)

if TYPE_CHECKING:
    from osk.search.index import SearchIndex
    from osk.search.ranking import SearchResult
    from osk.store.vault import Vault

Search = Callable[[SearchAsk], "SearchResult"]  # the search tool's answer for an asking process

# Both channels back the fused order's first node when it is among the first AGREE_DEPTH of the
# lexical order and of the semantic one: the hook's gate then uses its lower floor
# (``osk.hooks.recall.per_prompt.AGREE_FLOOR``; chosen by bench/recall_gate.py).
AGREE_DEPTH = 3


# -- the server's side ------------------------------------------------------------------------
def answer(index: SearchIndex, vault: Vault, scope: str, prompt: str) -> Answer:
    """Rank ``prompt`` for a session bound to ``scope`` as ``search`` does (the index's own
    orders, as the index holds them now), with the hook's confidence for each hit. Also what
    bench/eval_retrieval.py measures the fused path with."""
    from osk.search.expand import query_terms
    from osk.search.ranking import scope_visibility

    query = prompt[:recall_hits.PROMPT_CHARS]
    weights = query_terms(query)
    if not weights:
        return Answer([], False, [])
    found = index.channels(query, k=recall_hits.DEPTH, scope=scope or None,
                           visible=scope_visibility(vault, scope or None),
                           fresh_within=math.inf)
    hits = recall_hits.recalled(found.ranking, found.order, weights, found.approvals)
    if not found.semantic:  # the model does not read the prompt: the lexical order alone
        return Answer(hits, False, hits)
    words = recall_hits.recalled(found.ranking, found.lexical[:recall_hits.DEPTH], weights,
                                 found.approvals)
    agree = backed(found.order[0][0], found.lexical, found.semantic)
    first = found.semantic[0][0]
    # Its confidence counts only the prompt's words; meaning put it first, so a hit beside a
    # surer one by words is not cut for holding fewer of them (the hook's gate).
    hits = [replace(hit, meant=True) if slot == first else hit
            for (slot, *_), hit in zip(found.order, hits, strict=True)]
    return Answer(hits, agree, words, found.ranking.similarity(first))


def backed(slot: int, lexical: Sequence[tuple[Any, ...]],
            semantic: Sequence[tuple[Any, ...]]) -> bool:
    """Both channels rank ``slot`` among their first ``AGREE_DEPTH``: words and meaning each
    put it at the head of their order, independently."""
    return (any(entry[0] == slot for entry in lexical[:AGREE_DEPTH])
            and any(entry[0] == slot for entry in semantic[:AGREE_DEPTH]))


class Listener:
    """One server's socket: answers each connection in turn on a daemon thread."""

    def __init__(self, index: SearchIndex, vault: Vault, search: Search | None = None) -> None:
        self.index, self.vault, self.search = index, vault, search
        self._stamp: object = None  # the vault generation at the last walk
        folder = socket_dir(vault)
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not private(folder):
            raise PermissionError(f"{folder} is not private to this user: not listening")
        self.path = folder / f"{os.getpid()}.sock"
        self._sock = _listening(self.path)
        import threading

        self._thread = threading.Thread(target=self._serve, name="osk-recall", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        if self.index.vectors is not None:  # the model now, not on the first prompt
            try:
                self.index.vectors.encoder()
            except Exception:  # the index reports a damaged model when it searches
                pass
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return  # closed
            with conn:
                try:
                    self._handle(conn)
                except Exception:  # one bad request must not stop the channel
                    import logging

                    logging.getLogger("osk.recall").exception("a recall request failed")

    def _handle(self, conn: socket.socket) -> None:
        import time

        line = read_line(conn, time.monotonic() + 1.0, MAX_REQUEST)
        if line is None:
            return
        asked = decode_search(line)
        if asked is not None:
            self._answer_search(conn, asked)
            return
        request = decode_request(line)
        if request is None:
            return
        scope, prompt = request
        # The engine hands its own writes to the index; another osk process's writes move the
        # vault generation (osk.store.generation), and only then is the walk (about 40 ms of CPU at
        # 5,000 nodes) worth paying. The stamp is taken before the walk, as that module says.
        from osk.store import generation

        stamp = generation.current(self.vault)
        if stamp != self._stamp:
            self.index.refresh()
            self._stamp = stamp
        conn.sendall(encode(answer(self.index, self.vault, scope, prompt)))

    def _answer_search(self, conn: socket.socket, asked: SearchAsk) -> None:
        """The search tool's answer for a fresh ``osk search``; nothing (the asking process then
        answers by words itself) when it names another vault, or the search refuses (the
        asking process then refuses in its own words)."""
        from osk.errors import OskError

        if self.search is None or not _same_folder(asked.vault, self.vault.root):
            return
        try:
            result = self.search(asked)
        except OskError:
            return
        try:
            conn.sendall(encode_result(result))
        except OSError:  # the asker stopped waiting (its bound: a second) and went on by words
            return

    def close(self) -> None:
        """Stop listening and remove the socket file. The serving thread ends as soon as it
        next waits for a connection (a request under way is answered first): closing alone
        does not wake a thread blocked in ``accept`` (on Linux it waited on the closed socket
        for good, one thread kept for each listener closed); shutting the socket down does."""
        try:
            with suppress(OSError):  # a socket that cannot be shut down: closing wakes it
                self._sock.shutdown(socket.SHUT_RDWR)
            self._sock.close()
        finally:
            remove(str(self.path))


def _listening(path: Path) -> socket.socket:
    """A socket listening at ``path``, which appears there only once it listens. Bound under
    another name first (as long, so it fits where the name does) and renamed when ready: a hook
    that met the ``.sock`` file between the bind and the listen was refused, took the socket for
    a dead server's and removed it, and the live server was never asked again."""
    binding = path.with_suffix(".bind")
    remove(str(path))
    remove(str(binding))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(binding))
        os.chmod(binding, 0o600)
        sock.listen(8)
        os.replace(binding, path)
    except BaseException:
        sock.close()
        remove(str(binding))
        raise
    return sock


def _same_folder(named: str, root: Path) -> bool:
    try:
        return os.path.samefile(named, root)
    except OSError:
        return False


def listen(index: SearchIndex, vault: Vault, search: Search | None = None) -> Listener | None:
    """A listener when the channel is on and the index has the semantic channel (without it
    the server would rank as the recall file does); None otherwise or if it cannot bind.
    ``search``: how it answers a fresh ``osk search`` (None: it does not)."""
    from osk.errors import OskError

    try:
        if (index.vectors is None or not hasattr(socket, "AF_UNIX")
                or not server_enabled(vault)):
            return None
        return Listener(index, vault, search)
    except (OSError, OskError):  # a bad setting is reported by the hook that reads it
        return None
