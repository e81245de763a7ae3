"""Seeded perturbations (suites/perturb.py) and robustness runs through pytester."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench import schemas
from pytest_agentbench.core.task_record import TaskRecord
from pytest_agentbench.suites.perturb import BUILTIN, parse_perturbations, perturb_task
from pytest_agentbench.suites.task import Task, VerifierConfig
from pytest_agentbench.suites.template import render_choices
from pytest_agentbench.verifiers.choice import expected_index

CHOICES = ("red", "green", "blue", "yellow", "black")
INPUT = "Which colour is the sky on a clear day at noon in summer?"


def choice_task(target: Any, choices: tuple[str, ...] = CHOICES, task_id: str = "q") -> Task:
    return Task(
        suite="s",
        id=task_id,
        index=0,
        path=Path("bench_s.toml"),
        input=INPUT,
        prompt=f"Answer with a letter.\n{INPUT}\n\n{render_choices(choices)}",
        target=target,
        verifier=VerifierConfig("choice"),
        choices=choices,
    )


@pytest.mark.parametrize("target", ["C", "(c)", 2, "blue"])
def test_shuffle_remaps_the_target_to_the_same_option(target: Any) -> None:
    for seed in range(20):
        copy = perturb_task(choice_task(target), "shuffle", seed)
        assert copy is not None
        assert copy.choices != CHOICES and sorted(copy.choices) == sorted(CHOICES)
        assert copy.choices[expected_index(copy.target, copy.choices)] == "blue"
        assert type(copy.target) is type(target)
        assert render_choices(copy.choices) in copy.prompt
        assert render_choices(CHOICES) not in copy.prompt
        assert copy.id == "q@shuffle" and copy.original_id == "q"
        assert (copy.perturbation, copy.perturbation_seed) == ("shuffle", seed)


def test_two_choices_are_always_swapped_and_no_choices_get_no_copy() -> None:
    copy = perturb_task(choice_task("A", ("yes", "no")), "shuffle", 0)
    assert copy is not None and copy.choices == ("no", "yes") and copy.target == "B"
    assert perturb_task(choice_task(None, ()), "shuffle", 0) is None


@pytest.mark.parametrize("name", BUILTIN)
def test_the_same_seed_gives_the_same_perturbation_another_seed_another(name: str) -> None:
    task = choice_task("C")
    first, again = perturb_task(task, name, 7), perturb_task(task, name, 7)
    assert first is not None and first == again
    assert first.prompt != task.prompt
    others = {perturb_task(task, name, seed).prompt for seed in range(8)}  # type: ignore[union-attr]
    assert len(others) > 1


def test_text_perturbations_change_the_input_where_it_stands() -> None:
    task = choice_task("C")
    for name in ("whitespace", "case", "distractor"):
        copy = perturb_task(task, name, 1)
        assert copy is not None and copy.input != INPUT
        assert copy.prompt == task.prompt.replace(INPUT, copy.input)
        assert copy.choices == task.choices and copy.target == task.target
    assert " ".join(perturb_task(task, "whitespace", 1).input.split()) == INPUT  # type: ignore[union-attr]
    assert perturb_task(task, "case", 1).input.lower() == INPUT.lower()  # type: ignore[union-attr]


def test_same_seed_same_perturbations_in_another_process() -> None:
    """No dependence on PYTHONHASHSEED or the process: a fresh interpreter agrees."""
    code = (
        "from tests.suites.test_perturb import choice_task;"
        "from pytest_agentbench.suites.perturb import perturb_task;"
        "print(repr([perturb_task(choice_task('C'), n, 11).prompt "
        "for n in ('shuffle','whitespace','case','distractor')]))"
    )
    here = repr([perturb_task(choice_task("C"), n, 11).prompt for n in BUILTIN])  # type: ignore[union-attr]
    root = Path(__file__).resolve().parents[2]
    for hashseed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hashseed}
        out = subprocess.run(
            [sys.executable, "-c", code],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        assert out.stdout.strip() == here


def test_unknown_perturbations_are_named() -> None:
    assert parse_perturbations("shuffle, case,shuffle") == ("shuffle", "case")
    with pytest.raises(ValueError, match="unknown perturbation 'shufle'"):
        parse_perturbations("shuffle,shufle")
    with pytest.raises(ValueError, match="no plugin implements"):
        perturb_task(choice_task("C"), "paraphrase", 0)


def choice_suite(count: int) -> str:
    tasks = "".join(
        f'[[task]]\nid = "q{i}"\ninput = "Is {i} a number?"\nchoices = ["yes", "no"]\n'
        'target = "A"\nscripted = ["A"]\n'
        for i in range(count)
    )
    return f'[suite]\nname = "rob"\nverifier = {{ kind = "choice" }}\n\n{tasks}'


def latest_summary(pytester: pytest.Pytester) -> dict[str, Any]:
    path = pytester.path / "agentbench-results" / "latest" / "summary.json"
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def test_a_robustness_run_pairs_each_perturbed_task_with_its_original(
    pytester: pytest.Pytester,
) -> None:
    """The scripted model always answers A: the shuffle moves the right option to B, so
    every shuffled copy fails (a significant drop); case noise changes nothing (a tie)."""
    pytester.makefile(".toml", bench_rob=choice_suite(7))
    result = pytester.runpytest(
        "--agentbench",
        "--agentbench-perturb",
        "shuffle,case",
        "--agentbench-seed",
        "5",
        "--agentbench-markdown",
        "summary.md",
        "-p",
        "no:cacheprovider",
        "-v",
    )
    result.assert_outcomes(passed=14, failed=7)
    result.stdout.fnmatch_lines(["*bench_rob.toml::q0@shuffle FAILED*"])
    result.stdout.fnmatch_lines(
        [
            "robustness shuffle: drop +1.000 over 7 pair(s)*McNemar exact p=0.0156: "
            "a real drop (significant at 0.05)",
            "robustness case: drop +0.000 over 7 pair(s)*: inconclusive — no difference seen*",
        ]
    )
    data = latest_summary(pytester)
    schemas.validate("summary", data)
    shuffled = [t for t in data["tasks"] if t["task_id"].endswith("@shuffle")]
    assert len(shuffled) == 7
    for task in shuffled:
        schemas.validate("task_record", task)
        assert task["perturbation"] == {"name": "shuffle", "of": task["task_id"][:2], "seed": 5}
    rows = {row["perturbation"]: row for row in data["robustness"]}
    assert rows["shuffle"]["verdict"] == "worse" and rows["case"]["verdict"] == "inconclusive"
    assert data["settings"]["perturb"] == ["shuffle", "case"] and data["settings"]["seed"] == 5
    markdown = (pytester.path / "summary.md").read_text()
    assert "| shuffle | 7 | 1.000 | +0.430 to +1.000 | McNemar exact | 0.016 | worse |" in markdown
    assert (
        "| case | 7 | 0.000 | -0.218 to +0.218 | McNemar exact | 1.000 | inconclusive |" in markdown
    )


def test_a_plugin_paraphrases_through_the_hook(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_rob=choice_suite(2))
    pytester.makeconftest(
        """
