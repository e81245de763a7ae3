"""Controls (--agentbench-controls, --agentbench-canary) through real runs: planted broken
suites are each flagged with the control that misbehaved and why; sound suites pass."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

MATCH_EVERYTHING = """
[suite]
name = "loose"
verifier = { kind = "regex", pattern = ".*" }

[[task]]
id = "capital"
input = "What is the capital of France?"
oracle = "Paris"
"""

NEVER_IMPORTS = """
[suite]
name = "hollow"
verifier = { kind = "python_tests" }

[[task]]
id = "double"
input = '''def double(x: int) -> int:
    \"\"\"Twice x.\"\"\"'''
oracle = '''```python
def double(x: int) -> int:
    return 2 * x
```'''
target = '''
def test_double():
    assert 2 * 3 == 6
'''
"""

ANY_OBJECT = """
[suite]
name = "shapeless"
verifier = { kind = "json_schema", schema = { type = "object" } }

[[task]]
id = "point"
input = "Give a point as JSON with x and y."
oracle = '{"x": 1, "y": 2}'

[[task]]
id = "person"
input = "Give a person as JSON with a name."
oracle = '{"name": "Ada"}'
"""

WRONG_LETTER = """
[suite]
name = "quiz"
verifier = { kind = "choice" }

[[task]]
id = "boiling"
input = "At sea level, at what temperature does water boil?"
choices = ["50 °C", "100 °C"]
target = "A"
oracle = "B"

[[task]]
id = "planet"
input = "Which planet is the largest?"
choices = ["Jupiter", "Mars"]
target = "A"
"""

SOUND = """
[suite]
name = "sound"
verifier = { kind = "exact" }

[[task]]
id = "one"
input = "Say one."
target = "one"
scripted = ["one"]

[[task]]
id = "two"
input = "Say two."
target = "two"
scripted = ["two"]

[[task]]
id = "summary"
input = "Summarise."
verifier = { kind = "includes" }
target = ["alpha", "beta"]
scripted = ["alpha and beta"]

