"""``export atif`` and ``import atif`` (docs/interchange.md): a real run's rollouts as
ATIF trajectories valid against the schema written from Harbor's published definition,
and read back into a run folder that rescore and the HTML report work on."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from interchange_support import SUITE

from pytest_agentbench import schemas
from pytest_agentbench.__main__ import main

ROOT = Path(__file__).resolve().parents[2]


def _steps(path: Path) -> list[dict[str, object]]:
    steps = json.loads(path.read_text())["steps"]
    assert [s["step_id"] for s in steps] == list(range(1, len(steps) + 1))
    return list(steps)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of the built-in loop (a repair, a loop kill, tools) and the example stand-in
    agent (a command agent through the gateway, one of its tasks killed), two models."""
    import subprocess

    folder = tmp_path_factory.mktemp("atif-run")
    shutil.copytree(ROOT / "example_suites" / "agents", folder / "agents")
    shutil.copy(ROOT / "example_suites" / "bench_external_agent.toml", folder)
    (folder / "bench_b.toml").write_text(SUITE)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--agentbench",
            "-p",
            "no:cacheprovider",
            "-q",
            "--agentbench-model",
            "big=scripted",
            "--agentbench-model",
            "small=scripted",
        ],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert "passed" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    return (folder / "agentbench-results" / "latest").resolve()


def test_every_rollout_exports_as_valid_atif(
    finished_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["export", "atif", str(finished_run)]) == 0
    assert "exported 10 rollout(s)" in capsys.readouterr().out
    files = sorted((finished_run / "atif").glob("*/*.atif.json"))
    assert len(files) == 10
    for path in files:
        assert schemas.schema_for(path.relative_to(finished_run)) == "atif"
        schemas.validate("atif", json.loads(path.read_text()))
    atif = finished_run / "atif"
    # a repair round: the feedback sent is a user step between the two answers
    repaired = _steps(atif / "b" / "repaired[big].atif.json")
    assert [s["source"] for s in repaired] == ["user", "agent", "user", "agent"]
    assert repaired[1]["message"] == "Hi" and repaired[3]["message"] == "hi"
    assert "did not pass" in str(repaired[2]["message"])
    # each call's own usage on its step, the rollout's sum in the final metrics
    assert repaired[1]["metrics"] == {"prompt_tokens": 2, "completion_tokens": 1}
    assert repaired[3]["metrics"] == {"prompt_tokens": 34, "completion_tokens": 1}
    final = json.loads((atif / "b" / "repaired[big].atif.json").read_text())["final_metrics"]
    assert (final["total_prompt_tokens"], final["total_completion_tokens"]) == (36, 2)
    # the built-in loop's tool call and its result as the step's observation
    tools = _steps(atif / "b" / "tools[small].atif.json")
    call = tools[-2]
    assert call["tool_calls"] == [
        {
            "tool_call_id": "call_0",
            "function_name": "write_file",
            "arguments": {"path": "a.txt", "content": "ok"},
        }
    ]
    observed = call["observation"]["results"][0]  # type: ignore[index]
    assert observed["source_call_id"] == "call_0" and "a.txt" in observed["content"]
    # a killed loop: the step that was cut carries the evidence; its usage was recovered
    # from the text, so the prompt side stays unknown (never 0)
    looping = json.loads((atif / "b" / "looping[big].atif.json").read_text())
    cut = looping["steps"][-1]
    assert cut["extra"]["agentbench"]["killed"]["rule"]
    assert looping["notes"].startswith(f"loop killed at step {cut['step_id']}")
    assert "total_prompt_tokens" not in looping["final_metrics"]
    assert looping["final_metrics"]["extra"]["agentbench"]["usage"]["input"] is None
    assert looping["extra"]["agentbench"]["outcome"] == "loop_killed"
    # an external agent: its gateway calls are the agent steps, its process a system step
    greet = _steps(atif / "external-agent" / "write-greeting[small].atif.json")
    assert [s["source"] for s in greet][-4:] == ["agent", "agent", "agent", "system"]
    assert greet[-1]["message"] == "command agent ended: exit code 0, 3 model call(s)"
    assert greet[-2]["extra"]["agentbench"]["protocol"] == "chat"  # type: ignore[index]
    stuck = _steps(atif / "external-agent" / "stuck-agent[big].atif.json")
    assert "loop_killed" in str(stuck[-1]["message"])


