"""Dataclasses made without compiling code, for the modules a hook process imports.

``dataclasses.dataclass`` writes each class's ``__init__``, ``__repr__``, ``__eq__`` (and for a
frozen class ``__hash__``, ``__setattr__``, ``__delattr__``) as source text and compiles it:
about a millisecond a class, and a hook process makes some forty classes before it has read
its payload, a third of what a session-start hook costs (docs/performance.md). ``dataclass``
here gives a class the same behaviour from shared methods that read the class's field list,
so making one costs tens of microseconds; an instance costs a little more to build, which a
hook, making a few hundred, does not feel.

The class is a dataclass to the rest of Python: its fields are ``dataclasses.Field`` objects in
``__dataclass_fields__``, so ``dataclasses.fields``, ``replace``, ``asdict`` and
``is_dataclass`` work on it, and type checkers read the decorator as ``dataclasses.dataclass``
(``dataclass_transform``). What it supports is what osk's hook path uses: ``frozen`` and
``eq``, fields with a default, a ``default_factory``, ``init``, ``repr`` and ``compare``;
``__post_init__``. Anything else (``order``, ``slots``, ``kw_only``, ``InitVar``) is refused
when the class is made: use ``dataclasses.dataclass`` for it. ``tests/store/test_fastclass.py``
holds both decorators to the same behaviour, class by class.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar, dataclass_transform, overload

T = TypeVar("T")

_MISSING = dataclasses.MISSING
# The mark ``dataclasses.fields`` keeps a field by (the module's own; the test suite checks
# that ``fields``, ``replace`` and ``asdict`` read these classes on the Python it runs).
_FIELD_KIND = dataclasses._FIELD  # type: ignore[attr-defined]


@overload
def dataclass(cls: type[T], /) -> type[T]: ...


@overload
def dataclass(*, frozen: bool = False, eq: bool = True,
              repr: bool = True) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(field_specifiers=(dataclasses.field, dataclasses.Field))
def dataclass(cls: type[T] | None = None, /, *, frozen: bool = False, eq: bool = True,
              repr: bool = True) -> Any:
    """``dataclasses.dataclass`` for the parameters and field options listed above."""
    def make(klass: type[T]) -> type[T]:
        return _made(klass, frozen=frozen, eq=eq, with_repr=repr)

    return make if cls is None else make(cls)


def _made(cls: type[T], *, frozen: bool, eq: bool, with_repr: bool) -> type[T]:
    fields = _fields_of(cls)
    cls.__dataclass_fields__ = {f.name: f for f in fields}  # type: ignore[attr-defined]
    cls.__match_args__ = tuple(f.name for f in fields if f.init)  # type: ignore[attr-defined,misc]
    own = cls.__dict__
    if "__init__" not in own:
        cls.__init__ = _init(cls, fields, frozen)  # type: ignore[method-assign]
    if with_repr and "__repr__" not in own:
        cls.__repr__ = _repr(fields)  # type: ignore[method-assign]
    if eq and "__eq__" not in own:
        cls.__eq__ = _eq(fields)  # type: ignore[method-assign]
    if eq and not _explicit_hash(cls):
        cls.__hash__ = _hash(fields) if frozen else None  # type: ignore[method-assign,assignment]
    if frozen:
        cls.__setattr__ = _frozen_setattr(cls, fields)  # type: ignore[method-assign]
        cls.__delattr__ = _frozen_delattr(cls, fields)  # type: ignore[method-assign]
    return cls


def _explicit_hash(cls: type) -> bool:
    """The class wrote its own __hash__ (Python sets __hash__ to None in a class that writes
    __eq__ alone: that one is not its own)."""
    own = cls.__dict__.get("__hash__", _MISSING)
    return not (own is _MISSING or (own is None and "__eq__" in cls.__dict__))


def _fields_of(cls: type) -> list[dataclasses.Field[Any]]:
    """The class's fields in the standard order: its bases' (as they made them), then its own
    annotations; a class attribute that is a field's default is set as dataclasses sets it."""
    found: dict[str, dataclasses.Field[Any]] = {}
    for base in reversed(cls.__mro__[1:]):
        found.update(getattr(base, "__dataclass_fields__", {}))
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
        if text.startswith(("ClassVar", "typing.ClassVar")):
            continue
        if text.startswith(("InitVar", "dataclasses.InitVar", "KW_ONLY", "dataclasses.KW_ONLY")):
            raise TypeError(f"{cls.__qualname__}.{name}: {text} needs dataclasses.dataclass")
        found[name] = _field(cls, name, annotation)
    return list(found.values())


