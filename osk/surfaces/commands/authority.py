"""The person's commands: protected regions, review, audit history, trust, tombstones, and the
candidates and scope-memory evictions agents leave for the person. Each command makes one call
to the person-verbs façade (``osk.verbs.person``) and renders what it hands back.

`osk protect|unprotect|approve|revert PATH`, `osk confirm NODE`, `osk reject NODE --reason …`,
`osk lift KEY`, `osk dismiss KEY --reason …` and `osk settle ID --dismissed` are the person's
decisions and are refused unless stdin is a terminal (the wings' functions check it themselves;
governance/authority.md). `osk review`, `osk log`, `osk show`, `osk tombstones`,
`osk candidates` and `osk evictions` only read and work anywhere.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from osk.surfaces.commands.common import add_json_flag, json_text, typed_back

if TYPE_CHECKING:
    from osk.verbs.person import Proposal, Waiting, Where
    from osk.verbs.review import NewWrite


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    def path_command(name: str, help_text: str,
                     handler: Callable[[argparse.Namespace], int]) -> argparse.ArgumentParser:
        parser = sub.add_parser(name, help=help_text)
        parser.add_argument("path", help="a folder or node file inside a Space")
        parser.set_defaults(handler=handler)
        return parser

    path_command("protect", "protect a folder or node: readers are served its approved "
                            "snapshot (terminal only)", run_protect)
    path_command("unprotect", "stop protecting a region with no pending changes "
                              "(terminal only)", run_unprotect)
    for name, help_text, handler in (
        ("approve", "make the pending changes under PATH the approved version, after showing "
                    "them (terminal only)", run_approve),
        ("revert", "return the working copy under PATH to the approved snapshot, after "
                   "showing what is discarded (terminal only)", run_revert),
    ):
        path_command(name, help_text, handler).add_argument(
            "--yes", action="store_true",
            help="refused with an explanation: only the code shown, typed back, decides")

    review = sub.add_parser("review", help="show pending changes in protected regions as diffs; "
                                           "--new: what agents wrote since your last review, "
                                           "to keep, reject or edit (terminal only)")
    review.add_argument("path", nargs="?", help="only changes under this path")
    review.add_argument("--new", action="store_true",
                        help="nodes agents wrote or changed since you last reviewed them")
    add_json_flag(review)
    review.set_defaults(handler=run_review)

    log = sub.add_parser("log", help="the audit history of one node, or of the whole vault")
    log.add_argument("node", nargs="?", help="a node's title or id")
    log.add_argument("--limit", type=int, default=50, help="newest N records (default 50)")
    add_json_flag(log)
    log.set_defaults(handler=run_log)

    show = sub.add_parser("show", help="print a recorded version: NODE@HASH (hash prefix ok)")
    show.add_argument("ref", metavar="NODE@HASH")
    show.set_defaults(handler=run_show)

    confirm = sub.add_parser("confirm", help="mark a node as your confirmed fact "
                                             "(terminal only)")
    confirm.add_argument("node", help="a node's title or id")
    confirm.set_defaults(handler=run_confirm)

    reject = sub.add_parser("reject", help="remove a claim and refuse it if written again "
                                           "(terminal only)")
    reject.add_argument("node", help="a node's title or id")
    reject.add_argument("--reason", required=True, help="why; agents are shown this")
    reject.set_defaults(handler=run_reject)

    tombs = sub.add_parser("tombstones", help="list rejected claims")
    tombs.add_argument("--all", action="store_true", help="include lifted tombstones")
    add_json_flag(tombs)
    tombs.set_defaults(handler=run_tombstones)

    lift = sub.add_parser("lift", help="lift a tombstone so the claim may be written again "
                                       "(terminal only)")
    lift.add_argument("key", help="a tombstone key (prefix of at least 6 characters)")
    lift.add_argument("--reason", default="", help="why it is lifted")
    lift.set_defaults(handler=run_lift)

    cands = sub.add_parser("candidates", help="list the conflict candidates agents filed for "
                                              "you, and the corrections stopped at a cascade")
    cands.add_argument("--all", action="store_true", help="include dismissed candidates")
    add_json_flag(cands)
    cands.set_defaults(handler=run_candidates)

    dismiss = sub.add_parser("dismiss", help="dismiss a candidate as needing no action "
                                             "(terminal only)")
    dismiss.add_argument("key", help="a candidate key (prefix of at least 8 hex characters)")
    dismiss.add_argument("--reason", required=True, help="why it needs no action")
    dismiss.set_defaults(handler=run_dismiss)

    evictions = sub.add_parser("evictions", help="list scope-memory lines squeezed out by the "
                                                 "cap and not yet settled")
    evictions.add_argument("--scope", help="only this scope's evictions (default: every scope)")
    add_json_flag(evictions)
    evictions.set_defaults(handler=run_evictions)

    memory = sub.add_parser("memory", help="show a scope's memory note with who wrote each "
                                           "line; --set FILE replaces it as the person "
                                           "(terminal only)")
    memory.add_argument("--scope", help="the scope (default: the one the working folder's "
                                        "session writes to)")
    memory.add_argument("--set", dest="set_file", metavar="FILE",
                        help="replace the note with this file's text, recorded as yours")
    memory.set_defaults(handler=run_memory)

    settle = sub.add_parser("settle", help="settle a pending eviction as dismissed: its lines "
                                           "are dropped (terminal only)")
    settle.add_argument("eviction", metavar="EVICTION_ID",
                        help="an eviction id (prefix of at least 8 characters)")
    settle.add_argument("--dismissed", action="store_true", required=True,
                        help="required: the lines need not be kept (agents settle an eviction "
                             "as distilled into a node)")
    settle.set_defaults(handler=run_settle)


# -- protected regions ------------------------------------------------------------------------
def run_protect(args: argparse.Namespace) -> int:
    from osk.verbs import person

    done = person.protect(args.vault, args.path, Path.cwd())
    print(f"Protected {done.region}: {len(done.files)} node file(s) in the approved snapshot. "
          f"Edits there now wait for `osk review` / `osk approve` / `osk revert`.")
    return 0


def run_unprotect(args: argparse.Namespace) -> int:
    from osk.verbs import person

    region = person.unprotect(args.vault, args.path, Path.cwd())
    print(f"Unprotected {region}: its working copy is served again.")
    return 0


def run_approve(args: argparse.Namespace) -> int:
    from osk.verbs import person

    decided = person.approve(args.vault, args.path, Path.cwd(),
                             lambda proposal: _agreed(proposal, args.yes))
    for change in decided or ():
        print(f"Approved {change.kind}: {change.path}")
    return 0


def run_revert(args: argparse.Namespace) -> int:
    from osk.verbs import person

    decided = person.revert(args.vault, args.path, Path.cwd(),
                            lambda proposal: _agreed(proposal, args.yes))
    for change in decided or ():
        kept = f" (discarded text kept as {change.working[:12]})" if change.working else ""
        print(f"Reverted {change.kind}: {change.path}{kept}")
    return 0


def _agreed(proposal: Proposal, assume_yes: bool) -> bool:
    """List what the verb would decide and have the person type back its code.

    The code comes from the changes shown (``protection.changes_code``), so neither `yes |` nor
    a flag decides, and the engine then decides exactly these changes or nothing: see
    ``protection.approve``.
    """
    from osk.errors import AuthorityError

    verb, rel = proposal.verb, proposal.path
    if assume_yes:
        raise AuthorityError(
            f"`osk {verb} --yes` no longer decides anything: osk shows the pending changes and a "
            f"short code made from them, and you type the code back. Run `osk {verb} {rel}` "
            f"and type the code it shows; nothing was {proposal.past}",
            action=verb,
        )
    if not proposal.changes:
        print(f"Nothing pending under {rel}.")
        return False
    print(f"Pending under {rel}:")
    for change, (added, removed) in zip(proposal.changes, proposal.sizes, strict=True):
        print(f"  {change.kind:<7} {change.path}  (+{added} -{removed} lines)")
    question = (f"Type {proposal.code} to {verb} these {len(proposal.changes)} change(s) "
                f"(anything else changes nothing): ")
    if typed_back(proposal.code, question):
        return True
    print(f"Nothing {proposal.past}.")
    return False


def run_review(args: argparse.Namespace) -> int:
    from osk.verbs import person

    if args.new:
        return run_review_new(args)
    found = person.pending(args.vault, args.path, Path.cwd())
    if args.json:
        print(json_text([
            {"path": c.path, "region": c.region, "kind": c.kind, "approved": c.approved,
             "working": c.working, "forked": c.forked, "diff": diff}
            for c, diff in zip(found.changes, found.diffs, strict=True)
        ]))
        return 0
    if not found.changes:
        print("No pending changes." if found.protected else "No protected regions.")
        return 0
    for change, diff in zip(found.changes, found.diffs, strict=True):
        fork = " — approvals diverged across devices; approve or revert to decide" \
            if change.forked else ""
        print(f"# {change.kind}: {change.path} (region {change.region}){fork}")
        print(diff, end="")
    print(f"{len(found.changes)} pending change(s). Decide with `osk approve PATH` or "
          f"`osk revert PATH`.")
    return 0


REVIEW_CHOICES = "[k]eep, [r]eject, [e]dit, [s]kip, [q]uit? "


def run_review_new(args: argparse.Namespace) -> int:
    """Each node agents wrote since the last review: its diff and citations, then the
    person's decision. ``--json`` only lists (anywhere); deciding is terminal only."""
    from osk.engine.vaults import open_vault
    from osk.verbs import person

    vault = open_vault(args.vault)
    if args.path:
        from osk.errors import OskError

        raise OskError("`osk review --new` takes no PATH: it lists every node agents wrote "
                       "since your last review")
    writes = person.new_writes(vault, deciding=not args.json)
    if args.json:
        print(json_text(writes))
        return 0
    if not writes:
        print("Nothing new: no agent wrote or changed a node since your last review.")
        return 0
    for number, write in enumerate(writes, start=1):
        _show_write(number, len(writes), write)
        if not _decide(vault, write):
            break
    return 0


