"""``dataclass`` for the package's records: the standard one's classes, made for less.

Python 3.11's ``dataclasses.dataclass`` compiles every method it writes with an ``exec`` of
its own: ``__init__``, ``__repr__`` and ``__eq__``, and for a frozen class ``__hash__``,
``__setattr__`` and ``__delattr__`` too. A one-task run makes some 60 of our classes at
start-up, and that compiling was half the CPU of importing the package (docs/scale.md,
"The fourth pass"). Here the standard decorator still reads the fields (so ``fields``,
``replace``, ``asdict`` and ``__match_args__`` are the standard ones), but writes no
method; ``__init__`` is compiled once per class, as the standard one would be written,
and the other methods are shared functions that read the class's fields.

Kept from the standard decorator, as our classes use it: ``frozen`` (assigning or
deleting a field raises ``FrozenInstanceError``; pickling and copying a frozen class with
``slots`` work), ``slots``, defaults and ``default_factory``, ``field(repr=False,
compare=False, hash=...)``, ``__post_init__``, inheritance from another of these classes,
and methods a class writes itself (``__repr__``, ``__eq__``, ``__hash__``: not replaced).
Not offered (a ``TypeError`` says so): ``order``, ``unsafe_hash``, ``kw_only``,
``init=False``, ``InitVar``. tests/core/test_fastclass.py holds each to the standard
decorator's behaviour.
"""

from __future__ import annotations

import dataclasses
import reprlib
from collections.abc import Callable
from typing import TypeVar, cast, dataclass_transform, overload

T = TypeVar("T", bound=type)


class _Factory:
    """The default of a field with a ``default_factory`` in ``__init__``'s signature."""

    def __repr__(self) -> str:
        return "<factory>"


_HAS_DEFAULT_FACTORY = _Factory()


@overload
def dataclass(cls: T, /) -> T: ...


@overload
def dataclass(*, frozen: bool = False, slots: bool = False) -> Callable[[T], T]: ...


@dataclass_transform(field_specifiers=(dataclasses.field, dataclasses.Field))
def dataclass(
    cls: T | None = None, /, *, frozen: bool = False, slots: bool = False
) -> T | Callable[[T], T]:
    """``dataclasses.dataclass(cls, frozen=…, slots=…)``, with the same fields, behaviour
    and errors for what our records use (see the module's docstring)."""

    def wrap(cls: T) -> T:
        return _process(cls, frozen, slots)

    return wrap if cls is None else wrap(cls)


def _process(cls: T, frozen: bool, slots: bool) -> T:
    own = cls.__dict__
    made = cast(T, dataclasses.dataclass(cls, init=False, repr=False, eq=False, slots=slots))
    fields = dataclasses.fields(made)
    for field in fields:
        if not field.init or field.kw_only is True:
            raise TypeError(f"{made.__qualname__}.{field.name}: init=False / kw_only not offered")
    for base in made.__mro__[1:]:
        if getattr(base, "__dataclass_params__", None) is None:
            continue
        base_frozen = getattr(base, "__record_frozen__", None)
        if base_frozen is None:
            raise TypeError(f"{made.__qualname__}: its base {base.__qualname__} is not one")
        if base_frozen != frozen:
            raise TypeError(
                f"{made.__qualname__}: cannot inherit {'non-' if frozen else ''}frozen "
                f"{base.__qualname__}"
            )
    names = {
        "__record_frozen__": frozen,
        "__record_compare__": tuple(f.name for f in fields if f.compare),
        "__record_hash__": tuple(
            f.name for f in fields if (f.compare if f.hash is None else f.hash)
        ),
        "__record_repr__": tuple(f.name for f in fields if f.repr),
        "__init__": _init(made, fields, frozen),
    }
    if "__repr__" not in own:
        names["__repr__"] = _repr
    if "__eq__" not in own:
        names["__eq__"] = _eq
    if "__hash__" not in own or own["__hash__"] is None:
        names["__hash__"] = _hash if frozen else None
    if frozen:
        names["__setattr__"], names["__delattr__"] = _frozen(made, fields)
        if slots:
            names["__getstate__"], names["__setstate__"] = _getstate, _setstate
    for name, value in names.items():
        setattr(made, name, value)
    return made


def _init(cls: type, fields: tuple[dataclasses.Field[object], ...], frozen: bool) -> object:
    """``__init__`` as the standard decorator writes it, compiled with one ``exec``."""
    names: dict[str, object] = {
        "__record_object__": object,
        "_HAS_DEFAULT_FACTORY": _HAS_DEFAULT_FACTORY,
    }
    params, body, seen_default = ["self"], [], False
    for field in fields:
        name = field.name
        if field.default is not dataclasses.MISSING:
            names[f"_dflt_{name}"] = field.default
            params.append(f"{name}=_dflt_{name}")
            value = name
            seen_default = True
        elif field.default_factory is not dataclasses.MISSING:
            names[f"_dflt_{name}"] = field.default_factory
            params.append(f"{name}=_HAS_DEFAULT_FACTORY")
            value = f"_dflt_{name}() if {name} is _HAS_DEFAULT_FACTORY else {name}"
            seen_default = True
        elif seen_default:
            raise TypeError(f"non-default argument {name!r} follows default argument")
        else:
            params.append(name)
            value = name
        if frozen:
            body.append(f"  __record_object__.__setattr__(self, {name!r}, {value})")
        else:
            body.append(f"  self.{name} = {value}")
    if hasattr(cls, "__post_init__"):
        body.append("  self.__post_init__()")
    source = f"def __init__({', '.join(params)}):\n" + ("\n".join(body) or "  pass") + "\n"
    exec(source, names)  # our own text: the field names of a class of ours
    init = names["__init__"]
    setattr(init, "__qualname__", f"{cls.__qualname__}.__init__")  # noqa: B010
    setattr(init, "__module__", cls.__module__)  # noqa: B010
    return init


@reprlib.recursive_repr()
def _repr(self: object) -> str:
    names: tuple[str, ...] = getattr(self, "__record_repr__")  # noqa: B009
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
    return f"{self.__class__.__qualname__}({shown})"


def _eq(self: object, other: object) -> object:  # (NotImplemented: the other side is asked)
    if other.__class__ is not self.__class__:
        return NotImplemented
    names: tuple[str, ...] = getattr(self, "__record_compare__")  # noqa: B009
    # tuples, as the standard __eq__ compares: a value is equal to itself (NaN too)
    mine: tuple[object, ...] = tuple(getattr(self, n) for n in names)
    theirs: tuple[object, ...] = tuple(getattr(other, n) for n in names)
    return bool(mine == theirs)


def _hash(self: object) -> int:
    names: tuple[str, ...] = getattr(self, "__record_hash__")  # noqa: B009
    return hash(tuple(getattr(self, name) for name in names))


def _frozen(
    cls: type, fields: tuple[dataclasses.Field[object], ...]
) -> tuple[Callable[[object, str, object], None], Callable[[object, str], None]]:
    names = frozenset(field.name for field in fields)

    def __setattr__(self: object, name: str, value: object) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)  # type: ignore[arg-type]

    def __delattr__(self: object, name: str) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)  # type: ignore[arg-type]

    return __setattr__, __delattr__


def _getstate(self: object) -> list[object]:
    return [getattr(self, field.name) for field in dataclasses.fields(self)]  # type: ignore[arg-type]


def _setstate(self: object, state: list[object]) -> None:
    for field, value in zip(dataclasses.fields(self), state, strict=True):  # type: ignore[arg-type]
        object.__setattr__(self, field.name, value)
