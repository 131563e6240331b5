"""A fresh `osk search` right after another process's write, beside one with no write before
it (issue 26).

A fresh `osk search` answers from the index on disk (``osk.reads.quick_search``) while the
vault is as the last engine's look recorded it; otherwise it opens the engine, which at
100,000 nodes restores the whole catalog and node index (seconds, hundreds of MB). This bench
takes a kept vault (say the one ``scale_bench.bench_import(..., keep=True)`` leaves), starts
a server child that holds one ``Engine`` as `osk mcp` does (``watch=True``, warmed), and for
each of ``--runs`` rounds times a fresh `osk search` child (the CLI, interpreter included; its
CPU, wall, own peak memory, and which path answered: the store or the engine):

- with no write before it (the baseline);
- right after the server created a node (a query that finds it);
- after the server's next calls (``read_node`` of that node, a search);
- right after the server updated that node;
- right after `osk import` of one node in another process (``--imports``: each opens the
  engine in that process, seconds at 100,000 nodes);
- right after a round captured by another process (``raw.append_round``, as the Stop hook
  appends one): the rounds have their own index and stamp;
- once, right after a hand edit of one node by rename (an editor's save), which no writer
  announced, the server still running;
- then, the server gone, ``--runs`` hand edits by rename one after another, a fresh search
  after each that finds the node edited: no engine between them, so the n-th search finds n
  files the index on disk does not hold as they are (``quick_search.EDITS``). Asked by the
  whole title, the query holds a word every bench node's title holds ("import"), whose idf
  floor after an edit is summed from the counts of document frequencies the index on disk
  keeps (``recallfile.COUNTS``), or, when they are not stamped as of its nodes (a writer
  another process wrote past), found by the engine, whose write of the edit stamps them; as many
  edits again, one after another, are each asked by the title's other words (``own_word``:
  none in over half the nodes), which need no floor.

CPU is what to compare on a shared box; medians over the runs. Lexical (``OSK_SEMANTIC=0``).
Run by hand: ``nice -n 5 python bench/fresh_after_write.py VAULT [--runs 5] [--imports 2]``;
``--against DIR`` runs the fresh searches and the server from the osk source in DIR
(another checkout) instead: the same command before and after a change.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from scale_bench import OSK_CHILD, child, env_for_osk, peak_mb  # noqa: E402

SERVER_CHILD = """
import json, sys
from pathlib import Path
from osk.calls.request import NewNode, NodeEdit
from osk.engine.core import Engine

engine = Engine.open(Path(sys.argv[1]), cwd=Path(sys.argv[1]), watch=True)
engine.warm()
engine.search("warm up")
print("ready", flush=True)
for line in sys.stdin:
    call = json.loads(line)
    if call["do"] == "create":
        engine.create_node(NewNode(call["title"], "A node the bench's server writes",
                                   call["body"], space="domain", cluster="bench writes",
                                   drafter="bench", hub_summary="What the bench writes."))
    elif call["do"] == "update":
        engine.update_node(call["title"], NodeEdit(old_text=call["old"], new_text=call["new"]))
    elif call["do"] == "next":
        engine.read_node(call["title"])
        engine.search(call["title"])
    print("ok", flush=True)
"""


CAPTURE_CHILD = """
import sys
from pathlib import Path
from osk.capture import raw
from osk.provenance.sessions import open_session
from osk.store.vault import Vault

vault = Vault(Path(sys.argv[1]))
key = open_session(vault, Path.cwd(), None).key.key  # the fresh searches' session's
raw.append_round(vault, key, "bench-conversation", raw.RoundInput(
    user=f"what about the {sys.argv[2]} words", assistant=f"the {sys.argv[2]} words, captured",
    host="claude", completion=f"bench-{sys.argv[2]}", at="2026-12-05T10:00+00:00"))
