"""core/fastclass.py's ``dataclass`` is held to the standard decorator: each case builds
one class body twice, once with ``dataclasses.dataclass`` and once with ours, and compares
what a caller can see (the signature, instances, repr, equality, hashing, frozenness,
slots, pickling and copying, ``replace`` / ``asdict`` / ``fields``, inheritance)."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import math
import pickle
from collections.abc import Callable
from dataclasses import field
from typing import ClassVar

import pytest

from pytest_agentbench.core import fastclass

DECORATORS = {"standard": dataclasses.dataclass, "ours": fastclass.dataclass}


def both(make: Callable[[Callable[..., object]], type]) -> tuple[type, type]:
    """The class ``make`` builds with the standard decorator, and with ours, each named
    in this module (so pickle finds it): ``Standard<name>``, ``Ours<name>``."""
    made = []
    for label, deco in DECORATORS.items():
        cls = make(deco)
        cls.__qualname__ = cls.__name__ = f"{label.title()}{cls.__name__}"
        globals()[cls.__qualname__] = cls
        made.append(cls)
    return made[0], made[1]


def fields_text(value: object) -> str:
    """A repr without its class's name."""
    return repr(value).partition("(")[2]


def plain(deco: Callable[..., object]) -> type:
    @deco
    class Point:
        """A point."""

        x: int
        y: int = 2
        tags: list[str] = field(default_factory=list)
        note: str = field(default="", repr=False, compare=False)
        COUNT: ClassVar[int] = 0

    return Point


def frozen(deco: Callable[..., object], slots: bool = False) -> type:
    @deco(frozen=True, slots=slots)
    class Frozen:
        """Frozen."""

        name: str
        score: float = 0.0
        parts: tuple[int, ...] = ()
        seen: dict[str, int] = field(default_factory=dict, compare=False, hash=False)

    return Frozen


def frozen_slots(deco: Callable[..., object]) -> type:
    return frozen(deco, slots=True)


def with_post_init(deco: Callable[..., object]) -> type:
    @deco(frozen=True)
    class Checked:
        """Checks itself."""

        low: int
        high: int = 10

        def __post_init__(self) -> None:
            if self.low > self.high:
                raise ValueError("low above high")
            object.__setattr__(self, "high", self.high * 1)

    return Checked


def signature(cls: type) -> list[tuple[str, str, object]]:
    return [
        (p.name, p.kind.name, repr(p.default)) for p in inspect.signature(cls).parameters.values()
    ]


@pytest.mark.parametrize("make", [plain, frozen, frozen_slots, with_post_init])
def test_the_signature_fields_and_match_args_are_the_standard_ones(
    make: Callable[[Callable[..., object]], type],
) -> None:
    standard, ours = both(make)
    assert signature(ours) == signature(standard)
    assert [(f.name, f.repr, f.compare, f.hash) for f in dataclasses.fields(ours)] == [
        (f.name, f.repr, f.compare, f.hash) for f in dataclasses.fields(standard)
    ]
    assert ours.__match_args__ == standard.__match_args__
    assert dataclasses.is_dataclass(ours)
    assert ours.__doc__ == standard.__doc__
    assert ("__slots__" in ours.__dict__) == ("__slots__" in standard.__dict__)


def test_instances_repr_equality_and_hashing_of_a_plain_class() -> None:
    standard, ours = both(plain)
    for cls in (standard, ours):
        a, b = cls(1), cls(1)
        assert a.tags == [] and a.tags is not b.tags  # a factory call per instance
    a_std, a_ours = standard(1, 3, ["t"], note="n"), ours(1, 3, ["t"], note="n")
    assert repr(a_ours) == "OursPoint(x=1, y=3, tags=['t'])"
    assert repr(a_std) == "StandardPoint(x=1, y=3, tags=['t'])"
    assert ours(1, note="a") == ours(1, note="b")  # note is not compared
    assert ours(1) != ours(2)
    assert ours(1) != standard(1)  # another class: not equal, as the standard's
    assert ours(1).__eq__(3) is NotImplemented
    with pytest.raises(TypeError, match="unhashable"):
        hash(ours(1))
    point = ours(1)
    point.x = 5  # not frozen
    assert point.x == 5
    assert dataclasses.asdict(point) == dataclasses.asdict(standard(5))
    assert dataclasses.astuple(point) == dataclasses.astuple(standard(5))
    assert dataclasses.replace(point, y=9) == ours(5, 9)


