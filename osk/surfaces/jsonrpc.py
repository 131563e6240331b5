"""JSON-RPC as both sides of `osk mcp` speak it: the error codes, the shapes of an error and
of a refused tool call, and what the SDK's side (``osk.surfaces.server``) uses of the
standard-library front (``osk.surfaces.stdio``) that feeds it. Standard library only: the front
imports it before the SDK loads.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Protocol

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


def error(id_: object, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": message}}


def tool_error(id_: object, text: str) -> dict[str, Any]:
    """A tool call refused before it ran: an error result the model reads, as the SDK gives."""
    return {"jsonrpc": "2.0", "id": id_,
            "result": {"content": [{"type": "text", "text": text}], "isError": True}}


class Pipe(Protocol):
    """The front as the SDK's side sees it: the messages queued for it (None: the host has
    gone), the event it sets once it serves, and the two ways it answers the host."""

    inbox: queue.Queue[dict[str, Any] | None]
    ready: threading.Event

    def deliver(self, response_id: object, text: str) -> None: ...

    def refuse(self, message: dict[str, Any], reason: str) -> None: ...
