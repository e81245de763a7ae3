"""Atomic JSON writes: a reader (or a crash) never sees a half-written file."""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

_encode_compact = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, default=str, separators=(",", ":")
).encode
_encode_str = json.encoder.encode_basestring  # what ensure_ascii=False quotes a str with
#: The C encoder's constructor (None without the accelerator)
_make_encoder: Callable[..., Callable[[object, int], Iterable[str]]] | None = getattr(
    json.encoder, "c_make_encoder", None
)
_NOT_FINITE = (math.inf, -math.inf)


def _encode_member(value: object) -> str:
    """``_encode_compact(value)``, the same text and the same errors, without
    ``JSONEncoder.encode``'s per-call set-up: a str, None, a bool, an int or a float (most
    of a record's members) directly, anything else by the C encoder."""
    if type(value) is str:
        return _encode_str(value)
    if value is None:
        return "null"
    kind = type(value)
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return repr(value)
    if kind is float:
        if value != value or value in _NOT_FINITE:  # NaN, Infinity
            raise ValueError("Out of range float values are not JSON compliant: " + repr(value))
        return repr(value)
    if _make_encoder is None:  # an interpreter without the C accelerator
        return _encode_compact(value)
    return "".join(
        _make_encoder({}, str, _encode_str, None, ":", ",", False, False, False)(value, 0)
    )


_OPEN_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)
_OPEN_FLAGS |= getattr(os, "O_NOFOLLOW", 0)


def dumps(data: object, *, indent: int | None = 2) -> str:
    """JSON text of ``data``; NaN and Infinity are refused (they are not JSON).

    ``indent=None`` is compact. Otherwise an object (or list) is laid out one member per
    line, each member compact on its line — about as readable as a full indent for the
    files a person opens (result.json, trajectory.json), and written by the C encoder
    alone: a full ``indent=2`` goes through the pure-Python encoder, which cost more per
    task than the rest of writing its files.
    """
    if indent is None:
        return _encode_compact(data)
    pad = " " * indent
    if isinstance(data, dict) and data:
        members = ",\n".join(
            f"{pad}{_encode_str(str(key))}: {_encode_member(value)}" for key, value in data.items()
        )
        return "{\n" + members + "\n}"
    if isinstance(data, list | tuple) and data:
        return "[\n" + ",\n".join(pad + _encode_member(value) for value in data) + "\n]"
    return _encode_compact(data)


class Streamed:
    """A JSON array in a compact document whose items are made and written one at a
    time (``write_json_atomic``): a 10 000-task report never exists whole in memory,
    neither as objects nor as text."""

    def __init__(self, items: Iterable[object]) -> None:
        self.items = items


def write_json_atomic(
    path: Path, data: object, *, indent: int | None = 2, make_parent: bool = True
) -> None:
    """Write ``data`` as JSON (see :func:`dumps`) to ``path`` atomically.

    With ``indent=None`` the document may hold :class:`Streamed` arrays. ``make_parent=
    False`` skips creating the folder (the caller made it already)."""
    if indent is not None:
        write_text_atomic(path, dumps(data, indent=indent) + "\n", make_parent=make_parent)
        return
    streamed: list[Streamed] = []
    token = secrets.token_hex(8)  # no string in the data can pass for a marker

    def mark(value: object) -> str:
        if isinstance(value, Streamed):
            streamed.append(value)
            return f"\x00{token}-{len(streamed) - 1}\x00"
        return str(value)

    text = json.JSONEncoder(
        ensure_ascii=False, allow_nan=False, default=mark, separators=(",", ":")
    ).encode(data)

    def pieces() -> Iterator[str]:
        rest = text
        for index, array in enumerate(streamed):
            before, _, rest = rest.partition(f'"\\u0000{token}-{index}\\u0000"')
            yield before
            yield "["
            for position, item in enumerate(array.items):
                yield ("," if position else "") + _encode_compact(item)
            yield "]"
        yield rest
        yield "\n"

    _write_atomic(path, pieces(), make_parent=make_parent)


def write_text_atomic(
    path: Path | str, text: str | Iterable[str], *, make_parent: bool = True
) -> None:
    """Write text to ``path`` through a temp file in the same folder and a rename: one
    string, or pieces written as they come (a page made while it is written)."""
    _write_atomic(path, (text,) if isinstance(text, str) else text, make_parent=make_parent)


def _write_atomic(path: Path | str, pieces: Iterable[str], *, make_parent: bool) -> None:
    """Write the text ``pieces`` to a temp file beside ``path``, then rename it over.

    The temp file's name is fixed per process and thread (no random names to find):
    two writers never share one, and a leftover of a killed process is overwritten.
    With ``make_parent`` the folder is made only when the temp file cannot be opened for
    want of it (a file written beside others costs no ``mkdir``)."""
    folder, sep, name = os.fspath(path).rpartition(os.sep)
    tmp = f"{folder if sep else '.'}/.{name}.{os.getpid()}-{threading.get_ident()}.tmp"
    try:
        fd = os.open(tmp, _OPEN_FLAGS, 0o644)
    except FileNotFoundError:
        if not make_parent:
            raise
        os.makedirs((folder or os.sep) if sep else ".", exist_ok=True)
        fd = os.open(tmp, _OPEN_FLAGS, 0o644)
    try:
        try:
            batch: list[str] = []
            size = 0
            for piece in pieces:  # small pieces go out together, one write per ~64 KiB
                batch.append(piece)
                size += len(piece)
                if size >= _BATCH:
                    _write_all(fd, "".join(batch))
                    batch, size = [], 0
            _write_all(fd, "".join(batch))
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


_BATCH = 1 << 16


def _write_all(fd: int, text: str) -> None:
    data = memoryview(text.encode("utf-8", "replace"))
    while data:
        data = data[os.write(fd, data) :]
