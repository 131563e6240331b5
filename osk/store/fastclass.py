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
(``dataclass_transform``). What it supports is what osk's hook and search paths use: ``frozen``,
``eq`` and ``slots``, fields with a default, a ``default_factory``, ``init``, ``repr`` and
``compare``; ``__post_init__``. Anything else (``order``, ``kw_only``, ``InitVar``) is refused
when the class is made: use ``dataclasses.dataclass`` for it. ``tests/store/test_fastclass.py``
holds both decorators to the same behaviour, class by class.

Nor does making a class import ``dataclasses`` (with ``inspect``, ``ast`` and ``dis``: 10 ms, a
sixth of a fresh `osk search` above the interpreter): fields are given with this module's
``field`` (``dataclasses.field`` is read too), and ``__dataclass_fields__`` is made from them
the first time something reads it (``dataclasses.fields``, ``replace``, ``asdict``).

A class whose instances are made by the thousand (the index's documents, a ledger's records)
would pay for the shared ``__init__``, several times a compiled one's: after ``HOT`` instances
its ``__init__`` is compiled once, as ``dataclasses`` would have, so a class made for a few
instances compiles nothing and a class made for many builds them at the compiled speed.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, dataclass_transform, overload

if TYPE_CHECKING:  # for type checkers only: a class body may still use dataclasses.field
    from dataclasses import Field as _StdField
    from dataclasses import field as _std_field
else:
    _StdField = _std_field = None

T = TypeVar("T")

HOT = 32  # instances made with the shared __init__ before the class's own is compiled


class _Missing:
    """No default (``dataclasses.MISSING``, without importing dataclasses)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class Field:
    """A field as the decorator reads it; ``dataclasses.Field`` is made from it when asked."""

    __slots__ = ("name", "type", "default", "default_factory", "init", "repr", "compare")

    def __init__(self, default: Any, default_factory: Any, init: bool, repr: bool,
                 compare: bool) -> None:
        self.name = ""
        self.type: Any = None
        self.default = default
        self.default_factory = default_factory
        self.init = init
        self.repr = repr
        self.compare = compare


def field(*, default: Any = MISSING, default_factory: Callable[[], Any] | Any = MISSING,
          init: bool = True, repr: bool = True, compare: bool = True) -> Any:
    """``dataclasses.field`` for the options listed in the module's docstring."""
    if default is not MISSING and default_factory is not MISSING:
        raise ValueError("cannot specify both default and default_factory")
    return Field(default, default_factory, init, repr, compare)


@overload
def dataclass(cls: type[T], /) -> type[T]: ...


@overload
def dataclass(*, frozen: bool = False, eq: bool = True, repr: bool = True,
              slots: bool = False) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(field_specifiers=(field, Field, _std_field, _StdField))
def dataclass(cls: type[T] | None = None, /, *, frozen: bool = False, eq: bool = True,
              repr: bool = True, slots: bool = False) -> Any:
    """``dataclasses.dataclass`` for the parameters and field options listed above."""
    def make(klass: type[T]) -> type[T]:
        return _made(klass, frozen=frozen, eq=eq, with_repr=repr, slots=slots)

    return make if cls is None else make(cls)


def _made(cls: type[T], *, frozen: bool, eq: bool, with_repr: bool, slots: bool) -> type[T]:
    fields = _fields_of(cls)
    if slots:
        cls = _slotted(cls, fields)
    cls.__fastclass_fields__ = fields  # type: ignore[attr-defined]
    cls.__dataclass_fields__ = _StdFields(cls)  # type: ignore[attr-defined]
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
    own = cls.__dict__.get("__hash__", MISSING)
    return not (own is MISSING or (own is None and "__eq__" in cls.__dict__))


def _fields_of(cls: type) -> list[Field]:
    """The class's fields in the standard order: its bases' (as they made them), then its own
    annotations; a class attribute that is a field's default is set as dataclasses sets it."""
    found: dict[str, Field] = {}
    for base in reversed(cls.__mro__[1:]):
        found.update({f.name: f for f in _made_fields(base)})
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
        if text.startswith(("ClassVar", "typing.ClassVar")):
            continue
        if text.startswith(("InitVar", "dataclasses.InitVar", "KW_ONLY", "dataclasses.KW_ONLY")):
            raise TypeError(f"{cls.__qualname__}.{name}: {text} needs dataclasses.dataclass")
        found[name] = _field(cls, name, annotation)
    return list(found.values())


