"""pytest never collects below a run folder: a code task's workspace holds the model's
``solution.py`` and ``test_solution.py``, and a second ``pytest`` in the same project
(with or without ``--agentbench``) used to collect, and fail on, every one of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agentbench import plugin
from pytest_agentbench.artifacts import paths

SUITE = (
    "[suite]\n"
    'verifier = { kind = "python_tests", tests = "from solution import add\\n'
    'def test_add():\\n    assert add(1, 2) == 3\\n" }\n'
    "[[task]]\n"
    'id = "add"\n'
    'input = "Write add(a, b)."\n'
    'scripted = ["def add(a, b):\\n    return a + b\\n"]\n'
)


def test_the_plugin_and_the_writer_name_one_marker() -> None:
    assert plugin.RUN_MARKER == paths.RUN_MARKER


def test_a_second_run_in_the_same_folder_collects_no_rollout_file(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".toml", bench_code=SUITE)
    pytester.makepyfile(test_mine="def test_mine():\n    pass\n")
    first = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    first.assert_outcomes(passed=2)
    run_dir = (pytester.path / "agentbench-results" / "latest").resolve()
    assert (run_dir / paths.RUN_MARKER).is_file()
    written = sorted(p.name for p in run_dir.rglob("test_*.py"))
    assert "test_solution.py" in written  # the run left a test file pytest would collect

    again = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    again.assert_outcomes(passed=2)

    # plain pytest: the project's own test is collected, nothing of the run's
    plain = pytester.runpytest("-p", "no:cacheprovider", "--collect-only", "-q")
    assert plain.ret == 0, plain.stdout.str()
    collected = [line for line in plain.outlines if "::" in line]
    assert collected == ["test_mine.py::test_mine"]

    # a run folder written before the marker existed is known by its reports
    for marker in (pytester.path / "agentbench-results").glob(f"*/{paths.RUN_MARKER}"):
        marker.unlink()
    legacy = pytester.runpytest("-p", "no:cacheprovider", "--collect-only", "-q")
    assert [line for line in legacy.outlines if "::" in line] == ["test_mine.py::test_mine"]


def test_a_folder_with_only_a_summary_is_collected(pytester: pytest.Pytester) -> None:
    """The legacy rule needs the reports and the tasks folder: a project folder that
    merely holds a summary.json is collected as before."""
    folder = pytester.mkdir("data")
    (folder / "summary.json").write_text("{}")
    (folder / "tasks").mkdir()
    Path(folder / "test_data.py").write_text("def test_data():\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "--collect-only", "-q")
    assert [line for line in result.outlines if "::" in line] == ["data/test_data.py::test_data"]
