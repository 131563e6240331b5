"""The MCP surface: `osk mcp`, a stdio server with exactly twelve tools.

Each tool validates its arguments against a strict pydantic model (unknown fields forbidden),
makes one engine call and returns a structured result that names the session's active scope.
The SDK's generated argument models silently drop unknown keys; a misspelt ``expect_hash``
would then turn a compare-and-swap write into an unconditional one. So every tool here is built
from an explicit model with ``extra="forbid"``, its published input schema says
``additionalProperties: false``, and ``build_server`` refuses to return a server in which that
rejection is not in force (``SurfaceError``).

No tool deletes a node, approves or reverts anything, or writes an authority ledger: those are a
person's actions at a terminal. ``osk.verbs.validate.surface_lint`` checks this module for them.

Errors: an ``OskError`` becomes an ``is_error`` result carrying its message (what was wrong and
what to do) and its rule; anything else is a bug, logged with its traceback to stderr. Nothing
here writes to stdout, which carries the protocol. This module imports the MCP SDK (about a
second); nothing on a hook path imports it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools.base import Tool
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata
from mcp.types import ToolAnnotations
from pydantic import BaseModel, ValidationError

from osk import __version__
from osk.calls.request import NewNode, NodeEdit
from osk.errors import OskError, SurfaceError
from osk.surfaces.search_models import Out, SearchOut, search_out
from osk.surfaces.tool_models import (
    AppendOut,
    AppendRawArgs,
    Args,
    CandidateOut,
    CreateNodeArgs,
    CreateOut,
    EvictionOut,
    FindingOut,
    MemoryOut,
    MoveClusterArgs,
    MoveNodesArgs,
    MoveOut,
    NoArgs,
    NodeOut,
    OverviewOut,
    RawOut,
    ReadNodeArgs,
    ReadRawArgs,
    RecordCandidateArgs,
    RecordCandidateOut,
    RedactionOut,
    ScopeMemoryArgs,
    SearchArgs,
    UpdateNodeArgs,
    UpdateOut,
    ValidateOut,
)

if TYPE_CHECKING:  # the engine's import cost is paid on the first tool call, not at start
    from osk.engine.core import Engine
    from osk.surfaces.jsonrpc import Pipe

log = logging.getLogger("osk.surfaces.server")

TOOL_NAMES = (
    "search", "read_node", "read_raw", "overview", "run_validators", "create_node",
    "update_node", "move_nodes", "move_cluster", "record_candidate", "append_raw",
    "scope_memory",
)
_PROBE = "osk_selfcheck_unknown_argument"

INSTRUCTIONS = """\
osk is this project's long-term memory: Markdown nodes in a vault, each citing its sources.
Workflow:
1. search before answering a question about earlier work and before writing: an existing node
   on the same claim is corrected in place with update_node, never duplicated.
2. read_node before citing or changing a node. A full-body replacement needs the hash that only
   a complete read returns (expect_hash).
