"""The observer hooks, from a conftest.py: they see typed records, may override the
reason line and write another report, and one that raises is reported once, with its
plugin's name, without losing any result. Suite formats and ``module:function``
verifier kinds from plugins."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))  # the helpers (*_support.py)
from schemas_support import validate_run

SUITE = """
[suite]
verifier = { kind = "exact" }
[[task]]
id = "right"
input = "Say yes."
target = "yes"
scripted = ["yes"]
[[task]]
id = "wrong"
input = "Say yes."
target = "yes"
scripted = ["no"]
[[task]]
id = "third"
input = "Say yes."
target = "yes"
scripted = ["yes"]
"""

OBSERVERS = """
import json
import pytest
from pytest_agentbench.core.stream import RolloutEvent
from pytest_agentbench.core.task_record import RunSummary, TaskRecord

FINISHED = []
EVENTS = []

@pytest.hookimpl
def pytest_agentbench_rollout_event(event):
    assert isinstance(event, RolloutEvent)
    EVENTS.append((event.task_id, event.kind, event.text))

@pytest.hookimpl
def pytest_agentbench_task_finished(record):
    assert isinstance(record, TaskRecord)
    FINISHED.append(record.task_id)

@pytest.hookimpl
def pytest_agentbench_failure_reason(record):
    return f"mine: {record.task_id} got {record.last_feedback!r} ({record.usage.total} tokens)"

@pytest.hookimpl
def pytest_agentbench_run_finished(summary, run_dir):
    assert isinstance(summary, RunSummary)
    texts = sorted(text for task, kind, text in EVENTS if kind == "text")
    (run_dir / "observed.txt").write_text(json.dumps(
        {"finished": sorted(FINISHED), "texts": texts,
         "scores": [t.reward for t in summary.tasks]}))
"""


def latest(pytester: pytest.Pytester) -> Path:
    return (pytester.path / "agentbench-results" / "latest").resolve()


def test_observers_see_typed_records_and_override_the_reason(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(OBSERVERS)
    pytester.makefile(".toml", bench_yes=SUITE)
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "✗ yes::wrong: mine: wrong got 'Your answer does not match the expected "
            "answer.' (3 tokens)"
        ]
    )
    run = latest(pytester)
    observed = json.loads((run / "observed.txt").read_text())
    assert observed["finished"] == ["right", "third", "wrong"]
    assert "no" in "".join(observed["texts"]) and "yes" in "".join(observed["texts"])
    ctrf = json.loads((run / "ctrf.json").read_text())
    messages = {t["name"]: t.get("message") for t in ctrf["results"]["tests"]}
    assert messages["bench_yes.toml::wrong"].startswith("mine: wrong got ")
    validate_run(run)


RAISING = """
import pytest

@pytest.hookimpl
def pytest_agentbench_task_finished(record):
    raise ValueError(f"cannot take {record.task_id}")

@pytest.hookimpl
def pytest_agentbench_rollout_event(event):
    raise RuntimeError("no events please")

@pytest.hookimpl
def pytest_agentbench_failure_reason(record):
    raise KeyError("reason")

@pytest.hookimpl
def pytest_agentbench_run_finished(summary, run_dir):
    raise OSError("disk full")
