"""Exclusion by the person: `osk exclude` keeps a raw round, or every round of a conversation,
out of search and recall; `osk include` takes it back (terminal only).

Every captured round is findable (``osk.search.rounds``). A person who wants one never shown
again by ``search`` or per-prompt recall, without rewriting it (that is ``osk redact``),
excludes it. The record is untouched: it stays the person's verbatim record, readable by its
coordinate with ``read_raw``, cited where it was cited. Each decision is one record in the
``exclusions`` ledger (``osk.capture.exclusions`` reads it; docs/FORMAT.md §3.10); this
device's rounds index is then brought in step at once (any other device's, by its next search
or prompt after sync lands the record).
"""

from __future__ import annotations

from dataclasses import dataclass

from osk.capture import raw
from osk.capture.exclusions import KIND_EXCLUDE, KIND_INCLUDE, PREFIX, Exclusion, excluded
from osk.capture.exclusions import LEDGER as LEDGER  # re-exported: `osk exclude` names it
from osk.capture.exclusions import current as _current
from osk.errors import ExclusionError, OskError, RawNotFound
from osk.store.edges import RawTarget, parse_target, record_name
from osk.store.ledger import Ledger
from osk.store.vault import RAW_DIR, Vault

INDEX_WAIT = 1.0  # seconds the verb waits for another process indexing rounds
SHAPE = ("give a raw round, _raw/KEY/CONVERSATION#Round N, or a whole conversation, "
         "_raw/KEY/CONVERSATION (as search and read_raw show them)")


@dataclass(frozen=True)
class Target:
    """A round (``number``) or a whole conversation (``number`` None) of one raw record."""

    key: str
    conversation: str
    number: int | None

    @property
    def record(self) -> str:
        return raw.RecordId(self.key, self.conversation).path

    @property
    def name(self) -> str:
        """The coordinate, or the record path: what the ledger's subject names."""
        if self.number is None:
            return self.record
        return RawTarget(self.key, self.conversation, self.number).coordinate


def parse(text: str) -> Target:
    """``_raw/KEY/CONV#Round N`` (a round) or ``_raw/KEY/CONV`` / ``…/CONV.md`` (every round
    of a conversation), bare or as a ``[[link]]``; names as capture writes them."""
    inner = text.strip()
    inner = inner[2:-2].strip() if inner.startswith("[[") and inner.endswith("]]") else inner
    if not inner.startswith(f"{RAW_DIR}/"):
        raise ExclusionError(f"{text!r} is not a raw round or conversation; {SHAPE}",
                             target=text)
    try:
        if "#" in inner:
            found = parse_target(inner)  # under _raw/: a RawTarget, or EdgeError
            if not isinstance(found, RawTarget):
                raise ExclusionError(f"{text!r} is not a raw coordinate; {SHAPE}", target=text)
            key, conversation, number = found.key, found.conversation, found.round
        else:
            named = raw.record_key_of(inner)
            key, conversation, number = named.key, named.conversation, None
        return Target(record_name(key), record_name(conversation), number)
    except ExclusionError:
        raise
    except OskError as exc:  # a malformed coordinate, a name no record can have
        raise ExclusionError(f"{text!r} is malformed: {exc}; {SHAPE}", target=text) from exc


def _existing(vault: Vault, target: Target) -> Target:
    """``target`` when this vault holds that record and round; else ExclusionError."""
    try:
        record = raw.read_record(vault, target.key, target.conversation, strict=False)
        if target.number is not None:
            record.round(target.number)
    except RawNotFound as exc:
        raise ExclusionError(f"{exc}: nothing to exclude (`osk search` and read_raw show "
                             f"what is captured)", target=target.name) from exc
    return target


def exclude(vault: Vault, text: str, *, reason: str = "") -> Target:
    """Keep a round, or every round of a conversation, out of search and recall (person,
    terminal). Refused, recording nothing, for a target this vault does not hold or one
    already excluded."""
    from osk.authority.protection import require_person

    require_person("exclude")
    target = _existing(vault, parse(text))
    now = excluded(vault)
    if target.record in now.records:
        whole = "" if target.number is None else f" with its whole conversation {target.record}"
        raise ExclusionError(f"{target.name} is already excluded{whole}; nothing recorded",
                             target=target.name)
    if target.name in now.rounds:
        raise ExclusionError(f"{target.name} is already excluded; nothing recorded",
                             target=target.name)
    _record(vault, KIND_EXCLUDE, target, reason)
    return target


def include(vault: Vault, text: str, *, reason: str = "") -> Target:
    """Take an exclusion back: the round or conversation is found again (person, terminal).
    Refused, recording nothing, for a target that is not excluded itself."""
    from osk.authority.protection import require_person

    require_person("include")
    target = parse(text)
    now = excluded(vault)
    if target.name not in now.records | now.rounds:
        if target.number is not None and target.record in now.records:
            raise ExclusionError(
                f"{target.name} is excluded with its whole conversation: `osk include "
                f"{target.record[:-3]}` takes the conversation back; nothing recorded",
                target=target.name)
        raise ExclusionError(f"{target.name} is not excluded (`osk exclusions` lists what "
                             f"is); nothing recorded", target=target.name)
    _record(vault, KIND_INCLUDE, target, reason)
    return target


def _record(vault: Vault, kind: str, target: Target, reason: str) -> None:
    """One ledger record (under the ledger's own lock: no node changes, so no mutation lock),
    then this device's rounds index in step with it."""
    from osk.authority.protection import person_name
    from osk.errors import LockTimeout
    from osk.search.rounds import RoundIndex
    from osk.store import clock

    Ledger(vault, LEDGER).append(kind, f"{PREFIX}{target.name}", {
        "reason": reason.strip(), "by": person_name(), "time": clock.now_text()})
    try:
        RoundIndex(vault).refresh(timeout=INDEX_WAIT)
    except LockTimeout:  # another process is indexing: every query leaves it out meanwhile
        pass


def current(vault: Vault) -> tuple[Exclusion, ...]:
    """What the person keeps out of search and recall now, oldest first (`osk exclusions`)."""
    return _current(vault)
