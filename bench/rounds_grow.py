"""Build (or finish building) ``rounds_scale.py``'s kept vault with parallel appenders.

``rounds_scale.py --keep DIR`` grows its rounds in one process; a million records that way
is hours on a shared box. This builds the same vault (the search bench's ``--nodes``
synthetic nodes, the ``tidepool`` project, raw rounds through ``raw.append_round`` with fsync
off in the builders only) with ``--appenders`` processes, each appending whole conversations
of its own slice and catching the round index up after every ``--chunk`` rounds (one at a
time: the index's lock), so each process's memory stays bounded. Restartable: run it again
and each conversation is finished from the rounds its record already holds (the node vault
and the FTS5 table of the nodes are kept once complete). Then measure with
``rounds_scale.py --keep DIR --nodes N --rounds COUNT``, which finds the rounds on disk.

Usage: ``nice -n 10 python bench/rounds_grow.py DIR --nodes 100000 --rounds 900000
[--appenders 2]``. Run by hand, not in CI.
"""

from __future__ import annotations

import argparse
import itertools
import os
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

from rounds_scale import KEY, SEED, catch_up, project  # noqa: E402
from scale_bench import own_peak_kb  # noqa: E402
from search_bench import Corpus, make_vault  # noqa: E402


def held(root: Path, conversation: str) -> int:
    """Rounds the conversation's record already holds (0 when it has none)."""
    from osk.capture import raw
    from osk.store.vault import Vault

    path = raw.located_record(Vault(root), KEY, conversation)[2]
    if not path.exists():
        return 0
    return path.read_text(encoding="utf-8").count("\n## Round ")


def append_slice(root: Path, first: int, last: int, per: int, chunk: int) -> None:
    """Finish conversations ``first`` .. ``last`` - 1, catching the index up every ``chunk``
    rounds appended (fsync off in this process only, as in ``rounds_scale.grow``)."""
    from osk.capture import raw
    from osk.store.vault import Vault

    corpus, vault, appended, began = Corpus(SEED + first * per), Vault(root), 0, time.time()
    os.fsync = lambda fd: None  # type: ignore[assignment]
    for conversation in range(first, last):
        name = f"conv-{conversation:05d}"
        for number in range(conversation * per + held(root, name), (conversation + 1) * per):
            day = 1 + (number // per) % 28
            round_ = raw.RoundInput(user=corpus.text(10, 40), assistant=corpus.text(30, 120),
                                    host="claude", completion=f"c-{number}",
                                    at=f"2026-0{1 + number % 9}-{day:02d}T10:00+00:00")
            raw.append_round(vault, KEY, name, round_)
            appended += 1
            if appended % chunk == 0:
                report(first, conversation, appended, catch_up(root), began)
    report(first, last, appended, catch_up(root), began)


def report(first: int, at: int, appended: int, indexed_cpu: float, began: float) -> None:
    print(f"[slice {first}] conversation {at}: {appended:,} appended, index caught up in "
          f"{indexed_cpu:.0f} s CPU, {time.time() - began:.0f} s wall, peak "
          f"{own_peak_kb() / 1024:.0f} MB", flush=True)


def prepare(base: Path, nodes: int) -> Path:
    """The node vault, its node index (the first search builds it) and the nodes' FTS5 table,
    each kept once complete."""
    from scale_bench import build_fts

    root, _, _ = make_vault(base, nodes)
    cwd = project(base)
    env = {**os.environ, "OSK_SEMANTIC": "0"}
    began = time.perf_counter()
    subprocess.run([sys.executable, "-m", "osk", "--vault", str(root), "search", "first"],
                   cwd=cwd, env=env, stdout=subprocess.DEVNULL, check=True)
    print(f"{nodes:,} nodes; first search {time.perf_counter() - began:.1f} s", flush=True)
    notes = base / f"fts-{nodes}.sqlite"
    if not notes.exists():
        building = notes.with_suffix(".part")
        build_fts(root, building)
        building.rename(notes)
    return root


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base", type=Path, help="the directory rounds_scale.py --keep names")
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--rounds", type=int, required=True, help="rounds the vault ends with")
    parser.add_argument("--per-conversation", type=int, default=400)
    parser.add_argument("--appenders", type=int, default=2)
    parser.add_argument("--chunk", type=int, default=10000,
                        help="rounds a process appends between two catch-ups of the index")
    parser.add_argument("--slice", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    per = args.per_conversation
    if args.rounds % per:
        parser.error(f"--rounds must be a multiple of --per-conversation ({per})")
    root = args.base / f"vault-{args.nodes}"
    if args.slice:
        append_slice(root, *args.slice, per, args.chunk)
        return 0
    args.base.mkdir(parents=True, exist_ok=True)
    root = prepare(args.base, args.nodes)
    conversations = args.rounds // per
    bounds = [conversations * part // args.appenders for part in range(args.appenders + 1)]
    children = [subprocess.Popen([sys.executable, __file__, str(args.base), "--nodes",
                                  str(args.nodes), "--rounds", str(args.rounds),
                                  "--per-conversation", str(per), "--chunk", str(args.chunk),
                                  "--slice", str(first), str(last)])
                for first, last in itertools.pairwise(bounds)]
    failed = [child.args for child in children if child.wait() != 0]
    if failed:
        raise SystemExit(f"an appender failed: {failed}")
    print(f"caught up in {catch_up(root):.0f} s CPU; {args.rounds:,} rounds", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
