"""`osk quickstart`: a scripted agent session through a demo vault."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    quick = sub.add_parser(
        "quickstart",
        help="walk one scripted agent session through a demo vault in a temporary folder",
    )
    quick.add_argument("--keep", metavar="DIR",
                       help="build the demo in DIR and keep it (to open the vault in Obsidian)")
    quick.set_defaults(handler=run_quickstart)


def run_quickstart(args: argparse.Namespace) -> int:
    from osk.surfaces.quickstart import run

    return run(Path(args.keep) if args.keep else None)
