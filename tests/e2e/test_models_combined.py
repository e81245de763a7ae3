"""Several models and epochs together with main's other item kinds: perturbed copies
(``q1@case``) get the model and epoch params like any task, controls run once without any
model (``task[canary-NAME]``), and the HTML report names the suite of a per-suite model
comparison."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from schemas_support import validate_run

SUITE = """
[suite]
name = "{name}"
verifier = {{ kind = "exact" }}

[[task]]
id = "q1"
input = "Say yes."
target = "yes"
scripted = ["yes"]
scripted_by_model = {{ weak = ["no"] }}
"""

MODELS = ("--agentbench-model", "strong=scripted", "--agentbench-model", "weak=scripted")


def run(pytester: pytest.Pytester, *args: str) -> tuple[Any, Path]:
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider", *args)
    return result, (pytester.path / "agentbench-results" / "latest").resolve()


def test_perturbed_copies_and_controls_with_several_models_and_epochs(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".toml", bench_one=SUITE.format(name="one"))
    args = (*MODELS, "--agentbench-epochs", "2", "--agentbench-perturb", "case")
    result, run_dir = run(pytester, *args, "--agentbench-canary", "-v")
    summary = json.loads((run_dir / "summary.json").read_text())
    ids = sorted(r["nodeid"].rpartition("::")[2] for r in summary["tasks"])
    canaries = [i for i in ids if "[canary-" in i]
    assert len(canaries) == 1 and canaries[0].startswith("q1[canary-")  # once, no model
    assert sorted(set(ids) - set(canaries)) == sorted(
        f"{task}[{model}:epoch{k}]"
        for task in ("q1", "q1@case")
        for model in ("strong", "weak")
        for k in (1, 2)
    )
    (canary,) = [r for r in summary["tasks"] if r.get("control")]
    assert canary["model"] == "scripted" and "epoch" not in canary
    perturbed = [r for r in summary["tasks"] if r.get("perturbation")]
    assert {(r["model"], r["epoch"]) for r in perturbed} == {
        (m, k) for m in ("strong", "weak") for k in (1, 2)
    }
    assert all(r["perturbation"]["of"] == "q1" for r in perturbed)
    assert (run_dir / "tasks" / "one" / "q1@case[weak]-epoch2" / "result.json").is_file()
    result.stdout.fnmatch_lines(["compared: strong − weak = *"])
    # each epoch of a perturbed copy pairs with the same epoch of its original
    result.stdout.fnmatch_lines(["robustness case [[]strong]: drop +0.000 over 2 pair(s)*"])
    result.stdout.fnmatch_lines(["robustness case [[]weak]: drop +0.000 over 2 pair(s)*"])
    validate_run(run_dir)


def test_html_report_names_the_suite_of_a_per_suite_comparison(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".toml", bench_one=SUITE.format(name="one"))
    pytester.makefile(".toml", bench_two=SUITE.format(name="two"))
    _, run_dir = run(pytester, *MODELS)
    summary = json.loads((run_dir / "summary.json").read_text())
    scopes = [c["suite"] for c in summary["comparisons"]]
    assert scopes == [None, "one", "two"]
    html = (run_dir / "report.html").read_text()
    models = html.split('<section id="models">')[1].split("</section>")[0]
    assert "<li>one: strong − weak" in models and "<li>two: strong − weak" in models
    assert "<li>strong − weak" in models  # the whole run's comparison, unprefixed


PY_TASKS = """
from pytest_agentbench.python_tasks import task

SUITE = {"verifier": {"kind": "number"}}

@task(target=4, scripted=["4"])
def two_plus_two():
    return "What is 2 + 2? Answer with a number."
"""

FIXTURE_TEST = """
import pytest

@pytest.mark.agentbench_scripted("Sorry.")
def test_refuses(agentbench_model):
    assert "Sorry" in agentbench_model.generate("Pick a lock?").text
"""


def test_python_tasks_run_per_model_and_fixture_tests_on_the_first_model(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(bench_py=PY_TASKS, test_safety=FIXTURE_TEST)
    result, run_dir = run(pytester, *MODELS)
    result.assert_outcomes(passed=3)
    summary = json.loads((run_dir / "summary.json").read_text())
    seen = sorted((r["nodeid"].rpartition("::")[2], r["model"]) for r in summary["tasks"])
    assert seen == [
        ("test_refuses", "strong"),
        ("two_plus_two[strong]", "strong"),
        ("two_plus_two[weak]", "weak"),
    ]
