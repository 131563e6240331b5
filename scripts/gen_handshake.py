"""Write osk/surfaces/handshake.json: what this osk's MCP SDK answers a host's handshake in
both protocol generations (classic: ``initialize``; envelope, as Claude Code opens it: the
``server/discover`` probe and the ``subscriptions/listen`` acknowledgement; in both, the first
page of each list), so that a vault's first `osk mcp` answers it at once, before the SDK is
imported (``osk.surfaces.stdio.SHIPPED_HANDSHAKE``).

Run after changing a tool, the server's instructions, osk's version or the SDK:
    .venv/bin/python scripts/gen_handshake.py
tests/surfaces/test_server_stdio.py fails while the shipped file differs from what it learns.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "osk" / "surfaces" / "handshake.json"
LISTS = ("tools/list", "prompts/list", "resources/list", "resources/templates/list")
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "gen_handshake", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": {}}
LISTENS = {"promptsListChanged": True, "resourcesListChanged": True, "toolsListChanged": True}
TIMEOUT = 120.0


def learn(scratch: Path) -> dict[str, Any]:
    """The handshake real `osk mcp` servers learn from their SDK in a new vault under
    ``scratch``, one connection of each generation. Each list is asked once the SDK serves
    (an ``overview`` call answered), so the SDK answers it and the server keeps it."""
    from osk.store.vault import init

    vault = init(scratch / "vault", git=False)
    _connect(vault.root, [
        {"id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "gen_handshake", "version": "0"}}},
        {"method": "notifications/initialized"},
    ], {})
    _connect(vault.root, [
        {"id": "probe", "method": "server/discover", "params": {"_meta": ENVELOPE}},
        {"method": "subscriptions/listen", "id": "listen",
         "params": {"_meta": ENVELOPE, "notifications": LISTENS}},
    ], {"_meta": ENVELOPE})
    kept = json.loads(vault.state("mcp", "handshake.json").read_text(encoding="utf-8"))
    if not kept.get("listen"):
        raise RuntimeError("the server kept no acknowledgement of subscriptions/listen")
    return dict(kept)


def _connect(root: Path, opening: list[dict[str, Any]], meta: dict[str, Any]) -> None:
    """One connection to a new `osk mcp`: ``opening``, an ``overview`` answered (the SDK
    serves), then the first page of each list, each answered."""
    from osk.hosts.connect import ReplyLines, close_server, send_message

    env = {k: v for k, v in os.environ.items() if k != "OSK_VAULT"}
    proc = subprocess.Popen([sys.executable, "-m", "osk", "--vault", str(root), "mcp"],
                            cwd=root, env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + TIMEOUT
    try:
        lines = ReplyLines(proc)
        for message in opening:
            send_message(proc, {"jsonrpc": "2.0", **message})
            if "id" in message and message["method"] != "subscriptions/listen":
                lines.response(message["id"], deadline)
        send_message(proc, {"jsonrpc": "2.0", "id": "overview", "method": "tools/call",
                            "params": {"name": "overview", "arguments": {}, **meta}})
        lines.response("overview", deadline)
        for method in LISTS:
            send_message(proc, {"jsonrpc": "2.0", "id": method, "method": method,
                                **({"params": meta} if meta else {})})
            lines.response(method, deadline)
    finally:
        close_server(proc)


def main() -> int:
    with tempfile.TemporaryDirectory() as scratch:
        learned = learn(Path(scratch))
    SHIPPED.write_text(json.dumps(learned, ensure_ascii=False, sort_keys=True, indent=1) + "\n",
                       encoding="utf-8")
    print(f"wrote {SHIPPED.relative_to(ROOT)} ({len(learned['tools']['tools'])} tools)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
