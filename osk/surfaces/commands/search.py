"""`osk search QUERY`, `osk embed` and `osk reindex`.

They go through the engine (so search applies the session's scope isolation, locality and
markers exactly as the MCP tool does). With the semantic channel on, `osk search` first asks a
running `osk mcp` of the vault for the search tool's answer (words and meaning, from the model
that server holds); when none answers it ranks by words alone, loading no model, and says so
(``--semantic`` loads the model here instead).
The engine is imported inside the handlers: building the parser must stay cheap, and a plain
`osk search QUERY [--json] [--semantic] [--k N] [--kind K] [--scope S] [--as-of D]` is read
without argparse at all (``plain_search``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from osk.surfaces.commands.common import Progress, add_json_flag, add_scope_flag, json_text

if TYPE_CHECKING:  # argparse is imported by the parser's builder: a plain search reads no parser
    import argparse

KINDS = ("all", "nodes", "rounds")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    for register_command in COMMANDS.values():
        register_command(sub)


def _register_search(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    search = sub.add_parser("search", help="ranked nodes and raw rounds for a query (what the "
                                           "search tool sees)")
    search.add_argument("query", help="words, or a node's title")
    search.add_argument("--k", type=int, help="how many hits (default 8, at most 50)")
    search.add_argument("--as-of", dest="as_of",
                        help="the vault as it stood at this time, for claims valid then "
                             "(2026-03-01 or a full timestamp)")
    search.add_argument("--kind", choices=KINDS, default="all",
                        help="nodes and raw rounds (default), nodes only, or rounds only")
    search.add_argument("--semantic", action="store_true",
                        help="rank by meaning too when no running `osk mcp` of this vault "
                             "answers: loads the model in this process (seconds); without "
                             "it such a search ranks by words alone (OSK_SEMANTIC=0 turns "
                             "meaning off for both)")
    add_scope_flag(search)
    add_json_flag(search)
    search.set_defaults(handler=run_search)


def _register_embed(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    embed = sub.add_parser("embed", help="give every node and raw round its semantic-search "
                                         "vectors now (the MCP server does this in the "
                                         "background)")
    embed.set_defaults(handler=run_embed)


def _register_reindex(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    reindex = sub.add_parser("reindex", help="rebuild the search index from the node files "
                                             "(the files are the source of truth), with progress")
    add_json_flag(reindex)
    reindex.set_defaults(handler=run_reindex)


# Each command alone, so a run of `osk search` builds its own parser and not the others'
# (docs/performance.md).
COMMANDS = {"search": _register_search, "embed": _register_embed,
            "reindex": _register_reindex}


# Each option of `osk search`, by the attribute argparse stores it under: those that take a
# value, and the flags (a test keeps both equal to what ``_register_search`` registers).
VALUED = {"--k": "k", "--kind": "kind", "--scope": "scope", "--as-of": "as_of"}
FLAGS = {"--json": "json", "--semantic": "semantic"}


def plain_search(args: list[str]) -> SimpleNamespace | None:
    """What argparse would make of ``osk [--vault V] search QUERY [options]``, read without
    it (argparse and its help formatters are a fifth of a fresh search's own cost,
    docs/performance.md); None for anything else (help, an abbreviated or repeated option, a
    value that starts with a dash, a bad --k or --kind), which argparse reads and explains."""
    read: dict[str, Any] = {"vault": None, "version": False, "command": "search",
                            "query": None, "k": None, "as_of": None, "kind": "all",
                            "semantic": False, "scope": None, "json": False,
                            "handler": run_search}
    words = iter(args)
    word = next(words, None)
    if word == "--vault":
        read["vault"] = _value(next(words, None))
        word = next(words, None)
    elif word is not None and word.startswith("--vault="):
        read["vault"], word = word.removeprefix("--vault="), next(words, None)
    if word != "search" or (read["vault"] is None and args[0] != "search"):
        return None
    seen: set[str] = set()  # each option once, and one query
    for word in words:
        key = word if word.startswith("-") else "QUERY"
        if key in seen or not _taken(word, words, read):
            return None
        seen.add(key)
    return SimpleNamespace(**read) if read["query"] is not None else None


def _taken(word: str, words: Any, read: dict[str, Any]) -> bool:
    """Read one word of a plain search (and the value after it); False where argparse should."""
    if word in FLAGS:
        read[FLAGS[word]] = True
    elif word in VALUED:
        value = _value(next(words, None))
        if value is None:
            return False
        read[VALUED[word]] = value
    elif word.startswith("-"):
        return False
    else:
        read["query"] = word
    if word == "--k":
        read["k"] = int(read["k"]) if read["k"].isdecimal() else None  # what int() reads
        return read["k"] is not None
    return word != "--kind" or read["kind"] in KINDS


def _value(word: str | None) -> str | None:
    """An option's value, as argparse takes it without question (no dash first)."""
    return None if word is None or word.startswith("-") else word


# -- search -------------------------------------------------------------------------------------
def run_search(args: argparse.Namespace | SimpleNamespace) -> int:
    from osk.reads import quick_search

    cwd = Path.cwd()
    # a running server's search tool, which holds the model; else words alone here
    result = quick_search.served(args.vault, cwd, args.scope, args.query, args.k, args.kind,
                                 args.as_of)
    note = quick_search.words_alone(args.vault, cwd) if result is None and not args.semantic \
        else None
    if result is None and args.as_of is None:  # from the persisted index, when it holds
        result = quick_search.search(args.vault, cwd, args.scope, args.query, args.k, args.kind)
    if result is None:
        result = _engine_search(args)
    if args.json:
        print(json_text({"scope": result.scope, "query": result.query,
                         "hits": [_hit(hit) for hit in result.hits]}))
        return 0
    if not result.hits:
        print(f"Nothing matches {args.query!r} (scope {result.scope}).", file=sys.stderr)
    for rank, hit in enumerate(result.hits, start=1):
        markers = f"  [{', '.join(hit.markers)}]" if hit.markers else ""
        print(f"{rank:2}. {hit.title}  ({hit.score:.3f}){markers}")
        print(f"    {hit.path}")
        print(f"    {hit.summary}")
    if note is not None:
        print(note, file=sys.stderr)
    return 0


def _engine_search(args: argparse.Namespace | SimpleNamespace) -> Any:
    from osk.engine.core import search_once

    return search_once(args.vault, args.query, cwd=Path.cwd(), scope=args.scope,
                       as_of=args.as_of, kind=args.kind, k=args.k)


def _hit(hit: Any) -> dict[str, Any]:
    return {"title": hit.title, "path": hit.path, "id": hit.id, "summary": hit.summary,
            "updated": hit.updated, "score": hit.score, "markers": list(hit.markers),
            "space": hit.space, "scope": hit.scope, "match": hit.match}


# -- embed --------------------------------------------------------------------------------------
def run_embed(args: argparse.Namespace) -> int:

    from osk.engine.core import Engine, semantic_status

    state = semantic_status()
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

    engine = Engine.open(args.vault, cwd=Path.cwd(), actor="user", look=False)  # reindex walks
    count, seconds = _with_progress("indexing", engine.reindex)
    if args.json:
        print(json_text({"indexed": count, "seconds": round(seconds, 3)}))
    else:
        print(f"indexed {count} node(s) from the files ({seconds:.1f} s)")
    return 0
