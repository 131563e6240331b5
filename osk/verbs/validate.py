"""Validators: the whole vault checked and reported, nothing changed; and the MCP surface lint.

``run(vault)`` reads every node, ledger, raw record and scope memory note and returns findings,
one per problem, each naming the rule, the vault-relative file and what to do. It never writes:
a hand edit that breaks a rule is reported for a person to fix, never "repaired".

``surface_lint(paths)`` walks the syntax tree of the MCP server modules and reports anything that
would put a person's authority on the agent's tool surface (see ``AUTHORITY_VERBS`` and
``AUTHORITY_LEDGERS``). The test suite runs it on ``osk/surfaces/server.py``.
"""

from __future__ import annotations

import ast
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from osk.capture import raw
from osk.errors import EdgeError, LedgerError, OskError, OutsideVault
from osk.provenance.sessions import Routing
from osk.store import conflict_copies, edges
from osk.store.catalog import Catalog
from osk.store.fsutil import is_temp_name, stale_temps
from osk.store.ledger import Ledger
from osk.store.node import Node
from osk.store.titles import check_portable, title_key
from osk.store.vault import (
    MEMORY_DIR,
    RAW_DIR,
    SCOPE,
    STATE_DIR,
    WORKBENCH,
    Vault,
    is_hub,
    scope_of,
    space_of,
)


@dataclass(frozen=True, order=True)
class Finding:
    path: str  # vault-relative (or the module path, for the surface lint)
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: [{self.rule}] {self.message}"

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


# -- the vault validators -------------------------------------------------------------------
def run(vault: Vault, catalog: Catalog | None = None) -> list[Finding]:
    """Every problem in the vault, sorted by file then rule. Reads only."""
    if catalog is None:
        catalog = Catalog(vault)
    catalog.refresh()
    findings: list[Finding] = []
    for check in (_contract, _titles, _placement, _edges, _hubs, _ledgers, _raw_records,
                  _scope_memory, _links_and_debris):
        findings.extend(check(vault, catalog))
    # A sync conflict copy has no contract id on purpose (so the node it was copied from stays
    # readable); it is reported once, as a conflict copy for a person to merge, never as a
    # broken node, ledger or raw record.
    findings = [f for f in findings if not conflict_copies.is_conflict_copy(f.path)]
    findings.extend(_sync_conflicts(vault, catalog))
    return sorted(set(findings))


def _finding(rule: str, path: str, message: str) -> Finding:
    prefix = f"{path}: "
    return Finding(path, rule, message[len(prefix):] if message.startswith(prefix) else message)


def _from_error(path: str, error: OskError, fallback_rule: str) -> Finding:
    return _finding(error.rule or fallback_rule, path, str(error))


def _contract(vault: Vault, catalog: Catalog) -> Iterator[Finding]:
    for entry in catalog.entries.values():
        if entry.error is not None:
            yield _from_error(entry.path, entry.error, "node-contract")


def _titles(vault: Vault, catalog: Catalog) -> Iterator[Finding]:
    for node_id, paths in catalog.duplicate_ids().items():
        for path in paths:
            others = ", ".join(p for p in paths if p != path)
            yield _finding("unique-ids", path,
                           f"id {node_id} is also carried by {others}; keep one file with this id "
                           f"and give the others new ids or remove them")
    for _key, paths in catalog.duplicate_titles().items():
        for path in paths:
            others = ", ".join(p for p in paths if p != path)
            yield _finding("unique-portable-titles", path,
                           f"its title collides with {others} after NFC normalisation and case "
                           f"folding; rename all but one")
    for path in catalog.entries:
        title = Path(path).stem
        try:
            check_portable(title)
        except OskError as exc:
            yield _from_error(path, exc, "unique-portable-titles")


def _placement(vault: Vault, catalog: Catalog) -> Iterator[Finding]:
    for path in catalog.entries:
        if path.startswith(f"{SCOPE}/") and scope_of(path) is None:
            yield _finding("scope-boundary", path,
                           f"a Scope node must sit inside {SCOPE}/<scope>/; move it into its "
                           f"project's scope folder")


def _edges(vault: Vault, catalog: Catalog) -> Iterator[Finding]:
    workbench = _workbench_titles(vault)
    routing = Routing(vault)
    for node in catalog.nodes():
        for field_name, links in (("derived-from", node.meta.derived_from),
                                  ("conflicts", node.meta.conflicts)):
            for link in links:
                try:
                    target = edges.parse_target(link)
                except EdgeError as exc:
                    yield _finding(exc.rule, node.path, f"{field_name} {link}: {exc}")
                    continue
                for rule, message in _edge_problems(vault, catalog, node, target, workbench,
                                                    routing):
                    yield _finding(rule, node.path, f"{field_name} {link}: {message}")


