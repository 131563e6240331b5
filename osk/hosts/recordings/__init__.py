"""What the real hosts send an MCP server, recorded from their stdio by the live suite and
replayed by `osk doctor` (which then connects as each host does, not as a client of its own).

The files here are made by ``tests/live/test_live_load.py`` with ``OSK_LIVE_RECORD=1``:
the pinned Claude Code and Codex CLIs start osk's server through ``tests/live/wiretap.py``,
which logs every line each way, and its ``recording_from_wire`` keeps the host's side. Never
written by hand. One file per host, version and protocol generation (``classic``: the
``initialize`` handshake; ``envelope``: the 2026-07-28 per-request envelope a
``server/discover`` probe opens), each::

    {"host": "claude", "version": "2.1.332", "generation": "envelope",
     "messages": [{"send": {...}, "after": [ids]}, ...]}

``after`` lists the requests whose answers the host had received since its previous message
(what it waited for before sending this one). Standard library only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RECORDINGS = Path(__file__).resolve().parent
PROBE = "server/discover"


@dataclass(frozen=True)
class Recording:
    host: str
    version: str
    generation: str  # "classic" or "envelope"
    messages: tuple[dict[str, Any], ...]  # {"send": message, "after": [ids]}

    @property
    def opening(self) -> dict[str, Any]:
        """The request this recording's generation was opened with: a probe, or initialize."""
        method = PROBE if self.generation == "envelope" else "initialize"
        return next(m["send"] for m in self.messages if m["send"].get("method") == method)


def recordings(host: str) -> dict[str, Recording]:
    """The newest recorded version's recordings of ``host``, by generation (none: empty)."""
    found: dict[str, list[Recording]] = {}
    for path in sorted(RECORDINGS.glob(f"{host}-*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        made = Recording(str(data["host"]), str(data["version"]), str(data["generation"]),
                         tuple(data["messages"]))
        found.setdefault(made.generation, []).append(made)
    return {generation: max(made, key=lambda r: _version_key(r.version))
            for generation, made in found.items()}


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) if part.isdigit() else 0 for part in version.split("."))
