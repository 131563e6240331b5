"""Searches answered before the MCP SDK is loaded.

Importing the SDK costs about a second of CPU (pydantic builds its protocol models for two
protocol generations), many seconds on a loaded machine, while opening the engine costs a
fraction of that. A model that searches first thing would wait for the SDK. So while the SDK
is not yet serving, the stdio front hands a plain ``search`` call (only known arguments, of
the right types and sizes) to ``EarlySearch``, which answers from the persisted index when
it vouches for itself (``osk.quick_search``, what a fresh ``osk search`` answers from: no
engine to wait for), else waits for the engine alone, and answers with the same models and
conversion as the SDK's side (``osk.surfaces.search_models``); a
call it cannot answer for sure (unusual arguments, an error from the engine) goes on to the
SDK, which gives the error it always gives. Once the SDK's side takes the engine
(``close``), no early search is running and no new one starts: the engine serves one caller at
a time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

ARGUMENTS = {"query", "k", "kind"}  # as_of is parsed by the argument model: the SDK's


class EarlySearch:
    """Takes a search call from the front while the SDK loads (``take``) and answers it."""

    def __init__(self, engine: Callable[[], Any],
                 quick: Callable[[str, int, str], Any] | None = None) -> None:
        self._engine = engine
        self._quick = quick  # (query, k, kind) -> the engine's SearchResult, or None
        self._state = threading.Condition()
        self._running = 0
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
        threading.Thread(target=self._run, args=(arguments, answer, pass_on),
                         name="osk-early-search", daemon=True).start()
        return True

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
            result = self._search(arguments)
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

    def _search(self, arguments: dict[str, Any]) -> dict[str, Any] | None:
        import pydantic_core

        from osk.search.versions import DEFAULT_K, MAX_K
        from osk.surfaces.search_models import MAX_QUERY, as_search_out, search_out

        query, kind = arguments["query"], arguments["kind"]
        k = DEFAULT_K if arguments["k"] is None else arguments["k"]
        if not (0 < len(query) <= MAX_QUERY and 1 <= k <= MAX_K):
            return None  # outside the argument model's bounds: the SDK's side says which
        quick = self._quick(query, k, kind) if self._quick is not None else None
        if quick is not None:
            found = as_search_out(quick)
        else:
            found = search_out(self._engine(), query, k=k, as_of=None, kind=kind)
        # What the SDK's side sends for a tool's result: the text, and the structured content.
        text = pydantic_core.to_json(found, indent=2).decode()
        return {"content": [{"type": "text", "text": text}],
                "structuredContent": found.model_dump(mode="json", by_alias=True),
                "isError": False}
