"""Redaction by the person: `osk redact` removes a pasted secret from a raw record for good.

Raw records are append-only (governance/raw.md) and synced, so a password pasted into a
conversation would otherwise stay in every device's copy. `osk redact` is the one sanctioned
rewrite, and it is the person's (terminal only, like approve and revert): every occurrence of a
span the person types (never on the command line, where shell history would keep it) in one
round, or in every round of a record, becomes ``[REDACTED:by-person]``.

What it keeps consistent:

- the record stays well formed: each changed round is re-framed with its new length, parts and
  hash (``raw.redact_rounds``), and this device's capture state is rebuilt;
- every citation of a changed round was bound to the old hash, so it is now a recheck
  candidate (reason ``target-changed``): the redactions ledger names each affected pair with
  the reason ``redacted``, so a person reading ``osk candidates`` can tell why;
- the ledger (``_ledger/redactions.jsonl``, kind ``redact``, subject ``raw:<record path>``)
  records who redacted what and when: the record, the rounds with their hashes before and
  after, how many spans and how long the span was. Never the span, nor a hash of it (a hash of
  a short password is a guess away from the password).

What it cannot do: the old bytes remain in Git history on every device and remote that has
synced them. ``purge_instructions`` says how to remove them with `git filter-repo`; osk never
rewrites history by itself.
"""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass

from osk import raw
from osk.edges import RawTarget, parse_target
from osk.errors import RawNotFound, RedactError
from osk.ledger import Ledger
from osk.rechecks import Rechecks
from osk.vault import RAW_DIR, Vault

LEDGER = "redactions"
KIND = "by-person"  # the marker: [REDACTED:by-person]
MIN_SPAN = 4  # a shorter span would match ordinary text all over a record


@dataclass(frozen=True)
class Target:
    """A raw record and the rounds to redact (None: every round)."""

    key: str
    conversation: str
    rounds: frozenset[int] | None

    @property
    def path(self) -> str:
        return f"{RAW_DIR}/{self.key}/{self.conversation}.md"

    @property
    def label(self) -> str:
        if self.rounds is None:
            return self.path
        return f"{self.path[:-3]}#Round {min(self.rounds)}"


@dataclass(frozen=True)
class Affected:
    citing_id: str
    target: str  # the pair's target key, raw:<coordinate>


@dataclass(frozen=True)
class Outcome:
    target: Target
    rounds: tuple[raw.Rewritten, ...]
    affected: tuple[Affected, ...]
    record_id: str | None  # the ledger record; None for a preview


def parse(text: str) -> Target:
    """``_raw/KEY/CONV#Round N`` (one round) or ``_raw/KEY/CONV`` / ``…/CONV.md`` (all)."""
    inner = text[2:-2] if text.startswith("[[") and text.endswith("]]") else text
    if "#" in inner:
        found = parse_target(inner)
        if not isinstance(found, RawTarget):
            raise RedactError(f"{text!r} is not a raw coordinate (_raw/KEY/CONVERSATION#Round N)")
        return Target(found.key, found.conversation, frozenset({found.round}))
    parts = inner.removesuffix(".md").split("/")
    if len(parts) != 3 or parts[0] != RAW_DIR or not all(parts[1:]):
        raise RedactError(f"{text!r} names no raw record: give _raw/KEY/CONVERSATION (every "
                          f"round) or _raw/KEY/CONVERSATION#Round N (one round)")
    return Target(parts[1], parts[2], None)


def check_span(span: str) -> str:
    if len(span.strip()) < MIN_SPAN:
        raise RedactError(f"the text to redact must be at least {MIN_SPAN} characters (a "
                          f"shorter one would match ordinary words all over the record)")
    if "\n" in span or "\r" in span:
        raise RedactError("the text to redact must be on one line; redact each line in turn")
    return span


def preview(vault: Vault, target: Target, span: str) -> Outcome:
    """What ``redact`` would change, writing nothing."""
    rounds = _rounds(vault, target, check_span(span), dry_run=True)
    return Outcome(target, tuple(rounds), _affected(vault, target, rounds), None)


