"""`osk validate`, `osk overview`, `osk read NODE`.

Handlers import the engine and the validators lazily: building the parser must stay cheap.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from osk.surfaces.commands.common import add_json_flag, add_scope_flag, json_text

if TYPE_CHECKING:
    from osk.calls.results import NodeRead, Overview
    from osk.engine.core import Engine


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    check = sub.add_parser("validate", help="check the whole vault; exit 1 when anything is "
                                            "found (changes nothing)")
    add_json_flag(check)
    check.set_defaults(handler=run_validate)

    overview = sub.add_parser("overview", help="scope binding, counts, recheck and conflict "
                                               "candidates, pending evictions, ledger forks")
    add_scope_flag(overview)
    add_json_flag(overview)
    overview.set_defaults(handler=run_overview)

    read = sub.add_parser("read", help="print a node by title or id")
    read.add_argument("node", help="the node's title or id")
    read.add_argument("--section", help="only this heading's section")
    read.add_argument("--start", type=int, help="character offset to start at")
    read.add_argument("--length", type=int, help="characters to print (at most 4,000)")
    read.add_argument("--as-of", dest="as_of",
                      help="the version served at this time (2026-03-01 or a full timestamp)")
    add_scope_flag(read)
    add_json_flag(read)
    read.set_defaults(handler=run_read)


# -- handlers ------------------------------------------------------------------------------
def run_validate(args: argparse.Namespace) -> int:
    from osk.engine.vaults import open_vault
    from osk.verbs import validate

    findings = validate.run(open_vault(args.vault))
    if args.json:
        print(validate.to_json(findings))
    else:
        for finding in findings:
            print(finding)
        if not findings:
            print("No findings.", file=sys.stderr)
    return 1 if findings else 0


def run_overview(args: argparse.Namespace) -> int:
    engine = _engine(args, look=False)  # the overview's own refresh is the one walk
    found = engine.overview()
    if args.json:
        print(json_text(found))
        return 0
    print("\n".join(overview_lines(found)))
    return 0


def run_read(args: argparse.Namespace) -> int:
    if args.json:  # with the related nodes the first page lists
        print(json_text(_read_shown(args, related=True)))
        return 0
    found = _read_shown(args, related=False)
    print(f"# {found.title}  ({found.path})")
    print(f"{found.summary}")
    print(f"id {found.id} · updated {found.updated} · {found.author}/{found.drafter} · "
          f"{found.trust}" + (f" · markers: {', '.join(found.markers)}" if found.markers else ""))
    for link in found.derived_from:
        print(f"  derived-from {link}")
    print()
    sys.stdout.write(found.text if found.text.endswith("\n") or not found.text
                     else found.text + "\n")
    if not found.complete:
        more = f"; continue with --start {found.next_start}" if found.next_start else ""
        print(f"\n[characters {found.start}-{found.end} of {found.total_chars}{more}]",
              file=sys.stderr)
    return 0


def _read_shown(args: argparse.Namespace, *, related: bool) -> NodeRead:
    """The read to print (``related``: with the related nodes, as ``--json`` prints it): from
    the stores on disk and the node's file when they can vouch for it
    (``osk.reads.quick_read``), else the engine's."""
    from osk.reads import quick_read

    found = None
    if args.as_of is None:
        found = quick_read.read(args.vault, Path.cwd(), args.scope, args.node,
                                section=args.section, start=args.start, length=args.length,
                                related=related)
    if found is not None:  # read as a plain search is: nothing for the exit to collect
        from osk.surfaces.cli import no_collection_at_exit

        no_collection_at_exit()
    else:
        found = _engine(args).read_node(args.node, section=args.section, start=args.start,
                                        length=args.length, as_of=args.as_of, related=related)
    return found


# -- rendering -----------------------------------------------------------------------------
def overview_lines(found: Overview) -> list[str]:
    binding = "bound" if found.bound else "not bound yet (binds on its first Scope write)"
    lines = [
        f"Session {found.session_key}: scope {found.scope} ({binding})",
        "Nodes: " + ", ".join(f"{name} {count}" for name, count in found.counts.items()),
    ]
    lines.append(f"Recheck candidates: {len(found.rechecks)}")
    for cand in found.rechecks:
        flags = (" cascade" if cand.cascade else "") + (
            f" next: {', '.join(cand.next)}" if cand.next else "")
        lines.append(f"  [{cand.id}] {cand.citing_title} cites {cand.target} "
                     f"({cand.reason}){flags}")
    lines.append(f"Open conflict candidates: {len(found.conflicts)}")
    for cand in found.conflicts:
        names = " / ".join(p.title for p in cand.parties)
        lines.append(f"  [{cand.key[:12]}] {cand.type}: {names}"
                     + (f" — {cand.note}" if cand.note else ""))
    lines.append(f"Pending scope-memory evictions: {len(found.pending_evictions)}")
    for eviction in found.pending_evictions:
        lines.append(f"  [{eviction.id}] {len(eviction.lines)} line(s) from {eviction.scope}")
    if found.forks:
        lines.append(f"Ledger forks (a person decides): {len(found.forks)}")
        lines.extend(f"  {fork.description}" for fork in found.forks)
    for damaged in found.damaged_ledgers:
        lines.append(f"Damaged ledger: {damaged}")
    for problem in found.problems:
        lines.append(f"Problem: {problem}")
    return lines


def _engine(args: argparse.Namespace, *, look: bool = True) -> Engine:
    from osk.engine.core import Engine

    return Engine.open(args.vault, cwd=Path.cwd(), scope=getattr(args, "scope", None),
                       actor="user", look=look)