def test_import_gives_back_the_same_steps_usage_and_outcome(
    finished_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = tmp_path / "first"
    assert main(["export", "atif", str(finished_run), "--out", str(first)]) == 0
    files = sorted(str(p) for p in first.glob("*/*.atif.json"))
    imported = tmp_path / "imported"
    assert main(["import", "atif", *files, "--out", str(imported)]) == 0
    assert "imported 10 ATIF trajectory(ies)" in capsys.readouterr().out
    summary = json.loads((imported / "summary.json").read_text())
    schemas.validate("summary", summary)
    for path in imported.glob("tasks/*/*/*.json"):
        schemas.validate(
            str(schemas.schema_for(path.relative_to(imported))), json.loads(path.read_text())
        )
    before = json.loads((finished_run / "summary.json").read_text())
    key = lambda r: (r["suite"], r["task_id"], r["model"])  # noqa: E731
    old = {key(r): r for r in before["tasks"]}
    new = {key(r): r for r in summary["tasks"]}
    assert old.keys() == new.keys()
    for k, record in new.items():
        assert (record["outcome"], record["reward"], record["usage"]) == (
            old[k]["outcome"],
            old[k]["reward"],
            old[k]["usage"],
        )
    assert summary["totals"]["usage"] == before["totals"]["usage"]
    second = tmp_path / "second"
    assert main(["export", "atif", str(imported), "--out", str(second)]) == 0
    for path in first.glob("*/*.atif.json"):
        a, b = (
            json.loads(path.read_text()),
            json.loads((second / path.relative_to(first)).read_text()),
        )
        assert (a["steps"], a["final_metrics"], a["agent"]) == (
            b["steps"],
            b["final_metrics"],
            b["agent"],
        )
    # the HTML report and rescore work on the imported run
    assert main(["report", str(imported)]) == 0
    assert "Writing." in (imported / "report.html").read_text()
    # rescore finds the suites again (the records name them) and does to the imported
    # run what it does to the run itself
    outcomes = []
    for run, out in ((imported, "of-imported"), (finished_run, "of-run")):
        assert main(["rescore", str(run), "--out", str(tmp_path / out)]) == 0
        rescored = json.loads((tmp_path / out / "summary.json").read_text())
        assert rescored["rescored"]["kept"]["ended loop_killed, not by a verdict"] == 4
        outcomes.append(
            (
                rescored["rescored"]["changed"],
                sorted((key(r), r["outcome"], r["reward"]) for r in rescored["tasks"]),
            )
        )
    assert outcomes[0] == outcomes[1]


FOREIGN = {
    "schema_version": "ATIF-v1.5",
    "session_id": "other-harness-1",
    "agent": {"name": "some-agent", "version": "2.0", "model_name": "m-1"},
    "steps": [
        {"step_id": 1, "source": "user", "message": "What is GOOGL trading at?"},
        {
            "step_id": 2,
            "source": "agent",
            "message": "Searching.",
            "tool_calls": [
                {"tool_call_id": "c1", "function_name": "search", "arguments": {"q": "GOOGL"}}
            ],
            "observation": {"results": [{"source_call_id": "c1", "content": "$185"}]},
            "metrics": {"prompt_tokens": 500, "completion_tokens": 20, "cached_tokens": 200},
        },
        {
            "step_id": 3,
            "source": "agent",
            "message": "It trades at $185.",
            "metrics": {"completion_tokens": 9},
        },
    ],
    "final_metrics": {
        "total_prompt_tokens": 500,
        "total_completion_tokens": 29,
        "total_cached_tokens": 200,
    },
}


def test_a_trajectory_from_another_harness_imports_without_a_verdict(tmp_path: Path) -> None:
    schemas.validate("atif", FOREIGN)
    source = tmp_path / "other.json"
    source.write_text(json.dumps(FOREIGN))
    run = tmp_path / "run"
    assert main(["import", "atif", str(source), "--out", str(run)]) == 0
    (record,) = json.loads((run / "summary.json").read_text())["tasks"]
    assert (record["suite"], record["task_id"], record["model"]) == (
        "atif",
        "other-harness-1",
        "m-1",
    )
    assert record["outcome"] == "failed" and record["reward"] is None
    assert "no verdict" in record["message"]
    # the prompt side less its cached part is the uncached input; cache writes and
    # reasoning the file does not give stay unknown
    usage = record["usage"]
    assert (usage["input"], usage["cache_read"], usage["output"]) == (300, 200, 29)
    assert usage["cache_write"] is None and usage["reasoning"] is None
    result = json.loads((Path(record["rollout_dir"]) / "result.json").read_text())
    assert result["attempts"][0]["answer"] == "It trades at $185."
    assert main(["report", str(run)]) == 0
    back = tmp_path / "back"
    assert main(["export", "atif", str(run), "--out", str(back)]) == 0
    (again,) = back.glob("*/*.atif.json")
    steps = json.loads(again.read_text())["steps"]
    assert [s["message"] for s in steps] == [s["message"] for s in FOREIGN["steps"]]  # type: ignore[index]
    assert steps[1]["tool_calls"] == FOREIGN["steps"][1]["tool_calls"]  # type: ignore[index]
    assert steps[1]["metrics"] == {
        "prompt_tokens": 500,
        "completion_tokens": 20,
        "cached_tokens": 200,
    }


def test_a_user_step_after_an_answer_is_a_repair_round(tmp_path: Path) -> None:
    steps = [
        *FOREIGN["steps"],  # type: ignore[misc]
        {"step_id": 4, "source": "user", "message": "Check the close price."},
        {"step_id": 5, "source": "agent", "message": "It closed at $184."},
    ]
    source = tmp_path / "repaired.json"
    source.write_text(json.dumps({**FOREIGN, "steps": steps}))
    assert main(["import", "atif", str(source), "--out", str(tmp_path / "run")]) == 0
    (folder,) = (tmp_path / "run" / "tasks" / "atif").iterdir()
    result = json.loads((folder / "result.json").read_text())
    first, second = result["attempts"]
    assert first["answer"] == "It trades at $185." and second["answer"] == "It closed at $184."
    assert first["feedback_sent"] == "Check the close price." and second["feedback_sent"] is None
    entries = json.loads((folder / "trajectory.json").read_text())["requests"]
    assert [e["attempt"] for e in entries] == [1, 1, 2]


def test_a_broken_file_is_refused_naming_it_and_the_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**FOREIGN, "steps": [{**FOREIGN["steps"][0], "source": "tool"}]}))  # type: ignore[index]
    assert main(["import", "atif", str(bad), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: steps[0].source: expected one of system, user, agent, got 'tool'" in err
    assert not (tmp_path / "run").exists()
    assert main(["export", "atif", str(tmp_path)]) == 2
    assert "no tasks folder" in capsys.readouterr().err


def test_harbor_reads_our_files(finished_run: Path) -> None:
    """Harbor's own trajectory model, when it can be installed: harbor on PyPI needs a
    newer Python than this project's floor (3.11), so on 3.11 the published schema
    (atif.schema.json) is what the other tests check against."""
    trajectories = pytest.importorskip(
        "harbor.models.trajectories",
        reason="harbor (PyPI) needs a newer Python than "
        f"{sys.version_info[0]}.{sys.version_info[1]}; "
        "the files are checked against atif.schema.json instead",
    )
    assert main(["export", "atif", str(finished_run), "--out", str(finished_run / "h")]) == 0
    for path in (finished_run / "h").glob("*/*.atif.json"):
        trajectories.Trajectory.model_validate_json(path.read_text())
