"""Task ids: any Unicode id runs end to end, an id pytest cannot address is refused at
collection, and one suite never holds two tasks with the same id, even across files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_agentbench.errors import SuiteError
from pytest_agentbench.suites.load import load_suite
from pytest_agentbench.verifiers.builtin import BUILTIN_VERIFIERS

VERIFIERS = {verifier.kind: verifier for verifier in BUILTIN_VERIFIERS}


def test_a_unicode_task_in_a_unicode_file_runs_to_a_pass(pytester: pytest.Pytester) -> None:
    (pytester.path / "bench_数学.toml").write_text(
        '[[task]]\nid = "задача-1"\ninput = "2+2?"\ntarget = "4"\nscripted = ["4"]\n'
        '[[task]]\nid = "two words"\ninput = "2+3?"\ntarget = "5"\nscripted = ["5"]\n',
        encoding="utf-8",
    )
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    # selectable by node id, like any test
    one = pytester.runpytest("--agentbench", "-p", "no:cacheprovider", "bench_数学.toml::задача-1")
    one.assert_outcomes(passed=1)
    latest = pytester.path / "agentbench-results" / "latest"
    tests = json.loads((latest / "ctrf.json").read_text(encoding="utf-8"))["results"]["tests"]
    entry = next(test for test in tests if test["name"] == "bench_数学.toml::задача-1")
    assert entry["status"] == "passed"
    (extra,) = entry["extra"].values()
    record = json.loads((Path(extra["rollout_dir"]) / "result.json").read_text(encoding="utf-8"))
    assert (record["suite"], record["task_id"], record["outcome"]) == ("数学", "задача-1", "passed")


def test_ids_with_leading_and_trailing_spaces_run_like_any_other(
    pytester: pytest.Pytester,
) -> None:
    """An id travels to the scripted provider in an HTTP header, where a value may not start
    or end with a space: it is encoded, so the id is never a harness error."""
    ids = [" lead", "trail ", "  both  ", "in side"]
    tasks = "".join(
        f'[[task]]\nid = "{task_id}"\ninput = "2+{n}?"\ntarget = "{2 + n}"\n'
        f'scripted = ["{2 + n}"]\n'
        for n, task_id in enumerate(ids)
    )
    (pytester.path / "bench_spaced.toml").write_text(f'[suite]\nname = " spaced "\n{tasks}')
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
    summary = pytester.path / "agentbench-results" / "latest" / "summary.json"
    records = json.loads(summary.read_text(encoding="utf-8"))["tasks"]
    assert sorted((t["suite"], t["task_id"], t["outcome"]) for t in records) == sorted(
        (" spaced ", task_id, "passed") for task_id in ids
    )


def test_an_id_pytest_cannot_address_is_refused_with_the_reason(tmp_path: Path) -> None:
    path = tmp_path / "bench_ids.toml"
    path.write_text('[[task]]\nid = "part::one"\ninput = "x"\ntarget = "x"\n')
    with pytest.raises(SuiteError) as caught:
        load_suite(path, VERIFIERS)
    assert caught.value.problems == [
        'task 1 ("part::one"): $.task[0].id must not contain "::" (pytest\'s node-id '
        'separator: the task could not be selected as <file>::<id>); got "part::one"'
    ]


def test_two_files_of_one_suite_cannot_hold_the_same_task(pytester: pytest.Pytester) -> None:
    task = '[[task]]\nid = "{id}"\ninput = "x"\ntarget = "x"\nscripted = ["x"]\n'
    (pytester.path / "bench_a.toml").write_text(
        '[suite]\nname = "math"\n' + task.format(id="same") + task.format(id="only-a")
    )
    (pytester.path / "bench_b.toml").write_text(
        '[suite]\nname = "math"\n' + task.format(id="only-b") + task.format(id="same")
    )
    (pytester.path / "bench_math.toml").write_text(task.format(id="only-a"))  # name from file
    result = pytester.runpytest(
        "--agentbench", "-p", "no:cacheprovider", "--continue-on-collection-errors"
    )
    result.assert_outcomes(passed=2, errors=2)
    result.stdout.fnmatch_lines(
        [
            "bench_b.toml: invalid suite (1 problem)",
            '  - task 2 ("same"): the suite "math" already has a task "same" in bench_a.toml;*',
            "bench_math.toml: invalid suite (1 problem)",
            '  - task 1 ("only-a"): the suite "math" already has a task "only-a" in bench_a.toml;*',
        ]
    )
    folders = sorted(p.parent.name for p in pytester.path.rglob("result.json"))
    assert folders == ["only-a[scripted]", "same[scripted]"]