[[task]]
id = "free"
input = "Write anything."
verifier = { kind = "json_schema", schema = { type = "object", required = ["a"] } }
scripted = ['{"a": 1}']
"""


def run_controls(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, Any]:
    result = pytester.runpytest("--agentbench", "--agentbench-controls", "-p", "no:randomly", *args)
    summaries = sorted(Path(pytester.path, "agentbench-results").glob("*/summary.json"))
    summary = json.loads(summaries[-1].read_text()) if summaries else None
    return result, summary


def flagged(summary: Any, task: str) -> dict[str, str]:
    """The controls summary.json lists as misbehaving for ``task``, name → reason."""
    for entry in summary["controls"]["misbehaving_tasks"]:
        if entry["task_id"] == task:
            return {c["name"]: c["reason"] for c in entry["controls"]}
    return {}


@pytest.mark.slow
def test_a_regex_that_matches_everything_is_flagged(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_loose=MATCH_EVERYTHING)
    result, summary = run_controls(pytester)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "controls: 3 run — 1 behaved, 2 misbehaved",
            "✗ loose::capital [[]empty[]]: negative control empty passed (an empty answer): "
            "an empty answer passes: the verifier accepts anything*",
            "✗ loose::capital [[]refusal[]]: negative control refusal passed*",
        ]
    )
    assert set(flagged(summary, "capital")) == {"empty", "refusal"}
    assert summary["controls"]["misbehaved"] == 2
    assert summary["totals"]["tasks"] == 0  # controls are never scored


@pytest.mark.slow
def test_tests_that_never_import_the_solution_are_flagged(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_hollow=NEVER_IMPORTS)
    result, summary = run_controls(pytester)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*hollow::double [[]returns-none[]]: negative control returns-none passed "
            "(functions that return None): a function returning None passes: the tests "
            "check nothing (do they import the solution?)*"
        ]
    )
    bad = flagged(summary, "double")
    assert {"empty", "refusal", "returns-none", "exits-0"} <= set(bad)
    assert "positive" not in bad


@pytest.mark.slow
def test_a_schema_that_accepts_any_object_is_flagged(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_shapeless=ANY_OBJECT)
    result, summary = run_controls(pytester)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["*shapeless::point [[]empty-object[]]: negative control empty-object passed*"]
    )
    assert set(flagged(summary, "point")) == {"other-task", "empty-object"}
    assert "empty" not in flagged(summary, "point")  # an empty answer is not JSON: it fails


@pytest.mark.slow
def test_a_wrong_choice_target_fails_the_positive_control(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_quiz=WRONG_LETTER)
    result, summary = run_controls(pytester)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "✗ quiz::boiling [[]positive[]]: positive control failed (answer from the task's "
            "oracle): the known-good answer does not pass*"
        ]
    )
    # "planet"'s answer, A, passes too: the very letter the wrong target names
    assert set(flagged(summary, "boiling")) == {"positive", "other-task"}
    assert flagged(summary, "planet") == {}  # its target is its answer: nothing to see


@pytest.mark.slow
def test_a_sound_suite_passes_its_controls_as_items(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_sound=SOUND)
    result, summary = run_controls(pytester, "-v")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "*bench_sound.toml::one[[]control-positive[]] BEHAVED*",
            "*bench_sound.toml::one[[]control-empty[]] BEHAVED (verdict failed*",
            "*bench_sound.toml::one[[]control-other-task[]] BEHAVED*",
        ]
    )
    controls = summary["controls"]
    assert controls["misbehaved"] == 0 and controls["errors"] == 0
    # one, two, summary: positive, empty, refusal, other-task; free: no positive control
    # (a json_schema target is not an answer), then empty, refusal, other-task, empty-object
    assert controls["run"] == 16 and controls["behaved"] == 16
    assert [m["task_id"] for m in controls["without_positive_control"]] == ["free"]
    result.stdout.fnmatch_lines(["? sound::free: no positive control: *add oracle = *"])
    ctrf = json.loads(
        next(Path(pytester.path, "agentbench-results").glob("*/ctrf.json")).read_text()
    )
    statuses = {t["name"].rpartition("::")[2]: t["status"] for t in ctrf["results"]["tests"]}
    assert statuses["one[control-empty]"] == "passed"  # it behaved: the verdict failed
    assert statuses["free[control-positive]"] == "skipped"
    rollout = next(t for t in ctrf["results"]["tests"] if t["name"].endswith("one[control-empty]"))
    assert rollout["rawStatus"] == "failed"
    assert rollout["extra"]["pytest-agentbench.rollout"]["control"]["behaved"] is True


@pytest.mark.slow
def test_controls_are_selected_with_k(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_sound=SOUND)
    result, summary = run_controls(pytester, "-k", "refusal")
    result.assert_outcomes(passed=4, deselected=13)
    assert summary["controls"]["run"] == 4
    marked = SOUND.replace('id = "two"\n', 'id = "two"\nmarks = ["slow"]\n')
    pytester.makefile(".toml", bench_sound=marked)
    result, summary = run_controls(
        pytester, "-m", "slow", "-W", "ignore::pytest.PytestUnknownMarkWarning"
    )
    result.assert_outcomes(passed=4, deselected=13)  # the controls of "two" carry its mark


CANARY = """
[suite]
name = "canary"
verifier = {{ kind = "regex", pattern = "{pattern}" }}

[[task]]
id = "a"
input = "Say alpha."
oracle = "alpha"
scripted = ["alpha"]

