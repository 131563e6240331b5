"""The server's top-k on arrays (``round_arrays.top``) returns exactly what the pure top-k
(``round_postings.top``) returns: the same rounds, the same scores to the bit and the same
order (ties by row), for random queries, any k, the neighbours' words weighed or not, rounds
refused by ``accept``, removed rounds' dead postings, counts and lengths past what a posting
holds, and any batch size; so does its search that reads every posting of a query of few
(``_Every``). A run with the arrays' bounds cut, or with a posting's gain worked out in
another order, must find a difference (the comparison has teeth). A hook's query never loads
numpy; a watched index's does."""

from __future__ import annotations

import random
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
from test_search_round_pruning import KEYS, Rounds, grown

from osk.capture import raw
from osk.search import round_arrays, round_postings
from osk.search.round_postings import LONGEST, top
from osk.search.rounds import CONTEXT_WEIGHT, RoundIndex
from osk.store.vault import Vault

SEED = 41
TRIALS = 3  # each with its own batch sizes and reading budget
QUERIES = 10
KS = (1, 3, 10, 40)

Accept = Callable[[str, str, int, str], bool]


@pytest.fixture
def tiny_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of 4 postings, a term put in order once half fresh: a query crosses many
    blocks, batches and bounds."""
    monkeypatch.setattr(round_postings, "BLOCK", 4)
    monkeypatch.setattr(round_postings, "DOUBLING", 2)
    monkeypatch.setattr(round_postings, "FEW", 2)
    monkeypatch.setattr(round_postings, "FRESH_SHARE", 2)
    monkeypatch.setattr(round_arrays, "SMALL", 0)  # these few rounds on arrays all the same
    monkeypatch.setattr(round_arrays, "EVERY", 0)  # read by bounds (a test below reads all)


def built(vault: Vault, rng: random.Random) -> Rounds:
    """Rounds with ties, a word said more times than a posting counts, a round longer than a
    posting's length holds (it and its neighbours), appends (each record's last round
    re-indexed: dead postings), a record rewritten and one removed."""
    rounds = grown(vault, rng)
    rounds.append("harbor", "talk-1", " ".join(rng.choices(rounds.words, k=LONGEST + 10)))
    rounds.append("harbor", "talk-1")
    RoundIndex(vault).refresh()
    for _ in range(40):
        rounds.append(rng.choice(KEYS), rng.choice(("talk-0", "talk-1", "talk-2")))
    changed = vault.raw_dir / "atlas" / "talk-0.md"
    changed.write_text(changed.read_text(encoding="utf-8").replace(
        f" {rounds.words[1]} ", " "), encoding="utf-8")
    (vault.raw_dir / "delta" / "talk-0.md").unlink()
    RoundIndex(vault).refresh()
    return rounds


def ways(rng: random.Random, db: sqlite3.Connection) -> list[Accept | None]:
    """None (every round held), one that keeps all (rows asked), a key, random rounds."""
    refused = {coordinate for (coordinate,) in db.execute("SELECT coordinate FROM rounds")
               if rng.random() < 0.4}
    return [
        None,
        lambda key, rel, number, coordinate: True,
        lambda key, rel, number, coordinate: key == "harbor",
        lambda key, rel, number, coordinate: coordinate not in refused,
    ]


def differences(db: sqlite3.Connection, rounds: Rounds, rng: random.Random) -> int:
    """Every query, each way asked, by both top-ks; how many differ."""
    differ = 0
    accepts = ways(rng, db)
    for _ in range(QUERIES):
        terms = rounds.query()
        for context in (CONTEXT_WEIGHT, 0.0, round(rng.uniform(0.1, 2.0), 3)):
            for k in KS:
                for accept in accepts:
                    found = round_arrays.top(db, terms, k, context, accept)
                    differ += found != top(db, terms, k, context, accept)
    return differ


def counting(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How often the arrays read a batch and kept the rounds that can still reach."""
    calls = {"_read": 0, "_keep": 0}
    for name in calls:
        method = getattr(round_arrays._Arrays, name)

        def counted(search: object, *args: object, name: str = name,
                    method: Callable[..., None] = method) -> None:
            calls[name] += 1
            method(search, *args)

        monkeypatch.setattr(round_arrays._Arrays, name, counted)
    return calls


