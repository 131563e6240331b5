"""``osk import --from claude-code|codex``: the hosts' own memories brought in as nodes.

Where each host keeps them (the layouts are in docs/import.md, with where they come from):

- **claude-code**: ``~/.claude/projects/<project>/memory/`` (``CLAUDE_CONFIG_DIR`` replaces
  ``~/.claude``), ``<project>`` being the project's Git root with every character but a letter
  or digit turned into ``-``. One Markdown file per memory, with front matter ``name``,
  ``description`` and ``metadata.type`` (user, feedback, project, reference), and ``MEMORY.md``,
  the index. A ``user`` memory becomes a Person node; every other file a node of the project's
  scope. ``--instructions`` adds the project's ``CLAUDE.md``.
- **codex**: ``$CODEX_HOME/memories/`` (default ``~/.codex/memories/``): ``MEMORY.md`` (the
  handbook) and ``memory_summary.md`` (what Codex injects) become Domain nodes, since Codex's
  memories are not per project. ``raw_memories.md`` and ``rollout_summaries/`` are Codex's
  intermediate stages, distilled into those two, and are left out. ``--instructions`` adds the
  project's ``AGENTS.md``.

Each file is one node, titled after the host and the memory's name, citing the file as
``[[file:NAME]]`` resolved in its own folder (``Engine.sibling(files=…)``), so the citation is
bound to the file's hash and a later change of the file opens a recheck candidate like any
other citation. Running the import again writes only what changed: a node whose body is the
file's current text is left alone, a changed file updates its node in place (which re-cites
the file at its new hash). Every write goes through the write path, so the secret filter,
tombstones and the person's protected regions apply as to an agent's write.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from osk.calls.request import NewNode, NodeEdit
from osk.errors import NodeNotFound, OskError
from osk.store.fsutil import sha256_bytes

if TYPE_CHECKING:
    from osk.calls.results import NodeRead
    from osk.engine.core import Engine

HOSTS = ("claude-code", "codex")
LABELS = {"claude-code": "Claude Code", "codex": "Codex"}
INSTRUCTIONS = {"claude-code": "CLAUDE.md", "codex": "AGENTS.md"}
CODEX_FILES = ("MEMORY.md", "memory_summary.md")
NAMES = {"MEMORY.md": "index", "memory_summary.md": "summary"}  # files with no front matter
DRAFTER = "osk-import"
SUMMARY_CHARS = 280


@dataclass(frozen=True)
class Source:
    """One host memory file and the node it becomes."""

    path: Path
    folder: Path        # what its [[file:NAME]] citation resolves against
    title: str
    summary: str
    body: str
    space: str          # Scope | Domain | Person
    cluster: str
    sha: str            # the file's sha256 (what the citation binds)

    @property
    def link(self) -> str:
        return f"[[file:{self.path.relative_to(self.folder).as_posix()}]]"


@dataclass(frozen=True)
class Planned:
    source: Source
    action: str         # create | update | unchanged
    path: str = ""      # the node's vault path once written


def memory_folder(host: str, project: Path, env: dict[str, str] | None = None) -> Path:
    """Where ``host`` keeps its memories for ``project``."""
    env = dict(os.environ if env is None else env)
    home = Path(env.get("HOME") or Path.home())
    if host == "claude-code":
        base = Path(env["CLAUDE_CONFIG_DIR"]) if env.get("CLAUDE_CONFIG_DIR") else home / ".claude"
        return base / "projects" / re.sub(r"[^A-Za-z0-9]", "-", str(project)) / "memory"
    if host == "codex":
        base = Path(env["CODEX_HOME"]) if env.get("CODEX_HOME") else home / ".codex"
        return base / "memories"
    raise OskError(f"--from {host!r}: osk imports from {' or '.join(HOSTS)}")


def sources(host: str, folder: Path, project: Path, scope: str, *,
            instructions: bool) -> list[Source]:
    """The files to import, in a stable order; refuses a folder that is not there. Titles and
    clusters of Scope nodes name the scope: titles are unique across the vault."""
    if not folder.is_dir():
        raise OskError(f"no {host} memory folder at {folder}; give the right one with --source "
                       f"DIR (nothing was imported)")
    files = (sorted(p for p in folder.glob("*.md") if p.is_file()) if host == "claude-code"
             else [folder / name for name in CODEX_FILES if (folder / name).is_file()])
    found = [_source(host, path, folder, scope) for path in files]
    if instructions:
        extra = project / INSTRUCTIONS[host]
        if extra.is_file():
            found.append(_instructions(host, extra, project, scope))
    return found


def _where(host: str, space: str, scope: str) -> tuple[str, str]:
    """(cluster, title suffix) of a host's nodes in ``space``."""
    label = LABELS[host]
    if space == "Scope":
        return _title(f"{label} memory of {scope}"), f" ({scope})"
    if space == "Person":
        return _title(f"{label} memory about the person"), ""
    return _title(f"{label} memories"), ""


