"""`osk import FILE.jsonl` and `osk import --from HOST`: nodes loaded through the validated write
path (``osk.verbs.importer``, ``osk.verbs.host_memory``). Handlers import them lazily: building
the parser must stay cheap.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from osk.surfaces.commands.common import (
    Progress,
    add_json_flag,
    add_scope_flag,
    json_text,
    print_json,
)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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


def _open_import_file(name: str) -> BinaryIO:
    """The JSONL file (or standard input, spooled to a temporary file: it is read twice),
    checked to be UTF-8 text throughout before anything is written."""
    import codecs
    import shutil
    import tempfile

    from osk.errors import OskError

    try:
        if name == "-":
            handle: BinaryIO = tempfile.TemporaryFile()  # noqa: SIM115 - the caller closes it
            shutil.copyfileobj(sys.stdin.buffer, handle)
        else:
            handle = open(name, "rb")  # noqa: SIM115 - the caller closes it
        decoder = codecs.getincrementaldecoder("utf-8")()
        handle.seek(0)
        while chunk := handle.read(1 << 20):
            decoder.decode(chunk)
        decoder.decode(b"", final=True)
        handle.seek(0)
        return handle
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise OskError(f"cannot read {name}: {reason}; give a JSONL file in UTF-8 (one node "
                       f"per line) or - for standard input; nothing was imported") from None


def _texts(handle: BinaryIO) -> Iterator[str]:
    """The file's lines from its start, one at a time (``\n``, ``\r\n`` or ``\r`` ends one)."""
    import io

    handle.seek(0)
    text = io.TextIOWrapper(handle, encoding="utf-8", newline=None)
    try:
        for raw in text:
            yield raw.rstrip("\n")
    finally:
        text.detach()  # the handle stays open for the next pass


def run_import(args: argparse.Namespace) -> int:
    from osk.engine.vaults import open_vault
    from osk.errors import OskError
    from osk.verbs.importer import Importer, Line, Rejected, Report, parse_lines

    if args.from_host:
        if args.file:
            raise OskError("give a JSONL FILE or --from HOST, not both; nothing was imported")
        return run_host_import(args)
    if not args.file:
        raise OskError("give a JSONL FILE ('-' for stdin) or --from claude-code|codex")
    if args.source or args.instructions or args.dry_run or args.scope:
        raise OskError("--source, --instructions, --dry-run and --scope go with --from; a JSONL "
                       "file names each line's scope itself")
    with _open_import_file(args.file) as handle:
        # Two passes over the file, so neither its text nor its lines are held: the first
        # reports every unreadable line before anything is written, the second writes.
        report = Report()
        total = 0
        for item, extra in parse_lines(_texts(handle)):
            if isinstance(item, Rejected):
                report.rejected.append(item)
            else:
                report.ignored_keys |= extra
                total += 1
        unreadable = set(report.rejected)
        for item in report.rejected:
            print(f"line {item.number}: rejected: {item.reason}", file=sys.stderr)
        if report.ignored_keys:
            print(f"ignored unknown keys: {', '.join(sorted(report.ignored_keys))}",
                  file=sys.stderr)

        def lines() -> Iterator[Line]:
            for item, _ in parse_lines(_texts(handle)):
                if isinstance(item, Line):
                    yield item
                elif item not in unreadable:  # the file changed between the passes
                    report.rejected.append(item)

        vault = open_vault(args.vault)
        importer = Importer(vault, cwd=Path.cwd(), drafter=args.drafter)
        bar = Progress(sys.stderr)
        importer.run(lines(), progress=bar.update, report=report, total=total)
    bar.close()
    for item in report.rejected:
        if item not in unreadable:
            print(f"line {item.number}: rejected: {item.reason}", file=sys.stderr)
    importer.finish()
    if args.json:  # drawn as written: a dict a node, and the whole text, were never held
        print_json({
            "created": ({"line": n, "title": t, "path": p} for n, t, p in report.created),
            "hubs": report.hubs,
            "rejected": [{"line": r.number, "reason": r.reason} for r in report.rejected],
        })
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