3. Cite evidence in derived_from: raw conversation rounds by coordinate
   ([[_raw/KEY/CONVERSATION#Round N]], as append_raw and read_raw return them), other nodes by
   [[Title]], project files by [[file:PATH]].
4. overview lists recheck candidates (a cited source changed), open conflict candidates and
   pending scope-memory evictions. Close a recheck by reading the target, then update_node with
   recheck_of=[id]: no other change re-cites it unchanged; a change corrects the node.
5. If two nodes disagree, duplicate or compete, file record_candidate for the person; do not
   delete or merge on your own.
Every result names the active scope. Errors say what was wrong and what to do next."""


# == the tools ================================================================================
A = TypeVar("A", bound=Args)


@dataclass(frozen=True)
class Spec(Generic[A]):
    name: str
    args: type[A]
    out: type[Out]
    run: Callable[[Engine, A], Out]  # (engine, args) -> result
    description: str
    read_only: bool
    idempotent: bool
    destructive: bool = False  # may overwrite what is there (a body, the scope note)


def _search(engine: Engine, a: SearchArgs) -> Out:
    return search_out(engine, a.query, k=a.k, as_of=a.as_of, kind=a.kind)


def _read_node(engine: Engine, a: ReadNodeArgs) -> Out:
    found = engine.read_node(a.node, section=a.section, start=a.start, length=a.length,
                             as_of=a.as_of)
    return NodeOut.model_validate(found, from_attributes=True)


def _read_raw(engine: Engine, a: ReadRawArgs) -> Out:
    found = engine.read_raw(a.coordinate, rounds=a.rounds, start=a.start, length=a.length)
    return RawOut.model_validate(found, from_attributes=True)


def _overview(engine: Engine, a: NoArgs) -> Out:
    return OverviewOut.model_validate(engine.overview(), from_attributes=True)


def _run_validators(engine: Engine, a: NoArgs) -> Out:
    from osk.verbs import validate

    findings = validate.run(engine.vault)  # a fresh catalog: the engine's feeds search
    return ValidateOut(scope=engine.scope, clean=not findings,
                       findings=[FindingOut.model_validate(f, from_attributes=True)
                                 for f in findings])


def _create_node(engine: Engine, a: CreateNodeArgs) -> Out:
    result = engine.create_node(NewNode(**dict(a)))
    return CreateOut.model_validate(result, from_attributes=True)


def _update_node(engine: Engine, a: UpdateNodeArgs) -> Out:
    fields = dict(a)
    result = engine.update_node(fields.pop("node"), NodeEdit(**fields))
    out = UpdateOut.model_validate(result, from_attributes=True)
    if result.action == "recited":
        out.recited = [result.title]
    return out


def _move_nodes(engine: Engine, a: MoveNodesArgs) -> Out:
    result = engine.move_nodes(a.nodes, space=a.space, cluster=a.cluster)
    return MoveOut.model_validate(result, from_attributes=True)


def _move_cluster(engine: Engine, a: MoveClusterArgs) -> Out:
    result = engine.move_cluster(a.cluster, space=a.space, to_space=a.to_space)
    return MoveOut.model_validate(result, from_attributes=True)


def _record_candidate(engine: Engine, a: RecordCandidateArgs) -> Out:
    candidate, created = engine.record_candidate(a.type, a.parties, a.note)
    return RecordCandidateOut(
        scope=engine.scope, created=created,
        candidate=CandidateOut.model_validate(candidate, from_attributes=True))


def _append_raw(engine: Engine, a: AppendRawArgs) -> Out:
    result = engine.append_raw(a.conversation, user=a.user, assistant=a.assistant,
                               tools=a.tools, completion=a.completion, host=a.host)
    return AppendOut.model_validate(result, from_attributes=True)


def _scope_memory(engine: Engine, a: ScopeMemoryArgs) -> Out:
    note = engine.scope_memory(a.action, text=a.text, edits=[(e.old_text, e.new_text)
                                                              for e in a.edits],
                               expect_hash=a.expect_hash, eviction=a.eviction, node=a.node,
                               drafter=a.drafter or "", host=a.host or "")
    result = note.written
    return MemoryOut(
        scope=engine.scope, action=a.action, text=note.text, hash=note.hash,
        chars=len(note.text), cap=note.cap, changed=bool(result and result.changed),
        redactions=[RedactionOut(kind=k, count=n) for k, n in (result.redactions if result
                                                                 else ())],
        eviction=(EvictionOut.model_validate(result.eviction, from_attributes=True)
                  if result and result.eviction else None),
        pending_evictions=[EvictionOut.model_validate(e, from_attributes=True)
                           for e in note.pending_evictions],
    )


SPECS: tuple[Spec[Any], ...] = (
    Spec("search", SearchArgs, SearchOut, _search, read_only=True, idempotent=True, description=(
        "Search the memory vault (BM25 over titles, summaries and bodies, plus meaning when "
        "the semantic model is installed; this project's scope ranks first). Call it before "
        "answering anything about earlier work and before writing a node, so you correct an "
        "existing node instead of duplicating it. Returns title, path, id, summary, updated, "
        "score and markers (recheck: it cites a changed source; "
        "conflict: party to an open candidate). read_node a hit before citing or relying on "
        "it. Captured conversation rounds come beside nodes, marked 'raw round', their "
        "coordinate as id and their date and an excerpt as summary: read_raw one before "
        "relying on it; kind asks for nodes or rounds only.")),
    Spec("read_node", ReadNodeArgs, NodeOut, _read_node, read_only=True, idempotent=True,
         description=(
        "Read a node by exact title or id. Long bodies come in pages of at most 4,000 "
        "characters: pass section (a heading from outline) and/or start/length; next_start "
        "continues. hash (the expect_hash for a full replacement) is returned by the read that "
        "completes reading the current version: one whole read, or the last page once every "
        "page was read. Reading a node is what lets you re-cite it after it "
        "changed.")),
    Spec("read_raw", ReadRawArgs, RawOut, _read_raw, read_only=True, idempotent=True,
         description=(
        "Read verbatim evidence: one round of a raw conversation record by the coordinate a "
        "node cites (_raw/KEY/CONVERSATION#Round N), a whole record as a review view "
        "(_raw/KEY/CONVERSATION, capped at 6,000 characters), or a project file (file:PATH). "
        "Cite what you read here as [[coordinate]] in derived_from.")),
    Spec("overview", NoArgs, OverviewOut, _overview, read_only=True, idempotent=True,
         description=(
        "What this session needs to know: its session key and scope binding, node counts per "
        "Space, recheck candidates (a cited source changed: read it, then update_node with "
        "recheck_of), open conflict candidates, pending scope-memory evictions, ledger forks, "
        "damaged files and sync conflict copies.")),
    Spec("run_validators", NoArgs, ValidateOut, _run_validators, read_only=True,
         idempotent=True, description=(
        "Check the whole vault (node contract, duplicate ids and titles, dangling edges, "
        "citation topology, cluster hubs, ledger integrity and forks, raw record framing, sync "
        "conflict copies) and report findings. Changes nothing.")),
    Spec("create_node", CreateNodeArgs, CreateOut, _create_node, read_only=False,
         idempotent=False, description=(
        "Write a new node: one durable claim with its conditions and evidence. search first "
        "(if a node already holds the claim, update it instead). Cite evidence in "
        "derived_from: raw rounds by coordinate ([[_raw/KEY/CONVERSATION#Round N]]), nodes by "
        "[[Title]] (read_node them first), files by [[file:PATH]]. The first node of a new "
        "cluster also writes its hub (the node titled like the cluster folder; hub_summary "
        "says what the cluster holds). Scope nodes go into this session's scope. Searchable as "
        "soon as this returns.")),
    Spec("update_node", UpdateNodeArgs, UpdateOut, _update_node, read_only=False,
         idempotent=False, destructive=True, description=(
        "Change a node in place: replace the whole body (body + expect_hash from a complete "
        "read_node), or edit one passage (old_text, which must occur exactly once, -> "
        "new_text); summary and edges may change too. recheck_of names recheck candidates "
        "(from overview) this call resolves: with no other change it re-cites the targets as "
        "unchanged (you must have read their current state); with a change it corrects the "
        "node. A correction that would touch a node listed in next, or any with cascade true, "
        "is refused: leave it for the person.")),
    Spec("move_nodes", MoveNodesArgs, MoveOut, _move_nodes, read_only=False, idempotent=True,
         description=(
        "Move nodes to another cluster folder (or Space). Titles stay, so every [[Title]] "
        "link and every citation still finds them.")),
    Spec("move_cluster", MoveClusterArgs, MoveOut, _move_cluster, read_only=False,
         idempotent=True, description=(
        "Move a whole cluster folder (hub and members) from one Space to another, e.g. from "
        "scope to domain when knowledge turns out to be reusable across projects.")),
    Spec("record_candidate", RecordCandidateArgs, RecordCandidateOut, _record_candidate,
         read_only=False, idempotent=True, description=(
        "File a contradiction, duplication, competition or delegation-overlap between nodes "
        "for the person to decide. Keyed on the type and each node's id and body hash: filing "
        "the same nodes at the same content again does nothing; a changed node makes a new "
        "candidate. Do not resolve it yourself by deleting or merging.")),
    Spec("append_raw", AppendRawArgs, AppendOut, _append_raw, read_only=False,
         idempotent=True, description=(
        "Capture one finished turn verbatim (secret-filtered) into this session's raw "
        "conversation record, for hosts without capture hooks. Returns the round's coordinate "
        "to cite in derived_from. A repeated completion id is not captured twice.")),
    Spec("scope_memory", ScopeMemoryArgs, MemoryOut, _scope_memory, read_only=False,
         idempotent=False, destructive=True, description=(
        "The scope's shared note (at most 1,500 characters after the secret filter), shown to "
        "every session of this project at start. action=read returns text and hash; replace "
        "needs text + expect_hash; edit takes edits [{old_text, new_text}] with unique "
        "anchors. An over-limit write is refused, never truncated: distil detail into a node "
        "and keep a pointer here. settle marks a pending eviction as distilled into a node.")),
)


# == strict tools =============================================================================
class StrictTool(Tool):
    """A tool that names unknown arguments before anything runs (the model forbids them too)."""

    def unknown_arguments(self, arguments: Mapping[str, Any]) -> list[str]:
        known = set(self.fn_metadata.arg_model.model_fields)
        return sorted(key for key in arguments if key not in known)

    async def run(self, arguments: dict[str, Any], context: Any,
                  convert_result: bool = False) -> Any:
        takes = ", ".join(self.fn_metadata.arg_model.model_fields) or "no arguments"
        unknown = self.unknown_arguments(arguments)
        if unknown:
            names = ", ".join(repr(u) for u in unknown)
            raise ToolError(
                f"Error executing tool {self.name}: unknown argument(s) {names}; {self.name} "
                f"takes: {takes}. Nothing was done; call it again with only those names.")
        try:
            self.fn_metadata.validate_arguments(arguments)
        except ValidationError as exc:
            raise ToolError(
                f"Error executing tool {self.name}: {_explain(exc)}. Nothing was done; fix "
                f"the arguments ({self.name} takes: {takes}) and call it again.") from exc
        return await super().run(arguments, context, convert_result)


def _explain(exc: ValidationError) -> str:
    """Pydantic's errors as one line an agent can act on."""
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"])
        message = str(error["msg"]).removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            parts.append(f"unknown argument {where!r}")
        elif error["type"] == "missing":
            parts.append(f"missing required argument {where!r}")
        else:
            parts.append(f"{where}: {message}" if where else message)
    return "; ".join(parts)


class _Surface:
    """Holds the engine (opened on first use) and runs one tool call at a time."""

    def __init__(self, engine_factory: Callable[[], Engine]) -> None:
        self._factory = engine_factory
        self._engine: Engine | None = None
        self._lock = threading.Lock()  # sync tools run on worker threads; the engine is not

    def call(self, spec: Spec[Any], arguments: Mapping[str, Any]) -> Out:
        args = spec.args.model_construct(**arguments)  # validated by the SDK against spec.args
        with self._lock:
            try:
                if self._engine is None:
                    self._engine = self._factory()
                with self._engine.calls:  # a search asked over the recall socket waits
                    result = spec.run(self._engine, args)
                _log_use(self._engine, spec.name, args, result)
                return result
            except OskError as exc:
                raise ToolError(_message(exc)) from exc
            except ToolError:
                raise
            except Exception as exc:
                from osk.store.vault import disk_error

                disk = disk_error(exc)  # a full or read-only disk is the machine's, not a bug
                if disk is not None:
                    raise ToolError(_message(disk)) from exc
                log.exception("osk tool %s failed unexpectedly", spec.name)
                raise ToolError(
                    f"internal error ({type(exc).__name__}); nothing more is known here. The "
                    f"server log (stderr) has the traceback; this is a bug in osk, not in your "
                    f"call") from exc


USES = frozenset({"read_node", "read_raw", "create_node", "update_node"})  # osk stats counts


def _log_use(engine: Engine, tool: str, args: Args, result: Out) -> None:
    """The call log ``osk stats`` reads: which node was read or written, and what it cites
    (``Engine.log_use``); never raises."""
    if tool not in USES:
        return
    cites = [str(c) for c in getattr(args, "derived_from", None) or ()]
    for used in _used(result):
        engine.log_use(tool, node=used, cites=cites)


def _used(result: Out) -> list[str]:
    """What a call read or wrote, as a receipt names it: a node by its id, a raw round by its
    coordinate; a record view names each round it showed (``rounds=[...]`` reads the rounds
    recall pointed at as much as a round's own coordinate does)."""
    if not isinstance(result, RawOut):
        return [str(getattr(result, "id", ""))]
    if result.kind == "record":  # the record's canonical coordinate, however it was asked
        return [f"{result.coordinate}#Round {number}" for number in result.rounds]
    return [result.coordinate]


def _message(exc: OskError) -> str:
    text = str(exc)
    rule = getattr(exc, "rule", "")
    return f"{text} (rule: {rule})" if rule and f"rule: {rule}" not in text else text


def _tool(spec: Spec[Any], surface: _Surface) -> StrictTool:
    def run(**arguments: Any) -> Out:
        return surface.call(spec, arguments)

    run.__name__ = spec.name
    return StrictTool(
        fn=run, name=spec.name, title=spec.name.replace("_", " "), description=spec.description,
        parameters=spec.args.model_json_schema(by_alias=True),
        fn_metadata=FuncMetadata(arg_model=spec.args, output_model=spec.out),
        is_async=False, context_kwarg=None,
        annotations=ToolAnnotations(read_only_hint=spec.read_only,
                                    destructive_hint=spec.destructive,
                                    idempotent_hint=spec.idempotent, open_world_hint=False),
    )


def build_server(engine_factory: Callable[[], Engine]) -> MCPServer:
    """The osk MCP server over ``engine_factory()`` (called once, on the first tool call).

    Raises ``SurfaceError`` when unknown arguments would not be rejected by every tool.
    """
    surface = _Surface(engine_factory)
    server = MCPServer(
        "osk", title="osk memory vault", version=__version__, instructions=INSTRUCTIONS,
        tools=[_tool(spec, surface) for spec in SPECS],
    )
    check_strict(server)
    return server


def check_strict(server: MCPServer) -> None:
    """Refuse a server whose tools would accept (and drop) an unknown argument."""
    tools = {tool.name: tool for tool in server._tool_manager.list_tools()}
    problems: list[str] = []
    if sorted(tools) != sorted(TOOL_NAMES):
        problems.append(f"tools are {sorted(tools)}, expected exactly {sorted(TOOL_NAMES)}")
    for name, tool in sorted(tools.items()):
        problems.extend(f"{name}: {p}" for p in _strictness_problems(tool))
    if problems:
        raise SurfaceError(
            "the osk MCP server will not start: unknown tool arguments would not be rejected ("
            + "; ".join(problems) + "). Reinstall osk with its pinned mcp version",
            problems=problems,
        )


def _strictness_problems(tool: Tool) -> list[str]:
    found = []
    model = tool.fn_metadata.arg_model
    if not isinstance(tool, StrictTool) or tool.unknown_arguments({_PROBE: 1}) != [_PROBE]:
        found.append("the tool does not name unknown arguments before running")
    if model.model_config.get("extra") != "forbid":
        found.append("its argument model does not forbid unknown fields")
    for where, schema in _object_schemas(tool.parameters):
        if schema.get("additionalProperties") is not False:
            found.append(f"its published schema {where} does not say additionalProperties: false")
    if not _schema_refuses_probe(tool.parameters):
        found.append("its published schema accepts an unknown argument")
    try:
        tool.fn_metadata.validate_arguments({_PROBE: 1})
    except ValidationError as exc:
        if not any(e["type"] == "extra_forbidden" and tuple(e["loc"]) == (_PROBE,)
                   for e in exc.errors()):
            found.append("validation does not reject an unknown argument by name")
    else:
        found.append("validation accepts an unknown argument")
    return found


def _schema_refuses_probe(schema: Mapping[str, Any]) -> bool:
    """What a host validating against the published schema would do with an unknown key."""
    from jsonschema import Draft202012Validator

    errors = Draft202012Validator(dict(schema)).iter_errors({_PROBE: 1})
    return any(e.validator == "additionalProperties" and _PROBE in e.message for e in errors)


def _object_schemas(schema: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    found: list[tuple[str, Mapping[str, Any]]] = [("(top level)", schema)]
    for name, definition in (schema.get("$defs") or {}).items():
        if definition.get("type") == "object":
            found.append((f"$defs/{name}", definition))
    return found


def run_backend(front: Pipe, engine_factory: Callable[[], Engine]) -> None:
    """The SDK's side of `osk mcp` (see ``osk.surfaces.stdio``): build the server, then serve the
    messages the front passes on until the host has gone."""
    import anyio

    server = build_server(engine_factory)
    log.info("osk %s serving over stdio", __version__)
    anyio.run(_serve_front, server, front)


async def _serve_front(server: MCPServer, front: Pipe) -> None:
    import anyio
    import anyio.to_thread
    import mcp_types
    from mcp.server.lowlevel.server import NotificationOptions
    from mcp.shared.message import SessionMessage

    lowlevel = server._lowlevel_server
    # The front may answer tools/list from the last run's handshake and then say it changed.
    options = lowlevel.create_initialization_options(NotificationOptions(tools_changed=True))
    to_server, server_reads = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    server_writes, from_server = anyio.create_memory_object_stream[SessionMessage](0)

    asked: dict[object, tuple[str, object]] = {}  # requests awaiting an answer: id -> call

    async def pump() -> None:
        async with to_server:
            while True:
                item = await anyio.to_thread.run_sync(front.inbox.get, abandon_on_cancel=True)
                if item is None:
                    return
                try:
                    message = mcp_types.jsonrpc_message_adapter.validate_python(item,
                                                                                by_name=False)
                except ValidationError as exc:
                    front.refuse(item, _explain(exc))
                    continue
                if "method" in item and item.get("id") is not None:
                    asked[item["id"]] = (str(item["method"]), item.get("params"))
                await to_server.send(SessionMessage(message))

    async def answer() -> None:
        async with from_server:
            async for sent in from_server:
                message = sent.message
                is_response = not hasattr(message, "method")
                response_id = getattr(message, "id", None) if is_response else None
                call = asked.pop(response_id, None) if is_response else None
                text = _wire_text(message, response_id)
                if call is not None and _says_only_invalid_params(message):
                    text = _invalid_params(lowlevel, response_id, *call)
                front.deliver(response_id, text)

    async with anyio.create_task_group() as group:
        group.start_soon(pump)
        group.start_soon(answer)
        front.ready.set()
        await lowlevel.run(server_reads, server_writes, options)


def _says_only_invalid_params(message: Any) -> bool:
    """The SDK's answer to params it could not validate: it keeps pydantic's reasons back."""
    found = getattr(message, "error", None)
    return getattr(found, "code", None) == -32602 and getattr(
        found, "message", None) == "Invalid request parameters"


def _invalid_params(lowlevel: Any, response_id: object, method: str, params: object) -> str:
    """That answer again, saying what is wrong with the params (or that it came too early)."""
    import json

    import mcp_types

    from osk.surfaces.jsonrpc import INVALID_PARAMS, error

    entry = lowlevel.get_request_handler(method)
    model = mcp_types.InitializeRequestParams if method == "initialize" else (
        entry.params_type if entry is not None else None)
    why = (f"{method} came before the session was initialized; send initialize, then "
           f"notifications/initialized, first")
    if model is not None:
        try:
            model.model_validate({} if params is None else params, by_name=False)
        except ValidationError as exc:
            why = f"{method}: {_explain(exc)}"
    return json.dumps(error(response_id, INVALID_PARAMS, f"Invalid params: {why}"))


def _wire_text(message: BaseModel, response_id: object) -> str:
    """A message as the SDK writes it; one it cannot serialise becomes an error answer."""
    import json

    from osk.surfaces.jsonrpc import INTERNAL_ERROR, error

    try:
        return message.model_dump_json(by_alias=True, exclude_unset=True)
    except Exception as exc:  # the host must get an answer, not silence
        log.exception("an answer could not be serialised")
        why = f"internal error: the answer could not be written ({type(exc).__name__})"
        return json.dumps(error(response_id, INTERNAL_ERROR, why))