"""


class Server:
    """A child holding one engine, as `osk mcp` does, that writes when asked."""

    def __init__(self, vault: Path, env: dict[str, str]) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", SERVER_CHILD, str(vault)],
                                        cwd=vault, env=env, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)
        self._expect("ready")

    def ask(self, **call: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(call) + "\n")
        self.process.stdin.flush()
        self._expect("ok")

    def _expect(self, word: str) -> None:
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        if line != word:
            raise SystemExit(f"the server child said {line!r}, not {word!r}")

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=120)


def fresh(vault: Path, query: str, env: dict[str, str], cwd: Path | None = None
          ) -> dict[str, Any]:
    """One fresh `osk search` child, run in ``cwd`` (its session's project; the vault)."""
    wall, cpu, done = child([sys.executable, "-c", OSK_CHILD, str(vault), query],
                            cwd or vault, env)
    return {"cpu_ms": cpu * 1000, "wall_ms": wall * 1000, "peak_mb": peak_mb(done.stderr),
            "path": "store" if "PATH store" in done.stderr else "engine",
            "hits": len(json.loads(done.stdout)["hits"])}


def import_one(vault: Path, number: int, tag: str, env: dict[str, str]) -> None:
    source = vault.parent / f"fresh-after-write-{tag}-{number}.jsonl"
    source.write_text(json.dumps({
        "title": f"bench import {tag} {number}", "summary": "One node imported by the bench.",
        "body": f"imported {tag} words {number}", "space": "domain",
        "cluster": "bench imports"}) + "\n", encoding="utf-8")
    child([sys.executable, "-m", "osk", "--vault", str(vault), "import", str(source)],
          vault, env)
    source.unlink()


# Every bench title holds "import" (or "imports", the same stem): a word in over half the
# nodes, whose idf floor after a hand edit is summed from the counts of document frequencies
# on disk (or found by the engine). The title's other words are in under half of them.
def own_word(word: str) -> bool:
    return word != "bench" and not word.startswith("import")


def hand_edit(vault: Path, rng: random.Random) -> str:
    """Rewrite one node by rename, as an editor saves; the query that finds it."""
    folder = vault / "Domain"
    clusters = sorted(path for path in folder.iterdir()  # the vault's own, not this bench's
                      if path.is_dir() and not path.name.startswith("bench "))
    files = sorted(next(path for path in clusters if any(path.glob("*.md"))).glob("*.md"))
    node = rng.choice(files)
    temporary = node.with_name(f".{node.name}.edit")
    temporary.write_text(node.read_text(encoding="utf-8") + "\nedited by hand\n",
                         encoding="utf-8")
    os.replace(temporary, node)
    return node.stem


def queries(vault: Path, count: int, rng: random.Random) -> list[str]:
    """Two title words of nodes of the vault: words it holds."""
    titles = sorted(path.stem for path in (vault / "Domain").glob("*/*.md"))
    words = [word for title in rng.sample(titles, min(count * 4, len(titles)))
             for word in title.split()[2:]]
    return [" ".join(rng.sample(words, 2)) for _ in range(count)]


def summary(label: str, samples: list[dict[str, Any]]) -> str:
    cpu = statistics.median(sample["cpu_ms"] for sample in samples)
    wall = statistics.median(sample["wall_ms"] for sample in samples)
    peak = max(sample["peak_mb"] for sample in samples)
    store = sum(sample["path"] == "store" for sample in samples)
    hits = min(sample["hits"] for sample in samples)
    return (f"{label:<44} CPU {cpu:7.0f} ms  wall {wall:7.0f} ms  peak {peak:5.0f} MB  "
            f"{store}/{len(samples)} from the store, >= {hits} hits")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("vault", type=Path)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--imports", type=int, default=2, help="rounds with an `osk import`")
    parser.add_argument("--against", type=Path, help="run osk from the source in this folder")
    parser.add_argument("--cwd", type=Path, help="where the fresh searches run (a project "
                        "whose rounds the vault holds; default the vault)")
    args = parser.parse_args()
    vault = args.vault.resolve()
    env = env_for_osk()
    if args.against:
        env["PYTHONPATH"] = str(args.against.resolve())
    rng = random.Random(26)
    tag = f"{time.time_ns() % 10**6:06d}"
    asked = queries(vault, args.runs, rng)
    rows: dict[str, list[dict[str, Any]]] = {}
    fresh(vault, asked[0], env, args.cwd)  # bytecode and page cache, and a look recorded
    server = Server(vault, env)
    try:
        for number, query in enumerate(asked):
            rows.setdefault("no write before it", []).append(
                fresh(vault, query, env, args.cwd))
            title = f"bench write {tag} {number}"
            server.ask(do="create", title=title, body=f"written {tag} words {number}\n")
            rows.setdefault("right after the server's create", []).append(
                fresh(vault, title, env, args.cwd))
            server.ask(do="next", title=title)
            rows.setdefault("after the server's next calls", []).append(
                fresh(vault, title, env, args.cwd))
            server.ask(do="update", title=title, old=f"words {number}",
                       new=f"words {number} edited")
            rows.setdefault("right after the server's update", []).append(
                fresh(vault, f"{title} edited", env, args.cwd))
            word = f"captured{tag}x{number}"
            child([sys.executable, "-c", CAPTURE_CHILD, str(vault), word], args.cwd or vault,
                  env)
            rows.setdefault("right after a captured round", []).append(
                fresh(vault, word, env, args.cwd))
            if number < args.imports:
                import_one(vault, number, tag, env)
                rows.setdefault("right after `osk import` of one node", []).append(
                    fresh(vault, f"bench import {tag} {number}", env, args.cwd))
        rows["right after a hand edit by rename (once)"] = [
            fresh(vault, hand_edit(vault, rng), env, args.cwd)]
    finally:
        server.close()
    for _ in asked:
        rows.setdefault("hand edits by rename, one after another", []).append(
            fresh(vault, hand_edit(vault, rng), env, args.cwd))
    for _ in asked:  # the same, each asked by the title's own words (``own_word``)
        own = " ".join(word for word in hand_edit(vault, rng).split() if own_word(word))
        rows.setdefault("the same, asked by the title's own words", []).append(
            fresh(vault, own, env, args.cwd))
    source = f" (osk from {args.against})" if args.against else ""
    print(f"fresh `osk search` in {vault}{source}, load {os.getloadavg()[0]:.1f}:")
    for label, samples in rows.items():
        print(summary(label, samples))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
