"""Reading suite and dataset files: regular files only, size-capped, parsed with their
syntax errors (line, column) and YAML alias expansion bounded. Every reader raises
ValueError with a reason a user can act on, naming the file; nothing here blocks on a
FIFO or a device, or reads without a bound.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import stat
import tomllib
import zlib
from pathlib import Path

from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.suites.validate import show, type_name

FORMATS = {".toml": "toml", ".json": "json", ".yaml": "yaml", ".yml": "yaml"}
#: The largest suite or dataset file read unless the run says otherwise (--agentbench-max-file-mb).
DEFAULT_MAX_FILE_BYTES = 64 * 1024 * 1024
#: How many values YAML aliases may add to a file once written out (a "billion laughs"
#: file adds 9**9 from a few lines; every later walk of it would take hours).
MAX_ALIAS_GROWTH = 1_000_000


def _kind_of(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def read_bytes(path: Path, max_bytes: int = DEFAULT_MAX_FILE_BYTES) -> bytes:
    """The bytes of a regular file of at most ``max_bytes``; raises ValueError naming the
    file otherwise. A FIFO, a device (``/dev/zero`` behind a symlink) or a socket is
    refused before it is opened for reading, so it can neither block nor stream forever;
    the size is checked before reading and again while reading (the file may grow)."""
    limit = f"the limit is {max_bytes / 1024 / 1024:.3g} MB (--agentbench-max-file-mb)"
    try:
        found = os.stat(path)
        if not stat.S_ISREG(found.st_mode):
            raise ValueError(f"{path} is {_kind_of(found.st_mode)}; only regular files are read")
        if found.st_size > max_bytes:
            raise ValueError(f"{path} is too large ({found.st_size} bytes); {limit}")
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped since the check above
            raise ValueError(f"{path} is not a regular file; only regular files are read")
        data = file.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ValueError(f"{path} is too large (over {max_bytes} bytes); {limit}")
    return data


#: Entries a ``files`` directory may hold (a symlink loop would otherwise never end).
MAX_TREE_ENTRIES = 100_000


def tree_problem(root: Path, max_bytes: int = DEFAULT_MAX_FILE_BYTES) -> str | None:
    """Why directory ``root`` cannot seed a workspace, or None. It is copied following
    symlinks, so each entry must lead to a regular file or a directory (a FIFO would
    block the copy, a device would never end it); the files together must fit in
    ``max_bytes``. Dangling symlinks are skipped, as the copy skips them."""
    total = entries = 0
    for folder, _, names in os.walk(root, followlinks=True):
        for name in names:
            path = Path(folder) / name
            entries += 1
            if entries > MAX_TREE_ENTRIES:
                return f"holds more than {MAX_TREE_ENTRIES} entries (a symlink loop?)"
            try:
                found = os.stat(path)
            except OSError:
                continue
            where = show(path.relative_to(root).as_posix())
            if not stat.S_ISREG(found.st_mode):
                return f"holds {where}, which is {_kind_of(found.st_mode)}; only regular files"
            total += found.st_size
            if total > max_bytes:
                limit = f"{max_bytes / 1024 / 1024:.3g} MB (--agentbench-max-file-mb)"
                return f"holds more than {limit} of files (at {where})"
    return None


def seed_dir_problem(directory: Path, written: str, max_bytes: int) -> str | None:
    """Why the ``files`` directory ``directory`` (written as ``written``) cannot seed a
    workspace, as the rest of a sentence about the ``files`` key; None when it can."""
    try:
        found = directory.is_dir()
    except (OSError, ValueError):  # a name too long, a loop of links
        found = False
    if not found:
        return f"names no directory next to the suite file: {show(written)}"
    if (problem := tree_problem(directory, max_bytes)) is not None:
        return f"names a directory that cannot seed a workspace: {problem}"
    return None


def read_head(path: Path, limit: int) -> str | None:
    """Up to ``limit`` bytes from the start of a regular file, as text (bad bytes
    replaced); None when it is not a regular file or cannot be read. For cheap sniffing:
    never blocks on a FIFO, never reads a device."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return file.read(limit).decode("utf-8", errors="replace")