def _field(cls: type, name: str, annotation: Any) -> dataclasses.Field[Any]:
    value = cls.__dict__.get(name, _MISSING)
    made: dataclasses.Field[Any] = (
        value if isinstance(value, dataclasses.Field) else dataclasses.field(default=value))
    if made.kw_only not in (_MISSING, False) or made.hash is not None:
        raise TypeError(f"{cls.__qualname__}.{name}: kw_only and hash need dataclasses.dataclass")
    made.name, made.type, made._field_type = name, annotation, _FIELD_KIND  # type: ignore[attr-defined]
    if made.default is not _MISSING:
        setattr(cls, name, made.default)
    elif name in cls.__dict__:
        delattr(cls, name)  # a default_factory, or no default: no class attribute
    return made


def _init(cls: type, fields: list[dataclasses.Field[Any]], frozen: bool) -> Callable[..., None]:
    taken = [f for f in fields if f.init]
    names = [f.name for f in taken]
    accepted = frozenset(names)
    later = [f for f in fields if not f.init and (f.default is not _MISSING
                                                  or f.default_factory is not _MISSING)]
    required = [f.name for f in taken if f.default is _MISSING and f.default_factory is _MISSING]
    assign = object.__setattr__
    post_init = hasattr(cls, "__post_init__")
    title = cls.__qualname__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if len(args) > len(names):
            raise TypeError(f"{title}.__init__() takes {len(names) + 1} positional arguments "
                            f"but {len(args) + 1} were given")
        values = dict(zip(names, args, strict=False))  # the rest from keywords or defaults
        for key, value in kwargs.items():
            if key not in accepted:
                raise TypeError(f"{title}.__init__() got an unexpected keyword argument {key!r}")
            if key in values:
                raise TypeError(f"{title}.__init__() got multiple values for argument {key!r}")
            values[key] = value
        missing = [name for name in required if name not in values]
        if missing:
            listed = " and ".join(repr(name) for name in missing)
            raise TypeError(f"{title}.__init__() missing {len(missing)} required argument"
                            f"{'s' if len(missing) > 1 else ''}: {listed}")
        for f in taken:
            value = values.get(f.name, _MISSING)
            if value is _MISSING:
                value = f.default if f.default is not _MISSING else f.default_factory()  # type: ignore[operator]
            assign(self, f.name, value)
        for f in later:
            assign(self, f.name, f.default if f.default is not _MISSING
                   else f.default_factory())  # type: ignore[operator]
        if post_init:
            self.__post_init__()

    return __init__


def _repr(fields: list[dataclasses.Field[Any]]) -> Callable[[Any], str]:
    shown = [f.name for f in fields if f.repr]

    def __repr__(self: Any) -> str:
        inside = ", ".join(f"{name}={getattr(self, name)!r}" for name in shown)
        return f"{type(self).__qualname__}({inside})"

    return __repr__


def _eq(fields: list[dataclasses.Field[Any]]) -> Callable[[Any, Any], Any]:
    compared = [f.name for f in fields if f.compare]

    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return tuple(getattr(self, n) for n in compared) == \
            tuple(getattr(other, n) for n in compared)

    return __eq__


def _hash(fields: list[dataclasses.Field[Any]]) -> Callable[[Any], int]:
    hashed = [f.name for f in fields if f.compare]

    def __hash__(self: Any) -> int:
        return hash(tuple(getattr(self, n) for n in hashed))

    return __hash__


def _frozen_setattr(cls: type[Any], fields: list[dataclasses.Field[Any]]) -> Callable[..., None]:
    names = frozenset(f.name for f in fields)

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    return __setattr__


def _frozen_delattr(cls: type[Any],
                    fields: list[dataclasses.Field[Any]]) -> Callable[[Any, str], None]:
    names = frozenset(f.name for f in fields)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    return __delattr__
