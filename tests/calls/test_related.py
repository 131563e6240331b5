"""The related-nodes rule (``osk.calls.related``) on its own: what it lists, in which order, and
that a node cited by thousands costs it six lookups, not thousands. The engine's and a fresh
read's answers under this rule are compared in tests/reads/test_quick_read.py."""

from __future__ import annotations

from dataclasses import dataclass, field

from osk.calls.related import RELATED, related_nodes


@dataclass
class Near:
    id: str
    scope: str | None = None
    title: str = ""


@dataclass
class Hit:
    id: str
    markers: tuple[str, ...] = ()
    match: str = "text"
    bm25: float = 1.0


@dataclass
class Read:
    id: str = "self"
    title: str = "Self"
    derived_from: list[str] = field(default_factory=list)

    def field(self, name: str) -> str:
        return {"summary": "What it says."}[name]


def listed(node: Read, citers: list[str], hits: list[Hit], *, hidden: str = "",
           pending: str = "") -> tuple[list[tuple[str, str]], list[str], list[int]]:
    """(title, why) of each node listed, every reference looked up, each search's k."""
    looked: list[str] = []
    asked: list[int] = []

    def named(ref: str) -> Near | None:
        looked.append(ref)
        return None if ref.startswith("gone") else Near(ref, "other" if ref == hidden else None,
                                                         ref.title())

    def similar(query: str, k: int) -> list[Hit]:
        assert query == "Self What it says."
        asked.append(k)
        return hits

    found = related_nodes(node, named=named, citing=lambda: citers, similar=similar,
                          shown_title=lambda near: None if near.id == pending else near.title,
                          can_see=lambda scope: scope is None)
    return [(near.title, near.why) for near in found], looked, asked


def test_cited_then_citing_then_similar_each_once_and_what_the_session_may_see():
    node = Read(derived_from=["[[a]]", "file:src/app.py", "[[gone]]", "[[self]]"])
    hits = [Hit("self"), Hit("b"), Hit("old", markers=("superseded",)), Hit("x", bm25=0.0),
            Hit("t", match="title"), Hit("y"), Hit("z")]
    found, looked, asked = listed(node, ["c", "b", "h", "p"], hits, hidden="h", pending="p")
    assert found == [("A", "cited by this node (derived-from)"),
                     ("B", "cites this node (derived-from)"),
                     ("C", "cites this node (derived-from)"),
                     ("X", "similar: close in meaning (semantic search)"),
                     ("T", "similar: a title like its own"),
                     ("Y", "similar: shares its words")]
    assert looked[:6] == ["a", "gone", "self", "b", "c", "h"]  # citers sorted; files skipped
    assert asked == [4]  # three listed: at least three similar ones wanted, one more asked


def test_a_node_cited_by_thousands_looks_up_six_and_searches_for_none():
    citers = [f"n{number:05d}" for number in range(5000)]
    found, looked, asked = listed(Read(), citers, [Hit("s")])
    assert len(found) == RELATED and {why for _, why in found} == {
        "cites this node (derived-from)"}
    assert looked == citers[:RELATED] and asked == []
