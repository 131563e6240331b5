"""`osk exclude` / `osk include`: the person keeps a raw round, or a whole conversation, out of
search and recall, and takes it back (terminal only); `osk exclusions` lists what is out."""

from __future__ import annotations

import argparse

from osk.surfaces.commands.common import add_json_flag, json_text

TARGET_HELP = ("_raw/KEY/CONVERSATION#Round N (one round) or _raw/KEY/CONVERSATION (every "
               "round of the conversation), as search and read_raw show them")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    exclude = sub.add_parser(
        "exclude", help="keep a raw round, or a whole conversation, out of search and recall "
                        "without changing it; recorded in the exclusions ledger (terminal only)")
    exclude.add_argument("target", help=TARGET_HELP)
    exclude.add_argument("--reason", default="", help="why (kept in the ledger)")
    exclude.set_defaults(handler=run_exclude)

    include = sub.add_parser("include", help="take an exclusion back: the round or conversation "
                                             "is found again (terminal only)")
    include.add_argument("target", help=TARGET_HELP)
    include.add_argument("--reason", default="", help="why (kept in the ledger)")
    include.set_defaults(handler=run_include)

    listing = sub.add_parser("exclusions", help="list the raw rounds and conversations kept "
                                                "out of search and recall")
    add_json_flag(listing)
    listing.set_defaults(handler=run_exclusions)


def run_exclude(args: argparse.Namespace) -> int:
    from osk.engine.vaults import open_vault
    from osk.verbs import exclusion

    target = exclusion.exclude(open_vault(args.vault), args.target, reason=args.reason)
    what = "every round of" if target.number is None else "round"
    print(f"Excluded {what} {target.name} from search and recall; recorded in "
          f"_ledger/{exclusion.LEDGER}.jsonl. The record is unchanged (read_raw still reads "
          f"it); `osk include {target.name}` takes it back.")
    return 0


def run_include(args: argparse.Namespace) -> int:
    from osk.engine.vaults import open_vault
    from osk.verbs import exclusion

    target = exclusion.include(open_vault(args.vault), args.target, reason=args.reason)
    print(f"Included {target.name} again: search and recall find it.")
    return 0


def run_exclusions(args: argparse.Namespace) -> int:
    from osk.engine.vaults import open_vault
    from osk.verbs import exclusion

    items = exclusion.current(open_vault(args.vault))
    if args.json:
        print(json_text(items))
        return 0
    if not items:
        print("Nothing is excluded.")
    for item in items:
        forked = " (forked: devices disagree; kept out until you decide)" if item.forked else ""
        reason = f"\n    reason: {item.reason}" if item.reason else ""
        print(f"{item.target}  {item.time}  by {item.by}{forked}{reason}")
    return 0