"""


def test_a_raising_hook_is_reported_once_and_no_result_is_lost(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(RAISING)
    pytester.makefile(".toml", bench_yes=SUITE)
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    out = result.stdout.str()
    assert "Traceback" not in out and "INTERNALERROR" not in out
    result.stdout.fnmatch_lines(
        [
            "3 tasks: 2 passed, 1 failed",
            "✗ yes::wrong: *",  # our own reason, the plugin's raised
            "plugin '*conftest.py' raised in pytest_agentbench_failure_reason: KeyError: "
            "'reason' (1 call(s) failed; results were kept)",
            "plugin '*conftest.py' raised in pytest_agentbench_rollout_event: RuntimeError: "
            "no events please (* call(s) failed; results were kept)",
            "plugin '*conftest.py' raised in pytest_agentbench_run_finished: OSError: "
            "disk full (1 call(s) failed; results were kept)",
            "plugin '*conftest.py' raised in pytest_agentbench_task_finished: ValueError: "
            "cannot take right (3 call(s) failed; results were kept)",
        ]
    )
    assert out.count("raised in pytest_agentbench_task_finished") == 1
    summary = json.loads((latest(pytester) / "summary.json").read_text())
    assert sorted(t["task_id"] for t in summary["tasks"]) == ["right", "third", "wrong"]


@pytest.mark.slow
def test_raising_hooks_on_xdist_workers_are_reported_by_the_controller(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(RAISING)
    pytester.makefile(".toml", bench_yes=SUITE)
    result = pytester.runpytest_subprocess("--agentbench", "-p", "no:cacheprovider", "-n", "2")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        ["plugin '*conftest.py' raised in pytest_agentbench_rollout_event: RuntimeError: *"]
    )


def test_failures_from_workers_add_up_and_a_malformed_entry_is_left_out(
    pytestconfig: pytest.Config,
) -> None:
    """What a worker sends (``export``'s form) adds to the controller's counts; an entry of
    another form is left out instead of failing the controller's ``pytest_testnodedown``."""
    from pytest_agentbench.hooks.plugin_hooks import PluginHooks

    hooks = PluginHooks(pytestconfig.pluginmanager)
    hooks.merge([{"plugin": "p", "hook": "h", "error": "RuntimeError: x", "calls": 2}])
    hooks.merge([{"plugin": "p"}, "junk", {"plugin": "p", "hook": "h", "calls": "1"}])
    hooks.merge(None)
    hooks.merge([{"plugin": "p", "hook": "h", "error": "RuntimeError: y", "calls": 1}])
    assert hooks.export() == [{"plugin": "p", "hook": "h", "error": "RuntimeError: x", "calls": 3}]


LINES_FORMAT = """
import pytest

@pytest.hookimpl
def pytest_agentbench_load_suite(path):
    if path.suffix != ".qa":
        return None
    if "broken" in path.name:
        raise RuntimeError("cannot parse")
    tasks = []
    for n, line in enumerate(path.read_text().splitlines()):
        question, _, answer = line.partition("=")
        tasks.append({"id": f"q{n}", "input": question, "target": answer,
                      "scripted": [answer]})
    return {"task": tasks}
"""


def test_a_plugin_suite_format_is_collected_and_validated(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(LINES_FORMAT)
    pytester.makefile(".qa", bench_math="1+1=2\n2+2=4\n")
    pytester.makefile(".txt", bench_notes="not a suite")  # no plugin reads it: ignored
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["bench_math.qa::q0 PASSED*", "bench_math.qa::q1 PASSED*"])

    pytester.makefile(".qa", bench_bad="oops\n")  # the target "" is not a valid exact target
    pytester.makefile(".qa", bench_broken="x=y\n")
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=2)  # collection errors stop the run
    result.stdout.fnmatch_lines_random(
        [
            "*a pytest_agentbench_load_suite plugin (*conftest.py) raised "
            "RuntimeError: cannot parse*",
            "bench_bad.qa: invalid suite (1 problem)",
            '*task 1 ("q0"): $.task?0?.target cannot be used*',
        ]
    )


CHECKS = """
from pytest_agentbench.verifiers import Verdict

def shouting(check):
    ok = check.answer.isupper() and len(check.answer) >= check.options.get("min", 1)
    return Verdict(1.0 if ok else 0.0)

shouting.options_schema = {"type": "object", "properties": {"min": {"type": "integer"}},
                           "additionalProperties": False}
"""


def test_a_verifier_kind_may_be_module_function(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(mychecks=CHECKS)
    pytester.syspathinsert()
    suite = (
        '[suite]\nverifier = { kind = "mychecks:shouting", min = 3 }\n'
        '[[task]]\nid = "loud"\ninput = "Shout."\nscripted = ["HEY"]\n'
        '[[task]]\nid = "quiet"\ninput = "Shout."\nscripted = ["hey"]\n'
    )
    pytester.makefile(".toml", bench_shout=suite)
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)

    pytester.makefile(".toml", bench_shout=suite.replace("min = 3", "most = 3"))
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*$.suite.verifier*most*"])

    pytester.makefile(".toml", bench_shout=suite.replace("mychecks:shouting", "nochecks:x"))
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*cannot import 'nochecks:x': ModuleNotFoundError: No module named 'nochecks'*"]
    )


BROKEN_CLIENT = """
import pytest

class Broken:
    def __init__(self, spec):
        self.spec = spec
    def generate(self, request, on_event=None):
        raise RuntimeError("the wire is cut")
    def close(self):
        pass

@pytest.hookimpl
def pytest_agentbench_model_client(spec, settings):
    return Broken(spec) if spec.provider == "cut" else None
"""


def test_a_conftest_provider_whose_client_raises_gives_harness_errors(
    pytester: pytest.Pytester,
) -> None:
    """A provider a conftest claims is accepted at start-up; its client's bug ends a task
    and a fixture test alike as a harness error with the cause, never a lost result."""
    pytester.makeconftest(BROKEN_CLIENT)
    pytester.makefile(".toml", bench_yes=SUITE)
    pytester.makepyfile(
        test_model="def test_asks(agentbench_model):\n    agentbench_model.generate('hi')\n"
    )
    result = pytester.runpytest(
        "--agentbench", "-p", "no:cacheprovider", "--agentbench-model", "cut/x"
    )
    result.assert_outcomes(errors=4)
    summary = json.loads((latest(pytester) / "summary.json").read_text())
    assert {t["task_id"]: (t["outcome"], t["failure"]["kind"]) for t in summary["tasks"]} == {
        name: ("harness_error", "harness") for name in ("right", "wrong", "third", "test_asks")
    }
    result.stdout.fnmatch_lines(
        ["*test_model::test_asks: unexpected RuntimeError: the wire is cut*"]
    )
