"""The session-start digest: the nodes a scope's work uses, as the table of contents a session
starts with, under the same rules as per-prompt recall (isolation, served version, validity,
trust and ``inject_inferred_person``, rejections; cluster hubs are left out).

Nodes are ranked by use, not by file age, so a bulk ``osk import`` of many new files does not
push out the nodes the agents work with. A node's score adds (``Use.score``):

- how many nodes cite it (the hooks' most-cited summary, ``recheck_summary.most_cited``);
- how often agents of this scope read or wrote it lately (``read_node``, ``create_node``,
  ``update_node`` in the MCP server's call log, ``osk.hooks.receipts.CALLS``: its newest
  ``CALLS_TAIL`` bytes);
- an open recheck candidate on it (it needs the agent's attention);
- the person's confirmation (``trust: confirmed``).

Equal scores go newest first. The candidates are bounded whatever the vault's size: the nodes
the signals name, and the newest rows of the scope, of Domain and of Person.

Hook path: standard library and the light search modules only.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from typing import Any

from osk.hooks import receipts
from osk.search.recall_hits import Recalled
from osk.store.fastclass import dataclass
from osk.store.titles import title_key
from osk.store.vault import Vault, is_hub

USED = 6      # nodes of the scope's work: its own scope's and Domain ones
PERSON = 4    # Person facts (inferred ones only if inject_inferred_person)
NEWEST = 4    # per place, this many times the list's length of newest rows are candidates
SIGNALLED = 64  # at most this many nodes named by the signals are looked up
CALLS_TAIL = 64 * 1024  # bytes of the call log read: its newest few hundred calls
USES = frozenset({"read_node", "create_node", "update_node"})


@dataclass(frozen=True)
class Use:
    """What a scope's work shows of a node."""

    cited: int = 0       # nodes citing it
    used: int = 0        # agents' recent reads and writes of it in this scope
    recheck: bool = False  # an open recheck candidate: it cites a changed source
    confirmed: bool = False  # the person confirmed it

    def score(self) -> float:
        return (3 * math.log2(1 + self.cited) + 2 * math.log2(1 + self.used)
                + 3 * self.recheck + self.confirmed)

    def labels(self) -> tuple[str, ...]:
        """What the digest line says of it (the recheck marker says the rest)."""
        shown = [f"cited by {self.cited}"] if self.cited else []
        return (*shown, f"used {self.used}x lately") if self.used else tuple(shown)


@dataclass(frozen=True)
class Digest:
    used: tuple[tuple[Recalled, Use], ...] = ()  # the scope's and Domain nodes, by use
    person: tuple[Recalled, ...] = ()
    held: tuple[dict[str, Any], ...] = ()  # candidates held back, for the receipt

    @property
    def nodes(self) -> tuple[Recalled, ...]:
        return (*(hit for hit, _ in self.used), *self.person)


@dataclass(frozen=True)
class Signals:
    cited: dict[str, int]
    used: Counter[str]
    rechecks: frozenset[str]  # title keys of nodes with an open recheck candidate

    def of(self, hit: Recalled) -> Use:
        return Use(self.cited.get(hit.id, 0), self.used.get(hit.id, 0),
                   title_key(hit.title) in self.rechecks, hit.trust == "confirmed")

    def named(self) -> list[str]:
        """The ids the signals name, the strongest first."""
        ranked = [*self.cited, *(node for node, _ in self.used.most_common())]
        return list(dict.fromkeys(ranked))[:SIGNALLED]


def signals(vault: Vault, scope: str) -> Signals:
    from osk.provenance import recheck_summary

    cited = dict(recheck_summary.most_cited(vault))
    used: Counter[str] = Counter(
        str(call.get("node")) for call in receipts.CALLS.tail(vault, CALLS_TAIL)
        if call.get("tool") in USES and call.get("scope") == scope and call.get("node"))
    notes = [*recheck_summary.scope_notes(vault, scope), *recheck_summary.scope_notes(vault, "")]
    rechecks = frozenset(title_key(str(note.get("citing"))) for note in notes
                         if note.get("citing"))
    return Signals(cited, used, rechecks)


def digest(vault: Vault, scope: str) -> Digest:
    """The nodes the session starts with (empty when there is no recall file yet)."""
    from osk.hooks.recall import per_prompt
    from osk.search import recallfile
    from osk.search.ranking import Ranking, scope_visibility
    from osk.search.recall_hits import recalled_doc

    try:
        db = recallfile.open_reader(vault.state("index"))
    except recallfile.Unusable:
        return Digest()
    try:
        corpus = recallfile.RecallCorpus(db, ())  # its schema checked; no terms to rank
        visible = scope_visibility(vault, scope)
        ranking = Ranking(corpus, scope=scope, visible=visible,  # type: ignore[arg-type]
                          moment=per_prompt.now(), explicit_time=False)
        approvals = corpus.meta.get("approvals")
        allowed = per_prompt.Allowed(vault)
        held: list[dict[str, Any]] = []

        def usable(doc: Any) -> Recalled | None:
            if visible is not None and not visible(doc) or is_hub(doc.path, doc.title):
                return None  # a hub says what its cluster holds: search and read_node find it
            hit = recalled_doc(doc, approvals)
            # superseded (its successor is shown), expired, not yet valid
            reason = ("not-valid" if per_prompt.SKIPPED_MARKERS.intersection(
                ranking.validity_markers(doc)) else allowed.refusal(hit))
            if reason is not None:
                held.append(receipts.held(hit, reason, "digest"))
                return None
            return allowed.shown(hit)

        found = signals(vault, scope)
        hits: dict[str, tuple[Recalled, str]] = {}  # id -> the hit, when it was updated
        looked: set[str] = set()  # a node two signals name is judged (and held back) once
        for doc in _candidates(db, scope, found):
            if doc.id not in looked and (hit := usable(doc)) is not None:
                hits[doc.id] = (hit, doc.updated)
            looked.add(doc.id)
        work = _ranked([h for h in hits.values() if h[0].space != "Person"], found, USED)
        person = _ranked([h for h in hits.values() if h[0].space == "Person"], found, PERSON)
        marked = per_prompt.with_markers(vault, [*work, *person])
        return Digest(tuple((hit, found.of(hit)) for hit in marked[:len(work)]),
                      tuple(marked[len(work):]), tuple(held))
    except (recallfile.Unusable, recallfile.Error, OSError):
        return Digest()
    finally:
        db.close()


def _candidates(db: Any, scope: str, found: Signals) -> Iterable[Any]:
    """The documents worth ranking: those the signals name, and the newest of each place."""
    from osk.search import recallfile

    for node_id in found.named():
        yield from recallfile.documents(db, "id = ?", (node_id,))
    for key in sorted(found.rechecks):
        yield from recallfile.documents(db, "title_key = ?", (key,))
    for where, args, limit in (("space = 'Scope' AND scope = ?", (scope,), USED),
                               ("space = 'Domain'", (), USED),
                               ("space = 'Person'", (), PERSON)):
        yield from recallfile.documents(db, where, args, "updated DESC", limit * NEWEST)


def _ranked(hits: list[tuple[Recalled, str]], found: Signals, limit: int) -> list[Recalled]:
    """The ``limit`` hits of most use; equal ones newest first."""
    newest = [hit for hit, _ in sorted(hits, key=lambda pair: pair[1], reverse=True)]
    return sorted(newest, key=lambda hit: found.of(hit).score(), reverse=True)[:limit]
