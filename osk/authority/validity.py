"""Validity time and reading the vault as it stood at a past time.

Two times, kept apart (governance/authority.md, "Validity"):

- *record time*: when the vault learned something. ``created``/``updated`` on the node, and the
  ``time`` of each audit record.
- *valid time*: when the claim holds in the world. Optional node keys ``valid_from`` and
  ``valid_to`` make a half-open interval ``[valid_from, valid_to)``; an absent end is open.
  ``supersedes: [[Title]]`` names the node this one replaces.

Writing a node that supersedes another closes the old one's validity at the new one's start
(its ``valid_from``, or its ``created`` when it states none): ``close_superseded`` sets the old
node's ``valid_to`` and audits the edit as ``supersede``. The old node stays in the vault and in
search, ranked below current claims and marked ``superseded``.

``as_of_view(vault, catalog, at)`` answers "what did the vault hold at ``at``, of claims valid
at ``at``": nodes created by then, each in the version readers were served at that time. The
version comes from the audit log and the object store. Limits: a change made by hand (outside
osk) leaves no audit record, so the past before such a change cannot be recovered and the
current text stands in for it; a node deleted by hand is absent at every time; record times
have minute precision.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, time
from typing import TYPE_CHECKING, Any

from osk.errors import ContractError, NodeNotFound, ObjectMissing, ValidityError
from osk.store import clock
from osk.store.vault import Vault

if TYPE_CHECKING:
    from osk.authority import audit
    from osk.store.catalog import Catalog
    from osk.store.contract import Frontmatter
    from osk.store.node import Node

VALID, EXPIRED, FUTURE = "valid", "expired", "future"
TIER = {VALID: 0, FUTURE: 1, EXPIRED: 2}  # rank currently valid claims first


def _moment(value: str | None) -> datetime | None:
    return clock.parse(value) if value else None


def state(node: Any, at: datetime | None = None) -> str:
    """'valid', 'expired' (valid_to ≤ at) or 'future' (valid_from > at) at time ``at``."""
    at = at or clock.now()
    start, end = _moment(node.meta.valid_from), _moment(node.meta.valid_to)
    if start is not None and start > at:
        return FUTURE
    if end is not None and end <= at:
        return EXPIRED
    return VALID


def tier(node: Any, at: datetime | None = None) -> int:
    """0 for a currently valid claim, 1 not yet valid, 2 expired: sort hits by this first."""
    return TIER[state(node, at)]


def check_interval(valid_from: str | None, valid_to: str | None) -> None:
    """Refuse a validity time that is not a time, or an interval that ends before it starts
    (the write path calls this before anything else reads the two values)."""
    start, end = _given("valid_from", valid_from), _given("valid_to", valid_to)
    if start is not None and end is not None and end < start:
        raise ValidityError(
            f"valid_to {valid_to} is before valid_from {valid_from}; a claim cannot stop "
            f"holding before it starts",
            valid_from=valid_from, valid_to=valid_to,
        )


def _given(name: str, value: str | None) -> datetime | None:
    """A validity time an agent or person passed, refused by name when it is not one."""
    if value is None:
        return None
    try:
        if isinstance(value, str) and clock.is_minute_timestamp(value):
            return clock.parse(value)
    except ValueError:
        pass  # the right shape but no such day or hour (2026-13-45): refused below
    raise ValidityError(
        f"{name} {str(value)[:60]!r} is not a time: write an ISO 8601 time with minutes and "
        f"a UTC offset, e.g. 2026-11-29T18:02+09:00",
        **{name: str(value)[:60]},
    )


def start_of(meta: Frontmatter) -> str:
    """When a claim starts to hold: its valid_from, else its created time."""
    return meta.valid_from or meta.created


@dataclass(frozen=True)
class Closing:
    """A planned close of a superseded node's validity (``after_text`` None: nothing to do)."""

    path: str
    node_id: str
    title: str
    before_text: str
    after_text: str | None
    valid_to: str


def prepare_close(vault: Vault, catalog: Catalog, *, supersedes: str, start: str,
                  new_id: str | None = None, actor: str = "agent") -> Closing:
    """Check a ``supersedes`` write before anything is written; raises, writes nothing.

    ``start`` is the new node's start (``start_of(meta)``). The caller applies its own scope
    rules to ``Closing.path`` (closing the old node is a write to it).
    """
    from osk.authority import protection, trust
    from osk.store import node as node_mod
    from osk.store.edges import NodeTarget, parse_target

    target = parse_target(supersedes)
    if not isinstance(target, NodeTarget):
        raise ValidityError(f"supersedes must name a node as [[Title]], not {supersedes!r}")
    try:
        old = catalog.get(target.title)
    except NodeNotFound:
        raise NodeNotFound(
            f"supersedes names {target.title!r}, which is not a node; search for the node "
            f"this one replaces and use its exact title", ref=target.title,
        ) from None
    if new_id is not None and old.id == new_id:
        raise ValidityError("a node cannot supersede itself")
    protection.check_writable(vault, old.path)
    text = vault.abs(old.path).read_text(encoding="utf-8")
    current = node_mod.parse(old.path, text)
    begin, new_start = _moment(current.meta.valid_from), clock.parse(start)
    if begin is not None and new_start < begin:
        raise ValidityError(
            f"{old.title!r} holds from {current.meta.valid_from}; a node starting {start} "
            f"cannot supersede it (it would close before it opened). Give the new node a "
            f"valid_from at or after {current.meta.valid_from}",
            title=old.title, valid_from=current.meta.valid_from, start=start,
        )
    end = _moment(current.meta.valid_to)
    if end is not None and end <= new_start:
        return Closing(old.path, old.id, old.title, text, None, current.meta.valid_to or start)
    space = current.space
    meta = current.meta.model_copy(update={
        "valid_to": start, "updated": clock.now_text(),
        "trust": trust.trust_for_update(space, actor, current.meta.trust_state),
    })
    closed = node_mod.render(meta, current.body)
    return Closing(old.path, old.id, old.title, text, closed, start)


