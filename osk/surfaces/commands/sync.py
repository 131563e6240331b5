"""`osk sync`: one sync cycle, the sync daemon, or the sync status line."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from osk.engine.vaults import Vault

# An offline cycle committed locally but could not publish: "try again later" (sysexits.h),
# which the service examples in scripts/ treat as success so a laptop on a train is not "failed".
EXIT_OFFLINE = 75


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from osk.surfaces.commands.common import add_json_flag

    parser = sub.add_parser(
        "sync",
        help="commit the vault, pull with rebase and push (one cycle, --daemon, or --status)",
        description="Commit the vault's changes, rebase onto the remote branch and push. "
                    "Ledgers merge by union; a node edited on two devices keeps both versions "
                    "(the local one as a '(sync conflict …)' copy beside it). What the remote "
                    "brings is checked before any of it lands (links, file sizes, ledger lines, "
                    "duplicate node ids, .gitattributes, osk.toml, a rewritten history) and "
                    "refused by name when it cannot land; so is a node it brings whose id a "
                    "node this device has not yet pushed carries too, and this device's "
                    "commits are not pushed while two node files carry one id. When nodes or "
                    "ledgers landed, the search index takes them in before the command ends, "
                    "so the next search or read answers from it at once.",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--daemon", action="store_true",
                      help="keep syncing: every --interval seconds and soon after a change")
    mode.add_argument("--status", action="store_true",
                      help="print one line: ahead/behind, pending changes, last sync, offline")
    parser.add_argument("--remote", default="origin", help="the git remote (default: origin)")
    parser.add_argument("--accept-rewrite", action="store_true",
                        help="the remote's history was rewritten (force-pushed) and that is "
                             "right: rebase this device's commits onto it")
    parser.add_argument("--interval", type=_positive, default=300.0, metavar="SECONDS",
                        help="daemon: sync at least this often (default: 300)")
    parser.add_argument("--poll", type=_positive, default=5.0, metavar="SECONDS",
                        help="daemon: look for local changes this often (default: 5; where "
                             "the kernel reports changes, an idle look reads no file)")
    parser.add_argument("--max-cycles", type=int, default=None, metavar="N",
                        help="daemon: stop after N cycles (default: run until stopped)")
    add_json_flag(parser)
    parser.set_defaults(handler=run_sync)


def _positive(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0 (got {text})")
    return value


def run_sync(args: argparse.Namespace) -> int:
    from osk.engine.vaults import open_vault
    from osk.verbs import syncing

    vault = open_vault(args.vault)
    if args.status:
        state = syncing.status(vault, remote=args.remote)
        print(json.dumps(state.to_json(), ensure_ascii=False) if args.json else state.line())
        return 0
    if args.daemon:
        return _run_daemon(vault, args)
    result = syncing.once(vault, remote=args.remote, accept_rewrite=args.accept_rewrite)
    print(json.dumps(result.to_json(), ensure_ascii=False) if args.json else result.line())
    return EXIT_OFFLINE if result.offline else 0


def _run_daemon(vault: Vault, args: argparse.Namespace) -> int:
    import signal
    import threading

    from osk.verbs import syncing

    stop = threading.Event()

    def request_stop(signum: int, _frame: object) -> None:
        stop.set()

    previous = {signum: signal.signal(signum, request_stop)
                for signum in (signal.SIGTERM, signal.SIGINT)}
    print(f"osk sync daemon: {vault.root} every {args.interval:g} s and on change "
          f"(stop with SIGTERM or Ctrl-C)", flush=True)
    try:
        syncing.daemon(vault, interval=args.interval, poll=args.poll, max_cycles=args.max_cycles,
                    remote=args.remote, stop=stop, report=lambda line: print(line, flush=True))
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    print("osk sync daemon: stopped", flush=True)
    return 0