def _show_write(number: int, total: int, write: NewWrite) -> None:
    held = " (held out of recall until reviewed)" if write.held else ""
    print(f"# {number}/{total} {write.title} (id {write.node_id}){held}")
    print(f"  {write.path}: by {', '.join(write.actors)} since {write.since}")
    cites = ", ".join(write.citations) or "nothing"
    print(f"  cites: {cites}")
    print(write.diff, end="" if write.diff.endswith("\n") else "\n")


def _decide(vault: Where, write: NewWrite) -> bool:
    """Ask until the person answers; False to stop the review."""
    from osk.verbs import person

    while True:
        try:
            answer = input(REVIEW_CHOICES).strip().lower()[:1]
        except EOFError:
            answer = "q"
        if answer == "k":
            person.keep(vault, write)
            print("Kept.")
        elif answer == "r":
            reason = input("Why is it rejected (agents are shown this)? ").strip()
            if not reason:
                print("A reason is needed; nothing was rejected.")
                continue
            tomb = person.reject(vault, write.node_id, reason).tombstone
            print(f"Rejected: tombstone {tomb.key[:12]}; the same text is refused if written "
                  f"again.")
        elif answer == "e":
            if not person.edit(vault, write, Path.cwd(), _in_editor):
                continue
            print("Edited and kept.")
        elif answer in ("s", ""):
            print("Skipped; it stays new.")
        elif answer == "q":
            return False
        else:
            continue
        return True


