"""Searches the stdio front answers itself: before the MCP SDK is loaded, and after.

Importing the SDK costs about a second of CPU (pydantic builds its protocol models for two
protocol generations), many seconds on a loaded machine, while opening the engine costs a
fraction of that. A model that searches first thing would wait for the SDK. So while the SDK
is not yet serving, the stdio front hands a plain ``search`` call (only known arguments, of
the right types and sizes) to ``EarlySearch``, which answers from the persisted index when
it vouches for itself (``osk.reads.quick_search``, what a fresh ``osk search`` answers from: no
engine to wait for), else waits for the engine alone, and answers with what the SDK's side
would send (the fields of ``osk.surfaces.search_models``' result models, dumped without
pydantic: ``plain_search_out``); until those searches have their store's answer, the loading
of the SDK and the engine waits (``wait_for_store``). A call it cannot answer for sure
(unusual arguments, an error from the engine) goes on to the SDK, which gives the error it
always gives. Once the SDK's side takes the engine (``close``), no early search is running
and no new one starts.

Once the SDK serves, a plain search is still answered here (``served``), by the open engine
on the front's own thread, whenever the SDK owes the host no answer: the SDK's message
models, its event loop and its worker threads cost a search more CPU than the search itself
at 10,000 records (docs/performance.md). The engine serves one caller at a time
(``Engine.calls``), whichever side asks.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: the early front answers before the engine loads
    from osk.engine.core import Engine

ARGUMENTS = {"query", "k", "kind"}  # as_of is parsed by the argument model: the SDK's
# search's result as the tool returns it (``osk.surfaces.search_models.SearchOut``/``HitOut``)
SEARCH_FIELDS = ("scope", "query", "hits")
HIT_FIELDS = ("title", "path", "id", "summary", "updated", "score", "markers")
# A query is words, not a document: a pasted file as a query costs seconds and is echoed back.
MAX_QUERY = 4000


class EarlySearch:
    """Takes a search call from the front while the SDK loads (``take``) and answers it."""

    def __init__(self, engine: Callable[[], Engine],
                 quick: Callable[[str, int, str], Any] | None = None,
                 opened: Callable[[], bool] = lambda: False) -> None:
        self._engine = engine
        self._quick = quick  # (query, k, kind) -> the engine's SearchResult, or None
        self._opened = opened  # whether the engine is open (``served`` never waits for it)
        self._state = threading.Condition()
        self._running = 0
        self._from_store = 0  # searches still trying the store (no engine asked yet)
        self._closed = False

    def take(self, message: dict[str, Any], answer: Callable[[dict[str, Any]], None],
             pass_on: Callable[[], None]) -> bool:
        """Whether this call is answered here (``answer(result)``, else ``pass_on()`` hands it
        to the SDK after all); False: the SDK's, as is."""
        arguments = self._plain(message)
        if arguments is None:
            return False
        with self._state:
            if self._closed:
                return False
            self._running += 1
            self._from_store += 1
        threading.Thread(target=self._run, args=(arguments, answer, pass_on),
                         name="osk-early-search", daemon=True).start()
        return True

    def served(self, message: dict[str, Any], answer: Callable[[dict[str, Any]], None]
               ) -> bool:
        """Answer a plain search now, with the open engine, once the SDK serves: what its
        side would send, without its framing (its message models, its event loop and worker
        threads cost a search about 1.6 ms of CPU, more than the search at 10,000 records:
        docs/performance.md). False (an unusual call, the engine not open yet, an error from
        it): the SDK's, as is."""
        arguments = self._plain(message)
        asked = _bounded(arguments) if arguments is not None else None
        if asked is None or not self._opened():
            return False
        try:
            result = _result(self._found(asked, None), sdk_text)
        except Exception:  # the SDK's side answers it, with the error it always gives
            return False
        answer(result)
        return True

    def wait_for_store(self, timeout: float) -> None:
        """Until no search is being answered from the store, ``timeout`` seconds at most: the
        loading waits for them (they need seconds of nothing it makes)."""
        with self._state:
            self._state.wait_for(lambda: self._from_store == 0, timeout)

    def _left_store(self) -> None:
        with self._state:
            self._from_store -= 1
            self._state.notify_all()

    def close(self) -> None:
        """No early search from now on; returns once none is running."""
        with self._state:
            self._closed = True
            self._state.wait_for(lambda: self._running == 0)

    def _plain(self, message: dict[str, Any]) -> dict[str, Any] | None:
        params = message.get("params")
        if not isinstance(params, dict) or params.get("name") != "search":
            return None
        arguments = params.get("arguments")
        if not isinstance(arguments, dict) or not set(arguments) <= ARGUMENTS:
            return None
        query, k, kind = arguments.get("query"), arguments.get("k"), arguments.get("kind", "all")
        if not isinstance(query, str) or kind not in ("all", "nodes", "rounds"):
            return None
        if k is not None and (isinstance(k, bool) or not isinstance(k, int)):
            return None
        return {"query": query, "k": k, "kind": kind}

    def _run(self, arguments: dict[str, Any], answer: Callable[[dict[str, Any]], None],
             pass_on: Callable[[], None]) -> None:
        try:
            try:
                asked = _bounded(arguments)
                quick = self._quick(*asked) if asked and self._quick is not None else None
            finally:
                self._left_store()
            result = _result(self._found(asked, quick)) if asked is not None else None
        except Exception:  # the SDK's side answers it, with the error it always gives
            result = None
        finally:
            with self._state:
                self._running -= 1
                self._state.notify_all()
        if result is None:
            pass_on()
        else:
            answer(result)

    def _found(self, asked: tuple[str, int, str], quick: Any) -> dict[str, Any]:
        """The search's result as the tool dumps it: the store's answer, else the engine's
        (waited for)."""
        query, k, kind = asked
        if quick is None:
            engine = self._engine()
            with engine.calls:  # the recall socket's searches run on a thread of their own
                quick = engine.search(query, k=k, as_of=None, kind=kind)
        return plain_search_out(quick)


