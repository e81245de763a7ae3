"""No harness problem may change a score: numbers the code cannot take are refused where
they are written (a collection or usage error naming the key), and an exception nobody
raised on purpose still ends as a recorded ``harness_error`` task, in every report.

Real runs of ``pytest --agentbench`` through pytester, against the scripted server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

TASK = '[[task]]\nid = "a"\ninput = "x"\ntarget = "7"\n'

#: (suite file stem, its text, the JSON path and words its collection error must show).
#: Each one passed the schema before the bounds and then ended in an OverflowError, a
#: task that never ended, or a reply too big for memory.
OUT_OF_BOUNDS = [
    (
        "bench_suite_timeout",
        '[suite]\nverifier = { kind = "exact" }\ntimeout_s = 1e308\n' + TASK + 'scripted = ["7"]\n',
        "$.suite.timeout_s must be at most 86400",
    ),
    (
        "bench_task_timeout",
        '[suite]\nverifier = { kind = "exact" }\n' + TASK + 'timeout_s = 1e12\nscripted = ["7"]\n',
        "$.task[0].timeout_s must be at most 86400",
    ),
    (
        "bench_max_tokens",
        '[suite]\nverifier = { kind = "exact" }\nmax_tokens = 100000000000000000\n'
        + TASK
        + 'scripted = ["7"]\n',
        "$.suite.max_tokens must be at most 10000000",
    ),
    (
        "bench_verifier_timeout",
        '[suite]\nverifier = { kind = "command", command = "true", timeout_s = 1e308 }\n'
        + TASK
        + 'scripted = ["7"]\n',
        "$.suite.verifier.timeout_s must be at most 86400",
    ),
    (
        "bench_memory",
        '[suite]\nverifier = { kind = "command", command = "true", memory_mb = 1000000000000 }\n'
        + TASK
        + 'scripted = ["7"]\n',
        "$.suite.verifier.memory_mb must be at most 1048576",
    ),
    (
        "bench_delay",
        '[suite]\nverifier = { kind = "exact" }\n'
        + TASK
        + 'scripted = [{ text = "7", delay_s = 1e308 }]\n',
        "'delay_s' must be at most 86400 seconds",
    ),
    (
        "bench_repeat",
        '[suite]\nverifier = { kind = "exact" }\n'
        + TASK
        + 'scripted = [{ text = "7", repeat = 1000000000000 }]\n',
        "'repeat' must be at most 1000000",
    ),
    (
        "bench_retry_after",
        '[suite]\nverifier = { kind = "exact" }\n'
        + TASK
        + 'scripted = [{ text = "7", error = { status = 429, retry_after = 1e308, times = 1 } }]\n',
        "'retry_after' must be at most 86400 seconds",
    ),
]


def test_numbers_the_code_cannot_take_are_collection_errors(pytester: pytest.Pytester) -> None:
    for stem, text, _ in OUT_OF_BOUNDS:
        pytester.makefile(".toml", **{stem: text})
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.INTERRUPTED, out
    for stem, _, expected in OUT_OF_BOUNDS:
        assert f"ERROR {stem}.toml" in out
        assert expected in out, (stem, expected)
    assert "Traceback" not in out and "OverflowError" not in out


@pytest.mark.parametrize(
    "option",
    [
        "--agentbench-timeout=1e308",
        "--agentbench-timeout=nan",
        "--agentbench-loop-kill-seconds=inf",
        "--agentbench-max-tokens=100000000000000000000",
    ],
)
def test_option_numbers_the_code_cannot_take_are_usage_errors(
    pytester: pytest.Pytester, option: str
) -> None:
    pytester.makefile(".toml", bench_a='[suite]\nverifier = { kind = "exact" }\n' + TASK)
    result = pytester.runpytest("--agentbench", option, "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    name = option.split("=")[0].removeprefix("--").replace("-", " ")
    result.stderr.fnmatch_lines([f"ERROR: {name}: expected a number <= *, got *"])


RAISING_CLIENT = '''
import pytest
from pytest_agentbench.models import Generation, Usage

class BrokenClient:
    """A plugin's client with a bug: generate raises what no client may raise."""
    def __init__(self, spec):
        self.spec = spec
    def generate(self, request, on_event=None):
        if "bad" not in request.messages[-1]["content"]:
            return Generation(text="7", finish_reason="stop", usage=Usage(total=1))
        try:
            {}["missing key"]
        except KeyError as exc:
            raise RuntimeError("the plugin lost its state") from exc
    def close(self):
        pass