def _edge_problems(vault: Vault, catalog: Catalog, node: Node, target: edges.Target,
                   workbench: set[str], routing: Routing) -> Iterator[tuple[str, str]]:
    if isinstance(target, edges.NodeTarget):
        paths = catalog.paths_with_title(target.title)
        if not paths:
            if title_key(target.title) in workbench:
                yield ("citation-topology",
                       "cites Workbench work state, which no node may cite; cite the node or raw "
                       "round the work state came from")
            else:
                yield ("dangling-edge",
                       f"no node is titled {target.title!r}; fix the link or restore the node")
            return
        cited = paths[0]
        problem = _topology(node, "node", (space_of(cited), scope_of(cited)), target.link)
        if problem:
            yield ("citation-topology", problem)
    elif isinstance(target, edges.RawTarget):
        yield from _raw_edge_problems(vault, node, target, routing)


def _raw_edge_problems(vault: Vault, node: Node, target: edges.RawTarget,
                       routing: Routing) -> Iterator[tuple[str, str]]:
    owner = _raw_scope(routing, target.key)
    problem = _topology(node, "raw", (None, owner), target.link)
    if problem:
        yield ("citation-topology", problem)
    try:
        present = vault.abs(target.record_path).is_file()
    except OutsideVault as exc:
        yield ("inside-the-vault", str(exc))
        return
    if not present:
        yield ("dangling-edge", f"the raw record {target.record_path} does not exist")
        return
    try:
        raw.read_round(vault, target)
    except OskError as exc:
        yield ("dangling-edge", f"round {target.round} cannot be read: {exc}")


def _raw_scope(routing: Routing, key: str) -> str:
    """The scope a raw record's session key writes to (the key's own name while unbound)."""
    try:
        return str(routing.scope_for(key))
    except OskError:  # a forked binding: reported by the ledger check
        return key


def _topology(node: Node, kind: str, cited: tuple[str | None, str | None],
              link: str) -> str | None:
    """The write path's citation-topology rule, applied to an existing node's edge."""
    from osk.writes import citations

    try:
        citations.check_topology((node.space, node.scope), kind, cited, citing=node.title,
                             link=link)
    except EdgeError as exc:
        message = str(exc)
        return message[len(link) + 2:] if message.startswith(f"{link}: ") else message
    return None


def _hubs(vault: Vault, catalog: Catalog) -> Iterator[Finding]:
    """Every cluster folder with nodes has a hub: a node titled like the folder."""
    clusters: dict[tuple[str | None, str | None, str], list[Node]] = {}
    for node in catalog.nodes():
        if node.cluster is not None and node.space is not None:
            clusters.setdefault((node.space, node.scope, node.cluster), []).append(node)
    for (_space, _scope, cluster), members in clusters.items():
        if any(is_hub(n.path, n.title) for n in members):
            continue
        for member in members:
            yield _finding("cluster-hubs", member.path,
                           f"cluster {cluster!r} has no hub (a node titled {cluster!r} in the "
                           f"cluster folder); write the hub node or move this node out")


def _ledgers(vault: Vault, catalog: Catalog) -> Iterator[Finding]:
    if not vault.ledger_dir.is_dir():
        return
    for path in sorted(vault.ledger_dir.glob("*.jsonl")):
        rel = vault.rel(path)
        try:
            view = Ledger(vault, path.stem).read()
        except OutsideVault:
            continue  # reported once, as a link (_links_and_debris)
        except LedgerError as exc:
            yield _finding("ledger-integrity", rel, _unprefixed(str(exc), path))
            continue
        for problem in view.damaged:  # a history ledger: left out, blocking no write
            yield _finding("ledger-integrity", rel,
                           f"{problem} (left out of the history; no write waits for it)")
        for fork in view.forks():
            yield _finding("ledger-forks", rel,
                           f"{fork.describe()}; a person must decide which holds (the next "
                           f"record about this subject joins the branches)")


def _raw_records(vault: Vault, catalog: Catalog) -> Iterator[Finding]:
    root = vault.root / RAW_DIR
    if not root.is_dir():
        return
    for path in sorted(root.glob("*/*.md")):
        key, conversation = path.parent.name, path.stem
        try:
            raw.read_record(vault, key, conversation)
        except OutsideVault:
            continue  # reported once, as a link
        except OskError as exc:
            yield _from_error(vault.rel(path), exc, "raw-append-only")


