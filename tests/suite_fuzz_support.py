"""A seeded generator of malformed suites, and the loop that loads them.

Why: a broken suite must end as one SuiteError naming its file, never as a traceback or
a hang. Hand-written cases cover the problems we thought of; this generator starts from
valid suites of every format (TOML, YAML, JSON, a manifest plus its JSONL dataset) and
breaks them at random: wrong types at every key, missing and unknown keys, deep nesting,
huge numbers, NaN/inf, bad templates and verifier options, duplicate keys and ids, and
at the byte level truncation, invalid UTF-8, empty files and binary garbage.

The same seed gives the same cases, so a failure is replayed with its case number:
``python tests/suite_fuzz_support.py --seed 20261201 --count 1 --start 1234``. Run as a script,
it loads the cases in this process and prints one JSON report; each case has its own
SIGALRM guard, so a hang is reported as such (the caller adds an overall timeout).
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import math
import random
import shutil
import signal
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from suite_fuzz_seeds_support import (
    BASES,
    DEEP,
    KEYS,
    KINDS,
    MANIFEST,
    ODD_KEYS,
    OPTIONS,
    PATHS,
    RECORDS,
    TEMPLATES,
    WEIRD,
)

SEED = 20261201
FORMATS = ("toml", "json", "yaml", "yml")


@dataclass
class Case:
    """One generated case: files to write (name → bytes), the suite file, what was done."""

    number: int
    suite: str
    files: dict[str, bytes] = field(default_factory=dict)
    steps: list[str] = field(default_factory=list)


def _nest(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


def _slots(value: Any, parts: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path to a value inside ``value`` (dict keys and list indexes), at most 20
    levels down (a deep-nesting mutation is not walked again)."""
    yield parts
    if len(parts) >= 20:
        return
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _slots(inner, (*parts, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield from _slots(inner, (*parts, index))


def _get(value: Any, parts: tuple[Any, ...]) -> Any:
    for part in parts:
        value = value[part]
    return value


def _weird(rng: random.Random) -> Any:
    roll = rng.random()
    if roll < 0.05:
        return _nest(rng.choice((50, 200)))
    if roll < 0.1:
        return {rng.choice(KEYS): rng.choice(WEIRD) for _ in range(rng.randint(1, 4))}
    return copy.deepcopy(rng.choice(WEIRD))


def _mutate_tree(doc: Any, rng: random.Random, steps: list[str]) -> Any:
    """One structural change somewhere in ``doc`` (returns the new document)."""
    slots = list(_slots(doc))
    parts = rng.choice(slots)
    op = rng.randrange(10)
    if not parts or op == 0:
        if rng.random() < 0.15:
            steps.append("replace the whole document")
            return _weird(rng)
        parts = rng.choice(slots)
    parent_parts, last = parts[:-1], parts[-1] if parts else None
    if not parts:
        return doc
    parent = _get(doc, parent_parts)
    if op in (0, 1, 2):
        steps.append(f"set {parts} to a wrong value")
        parent[last] = _weird(rng)
    elif op == 3:
        steps.append(f"delete {parts}")
        del parent[last]
    elif op == 4:
        target = _get(doc, parts)
        if isinstance(target, dict):
            key = rng.choice(KEYS) if rng.random() < 0.85 else rng.choice(ODD_KEYS)
            steps.append(f"add key {key!r} at {parts}")
            target[key] = _weird(rng)
        elif isinstance(target, list):
            steps.append(f"append to {parts}")
            target.append(copy.deepcopy(rng.choice(target)) if target else _weird(rng))
    elif op == 5:
        steps.append(f"bad template at {parent_parts}")
        if isinstance(parent, dict):
            parent["template"] = rng.choice(TEMPLATES)
    elif op == 6:
        steps.append(f"bad verifier at {parent_parts}")
        if isinstance(parent, dict):
            table = {"kind": rng.choice(KINDS)}
            for _ in range(rng.randint(1, 3)):
                option = rng.choice((*KEYS, *OPTIONS))
                table[option] = _weird(rng)
            parent["verifier"] = table
    elif op == 7:
        steps.append(f"bad scripted replies at {parent_parts}")
        if isinstance(parent, dict):
            parent["scripted"] = [_weird(rng) for _ in range(rng.randint(0, 3))]
    elif op == 8:
        table = doc.get(rng.choice(("suite", "task"))) if isinstance(doc, dict) else None
        table = rng.choice(table) if isinstance(table, list) and table else table
        if isinstance(table, dict):
            key, value = rng.choice(("files", "dataset")), rng.choice(PATHS)
            steps.append(f"{key} = {value[:20]!r}")
            table[key] = value
    else:
        tasks = doc.get("task") if isinstance(doc, dict) else None
        if isinstance(tasks, list) and tasks:
            steps.append("duplicate a task (same id)")
            tasks.append(copy.deepcopy(rng.choice(tasks)))
    return doc


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return (
            "nan"
            if math.isnan(value)
            else ("inf" if value > 0 else "-inf")
            if math.isinf(value)
            else repr(value)
        )
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value if v is not None) + "]"
    if isinstance(value, dict):
        pairs = (
            f"{json.dumps(str(k))} = {_toml_value(v)}" for k, v in value.items() if v is not None
        )
        return "{" + ", ".join(pairs) + "}"
    return '""'


def to_toml(doc: Any) -> str:
    """TOML for ``doc`` (inline tables; None dropped, since TOML has no null)."""
    if not isinstance(doc, dict):
        return f"value = {_toml_value(doc)}\n"
    return "".join(
        f"{json.dumps(str(k))} = {_toml_value(v)}\n" for k, v in doc.items() if v is not None
    )


def serialize(doc: Any, fmt: str) -> bytes:
    if fmt == "toml":
        return to_toml(doc).encode("utf-8", "surrogatepass")
    if fmt == "json":
        return json.dumps(doc, ensure_ascii=False, default=str).encode("utf-8", "surrogatepass")
    import yaml

    try:
        return yaml.safe_dump(doc, allow_unicode=True, sort_keys=False).encode(
            "utf-8", "surrogatepass"
        )
    except (yaml.YAMLError, RecursionError):
        return json.dumps(doc, default=str).encode()  # JSON is YAML too


def _mutate_bytes(data: bytes, fmt: str, rng: random.Random, steps: list[str]) -> bytes:
    op = rng.randrange(8)
    if op == 0:
        steps.append("truncate")
        return data[: rng.randrange(len(data) + 1)]
    if op == 1:
        steps.append("insert invalid UTF-8")
        at = rng.randrange(len(data) + 1)
        return data[:at] + rng.choice((b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80\x80")) + data[at:]
    if op == 2:
        steps.append("empty or blank file")
        return rng.choice((b"", b"\n", b"   ", b"\xef\xbb\xbf", b"\x00"))
    if op == 3:
        steps.append("binary garbage")
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300)))
    if op == 4:
        steps.append("duplicate top-level key")
        if fmt == "json":
            return data.replace(b"{", b'{"suite": {}, ', 1)
        if fmt in ("yaml", "yml"):
            return b"suite: {}\n" + data
        return b'"suite" = {}\n' + data
    if op == 5:
        steps.append("flip a byte")
        if not data:
            return data
        at = rng.randrange(len(data))
        return data[:at] + bytes([rng.randrange(256)]) + data[at + 1 :]
    if op == 6:
        steps.append("deep brackets")
        depth = rng.choice((100, DEEP, 50000))
        if fmt == "toml":
            return data + b"\nx = " + b"[" * depth + b"]" * depth
        if fmt == "json" and data.startswith(b"{"):
            return b'{"deep": ' + b"[" * depth + b"]" * depth + b", " + data[1:]
        return b"[" * depth + b"]" * depth
    steps.append("YAML tags and anchors" if fmt in ("yaml", "yml") else "no byte change")
    if fmt in ("yaml", "yml"):
        return (
            rng.choice(
                (
                    b"a: &a [*a]\n",
                    b"!!python/object:os.system {}\n",
                    b"x: !!binary AA\n",
                    b"? [a]\n: 1\n",
                )
            )
            + data
        )
    return data


