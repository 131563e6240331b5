"""``osk.store.fastclass.dataclass`` behaves as ``dataclasses.dataclass`` for everything osk's
hook path asks of it: each case makes the same class with both decorators and compares what
they do, then checks that making one costs no compiled code."""

from __future__ import annotations

import dataclasses
from dataclasses import field
from typing import ClassVar

import pytest

from osk.store import fastclass

DECORATORS = {"stdlib": dataclasses.dataclass, "fast": fastclass.dataclass}


def made(which: str) -> dict[str, type]:
    make = DECORATORS[which]

    @make(frozen=True)
    class Point:
        x: int
        y: int = 0
        tags: list[str] = field(default_factory=list, compare=False)
        note: str = field(default="", repr=False)
        LIMIT: ClassVar[int] = 3

    @make
    class Counter:
        name: str
        seen: dict[str, int] = field(default_factory=dict)
        total: int = field(init=False, default=0)

        def __post_init__(self) -> None:
            self.total = sum(self.seen.values())

    @make(eq=False)
    class Handle:
        path: str

    @make(frozen=True)
    class Labelled(Point):
        label: str = "p"

    @make(frozen=True)
    class Keyed:
        key: str
        extra: int = 0

        def __hash__(self) -> int:
            return hash(self.key)

    return {"Point": Point, "Counter": Counter, "Handle": Handle, "Labelled": Labelled,
            "Keyed": Keyed}


def outcome(call):
    try:
        return ("ok", call())
    except Exception as exc:  # the kind of refusal is what is compared
        return ("raised", type(exc))


def behaviour(kinds: dict[str, type]) -> list[object]:
    """Everything observable about the classes, as plain values."""
    Point, Counter, Handle, Labelled, Keyed = (kinds[n] for n in
                                               ("Point", "Counter", "Handle", "Labelled", "Keyed"))
    p = Point(1, 2, ["a"], "hidden")
    seen: list[object] = [
        repr(p).split("(", 1)[1], p == Point(1, 2, ["b"], "other"), p == Point(1, 3),
        p != Point(1, 2), hash(p) == hash(Point(1, 2, ["zzz"])), Point.__match_args__,
        Point.LIMIT, Point.y, "tags" in Point.__dict__,
        outcome(lambda: setattr(p, "x", 5)), outcome(lambda: delattr(p, "y")),
        outcome(lambda: setattr(p, "other", 1)),
        outcome(lambda: Point()), outcome(lambda: Point(1, 2, [], "", 9)),
        outcome(lambda: Point(1, x=2)), outcome(lambda: Point(1, z=2)),
        Point(x=4).tags is not Point(x=4).tags,
        [f.name for f in dataclasses.fields(Point)], dataclasses.asdict(p),
        dataclasses.replace(p, y=7).y, dataclasses.replace(p, y=7).tags,
        dataclasses.is_dataclass(p), dataclasses.astuple(Point(1)),
        repr(Labelled(1, label="q")).split("(", 1)[1],
        [f.name for f in dataclasses.fields(Labelled)], Labelled(1) == Point(1),
    ]
    c = Counter("n", {"a": 2, "b": 3})
    c.name = "m"
    seen += [c.total, repr(c).split("(", 1)[1], c == Counter("m", {"a": 2, "b": 3}),
             Counter.__hash__ is None, outcome(lambda: Counter("n", total=1)),
             dataclasses.replace(c, seen={"z": 1}).total]
    h = Handle("p")
    seen += [h == Handle("p"), h == h, Handle.__hash__ is object.__hash__,
             repr(h).split("(", 1)[1]]
    seen += [hash(Keyed("k", 1)) == hash("k"), Keyed("k", 1) == Keyed("k", 2)]
    return seen


def test_both_decorators_make_classes_that_behave_alike():
    assert behaviour(made("fast")) == behaviour(made("stdlib"))


def test_what_the_hook_path_does_not_use_is_refused_when_the_class_is_made():
    with pytest.raises(TypeError):
        @fastclass.dataclass(order=True)  # type: ignore[call-overload]
        class Ordered:
            x: int
    with pytest.raises(TypeError, match="kw_only"):
        @fastclass.dataclass
        class Keyword:
            x: int = field(kw_only=True)


def test_making_a_class_compiles_no_code(monkeypatch):
    """The point of the module: dataclasses compiles each method with exec; this makes none."""
    import builtins

    calls: list[str] = []
    real = builtins.exec

    def counted(*args, **kwargs):
        calls.append(str(args[0])[:40])
        return real(*args, **kwargs)

    monkeypatch.setattr(builtins, "exec", counted)
    made("fast")
    assert calls == []
    made("stdlib")
    assert calls  # the check can see what dataclasses does