def _made_fields(base: type) -> list[Field]:
    """The fields a base was made with: by this decorator, or by ``dataclasses``."""
    own = base.__dict__
    if "__fastclass_fields__" in own:
        return list(own["__fastclass_fields__"])
    std = own.get("__dataclass_fields__")
    if not isinstance(std, dict):
        return []
    kind = sys.modules["dataclasses"]._FIELD  # a dataclass base: its module is loaded
    return [_from_std(f) for f in std.values() if f._field_type is kind]


def _from_std(std: Any) -> Field:
    """A ``dataclasses.Field`` as this module's; refused where it asks for more."""
    if std.kw_only not in (_std_missing(), False) or std.hash is not None:
        raise TypeError(f"{std.name}: kw_only and hash need dataclasses.dataclass")
    made = Field(_ours(std.default), _ours(std.default_factory), std.init, std.repr,
                 std.compare)
    made.name, made.type = std.name, std.type
    return made


def _std_missing() -> Any:
    std = sys.modules.get("dataclasses")
    return MISSING if std is None else std.MISSING


def _ours(value: Any) -> Any:
    return MISSING if value is _std_missing() else value


def _field(cls: type, name: str, annotation: Any) -> Field:
    value = cls.__dict__.get(name, MISSING)
    std = sys.modules.get("dataclasses")
    if isinstance(value, Field):
        made = value
    elif std is not None and isinstance(value, std.Field):
        made = _from_std(value)
    else:
        made = Field(value, MISSING, True, True, True)
    made.name, made.type = name, annotation
    if made.default is not MISSING:
        setattr(cls, name, made.default)
    elif name in cls.__dict__:
        delattr(cls, name)  # a default_factory, or no default: no class attribute
    return made


def _slotted(cls: type[T], fields: list[Field]) -> type[T]:
    """The class remade with ``__slots__`` for its own fields (as ``dataclasses`` remakes it):
    its defaults stay with the fields, where ``__init__`` reads them."""
    inherited = {name for base in cls.__mro__[1:-1]
                 for name in base.__dict__.get("__slots__", ())}
    names = tuple(f.name for f in fields if f.name not in inherited)
    body = {key: value for key, value in cls.__dict__.items()
            if key not in {*names, "__dict__", "__weakref__"}}
    body["__slots__"] = names
    metaclass: Any = type(cls)
    remade: type[T] = metaclass(cls.__name__, cls.__bases__, body)
    remade.__qualname__ = cls.__qualname__
    return remade


class _StdFields:
    """``__dataclass_fields__``, made (importing dataclasses) the first time it is read."""

    def __init__(self, cls: type) -> None:
        self.cls = cls

    def __get__(self, instance: Any, owner: type | None = None) -> dict[str, Any]:
        import dataclasses

        made = {}
        for f in self.cls.__fastclass_fields__:  # type: ignore[attr-defined]
            std = (dataclasses.field(default=_theirs(f.default), init=f.init, repr=f.repr,
                                     compare=f.compare)
                   if f.default_factory is MISSING else
                   dataclasses.field(default_factory=f.default_factory, init=f.init,
                                     repr=f.repr, compare=f.compare))
            std.name, std.type = f.name, f.type
            std._field_type = dataclasses._FIELD  # type: ignore[attr-defined]
            made[f.name] = std
        type.__setattr__(self.cls, "__dataclass_fields__", made)  # read once
        return made


def _theirs(value: Any) -> Any:
    import dataclasses

    return dataclasses.MISSING if value is MISSING else value


def _init(cls: type, fields: list[Field], frozen: bool) -> Callable[..., None]:
    taken = [f for f in fields if f.init]
    names = [f.name for f in taken]
    accepted = frozenset(names)
    later = [f for f in fields if not f.init and (f.default is not MISSING
                                                  or f.default_factory is not MISSING)]
    required = [f.name for f in taken if f.default is MISSING and f.default_factory is MISSING]
    assign = object.__setattr__
    post_init = hasattr(cls, "__post_init__")
    title = cls.__qualname__
    made = 0

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        nonlocal made
        made += 1
        if made == HOT and type(self) is cls and cls.__dict__.get("__init__") is __init__:
            compiled = _compiled_init(cls, fields, frozen)
            if compiled is not None:
                cls.__init__ = compiled
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
            value = values.get(f.name, MISSING)
            if value is MISSING:
                value = f.default if f.default is not MISSING else f.default_factory()
            assign(self, f.name, value)
        for f in later:
            assign(self, f.name, f.default if f.default is not MISSING
                   else f.default_factory())
        if post_init:
            self.__post_init__()

    return __init__


