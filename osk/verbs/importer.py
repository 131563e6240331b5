"""Bulk loading of nodes from JSON Lines (`osk import`), through the normal write path.

Each line is one node::

    {"title": "...", "summary": "...", "body": "...", "space": "scope|domain|person",
     "scope": "project (Scope nodes only)", "cluster": "optional folder",
     "derived_from": ["Title", "_raw/KEY/CONV#Round 2"],
     "valid_from": "...", "valid_to": "...", "supersedes": "Title"}

Every node is written by ``Engine.create_node``, so each one passes the same checks an agent's
write does (portable unique title, contract, edges, tombstones, protected regions) and leaves
the same audit record. A line that fails is reported with its reason and the rest load.

The bulk path: one engine and its siblings (one per destination scope) share one catalog,
recheck table and freshness check, so no write pays to discover another's; lines are written
in batches (``Engine.batch``) that hold the mutation lock for at most ``BATCH_LINES`` lines or
``BATCH_SECONDS`` and fsync once at the end of each, letting other writers in between.

Lines may cite nodes that appear later in the file: a line whose ``derived_from`` or
``supersedes`` names a title that does not exist yet waits and is retried once the others are
in; only what still fails then is rejected. A node goes in its line's ``cluster``, or in a
per-destination cluster ``imports`` (``imports 2``, ``imports 3`` … where the title is taken);
a new cluster's hub is written by the same create_node call as its first node.

This lives with search because search owns `osk import` (it loads the eval sets); it uses only
the engine's public methods.
"""

from __future__ import annotations

import json
import time
from array import array
from collections.abc import Callable, Iterable, Iterator, Sized
from contextlib import ExitStack
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osk.calls.request import NewNode
from osk.errors import EdgeError, NodeNotFound, OskError
from osk.store.node import title_from_path
from osk.store.titles import title_key

if TYPE_CHECKING:
    from osk.engine.core import Engine
    from osk.store.vault import Vault

SPACE_NAMES = {"scope": "Scope", "domain": "Domain", "person": "Person"}
# A line names a node's fields as create_node does (``NewNode``), but for those the import sets:
# the drafter (--drafter), a new cluster's hub, and conflicts (which a line has never carried).
SET_BY_IMPORT = frozenset({"drafter", "hub_summary", "conflicts"})
KNOWN_KEYS = frozenset(f.name for f in fields(NewNode)) - SET_BY_IMPORT
REQUIRED = ("title", "summary", "body", "space")  # non-empty strings
# The other keys whose value is one string, in NewNode's order (so is the first refusal).
TEXT_KEYS = tuple(f.name for f in fields(NewNode) if f.name in KNOWN_KEYS
                  and f.name not in (*REQUIRED, "scope", "derived_from"))
IGNORED_KEYS = {"id", "lang"}  # carried by labelled eval sets; not node data
DEFAULT_CLUSTER = "imports"
BATCH_LINES = 500  # lines per hold of the mutation lock (and per fsync)
BATCH_SECONDS = 1.0  # ... or this long, whichever comes first: other writers wait meanwhile
HUB_SUMMARY = "Nodes loaded in bulk by osk import; move them into better clusters."


@dataclass(frozen=True)
class Line:
    """A line's node as it will be written, but for what the import sets: ``cluster`` is empty
    when the line names none (the space's default cluster), ``drafter`` empty (--drafter)."""

    number: int
    node: NewNode


@dataclass(frozen=True)
class Rejected:
    number: int
    reason: str


class Created:
    """The nodes an import created, in order, each ``(line, title, path)``: held as the line's
    number and the path (the catalog's string), the title read from the path, as a node's
    title is. A tuple and a title string a node took 170 bytes (17 MB at 100,000)."""

    def __init__(self) -> None:
        self._lines = array("L")
        self._paths: list[str] = []

    def add(self, number: int, path: str) -> None:
        self._lines.append(number)
        self._paths.append(path)

    def __len__(self) -> int:
        return len(self._paths)

    def __iter__(self) -> Iterator[tuple[int, str, str]]:
        for number, path in zip(self._lines, self._paths, strict=True):
            yield number, title_from_path(path), path