def pytest_agentbench_paraphrase(task, rng):
    return "Reworded: " + task.input + " (" + str(rng.randint(0, 9)) + ")"
"""
    )
    result = pytester.runpytest(
        "--agentbench", "--agentbench-perturb", "paraphrase", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=4)
    run = (pytester.path / "agentbench-results" / "latest").resolve()
    prompts = [
        json.loads(p.read_text())
        for p in sorted((run / "tasks" / "rob").glob("q0@paraphrase*/trajectory.json"))
    ]
    assert prompts and "Reworded: Is 0 a number?" in json.dumps(prompts[0])


def test_paraphrase_without_a_plugin_is_a_clear_error(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_rob=choice_suite(1))
    result = pytester.runpytest("--agentbench", "--agentbench-perturb", "paraphrase")
    result.stdout.fnmatch_lines(["*no plugin implements the pytest_agentbench_paraphrase hook*"])
    result = pytester.runpytest("--agentbench", "--agentbench-perturb", "reword")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--agentbench-perturb: unknown perturbation 'reword'*"])


def test_robustness_comes_in_the_named_order_whatever_order_records_arrive() -> None:
    """Under xdist records arrive in any order; the report must not follow it."""
    from records_support import make_record

    from pytest_agentbench.report.run_comparisons import robustness_comparisons

    def rec(task: str, outcome: str, name: str | None = None) -> TaskRecord:
        found: dict[str, Any] = {"suite": "s", "task_id": task, "model": "m", "outcome": outcome}
        if name is not None:
            found["task_id"] = f"{task}@{name}"
            found["perturbation"] = {"name": name, "of": task, "seed": 0}
        return make_record(**found)

    records = [rec("a", "passed", "case"), rec("a", "passed", "shuffle"), rec("a", "passed")]
    records += [rec("b", "passed"), rec("b", "failed", "shuffle"), rec("b", "passed", "case")]
    found = robustness_comparisons(records, order=("shuffle", "case"))
    assert [name for name, _ in found] == ["shuffle", "case"]
    shuffle = found[0][1]
    assert shuffle.paired == 2 and shuffle.regressions == ("s::b",)
    assert [name for name, _ in robustness_comparisons(records[::-1])] == ["case", "shuffle"]
