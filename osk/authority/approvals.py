"""The person's verbs on protected regions (governance/authority.md): protect and unprotect a
region, approve or revert its pending changes (each checked against what the person was shown,
each recorded in the approvals ledger and the audit log), and the approval of a person's own
write inside a region. Above the audit log, which reads what ``osk.authority.protection``
serves; each verb calls ``require_person`` itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from osk.authority import mutation
from osk.authority.protection import (
    APPROVALS,
    Change,
    node_files,
    pending,
    region_of,
    require_person,
    state,
    within,
)
from osk.errors import ContractError, OskError, ProtectedRegionError
from osk.store import objects
from osk.store.fsutil import fsync_dir
from osk.store.ledger import Ledger
from osk.store.vault import SPACES, Vault


# -- the person's verbs -------------------------------------------------------------------------
def vault_path(vault: Vault, text: str, cwd: Path | None = None) -> str:
    """A vault-relative POSIX path from what a person typed (absolute, cwd- or vault-relative).

    A relative path that exists from the working directory is taken from there; otherwise it is
    read as vault-relative (so a deleted file's path still names its pending deletion).
    """
    given = Path(text).expanduser()
    if given.is_absolute():
        try:
            return vault.rel(given)
        except ValueError:
            raise OskError(f"{text} is outside the vault {vault.root}") from None
    local = (cwd or Path.cwd()) / given
    if local.exists():
        try:
            return vault.rel(local)
        except ValueError:
            pass
    rel = PurePosixPath(text.replace("\\", "/")).as_posix().strip("/")
    if rel in ("", ".") or ".." in PurePosixPath(rel).parts:
        raise OskError(f"{text!r} is not a path inside the vault {vault.root}")
    return rel


def _in_space(rel: str) -> None:
    top = PurePosixPath(rel).parts[:1]
    if not top or top[0] not in SPACES:
        raise ProtectedRegionError(
            f"{rel} is not inside a Space; protected regions are folders or node files under "
            f"{', '.join(SPACES)}",
            path=rel,
        )


def _approvals(vault: Vault) -> Ledger:
    return Ledger(vault, APPROVALS)


def mutation_lock(vault: Vault) -> AbstractContextManager[None]:
    """The vault's one mutation lock; letting go moves the generation (``osk.store.generation``)."""
    return mutation.mutation(vault)


@dataclass(frozen=True)
class Protected:
    region: str
    files: dict[str, str]


def protect(vault: Vault, rel: str) -> Protected:
    """Snapshot every node file under ``rel`` and start serving that snapshot."""
    require_person("protect")
    _in_space(rel)
    path = vault.abs(rel)
    if not path.is_dir() and not (path.is_file() and rel.endswith(".md")):
        raise ProtectedRegionError(f"{rel} is neither a folder nor a node file in the vault",
                                   path=rel)
    with mutation_lock(vault):
        current = state(vault)
        for region in current.regions:
            if within(rel, region) or within(region, rel):
                raise ProtectedRegionError(
                    f"{rel} overlaps protected region {region}; regions do not nest "
                    f"(unprotect {region} first to protect a different extent)",
                    path=rel, region=region,
                )
        files = {
            node_rel: objects.put(vault, vault.abs(node_rel).read_text(encoding="utf-8"))
            for node_rel in node_files(vault, rel)
        }
        _approvals(vault).append("protect", f"region:{rel}", {"region": rel, "files": files})
    return Protected(rel, files)


def unprotect(vault: Vault, rel: str) -> str:
    """Stop protecting region ``rel``; refused while changes in it wait for review."""
    require_person("unprotect")
    with mutation_lock(vault):
        current = state(vault)
        if rel not in current.regions:
            listing = ", ".join(current.regions) or "none"
            raise ProtectedRegionError(
                f"{rel} is not a protected region (protected: {listing})", path=rel
            )
        waiting = [c.path for c in pending(vault, rel)]
        if waiting:
            raise ProtectedRegionError(
                f"{rel} has {len(waiting)} change(s) waiting for review ({', '.join(waiting)}); "
                f"approve or revert them first (`osk review`)",
                path=rel, pending=waiting,
            )
        _approvals(vault).append("unprotect", f"region:{rel}", {"region": rel})
    return rel


def approve(vault: Vault, rel: str, *, shown: Sequence[Change] | None = None) -> list[Change]:
    """Make every pending change under ``rel`` the approved version.

    ``shown`` is what the person was shown and agreed to: if the pending changes differ from
    it when the lock is taken (an agent wrote meanwhile), nothing is approved.
    """
    require_person("approve")
    from osk.authority import audit

    with mutation_lock(vault):
        changes = to_approve(vault, rel)
        _check_shown("approve", rel, changes, shown)
        texts = {c.path: _working_text(vault, c) for c in changes}
        _check_snapshots(vault, changes)  # check all first: a refused approve writes nothing
        for change in changes:
            text = texts[change.path]
            if text is not None:
                _check_contract(change.path, text)
        for change in changes:
            text = texts[change.path]
            after = objects.put(vault, text) if text is not None else None
            _record(vault, "approve", change.path, after, previous=change.approved)
            audit.record(
                vault, actor="user", action="approve",
                node_id=_node_id(vault, change, text), path=change.path,
                before=change.approved, after=after,
                detail={"region": change.region, "kind": change.kind},
            )
    return changes


def revert(vault: Vault, rel: str, *, shown: Sequence[Change] | None = None) -> list[Change]:
    """Return the working copy under ``rel`` to the approved snapshot; keep what is discarded.

    ``shown`` works as for ``approve``: a change the person did not see is not discarded.
    """
    require_person("revert")
    from osk.authority import audit

    with mutation_lock(vault):
        changes = to_revert(vault, rel)
        _check_shown("revert", rel, changes, shown)
        _check_snapshots(vault, changes)
        texts = {change.path: _working_text(vault, change) for change in changes}
        approved = {change.path: objects.get(vault, change.approved)
                    for change in changes if change.approved is not None}
        intent = audit.intend(vault, [
            audit.Change("user", "revert", _node_id(vault, change, texts[change.path]),
                         change.path, texts[change.path], approved.get(change.path),
                         {"region": change.region, "kind": change.kind})
            for change in changes])
        for change in changes:
            text = texts[change.path]
            discarded = objects.put(vault, text) if text is not None else None
            target = vault.abs(change.path)
            if change.approved is None:
                target.unlink()
                fsync_dir(target.parent)
            else:
                vault.write_file(target, approved[change.path])
            _record(vault, "revert", change.path, change.approved, discarded=discarded)
        intent.record()
    return changes


def record_person_write(vault: Vault, rel: str, sha: str | None) -> None:
    """Approve a write the person made at a terminal (confirm, reject) inside a region.

    The caller holds the mutation lock and has already written the file.
    """
    if region_of(vault, rel) is not None:
        _record(vault, "approve", rel, sha, previous=state(vault).approved_sha(rel))


def _record(vault: Vault, kind: str, rel: str, approved: str | None, **extra: object) -> None:
    _approvals(vault).append(kind, f"file:{rel}", {"path": rel, "approved": approved, **extra})


def to_approve(vault: Vault, rel: str) -> list[Change]:
    """What ``approve(rel)`` would decide now: every pending change and forked approval."""
    return _changes_under(vault, rel)


def to_revert(vault: Vault, rel: str) -> list[Change]:
    """What ``revert(rel)`` would undo now (a fork whose working copy is approved stays)."""
    return [c for c in _changes_under(vault, rel) if c.approved != c.working]


PAST = {"approve": "approved", "revert": "reverted"}  # for messages about the person's verbs


def _check_shown(verb: str, rel: str, changes: list[Change],
                 shown: Sequence[Change] | None) -> None:
    if shown is None:
        return
    now = {(c.path, c.approved, c.working) for c in changes}
    seen = {(c.path, c.approved, c.working) for c in shown}
    if now != seen:
        moved = sorted({path for path, _, _ in now ^ seen})
        raise ProtectedRegionError(
            f"the pending changes under {rel} changed after they were shown to you "
            f"({', '.join(moved)}); nothing was {PAST[verb]}. Look again "
            f"(`osk review {rel}`) and run `osk {verb} {rel}` again",
            path=rel, changed=moved,
        )


def _changes_under(vault: Vault, rel: str) -> list[Change]:
    current = state(vault)
    if not any(within(rel, r) or within(r, rel) for r in current.regions):
        listing = ", ".join(current.regions) or "none"
        raise ProtectedRegionError(
            f"{rel} is not in a protected region (protected: {listing})", path=rel
        )
    return pending(vault, rel)


def _check_snapshots(vault: Vault, changes: list[Change]) -> None:
    """Refuse before writing anything when an approved version is not on this device."""
    for change in changes:
        if change.approved is not None:
            objects.get(vault, change.approved)  # raises ObjectMissing, naming the object


def _working_text(vault: Vault, change: Change) -> str | None:
    if change.working is None:
        return None
    return vault.abs(change.path).read_text(encoding="utf-8")


def _check_contract(rel: str, text: str) -> None:
    from osk.store import node

    try:
        node.parse(rel, text)
    except ContractError as exc:
        raise ContractError(
            f"cannot approve {rel}: the working copy breaks the node contract ({exc}); fix it "
            f"or run `osk revert {rel}`",
            path=rel,
        ) from None


def _node_id(vault: Vault, change: Change, text: str | None) -> str:
    """The node's id from whichever version is readable, for the audit record's subject."""
    from osk.store import node

    for candidate in (text, objects.get(vault, change.approved) if change.approved else None):
        if candidate is None:
            continue
        try:
            data, _ = node.split_frontmatter(change.path, candidate)
        except ContractError:
            continue
        value = data.get("id")
        if isinstance(value, str) and value.strip():
            return value
    return f"path:{change.path}"
