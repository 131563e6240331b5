"""Protected regions: the person's approved snapshot is what every reader is served.

A person protects a folder (or one node file) inside a Space at a terminal. osk keeps every node
file under it as a content-addressed object and records the snapshot in the approvals ledger.
From then on an edit inside the region, by an agent through the write path or by hand in an
editor, is a *pending change*: the working copy on disk changes, but ``served`` hands readers
(catalog, search, read_node, injection) the approved version and says a change is pending. The
person approves (the working copy becomes the new snapshot) or reverts (the working copy goes
back to the snapshot; the discarded text is kept as an object and recorded).

A node created inside a region after it was protected is a pending creation: it is served as
absent until approved. A node deleted by hand inside a region is a pending deletion: the approved
text is still served (the catalog adds it back) until the person approves the deletion or
reverts it.

Who may do what is governance/authority.md. The verbs that change approvals call
``require_person`` themselves, so no surface can reach them without a terminal on stdin.
Protected regions are a review gate, not a security boundary: someone with a shell can edit the
ledger, and a process that fakes a terminal passes ``require_person``. Standard library only at
import time; node parsing is imported where it is needed.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from osk.errors import AuthorityError, ProtectedRegionError
from osk.store import objects
from osk.store.fsutil import StatKey, sha256_text
from osk.store.ledger import Ledger, LedgerView
from osk.store.vault import Vault

APPROVALS = "approvals"
PENDING_MARKER = "pending"  # the marker a search hit / read carries when a change waits
GOVERNANCE_REF = "governance/authority.md"


# -- the person's-authority guard --------------------------------------------------------------
def require_person(action: str) -> None:
    """Refuse unless stdin is a terminal (governance/authority.md, "Only at a terminal").

    There is deliberately no parameter, flag or environment variable that skips this check.
    What it keeps out is an agent's MCP tools and scripts (their stdin is never a terminal);
    a process that makes itself a pseudo-terminal passes it, which is why the verbs that decide
    changes also ask for a code typed back (``confirmation_code``).
    """
    try:
        at_terminal = sys.stdin is not None and sys.stdin.isatty()
    except (ValueError, OSError):  # a closed or detached stdin is not a terminal
        at_terminal = False
    if not at_terminal:
        raise AuthorityError(
            f"`osk {action}` is reserved for a person at a terminal, and stdin is not a "
            f"terminal ({GOVERNANCE_REF}); run it yourself in an interactive shell. The check "
            f"keeps an agent's tools and scripts from acting for you; it is not a defence "
            f"against a process that fakes a terminal",
            action=action,
        )


def person_name() -> str:
    """Who the person at this terminal is, as the ledgers of their decisions record it: the
    login name on this device (the envelope's ``device`` and ``at`` say where and when)."""
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container): say so, not fail
        return f"uid:{os.getuid()}" if hasattr(os, "getuid") else "unknown"


# -- state: regions and approved snapshots, rebuilt when the approvals ledger changes ---------
@dataclass(frozen=True)
class State:
    regions: tuple[str, ...] = ()
    approved: dict[str, str] = field(default_factory=dict)  # path -> approved sha (present)
    forked: frozenset[str] = frozenset()  # paths whose approvals diverge across devices

    def region_of(self, rel: str) -> str | None:
        for region in self.regions:
            if within(rel, region):
                return region
        return None

    def approved_sha(self, rel: str) -> str | None:
        """The approved version of ``rel``; None means "absent when approved"."""
        return self.approved.get(rel)


_EMPTY = State()
_cache: dict[Path, tuple[StatKey, State]] = {}


def confirmation_code(parts: Iterable[str]) -> str:
    """Four characters derived from what a person's verb is about to change.

    The person types them back: a piped ``yes``, a stray Enter or a habit of ``--yes`` cannot
    decide, and a change that differs from the one shown gets another code. Not a secret: it
    guards against deciding by accident, not against a process that reads the screen.
    """
    return hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()[:4].upper()


def changes_code(changes: Sequence[Change]) -> str:
    """The code for approving or reverting exactly these changes (their paths and versions)."""
    return confirmation_code(f"{c.kind} {c.path} {c.approved} {c.working}" for c in changes)


def within(rel: str, prefix: str) -> bool:
    return rel == prefix or rel.startswith(prefix.rstrip("/") + "/")


def generation(vault: Vault) -> StatKey | None:
    """The approvals ledger's stat: when it changes, served versions may have changed.

    A catalog that caches parsed nodes re-reads the files in ``regions`` (old and new) when
    this value differs from the one it saw last.
    """
    try:
        st = vault.ledger_path(APPROVALS).stat()
    except FileNotFoundError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino)


def state(vault: Vault) -> State:
    """Regions and snapshots; one stat per call while the approvals ledger is unchanged."""
    key = generation(vault)
    if key is None:
        return _EMPTY
    path = vault.ledger_path(APPROVALS)
    cached = _cache.get(path)
    if cached is not None and cached[0] == key:
        return cached[1]
    built = _build(Ledger(vault, APPROVALS).read())
    _cache[path] = (key, built)
    return built


