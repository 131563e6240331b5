"""The round index's top-k (``round_postings.top``) returns exactly what FTS5's ``bm25(terms,
1.0, context)`` returns when it scores every round holding a query term: the same rounds, the
same scores to the bit and the same order (ties by row), with a key filter, a conversation's
last rounds skipped, the rounds' own words only (context 0), and through appends (fresh blocks,
a re-indexed round's dead postings), a record rewritten and a record removed, and a word said
more times than a posting counts (bounded by BM25's supremum). Blocks are made
tiny here so that every query crosses many of them and the bounds decide; a run with the
bounds cut must find a difference (the comparison has teeth)."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Callable

import pytest

from osk.capture import raw
from osk.search import round_postings
from osk.search.round_postings import CAPPED, top
from osk.search.rounds import CONTEXT_WEIGHT, RoundIndex, round_terms
from osk.search.tokenize import tokenize_prose
from osk.store.vault import Vault

SEED = 27
KEYS = ("atlas", "harbor", "delta")
QUERIES = 30

Accept = Callable[[str, str, int, str], bool]


def vocabulary(rng: random.Random, size: int) -> list[str]:
    """Made-up words that the round index keeps as they are."""
    words: list[str] = []
    while len(words) < size:
        word = "".join(rng.choice("bdfgklmnprstvz") + rng.choice("aeiou")
                       for _ in range(rng.randint(2, 4)))
        if word not in words and tokenize_prose(word) == [word]:
            words.append(word)
    return words


class Rounds:
    def __init__(self, vault: Vault, rng: random.Random) -> None:
        self.vault, self.rng = vault, rng
        self.words = vocabulary(rng, 150)
        self.zipf = [1 / (i + 1) for i in range(len(self.words))]
        self.serial = 0

    def text(self, low: int, high: int) -> str:
        rng = self.rng
        if rng.random() < 0.2:  # one word many times: a high count
            return " ".join([rng.choice(self.words)] * rng.randint(2, 9))
        return " ".join(rng.choices(self.words, self.zipf, k=rng.randint(low, high)))

    def append(self, key: str, conversation: str, user: str | None = None) -> None:
        self.serial += 1
        same = self.rng.random() < 0.15  # a round like another: equal scores
        answer = "ok" if same or user else self.text(0, 30)
        user = user or ("kosa bani" if same else self.text(1, 12))
        raw.append_round(self.vault, key, conversation, raw.RoundInput(
            user=user, assistant=answer, completion=f"c-{self.serial}",
            at=f"2026-0{1 + self.serial % 9}-1{self.serial % 10}T10:00+00:00"))

    def query(self) -> list[str]:
        rng = self.rng
        rare = rng.choices(self.words[40:50], k=rng.randint(0, 2))
        common = rng.choices(self.words[:30], self.zipf[:30], k=rng.randint(1, 4))
        return sorted(set(rare + common))


def as_text(db: sqlite3.Connection) -> list[tuple[int, str, str]]:
    """Each round's terms as text (its own words, its neighbours'), from its forward list:
    BM25 reads a column's counts and length, not its order."""
    rows = [row for (row,) in db.execute("SELECT row FROM forward")]
    return [(row, *(" ".join(term for term, *counts in held for _ in range(counts[at]))
                    for at in (0, 1))) for row, held in round_terms(db, rows).items()]


