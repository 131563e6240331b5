"""`osk recall log`, `osk recall why PROMPT` and `osk stats`: what memory injected, why, and
what it cost (``osk.verbs.usage``; the receipts are written by the hooks,
``osk.hooks.receipts``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osk.surfaces.commands.common import add_json_flag, add_scope_flag, json_text

if TYPE_CHECKING:
    from osk.verbs.usage import DayScope


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    recall = sub.add_parser("recall", help="what the hooks injected (log) and why a prompt "
                                           "would get what it gets (why)")
    verbs = recall.add_subparsers(dest="verb", metavar="VERB", required=True)
    shown = verbs.add_parser("log", help="the receipts of every injection, oldest first")
    shown.add_argument("--limit", type=int, default=20,
                       help="the newest this many receipts (default 20)")
    shown.add_argument("--conversation", help="only this conversation (a prefix of its id)")
    add_scope_flag(shown)
    add_json_flag(shown)
    shown.set_defaults(handler=run_log)

    why = verbs.add_parser("why", help="what recall would inject for a prompt now, and why "
                                       "each candidate was or was not")
    why.add_argument("prompt", help="the prompt, as you would type it to the agent")
    why.add_argument("--host", default="claude", help="whose budget applies (default claude)")
    why.add_argument("--conversation", help="count what this conversation was shown already "
                                            "(its host id); default: a new conversation")
    add_scope_flag(why)
    add_json_flag(why)
    why.set_defaults(handler=run_why)

    stats = sub.add_parser("stats", help="per day and scope: characters injected per prompt, "
                                         "prompts with a block, injected nodes the model used")
    stats.add_argument("--days", type=int, help="only the last this many days with receipts")
    add_json_flag(stats)
    stats.set_defaults(handler=run_stats)


def run_log(args: argparse.Namespace) -> int:
    from osk.engine.vaults import open_vault
    from osk.verbs import usage

    found = usage.log(open_vault(args.vault), limit=args.limit, scope=args.scope,
                      conversation=args.conversation)
    if args.json:
        print(json_text(found))
        return 0
    if not found:
        print("No receipts yet: the hooks write one per session start and prompt.")
    for record in found:
        print(_receipt_lines(record))
    return 0


def _receipt_lines(record: dict[str, Any]) -> str:
    prompt = f" prompt {record['prompt']}" if record.get("prompt") else ""
    lines = [f"{record.get('at')} {record.get('host')} {record.get('event')} scope "
             f"{record.get('scope')} conversation {str(record.get('conversation'))[:13]}"
             f"{prompt}: {record.get('chars')} chars, {len(record.get('items') or ())} shown, "
             f"{len(record.get('held') or ())} held back"]
    lines += [f"  + {_item(i)}" for i in record.get("items") or ()]
    lines += [f"  - {_item(i)}: {i.get('reason')}" for i in record.get("held") or ()]
    return "\n".join(lines)


def _item(item: dict[str, Any]) -> str:
    ranked = "floor" in item  # the digest lists nodes by date or citations, not by a score
    rank = f", score {item.get('score')}, floor {item['floor']}" if ranked else ""
    return (f"{item.get('title')} (id {item.get('id')}, hash {str(item.get('hash'))[:12]}, "
            f"{item.get('channel')}{rank})")


def run_why(args: argparse.Namespace) -> int:
    from osk.engine.vaults import open_vault
    from osk.verbs import usage

    found = usage.why(open_vault(args.vault), args.prompt, cwd=Path.cwd(), scope=args.scope,
                      host=args.host, conversation=args.conversation)
    if args.json:
        print(json_text(found))
        return 0
    print(f"scope {found.scope}, host {found.host}, budget {found.limit} chars")
    if found.items:
        print(f"Would inject {len(found.block)} chars ({found.channel}):")
        print("\n".join(f"  + {_item(i)}" for i in found.items))
    else:
        print("Would inject nothing.")
    if found.held:
        print("Held back:")
        print("\n".join(f"  - {_item(i)}: {i.get('reason')}: "
                        f"{usage.reason_text(i.get('reason'))}" for i in found.held))
    elif not found.items:
        print("No node of this scope holds the prompt's words.")
    return 0


def run_stats(args: argparse.Namespace) -> int:
    from osk.engine.vaults import open_vault
    from osk.verbs import usage

    rows = usage.stats(open_vault(args.vault), days=args.days)
    if args.json:
        print(json_text([{**_plain(row), "chars_per_prompt": round(row.chars_per_prompt, 1),
                          "block_share": round(row.block_share, 3),
                          "used_share": round(row.used_share, 3)} for row in rows]))
        return 0
    if not rows:
        print("No receipts yet: the hooks write one per session start and prompt.")
        return 0
    print(f"{'day':10}  {'scope':16} {'prompts':>7} {'chars/prompt':>12} {'with block':>10} "
          f"{'starts':>6} {'chars/start':>11} {'injected':>8} {'opened':>6} {'cited':>5} "
          f"{'used':>5}")
    for row in rows:
        per_start = row.start_chars / row.starts if row.starts else 0.0
        print(f"{row.day:10}  {row.scope[:16]:16} {row.prompts:7} {row.chars_per_prompt:12.0f} "
              f"{row.block_share:10.0%} {row.starts:6} {per_start:11.0f} {row.injected:8} "
              f"{row.opened:6} {row.cited:5} {row.used_share:5.0%}")
    return 0


def _plain(row: DayScope) -> dict[str, Any]:
    import dataclasses

    return dataclasses.asdict(row)
