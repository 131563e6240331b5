"""The MCP tools' contract: each tool's argument model (strict: an unknown field is an error,
never dropped) and result model, as the host sees them in ``tools/list`` and in every answer
(docs/tools.md). ``osk.surfaces.server`` binds them to the engine's calls.
"""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from osk.search.versions import DEFAULT_K, MAX_K
from osk.surfaces.search_models import MAX_QUERY, Item, Out


# == argument models ==========================================================================
class Args(ArgModelBase):
    """Every tool's arguments: unknown fields are an error, never silently dropped."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)


def _lower(value: object) -> object:
    return value.lower() if isinstance(value, str) else value


SpaceName = Annotated[
    Literal["scope", "domain", "person"], BeforeValidator(_lower),
    Field(description="scope (this project's Space), domain (reused across projects) or "
                      "person (about the user)"),
]
NodeRef = Annotated[str, Field(min_length=1, description="a node's exact title or its id")]
Links = Annotated[list[str], Field(
    description="edge targets: [[Title]], [[_raw/KEY/CONVERSATION#Round N]] or [[file:PATH]]")]
Drafter = Annotated[str, Field(min_length=1, description="your model name, e.g. claude-opus-4")]
Timestamp = Annotated[str | None, Field(
    description="ISO 8601 with minutes and UTC offset, e.g. 2026-11-29T18:02+09:00")]


class SearchArgs(Args):
    query: str = Field(min_length=1, max_length=MAX_QUERY,
                       description="words to look for; an exact title ranks first")
    k: int = Field(DEFAULT_K, ge=1, le=MAX_K,
                   description=f"how many hits (default {DEFAULT_K}, at most {MAX_K})")
    as_of: Timestamp = Field(None, description="answer as the vault stood at this time "
                                               "(each node's text then), for claims valid then")
    kind: Literal["all", "nodes", "rounds"] = Field(
        "all", description="nodes and raw rounds (all, the default), nodes only, or raw "
                           "rounds only (a round's id is its coordinate: read it with "
                           "read_raw)")


class ReadNodeArgs(Args):
    node: NodeRef
    section: str | None = Field(None, description="read only this heading's section "
                                                  "(a title from outline)")
    start: int | None = Field(None, ge=0, description="character offset to read from "
                                                      "(next_start of the previous page)")
    length: int | None = Field(None, ge=1, le=4000,
                               description="characters to return (at most 4,000)")
    as_of: Timestamp = Field(None, description="the version served at this time (no hash)")


class ReadRawArgs(Args):
    coordinate: str = Field(
        min_length=1,
        description="_raw/KEY/CONVERSATION#Round N (one round), _raw/KEY/CONVERSATION (a review "
                    "view of the record) or file:PATH (a project file)")
    rounds: list[Annotated[int, Field(ge=1)]] | None = Field(
        None, description="a record view only: the round numbers to show (next_rounds of the "
                          "previous view continues a cut one)")
    start: int = Field(0, ge=0, description="character offset (next_start of the previous page)")
    length: int | None = Field(None, ge=1, le=6000, description="characters (at most 6,000)")


class NoArgs(Args):
    pass


class CreateNodeArgs(Args):
    title: str = Field(min_length=1, description="the node's title and file name: unique in the "
                                                 "vault, specific, no / \\ : * ? \" < > | # ^ [ ]")
    summary: str = Field(min_length=1, max_length=300, description="one line saying the claim")
    body: str = Field(description="Markdown body: the claim, its conditions, the evidence")
    space: SpaceName
    cluster: str = Field(min_length=1, description="the cluster folder, e.g. 'auth' or "
                                                   "'auth/tokens'; a new cluster's hub node "
                                                   "(titled like the folder) is written with it")
    drafter: Drafter
    derived_from: Links = Field(default_factory=list)
    conflicts: list[str] = Field(default_factory=list,
                                 description="[[Title]] of nodes this one contradicts")
    valid_from: Timestamp = None
    valid_to: Timestamp = None
    supersedes: str | None = Field(None, description="[[Title]] of the node this one replaces")
    hub_summary: str | None = Field(
        None, min_length=1, max_length=300,
        description="a new cluster only: one line saying what the cluster holds, for the hub "
                    "written with this node (else osk writes one for the person to edit)")


class UpdateNodeArgs(Args):
    node: NodeRef
    body: str | None = Field(None, description="a new full body; needs expect_hash")
    expect_hash: str | None = Field(None, description="the hash from a complete read_node")
    old_text: str | None = Field(None, description="a passage that occurs exactly once")
    new_text: str | None = Field(None, description="what replaces old_text")
    summary: str | None = Field(None, max_length=300)
    derived_from: list[str] | None = Field(None, description="the complete new edge list "
                                                             "(omit to keep the current one)")
    conflicts: list[str] | None = None
    drafter: str | None = Field(None, description="your model name")
    recheck_of: list[str] = Field(default_factory=list,
                                  description="ids of recheck candidates this call resolves")
    valid_from: Timestamp = None
    valid_to: Timestamp = None
    supersedes: str | None = None


class MoveNodesArgs(Args):
    nodes: list[NodeRef] = Field(min_length=1, description="titles or ids to move")
    space: SpaceName
    cluster: str = Field(min_length=1, description="the destination cluster folder")


class MoveClusterArgs(Args):
    cluster: str = Field(min_length=1, description="the cluster folder to move")
    space: SpaceName
    to_space: SpaceName


class RecordCandidateArgs(Args):
    type: Literal["contradiction", "duplication", "competition", "delegation-overlap"] = Field(
        description="contradiction, duplication, competition, or delegation-overlap (the first "
                    "node delegates work that the others also claim)")
    parties: list[NodeRef] = Field(min_length=2, max_length=8,
                                   description="the nodes involved (titles or ids)")
    note: str = Field("", max_length=2000, description="what the person needs to decide")


class AppendRawArgs(Args):
    conversation: str = Field(min_length=1, description="this conversation's id (stable for "
                                                        "the whole conversation)")
    user: str = Field(description="what the person said, verbatim")
    assistant: str = Field(description="your final answer, verbatim")
    tools: list[str] = Field(default_factory=list, description="one line per tool call")
    completion: str = Field("", description="an id for this turn; a repeat is not re-captured")
    host: str = Field("", description="the host's name, e.g. kiro")


class MemoryEdit(BaseModel):
    model_config = ConfigDict(extra="forbid")

    old_text: str = Field(min_length=1, description="a passage that occurs exactly once")
    new_text: str


class ScopeMemoryArgs(Args):
    action: Literal["read", "replace", "edit", "settle"] = Field(
        description="read; replace (text + expect_hash); edit (edits); settle (eviction + node)")
    text: str | None = Field(None, description="replace: the whole new note")
    expect_hash: str | None = Field(None, description="replace: the hash read returned")
    edits: list[MemoryEdit] = Field(default_factory=list, description="edit: anchored changes")
    eviction: str | None = Field(None, description="settle: the pending eviction's id")
    node: str | None = Field(None, description="settle: the node the evicted lines went into")
    drafter: str | None = Field(None, description="replace, edit: your model name, e.g. "
                                                  "claude-opus-4 (recorded with the lines you "
                                                  "add, shown to later sessions)")
    host: str | None = Field(None, description="replace, edit: the host you run in, e.g. "
                                               "claude-code (recorded like drafter)")

    @model_validator(mode="after")
    def _fits_action(self) -> ScopeMemoryArgs:
        given = {name for name in ("text", "expect_hash", "eviction", "node")
                 if getattr(self, name) is not None}
        if self.edits:
            given.add("edits")
        needs = {"read": set(), "replace": {"text", "expect_hash"}, "edit": {"edits"},
                 "settle": {"eviction", "node"}}[self.action]
        allowed = needs | ({"expect_hash"} if self.action == "edit" else set())
        missing, extra = needs - given, given - allowed
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"needs {', '.join(sorted(missing))}")
            if extra:
                parts.append(f"does not take {', '.join(sorted(extra))}")
            raise ValueError(f"action {self.action!r} {' and '.join(parts)}")
        return self


# == result models ============================================================================
# Out, Item, HitOut and SearchOut: osk.surfaces.search_models (no SDK behind them).


class HeadingOut(Item):
    level: int
    title: str
    start: int
    end: int


class RelatedOut(Item):
    title: str
    id: str
    why: str = Field(description="cited by this node / cites this node (derived-from), or "
                                 "similar: what it shares with this node")


class NodeOut(Out):
    id: str
    title: str
    path: str
    space: str | None
    node_scope: str | None
    summary: str
    created: str
    updated: str
    author: str
    drafter: str
    trust: str
    derived_from: list[str]
    conflicts: list[str]
    text: str
    start: int
    end: int
    total_chars: int
    complete: bool
    next_start: int | None
    hash: str | None = Field(description="pass as expect_hash to replace the whole body; "
                                         "only a complete read returns it")
    outline: list[HeadingOut]
    section: str | None
    pending: bool
    markers: list[str]
    related: list[RelatedOut] = Field(
        default_factory=list, description="nodes near this one, each with why: its citation "
        "neighbours both ways, then the most similar nodes; read_node one before relying on it")


class RawOut(Out):
    coordinate: str
    kind: str
    text: str
    start: int
    end: int
    total_chars: int
    complete: bool
    next_start: int | None
    hash: str | None
    rounds: list[int]
    next_rounds: list[int] = Field(description="a cut record view: pass as rounds to read on")
    excluded: list[int] = Field(
        default_factory=list, description="rounds shown that the person keeps out of search "
        "and recall (osk exclude): theirs to read, not to distil into nodes")


class RecheckOut(Item):
    id: str = Field(description="name it in update_node(recheck_of=[…])")
    citing_id: str
    citing_title: str
    citing_path: str
    target: str
    reason: str
    recorded_hash: str | None
    current_hash: str | None
    next: list[str] = Field(description="titles of the nodes that cite the citing node")
    cascade: bool


class PartyOut(Item):
    id: str
    title: str
    path: str
    hash: str


class CandidateOut(Item):
    key: str
    type: str
    parties: list[PartyOut]
    note: str
    at: str
    status: str


class EvictionOut(Item):
    id: str
    scope: str
    lines: list[str]
    at: str


class ForkOut(Item):
    ledger: str
    subject: str
    description: str


class OverviewOut(Out):
    session_key: str
    bound: bool
    explicit_scope: bool
    isolation: bool
    shared_scopes: list[str]
    counts: dict[str, int]
    rechecks: list[RecheckOut]
    conflicts: list[CandidateOut]
    pending_evictions: list[EvictionOut]
    forks: list[ForkOut]
    damaged_ledgers: list[str]
    problems: list[str]
    conflict_copies: list[str] = Field(description="sync conflict copies (two devices changed "
                                                   "one file); a person merges each into its "
                                                   "original and deletes it")


class FindingOut(Item):
    rule: str
    path: str
    message: str


class ValidateOut(Out):
    clean: bool
    findings: list[FindingOut]


class RedactionOut(Item):
    kind: str
    count: int


class WriteOut(Out):
    action: str
    id: str
    title: str
    path: str
    hash: str = Field(description="the new file hash (expect_hash for the next replacement)")
    bound: bool
    bound_now: bool
    trust: str | None
    closed: list[str]
    superseded: str | None
    pending: bool = Field(description="true: the node is in a protected region and this change "
                                      "waits for the person's review (readers still get the "
                                      "approved version)")
    redactions: list[RedactionOut] = Field(
        default_factory=list, description="secrets the filter replaced by [REDACTED:kind] in "
                                          "the body or summary before it was stored")
    owed: str | None = Field(default=None, description="the node was written, but the disk "
                             "refused the bookkeeping after it (audit record, recheck pairs): "
                             "osk writes it on the next call once the disk takes writes; do "
                             "not write the node again")


class CreateOut(WriteOut):
    hub: str | None = Field(description="the path of the cluster hub this call wrote first "
                                        "(null: the cluster had one)")


class UpdateOut(WriteOut):
    action: str = Field(description="updated, unchanged or recited")
    closed: list[str] = Field(description="recheck candidates this call closed")
    recited: list[str] = Field(default_factory=list,
                               description="nodes re-cited unchanged (action recited)")


class MovedOut(Item):
    id: str
    title: str
    before: str
    after: str


class MoveOut(Out):
    moved: list[MovedOut]
    bound: bool
    bound_now: bool
    owed: str | None = Field(default=None, description="the files moved, but the disk refused "
                             "the bookkeeping after it (audit records, binding): osk writes it "
                             "on the next call once the disk takes writes; do not move again")


class RecordCandidateOut(Out):
    created: bool = Field(description="false: the same parties at the same bytes were already "
                                      "filed; nothing was written")
    candidate: CandidateOut


class AppendOut(Out):
    coordinate: str = Field(description="cite this round as [[coordinate]]")
    number: int
    hash: str
    duplicate: bool
    path: str = Field(description="the raw record file, vault-relative")


class MemoryOut(Out):
    action: str
    text: str
    hash: str
    chars: int
    cap: int
    changed: bool
    redactions: list[RedactionOut]
    eviction: EvictionOut | None
    pending_evictions: list[EvictionOut]