class Fts5:
    """FTS5 over the index's stored terms as they are now (built once, asked many times)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.fts = sqlite3.connect(":memory:")
        self.fts.execute("CREATE VIRTUAL TABLE t USING fts5(body, context)")
        self.fts.executemany("INSERT INTO t (rowid, body, context) VALUES (?, ?, ?)",
                             as_text(db))
        self.rows = {row: found for row, *found in db.execute(
            "SELECT row, key, rel, number, coordinate FROM rounds")}

    def top(self, terms: list[str], k: int, context: float,
            accept: Accept | None) -> list[tuple[int, float]]:
        """Every match scored and ordered, then filtered."""
        match = " OR ".join(f'"{term}"' for term in terms)
        ranked = self.fts.execute(
            "SELECT rowid, -bm25(t, 1.0, ?) AS s FROM t WHERE t MATCH ? ORDER BY s DESC, rowid",
            (context, match if context else f"body : ({match})")).fetchall()
        return [(row, value) for row, value in ranked
                if accept is None or accept(*self.rows[row])][:k]


def by_fts5(db: sqlite3.Connection, terms: list[str], k: int, context: float,
            accept: Accept | None) -> list[tuple[int, float]]:
    return Fts5(db).top(terms, k, context, accept)


def compared(vault: Vault, rounds: Rounds) -> int:
    """Every query, each way asked, by ``top`` and by FTS5; how many differ."""
    index = RoundIndex(vault)
    index.refresh()
    talk = next(str(p.relative_to(vault.root)) for p in vault.raw_dir.rglob("talk-0.md"))
    ways: list[Accept | None] = [
        None,  # every round held: no round's row asked for (dead postings' rows still gone)
        lambda key, rel, number, coordinate: True,
        lambda key, rel, number, coordinate: key == "harbor",
        lambda key, rel, number, coordinate: not (rel == talk and number >= 3),
    ]
    differ = 0
    with sqlite3.connect(index.path) as db:
        fts5 = Fts5(db)
        for _ in range(QUERIES):
            terms = rounds.query()
            for context in (CONTEXT_WEIGHT, 0.0):
                for k in (1, 5, 20):
                    for accept in ways:
                        found = top(db, terms, k, context, accept)
                        assert len(found) == len({row for row, _ in found})
                        differ += found != fts5.top(terms, k, context, accept)
    return differ


@pytest.fixture
def tiny_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of 4 postings, few left to score whole, a term put in order once half fresh:
    a query crosses many blocks and ends on its bounds."""
    monkeypatch.setattr(round_postings, "BLOCK", 4)
    monkeypatch.setattr(round_postings, "DOUBLING", 2)
    monkeypatch.setattr(round_postings, "FEW", 2)
    monkeypatch.setattr(round_postings, "FRESH_SHARE", 2)


def grown(vault: Vault, rng: random.Random) -> Rounds:
    rounds = Rounds(vault, rng)
    for key in KEYS:
        for conversation in ("talk-0", "talk-1"):
            for _ in range(40):
                rounds.append(key, conversation)
    # a word more times than a posting counts (its bound is BM25's supremum), in a round and
    # so in its neighbours' words
    rounds.append("atlas", "talk-1", " ".join([rounds.words[45]] * (CAPPED + 20)))
    rounds.append("atlas", "talk-1")
    return rounds


def test_pruned_rounds_equal_fts5_scoring_every_round(vault: Vault, tiny_blocks: None) -> None:
    rng = random.Random(SEED)
    rounds = grown(vault, rng)
    assert compared(vault, rounds) == 0
    with sqlite3.connect(RoundIndex(vault).path) as db:
        capped = [data for (data,) in db.execute("SELECT data FROM postings")
                  if any(desc >> 24 == CAPPED for desc in round_postings._decode(data)[1])]
    assert capped  # the capped count is among the postings the queries read
    for _ in range(60):  # appends: fresh blocks, and each record's last round re-indexed
        rounds.append(rng.choice(KEYS), rng.choice(("talk-0", "talk-1", "talk-2")))
    assert compared(vault, rounds) == 0
    with sqlite3.connect(RoundIndex(vault).path) as db:
        assert db.execute("SELECT count(*) FROM heads WHERE fresh").fetchone()[0] > 0
    changed = vault.raw_dir / "harbor" / "talk-1.md"
    text = changed.read_text(encoding="utf-8")
    word = rounds.words[0]
    changed.write_text(text.replace(f" {word} ", " "), encoding="utf-8")  # read anew
    (vault.raw_dir / "delta" / "talk-0.md").unlink()
    assert compared(vault, rounds) == 0