[[task]]
id = "b"
input = "Say beta."
oracle = "beta"
scripted = ["beta"]
"""


@pytest.mark.slow
@pytest.mark.parametrize("pattern, invalid", [("^(alpha|beta)$", False), (".*", True)])
def test_a_canary_that_passes_marks_the_run_invalid(
    pytester: pytest.Pytester, pattern: str, invalid: bool
) -> None:
    pytester.makefile(".toml", bench_canary=CANARY.format(pattern=pattern))
    result = pytester.runpytest(
        "--agentbench", "--agentbench-canary", "--agentbench-markdown", "run.md", "-v"
    )
    summary = json.loads(
        next(Path(pytester.path, "agentbench-results").glob("*/summary.json")).read_text()
    )
    # the two tasks are scored; the canary (a third item, named for it) is not
    result.stdout.fnmatch_lines(["*::?[[]canary-*"])
    assert summary["totals"]["tasks"] == 2 and summary["totals"]["score"] == 1.0
    assert summary["controls"]["canary"] == 1
    if invalid:
        assert result.ret == pytest.ExitCode.TESTS_FAILED
        assert summary["invalid"].startswith("1 canary control(s) passed")
        assert summary["gate"]["ok"] is False
        result.stdout.fnmatch_lines(["RESULT INVALID: 1 canary control(s) passed*", "gate: FAILED"])
        ctrf = json.loads(
            next(Path(pytester.path, "agentbench-results").glob("*/ctrf.json")).read_text()
        )
        run_extra = ctrf["results"]["environment"]["extra"]["pytest-agentbench.run"]
        assert run_extra["invalid"] == summary["invalid"]
        markdown = (pytester.path / "run.md").read_text()
        assert f"**Result invalid**: {summary['invalid']}" in markdown
    else:
        assert result.ret == pytest.ExitCode.OK
        assert summary["invalid"] is None and summary["gate"] is None
        assert "Result invalid" not in (pytester.path / "run.md").read_text()


@pytest.mark.slow
def test_canaries_of_a_real_model_run_are_played_by_the_scripted_provider(
    pytester: pytest.Pytester,
) -> None:
    """A model run (here an OpenAI-compatible server that answers "alpha" to everything):
    its tasks go to the model, its canary to a scripted server of the run's own, so the
    model never sees it. The canary's verdict decides the run's validity."""
    from pytest_agentbench.scripted.server import ScriptedServer

    pytester.makefile(".toml", bench_canary=CANARY.format(pattern="^(alpha|beta)$"))
    with ScriptedServer(default=["alpha"]) as model:
        result = pytester.runpytest(
            "--agentbench",
            "--agentbench-canary",
            "--agentbench-model",
            "openai-compat/any",
            "--agentbench-base-url",
            model.url,
            "-p",
            "no:randomly",
        )
        asked = len(model.requests)
    assert asked == 2  # the two tasks; the canary never reached the model
    summary = json.loads(
        next(Path(pytester.path, "agentbench-results").glob("*/summary.json")).read_text()
    )
    assert summary["totals"]["tasks"] == 2 and summary["totals"]["score"] == 1.0
    assert summary["controls"] == {**summary["controls"], "run": 1, "behaved": 1, "canary": 1}
    assert summary["invalid"] is None
    assert result.ret == pytest.ExitCode.OK


HUMANEVAL_MANIFEST = """
[suite]
name = "humaneval-like"
dataset = "data.jsonl"
fields = { id = "task_id", input = "prompt", target = "test", oracle = "canonical_solution" }
verifier = { kind = "python_tests" }
"""


@pytest.mark.slow
def test_a_dataset_canonical_solution_body_is_the_positive_control(
    pytester: pytest.Pytester,
) -> None:
    """HumanEval's canonical_solution is a function body: completed with the prompt it is
    the known-good answer; the prompt's signature names the None-returning stub."""
    rows = [
        {
            "task_id": "he-0",
            "prompt": 'def triple(x: int) -> int:\n    """Three times x."""\n',
            "canonical_solution": "    return 3 * x\n",
            "test": "from solution import triple\n\n"
            "def test_triple():\n    assert triple(2) == 6\n",
        },
        {
            "task_id": "he-1",
            "prompt": 'def shout(text: str) -> str:\n    """text in capitals."""\n',
            "canonical_solution": "    return text.upper()\n",
            "test": "from solution import shout\n\n"
            "def test_shout():\n    assert shout('a') == 'A'\n",
        },
    ]
    pytester.makefile(".jsonl", data="\n".join(json.dumps(row) for row in rows))
    pytester.makefile(".toml", bench_he=HUMANEVAL_MANIFEST)
    result, summary = run_controls(pytester, "-v")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*::he-0[[]control-positive[]] BEHAVED*",
            "*::he-0[[]control-returns-none[]] BEHAVED (verdict failed*",
            "*::he-0[[]control-exits-0[]] BEHAVED (verdict failed*",
        ]
    )
    # two tasks × positive, empty, refusal, other-task, returns-none, exits-0
    assert summary["controls"]["run"] == 12 and summary["controls"]["behaved"] == 12


