"""`osk mcp`: the MCP stdio server, which a host starts (``osk setup`` registers it).

The server is imported inside the handler: building the parser must stay cheap, and nothing here
may pull the MCP SDK into any other command.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    mcp = sub.add_parser("mcp", help="run the MCP stdio server (register this with your host)")
    # SUPPRESS keeps `osk --vault V mcp` working: a default here would overwrite the top level's.
    mcp.add_argument("--vault", default=argparse.SUPPRESS,
                     help="the vault folder (default: $OSK_VAULT)")
    mcp.set_defaults(handler=run_mcp)


def run_mcp(args: argparse.Namespace) -> int:
    from osk.surfaces.stdio import serve

    return serve(args.vault, Path.cwd())