def _scope_memory(vault: Vault, catalog: Catalog) -> Iterator[Finding]:
    from osk.provenance.scope_memory import CAP

    root = vault.root / MEMORY_DIR
    if not root.is_dir():
        return
    for path in sorted(root.glob("*.md")):
        try:
            size = len(vault.inside(path).read_text(encoding="utf-8"))
        except OutsideVault:
            continue  # reported once, as a link
        if size > CAP:
            yield _finding("refuse-over-cap", vault.rel(path),
                           f"the scope memory is {size:,} characters; the cap is {CAP:,}. "
                           f"Distil detail into nodes and shorten the note")


LINK_RULE, DEBRIS_RULE = "inside-the-vault", "crash-debris"


def links_and_debris(vault: Vault) -> tuple[list[str], list[str]]:
    """Every symbolic link in the vault (``.git`` aside), and every temporary file a killed
    write left outside device state: vault-relative paths, sorted. Links are never followed."""
    links: list[str] = []
    debris: list[str] = []
    pending = [vault.root]
    while pending:
        here = pending.pop()
        in_state = here != vault.root and here.relative_to(vault.root).parts[0] == STATE_DIR
        with os.scandir(here) as entries:
            for entry in entries:
                if here == vault.root and entry.name == ".git":
                    continue
                if entry.is_symlink():
                    links.append(Path(entry.path).relative_to(vault.root).as_posix())
                elif entry.is_dir():
                    pending.append(Path(entry.path))
                elif not in_state and is_temp_name(entry.name):
                    debris.append(Path(entry.path).relative_to(vault.root).as_posix())
    return sorted(links), sorted(debris)


def _links_and_debris(vault: Vault, catalog: Catalog) -> Iterator[Finding]:
    links, debris = links_and_debris(vault)
    for rel in links:
        target = os.readlink(vault.root / rel)
        yield _finding(LINK_RULE, rel,
                       f"a symbolic link (to {target}); osk reads and writes nothing through a "
                       f"link that leads out of the vault, and sync refuses to carry links "
                       f"between devices: replace it with the real file or folder, or remove it")
    for rel in debris:
        yield _finding(DEBRIS_RULE, rel,
                       "a temporary file left by a write that was killed before it finished; "
                       "osk never reads it and sync never commits it: delete it")
    stale = [vault.rel(path) for path in stale_temps(vault.state_dir)]
    if stale:
        shown = ", ".join(sorted(stale)[:5]) + (", …" if len(stale) > 5 else "")
        yield _finding(DEBRIS_RULE, STATE_DIR,
                       f"{len(stale)} temporary file(s) in device state whose writer is gone "
                       f"(killed, or stopped by a full disk): {shown}; never synced, and "
                       f"removed the next time osk opens the vault (any osk command but this)")


def _sync_conflicts(vault: Vault, catalog: Catalog) -> Iterator[Finding]:
    for rel in conflict_copies.conflict_copies(vault):
        yield _finding("sync-conflicts", rel,
                       f"a sync conflict copy of {conflict_copies.original_of(rel)}: two devices "
                       f"changed this node; merge what holds into the original and delete this "
                       f"copy")


def _workbench_titles(vault: Vault) -> set[str]:
    root = vault.root / WORKBENCH
    if not root.is_dir():
        return set()
    return {title_key(p.stem) for p in root.rglob("*.md")}


def _unprefixed(message: str, path: Path) -> str:
    prefix = f"{path}: "
    return message[len(prefix):] if message.startswith(prefix) else message


def to_json(findings: Iterable[Finding]) -> str:
    return json.dumps([f.to_dict() for f in findings], ensure_ascii=False, indent=2)


# -- the MCP surface lint -------------------------------------------------------------------
#: Verbs that belong to a person at a terminal. A call whose function name contains one of these
#: (``approve_region``, ``authority.revert``, ``confirm``…) may not appear in a server module.
AUTHORITY_VERBS = ("approve", "revert", "protect", "unprotect", "confirm", "reject", "lift",
                   "dismiss", "exclude", "include")