def _bounded(arguments: dict[str, Any]) -> tuple[str, int, str] | None:
    """(query, k, kind) within the argument model's bounds; None: the SDK's side says which."""
    from osk.search.versions import DEFAULT_K, MAX_K

    query, kind = arguments["query"], arguments["kind"]
    k = DEFAULT_K if arguments["k"] is None else arguments["k"]
    return (query, k, kind) if 0 < len(query) <= MAX_QUERY and 1 <= k <= MAX_K else None


def _result(found: dict[str, Any], text: Callable[[dict[str, Any]], str] | None = None
            ) -> dict[str, Any]:
    """What the SDK's side sends for a tool's result: the text (``json_text``, or ``text``),
    and the structured content."""
    return {"content": [{"type": "text", "text": (text or json_text)(found)}],
            "structuredContent": found, "isError": False}


def plain_search_out(result: Any) -> dict[str, Any]:
    """``search_models.SearchOut`` of a ``SearchResult`` as the SDK's side dumps it (JSON
    mode), built without pydantic: importing it and building the result models costs a first
    search about 200 ms of CPU, more than the search itself (docs/performance.md). The fields
    are ``SEARCH_FIELDS`` and ``HIT_FIELDS``, which a test keeps equal to the models'."""
    hits = [{name: list(value) if name == "markers" else value
             for name in HIT_FIELDS for value in (getattr(hit, name),)}
            for hit in result.hits]
    return {"scope": result.scope, "query": result.query, "hits": hits}


def sdk_text(found: dict[str, Any]) -> str:
    """The result's text content written as the SDK's side writes it, by the same call: once
    the SDK is loaded, pydantic_core is too, and it writes the text ten times faster than
    ``json`` indents it (13 against 140 us for ten hits)."""
    import pydantic_core

    return pydantic_core.to_json(found, indent=2).decode()


def json_text(found: dict[str, Any]) -> str:
    """The result's text content as the SDK's side writes it (``pydantic_core.to_json``,
    indented by 2, UTF-8 unescaped); a number below 1e-4 is written as Python writes it
    (``1e-05`` for pydantic's ``1e-5``: the same value)."""
    return json.dumps(found, indent=2, ensure_ascii=False)
