"""Every JSON file a run writes is a serialisation of a typed record and validates against
the JSON Schema published for it in ``pytest_agentbench/schemas/``. The runs are real
(pytester, the scripted server over real sockets, real subprocesses for code and agent
tasks, xdist workers, a shard merge through ``python -m pytest_agentbench merge``). A
JSON file with no schema mapped to it fails the test, so a new file must get one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from schemas_support import ANSWERS, CODE, validate_run

from pytest_agentbench import schemas
from pytest_agentbench.core.record_parts import LoopRecord, RepairSettings, VerdictRecord
from pytest_agentbench.core.task_record import Failure, RunSummary, TaskRecord
from pytest_agentbench.core.usage import Usage

JSONS = """
[suite]
name = "jsons"
repairs = 2
verifier = { kind = "json_schema", schema = { type = "object", required = ["a", "b"] } }

[[task]]
id = "obj"
input = "Give an object with keys a and b."
target = { a = 1, b = 2 }
scripted = ['{"a": 1}', '{"a": 1, "b": 3}', '{"a": 1, "b": 2}']
"""

FIXED = "def add(a, b):\\n    return a + b\\n"
WRITE = f'name = "write_file", arguments = {{ path = "calc.py", content = "{FIXED}" }}'
RUN = (
    """name = "bash", arguments = { command = "python -c 'import calc; print(calc.add(2, 3))'" }"""
)
AGENT = """
[suite]
name = "ag"
mode = "agent"
timeout_s = 60

[[task]]
id = "fix"
input = "Make add() add."
files = { "calc.py" = "def add(a, b):\\n    return a - b\\n" }
verifier = { kind = "python_tests", module = "calc", tests = ["assert add(2, 3) == 5"] }
scripted = [
  { text = "Reading.", tool_calls = [{ name = "read_file", arguments = { path = "calc.py" } }] },
  { tool_calls = [{ WRITE }] },
  { tool_calls = [{ RUN }] },
  "Fixed: add() now adds.",
]
""".replace("WRITE", WRITE).replace("RUN", RUN)

SENTENCE = "I should double-check the total once more before answering. "

TROUBLE = f"""
[suite]
name = "trouble"
verifier = {{ kind = "includes" }}

[[task]]
id = "outage"
input = "x"
target = "ok"
scripted = [{{ text = "ok", error = {{ status = 503, times = 50, retry_after = 0 }} }}]