@dataclass
class Report:
    created: Created = field(default_factory=Created)
    rejected: list[Rejected] = field(default_factory=list)
    hubs: list[str] = field(default_factory=list)  # paths of cluster hubs created
    ignored_keys: set[str] = field(default_factory=set)


# -- reading ------------------------------------------------------------------------------------
def read_lines(texts: Iterable[str]) -> tuple[list[Line], list[Rejected], set[str]]:
    """Parse JSON Lines; blank lines are skipped. Returns lines, rejections, unknown keys."""
    lines: list[Line] = []
    rejected: list[Rejected] = []
    unknown: set[str] = set()
    for item, extra in parse_lines(texts):
        if isinstance(item, Rejected):
            rejected.append(item)
        else:
            unknown |= extra
            lines.append(item)
    return lines, rejected, unknown


def parse_lines(texts: Iterable[str]) -> Iterator[tuple[Line | Rejected, set[str]]]:
    """Each non-blank line parsed, one at a time (``osk import`` streams a file through this
    twice rather than hold it): the line, or why it is refused, and its unknown keys."""
    for number, raw in enumerate(texts, start=1):
        if not raw.strip():
            continue
        try:
            data = json.loads(raw)
        except ValueError as exc:
            yield Rejected(number, f"not valid JSON ({exc})"), set()
            continue
        try:
            yield _line(number, data)
        except ValueError as exc:
            yield Rejected(number, str(exc)), set()


def _line(number: int, data: Any) -> tuple[Line, set[str]]:
    if not isinstance(data, dict):
        raise ValueError("a line must be a JSON object with title, summary, body and space")
    for key in REQUIRED:
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise ValueError(f"{key!r} is missing or not a non-empty string")
    space = SPACE_NAMES.get(data["space"].strip().lower())
    if space is None:
        raise ValueError(f"space {data['space']!r} is not one of scope, domain, person")
    scope = data.get("scope")
    if space == "Scope" and (not isinstance(scope, str) or not scope.strip()):
        raise ValueError("a Scope node needs 'scope': the project it belongs to")
    if space != "Scope" and scope not in (None, ""):
        raise ValueError(f"only Scope nodes have a scope; this {space} node names {scope!r}")
    derived = data.get("derived_from") or []
    if isinstance(derived, str):
        derived = [derived]
    if not isinstance(derived, list) or not all(isinstance(d, str) for d in derived):
        raise ValueError("'derived_from' must be a list of titles or raw coordinates")
    optional: dict[str, Any] = {}  # each a string or None, checked below
    for key in TEXT_KEYS:
        value = data.get(key)
        if value is not None and not isinstance(value, str):
            raise ValueError(f"{key!r} must be a string")
        optional[key] = value or None
    cluster = optional.pop("cluster", None) or ""
    line = Line(number, NewNode(**{key: data[key] for key in REQUIRED if key != "space"},
                                space=space, cluster=cluster, drafter="",
                                scope=scope if space == "Scope" else None,
                                derived_from=tuple(derived), **optional))
    return line, set(data) - KNOWN_KEYS - IGNORED_KEYS


