"""The OskError family.

Every refusal the engine makes is an ``OskError``. The message says what happened and what to
do next; the facts live on the exception as attributes. Surfaces map these exactly once: the CLI
prints ``Error: …`` and exits with ``exit_code``; the MCP server returns ``is_error`` results.
"""

from __future__ import annotations


class OskError(Exception):
    """A refusal or failure a user or an agent can act on."""

    exit_code = 1
    rule: str = ""  # the governance rule that was enforced, when there is one

    def __init__(self, message: str, **facts: object) -> None:
        super().__init__(message)
        self.facts = facts
        for key, value in facts.items():
            setattr(self, key, value)


class VaultNotFound(OskError):
    exit_code = 2


class ContractError(OskError):
    """A node file or a proposed node breaks the node contract."""

    rule = "node-contract"


class TitleError(OskError):
    """A title is not portable or collides with another after normalisation."""

    rule = "unique-portable-titles"


class DuplicateId(OskError):
    """Two readable files carry one id; reads and writes by that id or title refuse."""

    rule = "unique-ids"


class NodeNotFound(OskError):
    exit_code = 3

    @classmethod
    def named(cls, ref: str) -> NodeNotFound:
        """No node this session may see has ``ref`` for its id or title."""
        return cls(f"no node with id or title {ref!r}; search first, then use a returned "
                   f"title or id", ref=ref)


class StaleHash(OskError):
    """A compare-and-swap write named a version that is no longer current."""

    exit_code = 4
    rule = "compare-and-swap"


class AnchorError(OskError):
    """An edit anchor does not occur exactly once."""

    rule = "unique-anchor"


class EdgeError(OskError):
    """An edge target is malformed, missing, or forbidden by citation topology."""

    rule = "citation-topology"


class ScopeError(OskError):
    """A write or read crosses a scope boundary the session may not cross."""

    rule = "scope-boundary"


class RawRecordError(OskError):
    """A raw record append was refused (changed prefix, bad coordinate, damaged framing)."""

    rule = "raw-append-only"


class LedgerError(OskError):
    """A ledger is structurally damaged; the message names the line."""

    rule = "ledger-integrity"


class LedgerFork(OskError):
    """Concurrent ledger branches disagree about a subject; a person must resolve it."""

    rule = "ledger-forks"


class LimitError(OskError):
    """A write exceeds a cap (scope memory size, page size). Refused, never truncated."""

    rule = "refuse-over-cap"


class OutsideVault(OskError):
    """A vault path resolves outside the vault (a symbolic link leads elsewhere): osk neither
    reads nor writes through it."""

    rule = "inside-the-vault"


class AuthorityError(OskError):
    """An action reserved for the person at a terminal was attempted elsewhere."""

    exit_code = 5
    rule = "person-authority"


class SyncError(OskError):
    """A sync cycle could not complete; the repository is left consistent."""


class CandidateError(OskError):
    """A conflict/duplicate/competition/delegation candidate was malformed (type, parties)."""

    rule = "candidates"


class TombstoneError(OskError):
    """A write repeats a claim the person rejected; the tombstone's reason and date are facts."""

    exit_code = 6
    rule = "tombstones"


class ProtectedRegionError(OskError):
    """A protected region blocks this change (a change already pending review, nesting, moves)."""

    rule = "protected-regions"


class ObjectMissing(OskError):
    """A content-addressed object is absent from ``_objects/`` or its bytes fail their hash."""

    rule = "content-objects"


class ValidityError(OskError):
    """Validity time is inconsistent (starts after it ends, supersedes before the old start)."""

    rule = "validity-time"


class PlacementError(OskError):
    """A node's place (Space, scope, cluster folder) is not one osk can write to."""

    rule = "node-placement"


class HubMissing(OskError):
    """A cluster's hub (the node titled like its folder) must exist before its other nodes."""

    rule = "cluster-hub-first"


class RecheckError(OskError):
    """A recheck request names no open candidate of the node it is about."""

    rule = "rechecks"


class CascadeStop(RecheckError):
    """A correction would run ahead of an unresolved source or follow a correction; a person
    decides."""

    rule = "recheck-cascade-stop"


class RecheckUnread(RecheckError):
    """A re-citation or correction names a target state this session has not read."""

    rule = "recheck-read-first"
    code = "recheck_unread"


class SetupError(OskError):
    """A host's configuration cannot be changed safely (malformed file, foreign entry, no TTY)."""

    rule = "host-setup"


class RawNotFound(RawRecordError):
    """A raw record or round named by a coordinate does not exist."""

    exit_code = 3


class SearchError(OskError):
    """A search request cannot be answered as asked (empty query, k out of range)."""

    rule = "search"


class SurfaceError(OskError):
    """The MCP server cannot enforce its argument contract (unknown arguments rejected); it
    refuses to start rather than serve tools that silently drop a misspelt argument."""

    rule = "strict-arguments"


class RedactError(OskError):
    """`osk redact` cannot do what was asked (no such record, the text is not in it, too short
    a span); nothing was changed."""

    rule = "person-redaction"


class ExclusionError(OskError):
    """`osk exclude` or `osk include` cannot do what was asked (a target that is no raw round
    or conversation of this vault, one already excluded, one not excluded); nothing was
    recorded."""

    rule = "person-exclusion"


class SecretInName(OskError):
    """A name or identifier (a conversation or completion id, a host, a drafter, a cluster or
    scope folder, a cited path, a path osk setup writes) holds what the secret filter takes for
    a secret. It names a file, a record or a coordinate, so it is refused whole, never
    redacted; the message names the field and the kind, never the value."""

    rule = "secret-filter"


class DiskError(OskError):
    """The disk refused: it is full (ENOSPC), the quota is used up (EDQUOT), the file system is
    read-only (EROFS) or permission is denied (EACCES, EPERM). The message names the cause and
    the path inside the vault (``osk.store.vault.disk_error`` makes one from an OSError)."""

    rule = "disk"


class LockTimeout(OskError, TimeoutError):
    """A lock stayed held by another process past its timeout (osk.store.locks)."""

    rule = "busy-vault"

    def __init__(self, path: object, timeout: float) -> None:
        super().__init__(
            f"the vault is busy: lock {path} was still held after {timeout:g} s by another "
            f"osk process; retry in a moment (if no osk process is running, the lock file "
            f"may be deleted)",
            path=path, timeout=timeout,
        )