def _in_editor(text: str) -> str | None:
    """``text`` as the person left it in $VISUAL / $EDITOR; None when the editor failed."""
    import os
    import shlex
    import subprocess
    import tempfile

    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    with tempfile.TemporaryDirectory() as folder:
        draft = Path(folder) / "body.md"
        draft.write_text(text, encoding="utf-8")
        if subprocess.run([*shlex.split(editor), str(draft)], check=False).returncode != 0:
            print(f"{editor} failed; nothing was changed.")
            return None
        return draft.read_text(encoding="utf-8")


# -- audit ------------------------------------------------------------------------------------
def run_log(args: argparse.Namespace) -> int:
    from osk.verbs import person

    found = person.history(args.vault, args.node, args.limit)
    if args.json:
        print(json_text(found.entries))
        return 0
    if not found.entries:
        print("No audit records.")
    for entry in found.entries:
        change = f"{(entry.before or '-')[:12]} -> {(entry.after or '-')[:12]}"
        pending = " (pending review)" if entry.pending else ""
        where = entry.path_after if entry.action != "move" else \
            f"{entry.path_before} => {entry.path_after}"
        print(f"{entry.time}  {entry.action:<9} {entry.actor:<14} {where}  {change}{pending}")
    if found.note:
        print(found.note)
    return 0


def run_show(args: argparse.Namespace) -> int:
    from osk.verbs import person

    print(person.version(args.vault, args.ref), end="")
    return 0


# -- trust and tombstones ---------------------------------------------------------------------
def run_confirm(args: argparse.Namespace) -> int:
    from osk.verbs import person

    done = person.confirm(args.vault, args.node)
    if done.after is None:
        print(f"{done.path} is already confirmed.")
    else:
        print(f"Confirmed {done.path}: it is now your fact, not an agent's inference.")
    return 0


def run_reject(args: argparse.Namespace) -> int:
    from osk.verbs import person

    done = person.reject(args.vault, args.node, args.reason)
    tomb, left = done.tombstone, done.left
    print(f"Rejected {tomb.title!r} ({tomb.path} removed; text kept as {(tomb.object or '')[:12]})."
          f"\nTombstone {tomb.key[:12]}: agents writing this claim again are refused.")
    if left.twins:
        print("These nodes carry the same claim (their next edit will be refused; reject them "
              "too if it is wrong there as well):\n  " + "\n  ".join(left.twins))
    if left.citing:
        print(f"These nodes cite [[{tomb.title}]], which no longer exists (`osk validate` "
              f"lists the dangling link):\n  " + "\n  ".join(left.citing))
    return 0