@pytest.mark.slow
def test_every_file_of_a_controls_run_matches_its_schema(pytester: pytest.Pytester) -> None:
    """The control records (misbehaved, behaved, no positive control), their rollout
    folders, summary.json and ctrf.json all validate against the published schemas."""
    import jsonschema

    from pytest_agentbench import schemas

    pytester.makefile(".toml", bench_loose=MATCH_EVERYTHING, bench_sound=SOUND)
    run_controls(pytester)
    run = (pytester.path / "agentbench-results" / "latest").resolve()
    seen: dict[str, int] = {}
    for path in sorted(p for p in run.rglob("*.json") if p.is_file()):
        name = schemas.schema_for(path.relative_to(run))
        assert name is not None, f"no schema for {path.relative_to(run)}"
        try:
            schemas.validate(name, json.loads(path.read_text()))
        except jsonschema.ValidationError as exc:
            pytest.fail(f"{path.relative_to(run)} does not match {name!r}: {exc.message}")
        seen[name] = seen.get(name, 0) + 1
    assert seen["result"] == 19 and seen["summary"] == 1 and seen["ctrf"] == 1
    summary = json.loads((run / "summary.json").read_text())
    missing = [t for t in summary["tasks"] if (t["control"] or {}).get("missing")]
    assert [t["task_id"] for t in missing] == ["free"]


@pytest.mark.slow
def test_controls_under_xdist_reach_the_controller(pytester: pytest.Pytester) -> None:
    """Control records travel from the workers like task records: the controller's
    summary counts every control, and a misbehaving one fails the run."""
    pytester.makefile(".toml", bench_loose=MATCH_EVERYTHING, bench_sound=SOUND)
    result, summary = run_controls(pytester, "-n", "2")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    controls = summary["controls"]
    assert controls["run"] == 19 and controls["misbehaved"] == 2
    assert controls["no_positive_control"] == 1
    result.stdout.fnmatch_lines(["✗ loose::capital [[]empty[]]: negative control empty passed*"])


def test_the_canary_is_drawn_with_the_seed() -> None:
    """The same seed and suite draw the same canary; over seeds every negative control of
    every task can be drawn (none is favoured by construction)."""
    from pytest_agentbench.suites.controls import plan_canary
    from pytest_agentbench.suites.task import Task, VerifierConfig

    tasks = [
        Task("s", name, i, Path("bench_s.toml"), name, name, name, verifier=VerifierConfig("exact"))
        for i, name in enumerate(["a", "b", "c"])
    ]

    def drawn(seed: int) -> tuple[str, str]:
        canary = plan_canary(tasks, seed, "s")
        assert canary is not None and canary.run is not None and canary.control.canary
        assert canary.run.control == canary.control and canary.run.repairs == 0
        return canary.task.id, canary.control.name

    assert drawn(7) == drawn(7)
    seen = {drawn(seed) for seed in range(200)}
    assert seen == {(t, c) for t in "abc" for c in ("empty", "refusal", "other-task")}