def gunzip(data: bytes, path: Path, max_bytes: int = DEFAULT_MAX_FILE_BYTES) -> bytes:
    """The decompressed bytes of gzip ``data`` read from ``path`` (every member), of at
    most ``max_bytes`` once decompressed: decompression stops one byte past the cap, so a
    gzip bomb costs no more memory than a file of the cap. Raises ValueError naming the
    file."""
    limit = f"the limit is {max_bytes / 1024 / 1024:.3g} MB (--agentbench-max-file-mb)"
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data), mode="rb") as file:
            out = file.read(max_bytes + 1)
    except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
        reason = "it ends early (truncated)" if isinstance(exc, EOFError) else str(exc)
        raise ValueError(f"{path} is not a readable gzip file: {reason}") from None
    if len(out) > max_bytes:
        raise ValueError(
            f"{path} is too large once decompressed (over {max_bytes} bytes from "
            f"{len(data)} compressed: a gzip bomb?); {limit}"
        )
    return out


def read_text(path: Path, max_bytes: int = DEFAULT_MAX_FILE_BYTES) -> str:
    """A regular file's text (UTF-8, BOM allowed) of at most ``max_bytes``; raises
    ValueError naming the file. A file whose name ends ``.gz`` is decompressed first, the
    cap applying to the decompressed data."""
    data = read_bytes(path, max_bytes)
    if path.name.lower().endswith(".gz"):
        data = gunzip(data, path, max_bytes)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ValueError(f"{path} is not UTF-8 text (bad byte at line {line})") from None


def read_document(path: Path, max_bytes: int = DEFAULT_MAX_FILE_BYTES) -> tuple[object, str]:
    """The parsed file and its format (``toml``, ``json``, ``yaml``); raises ValueError
    for an unknown extension, an unreadable, special or oversized file, or a syntax error
    (with line/column). The document is whatever the file holds (``object``): TOML and
    YAML can hold dates, YAML keys that are not strings; the loader checks it is JSON."""
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise ValueError(f"unknown suite format {show(path.suffix)}; use .toml, .json or .yaml")
    text = read_text(path, max_bytes)
    if fmt == "yaml":
        return _parse_yaml(text), fmt
    try:
        return (tomllib.loads(text) if fmt == "toml" else json.loads(text)), fmt
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"TOML syntax error: {exc}") from None
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}"
        raise ValueError(f"JSON syntax error at {where}: {exc.msg}") from None
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"the {fmt.upper()} file cannot be read: {_reason(exc)}") from None


def _reason(exc: Exception) -> str:
    return "it is nested too deeply" if isinstance(exc, RecursionError) else str(exc)


def _parse_yaml(text: str) -> object:
    try:
        import yaml
    except ImportError:
        raise ValueError('YAML suites need PyYAML: pip install "pytest-agentbench[yaml]"') from None
    try:
        document: object = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        reason = ": ".join(filter(None, [exc.context, exc.problem])) or "invalid YAML"
        raise ValueError(f"YAML syntax error{where}: {reason}") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"YAML syntax error: {exc}") from None
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"the YAML file cannot be read: {_reason(exc)}") from None
    growth = alias_growth(document)
    if growth > MAX_ALIAS_GROWTH:
        raise ValueError(
            f"the YAML file's aliases expand it by {growth} values, over the limit of "
            f"{MAX_ALIAS_GROWTH} (an alias bomb?); write the values out or use fewer aliases"
        )
    return document


def alias_growth(value: object) -> int:
    """How many more values ``value`` holds written out than in memory: what YAML
    aliases (one object reachable by several paths) add. Linear in the memory size;
    an object that contains itself counts once there (it is reported elsewhere)."""
    if not isinstance(value, dict | list):
        return 0
    sizes: dict[int, int] = {}
    unique = 0
    stack: list[tuple[dict[object, object] | list[object], bool]] = [(value, False)]
    while stack:
        item, leaving = stack.pop()
        children = list(item.values()) if isinstance(item, dict) else item
        if leaving:
            sizes[id(item)] = 1 + sum(sizes.get(id(child), 1) for child in children)
            continue
        if id(item) in sizes:
            continue
        sizes[id(item)] = 1  # in progress: a self-reference counts once
        unique += 1 + sum(not isinstance(child, dict | list) for child in children)
        stack.append((item, True))
        stack.extend((child, False) for child in children if isinstance(child, dict | list))
    return sizes[id(value)] - unique


def parse_record(line: str) -> JsonObject:
    """One JSONL line as a dataset record; raises ValueError saying why it is not one."""
    try:
        record: JsonValue = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the line is not valid JSON: {exc.msg} (column {exc.colno})") from None
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"the line cannot be read as JSON: {_reason(exc)}") from None
    if not isinstance(record, dict):
        raise ValueError(f"the record must be a JSON object; got {type_name(record)}")
    return record
