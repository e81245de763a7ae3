"""Tasks written in Python: a ``bench_*.py`` file is a suite like a TOML one.

Each function decorated with :func:`task` is one task: its name is the task's id, the
decorator's keywords are the task's fields (``target``, ``verifier``, ``scripted`` …, as
in a suite file) and the function, called once at collection, returns its ``input`` (a
string) or a table of fields. A module-level ``SUITE`` table holds the suite's defaults,
and a module-level ``agentbench_tasks()`` may return more task tables (generated tasks).
The module is turned into a suite document and validated like any suite file, so the
errors are the same. Imports nothing heavy: ``bench_*.py`` files import it.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import TypeVar

from pytest_agentbench.errors import SuiteError

_MARK = "__agentbench_task__"
F = TypeVar("F", bound=Callable[..., object])


def task(**fields: object) -> Callable[[F], F]:
    """Declare the decorated function a task of its ``bench_*.py`` suite (see above)."""

    def declare(function: F) -> F:
        setattr(function, _MARK, dict(fields))
        return function

    return declare


def suite_document(path: Path) -> dict[str, object]:
    """The suite document of the ``bench_*.py`` module at ``path``; SuiteError naming the
    file (and the function) when the module cannot be imported or a task not built."""
    module = _import(path)
    where = str(path)
    suite = getattr(module, "SUITE", {})
    if not isinstance(suite, Mapping):
        raise SuiteError(where, [f"SUITE must be a dict of suite defaults; got {_type(suite)}"])
    tasks: list[object] = []
    problems: list[str] = []
    for name, value in vars(module).items():
        fields = getattr(value, _MARK, None)
        if not callable(value) or not isinstance(fields, dict):
            continue
        try:
            made = value()
        except Exception as exc:
            problems.append(f"task function {name}() raised {type(exc).__name__}: {exc}")
            continue
        if isinstance(made, str):
            made = {"input": made}
        if not isinstance(made, Mapping):
            problems.append(
                f"task function {name}() must return the input (a str) or a dict of "
                f"task fields; got {_type(made)}"
            )
            continue
        tasks.append({"id": name, **fields, **made})
    generate = getattr(module, "agentbench_tasks", None)
    if callable(generate):
        try:
            tasks.extend(generate())
        except Exception as exc:
            problems.append(f"agentbench_tasks() raised {type(exc).__name__}: {exc}")
    if problems:
        raise SuiteError(where, problems)
    return {"suite": dict(suite), "task": tasks}


def _import(path: Path) -> ModuleType:
    """Import the file as a module of its own name (its folder on sys.path meanwhile, so
    it may import its neighbours)."""
    name = f"agentbench_bench.{path.stem}_{abs(hash(str(path.resolve()))):x}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise SuiteError(str(path), ["cannot be imported as a Python module"])
    module = importlib.util.module_from_spec(spec)
    folder = str(path.parent)
    added = folder not in sys.path
    if added:
        sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise SuiteError(str(path), [f"importing it raised {type(exc).__name__}: {exc}"]) from None
    finally:
        if added and folder in sys.path:
            sys.path.remove(folder)
    return module


def _type(value: object) -> str:
    return type(value).__name__