def test_the_comparison_finds_bounds_cut_short(vault: Vault, tiny_blocks: None,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    rounds = grown(vault, random.Random(SEED))
    reach = round_postings.reach
    monkeypatch.setattr(round_postings, "reach", lambda *args: reach(*args) * 0.5)
    monkeypatch.setattr(round_postings, "_KEPT", {})  # no block's most kept from before
    assert compared(vault, rounds) > 0


def test_the_comparison_finds_a_written_best_cut_short(vault: Vault, tiny_blocks: None,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """What a block's best posting gave when written bounds the block (``drifted``): cut, the
    rounds found differ, so the comparison above holds that bound to FTS5's scores too."""
    rounds = grown(vault, random.Random(SEED))
    drifted = round_postings.drifted
    monkeypatch.setattr(round_postings, "drifted", lambda *args: drifted(*args) * 0.5)
    assert compared(vault, rounds) > 0


def test_a_posting_gives_no_more_than_its_written_best_carried_to_the_length_of_now() -> None:
    """Whatever a posting's counts and length, the average length it was written at and the
    one asked at, and a context weight not above the written one: what it gives now is not
    above ``drifted`` of what it gave then (and is that when the average did not move)."""
    rng = random.Random(SEED)
    for _ in range(20_000):
        own, around = rng.choice((0, 1, 2, 5, 40)), rng.choice((0, 1, 3, 9))
        if not own and not around:
            continue
        length = rng.randint(max(own + around, 1), 3000)
        desc = own << 24 | around << 16 | length
        then, now = rng.uniform(5.0, 900.0), rng.choice((rng.uniform(5.0, 900.0), None))
        now = then if now is None else now
        weight = rng.choice((CONTEXT_WEIGHT, 1.0))
        gave = round_postings.reach(desc, weight, then)
        bound = round_postings.drifted(gave, then, now)
        for context in (weight, weight * rng.random(), 0.0):
            assert round_postings.reach(desc, context, now) <= bound * (1 + 1e-12)
        if now == then:
            assert bound == pytest.approx(gave, rel=1e-12)


@pytest.mark.parametrize(("largest", "width"), [(255, 1), (256, 2), (65535, 2), (65536, 4)])
def test_a_forward_list_gives_back_every_count_at_the_narrowest_width(largest: int,
                                                                      width: int) -> None:
    """A round is scored whole from its forward list, so its counts must come back exact
    whatever their size (each list in the narrowest width holding its largest count), a term
    it does not hold as (0, 0)."""
    data = round_postings.forward(1234, [2, 9, 70_000], [1, 0, largest], [1, 2, 3])
    assert len(data) == 8 + 3 * 4 + 2 * 3 * width
    assert round_postings.counts_in(data, [70_000, 9, 5, 2, 80_000]) == (
        1234, [(largest, 3), (0, 2), (0, 0), (1, 1), (0, 0)])
    assert round_postings.counts_in(round_postings.forward(0, [], [], []), [1]) == (
        0, [(0, 0)])


def test_a_term_put_in_order_again_keeps_only_live_rounds_postings(vault: Vault) -> None:
    """An append re-indexes the record's last round (its neighbours' words change), leaving
    its old postings dead; a term put in order again drops them, and one with none dead skips
    the look-up of its rounds: every small term (always put in order) then holds exactly one
    posting for each live round holding it."""
    for number in range(6):
        raw.append_round(vault, "atlas", "talk", raw.RoundInput(
            user=f"kestrel number {number} hovers", assistant="seen over the ridge",
            host="claude", completion=f"c-{number}", at="2026-03-14T10:00+00:00"))
        RoundIndex(vault).refresh()
    with sqlite3.connect(RoundIndex(vault).path) as db:
        live = {row for (row,) in db.execute("SELECT row FROM rounds")}
        held: dict[int, list[int]] = {}
        for place, data in db.execute("SELECT place, data FROM postings"):
            held.setdefault(place // round_postings.PLACES, []).extend(
                round_postings._decode(data)[0])
        vocab = list(db.execute("SELECT id, any, postings FROM vocab"))
    assert vocab and len(live) == 6
    for ident, any_, postings in vocab:
        assert sorted(held[ident]) == sorted(set(held[ident]) & live) and postings == any_


def test_fresh_blocks_are_put_in_impact_order_as_runs_merged_two_of_a_level_at_a_time(
        vault: Vault, tiny_blocks: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rounds added a few at a time gather in fresh blocks in arrival order until ``RUN`` of
    them are put in impact order among themselves (a run); two runs of one level merge into
    one of the next. Every posting stays (the FTS5 comparison) and each run is in impact
    order, block after block."""
    monkeypatch.setattr(round_postings, "FRESH_SHARE", 1)  # never put in order again
    rng = random.Random(SEED + 1)
    rounds = grown(vault, rng)
    RoundIndex(vault).refresh()
    levels: set[int] = set()
    for _ in range(12):
        for _ in range(6):
            rounds.append(rng.choice(KEYS), rng.choice(("talk-0", "talk-1")))
        RoundIndex(vault).refresh()
        with sqlite3.connect(RoundIndex(vault).path) as db:
            for ident, postings in db.execute("SELECT id, postings FROM vocab").fetchall():
                heads = db.execute("SELECT block, fresh, size FROM heads WHERE term=? "
                                   "ORDER BY block", (ident,)).fetchall()
                assert sum(size for *_, size in heads) == postings
                marks = [fresh for _, fresh, _ in heads if fresh]
                runs = [mark for at, mark in enumerate(marks)
                        if mark > round_postings.FRESH and (at == 0 or marks[at - 1] != mark)]
                assert runs == sorted(runs, reverse=True) and len(set(runs)) == len(runs)
                assert marks == sorted(marks, reverse=True)  # runs first, arrival order last
                assert marks.count(round_postings.FRESH) < round_postings.RUN
                levels.update(runs)
                for mark in runs:
                    assert in_impact_order([desc for block, fresh, _ in heads if fresh == mark
                                            for desc in descriptors(db, ident, block)])
    assert max(levels) > round_postings.FRESH + 2  # runs merged twice over
    assert compared(vault, rounds) == 0


def descriptors(db: sqlite3.Connection, term: int, block: int) -> list[int]:
    (data,) = db.execute("SELECT data FROM postings WHERE place=?",
                         (round_postings.place(term, block),)).fetchone()
    return list(round_postings._decode(data)[1])


def in_impact_order(descs: list[int]) -> bool:
    """No posting can give more than one before it whatever the average length: none has a
    larger weighted count and no longer a round, or as large a count and a shorter round
    (counts compared to a float sum's last bits: 2 + 0.4 and 6 x 0.4 are one count)."""
    seen = [round((desc >> 24) + CONTEXT_WEIGHT * ((desc >> 16) & 0xFF), 9) for desc in descs]
    return not any((seen[j] > seen[i] and descs[j] & 0xFFFF <= descs[i] & 0xFFFF)
                   or (seen[j] >= seen[i] and descs[j] & 0xFFFF < descs[i] & 0xFFFF)
                   for i in range(len(descs)) for j in range(i + 1, len(descs)))


def test_a_word_in_most_rounds_is_read_only_when_it_could_change_the_result(
        vault: Vault, tiny_blocks: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A term's heads are read when the top-k first reads it: a word in every round (its idf at
    the floor) asked beside a rare one leaves its blocks' heads unread, and the rounds found
    are still FTS5's; asked alone, it is read."""
    for number in range(24):
        rare = " osprey" if number % 6 == 0 else ""
        raw.append_round(vault, "atlas", "talk", raw.RoundInput(
            user=f"kestrel flew{rare} over {number} hills", assistant="seen",
            host="claude", completion=f"c-{number}", at="2026-03-14T10:00+00:00"))
    index = RoundIndex(vault)
    index.refresh()
    loaded: list[int] = []
    load = round_postings._List.load

    def counted(lst: round_postings._List, bounds: list[tuple[float, int, int]]) -> None:
        loaded.append(lst.term)
        load(lst, bounds)

    monkeypatch.setattr(round_postings._List, "load", counted)
    with sqlite3.connect(index.path) as db:
        ids = dict(db.execute("SELECT term, id FROM vocab WHERE term IN ('kestrel', 'osprey')"))
        assert db.execute("SELECT count(*) FROM heads WHERE term=?",
                          (ids["kestrel"],)).fetchone()[0] > 1
        for k in (1, 4):
            terms = ["kestrel", "osprey"]
            assert top(db, terms, k, CONTEXT_WEIGHT, None) == by_fts5(
                db, terms, k, CONTEXT_WEIGHT, None)
        assert set(loaded) == {ids["osprey"]}
        assert top(db, ["kestrel"], 3, CONTEXT_WEIGHT, None) == by_fts5(
            db, ["kestrel"], 3, CONTEXT_WEIGHT, None)
        assert ids["kestrel"] in loaded