def close_superseded(vault: Vault, catalog: Catalog, *, supersedes: str, start: str,
                     actor: str, new_id: str | None = None, new_title: str | None = None,
                     lock: bool = False) -> Closing:
    """Set the superseded node's ``valid_to`` to ``start`` and audit it as ``supersede``.

    The write path calls this after writing the superseding node, holding the vault mutation
    lock (``lock=False``); a standalone caller passes ``lock=True``. Re-checks everything
    ``prepare_close`` checks, so a change in between is refused rather than overwritten.
    """
    if lock:
        from osk.authority.approvals import mutation_lock

        with mutation_lock(vault):
            return close_superseded(vault, catalog, supersedes=supersedes, start=start,
                                    actor=actor, new_id=new_id, new_title=new_title)
    from osk.authority import audit

    closing = prepare_close(vault, catalog, supersedes=supersedes, start=start,
                            new_id=new_id, actor=actor)
    if closing.after_text is None:
        return closing
    intent = audit.intend(vault, [closing_change(closing, actor, new_id, new_title)])
    vault.write_file(vault.abs(closing.path), closing.after_text)
    catalog.note_written(closing.path)
    intent.record()
    return closing


def closing_change(closing: Closing, actor: str, new_id: str | None, new_title: str | None,
                   *, redo: bool = False) -> audit.Change:
    """The audit record closing a superseded node earns (``redo``: journalled with the
    superseding node's write, so ``audit.recover`` finishes it once that write landed)."""
    from osk.authority import audit

    return audit.Change(actor, "supersede", closing.node_id, closing.path, closing.before_text,
                        closing.after_text,
                        {"by": new_title or "", "by_id": new_id or "",
                         "valid_to": closing.valid_to}, redo=redo)


# -- reading the past --------------------------------------------------------------------------
def parse_as_of(text: str) -> datetime:
    """A moment from ``2026-03-01`` (the end of that day, local offset) or a full timestamp."""
    value = text.strip()
    try:
        if len(value) == 10:
            day = datetime.fromisoformat(value).date()
            local = clock.now().tzinfo
            return datetime.combine(day, time(23, 59), tzinfo=local)
        return clock.parse(value)
    except ValueError as exc:
        raise ValidityError(
            f"as_of {text!r} is not a date (2026-03-01) or a timestamp with an offset "
            f"(2026-03-01T09:00+09:00): {exc}"
        ) from None


@dataclass(frozen=True)
class AsOfView:
    at: datetime
    nodes: list[Node]
    gaps: list[str]  # node ids whose past version could not be read (object not on device)


def as_of_view(vault: Vault, catalog: Catalog, at: datetime,
               visible: Callable[[Node], bool] | None = None) -> AsOfView:
    """Nodes as served at record time ``at``, created by then, and valid at ``at``."""
    from osk.authority import audit
    from osk.store import node as node_mod
    from osk.store import objects

    history = audit.by_node(vault)
    live = {n.id: n for n in catalog.nodes()}
    nodes: list[Node] = []
    gaps: list[str] = []
    for node_id in sorted(set(live) | set(history)):
        if node_id.startswith("path:"):  # an approval of a file that never parsed as a node
            continue
        records = [e for e in history.get(node_id, []) if e.has_served]
        later = [e for e in records if clock.parse(e.time) > at]
        candidate: Node | None
        if not later:
            candidate = live.get(node_id)
        else:
            earlier = [e for e in records if clock.parse(e.time) <= at]
            if earlier:
                sha, path = earlier[-1].served, earlier[-1].path_after
            else:
                first = later[0]
                sha, path = first.served_before, first.path_before
            try:
                candidate = node_mod.parse(path, objects.get(vault, sha)) if sha else None
            except (ObjectMissing, ContractError):
                gaps.append(node_id)
                continue
        if candidate is None or clock.parse(candidate.meta.created) > at:
            continue
        if state(candidate, at) != VALID or (visible is not None and not visible(candidate)):
            continue
        nodes.append(candidate)
    return AsOfView(at, nodes, gaps)


