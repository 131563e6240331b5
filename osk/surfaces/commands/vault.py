"""`osk init`: create a vault."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    init = sub.add_parser("init", help="create a vault (a git repository) from the template")
    init.add_argument("path", help="the folder to create the vault in")
    init.set_defaults(handler=run_init)


def run_init(args: argparse.Namespace) -> int:
    from osk.engine.vaults import make_vault

    vault = make_vault(Path(args.path))
    print(f"Created vault {vault.root}")
    print(f"Use it with: export OSK_VAULT={vault.root}")
    return 0