def _build(view: LedgerView) -> State:
    regions: set[str] = set()
    approved: dict[str, str] = {}

    def clear(region: str) -> None:
        for path in [p for p in approved if within(p, region)]:
            del approved[path]

    # Ids grow along parents, so id order replays the ledger causally.
    for record in sorted(view.records, key=lambda r: r.id):
        data = record.data
        if record.kind == "protect":
            region = str(data["region"])
            regions.add(region)
            clear(region)
            files = data.get("files") or {}
            assert isinstance(files, dict)
            approved.update({str(k): str(v) for k, v in files.items()})
        elif record.kind == "unprotect":
            region = str(data["region"])
            regions.discard(region)
            clear(region)
        elif record.kind in ("approve", "revert"):
            path = str(data["path"])
            if not any(within(path, r) for r in regions):
                continue
            sha = data.get("approved")
            if sha is None:
                approved.pop(path, None)
            else:
                approved[path] = str(sha)
    forked = frozenset(
        fork.subject.removeprefix("file:") for fork in view.forks()
        if fork.subject.startswith("file:")
    )
    return State(tuple(sorted(regions)), approved, forked)


def regions(vault: Vault) -> tuple[str, ...]:
    return state(vault).regions


def region_of(vault: Vault, rel: str) -> str | None:
    return state(vault).region_of(rel)


# -- what readers are served --------------------------------------------------------------------
@dataclass(frozen=True)
class Served:
    """What a reader shows for one file. ``text`` None: treat the file as absent (a node created
    inside a protected region and not yet approved)."""

    text: str | None
    pending: bool


def served(vault: Vault, rel: str, working_text: str) -> Served:
    """The version readers must show for ``rel`` given the working copy's text.

    Outside protected regions this is the working text. Raises ObjectMissing when the approved
    snapshot is not on this device (not yet synced): readers must not fall back to the working
    copy, which is exactly what the gate withholds.
    """
    current = state(vault)
    if not current.regions or current.region_of(rel) is None:
        return Served(working_text, False)
    approved = current.approved_sha(rel)
    if approved is None:
        return Served(None, True)
    if sha256_text(working_text) == approved:
        return Served(working_text, False)
    return Served(objects.get(vault, approved), True)


def is_pending(vault: Vault, rel: str, current: State | None = None) -> bool:
    """Whether ``rel`` has a change waiting for review, judged from the working copy on disk.

    Use this rather than ``served(...).pending`` when the text at hand may already be the
    served (approved) text, e.g. a node from a catalog that parses served versions.
    ``current``: ``state(vault)`` when the caller asks about many paths at once.
    """
    current = state(vault) if current is None else current
    if current.region_of(rel) is None:
        return False
    path = vault.abs(rel)
    working = sha256_text(path.read_text(encoding="utf-8")) if path.is_file() else None
    return working != current.approved_sha(rel)


# -- pending changes -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Change:
    path: str
    region: str
    approved: str | None  # sha of the approved version; None: absent when approved
    working: str | None  # sha of the working copy; None: deleted from the working copy
    forked: bool = False

    @property
    def kind(self) -> str:
        if self.approved is None:
            return "create"
        if self.working is None:
            return "delete"
        return "update" if self.approved != self.working else "fork"


def pending(vault: Vault, under: str | None = None) -> list[Change]:
    """Every pending change (and every forked approval) in protected regions, by path."""
    current = state(vault)
    found: dict[str, Change] = {}
    for region in current.regions:
        if under is not None and not (within(region, under) or within(under, region)):
            continue
        seen: set[str] = set()
        for rel in node_files(vault, region):
            seen.add(rel)
            sha = sha256_text(vault.abs(rel).read_text(encoding="utf-8"))
            approved = current.approved_sha(rel)
            if approved != sha or rel in current.forked:
                found[rel] = Change(rel, region, approved, sha, rel in current.forked)
        for rel, approved in current.approved.items():
            if within(rel, region) and rel not in seen:
                found[rel] = Change(rel, region, approved, None, rel in current.forked)
    return [found[rel] for rel in sorted(found) if under is None or within(rel, under)]


def node_files(vault: Vault, region: str) -> Iterator[str]:
    base = vault.abs(region)
    if base.is_file():
        yield region
        return
    for folder, dirs, files in os.walk(base):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.endswith(".md") and not name.startswith("."):
                yield vault.rel(Path(folder) / name)


def check_writable(vault: Vault, rel: str) -> None:
    """Refuse an osk write to ``rel`` while a change there already waits for the person.

    The writer could not see that change (readers are served the approved version), so a second
    edit would be built on text it never read.
    """
    current = state(vault)
    region = current.region_of(rel)
    if region is None:
        return
    path = vault.abs(rel)
    working = sha256_text(path.read_text(encoding="utf-8")) if path.is_file() else None
    approved = current.approved_sha(rel)
    if working != approved:
        raise ProtectedRegionError(
            f"{rel} is in protected region {region} and already has a change waiting for the "
            f"person's review; it cannot be edited again until they run `osk approve {rel}` "
            f"or `osk revert {rel}` at a terminal ({GOVERNANCE_REF})",
            path=rel, region=region,
        )


def check_move(vault: Vault, source: str, target: str) -> None:
    """Refuse moving a node into, out of, or within a protected region."""
    current = state(vault)
    for rel in (source, target):
        region = current.region_of(rel)
        if region is not None:
            raise ProtectedRegionError(
                f"moving {source} to {target} touches protected region {region}; only the "
                f"person moves nodes there (`osk unprotect {region}`, move, `osk protect "
                f"{region}`) ({GOVERNANCE_REF})",
                path=rel, region=region,
            )


def diff(vault: Vault, change: Change) -> str:
    """A unified diff from the approved version to the working copy."""
    old = objects.get(vault, change.approved) if change.approved else ""
    new = vault.abs(change.path).read_text(encoding="utf-8") if change.working else ""
    before = f"a/{change.path}" if change.approved else "/dev/null"
    after = f"b/{change.path}" if change.working else "/dev/null"
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), before, after
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


