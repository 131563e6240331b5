"""Receipts of what the hooks injected, and the MCP server's log of the calls that used it.

Every injection (a session start, a prompt's recall) appends one receipt to device state
(``.osk/receipts/receipts.jsonl``; never synced): when, which host, conversation and scope,
each item shown (node id, content hash, title, score, the channel that ranked it, the floor it
cleared), the characters injected, and each candidate held back with its reason
(``REASONS``). A receipt holds no prompt text, only a short hash of it. The MCP server appends
one line per ``read_node`` and node write to ``.osk/logs/calls.jsonl`` (the node read, the
citations written), which ``osk stats`` joins with the receipts.

Both files are journals of bounded size: past ``MAX_BYTES`` the file is renamed to ``.1``
(``.1`` to ``.2``, at most ``KEEP`` old generations), so a year of sessions costs a few MB.
Appending never raises: a receipt is worth less than the turn it describes.

Hook path: standard library only.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from osk.store.fastclass import dataclass
from osk.store.vault import Vault

MAX_BYTES = 2 * 1024 * 1024  # per generation: about 2,000 receipts of a few items each
KEEP = 2
PROMPT_HASH_CHARS = 16
# Why a candidate was not injected (docs/receipts.md shows them in use).
REASONS = {
    "below-floor": "its confidence is under the floor (none of the prompt's hits was sure "
                   "enough, or it scored under half of the best)",
    "hub": "a cluster hub, and the prompt does not name its cluster",
    "not-valid": "superseded, expired or not yet valid (search still finds it)",
    "shown-before": "this conversation was shown it already, at the same content hash",
    "trust": "an inferred Person fact while inject_inferred_person is off",
    "tombstone": "the person rejected it (osk reject)",
    "changed": "its file changed or went since the index read it",
    "steering": "its text carries steering (role markers, chat markup, tool calls, an override "
                "of instructions) and no person confirmed it (osk confirm)",
    "pending": "an agent's node in a scope [review] hold names, not reviewed yet "
               "(osk review --new)",
    "max-hits": "more hits than a prompt shows (per_prompt.MAX_HITS)",
    "budget": "the host's character budget was spent before it",
}


@dataclass(frozen=True)
class Journal:
    """A bounded JSON Lines file in device state, rotated by size."""

    parts: tuple[str, ...]

    def path(self, vault: Vault) -> Path:
        return vault.state(*self.parts)

    def append(self, vault: Vault, record: Mapping[str, Any]) -> None:
        """Append one record; never raises (a journal must not cost the turn)."""
        path = self.path(vault)
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._rotate(path)
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    line = "\n" + line  # a line cut by a crash ends here, not in this one
                os.write(fd, line.encode("utf-8"))  # one write: concurrent hooks never interleave
            finally:
                os.close(fd)
        except OSError:
            pass

    @staticmethod
    def _rotate(path: Path) -> None:
        try:
            if path.stat().st_size < MAX_BYTES:
                return
        except FileNotFoundError:
            return
        for number in range(KEEP, 1, -1):
            older = path.with_name(f"{path.name}.{number - 1}")
            if older.exists():
                os.replace(older, path.with_name(f"{path.name}.{number}"))
        os.replace(path, path.with_name(f"{path.name}.1"))

    def tail(self, vault: Vault, max_bytes: int) -> list[dict[str, Any]]:
        """The newest records of the current file, from its last ``max_bytes`` (a bounded
        read for a hook), oldest first; damaged lines skipped."""
        try:
            with self.path(vault).open("rb") as file:
                size = file.seek(0, os.SEEK_END)
                file.seek(max(0, size - max_bytes))
                data = file.read(max_bytes)
        except OSError:
            return []
        lines = data.decode("utf-8", errors="replace").splitlines()
        if size > max_bytes:
            lines = lines[1:]  # the first may be the end of a line cut by the read
        return [record for record in map(_record, lines) if record is not None]

    def read(self, vault: Vault) -> Iterator[dict[str, Any]]:
        """Every record, oldest first, across the kept generations; damaged lines skipped."""
        path = self.path(vault)
        files = [path.with_name(f"{path.name}.{n}") for n in range(KEEP, 0, -1)] + [path]
        for file in files:
            try:
                text = file.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            for raw in text.splitlines():
                record = _record(raw)
                if record is not None:
                    yield record


def _record(line: str) -> dict[str, Any] | None:
    """One journal line as a record; None for a damaged one (cut by a crash or a full disk)."""
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


RECEIPTS = Journal(("receipts", "receipts.jsonl"))
CALLS = Journal(("logs", "calls.jsonl"))


def prompt_hash(prompt: str) -> str:
    """What a receipt keeps of the prompt: enough to tell two prompts apart, not to read one."""
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:PROMPT_HASH_CHARS]


def item(hit: Any, channel: str, floor: float | None = None, **extra: Any) -> dict[str, Any]:
    """One injected node (``osk.search.recall_hits.Recalled``) as a receipt names it."""
    found = {"id": hit.id, "hash": hit.content_hash, "title": hit.title,
             "score": round(float(hit.confidence), 3), "channel": channel, **extra}
    if floor is not None:
        found["floor"] = round(float(floor), 3)
    return found


def held(hit: Any, reason: str, channel: str, floor: float | None = None) -> dict[str, Any]:
    """One candidate held back, with the reason (a key of ``REASONS``)."""
    return {**item(hit, channel, floor), "reason": reason}


def receipt(event: str, host: str, conversation: str, scope: str, chars: int,
            items: Iterable[Mapping[str, Any]], held_back: Iterable[Mapping[str, Any]],
            **extra: Any) -> dict[str, Any]:
    return {"at": _stamp(), "ts": round(time.time(), 3), "event": event, "host": host,
            "conversation": conversation, "scope": scope, "chars": chars,
            "items": list(items), "held": list(held_back), **extra}


def _stamp() -> str:
    """The receipt's time (``OSK_NOW`` pins it, as everywhere; else now in UTC)."""
    pinned = os.environ.get("OSK_NOW")
    if pinned:
        return pinned
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def write(vault: Vault, record: Mapping[str, Any]) -> None:
    RECEIPTS.append(vault, record)


def log_call(vault: Vault, tool: str, scope: str, *, node: str = "",
             cites: Iterable[str] = ()) -> None:
    """One MCP call that used a node: ``node`` read or written, ``cites`` its citations."""
    CALLS.append(vault, {"at": _stamp(), "ts": round(time.time(), 3), "tool": tool,
                         "scope": scope, "node": node, "cites": list(cites)})
