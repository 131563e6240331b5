"""A tap between a host CLI and the MCP server it starts: every line each way, timed.

    python wiretap.py LOG MODE COMMAND...

runs COMMAND (the server the host registered) and copies the host's lines to it and its lines
back, appending each as one JSON line to LOG: ``{"t": seconds since start, "dir": "in"|"out",
"line": text}``. MODE ``pass`` changes nothing; MODE ``classic`` plays a server that speaks
only the classic handshake: the tap itself refuses a ``server/discover`` probe (method not
found, as such a server answers) and does not pass it on, so the recording shows what the host
sends to a classic-only server. Standard library only: the host starts it as its MCP server.

``recording_from_wire`` turns such a log into a recording `osk doctor` replays
(osk/hosts/recordings).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from typing import Any


def main(argv: list[str]) -> int:
    log_path, mode, command = argv[0], argv[1], argv[2:]
    start = time.monotonic()
    lock = threading.Lock()
    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert server.stdin is not None and server.stdout is not None
    log = open(log_path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115 - lives with main

    def note(direction: str, line: bytes) -> None:
        entry = {"t": round(time.monotonic() - start, 4), "dir": direction,
                 "line": line.decode("utf-8", "replace").rstrip("\n")}
        with lock:
            log.write(json.dumps(entry) + "\n")

    def to_host(line: bytes) -> None:
        with lock:
            sys.stdout.buffer.write(line)
            sys.stdout.buffer.flush()

    def upstream() -> None:
        for line in sys.stdin.buffer:
            note("in", line)
            refused = _refuse_probe(line) if mode == "classic" else None
            if refused is not None:
                note("out", refused)
                to_host(refused)
                continue
            server.stdin.write(line)
            server.stdin.flush()
        server.stdin.close()

    threading.Thread(target=upstream, daemon=True).start()
    for line in server.stdout:
        note("out", line)
        to_host(line)
    return server.wait()


def _refuse_probe(line: bytes) -> bytes | None:
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("method") != "server/discover":
        return None
    answer = {"jsonrpc": "2.0", "id": message.get("id"),
              "error": {"code": -32601, "message": "Method not found: server/discover"}}
    return json.dumps(answer).encode("utf-8") + b"\n"


PROBE = "server/discover"


def recording_from_wire(host: str, version: str, wire: str) -> dict[str, Any]:
    """A recording from a wire tap's log (one JSON line per message: ``dir`` "in" from the
    host, "out" to it, ``line`` the message). The generation is the one whose opening request
    was answered first with a result."""
    messages: list[dict[str, Any]] = []
    answered: list[object] = []
    opened: dict[object, str] = {}  # the opening requests' ids -> generation
    generation = ""
    for entry in (json.loads(line) for line in wire.splitlines() if line.strip()):
        try:
            message = json.loads(entry["line"])
        except ValueError:
            continue
        if entry["dir"] == "in":
            method = message.get("method")
            if method in (PROBE, "initialize") and not opened:
                opened[message.get("id")] = "envelope" if method == PROBE else "classic"
            elif method == "initialize":
                opened[message.get("id")] = "classic"
            messages.append({"send": message, "after": answered})
            answered = []
        elif "method" not in message and "id" in message:
            answered = [*answered, message["id"]]
            if not generation and "result" in message and message["id"] in opened:
                generation = opened[message["id"]]
    if not generation:
        raise ValueError(f"the {host} {version} wire log shows no handshake that succeeded")
    return {"host": host, "version": version, "generation": generation, "messages": messages}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