def test_the_top_k_on_arrays_equals_the_pure_one(vault: Vault, tiny_blocks: None,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(SEED)
    rounds = built(vault, rng)
    calls = counting(monkeypatch)
    with sqlite3.connect(RoundIndex(vault).path) as db:
        descs = [desc for (data,) in db.execute("SELECT data FROM postings")
                 for desc in round_postings._decode(data)[1]]
        assert any(desc >> 24 == round_postings.CAPPED for desc in descs)
        assert any(desc & 0xFFFF == LONGEST for desc in descs)
        assert db.execute("SELECT count(*) FROM vocab WHERE postings > any").fetchone()[0]
        for _ in range(TRIALS):
            monkeypatch.setattr(round_arrays, "FIRST", rng.choice((1, 4, 16)))
            monkeypatch.setattr(round_arrays, "BATCH", rng.choice((4, 16, 64)))
            monkeypatch.setattr(round_arrays, "POSTINGS_A_ROUND", rng.choice((1, 8, 64)))
            monkeypatch.setattr(round_arrays, "POSTINGS_A_STATEMENT", rng.choice((0, 4)))
            monkeypatch.setattr(round_arrays, "FINISH_CHUNK", rng.choice((1, 3, 32)))
            monkeypatch.setattr(round_arrays, "ASKED", rng.choice((0, 2, 40)))
            assert differences(db, rounds, rng) == 0
        many = rng.sample(rounds.words[:60], round_arrays.TERMS + 4)  # more than a slot marks
        assert round_arrays.top(db, many, 10, CONTEXT_WEIGHT, None) == top(
            db, many, 10, CONTEXT_WEIGHT, None) != []
    assert calls["_read"] > 0 and calls["_keep"] > 0  # the arrays read on past the k-th
    slots = round_arrays._ROWS  # every slot a query touched set back
    assert not slots.sums.any() and not slots.masks.any() and not slots.alive.any()
    assert slots.unsure is not None and not slots.unsure.any()


def test_reading_every_posting_equals_the_pure_top_k(vault: Vault, tiny_blocks: None,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(SEED)
    rounds = built(vault, rng)  # capped counts and lengths, dead postings, a removed record
    calls = counting(monkeypatch)
    every = {"run": 0}
    run = round_arrays._Every.run

    def counted(search: round_arrays._Every) -> list[tuple[int, float]]:
        every["run"] += 1
        return run(search)

    monkeypatch.setattr(round_arrays._Every, "run", counted)
    monkeypatch.setattr(round_arrays, "EVERY", 1 << 30)
    with sqlite3.connect(RoundIndex(vault).path) as db:
        for _ in range(TRIALS):
            monkeypatch.setattr(round_arrays, "ASKED", rng.choice((0, 2, 40)))
            assert differences(db, rounds, rng) == 0
    assert every["run"] > 0 and calls["_read"] == 0
    slots = round_arrays._ROWS  # every slot a query touched set back
    assert not slots.sums.any() and not slots.masks.any()


def test_the_comparison_finds_a_gain_worked_out_in_another_order(
        vault: Vault, tiny_blocks: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a posting gives, as the arrays' bounds once worked it out (the length's part as
    one product and sum): equal but for the last bits, which a score read off postings must
    not differ in."""
    rng = random.Random(SEED)
    rounds = built(vault, rng)

    def reordered(f: Any, length: Any, avgdl: float, weight: float) -> Any:
        norm = length * (round_postings.K1 * round_postings.B / avgdl)
        norm += round_postings.K1 * (1 - round_postings.B)
        norm += f
        return f * (weight * (round_postings.K1 + 1.0)) / norm

    monkeypatch.setattr(round_arrays, "_gains", reordered)
    monkeypatch.setattr(round_arrays, "EVERY", 1 << 30)
    with sqlite3.connect(RoundIndex(vault).path) as db:
        assert differences(db, rounds, rng) > 0


def test_the_comparison_finds_the_arrays_bounds_cut_short(vault: Vault, tiny_blocks: None,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    rng = random.Random(SEED)
    rounds = built(vault, rng)
    bounds = round_arrays._Arrays._bounds
    monkeypatch.setattr(round_arrays._Arrays, "_bounds",
                        lambda search, rows, left: bounds(search, rows, left) * 0.5)
    with sqlite3.connect(RoundIndex(vault).path) as db:
        assert differences(db, rounds, rng) > 0


def test_a_query_while_another_holds_the_slots_or_of_few_postings_takes_the_pure_top_k(
        vault: Vault, tiny_blocks: None, monkeypatch: pytest.MonkeyPatch) -> None:
    rounds = built(vault, random.Random(SEED))
    calls = counting(monkeypatch)
    terms = rounds.query()
    with sqlite3.connect(RoundIndex(vault).path) as db:
        with round_arrays._ROWS.lock:
            assert round_arrays.top(db, terms, 5, CONTEXT_WEIGHT, None) == top(
                db, terms, 5, CONTEXT_WEIGHT, None) != []
        assert calls["_read"] == 0
        held = sum(postings for (postings,) in db.execute(
            f"SELECT postings FROM vocab WHERE term IN ({','.join('?' * len(terms))})", terms))
        monkeypatch.setattr(round_arrays, "SMALL", held + 1)
        assert round_arrays.top(db, terms, 5, CONTEXT_WEIGHT, None) == top(
            db, terms, 5, CONTEXT_WEIGHT, None)
        assert calls["_read"] == 0
        monkeypatch.setattr(round_arrays, "SMALL", held)
        assert round_arrays.top(db, terms, 5, CONTEXT_WEIGHT, None) == top(
            db, terms, 5, CONTEXT_WEIGHT, None)
        assert calls["_read"] > 0
        monkeypatch.setattr(round_arrays, "EVERY", held)  # as many as it holds: all read
        reads = calls["_read"]
        assert round_arrays.top(db, terms, 5, CONTEXT_WEIGHT, None) == top(
            db, terms, 5, CONTEXT_WEIGHT, None)
        assert calls["_read"] == reads


def test_a_hook_s_query_never_loads_numpy_and_a_watched_index_s_ranks_the_same(
        vault: Vault) -> None:
    """The prompt-submit hook queries an unwatched index: the pure top-k, standard library
    only. The server's engine holds a watched one: the top-k on arrays, the same rounds."""
    for number in range(12):
        raw.append_round(vault, "atlas", "talk", raw.RoundInput(
            user=f"kestrel number {number} hovers", assistant="seen over the ridge" * number,
            host="claude", completion=f"c-{number}", at="2026-03-14T10:00+00:00"))
    script = "\n".join([
        "import sys",
        "from pathlib import Path",
        "from osk.search.rounds import RoundIndex",
        "from osk.store.vault import Vault",
        f"vault = Vault(Path({str(vault.root)!r}))",
        "def found(index):",
        "    return [(h.coordinate, h.score) for h in",
        "            index.search('kestrel ridge', k=5, visible=lambda key: True)]",
        "hook = found(RoundIndex(vault))",
        "print(sorted({'numpy', 'osk.search.round_arrays'} & set(sys.modules)))",
        "watched = RoundIndex(vault, watch=True)",
        "print(found(watched) == hook != [])",
        "print(sorted({'numpy', 'osk.search.round_arrays'} & set(sys.modules)))",
    ])
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:3] == [
        "[]", "True", "['numpy', 'osk.search.round_arrays']"]