def _compiled_init(cls: type, fields: list[Field], frozen: bool) -> Callable[..., None] | None:
    """The class's own ``__init__``, compiled as ``dataclasses`` compiles it; None where its
    fields cannot be parameters in that order (the shared one keeps serving)."""
    if any(f.name == "self" or f.name.startswith("fc_") for f in fields):
        return None
    scope: dict[str, Any] = {"fc_set": object.__setattr__, "fc_missing": MISSING}
    params: list[str] = ["self"]
    lines: list[str] = []
    for f in fields:
        value = _compiled_value(f, scope, params, lines)
        if value is None:
            continue  # neither given nor defaulted: unset, as dataclasses leaves it
        lines.append(f"fc_set(self, {f.name!r}, {value})" if frozen else
                     f"self.{f.name} = {value}")
    positional = [p for p in params[1:] if "=" not in p]
    if positional and params.index(positional[-1]) > min(
            (i for i, p in enumerate(params) if "=" in p), default=len(params)):
        return None  # a field without a default after one with: only keywords could name it
    if hasattr(cls, "__post_init__"):
        lines.append("self.__post_init__()")
    source = f"def __init__({', '.join(params)}):\n" + "".join(
        f"    {line}\n" for line in lines or ["pass"])
    exec(source, scope)  # noqa: S102 - the class's own field names, as dataclasses does
    made: Callable[..., None] = scope["__init__"]
    made.__qualname__ = f"{cls.__qualname__}.__init__"
    return made


def _compiled_value(f: Field, scope: dict[str, Any], params: list[str],
                    lines: list[str]) -> str | None:
    """The expression a field's value comes from in the compiled ``__init__`` (adding its
    parameter and what its default needs), or None when it gets none."""
    if f.default_factory is not MISSING:
        scope[f"fc_make_{f.name}"] = f.default_factory
        if not f.init:
            return f"fc_make_{f.name}()"
        params.append(f"{f.name}=fc_missing")
        lines.append(f"if {f.name} is fc_missing: {f.name} = fc_make_{f.name}()")
    elif f.default is not MISSING:
        scope[f"fc_default_{f.name}"] = f.default
        if not f.init:
            return f"fc_default_{f.name}"
        params.append(f"{f.name}=fc_default_{f.name}")
    elif not f.init:
        return None
    else:
        params.append(f.name)
    return f.name


def _repr(fields: list[Field]) -> Callable[[Any], str]:
    shown = [f.name for f in fields if f.repr]

    def __repr__(self: Any) -> str:
        inside = ", ".join(f"{name}={getattr(self, name)!r}" for name in shown)
        return f"{type(self).__qualname__}({inside})"

    return __repr__


def _eq(fields: list[Field]) -> Callable[[Any, Any], Any]:
    compared = [f.name for f in fields if f.compare]

    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return tuple(getattr(self, n) for n in compared) == \
            tuple(getattr(other, n) for n in compared)

    return __eq__


def _hash(fields: list[Field]) -> Callable[[Any], int]:
    hashed = [f.name for f in fields if f.compare]

    def __hash__(self: Any) -> int:
        return hash(tuple(getattr(self, n) for n in hashed))

    return __hash__


def _frozen_setattr(cls: type[Any], fields: list[Field]) -> Callable[..., None]:
    names = frozenset(f.name for f in fields)

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise _frozen_error(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    return __setattr__


def _frozen_delattr(cls: type[Any],
                    fields: list[Field]) -> Callable[[Any, str], None]:
    names = frozenset(f.name for f in fields)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise _frozen_error(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    return __delattr__


def _frozen_error(message: str) -> Exception:
    from dataclasses import FrozenInstanceError

    return FrozenInstanceError(message)
