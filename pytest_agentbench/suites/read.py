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
import re
import stat
import tomllib
import types
import zlib
from collections.abc import Iterator
from pathlib import Path

from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.suites.validate import Parts, json_path, show, type_name

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


class DocumentProblems(ValueError):
    """A file that parsed but cannot be used as written: ``problems``, one line each."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


class _Repeated(dict[object, object]):
    """A mapping whose source set some keys more than once (the last value kept, as the
    parser keeps it): ``repeated`` holds each such key, how often it was set, and where
    (YAML: the line and column of its last setting; JSON: the path says where)."""

    repeated: list[tuple[object, int, str]]


def _json_object(pairs: list[tuple[str, JsonValue]]) -> JsonObject:
    """A JSON object as ``object_pairs_hook`` gets it: a plain dict, or a ``_Repeated``
    one when a key is set twice (JSON would silently keep the last value)."""
    found = dict(pairs)
    if len(found) == len(pairs):
        return found
    counts: dict[str, int] = {}
    for key, _ in pairs:
        counts[key] = counts.get(key, 0) + 1
    repeated = _Repeated(found)
    repeated.repeated = [(key, count, "") for key, count in counts.items() if count > 1]
    return repeated  # type: ignore[return-value]  # a dict the walk below reports


def duplicate_keys(document: object, subject: str = "") -> list[str]:
    """One problem per key set twice in one mapping of ``document`` (parsed by this
    module), in document order: the JSON path, the key, how often, and where. Linear in
    the document's size; ``subject`` prefixes a path (``the record's``)."""
    problems: list[str] = []
    stack: list[tuple[Parts, object]] = [((), document)]
    while stack:
        parts, value = stack.pop()
        if isinstance(value, _Repeated):
            for key, count, where in value.repeated:
                times = "twice" if count == 2 else f"{count} times"
                place = f"{subject}{json_path(parts)}"
                problems.append(
                    f"{place} sets the key {show(key)} {times}{where}; set each key once "
                    "(the file would silently keep only the last value)"
                )
        if isinstance(value, dict):
            children = [
                ((*parts, k if isinstance(k, str) else show(k)), v) for k, v in value.items()
            ]
            stack.extend(reversed(children))
        elif isinstance(value, list):
            stack.extend(reversed([((*parts, i), item) for i, item in enumerate(value)]))
    return problems


def _no_duplicates(document: object, seen: bool) -> object:
    """``document``, or DocumentProblems listing its keys set twice (``seen``: the parser
    met at least one, so the walk is only paid for then)."""
    if seen and (problems := duplicate_keys(document)):
        raise DocumentProblems(problems)
    return document


class RepeatWatch:
    """An ``object_pairs_hook`` that counts the objects with a key set twice, so the walk
    that names them runs only when there is one."""

    def __init__(self) -> None:
        self.repeats = 0

    def __call__(self, pairs: list[tuple[str, JsonValue]]) -> JsonObject:
        found = _json_object(pairs)
        self.repeats += isinstance(found, _Repeated)
        return found


def _parse_json(text: str) -> object:
    watch = RepeatWatch()
    document: object = json.loads(text, object_pairs_hook=watch)
    return _no_duplicates(document, watch.repeats > 0)


_TOML_AT = re.compile(r"\(at line (\d+), column (\d+)\)")


def _toml_error(text: str, exc: tomllib.TOMLDecodeError) -> str:
    """tomllib's message, naming the key when a value is set twice (it says only
    "Cannot overwrite a value" and where)."""
    message = str(exc)
    found = _TOML_AT.search(message)
    if message.startswith("Cannot overwrite a value") and found:
        line = text.splitlines()[int(found.group(1)) - 1 : int(found.group(1))]
        key = line[0].split("=", 1)[0].strip() if line and "=" in line[0] else ""
        if key:
            return f"TOML syntax error: the key {show(key)} is set twice {found.group(0)}"
    return f"TOML syntax error: {message}"


def read_document(path: Path, max_bytes: int = DEFAULT_MAX_FILE_BYTES) -> tuple[object, str]:
    """The parsed file and its format (``toml``, ``json``, ``yaml``); raises ValueError
    for an unknown extension, an unreadable, special or oversized file, or a syntax error
    (with line/column), and DocumentProblems for keys a JSON or YAML mapping sets twice
    (TOML refuses those itself). The document is whatever the file holds (``object``):
    TOML and YAML can hold dates, YAML keys that are not strings; the loader checks it is
    JSON."""
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise ValueError(f"unknown suite format {show(path.suffix)}; use .toml, .json or .yaml")
    text = read_text(path, max_bytes)
    if fmt == "yaml":
        return _parse_yaml(text), fmt
    try:
        return (tomllib.loads(text) if fmt == "toml" else _parse_json(text)), fmt
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(_toml_error(text, exc)) from None
    except DocumentProblems:
        raise
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
    repeats: list[int] = []
    loader = _yaml_loader(yaml, repeats)
    try:
        document: object = yaml.load(text, Loader=loader)
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
    return _no_duplicates(document, bool(repeats))


def _yaml_loader(yaml: types.ModuleType, repeats: list[int]) -> type:
    """The safe loader (PyYAML's C one when built) whose mappings note a key set twice
    (PyYAML keeps the last value silently), with the line and column of its last setting.
    A key that a merge (``<<: *base``) brings in and the mapping sets again is an override,
    as YAML means it, not a duplicate. Each mapping with a repeated key appends to
    ``repeats``."""
    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    merge_tag = "tag:yaml.org,2002:merge"

    class Loader(base):  # type: ignore[misc,valid-type]
        def repeated_keys(self, node: object) -> list[tuple[object, int, str]]:
            seen: dict[object, int] = {}
            last: dict[object, str] = {}
            for key_node, _ in getattr(node, "value", []):
                if key_node.tag == merge_tag or not isinstance(key_node, yaml.ScalarNode):
                    continue
                key = self.construct_object(key_node)
                seen[key] = seen.get(key, 0) + 1
                mark = key_node.start_mark
                last[key] = f" (again at line {mark.line + 1}, column {mark.column + 1})"
            return [(key, count, last[key]) for key, count in seen.items() if count > 1]

        def construct_yaml_map(self, node: object) -> Iterator[object]:
            repeated = self.repeated_keys(node)
            data: dict[object, object] = {}
            if repeated:
                repeats.append(1)
                data = _Repeated()
                data.repeated = repeated
            yield data
            data.update(self.construct_mapping(node))

    Loader.add_constructor("tag:yaml.org,2002:map", Loader.construct_yaml_map)
    return Loader


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
    watch = RepeatWatch()
    try:
        record: JsonValue = json.loads(line, object_pairs_hook=watch)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the line is not valid JSON: {exc.msg} (column {exc.colno})") from None
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"the line cannot be read as JSON: {_reason(exc)}") from None
    if not isinstance(record, dict):
        raise ValueError(f"the record must be a JSON object; got {type_name(record)}")
    if watch.repeats:
        record_problem(record)
    return record


def record_problem(record: JsonValue) -> None:
    """Raises ValueError when a dataset record (parsed here) sets a key twice."""
    problems = duplicate_keys(record, "the record's ")
    if problems:
        raise ValueError("; ".join(problems).replace("the record's $ ", "the record "))
