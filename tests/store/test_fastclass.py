"""``osk.store.fastclass.dataclass`` behaves as ``dataclasses.dataclass`` for everything osk's
hook path asks of it: each case makes the same class with both decorators and compares what
they do, then checks that making one costs no compiled code."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from dataclasses import field
from typing import ClassVar

import pytest

from osk.store import fastclass

# Each maker: the decorator and the field function its classes are written with (a class made
# by fastclass may be written with either field).
DECORATORS = {"stdlib": (dataclasses.dataclass, dataclasses.field),
              "fast": (fastclass.dataclass, dataclasses.field),
              "fast, its own field": (fastclass.dataclass, fastclass.field)}


def made(which: str, slots: bool = False) -> dict[str, type]:
    make, field = DECORATORS[which]

    @make(frozen=True, slots=slots)
    class Point:
        x: int
        y: int = 0
        tags: list[str] = field(default_factory=list, compare=False)
        note: str = field(default="", repr=False)
        LIMIT: ClassVar[int] = 3

    @make(slots=slots)
    class Counter:
        name: str
        seen: dict[str, int] = field(default_factory=dict)
        total: int = field(init=False, default=0)

        def __post_init__(self) -> None:
            self.total = sum(self.seen.values())

    @make(eq=False)
    class Handle:
        path: str

    @make(frozen=True, slots=slots)
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


def warmed(kinds: dict[str, type]) -> dict[str, type]:
    """The classes after ``fastclass.HOT`` instances each: a fast class's __init__ is compiled
    by then."""
    for _ in range(fastclass.HOT + 1):
        kinds["Point"](1)
        kinds["Counter"]("n")
        kinds["Handle"]("p")
        kinds["Labelled"](1)
        kinds["Keyed"]("k")
    return kinds


def behaviour(kinds: dict[str, type]) -> list[object]:
    """Everything observable about the classes, as plain values."""
    Point, Counter, Handle, Labelled, Keyed = (kinds[n] for n in
                                               ("Point", "Counter", "Handle", "Labelled", "Keyed"))
    p = Point(1, 2, ["a"], "hidden")
    seen: list[object] = [
        repr(p).split("(", 1)[1], p == Point(1, 2, ["b"], "other"), p == Point(1, 3),
        p != Point(1, 2), hash(p) == hash(Point(1, 2, ["zzz"])), Point.__match_args__,
        Point.LIMIT, repr(getattr(Point, "y", None)), "tags" in Point.__dict__,
        Point.__dict__.get("__slots__"), hasattr(p, "__dict__"),
        outcome(lambda: setattr(p, "x", 5)), outcome(lambda: delattr(p, "y")),
        # (a new attribute on a frozen slotted instance: Python 3.11's dataclasses raises
        # TypeError from its own __setattr__, which names the class before slots remade it)
        outcome(lambda: setattr(p, "other", 1))[:1 if hasattr(Point, "__slots__") else 2],
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


@pytest.mark.parametrize("fast", ["fast", "fast, its own field"])
@pytest.mark.parametrize("slots", [False, True])
def test_both_decorators_make_classes_that_behave_alike(fast: str, slots: bool):
    expected = behaviour(made("stdlib", slots))
    assert behaviour(made(fast, slots)) == expected
    assert behaviour(warmed(made(fast, slots))) == expected  # with the compiled __init__


def test_a_class_made_for_many_instances_compiles_its_init_once():
    Point = made("fast, its own field")["Point"]
    shared = Point.__init__
    for _ in range(fastclass.HOT - 1):
        Point(1)
    assert Point.__init__ is shared
    Point(1)
    compiled = Point.__init__
    assert compiled is not shared and compiled.__code__.co_varnames[:5] == (
        "self", "x", "y", "tags", "note")
    Point(1)
    assert Point.__init__ is compiled


def test_making_classes_imports_no_dataclasses():
    """A process that makes fast classes with this module's field never loads dataclasses
    (nor inspect, which it imports) until something asks for the dataclass fields."""
    code = (
        "import sys\n"
        "from osk.store.fastclass import dataclass, field\n"
        "@dataclass(frozen=True, slots=True)\n"
        "class Point:\n"
        "    x: int\n"
        "    tags: list = field(default_factory=list)\n"
        "for _ in range(100): Point(1)\n"
        "print('dataclasses' in sys.modules, 'inspect' in sys.modules)\n"
        "import dataclasses\n"
        "print([f.name for f in dataclasses.fields(Point)], dataclasses.replace(Point(1), x=2))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.splitlines() == ["False False", "['x', 'tags'] Point(x=2, tags=[])"]


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
