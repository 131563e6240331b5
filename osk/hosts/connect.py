"""Speaking JSON-RPC to a spawned `osk mcp` the way `osk doctor` does: its own short exchange
(``osk.hosts.doctor.list_tools``) and, here, each host's as the host sends it.

``connect_as`` replays what a real host sent osk's server, recorded by the live suite
(``osk.hosts.recordings``): the opening as the host makes it when the server is slow (Claude
Code's ``server/discover`` probe with its fallback ``initialize`` right behind it), the
generation the host then keeps (the one whose answer succeeds first), and the rest of that
generation's recorded session, waiting where the host waited. Each tool call keeps the host's
envelope (``params._meta``) but calls ``overview`` with no arguments instead of the recorded
tool, so the replay reads the vault and writes nothing to it.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from osk.hosts.recordings import Recording

class ReplyLines:
    """Newline-delimited JSON-RPC messages from a process's stdout, read with a deadline."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        self.fd = proc.stdout.fileno()
        self.selector = selectors.DefaultSelector()
        self.selector.register(proc.stdout, selectors.EVENT_READ)
        self.buffer = b""

    def response(self, want_id: object, deadline: float) -> dict[str, object]:
        return self.next_answer(deadline, {want_id})

    def next_answer(self, deadline: float, ids: set[object]) -> dict[str, Any]:
        """The next message answering one of ``ids`` (others are passed over)."""
        while True:
            while b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                if not line.strip():
                    continue
                message = json.loads(line)
                if (isinstance(message, dict) and "method" not in message
                        and message.get("id") in ids):
                    return message
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self.selector.select(remaining):
                raise TimeoutError("no answer from the MCP server in time")
            chunk = os.read(self.fd, 65536)
            if not chunk:
                raise ValueError("the MCP server exited before answering")
            self.buffer += chunk


def send_message(proc: subprocess.Popen[bytes], message: dict[str, object]) -> None:
    assert proc.stdin is not None
    try:
        proc.stdin.write(json.dumps(message).encode("utf-8") + b"\n")
        proc.stdin.flush()
    except BrokenPipeError as exc:
        try:
            proc.wait(timeout=5)  # let it finish writing its error before we read it
        except subprocess.TimeoutExpired:
            pass
        raise ValueError("the MCP server exited before answering") from exc


def close_server(proc: subprocess.Popen[bytes]) -> None:
    """End the server this check started: close its stdin, then terminate it if it lingers."""
    try:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(timeout=5)
    except (subprocess.TimeoutExpired, BrokenPipeError, OSError):
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()



# == replaying a host =========================================================================
def connect_as(argv: list[str], recorded: dict[str, Recording], *, timeout: float,
               first_call: str, cwd: Path | None = None) -> tuple[str, list[str]]:
    """Start ``argv`` and replay a host's recordings (by generation) against it. Returns the
    generation the host would keep and what failed (empty: every tool call was answered)."""
    deadline = time.monotonic() + timeout
    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=errors, cwd=cwd)
        try:
            replay = _Replay(proc, deadline)
            chosen = replay.opening([recorded[g].opening for g in ("envelope", "classic")
                                     if g in recorded])
            if chosen is None:
                return "", [f"neither opening request succeeded: {replay.refusals()}"]
            return chosen, replay.session(recorded[chosen], first_call)
        except (TimeoutError, ValueError) as exc:
            errors.seek(0)
            tail = errors.read().decode("utf-8", "replace").strip().splitlines()[-3:]
            return "", [f"{exc}{': ' + ' | '.join(tail) if tail else ''}"]
        finally:
            close_server(proc)


class _Replay:
    """One connection driven as a recorded host drives it."""

    def __init__(self, proc: subprocess.Popen[bytes], deadline: float) -> None:
        self.proc, self.deadline = proc, deadline
        self.lines = ReplyLines(proc)
        self.asked: set[object] = set()  # request ids sent and not yet answered
        self.answers: dict[object, dict[str, Any]] = {}
        self.opened: dict[object, str] = {}  # opening request id -> its generation

    def send(self, message: dict[str, Any]) -> None:
        if "method" in message and message.get("id") is not None:
            self.asked.add(message["id"])
            self.answers.pop(message["id"], None)
        send_message(self.proc, message)

    def wait(self, ids: set[object]) -> None:
        """Until every one of ``ids`` that was asked has its answer."""
        while ids & self.asked:
            answer = self.lines.next_answer(self.deadline, set(self.asked))
            self.asked.discard(answer["id"])
            self.answers[answer["id"]] = answer

    def opening(self, requests: list[dict[str, Any]]) -> str | None:
        """Send the opening requests at once (a host whose probe is not answered in time
        falls back to initialize) and return the generation whose answer succeeded first."""
        for request in requests:
            self.opened[request["id"]] = ("envelope" if request["method"] == "server/discover"
                                          else "classic")
            self.send(request)
        chosen = None
        while set(self.opened) & self.asked:
            answer = self.lines.next_answer(self.deadline, set(self.opened) & self.asked)
            self.asked.discard(answer["id"])
            self.answers[answer["id"]] = answer
            if chosen is None and "result" in answer:
                chosen = self.opened[answer["id"]]
        return chosen

    def refusals(self) -> str:
        return "; ".join(f"{self.answers[i].get('error')}" for i in self.opened
                         if i in self.answers)

    def session(self, recording: Recording, first_call: str) -> list[str]:
        """The rest of the recorded session after its opening; the tool calls' failures."""
        messages = list(recording.messages)
        start = next(n for n, entry in enumerate(messages)
                     if entry["send"] is recording.opening) + 1
        calls: list[object] = []
        for entry in messages[start:]:
            self.wait(set(entry["after"]))
            message = dict(entry["send"])
            if message.get("method") == "tools/call":
                params = message.get("params") or {}
                message["params"] = {**params, "name": first_call, "arguments": {}}
                calls.append(message["id"])
            self.send(message)
        self.wait(set(calls))
        return [_failure(self.answers[id_]) for id_ in calls
                if _failure(self.answers[id_])]


def _failure(answer: dict[str, Any]) -> str:
    result = answer.get("result")
    if "error" in answer:
        return str((answer.get("error") or {}).get("message", answer["error"]))
    if not isinstance(result, dict) or result.get("isError"):
        content = result.get("content") if isinstance(result, dict) else None
        return str(content[0].get("text") if isinstance(content, list) and content else result)
    return ""