CHECKS = """
[suite]
name = "checks"

[[task]]
id = "sound"
input = '''def double(x: int) -> int:
    \"\"\"Twice x.\"\"\"'''
oracle = "def double(x: int) -> int:\\n    return 2 * x\\n"
[task.verifier]
kind = "python_checks"
entry_point = "double"
test = "def check(candidate):\\n    assert candidate(3) == 6\\n"

[[task]]
id = "hollow"
input = '''def triple(x: int) -> int:
    \"\"\"Three times x.\"\"\"'''
oracle = "def triple(x: int) -> int:\\n    return 3 * x\\n"
verifier = {{ kind = "python_checks", entry_point = "triple", test = "{hollow}" }}
"""


@pytest.mark.slow
def test_python_checks_tasks_get_the_code_controls(pytester: pytest.Pytester) -> None:
    """HumanEval's check(candidate) through the python_checks verifier: a sound check
    fails the None-returning stub; a check that never calls its candidate passes it."""
    hollow = "def check(candidate):\\n    assert candidate is not None\\n"
    pytester.makefile(".toml", bench_checks=CHECKS.format(hollow=hollow))
    result, summary = run_controls(pytester, "-v")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*::sound[[]control-returns-none[]] BEHAVED (verdict failed*",
            "*::sound[[]control-exits-0[]] BEHAVED (verdict failed*",
            "✗ checks::hollow [[]returns-none[]]: negative control returns-none passed*",
        ]
    )
    assert flagged(summary, "sound") == {}
    assert set(flagged(summary, "hollow")) == {"returns-none"}


@pytest.mark.slow
def test_a_control_that_errors_before_it_runs_stays_a_control(pytester: pytest.Pytester) -> None:
    """A plugin that breaks one control's setup: its stand-in record is still a control
    (counted as an error, never scored as a task)."""
    pytester.makeconftest(
        "def pytest_runtest_setup(item):\n"
        "    if item.name.endswith('[control-empty]'):\n"
        "        raise RuntimeError('boom')\n"
    )
    pytester.makefile(".toml", bench_loose=MATCH_EVERYTHING)
    result, summary = run_controls(pytester)
    result.assert_outcomes(passed=1, failed=1, errors=1)
    assert summary["totals"]["tasks"] == 0
    assert summary["controls"]["errors"] == 1 and summary["controls"]["misbehaved"] == 1


FOUR = """
[suite]
name = "four"
verifier = { kind = "exact" }
""" + "".join(f'\n[[task]]\nid = "t{i}"\ninput = "Say {i}."\ntarget = "{i}"\n' for i in range(4))


def _collected(pytester: pytest.Pytester, *args: str) -> list[str]:
    result = pytester.runpytest("--agentbench", "--collect-only", "-q", *args)
    return [line for line in result.outlines if "::" in line]


def test_limit_and_sample_choose_the_tasks_whose_controls_run(pytester: pytest.Pytester) -> None:
    """--agentbench-limit and --agentbench-sample pick the tasks of a controls run as they
    pick those of a model run: only the picked tasks' controls are items."""
    pytester.makefile(".toml", bench_four=FOUR)
    every = _collected(pytester, "--agentbench-controls")
    assert {line.split("::")[1].split("[")[0] for line in every} == {"t0", "t1", "t2", "t3"}
    limited = _collected(pytester, "--agentbench-controls", "--agentbench-limit", "1:3")
    assert {line.split("::")[1].split("[")[0] for line in limited} == {"t1", "t2"}
    assert limited == [line for line in every if "::t1[" in line or "::t2[" in line]
    for seed in ("1", "5"):
        sample = ("--agentbench-sample", "1", "--agentbench-seed", seed)
        (task,) = _collected(pytester, *sample)  # the task a model run would run
        picked = _collected(pytester, "--agentbench-controls", *sample)
        assert picked and all(line.startswith(task + "[control-") for line in picked)
