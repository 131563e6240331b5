"""The steering check (``osk/capture/steering.py``) on text that is memory and text that attacks it.

False alarms: every node of the dev corpus (title, summary and body as one text, as the hooks
check a node), every turn of the LoCoMo development half, and every LoCoMo session as one text
(its turns as ``Speaker: text`` lines, as a captured conversation reads). A node of ordinary
memory that the check flags would be kept out of injection until a person confirms it; the
target is none. Detection: the red-team corpus (``tests/hooks/redteam_corpus.py``) per family, and
how many of its attacks the fence changes at all (``osk/hooks/fence.py``), plus the cost of the
check per KB of text.

Usage: ``python bench/steering_bench.py [--dev DIR] [--locomo DIR] [--show]``.
The figures are recorded in docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "hooks"))

from redteam_corpus import ATTACKS  # noqa: E402

from osk.capture.steering import steering  # noqa: E402
from osk.hooks import fence  # noqa: E402
from osk.provenance import origin  # noqa: E402

DEV = Path("/work/shared/eval/dev")
LOCOMO = Path("/work/shared/eval/locomo-dev")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dev", type=Path, default=DEV)
    parser.add_argument("--locomo", type=Path, default=LOCOMO)
    parser.add_argument("--show", action="store_true", help="print each flagged text")
    args = parser.parse_args()
    memory = {"dev corpus nodes": list(_dev(args.dev)),
              "LoCoMo turns": list(_turns(args.locomo)),
              "LoCoMo sessions": list(_sessions(args.locomo))}
    print("false alarms (ordinary memory flagged as steering)")
    for name, texts in memory.items():
        flagged = [(label, steering(text)) for label, text in texts]
        flagged = [(label, kinds) for label, kinds in flagged if kinds]
        print(f"  {name:<18} {len(flagged):>4} of {len(texts):>5}")
        for label, kinds in flagged if args.show else ():
            print(f"    {label}: {', '.join(kinds)}")
    print("red-team corpus: flagged as steering / changed by the fence / attacks")
    caught, fenced, total = Counter(), Counter(), Counter()
    for attack in ATTACKS:
        total[attack.family] += 1
        caught[attack.family] += bool(steering(attack.text))
        fenced[attack.family] += fence.inline(attack.text, 10**6) != " ".join(
            attack.text.split())
    for family in total:
        print(f"  {family:<40} {caught[family]:>3} / {fenced[family]:>3} / {total[family]:>3}")
    print(f"  {'all':<40} {sum(caught.values()):>3} / {sum(fenced.values()):>3} / "
          f"{sum(total.values()):>3}")
    texts = [text for _, text in memory["dev corpus nodes"]]
    size = sum(len(text.encode("utf-8")) for text in texts) / 1024
    best = min(_timed(texts) for _ in range(5))
    print(f"cost: {best / size * 1e6:.0f} µs per KB over the dev corpus ({size:.0f} KB, "
          f"best of 5)")
    files = [_node_file(text) for text in texts]
    best = min(_timed_origins(files) for _ in range(5))
    print(f"provenance of one shown node (front matter read, citations counted, steering "
          f"checked): {best / len(files) * 1e6:.0f} µs, best of 5 over the dev corpus")
    return 0


def _node_file(text: str) -> str:
    """A dev node as osk writes its file: front matter with two citations, then the body."""
    return ("---\nid: 01a23e00-0000-7000-8000-000000000000\nauthor: agent\ndrafter: m\n"
            "summary: s\nderived-from:\n  - \"[[Other node]]\"\n  - file:README.md\n"
            f"trust: inferred\n---\n{text}\n")


def _timed_origins(files: list[str]) -> float:
    start = time.process_time()
    for text in files:
        origin.read(text, "title", "summary")
    return time.process_time() - start


def _timed(texts: list[str]) -> float:
    start = time.process_time()
    for text in texts:
        steering(text)
    return time.process_time() - start


def _dev(folder: Path) -> Iterator[tuple[str, str]]:
    with open(folder / "corpus.jsonl", encoding="utf-8") as lines:
        for line in lines:
            node = json.loads(line)
            yield node["id"], f"{node['title']}\n{node['summary']}\n{node['body']}"


def _conversations(folder: Path) -> Iterator[tuple[str, dict[str, object]]]:
    for path in sorted(folder.glob("*.json")):
        yield path.stem, json.loads(path.read_text(encoding="utf-8"))


def _turns(folder: Path) -> Iterator[tuple[str, str]]:
    for name, data in _conversations(folder):
        for key, session in data.items():
            if key.startswith("session_") and isinstance(session, list):
                for turn in session:
                    yield f"{name}/{turn['dia_id']}", str(turn["text"])


def _sessions(folder: Path) -> Iterator[tuple[str, str]]:
    for name, data in _conversations(folder):
        for key, session in data.items():
            if key.startswith("session_") and isinstance(session, list):
                yield f"{name}/{key}", "\n".join(f"{t['speaker']}: {t['text']}" for t in session)


if __name__ == "__main__":
    raise SystemExit(main())
