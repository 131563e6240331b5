"""`osk search QUERY`, `osk embed` and `osk import FILE.jsonl`.

Both go through the engine (so search applies the session's scope isolation, locality and
markers exactly as the MCP tool does, and import writes through the validated write path).
The engine is imported inside the handlers: building the parser must stay cheap.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TextIO

from osk.surfaces.commands.common import add_json_flag, add_scope_flag, json_text


def register(sub: argparse._SubParsersAction) -> None:
    for register_command in COMMANDS.values():
        register_command(sub)


def _register_search(sub: argparse._SubParsersAction) -> None:
    search = sub.add_parser("search", help="ranked nodes and raw rounds for a query (what the "
                                           "search tool sees)")
    search.add_argument("query", help="words, or a node's title")
    search.add_argument("--k", type=int, help="how many hits (default 8, at most 50)")
    search.add_argument("--as-of", dest="as_of",
                        help="the vault as it stood at this time, for claims valid then "
                             "(2026-03-01 or a full timestamp)")
    search.add_argument("--kind", choices=("all", "nodes", "rounds"), default="all",
                        help="nodes and raw rounds (default), nodes only, or rounds only")
    add_scope_flag(search)
    add_json_flag(search)
    search.set_defaults(handler=run_search)


def _register_embed(sub: argparse._SubParsersAction) -> None:
    embed = sub.add_parser("embed", help="give every node its semantic-search vector now "
                                         "(the MCP server does this in the background)")
    embed.set_defaults(handler=run_embed)


def _register_reindex(sub: argparse._SubParsersAction) -> None:
    reindex = sub.add_parser("reindex", help="rebuild the search index from the node files "
                                             "(the files are the source of truth), with progress")
    add_json_flag(reindex)
    reindex.set_defaults(handler=run_reindex)


def _register_import(sub: argparse._SubParsersAction) -> None:
    load = sub.add_parser("import", help="load nodes from a JSON Lines file through the write "
                                         "path; rejected lines are reported, the rest load")
    load.add_argument("file", nargs="?",
                      help="JSON Lines: title, summary, body, space, scope, optional cluster, "
                           "derived_from, valid_from, valid_to, supersedes ('-' reads stdin)")
    load.add_argument("--drafter", default="osk-import",
                      help="recorded as each node's drafter (default osk-import)")
    load.add_argument("--from", dest="from_host", choices=("claude-code", "codex"),
                      help="instead of a file: this host's own memory files, each a node "
                           "citing its file (docs/import.md)")
    load.add_argument("--source", help="with --from: the memory folder (default: where the "
                                       "host keeps this project's)")
    load.add_argument("--instructions", action="store_true",
                      help="with --from: also the project's CLAUDE.md / AGENTS.md")
    load.add_argument("--dry-run", action="store_true",
                      help="with --from: show what would be written, write nothing")
    add_scope_flag(load)
    add_json_flag(load)
    load.set_defaults(handler=run_import)


# Each command alone, so a run of `osk search` builds its own parser and not the others' (the
# parser of `import` alone costs a fresh search a few ms: docs/performance.md).
COMMANDS = {"search": _register_search, "embed": _register_embed,
            "reindex": _register_reindex, "import": _register_import}


# -- search -------------------------------------------------------------------------------------
def run_search(args: argparse.Namespace) -> int:
    from osk.reads import quick_search

    result = None
    if args.as_of is None:  # the engine's answer from the persisted index, when it holds
        result = quick_search.search(args.vault, Path.cwd(), args.scope, args.query, args.k,
                                     args.kind)
    if result is None:
        result = _engine_search(args)
    if args.json:
        print(json_text({"scope": result.scope, "query": result.query,
                         "hits": [_hit(hit) for hit in result.hits]}))
        return 0
    if not result.hits:
        print(f"Nothing matches {args.query!r} (scope {result.scope}).", file=sys.stderr)
        return 0
    for rank, hit in enumerate(result.hits, start=1):
        markers = f"  [{', '.join(hit.markers)}]" if hit.markers else ""
        print(f"{rank:2}. {hit.title}  ({hit.score:.3f}){markers}")
        print(f"    {hit.path}")
        print(f"    {hit.summary}")
    return 0


def _engine_search(args: argparse.Namespace) -> Any:
    from osk.engine.core import Engine
    from osk.store.fsutil import collector_paused

    # One command that loads the vault's caches and exits: it makes no garbage cycles worth
    # collecting, and the collector's passes over 50,000 nodes' objects cost about 0.7 s.
    with collector_paused():
        engine = Engine.open(args.vault, cwd=Path.cwd(), scope=args.scope, actor="user")
        wanted = {} if args.k is None else {"k": args.k}  # the engine owns default and cap
        return engine.search(args.query, as_of=args.as_of, kind=args.kind, **wanted)


def _hit(hit: Any) -> dict[str, Any]:
    return {"title": hit.title, "path": hit.path, "id": hit.id, "summary": hit.summary,
            "updated": hit.updated, "score": hit.score, "markers": list(hit.markers),
            "space": hit.space, "scope": hit.scope, "match": hit.match}


# -- embed --------------------------------------------------------------------------------------
def run_embed(args: argparse.Namespace) -> int:

    from osk.engine.core import Engine
    from osk.search import semantic

    state = semantic.status()
    if not state.on:
        hint = f"; to turn it on: {state.fix}" if state.fix else ""
        print(f"Error: the semantic channel is {state.text}{hint}", file=sys.stderr)
        return 1
    engine = Engine.open(args.vault, cwd=Path.cwd(), actor="user")
    missing, seconds = _with_progress("embedding", engine.embed_nodes)
    done = f"every node has its vector ({seconds:.1f} s)"
    print(done if not missing else f"{missing} node(s) could not be embedded (changed or "
                                   f"unreadable while this ran; run it again)")
    left, seconds = _with_progress("embedding rounds", engine.embed_rounds)
    print(f"every raw round has its vectors ({seconds:.1f} s)" if not left else
          f"{left} raw round(s) could not be embedded (run it again)")
    return 0 if not missing and not left else 1


def _with_progress(label: str, work: Any) -> tuple[Any, float]:
    """``work(progress=...)`` with a progress bar on stderr: (its result, seconds taken)."""
    import time

    bar = Progress(sys.stderr, label)
    started = time.monotonic()
    result = work(progress=bar.update)
    bar.close()
    return result, time.monotonic() - started


# -- reindex ------------------------------------------------------------------------------------
def run_reindex(args: argparse.Namespace) -> int:
    from osk.engine.core import Engine

    engine = Engine.open(args.vault, cwd=Path.cwd(), actor="user")
    count, seconds = _with_progress("indexing", engine.reindex)
    if args.json:
        print(json_text({"indexed": count, "seconds": round(seconds, 3)}))
    else:
        print(f"indexed {count} node(s) from the files ({seconds:.1f} s)")
    return 0


# -- import -------------------------------------------------------------------------------------
def _read_import_file(name: str) -> list[str]:
    from osk.errors import OskError

    try:
        return Path(name).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise OskError(f"cannot read {name}: {reason}; give a JSONL file in UTF-8 (one node "
                       f"per line) or - for standard input; nothing was imported") from None


def run_import(args: argparse.Namespace) -> int:
    from osk.errors import OskError
    from osk.store.vault import locate
    from osk.verbs.importer import Importer, Report, read_lines

    if args.from_host:
        if args.file:
            raise OskError("give a JSONL FILE or --from HOST, not both; nothing was imported")
        return run_host_import(args)
    if not args.file:
        raise OskError("give a JSONL FILE ('-' for stdin) or --from claude-code|codex")
    if args.source or args.instructions or args.dry_run or args.scope:
        raise OskError("--source, --instructions, --dry-run and --scope go with --from; a JSONL "
                       "file names each line's scope itself")
    if args.file == "-":
        texts = sys.stdin.read().splitlines()
    else:
        texts = _read_import_file(args.file)
    lines, rejected, unknown = read_lines(texts)
    report = Report(rejected=list(rejected), ignored_keys=unknown)
    for item in rejected:
        print(f"line {item.number}: rejected: {item.reason}", file=sys.stderr)
    if unknown:
        print(f"ignored unknown keys: {', '.join(sorted(unknown))}", file=sys.stderr)
    vault = locate(args.vault)
    importer = Importer(vault, cwd=Path.cwd(), drafter=args.drafter)
    bar = Progress(sys.stderr)
    importer.run(lines, progress=bar.update, report=report)
    bar.close()
    unreadable = set(rejected)
    for item in report.rejected:
        if item not in unreadable:
            print(f"line {item.number}: rejected: {item.reason}", file=sys.stderr)
    importer.finish()
    if args.json:
        print(json_text({
            "created": [{"line": n, "title": t, "path": p} for n, t, p in report.created],
            "hubs": report.hubs,
            "rejected": [{"line": r.number, "reason": r.reason} for r in report.rejected],
        }))
    else:
        print(f"Imported {len(report.created)} node(s)"
              + (f" and {len(report.hubs)} cluster hub(s)" if report.hubs else "")
              + f"; rejected {len(report.rejected)} line(s).")
    return 1 if report.rejected else 0


def run_host_import(args: argparse.Namespace) -> int:
    from osk.engine.core import Engine
    from osk.verbs import host_memory

    engine = Engine.open(args.vault, cwd=Path.cwd(), scope=args.scope)
    project = engine.session.repo_root or Path.cwd()
    folder = (Path(args.source).expanduser() if args.source
              else host_memory.memory_folder(args.from_host, project))
    found = host_memory.sources(args.from_host, folder, project, engine.scope,
                                instructions=args.instructions)
    planned = host_memory.plan(engine, found)
    if not args.dry_run:
        planned = host_memory.write(engine, planned, engine.scope, Path.cwd())
    if args.json:
        print(json_text([{"action": p.action, "title": p.source.title, "space": p.source.space,
                          "scope": engine.scope if p.source.space == "Scope" else None,
                          "source": str(p.source.path), "sha256": p.source.sha,
                          "path": p.path} for p in planned]))
        return 0
    verb = "Would import" if args.dry_run else "Imported"
    for item in planned:
        where = f"{item.source.space}/{engine.scope}" if item.source.space == "Scope" \
            else item.source.space
        print(f"{item.action:9} {where}: {item.source.title}  <- {item.source.path} "
              f"(sha256 {item.source.sha[:12]})")
    counts = {a: sum(p.action == a for p in planned) for a in ("create", "update", "unchanged")}
    print(f"{verb} from {args.from_host} ({folder}): {counts['create']} new, "
          f"{counts['update']} changed, {counts['unchanged']} unchanged.")
    return 0


class Progress:
    """A one-line progress bar on a terminal; a line per tenth of the way otherwise."""

    WIDTH = 30

    def __init__(self, stream: TextIO, label: str = "importing") -> None:
        self.stream = stream
        self.label = label
        self.tty = stream.isatty()
        self.shown = -1

    def update(self, done: int, total: int) -> None:
        if total <= 0:
            return
        share = done / total
        if self.tty:
            filled = int(share * self.WIDTH)
            self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (self.WIDTH - filled)}] "
                              f"{done}/{total}")
            self.stream.flush()
        elif int(share * 10) > self.shown:
            self.shown = int(share * 10)
            print(f"{self.label}: {done}/{total} ({share:.0%})", file=self.stream)

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()