#: The authority ledgers: records of a person's decisions (approvals of protected regions,
#: trust confirmations, tombstones and their lifting, protected-region registrations,
#: candidate/pin/signature decisions, redactions of raw records, reviews of agents' nodes,
#: rounds kept out of recall) and the audit ledger, which only the engine's write path appends
#: to. A server module may not name any of them.
AUTHORITY_LEDGERS = frozenset({
    "approvals", "audit", "tombstones", "confirmations", "trust", "protection", "protected",
    "regions", "pins", "signatures", "redactions", "reviews", "exclusions",
})
#: Modules whose functions change authority state; the server reaches them only through the
#: engine (which decides what an agent may do), never by importing them.
AUTHORITY_MODULES = frozenset({
    "osk.authority.audit", "osk.authority.protection", "osk.authority.tombstones",
    "osk.authority.review_queue", "osk.verbs.review", "osk.verbs.exclusion",
    "osk.store.objects", "osk.surfaces.commands.authority", "osk.verbs.person",
    "osk.verbs.redaction", "osk.surfaces.commands.redact", "osk.surfaces.commands.exclude",
})
#: No tool deletes a node.
DELETE_VERBS = ("delete", "unlink", "rmtree")
_DYNAMIC = {"getattr", "setattr", "__import__", "import_module", "attrgetter", "methodcaller"}


def default_surface_paths() -> list[Path]:
    """The server modules the lint covers."""
    package = Path(__file__).resolve().parents[1]
    found = [package / "surfaces" / "server.py"]
    server_pkg = package / "surfaces" / "server"
    if server_pkg.is_dir():
        found.extend(sorted(server_pkg.rglob("*.py")))
    return [p for p in found if p.exists()]


def surface_lint(paths: Iterable[Path] | None = None) -> list[Finding]:
    """Findings for every authority verb call, authority ledger name or authority import."""
    findings: list[Finding] = []
    for path in (default_surface_paths() if paths is None else paths):
        source = Path(path).read_text(encoding="utf-8")
        tree = ast.parse(source, filename=str(path))
        findings.extend(_SurfaceVisitor(str(path)).run(tree))
    return sorted(findings)


class _SurfaceVisitor(ast.NodeVisitor):
    def __init__(self, path: str) -> None:
        self.path = path
        self.found: list[Finding] = []

    def run(self, tree: ast.AST) -> list[Finding]:
        self.visit(tree)
        return self.found

    def _add(self, node: ast.AST, rule: str, message: str) -> None:
        line = getattr(node, "lineno", 0)
        self.found.append(Finding(self.path, rule, f"line {line}: {message}"))

    def visit_Call(self, node: ast.Call) -> None:
        name = _callee_name(node.func)
        lowered = name.lower()
        for verb in AUTHORITY_VERBS:
            if verb in lowered:
                self._add(node, "surface-authority",
                          f"calls {name}(), which contains the person's verb {verb!r}; this "
                          f"belongs at a terminal (osk CLI), never on the MCP surface")
                break
        for verb in DELETE_VERBS:
            if verb in lowered:
                self._add(node, "surface-no-delete",
                          f"calls {name}(); no MCP tool deletes anything")
                break
        if name.rsplit(".", 1)[-1] in _DYNAMIC:
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                text = _constant_text(arg)
                if text and _names_authority(text):
                    self._add(node, "surface-authority",
                              f"reaches {text!r} dynamically through {name}()")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and _ledger_name(node.value) in AUTHORITY_LEDGERS:
            self._add(node, "surface-authority-ledger",
                      f"names the authority ledger {node.value!r}; only the engine's write path "
                      f"and the person's terminal commands append to it")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._check_module(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        self._check_module(node, base)
        for alias in node.names:
            self._check_module(node, f"{base}.{alias.name}")
            lowered = alias.name.lower()
            if any(verb in lowered for verb in AUTHORITY_VERBS):
                self._add(node, "surface-authority", f"imports {alias.name} from {base}")

    def _check_module(self, node: ast.AST, module: str) -> None:
        if module in AUTHORITY_MODULES:
            self._add(node, "surface-authority",
                      f"imports {module}; the server reaches authority only through the engine")


def _callee_name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        owner = _callee_name(func.value)
        return f"{owner}.{func.attr}" if owner else func.attr
    if isinstance(func, ast.Call):
        return _callee_name(func.func)
    return ""


def _constant_text(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _names_authority(text: str) -> bool:
    lowered = text.lower()
    return (any(verb in lowered for verb in AUTHORITY_VERBS)
            or lowered in AUTHORITY_MODULES
            or _ledger_name(lowered) in AUTHORITY_LEDGERS)


def _ledger_name(text: str) -> str:
    """``approvals``, ``_ledger/approvals.jsonl`` and ``approvals.jsonl`` all name one ledger."""
    name = text.strip().rsplit("/", 1)[-1]
    return name.removesuffix(".jsonl")
