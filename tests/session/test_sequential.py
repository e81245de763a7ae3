"""``--agentbench-sequential``: a real two-model run (the scripted provider) stops sending
once the paired comparison crosses its O'Brien–Fleming bound, and reports what it saved;
an equal pair runs to the end; the option refuses what it cannot look at."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_agentbench import schemas
from pytest_agentbench.core.sequential_looks import looks_for

TASKS = 40
MODELS = ("--agentbench-model", "strong=scripted", "--agentbench-model", "weak=scripted")


def suite(weak_wrong: bool) -> str:
    other = 'scripted_by_model = { weak = ["no"] }\n' if weak_wrong else ""
    tasks = "".join(
        f'[[task]]\nid = "t{i:02d}"\ninput = "say ok"\ntarget = "ok"\nscripted = ["ok"]\n{other}'
        for i in range(TASKS)
    )
    return f'[suite]\nname = "seq"\nverifier = {{ kind = "exact" }}\n\n{tasks}'


def run(pytester: pytest.Pytester, *args: str) -> Any:
    return pytester.runpytest(
        "--agentbench",
        "-p",
        "no:cacheprovider",
        "--agentbench-out",
        "out",
        "--agentbench-concurrency",
        "1",
        "--agentbench-max-retries",
        "0",
        *args,
    )


def summary(pytester: pytest.Pytester) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        (pytester.path / "out" / "latest" / "summary.json").read_text()
    )
    schemas.validate("summary", data)
    return data


def test_a_clearly_worse_model_stops_the_run_early_and_the_saving_is_reported(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".toml", bench_seq=suite(weak_wrong=True))
    result = run(pytester, *MODELS, "--agentbench-sequential")
    # every pair differs, so z = −√n: −3.16 at look 1 (10 pairs) is inside its bound
    # (4.05), −4.47 at look 2 (20 pairs) crosses its bound (2.86)
    looks = looks_for(TASKS, 4)
    assert [look.tasks for look in looks] == [10, 20, 30, 40]
    assert looks[0].bound > 10**0.5 and looks[1].bound < 20**0.5
    sent = 2 * 20
    saved = 2 * TASKS - sent
    result.assert_outcomes(passed=20, failed=20, skipped=saved)
    result.stdout.fnmatch_lines(
        [
            "sequential: decided at look 2 of 4 after 20 paired tasks (weak worse than "
            f"strong, z=-4.47, bound 2.86); {saved} tasks not sent (saved)"
        ]
    )
    result.stdout.no_fnmatch_line("*partial*")
    data = summary(pytester)
    assert data["partial"] is False and data["coverage"]["sequential_saved"] == saved
    section = data["sequential"]
    assert section["decided_at"] == 2 and section["saved"] == saved
    assert section["paired"] == 20 and section["planned"] == TASKS
    assert len(data["tasks"]) == sent  # the saved items are no task records, no failures
    assert not (pytester.path / "out" / "latest" / "tasks" / "seq" / "t39[weak]").exists()


def test_an_equal_pair_runs_to_the_end(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_seq=suite(weak_wrong=False))
    result = run(pytester, *MODELS, "--agentbench-sequential", "2")
    result.assert_outcomes(passed=2 * TASKS)
    result.stdout.fnmatch_lines(
        ["sequential: not decided early (2 look(s) over 40 paired task(s)); every task was sent"]
    )
    section = summary(pytester)["sequential"]
    assert section["decided_at"] is None and section["saved"] == 0 and section["paired"] == 40


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "compares exactly two sides*this run has 1 model(s)"),
        ((*MODELS, "-n", "2"), "*run without -n (xdist)*"),
    ],
)
def test_refuses_what_it_cannot_look_at(
    pytester: pytest.Pytester, args: tuple[str, ...], message: str
) -> None:
    pytester.makefile(".toml", bench_seq=suite(weak_wrong=False))
    result = run(pytester, *args, "--agentbench-sequential")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--agentbench-sequential: *{message}*"])