def run_tombstones(args: argparse.Namespace) -> int:
    from osk.verbs import person

    items = person.tombstones_of(args.vault, lifted=args.all)
    if args.json:
        print(json_text(items))
        return 0
    if not items:
        print("No tombstones.")
    for tomb in items:
        state = " (lifted)" if tomb.lifted else " (forked: devices disagree)" if tomb.forked \
            else ""
        print(f"{tomb.key[:12]}  {tomb.time}  {tomb.title}{state}\n    reason: {tomb.reason}")
    return 0


def run_lift(args: argparse.Namespace) -> int:
    from osk.verbs import person

    tomb = person.lift(args.vault, args.key, args.reason)
    print(f"Lifted tombstone {tomb.key[:12]} ({tomb.title!r}); the claim may be written again.")
    return 0


# -- candidates and evictions -----------------------------------------------------------------
def run_candidates(args: argparse.Namespace) -> int:
    from osk.verbs import person

    found = person.waiting(args.vault, dismissed=args.all)
    if args.json:
        print(json_text([*found.conflicts, *_cascade_items(found)]))
        return 0
    if not found.conflicts and not found.cascades:
        print("No candidates." if args.all else "No open candidates.")
        return 0
    if found.conflicts:
        _print_conflicts(found)
    if found.cascades:
        _print_cascades(found)
    return 0


def _cascade_items(found: Waiting) -> list[dict[str, object]]:
    """The cascades in the JSON list: ``type`` "cascade" tells one from a conflict candidate."""
    return [{"type": "cascade", "key": cand.id, "status": "open", "citing": cand.citing_title,
             "citing_path": cand.citing_path, "target": cand.target, "next": list(cand.next)}
            for cand in found.cascades]


def _print_cascades(found: Waiting) -> None:
    cascades = found.cascades
    print(f"{len(cascades)} correction(s) stopped at a cascade, waiting for you "
          f"(governance/ledgers.md rule 6):")
    for cand in cascades:
        print(f"{cand.id}  cascade\n    [[{cand.citing_title}]] cites {cand.target}, whose "
              f"text is itself a recheck correction")
        if cand.next:
            print(f"    cited in turn by: {', '.join(f'[[{t}]]' for t in cand.next)}")
    print("An agent may only re-cite these unchanged. If one no longer holds, edit it "
          "yourself; an agent's re-citation then closes it.")


def _print_conflicts(found: Waiting) -> None:
    items = found.conflicts
    for item in items:
        state = " (dismissed)" if item.status == "dismissed" else ""
        titles = " / ".join(f"[[{p.title}]]" for p in item.parties)
        print(f"{item.key[:12]}  {item.at}  {item.type}{state}\n    parties: {titles}")
        if item.note:
            print(f"    note: {item.note}")
    waiting = sum(1 for item in items if item.status == "open")
    print(f"{waiting} open candidate(s). Dismiss one that needs no action with "
          f"`osk dismiss KEY --reason TEXT`; fix the nodes otherwise.")


def run_dismiss(args: argparse.Namespace) -> int:
    from osk.verbs import person

    done = person.dismiss(args.vault, args.key, args.reason)
    titles = " / ".join(f"[[{p.title}]]" for p in done.parties)
    print(f"Dismissed {done.type} candidate {done.key[:12]} between {titles}; it is no longer "
          f"shown to agents.")
    return 0


def run_evictions(args: argparse.Namespace) -> int:
    from osk.verbs import person

    items = person.evictions(args.vault, args.scope)
    if args.json:
        print(json_text(items))
        return 0
    if not items:
        print("No pending evictions.")
        return 0
    for item in items:
        print(f"{item.id}  {item.at}  scope {item.scope}: {len(item.lines)} line(s)")
        for line in item.lines:
            print(f"    {line}")
    print(f"{len(items)} pending eviction(s). Agents distil them into nodes; drop one with "
          f"`osk settle ID --dismissed`.")
    return 0


def run_memory(args: argparse.Namespace) -> int:
    from osk.verbs import person

    found = person.memory(args.vault, Path.cwd(), args.scope,
                          Path(args.set_file) if args.set_file else None)
    scope, done = found.scope, found.written
    if done is not None:
        print(f"Scope memory of {scope!r} {'replaced' if done.changed else 'unchanged'} "
              f"({done.chars:,} of {done.cap:,} characters, hash {done.hash[:12]}).")
    if not found.lines:
        print(f"Scope memory of {scope!r} is empty.")
        return 0
    print(f"Scope memory of {scope!r} (hash {found.hash[:12]}), each line with who wrote it:")
    for line, who in found.lines:
        print(f"  {line}" if who is None else f"  {line}\n      - {who}")
    return 0


def run_settle(args: argparse.Namespace) -> int:
    from osk.verbs import person

    done = person.settle_dismissed(args.vault, args.eviction)
    print(f"Settled eviction {done.id} (scope {done.scope}, {len(done.lines)} line(s)) as "
          f"dismissed; it is no longer pending.")
    return 0
