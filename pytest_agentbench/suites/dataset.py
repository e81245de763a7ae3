"""Datasets of a manifest: JSONL, a JSON array or CSV, read row by row (each row with the
line it starts on), and each row mapped onto task keys through ``suite.fields`` (the
field specs: suites/dataset_fields.py).

A field spec says where a task key's value comes from: a field name (``"question"``),
or a table ``{ field = "answer", after = "####" }`` / ``{ template = "{prompt}{code}" }``
with optional ``after`` (the text after the last marker, stripped) and ``join`` (a list
joined into text). ``choices`` may also be a list of field names (one choice each, as
MMLU's A-D columns). Problems are ``(parts, text)`` pairs as in ``validate.py``; a row
that cannot be read at all is a ``Row`` with a ``problem``.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.suites.dataset_fields import FieldMap, spec_problems
from pytest_agentbench.suites.read import RepeatWatch, parse_record, read_text, record_problem
from pytest_agentbench.suites.validate import (
    Parts,
    json_path,
    record_check,
    show,
    structure_problems,
    type_name,
)

#: Gives a manifest's dataset (its name, the manifest's path) a local path, or None.
FindDataset = Callable[[str, Path], "Path | None"]
#: Dataset formats by file extension (each may also end ``.gz``: read decompressed).
DATASET_FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv"}


def dataset_format(path: Path) -> str | None:
    """The format of the dataset at ``path`` by its extension, ``.gz`` looked through
    (``HumanEval.jsonl.gz`` is JSONL); None for an unknown one."""
    name = path.name.lower()
    inner = Path(name.removesuffix(".gz")).suffix if name.endswith(".gz") else path.suffix
    return DATASET_FORMATS.get(inner.lower())


@dataclass(frozen=True)
class Row:
    """One dataset row: the line it starts on, and its record or why it has none."""

    line: int
    record: JsonObject | None
    problem: str | None = None


def read_rows(path: Path, columns: list[str] | None, max_bytes: int) -> list[Row]:
    """The rows of the dataset at ``path``, by its extension (``.jsonl``/``.ndjson``,
    ``.json``: an array of objects, ``.csv``: a header row unless ``columns`` names the
    columns), each optionally gzipped (``.jsonl.gz``: the size cap applies to the
    decompressed data). Raises ValueError for what spoils the whole file (missing,
    unreadable, an unknown extension, a JSON syntax error, a bad CSV header)."""
    fmt = dataset_format(path)
    if fmt is None:
        known = ", ".join(DATASET_FORMATS)
        gz = path.name.lower().endswith(".gz")
        suffix = "".join(path.suffixes[-2:]) if gz else path.suffix
        raise ValueError(
            f"has an unknown dataset extension {show(suffix)}; use {known} "
            "(each may be gzipped: .gz)"
        )
    if not path.exists() and not path.is_symlink():
        raise ValueError(f"names no file: looked for {path}")
    text = read_text(path, max_bytes)
    if fmt == "jsonl":
        return list(_jsonl_rows(text))
    if fmt == "json":
        return list(_json_rows(text))
    return list(_csv_rows(text, columns, max_bytes))


def _jsonl_rows(text: str) -> Iterator[Row]:
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            try:
                yield Row(number, parse_record(line))
            except ValueError as exc:
                yield Row(number, None, str(exc))


def _json_rows(text: str) -> Iterator[Row]:
    """The items of a JSON array, each with the line its value starts on."""
    watch = RepeatWatch()
    decoder = json.JSONDecoder(object_pairs_hook=watch)
    position = _skip_space(text, 0)
    if not text.startswith("[", position):
        found = "nothing" if position >= len(text) else show(text[position : position + 10])
        raise ValueError(f"a JSON dataset must be an array of objects; it starts with {found}")
    position = _skip_space(text, position + 1)
    if text.startswith("]", position):
        return
    while True:
        try:
            value: JsonValue
            value, end = decoder.raw_decode(text, position)
        except json.JSONDecodeError as exc:
            raise ValueError(f"JSON syntax error at line {exc.lineno}: {exc.msg}") from None
        except (ValueError, RecursionError):
            line = text.count("\n", 0, position) + 1
            raise ValueError(
                f"the value at line {line} cannot be read (nested too deeply?)"
            ) from None
        line = text.count("\n", 0, position) + 1
        repeated, watch.repeats = watch.repeats, 0
        problem = _repeat_problem(value) if repeated else None
        if problem is not None:
            yield Row(line, None, problem)
        elif isinstance(value, dict):
            yield Row(line, value)
        else:
            yield Row(line, None, f"the record must be a JSON object; got {type_name(value)}")
        position = _skip_space(text, end)
        if text.startswith("]", position):
            if text[position + 1 :].strip():
                line = text.count("\n", 0, position) + 1
                raise ValueError(f"JSON syntax error at line {line}: text after the array")
            return
        if not text.startswith(",", position):
            line = text.count("\n", 0, position) + 1
            raise ValueError(f"JSON syntax error at line {line}: expected ',' or ']'")
        position = _skip_space(text, position + 1)


def _repeat_problem(value: JsonValue) -> str | None:
    try:
        record_problem(value)
    except ValueError as exc:
        return str(exc)
    return None


def _skip_space(text: str, position: int) -> int:
    while position < len(text) and text[position] in " \t\r\n":
        position += 1
    return position


def _csv_rows(text: str, columns: list[str] | None, max_bytes: int) -> Iterator[Row]:
    """CSV rows as records of strings; the first row names the columns unless
    ``columns`` does. A row with another number of values is a bad row."""
    csv.field_size_limit(max(csv.field_size_limit(), max_bytes))
    reader = csv.reader(io.StringIO(text, newline=""))
    start = 1
    named = "suite.columns names"
    try:
        for values in reader:
            line, start = start, reader.line_num + 1
            if not any(value.strip() for value in values):
                continue
            if columns is None:
                columns, named = values, f"the header row (line {line}) names"
                _check_header(columns)
            elif len(values) != len(columns):
                got = f"has {len(values)} values; {named} {len(columns)} columns"
                yield Row(line, None, f"the row {got}")
            else:
                record: JsonObject = dict(zip(columns, values, strict=True))
                yield Row(line, record)
    except csv.Error as exc:
        raise ValueError(f"CSV error at line {reader.line_num}: {exc}") from None


def _check_header(columns: list[str]) -> None:
    seen: set[str] = set()
    for i, name in enumerate(columns, start=1):
        if not name.strip():
            raise ValueError(f"the CSV header's column {i} has no name (set suite.columns?)")
        if name in seen:
            raise ValueError(f"the CSV header names the column {show(name)} twice")
        seen.add(name)


@dataclass(frozen=True)
class MappedRow:
    """A dataset row as a task table (None when the row cannot be read), its problems as
    ``(path, text)`` (path ``""`` for the row as a whole) and the task keys they break."""

    line: int
    data: JsonObject | None
    problems: list[tuple[str, str]]
    broken: frozenset[Parts] = frozenset()


def dataset_rows(
    manifest: Path, table: Mapping[str, JsonValue], max_bytes: int, find: FindDataset | None = None
) -> tuple[list[tuple[str, str]], list[MappedRow], Callable[[Parts], str]]:
    """The manifest's problems (``(path, text)``), its rows mapped through
    ``table["fields"]``, and how to print a path inside a row's task table. No rows when
    the field specs are broken or the file cannot be read. ``find`` (a plugin's hook) may
    give the dataset a local path; else it is a file next to the manifest. ``table`` is
    the suite table, its ``dataset``, ``fields`` and ``columns`` checked by the schema."""
    name, fields, columns = str(table["dataset"]), table.get("fields"), table.get("columns")
    fields = fields if isinstance(fields, dict) else {}
    problems = [(json_path(parts), text) for parts, text in spec_problems(fields)]
    try:
        local = find(name, manifest) if find is not None else None
    except Exception as exc:
        reason = show(f"{type(exc).__name__}: {exc}", 300)
        return (
            [*problems, ("$.suite.dataset", f"could not be fetched by a plugin: {reason}")],
            [],
            json_path,
        )
    try:
        named = [str(column) for column in columns] if isinstance(columns, list) else None
        rows = read_rows(local or manifest.parent / name, named, max_bytes)
    except ValueError as exc:
        text = str(exc)
        if not text.startswith(("names no file", "has an unknown")):
            text = f"names a file that cannot be read: {text}"
        return [*problems, ("$.suite.dataset", text)], [], json_path
    if not rows:
        problems.append(("$.suite.dataset", f"names a file with no records: {show(name)}"))
    mapper = FieldMap(fields)
    if problems:
        return problems, [], mapper.locate
    mapped = []
    for row in rows:
        if row.record is None:
            mapped.append(MappedRow(row.line, None, [("", str(row.problem))]))
            continue
        data, missing = mapper.task(row.record)
        found = structure_problems(data, record_check())
        listed = [("", text) for _, text in missing]
        listed += [(mapper.locate(parts), text) for parts, text in found]
        broken = frozenset(parts for parts, _ in missing + found)
        mapped.append(MappedRow(row.line, data, listed, broken))
    return problems, mapped, mapper.locate


# -- slicing and sampling -------------------------------------------------------------------------


def pick_indexes(
    total: int, limit: tuple[int | None, int | None] | None, sample: int | None, seed: int
) -> list[int]:
    """Which of ``total`` tasks (0-based, in file order) a run keeps: the ``limit`` range
    first (``start:stop``, Python slice semantics), then a seeded sample of ``sample``
    of those (in file order). The same arguments always give the same tasks."""
    import random

    kept = list(range(total))
    if limit is not None:
        kept = kept[slice(*limit)]
    if sample is not None and sample < len(kept):
        chosen = random.Random(seed).sample(range(len(kept)), sample)
        kept = [kept[i] for i in sorted(chosen)]
    return kept