[[task]]
id = "loop"
input = "Add the numbers."
target = "42"
scripted = [{{ text = "{SENTENCE}", repeat = 400 }}]
"""


def latest(pytester: pytest.Pytester, out: str = "agentbench-results") -> Path:
    return (pytester.path / out / "latest").resolve()


def tasks_of(run: Path) -> dict[str, dict[str, Any]]:
    return {
        p.parent.name.split("[")[0]: json.loads(p.read_text())
        for p in (run / "tasks").rglob("result.json")
    }


def test_a_varied_run_writes_only_files_that_match_their_schemas(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".toml", bench_answers=ANSWERS, bench_jsons=JSONS, bench_code=CODE)
    pytester.makefile(".toml", bench_ag=AGENT, bench_trouble=TROUBLE)
    result = pytester.runpytest(
        "--agentbench", "--agentbench-max-retries", "2", "-p", "no:cacheprovider"
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed") == 5 and outcomes.get("failed") == 3, outcomes
    run = latest(pytester)
    seen = validate_run(run)
    assert seen["result"] == 9 and seen["trajectory"] == 9 and seen["summary"] == 1
    assert seen["reward"] >= 7 and seen["ctrf"] == 1 and seen["inner_ctrf"] >= 3
    found = tasks_of(run)
    # the failure is structured where it happened, not read back out of its message
    outage = found["outage"]["record"]["failure"]
    assert outage["kind"] == "provider_error" and outage["stage"] == "model"
    assert outage["status"] == 503 and outage["retries"] == 2
    assert "attempts)" not in outage["message"]
    assert outage["evidence"].endswith("trajectory.json")
    result.stdout.fnmatch_lines(
        ["! trouble::outage: harness error: provider 503 unavailable after 2 retries: *"]
    )
    loop = found["loop"]["record"]
    assert loop["outcome"] == "loop_killed" and loop["failure"]["stage"] == "loop"
    assert found["right"]["record"]["failure"] is None
    raw = json.loads((run / "summary.json").read_text())
    summary = RunSummary.from_json(raw)
    assert {t.task_id for t in summary.tasks} == set(found)
    for task, written in zip(summary.tasks, raw["tasks"], strict=True):
        again = TaskRecord.from_json(task.to_json())
        assert again == task
        assert task.to_json() == written  # the typed record writes what it read, whole
    # the record's parts are typed: attributes, not dict keys
    by_id = {t.task_id: t for t in summary.tasks}
    killed = by_id["loop"].loop
    assert isinstance(killed, LoopRecord) and killed.channel == "answer" and killed.period
    assert isinstance(by_id["right"].usage, Usage) and by_id["right"].usage.total
    assert isinstance(by_id["repaired"].repair, RepairSettings)
    assert by_id["repaired"].repair.repairs == 1
    assert [r.reward for r in by_id["repaired"].rounds or ()] == [0.0, 1.0]
    verdict = by_id["wrong"].verdict
    assert isinstance(verdict, VerdictRecord) and verdict.reward == 0.0


@pytest.mark.slow
def test_xdist_and_a_shard_merge_write_files_that_match_their_schemas(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".toml", bench_answers=ANSWERS, bench_jsons=JSONS)
    common = ["--agentbench", "-p", "no:cacheprovider", "-n", "2"]
    pytester.runpytest(*common, "--agentbench-out", "a", "--agentbench-shard", "1/2")
    pytester.runpytest(*common, "--agentbench-out", "b", "--agentbench-shard", "2/2")
    shards = [latest(pytester, "a"), latest(pytester, "b")]
    for shard in shards:
        validate_run(shard)
    out = pytester.path / "merged"
    merged = subprocess.run(
        [sys.executable, "-m", "pytest_agentbench", "merge", *map(str, shards), "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert merged.returncode == 0, merged.stderr
    seen = validate_run(out)
    assert seen == {"ctrf": 1, "summary": 1}
    tasks = RunSummary.from_json(json.loads((out / "summary.json").read_text())).tasks
    assert len(tasks) == 4


def record_json() -> dict[str, Any]:
    return TaskRecord(
        nodeid="bench_a.toml::t",
        file="bench_a.toml",
        suite="a",
        task_id="t",
        model="scripted",
        outcome="harness_error",
        reward=None,
        first_attempt_reward=None,
        pass_threshold=1.0,
        attempts=1,
        repaired=False,
        incomplete=False,
        failure_kind="rate_limited",
        repair=RepairSettings(),
        loop=None,
        last_feedback=None,
        usage=Usage(),
        error="scripted: HTTP 429 …",
        verdict=None,
        max_tokens=None,
        min_score=None,
        start_ms=1,
        duration_ms=2,
        rollout_dir="/r",
        verifier_dir="/r/verifier",
        failure=Failure(kind="rate_limited", stage="model", message="m", status=429),
    ).to_json()


@pytest.mark.parametrize("field", ["outcome", "nodeid", "usage", "failure", "schema_version"])
def test_a_record_missing_a_required_field_is_rejected(field: str) -> None:
    data = record_json()
    schemas.validate("task_record", data)
    del data[field]
    with pytest.raises(jsonschema.ValidationError, match=field):
        schemas.validate("task_record", data)
    if field not in ("failure", "schema_version"):
        with pytest.raises(ValueError, match=field):
            TaskRecord.from_json(data)


def test_a_failure_of_an_unknown_kind_or_stage_is_rejected() -> None:
    data = record_json()
    data["failure"]["stage"] = "somewhere"
    with pytest.raises(jsonschema.ValidationError):
        schemas.validate("task_record", data)
    with pytest.raises(ValueError, match=r"failure\.stage"):
        TaskRecord.from_json(data)


def test_the_published_schemas_load_and_are_valid_draft_2020_12() -> None:
    for name in schemas.NAMES:
        schema = schemas.load(name)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        jsonschema.Draft202012Validator.check_schema(schema)
    with pytest.raises(KeyError, match="no schema named 'nope'"):
        schemas.load("nope")


def test_a_merge_reads_each_record_through_its_type(tmp_path: Path) -> None:
    """A shard whose summary holds a broken record is refused with the file, the place and
    what is wrong (it used to be dropped without a word, changing the totals)."""
    good = record_json()
    broken = {k: v for k, v in record_json().items() if k != "outcome"}
    broken["nodeid"] = "bench_a.toml::u"
    run = tmp_path / "run"
    run.mkdir()
    summary = {"schema_version": 1, "run_id": "r", "settings": {}, "tasks": [good, broken]}
    (run / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    merged = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_agentbench",
            "merge",
            str(run),
            "--out",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert merged.returncode != 0
    assert f"{run / 'summary.json'}: tasks[1] is not a task record" in merged.stderr
    assert "'outcome' is missing" in merged.stderr


FRAGILE = """
import pytest
from pytest_agentbench.verifiers import FunctionVerifier, Verdict

def _crash_on_boom(check):
    if check.answer.strip() == "boom":
        raise RuntimeError("the checker broke")
    return Verdict(1.0 if check.answer.strip() == "ok" else 0.0)

@pytest.hookimpl
def pytest_agentbench_verifiers():
    return [FunctionVerifier("fragile", _crash_on_boom)]
"""

FAILING = """
[suite]
name = "crash"
verifier = { kind = "fragile" }

[[task]]
id = "boom"
input = "Say ok."
scripted = ["boom"]
"""

LATE = """
[suite]
name = "late"
verifier = { kind = "exact" }
timeout_s = 1