def redact(vault: Vault, target: Target, span: str) -> Outcome:
    """Replace the span in the record, then record the redaction in the ledger. The person's
    verb: refused unless stdin is a terminal (governance/authority.md rule 1)."""
    from osk.protection import require_person

    require_person("redact")
    rounds = _rounds(vault, target, check_span(span), dry_run=False)
    affected = _affected(vault, target, rounds)
    record = Ledger(vault, LEDGER).append("redact", f"raw:{target.path}", {
        "record": target.path,
        "rounds": [{"n": r.number, "before": r.before, "after": r.after, "spans": r.spans}
                   for r in rounds],
        "length": len(span),
        "by": _person(),
        "affected": [{"citing": a.citing_id, "target": a.target, "reason": "redacted"}
                     for a in affected],
    })
    return Outcome(target, tuple(rounds), affected, record.id)


def redacted_rounds(vault: Vault) -> dict[str, set[str]]:
    """``raw:<coordinate>`` -> the round hashes redactions left (for the recheck reason)."""
    found: dict[str, set[str]] = {}
    for record in Ledger(vault, LEDGER).read().records:
        path = record.data.get("record")
        rounds = record.data.get("rounds")
        if record.kind != "redact" or not isinstance(path, str) or not isinstance(rounds, list):
            continue
        for item in rounds:
            if isinstance(item, dict) and isinstance(item.get("after"), str):
                key = f"raw:{path.removesuffix('.md')}#Round {item.get('n')}"
                found.setdefault(key, set()).add(item["after"])
    return found


def _rounds(vault: Vault, target: Target, span: str, *, dry_run: bool) -> list[raw.Rewritten]:
    try:
        rounds = raw.redact_rounds(vault, target.key, target.conversation,
                                   None if target.rounds is None else set(target.rounds),
                                   span, KIND, dry_run=dry_run)
    except RawNotFound as exc:
        raise RedactError(f"no raw record {target.path} in this vault") from exc
    if not rounds:
        raise RedactError(f"that text does not occur in {target.label}; nothing was changed "
                          f"(it must match exactly, case included)")
    return rounds


def _affected(vault: Vault, target: Target, rounds: list[raw.Rewritten]) -> tuple[Affected, ...]:
    """Citation pairs bound to a changed round: they become recheck candidates."""
    keys = {f"raw:{target.path[:-3]}#Round {r.number}" for r in rounds}
    found = [Affected(citing, key) for citing, citations in Rechecks(vault).table().items()
             for key in citations.pairs if key in keys]
    return tuple(sorted(found, key=lambda a: (a.target, a.citing_id)))


def _person() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container): say so, not fail
        return f"uid:{os.getuid()}" if hasattr(os, "getuid") else "unknown"


def purge_instructions(vault: Vault, target: Target) -> str:
    """How to remove the old bytes from Git history: printed, never run."""
    return (
        f"The old bytes are still in Git history ({target.path}: every commit that synced it, "
        f"on every device and remote). osk never rewrites history itself. To purge them, on one "
        f"device with every other device synced and stopped:\n"
        f"  1. pip install git-filter-repo; cd {vault.root}\n"
        f"  2. with an editor (not echo: shell history would keep it), write one line to "
        f"/tmp/osk-redact.txt: the exact text, then ==>[REDACTED:by-person]\n"
        f"  3. git filter-repo --replace-text /tmp/osk-redact.txt --force, then delete that "
        f"file\n"
        f"  4. git push --force to the remote (git filter-repo removes the origin remote: add it "
        f"back with git remote add origin URL)\n"
        f"  5. on every other device: move its vault aside and clone the rewritten remote afresh "
        f"(a device that syncs its old clone brings the old commits back)\n"
        f"Any other copy (a fork, a backup, the host's own transcript files) keeps the text: "
        f"rotate the secret as well."
    )


__all__ = ["KIND", "LEDGER", "Outcome", "Target", "parse", "preview", "purge_instructions",
           "redact"]