@pytest.hookimpl
def pytest_agentbench_model_client(spec, settings):
    if spec.model == "broken":
        return BrokenClient(spec)
'''


def test_an_unexpected_exception_is_a_recorded_harness_error(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(RAISING_CLIENT)
    pytester.makefile(
        ".toml",
        bench_b=(
            '[suite]\nverifier = { kind = "exact" }\n'
            '[[task]]\nid = "good"\ninput = "fine"\ntarget = "7"\n'
            '[[task]]\nid = "bad"\ninput = "bad"\ntarget = "7"\n'
        ),
    )
    result = pytester.runpytest(
        "--agentbench", "--agentbench-model", "openai-compat/broken", "-p", "no:cacheprovider"
    )
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == 1, out
    assert "Traceback" not in out and "INTERNALERROR" not in out
    assert "raise RuntimeError" not in out, "no Python traceback: a reason line and its cause"
    result.stdout.fnmatch_lines(["! b::bad: harness error: unexpected RuntimeError: *"])
    run = (pytester.path / "agentbench-results" / "latest").resolve()
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    assert summary["totals"]["outcomes"]["passed"] == 1
    assert summary["totals"]["outcomes"]["harness_error"] == 1
    assert summary["scores"][0]["score"] == 1.0, "the harness error is not scored"
    bad = next(task for task in summary["tasks"] if task["task_id"] == "bad")
    # the whole cause: the exception, where it was raised, and what it was raised from
    for part in (
        "RuntimeError: the plugin lost its state",
        "conftest.py:",
        "in generate",
        "raised from KeyError: 'missing key'",
    ):
        assert part in bad["error"], (part, bad["error"])
    assert bad["rollout_dir"], "the task has its rollout folder like any other"
    result_json = json.loads((Path(bad["rollout_dir"]) / "result.json").read_text("utf-8"))
    assert result_json["outcome"] == "harness_error"
    ctrf = json.loads((run / "ctrf.json").read_text(encoding="utf-8"))
    tests = {test["name"]: test for test in ctrf["results"]["tests"]}
    assert len(tests) == 2
    entry = tests["bench_b.toml::bad"]
    assert entry["status"] == "other"
    assert "raised from KeyError" in entry["trace"]


def test_a_files_directory_holding_the_results_is_a_harness_error(
    pytester: pytest.Pytester,
) -> None:
    """Found by the run-time fuzz: ``files = "."`` (or ``".."``) names a directory that
    holds the results folder, so seeding the workspace copied the copy into itself
    without end (a run spinning for minutes). Now it is that task's harness error."""
    pytester.makefile(
        ".toml",
        bench_ws=(
            '[suite]\nmode = "agent"\nmax_turns = 3\ntimeout_s = 5\n'
            '[[task]]\nid = "fix"\ninput = "Fix it."\nfiles = "."\n'
            'verifier = { kind = "command", run = "true" }\nscripted = ["done"]\n'
        ),
    )
    result = pytester.runpytest_subprocess("--agentbench", "-p", "no:cacheprovider", timeout=120)
    assert result.ret == 7  # its only task is a harness error: not usable (artifacts/usability.py)
    result.stdout.fnmatch_lines(
        ["! ws::fix: harness error: the task files directory holds the workspace, so it *"]
    )
    run = (pytester.path / "agentbench-results" / "latest").resolve()
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    assert summary["totals"]["outcomes"]["harness_error"] == 1