# -- loading ------------------------------------------------------------------------------------
class Importer:
    """Writes lines through one engine per destination scope (Domain and Person share one)."""

    def __init__(self, vault: Vault, *, cwd: Path, drafter: str = "osk-import") -> None:
        self.vault = vault
        self.cwd = cwd
        self.drafter = drafter
        self._engines: dict[str | None, Engine] = {}
        self._clusters: dict[tuple[str, str | None], str] = {}
        self._batch: ExitStack | None = None
        self._batch_lines = 0
        self._batch_since = 0.0

    def run(self, lines: Iterable[Line], progress: Callable[[int, int], None] | None = None,
            report: Report | None = None, *, total: int | None = None) -> Report:
        """Write ``lines``, read once, in order (a file streams through: only the lines that
        wait for a later one are held); ``progress(done, total)`` after each, ``total``
        defaulting to ``len(lines)``."""
        if total is None:
            total = len(lines) if isinstance(lines, Sized) else 0
        try:
            return self._run(lines, progress, report or Report(), total)
        finally:
            self._end_batch()

    def _run(self, lines: Iterable[Line], progress: Callable[[int, int], None] | None,
             report: Report, total: int) -> Report:
        waiting: Iterable[Line] = lines
        done = 0
        while True:
            deferred: list[tuple[Line, OskError]] = []
            tried = 0
            for line in waiting:
                tried += 1
                self._in_batch()
                try:
                    report.created.add(line.number, self._write(line, report))
                except (NodeNotFound, EdgeError) as exc:
                    deferred.append((line, exc))  # may cite a line further down the file
                    continue
                except OskError as exc:
                    report.rejected.append(Rejected(line.number, str(exc)))
                done += 1
                if progress:
                    progress(done, total)
            if not deferred:
                break
            if len(deferred) == tried:  # no progress: what is left really fails
                for line, error in deferred:
                    report.rejected.append(Rejected(line.number, str(error)))
                    done += 1
                    if progress:
                        progress(done, total)
                break
            waiting = [line for line, _ in deferred]
        report.rejected.sort(key=lambda r: r.number)
        return report

    def _write(self, line: Line, report: Report) -> str:
        """Write ``line``'s node; returns its path."""
        node = line.node
        engine = self._engine(node.scope)
        result = engine.create_node(replace(
            node, cluster=node.cluster or self._default_cluster(engine, node),
            drafter=self.drafter, hub_summary=HUB_SUMMARY))
        if result.hub:  # a new cluster: create_node wrote its hub first
            report.hubs.append(result.hub)
        return result.path

    def _engine(self, scope: str | None) -> Engine:
        engine = self._engines.get(scope)
        if engine is None:
            engine = self._engines[scope] = self._root().sibling(cwd=self.cwd, scope=scope)
        return engine

    def _root(self) -> Engine:
        """The first engine; every destination's engine is a sibling of it."""
        if "" not in self._engines:
            from osk.engine.core import Engine

            engine = self._engines[""] = Engine.open(self.vault, cwd=self.cwd, actor="user")
            engine.catalog.bulk_load()  # every entry put anew between two saves, few read again
        return self._engines[""]

    def _in_batch(self) -> None:
        """Be inside a batch for the next line: a new one when none is open or it is full."""
        if self._batch is not None and (self._batch_lines >= BATCH_LINES or
                                        time.monotonic() - self._batch_since >= BATCH_SECONDS):
            self._end_batch()
        if self._batch is None:
            stack = ExitStack()
            stack.enter_context(self._root().batch())
            self._batch, self._batch_lines, self._batch_since = stack, 0, time.monotonic()
        self._batch_lines += 1

    def _end_batch(self) -> None:
        batch, self._batch = self._batch, None
        if batch is not None:
            batch.close()

    def _default_cluster(self, engine: Engine, node: NewNode) -> str:
        """``imports`` in this destination, or the first ``imports N`` whose title is free."""
        key = (node.space, title_key(node.scope) if node.scope else None)
        if key in self._clusters:
            return self._clusters[key]
        engine.refresh()
        base = f"{node.space}/{node.scope}" if node.scope else node.space
        number = 1
        while True:
            name = DEFAULT_CLUSTER if number == 1 else f"{DEFAULT_CLUSTER} {number}"
            holders = engine.catalog.paths_with_title(name)
            # a name picked for another destination earlier in this run is taken, even while
            # that destination's first line waits (deferred) and its hub is not written yet
            promised = title_key(name) in {title_key(n) for n in self._clusters.values()}
            mine = any(h == f"{base}/{name}/{name}.md" for h in holders)
            if mine or (not holders and not promised):
                self._clusters[key] = name
                return name
            number += 1

    def finish(self) -> None:
        """Leave the catalog snapshot and the search index whole on disk (``Engine.persist``),
        so the next process, search or server, starts from them instead of re-reading the
        import."""
        if self._engines:
            self._root().persist()
            return
        from osk.search import SearchIndex

        index = SearchIndex(self.vault)  # nothing was written: only bring the index up to date
        index.refresh()
        index.flush()
