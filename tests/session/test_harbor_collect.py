"""`pytest --agentbench DIR` collects Harbor task folders as ordinary task items: a
folder of them is a suite named after it; -k, -m and controls select among them; a
broken task.toml or a layout we do not run is one collection error saying why; the
task's own tests are never collected on the host."""

from __future__ import annotations

import pytest
from harbor_support import TASK_TOML, write_task


def test_a_dataset_folder_is_a_suite_of_its_task_folders(pytester: pytest.Pytester) -> None:
    dataset = pytester.path / "tb-mini"
    tests = {"tests/test_outputs.py": "def test_on_the_host():\n    raise SystemExit(3)\n"}
    write_task(dataset, "answer-42", extra=tests)
    write_task(
        dataset, "other", toml=TASK_TOML + '[metadata.agentbench]\nmarks = ["slow"]\n', extra=tests
    )
    result = pytester.runpytest("--agentbench", "tb-mini", "--collect-only", "-q")
    result.stdout.fnmatch_lines(
        [
            "tb-mini/answer-42/task.toml::answer-42",
            "tb-mini/other/task.toml::other",
            "2 tests collected*",
        ]
    )
    assert "test_on_the_host" not in result.stdout.str()
    assert result.ret == pytest.ExitCode.OK
    selected = pytester.runpytest("--agentbench", "tb-mini", "--collect-only", "-q", "-m", "slow")
    selected.stdout.fnmatch_lines(["tb-mini/other/task.toml::other", "1/2 tests collected*"])
    picked = pytester.runpytest("--agentbench", "tb-mini", "--collect-only", "-q", "-k", "answer")
    picked.stdout.fnmatch_lines(["tb-mini/answer-42/task.toml::answer-42", "1/2 tests collected*"])


def test_without_agentbench_nothing_of_a_task_folder_is_ours(pytester: pytest.Pytester) -> None:
    write_task(pytester.path / "ds", "t")
    result = pytester.runpytest("ds", "--collect-only", "-q")
    assert "task.toml" not in result.stdout.str()


def test_controls_are_the_oracle_and_the_nop_agent(pytester: pytest.Pytester) -> None:
    write_task(pytester.path / "ds", "t")
    write_task(pytester.path / "ds", "unsolved", solve_sh=None)
    result = pytester.runpytest(
        "--agentbench", "ds", "--agentbench-controls", "--collect-only", "-q"
    )
    result.stdout.fnmatch_lines(
        [
            "ds/t/task.toml::t[[]control-positive]",
            "ds/t/task.toml::t[[]control-empty]",
            "ds/unsolved/task.toml::unsolved[[]control-positive]",
            "ds/unsolved/task.toml::unsolved[[]control-empty]",
        ]
    )


def test_a_broken_task_is_one_collection_error_and_the_others_still_collect(
    pytester: pytest.Pytester,
) -> None:
    write_task(pytester.path / "ds", "good")
    write_task(
        pytester.path / "ds", "bad", toml=TASK_TOML.replace("timeout_sec = 60", "timeout_sec = -1")
    )
    result = pytester.runpytest("--agentbench", "ds", "--collect-only", "-q")
    result.stdout.fnmatch_lines(
        [
            "*ERROR collecting ds/bad/task.toml*",
            "ds/bad/task.toml: invalid suite (1 problem)",
            "  - verifier.timeout_sec must be a number greater than 0; got -1",
        ]
    )
    result.stdout.fnmatch_lines(["ds/good/task.toml::good"])
    assert result.ret == pytest.ExitCode.INTERRUPTED


def test_an_older_terminal_bench_task_is_refused_with_the_reason(pytester: pytest.Pytester) -> None:
    old = pytester.path / "ds" / "old-task"
    old.mkdir(parents=True)
    (old / "task.yaml").write_text("instruction: do it\n")
    (old / "run-tests.sh").write_text("#!/bin/bash\npytest tests\n")
    (old / "tests").mkdir()
    (old / "tests" / "test_outputs.py").write_text("def test_x():\n    pass\n")
    result = pytester.runpytest("--agentbench", "ds", "--collect-only", "-q")
    result.stdout.fnmatch_lines(
        [
            "*ERROR collecting ds/old-task/task.yaml*",
            "*an older Terminal-Bench task (task.yaml + run-tests.sh) is not run: convert it*",
        ]
    )
    assert "test_x" not in result.stdout.str()


def test_unknown_keys_are_warnings_naming_the_file(pytester: pytest.Pytester) -> None:
    write_task(pytester.path / "ds", "t", toml=TASK_TOML + "[environment.extras]\nx = 1\n")
    result = pytester.runpytest("--agentbench", "ds", "--collect-only", "-q")
    result.stdout.fnmatch_lines(
        ["*ds/t/task.toml: environment.extras is not a key Harbor defines here; ignored*"]
    )
    assert result.ret == pytest.ExitCode.OK


def test_without_an_engine_each_container_task_is_skipped_saying_why(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_task(pytester.path / "ds", "t")
    monkeypatch.setenv("CONTAINER_HOST", f"unix://{pytester.path}/no-such.sock")
    result = pytester.runpytest_subprocess(
        "--agentbench", "ds", "--agentbench-engine", "podman", "-rs", "-p", "no:cacheprovider"
    )
    result.stdout.fnmatch_lines(
        ["SKIPPED [[]1] ds/t/task.toml: no container engine for this task's environment: *"]
    )
    result.assert_outcomes(skipped=1)
