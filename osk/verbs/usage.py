"""What memory did for the person to see: the receipts of what the hooks injected
(``osk recall log``), why a prompt typed now would get what it gets (``osk recall why``), and
per day and scope what injection cost and whether the model used it (``osk stats``).

Receipts and the MCP server's call log are written on the hook path and by the server
(``osk.hooks.receipts``); this module only reads them. ``why`` runs the very function the
prompt-submit hook runs (``osk.hooks.recall.per_prompt.decide``), so the two cannot disagree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from osk.errors import OskError
from osk.hooks import receipts
from osk.store.vault import Vault

TITLE_MIN = 12  # a title shorter than this is too likely to occur in an answer by chance
OPENS = frozenset({"read_node", "read_raw"})  # a node opened, or a raw round recall showed


# -- osk recall log --------------------------------------------------------------------------
def log(vault: Vault, *, limit: int | None = None, scope: str | None = None,
        conversation: str | None = None) -> list[dict[str, Any]]:
    """The receipts, oldest first (the newest ``limit`` of them), optionally of one scope or
    conversation (a prefix of its name is enough)."""
    if limit is not None and limit <= 0:
        raise OskError(f"--limit must be 1 or more (got {limit})")
    found = [r for r in receipts.RECEIPTS.read(vault)
             if (scope is None or r.get("scope") == scope)
             and (conversation is None or str(r.get("conversation", "")).startswith(conversation))]
    return found[-limit:] if limit else found


# -- osk recall why --------------------------------------------------------------------------
@dataclass(frozen=True)
class Why:
    scope: str
    host: str
    limit: int          # the characters recall may take on this host
    block: str          # what the hook would inject
    items: list[dict[str, Any]]
    held: list[dict[str, Any]]
    channel: str


def why(vault: Vault, prompt: str, *, cwd: Path, scope: str | None = None,
        host: str = "claude", conversation: str | None = None) -> Why:
    """What the prompt-submit hook would inject for ``prompt`` now, and why each candidate was
    or was not shown. ``conversation`` (a host's conversation id) counts what it was shown
    already; without it the prompt is the first of a new conversation."""
    from osk.hooks.adapters import HOSTS, get
    from osk.hooks.recall import per_prompt
    from osk.hooks.state import StateStore, conversation_name
    from osk.provenance.sessions import open_session

    text = prompt.strip()
    if not text:
        raise OskError("give the prompt to explain, e.g. osk recall why \"how are releases "
                       "signed?\"")
    if host not in HOSTS:
        raise OskError(f"unknown host {host!r}; one of {', '.join(sorted(HOSTS))}")
    adapter = get(host)
    session = open_session(vault, cwd, scope)
    seen: Mapping[str, str] = {}
    if conversation:
        seen = StateStore(vault, host, conversation_name(conversation)).load().recalled
    limit = per_prompt.limit_for(vault, adapter)
    if limit <= 0:
        return Why(session.scope, host, limit, "", [], [], "off")
    outcome = per_prompt.decide(vault, session.scope, text, adapter.budget, limit, seen)
    return Why(session.scope, host, limit, outcome.block, outcome.items(), outcome.held(),
               outcome.trace.channel)


# -- osk stats -------------------------------------------------------------------------------
@dataclass
class DayScope:
    """One day and scope: what injection cost and how much of it the model used."""

    day: str
    scope: str
    prompts: int = 0            # prompt-submit receipts (recall ran)
    with_block: int = 0         # of them, prompts that got a block
    prompt_chars: int = 0       # characters injected by recall, summed
    starts: int = 0             # session-start receipts
    start_chars: int = 0
    injected: int = 0           # distinct (conversation, node) pairs shown
    opened: int = 0             # of them, read with read_node afterwards
    cited: int = 0              # of them, not opened but cited (a node write or an answer)

    @property
    def chars_per_prompt(self) -> float:
        return self.prompt_chars / self.prompts if self.prompts else 0.0

    @property
    def block_share(self) -> float:
        return self.with_block / self.prompts if self.prompts else 0.0

    @property
    def used_share(self) -> float:
        return (self.opened + self.cited) / self.injected if self.injected else 0.0


def stats(vault: Vault, *, days: int | None = None) -> list[DayScope]:
    """Per day and scope, oldest first (the last ``days`` days that have receipts)."""
    if days is not None and days <= 0:
        raise OskError(f"--days must be 1 or more (got {days})")
    calls = list(receipts.CALLS.read(vault))
    answers = _Answers(vault)
    rows: dict[tuple[str, str], DayScope] = {}
    first_shown: dict[tuple[str, str], tuple[float, dict[str, Any], DayScope]] = {}
    for record in receipts.RECEIPTS.read(vault):
        day, scope = str(record.get("at", ""))[:10], str(record.get("scope", ""))
        row = rows.setdefault((day, scope), DayScope(day, scope))
        chars = int(record.get("chars") or 0)
        if record.get("event") == "session-start":
            row.starts += 1
            row.start_chars += chars
        else:
            row.prompts += 1
            row.with_block += bool(chars)
            row.prompt_chars += chars
        for item in record.get("items") or ():
            pair = (str(record.get("conversation", "")), str(item.get("id", "")))
            if pair not in first_shown:
                first_shown[pair] = (float(record.get("ts") or 0), item, row)
    for (conversation, node_id), (ts, item, row) in first_shown.items():
        row.injected += 1
        if _opened(calls, node_id, row.scope, ts):
            row.opened += 1
        elif _cited(calls, item, row.scope, ts) or answers.mention(conversation, item):
            row.cited += 1
    ordered = [rows[key] for key in sorted(rows)]
    if days is not None:
        wanted = sorted({row.day for row in ordered})[-days:]
        ordered = [row for row in ordered if row.day in wanted]
    return ordered


def _opened(calls: Sequence[Mapping[str, Any]], node_id: str, scope: str, since: float) -> bool:
    return any(c.get("tool") in OPENS and c.get("node") == node_id
               and c.get("scope") == scope and float(c.get("ts") or 0) >= since for c in calls)


def _cited(calls: Sequence[Mapping[str, Any]], item: Mapping[str, Any], scope: str,
           since: float) -> bool:
    """A node written after the injection cites the injected node (by title or id)."""
    names = {f"[[{item.get('title')}]]", str(item.get("title")), str(item.get("id"))}
    return any(c.get("scope") == scope and float(c.get("ts") or 0) >= since
               and names.intersection(str(x) for x in c.get("cites") or ()) for c in calls)


class _Answers:
    """The model's answers in each conversation's raw record, read once per conversation."""

    def __init__(self, vault: Vault) -> None:
        self.vault = vault
        self._texts: dict[str, str] = {}

    def mention(self, conversation: str, item: Mapping[str, Any]) -> bool:
        text = self._text(conversation)
        title = str(item.get("title") or "")
        return bool(text) and (str(item.get("id")) in text
                               or (len(title) >= TITLE_MIN and title in text))

    def _text(self, conversation: str) -> str:
        if conversation not in self._texts:
            self._texts[conversation] = "\n".join(self._answers(conversation))
        return self._texts[conversation]

    def _answers(self, conversation: str) -> Iterable[str]:
        from osk.capture import raw

        for record in raw.list_records(self.vault):
            if record.conversation != conversation:
                continue
            try:
                found = raw.read_record(self.vault, record.key, record.conversation,
                                        strict=False)
            except (OskError, OSError, UnicodeDecodeError):
                continue  # a damaged record is the validators' to report
            yield from (r.assistant for r in found.rounds)


def reason_text(reason: object) -> str:
    """What a receipt's held-back ``reason`` means, in words ("" for one it does not know)."""
    return receipts.REASONS.get(str(reason), "") if reason is not None else ""