def _dataset(rng: random.Random, steps: list[str]) -> bytes:
    lines = [json.dumps(r) for r in copy.deepcopy(RECORDS)]
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(5)
        if op == 0:
            record = copy.deepcopy(rng.choice(RECORDS))
            record[rng.choice(list(record))] = _weird(rng)
            steps.append("dataset: wrong value in a record")
            try:
                lines.append(json.dumps(record, default=str))
            except (ValueError, RecursionError):
                lines.append('{"task_id": "deep", "prompt": ' + "[" * DEEP + "]" * DEEP + "}")
        elif op == 1:
            steps.append("dataset: a line that is not an object")
            lines.insert(
                rng.randrange(len(lines) + 1),
                rng.choice(("[]", "1", "null", "{", '"s"', "NaN", "")),
            )
        elif op == 2:
            steps.append("dataset: missing field")
            record = copy.deepcopy(rng.choice(RECORDS))
            del record[rng.choice(list(record))]
            lines.append(json.dumps(record, default=str))
        elif op == 3:
            steps.append("dataset: duplicate record")
            lines.append(lines[0] if lines else "{}")
        else:
            steps.append("dataset: no records")
            lines = []
    data = "\n".join(lines).encode()
    if rng.random() < 0.2:
        data = _mutate_bytes(data, "json", rng, steps)
    return data