@pytest.mark.parametrize("make", [frozen, frozen_slots])
def test_a_frozen_class_refuses_changes_hashes_and_survives_pickle_and_copy(
    make: Callable[[Callable[..., object]], type],
) -> None:
    standard, ours = both(make)
    item = ours("a", 1.5, (1, 2), {"k": 1})
    same = standard("a", 1.5, (1, 2), {"k": 1})
    assert (
        fields_text(item)
        == fields_text(same)
        == "name='a', score=1.5, parts=(1, 2), seen={'k': 1})"
    )
    assert hash(item) == hash(same) == hash(ours("a", 1.5, (1, 2), {"other": 2}))
    assert item == ours("a", 1.5, (1, 2))
    for instance in (item, same):
        with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'name'"):
            instance.name = "b"
        with pytest.raises(dataclasses.FrozenInstanceError, match="cannot delete field 'score'"):
            del instance.score
    with pytest.raises(dataclasses.FrozenInstanceError, match="'other'"):
        item.other = 1
    for twin in (pickle.loads(pickle.dumps(item)), copy.copy(item), copy.deepcopy(item)):
        assert twin == item and type(twin) is ours
    assert dataclasses.replace(item, score=2.0) == ours("a", 2.0, (1, 2))
    nan = ours("n", math.nan)
    assert nan == nan == ours("n", nan.score)  # one float object: equal in tuples, as theirs
    assert nan != ours("n", float("nan"))  # two NaNs: not equal, as theirs
    assert standard("n", math.nan) != standard("n", float("nan"))


def test_post_init_runs_after_the_fields_are_set() -> None:
    standard, ours = both(with_post_init)
    assert ours(1).high == standard(1).high == 10
    with pytest.raises(ValueError, match="low above high"):
        ours(11)


def test_subclasses_add_fields_and_may_not_mix_frozen_and_not() -> None:
    for deco in DECORATORS.values():

        @deco(frozen=True)
        class Base:
            a: int
            b: int = 1

        @deco(frozen=True)
        class Child(Base):
            c: int = 3

        assert signature(Child) == [
            ("a", "POSITIONAL_OR_KEYWORD", "<class 'inspect._empty'>"),
            ("b", "POSITIONAL_OR_KEYWORD", "1"),
            ("c", "POSITIONAL_OR_KEYWORD", "3"),
        ]
        assert repr(Child(0)).endswith("<locals>.Child(a=0, b=1, c=3)")
        assert Child(0) != Base(0)
        with pytest.raises(TypeError, match="frozen"):

            @deco
            class Thawed(Base):
                d: int = 4


def test_methods_a_class_writes_are_kept() -> None:
    @fastclass.dataclass(frozen=True)
    class Own:
        value: int

        def __repr__(self) -> str:
            return "own"

        def __eq__(self, other: object) -> bool:
            return True

        def __hash__(self) -> int:
            return 7

    assert repr(Own(1)) == "own" and Own(1) == 3 and hash(Own(1)) == 7


def test_what_is_not_offered_is_refused_as_the_standard_refuses_a_misplaced_default() -> None:
    for deco in DECORATORS.values():
        with pytest.raises(TypeError, match="non-default argument 'b' follows default"):

            @deco
            class Bad:
                a: int = 1
                b: int

    with pytest.raises(TypeError, match="not offered"):

        @fastclass.dataclass
        class NoInit:
            a: int = field(default=1, init=False)


def test_a_recursive_repr_does_not_recurse_forever() -> None:
    standard, ours = both(plain)
    point = ours(1)
    point.tags.append(point)
    twin = standard(1)
    twin.tags.append(twin)
    assert repr(point) == "OursPoint(x=1, y=2, tags=[...])"
    assert fields_text(point) == fields_text(twin)
