"""A slotted record's field whose usual value follows from another field of the same
record, stored only when it does not.

``TaskRecord.verifier_dir`` is its ``rollout_dir`` and ``/verifier`` for every task a run
makes, yet each was a string of its own (about 150 bytes) that lived to the end of the run:
the largest single part of what a finished task costs the process (docs/scale.md,
"Memory"). ``DerivedSlot`` replaces the field's slot descriptor on the class: setting the
usual value stores a marker, reading it back rebuilds the string; any other value (one read
from an older file, a rescore's) is stored as given. Every reader, ``==``, ``hash``,
``repr``, ``dataclasses.replace`` and pickling see the value, never the marker, so nothing
a report shows can change.
"""

from __future__ import annotations

from types import MemberDescriptorType

#: what the slot holds when the field has its usual value
_USUAL = object()


class DerivedSlot:
    """The field ``name`` of a slotted class, usually ``<source> + suffix``."""

    def __init__(self, owner: type, name: str, source: str, suffix: str) -> None:
        slot, base = owner.__dict__.get(name), owner.__dict__.get(source)
        if not isinstance(slot, MemberDescriptorType) or not isinstance(base, MemberDescriptorType):
            raise TypeError(f"{owner.__name__}.{name} and .{source} must be slots")
        self._slot, self._source, self._suffix = slot, base, suffix

    def __get__(self, obj: object, owner: type | None = None) -> object:
        if obj is None:
            return self
        value = self._slot.__get__(obj, owner)
        if value is _USUAL:
            source = self._source.__get__(obj, owner)
            assert isinstance(source, str)  # the marker is stored only beside a string
            return source + self._suffix
        return value

    def __set__(self, obj: object, value: object) -> None:
        self._slot.__set__(obj, _USUAL if self._usual(obj, value) else value)

    def __delete__(self, obj: object) -> None:
        self._slot.__delete__(obj)

    def _usual(self, obj: object, value: object) -> bool:
        if not isinstance(value, str):
            return False
        try:
            source = self._source.__get__(obj, type(obj))
        except AttributeError:  # the source field is not set yet
            return False
        suffix = self._suffix
        return (
            isinstance(source, str)
            and len(value) == len(source) + len(suffix)
            and value.startswith(source)
            and value.endswith(suffix)
        )

    def derived(self, obj: object) -> bool:
        """Whether ``obj`` keeps the marker (the usual value) rather than a string."""
        return self._slot.__get__(obj, type(obj)) is _USUAL

    @classmethod
    def install(cls, owner: type, name: str, source: str, suffix: str) -> None:
        """Put the derived field on ``owner`` in place of its slot ``name``."""
        setattr(owner, name, cls(owner, name, source, suffix))