def make_case(
    number: int, seed: int = SEED, run_limit_s: float | None = None, own_name: bool = False
) -> Case:
    """The case ``number`` of the run seeded with ``seed`` (independent of other cases).
    With ``own_name`` (implied by ``run_limit_s``), a case made to be collected beside
    others in one pytest run: its own suite name and file name (``case<number>``), since
    two files may not hold the same task of one suite. With ``run_limit_s``, no task
    timeout above the limit either."""
    rng = random.Random(f"{seed}:{number}")
    manifest = rng.random() < 0.25
    fmt = rng.choice(FORMATS)
    case = Case(number, f"bench_case.{fmt}")
    doc: Any = copy.deepcopy(MANIFEST if manifest else rng.choice(BASES))
    if isinstance(doc.get("suite"), dict) and "name" in doc["suite"]:
        # one suite name per case: the same suite and task id in two files is a
        # collection error of its own, which would hide what the case tests
        doc["suite"]["name"] = f"case{number}"
    case.steps.append(f"{'manifest' if manifest else 'suite'} as {fmt}")
    for _ in range(rng.choice((0, 1, 1, 2, 3))):
        doc = _mutate_tree(doc, rng, case.steps)
    if run_limit_s is not None or own_name:
        case.suite = f"bench_case{number}.{fmt}"
        _runnable(doc, number, run_limit_s)
    try:
        data = serialize(doc, fmt)
    except (ValueError, RecursionError, TypeError):
        data = b"{"
        case.steps.append("unserializable: an unclosed brace instead")
    if rng.random() < 0.3:
        data = _mutate_bytes(data, fmt, rng, case.steps)
    case.files[case.suite] = data
    if manifest:
        if rng.random() < 0.9:
            case.files["data.jsonl"] = _dataset(rng, case.steps)
        else:
            case.steps.append("dataset file missing")
    if rng.random() < 0.05:
        case.files["fixtures/keep.txt"] = b"x"
    return case


def _runnable(doc: Any, number: int, limit_s: float | None) -> None:
    """Name the suite ``case<number>`` and cut every ``timeout_s`` above ``limit_s`` to it
    (a smaller one, however odd, is kept: it is part of what the run-time fuzz tries)."""
    if not isinstance(doc, dict):
        return
    if limit_s is None:
        if isinstance(doc.get("suite"), dict):
            doc["suite"]["name"] = f"case{number}"
        return
    doc.setdefault("suite", {})
    tables = [doc.get("suite"), *(doc.get("task") if isinstance(doc.get("task"), list) else ())]
    for table in tables:
        if not isinstance(table, dict):
            continue
        timeout = table.get("timeout_s")
        odd = not isinstance(timeout, int | float) or isinstance(timeout, bool)
        if (odd or timeout > limit_s) and (table is doc.get("suite") or "timeout_s" in table):
            table["timeout_s"] = limit_s
    if isinstance(doc.get("suite"), dict):
        doc["suite"]["name"] = f"case{number}"


class Hang(Exception):
    """Raised by the per-case alarm."""


def _alarm(signum: int, frame: Any) -> None:
    raise Hang


def check_case(case: Case, root: Path, load: Callable[[Path], Any], limit_s: float) -> str:
    """Load one case: ``suite`` or ``error`` (a SuiteError naming the file) when it ends
    well, else a description of what went wrong (exception with traceback, or a hang)."""
    from pytest_agentbench.errors import SuiteError
    from pytest_agentbench.suites.load import Suite

    folder = root / f"case{case.number}"
    for name, data in case.files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    suite_path = folder / case.suite
    signal.setitimer(signal.ITIMER_REAL, limit_s)
    try:
        result = load(suite_path)
    except SuiteError as exc:
        text = str(exc)
        if not text.startswith(f"{suite_path}: invalid suite"):
            return f"SuiteError not naming the file first: {text[:300]!r}"
        if "Traceback" in text:
            return f"SuiteError carrying a traceback: {text[:300]!r}"
        return "error"
    except Hang:
        return f"hang: no outcome within {limit_s} s"
    except BaseException:
        return "crash: " + traceback.format_exc()[-2000:]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    if not isinstance(result, Suite) or not result.tasks:
        return f"load returned {result!r} instead of a suite with tasks"
    return "suite"


def real_loader() -> Callable[[Path], Any]:
    """``load_suite`` wired as collection wires it: built-in verifiers and tools, and the
    scripted provider's reply check."""
    from pytest_agentbench.hooks import builtins
    from pytest_agentbench.scripted.script import Reply
    from pytest_agentbench.suites.load import load_suite

    verifiers = {v.kind: v for v in builtins.pytest_agentbench_verifiers()}
    tools = [t.name for t in builtins.pytest_agentbench_tools()]

    def load(path: Path) -> Any:
        return load_suite(path, verifiers, reply_check=Reply.parse, tools=tools)

    return load


def run(seed: int, start: int, count: int, limit_s: float) -> dict[str, Any]:
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    signal.signal(signal.SIGALRM, _alarm)
    load = real_loader()
    failures: list[dict[str, Any]] = []
    outcomes = {"suite": 0, "error": 0}
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        for number in range(start, start + count):
            case = make_case(number, seed)
            problem = check_case(case, Path(tmp), load, limit_s)
            shutil.rmtree(Path(tmp) / f"case{number}", ignore_errors=True)
            if problem in outcomes:
                outcomes[problem] += 1
            else:
                failures.append({"case": number, "steps": case.steps, "problem": problem})
    return {"seed": seed, "start": start, "count": count, **outcomes, "failures": failures}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--limit-s", type=float, default=20.0, help="per-case hang guard")
    args = parser.parse_args(argv)
    print(json.dumps(run(args.seed, args.start, args.count, args.limit_s)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