def _source(host: str, path: Path, folder: Path, scope: str) -> Source:
    data = path.read_bytes()
    text = _decoded(path, data)
    front, body = _front_matter(text)
    name = front.get("name") or NAMES.get(path.name, path.stem)
    space = "Domain" if host == "codex" else (
        "Person" if front.get("type") == "user" else "Scope")
    cluster, suffix = _where(host, space, scope)
    title = _title(f"{LABELS[host]} memory {name}{suffix}")
    summary = (front.get("description") or _first_line(body)
               or f"{LABELS[host]} memory file {path.name}")
    return Source(path, folder, title, _short(summary), body.strip() + "\n", space, cluster,
                  sha256_bytes(data))


def _instructions(host: str, path: Path, project: Path, scope: str) -> Source:
    data = path.read_bytes()
    text = _decoded(path, data)
    cluster, suffix = _where(host, "Scope", scope)
    return Source(path, project, _title(f"{path.name}{suffix}"),
                  _short(f"The project's {path.name}: standing instructions for {LABELS[host]}."),
                  text.strip() + "\n", "Scope", cluster, sha256_bytes(data))


def _decoded(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise OskError(f"{path} is not UTF-8 text ({exc}); nothing was imported") from None


def _front_matter(text: str) -> tuple[dict[str, str], str]:
    """``name``, ``description`` and ``type`` (top level or under ``metadata``) of a memory
    file's front matter, read line by line (the files are the host's, not osk's contract)."""
    if not text.startswith("---\n"):
        return {}, text
    end = text.find("\n---", 4)
    if end < 0:
        return {}, text
    found: dict[str, str] = {}
    for line in text[4:end].splitlines():
        key, sep, value = line.strip().partition(":")
        if sep and key in ("name", "description", "type") and value.strip():
            found[key] = value.strip().strip("\"'")
    return found, text[end + 4:].lstrip("\n")


def _first_line(body: str) -> str:
    return next((line.strip("# ").strip() for line in body.splitlines() if line.strip()), "")


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SUMMARY_CHARS else text[:SUMMARY_CHARS - 1] + "…"


def _title(text: str) -> str:
    """A portable node title: the characters titles may not hold become spaces."""
    return " ".join(re.sub(r"[/\\:*?\"<>|#^\[\]]", " ", text).split())


# -- writing --------------------------------------------------------------------------------
def plan(engine: Engine, found: Iterable[Source]) -> list[Planned]:
    """What a run would do with each source: create its node, update it (the file's hash is
    not the one its citation recorded), or leave it unchanged."""
    result = []
    for source in found:
        try:
            node = engine.read_node(source.title)
        except NodeNotFound:
            result.append(Planned(source, "create"))
            continue
        cited = engine.rechecks.citations(node.id)
        recorded = {pair.target.link: pair.target_hash
                    for pair in (cited.pairs.values() if cited else ())}
        same = recorded.get(source.link) == source.sha
        result.append(Planned(source, "unchanged" if same else "update"))
    return result


def write(engine: Engine, planned: Iterable[Planned], scope: str, cwd: Path) -> list[Planned]:
    """Write each planned create or update; returns them with their node paths."""
    done = []
    for item in planned:
        if item.action == "unchanged":
            done.append(item)
            continue
        source = item.source
        writer = engine.sibling(
            cwd=cwd, scope=scope, files=source.folder)
        _hub(writer, source)
        if item.action == "create":
            result = writer.create_node(NewNode(
                source.title, source.summary, source.body, space=source.space,
                cluster=source.cluster, drafter=DRAFTER, derived_from=[source.link]))
        else:
            page = _complete_read(writer, source.title)
            # the file as it is now was read, so the update closes its recheck candidate
            writer.read_raw(source.link[2:-2])
            reopened = [c.id for c in writer.recheck().candidates if c.citing_id == page.id]
            result = writer.update_node(source.title, NodeEdit(
                body=source.body, expect_hash=page.hash, summary=source.summary,
                derived_from=[source.link], recheck_of=reopened))
        done.append(Planned(source, item.action, result.path))
    return done


def _complete_read(engine: Engine, title: str) -> NodeRead:
    page = engine.read_node(title)
    while page.next_start is not None:
        page = engine.read_node(title, start=page.next_start)
    return page


def _hub(engine: Engine, source: Source) -> None:
    """The cluster's hub, which the write path wants before its other nodes."""
    try:
        engine.read_node(source.cluster)
    except NodeNotFound:
        engine.create_node(NewNode(
            source.cluster, "Memories a host kept itself, brought in by osk import --from.",
            "Nodes `osk import --from` brought in from a host's own memory files; each cites "
            "its file.\n", space=source.space, cluster=source.cluster, drafter=DRAFTER))