[[task]]
id = "slow"
input = "Say ok."
target = "ok"
scripted = [{ text = "ok", delay_s = 30 }]
"""


def test_verifier_crashes_and_deadlines_are_structured_where_they_happen(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(FRAGILE)
    pytester.makefile(".toml", bench_crash=FAILING, bench_late=LATE)
    pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    run = latest(pytester)
    validate_run(run)
    found = tasks_of(run)
    crash = found["boom"]["record"]["failure"]
    assert (crash["kind"], crash["stage"]) == ("verifier_crash", "verifier")
    assert crash["evidence"] == str(run / "tasks" / "crash" / "boom[scripted]" / "verifier")
    assert "RuntimeError: the checker broke" in crash["message"]
    late = found["slow"]
    assert late["outcome"] == "timeout"
    assert (late["failure"]["kind"], late["failure"]["stage"]) == ("model_timeout", "deadline")
    ctrf = json.loads((run / "ctrf.json").read_text(encoding="utf-8"))
    extras = {
        t["name"].split("::")[-1]: t["extra"]["pytest-agentbench.rollout"]
        for t in ctrf["results"]["tests"]
    }
    assert extras["boom"]["failure"] == crash


def test_resume_reads_the_earlier_record_through_its_type(pytester: pytest.Pytester) -> None:
    """A finished task whose stored record is not a task record (here its outcome is gone)
    runs again on resume instead of being reported from a record with no outcome."""
    pytester.makefile(".toml", bench_answers=ANSWERS)
    pytester.runpytest("--agentbench", "-p", "no:cacheprovider").assert_outcomes(passed=2, failed=1)
    result_json = latest(pytester) / "tasks" / "answers" / "right[scripted]" / "result.json"
    stored = json.loads(result_json.read_text(encoding="utf-8"))
    del stored["record"]["outcome"]
    result_json.write_text(json.dumps(stored), encoding="utf-8")
    again = pytester.runpytest("--agentbench", "-p", "no:cacheprovider", "--agentbench-resume")
    again.assert_outcomes(passed=2, failed=1)
    again.stdout.fnmatch_lines(["2 task(s) resumed from the earlier run (not sent again)"])
    rerun = json.loads(result_json.read_text(encoding="utf-8"))["record"]
    assert rerun["outcome"] == "passed" and not rerun.get("resumed")
    validate_run(latest(pytester))


def test_the_schemas_and_the_types_name_the_same_values() -> None:
    """One enumeration each: the published schema lists exactly the outcomes, failure kinds
    and stages of the types, and requires exactly the fields the record always writes."""
    from pytest_agentbench.core.records import OUTCOMES
    from pytest_agentbench.core.task_record import FAILURE_KINDS, FAILURE_STAGES

    schema = schemas.load("task_record")
    assert schema["$defs"]["outcome"]["enum"] == list(OUTCOMES)
    failure = schema["$defs"]["failure"]["properties"]
    assert failure["kind"]["enum"] == list(FAILURE_KINDS)
    assert failure["stage"]["enum"] == list(FAILURE_STAGES)
    assert set(schema["required"]) == set(record_json())
    assert set(schemas.load("ctrf_extra")["required"]) <= set(record_json()) | {"reruns"}


JUDGED = """
[suite]
name = "judged"
[suite.verifier]
kind = "judge"
rubric = "The answer names the capital of France."
scripted_judge = [
  { includes = "Paris", reply = { rationale = "names Paris", verdict = "pass" } },
  { includes = "garbled", reply = ["no JSON here", "still none"] },
  { reply = { rationale = "names another city", verdict = "fail" } },
]

[[task]]
id = "right"
input = "What is the capital of France?"
target = "Paris"
scripted = ["Paris."]

[[task]]
id = "wrong"
input = "What is the capital of France?"
scripted = ["Lyon."]

[[task]]
id = "garbled"
input = "What is the capital of France?"
scripted = ["garbled"]
"""


def test_a_judged_run_writes_judge_files_that_match_their_schema(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".toml", bench_judged=JUDGED)
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    outcomes = result.parseoutcomes()
    assert (outcomes.get("passed"), outcomes.get("failed"), outcomes.get("errors")) == (1, 1, 1)
    run = latest(pytester)
    seen = validate_run(run)
    assert seen["judge"] == 3  # written for the judge's failure too
    found = tasks_of(run)
    garbled = found["garbled"]["record"]
    assert garbled["outcome"] == "harness_error"
    assert garbled["failure"]["kind"] == "judge_error"
    assert garbled["judge"]["calls"] == 2 and garbled["judge"]["error"]
    right = found["right"]["record"]["judge"]
    assert right["calls"] == 1 and right["score"] == "pass" and right["usage"]["total"]
    summary = RunSummary.from_json(json.loads((run / "summary.json").read_text()))
    judged = {t.task_id: t.judge for t in summary.tasks}
    assert judged["wrong"] is not None and judged["wrong"]["score"] == "fail"
