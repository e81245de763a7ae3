"""Reporting N problems is linear in N: a suite whose every task carries the same problem
(thousands of rows of a dataset, say) is refused as fast per task as a small one. The test
counts work, not time: Python line events while loading suites of n, 2n and 3n such tasks.
Per-task work is the same for every task, so on linear code the two increments are equal;
any work that grows with the problems already seen (a scan of every problem per task)
makes the second increment larger."""

from __future__ import annotations

import gc
import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from suite_fuzz_support import real_loader

from pytest_agentbench.errors import SuiteError

Make = Callable[[Path, int], Path]


def missing_input(folder: Path, n: int) -> Path:
    """Every task misspells ``input`` (a schema problem per task)."""
    tasks = [{"id": f"t{i}", "inptu": "x", "target": "x"} for i in range(n)]
    path = folder / "bench_schema.json"
    path.write_text(json.dumps({"task": tasks}))
    return path


def unusable_target(folder: Path, n: int) -> Path:
    """Every task's target cannot be read by the verifier (a problem found per task after
    the schema, where each task asked whether the suite already had a problem)."""
    tasks = [{"id": f"t{i}", "input": "x", "target": "abc"} for i in range(n)]
    path = folder / "bench_fit.json"
    path.write_text(json.dumps({"suite": {"verifier": {"kind": "number"}}, "task": tasks}))
    return path


def dated_targets(folder: Path, n: int) -> Path:
    """Every task's target is a TOML date (not a JSON value) and it misspells ``input``:
    each schema problem was compared with every such value."""
    tasks = "".join(f'[[task]]\nid = "t{i}"\ninptu = "x"\ntarget = 2020-01-01\n' for i in range(n))
    path = folder / "bench_dates.toml"
    path.write_text(tasks)
    return path


def dataset_rows(folder: Path, n: int) -> Path:
    """Every row of a manifest's dataset lacks the input field."""
    (folder / "rows.jsonl").write_text("".join(json.dumps({"q": "x"}) + "\n" for _ in range(n)))
    path = folder / "bench_rows.toml"
    path.write_text('[suite]\ndataset = "rows.jsonl"\nfields = { input = "question" }\n')
    return path


def work(path: Path) -> int:
    """Line events of loading the suite at ``path`` (after one warm-up load), which must
    fail with one problem per task."""
    load = real_loader()
    with pytest.raises(SuiteError):
        load(path)
    count = 0

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        count += 1
        return tracer

    # the collector's finalizers would run Python lines of their own at moments that depend
    # on what else the process allocated (xdist, other tests): counted, they made the
    # increments differ by thousands of lines now and then; the loader's work is what counts
    gc.collect()
    gc.disable()
    sys.settrace(tracer)
    try:
        load(path)
    except SuiteError as exc:
        problems = exc.problems
    finally:
        sys.settrace(None)
        gc.enable()
    assert problems
    return count


@pytest.mark.slow
@pytest.mark.parametrize("make", [missing_input, unusable_target, dated_targets, dataset_rows])
def test_problems_of_every_task_cost_linear_work(tmp_path: Path, make: Make) -> None:
    n = 300
    counts = []
    for size in (n, 2 * n, 3 * n):
        folder = tmp_path / str(size)
        folder.mkdir()
        counts.append(work(make(folder, size)))
    first, second = counts[1] - counts[0], counts[2] - counts[1]
    # equal on linear code (the same lines for every task); quadratic code adds about
    # n * n work to the second increment over the first
    assert abs(second - first) <= first // 100, counts
