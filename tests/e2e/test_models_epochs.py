"""Several models and epochs in one run: every task against each model (the scripted
provider answering per model), K epochs with their own seeds and folders, reduced
scores, the suites × models table and the paired comparison of the models; under
xdist, resume, shards and merge, with every file matching its schema and the CTRF
report accepted by the independent checker."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ctrf_support import assert_ctrf_accepted
from records_support import make_record
from schemas_support import validate_run

from pytest_agentbench.artifacts.lineup import reduce_task
from pytest_agentbench.core.task_record import TaskRecord

SUITE = """
[suite]
name = "sums"
verifier = { kind = "exact" }
epochs = 2
reducer = "pass@2"

[[task]]
id = "apples"
input = "3 + 4?"
target = "7"
scripted = ["7"]
scripted_by_model = { weak = ["8"] }

[[task]]
id = "pears"
input = "2 + 2?"
target = "4"
scripted = ["4"]
scripted_by_model = { weak = ["5"] }

[[task]]
id = "plums"
input = "1 + 1?"
target = "2"
scripted = ["2"]
"""

MODELS = ["--agentbench-model", "strong=scripted", "--agentbench-model", "weak=scripted"]


def run(pytester: pytest.Pytester, *args: str, out: str = "out") -> tuple[Any, Path]:
    result = pytester.runpytest(
        "--agentbench", "-p", "no:cacheprovider", "--agentbench-out", out, *args
    )
    return result, (pytester.path / out / "latest").resolve()


def records(run_dir: Path) -> list[dict[str, Any]]:
    return list(json.loads((run_dir / "summary.json").read_text())["tasks"])


def test_each_model_answers_its_own_way_in_folders_of_its_own(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_sums=SUITE)
    result, run_dir = run(
        pytester,
        *MODELS,
        "--agentbench-sampling-seed",
        "40",
        "-v",
        "--agentbench-markdown",
        "sum.md",
    )
    assert result.parseoutcomes() == {"passed": 8, "failed": 4}
    result.stdout.fnmatch_lines(["agentbench: 2 models: strong, weak"])
    result.stdout.fnmatch_lines(["12 samples: 8 passed, 4 failed"])
    result.stdout.fnmatch_lines(
        [
            "*bench_sums.toml::apples?strong:epoch1? PASSED*",
            "*bench_sums.toml::apples?weak:epoch2? FAILED*",
        ]
    )
    found = records(run_dir)
    assert {(r["model"], r["task_id"], r["epoch"]) for r in found} == {
        (m, t, e) for m in ("strong", "weak") for t in ("apples", "pears", "plums") for e in (1, 2)
    }
    # each epoch has its own seed (the run's seed + epoch - 1) and its own folder
    assert {r["epoch"]: r["sampling"]["seed"] for r in found} == {1: 40, 2: 41}
    folders = {r["rollout_dir"] for r in found}
    assert len(folders) == 12
    assert (run_dir / "tasks" / "sums" / "apples[weak]-epoch2" / "result.json").is_file()
    weak = json.loads((run_dir / "tasks/sums/apples[weak]-epoch1/trajectory.json").read_text())
    assert "8" in json.dumps(weak)
    summary = json.loads((run_dir / "summary.json").read_text())
    reduced = {row["model"]: row["reduced"] for row in summary["scores"]}
    assert reduced["strong"]["reducer"] == "pass@2" and reduced["strong"]["epochs"] == 2
    assert reduced["strong"]["score"]["value"] == 1.0
    assert reduced["weak"]["score"]["value"] == pytest.approx(1 / 3)
    assert reduced["weak"]["score"]["n"] == 3
    (pair,) = summary["comparisons"]
    assert (pair["first"], pair["second"], pair["paired"]) == ("strong", "weak", 3)
    assert pair["test"] == "McNemar exact" and pair["difference"]["value"] == pytest.approx(2 / 3)
    result.stdout.fnmatch_lines(
        [
            "scores by suite × model (n = tasks):",
            "*suite*strong*weak",
            "*sums*pass@2 1.000 (n=3, CI *)*pass@2 0.333 (n=3, CI *)",
            "compared: strong − weak = +0.667 (n=3, *McNemar exact p=0.5): "
            "inconclusive — about 6 more task(s) would decide it*",
        ]
    )
    markdown = (pytester.path / "sum.md").read_text()
    assert "- `sums` × `weak`: pass@2 over 2 epochs 0.333 (n=3 tasks)" in markdown
    assert "- strong − weak = +0.667 (n=3" in markdown
    assert "`sums::apples[weak:epoch1]`" in markdown
    validate_run(run_dir)
    assert_ctrf_accepted(run_dir / "ctrf.json")


def test_k_selects_by_model_and_the_ini_names_models_with_settings(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".toml", bench_sums=SUITE)
    pytester.makeini(
        """
        [pytest]
        agentbench_models =
            strong = scripted temperature=0.5
            weak = scripted seed=7
        agentbench_epochs = 1
        """
    )
    result, run_dir = run(pytester, "-k", "weak")
    assert result.parseoutcomes() == {"failed": 2, "passed": 1, "deselected": 3}
    found = records(run_dir)
    assert {r["model"] for r in found} == {"weak"}
    assert all(r["sampling"] == {"seed": 7} and "epoch" not in r for r in found)
    assert {r["nodeid"].rpartition("::")[2] for r in found} == {
        "apples[weak]",
        "pears[weak]",
        "plums[weak]",
    }
    result, run_dir = run(pytester, "-k", "strong and apples", out="again")
    (only,) = records(run_dir)
    assert only["model"] == "strong" and only["sampling"] == {"temperature": 0.5}
    # one named model alone: plain ids, its own replies
    result, run_dir = run(pytester, "--agentbench-model", "weak=scripted", "-v", out="alone")
    result.stdout.fnmatch_lines(["*bench_sums.toml::apples FAILED*"])
    assert {r["model"] for r in records(run_dir)} == {"weak"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--agentbench-model", "a=scripted", "--agentbench-model", "a=scripted"], "given twice"),
        (["--agentbench-reducer", "pass@0"], "pass@K or pass^K (K >= 1)"),
        (["--agentbench-epochs", "0"], "agentbench epochs: expected a whole number from 1"),
        (["--agentbench-model", "bad name=scripted"], "model name 'bad name'"),
    ],
)
def test_bad_model_and_epoch_options_are_clear_errors(
    pytester: pytest.Pytester, args: list[str], message: str
) -> None:
    pytester.makefile(".toml", bench_sums=SUITE)
    result, _ = run(pytester, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()


@pytest.mark.slow
def test_xdist_resume_shards_and_merge_keep_models_and_epochs(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_sums=SUITE)
    result, first = run(pytester, *MODELS, "-n", "2")
    assert result.parseoutcomes() == {"passed": 8, "failed": 4}
    result, again = run(pytester, *MODELS, "--agentbench-resume", str(first))
    assert again == first
    assert all(r.get("resumed") for r in records(first)) and len(records(first)) == 12
    result.stdout.fnmatch_lines(["12 task(s) resumed from the earlier run*"])
    shards = [
        run(pytester, *MODELS, "--agentbench-shard", f"{k}/2", out=f"s{k}")[1] for k in (1, 2)
    ]
    merged_dir = pytester.path / "merged"
    command = [sys.executable, "-m", "pytest_agentbench", "merge", *map(str, shards)]
    merged = subprocess.run(
        [*command, "--out", str(merged_dir)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert merged.returncode == 0, merged.stderr
    summary = json.loads((merged_dir / "summary.json").read_text())
    assert len(summary["tasks"]) == 12
    (pair,) = summary["comparisons"]
    assert pair["paired"] == 3 and pair["difference"]["value"] == pytest.approx(2 / 3)
    for folder in (first, merged_dir):
        validate_run(folder)
    assert_ctrf_accepted(first / "ctrf.json", merged_dir / "ctrf.json")


def sample(reward: float, outcome: str | None = None) -> TaskRecord:
    passed = "passed" if reward >= 1 else "failed"
    return make_record(reward=reward, outcome=outcome or passed, pass_threshold=1.0)


def test_reducers_follow_their_definitions_and_drop_harness_errors() -> None:
    runs = [sample(1), sample(0), sample(1), sample(0), sample(0)]
    n, c = 5, 2
    assert reduce_task(runs, "pass@2") == pytest.approx(1 - math.comb(n - c, 2) / math.comb(n, 2))
    assert reduce_task(runs, "pass^2") == pytest.approx(math.comb(c, 2) / math.comb(n, 2))
    assert reduce_task(runs, "pass@6") is None  # more draws than samples: not estimable
    assert reduce_task(runs, "mean") == pytest.approx(0.4)
    assert reduce_task(runs, "majority") == 0.0 and reduce_task(runs, "max") == 1.0
    graded = [sample(0.2), sample(0.9), sample(0.5)]
    assert reduce_task(graded, "median") == 0.5
    error = make_record(reward=None, outcome="harness_error", pass_threshold=1.0)
    assert reduce_task([error, sample(1)], "mean") == 1.0
    assert reduce_task([error, sample(1)], "mean", errors_as_failures=True) == 0.5
    assert reduce_task([error], "pass@1") is None


@pytest.mark.slow
def test_a_worker_killed_under_one_model_leaves_a_record_of_that_sample(
    pytester: pytest.Pytester,
) -> None:
    from test_xdist_crash import CONFTEST

    tasks = "".join(
        f'[[task]]\nid = "t{i}"\ninput = "q"\ntarget = "ok"\n'
        f'scripted = [{{ text = "ok", delay_s = 0.3 }}]\n'
        + ('scripted_by_model = { strong = ["die"] }\n' if i == 0 else "")
        for i in range(4)
    )
    pytester.makeconftest(CONFTEST)
    pytester.makefile(".toml", bench_fragile='[suite]\nverifier = { kind = "fragile" }\n' + tasks)
    result = pytester.runpytest_subprocess(
        "--agentbench", "-n", "2", "-p", "no:cacheprovider", *MODELS, "--agentbench-epochs", "2",
        "--agentbench-concurrency", "1",  # no rollout runs ahead: a killer is the current item
    )  # fmt: skip
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    found = records((pytester.path / "agentbench-results" / "latest").resolve())
    assert len(found) == 16
    samples = {(r["task_id"], r["model"], r["epoch"]): r["outcome"] for r in found}
    broken = {key for key, outcome in samples.items() if outcome != "passed"}
    assert broken == {("t0", "strong", 1), ("t0", "strong", 2)}
    assert {samples[key] for key in broken} == {"harness_error"}
    # each killer is its worker's current item: xdist blames it, and the worker's mark
    # names this very sample, so the controller reports it (``crashed_worker``), and it
    # is not sent to run again elsewhere (refused there, it would have no such field)
    for record in (r for r in found if r["outcome"] != "passed"):
        assert "crashed while verifying this task" in record["message"], record["message"]
        assert str(record.get("crashed_worker")).startswith("gw"), record


def test_each_model_has_its_own_server_and_key(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_agentbench.scripted.server import ScriptedServer

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("RIGHT_KEY", "sk-right-only")
    suite = '[[task]]\nid = "sum"\ninput = "3 + 4?"\ntarget = "7"\n'
    pytester.makefile(".toml", bench_local=suite)
    with (
        ScriptedServer({"qwen": ["7"]}) as left,
        ScriptedServer({"qwen": ["8 sk-right-only"]}) as right,
    ):
        pytester.makeini(
            "[pytest]\nagentbench_models =\n"
            f"    left = openai-compat/qwen base_url={left.url}\n"
            f"    right = openai-compat/qwen base_url={right.url} key_env=RIGHT_KEY\n"
        )
        result, run_dir = run(pytester, "--agentbench-concurrency", "2")
        assert result.parseoutcomes() == {"passed": 1, "failed": 1}
        outcomes = {r["model"]: r["outcome"] for r in records(run_dir)}
        shown = json.loads((run_dir / "summary.json").read_text())["settings"]["models"]
        assert [(m["name"], m["base_url"]) for m in shown] == [
            ("left", left.url),
            ("right", right.url),
        ]
        assert outcomes == {"left": "passed", "right": "failed"}
        assert [("authorization" in r["headers"]) for r in left.requests] == [False]
        assert [("authorization" in r["headers"]) for r in right.requests] == [True]
    # the right model's key is a secret like the default one: redacted wherever it shows
    written = [p.read_text() for p in run_dir.rglob("*.json")]
    assert len(written) > 4 and not any("sk-right-only" in text for text in written)
    assert any("8 [redacted]" in text for text in written)


def test_models_are_compared_over_the_run_and_within_each_suite() -> None:
    from pytest_agentbench.artifacts.lineup import model_comparisons

    def done(suite: str, task: str, model: str, reward: float | None) -> TaskRecord:
        outcome = "harness_error" if reward is None else "passed" if reward == 1 else "failed"
        return make_record(suite=suite, task_id=task, model=model, reward=reward,
                           outcome=outcome, pass_threshold=1.0)  # fmt: skip

    found = [
        *(done("x", f"t{i}", "a", 1.0) for i in range(6)),
        *(done("x", f"t{i}", "b", 0.0) for i in range(6)),
        done("y", "u", "a", 1.0),
        done("y", "u", "b", None),  # a harness error: the pair is left out, and counted
        done("y", "v", "a", 0.0),
        done("y", "v", "b", 0.0),
    ]
    rows = {row["suite"]: row for row in model_comparisons(found) or []}
    assert set(rows) == {None, "x", "y"}
    assert (rows[None]["paired"], rows[None]["excluded"]) == (7, 1)
    assert rows["x"]["paired"] == 6 and rows["x"]["p_value"] == pytest.approx(2 / 2**6)
    assert rows["x"]["significant"] and "significant at 0.05" in rows["x"]["words"]
    assert (rows["y"]["paired"], rows["y"]["excluded"]) == (1, 1)
    assert "1 task(s) excluded (harness error)" in rows["y"]["words"]


def resolve(cli: dict[str, Any], ini: dict[str, Any], env: dict[str, str]) -> Any:
    from pytest_agentbench.config.resolve import resolve_settings

    return resolve_settings(lambda n: cli.get(n), lambda n: ini.get(n, ""), env)


def test_model_lines_resolve_each_model_and_name_what_is_wrong() -> None:
    from pytest_agentbench.errors import AgentbenchError

    lines = [
        "local = openai-compat/qwen base_url=http://127.0.0.1:9/v1/ temperature=0.3",
        "# a comment",
        "openai/gpt-4.1-mini key_env=TEAM_KEY",
    ]
    env = {"OPENAI_API_KEY": "sk-default", "TEAM_KEY": "sk-team"}
    settings = resolve({"agentbench_sampling_seed": 5}, {"agentbench_models": lines}, env)
    local, hosted = settings.lineup()
    assert (local.model_name, local.base_url, local.api_key) == (
        "local",
        "http://127.0.0.1:9/v1",
        "sk-default",
    )
    assert local.sampling.public() == {"temperature": 0.3, "seed": 5}
    assert (hosted.model_name, hosted.api_key, hosted.base_url) == (
        "openai/gpt-4.1-mini",
        "sk-team",
        None,
    )
    assert local.fingerprint() != hosted.fingerprint()
    # the command line's models replace the ini's
    only = resolve({"agentbench_model": ["scripted"]}, {"agentbench_models": lines}, env)
    assert [one.model_name for one in only.lineup()] == ["scripted"]
    for line, message in [
        ("a = scripted colour=red", "agentbench_models line 1: unknown key 'colour'"),
        ("a = scripted seed=x", "agentbench_models line 1: seed: expected a number"),
        ("a = gemini", "agentbench_models line 1: unknown model spec 'gemini'"),
        ("a = anthropic/c top_k=-1", "model a: top_k"),
        ("a = openai/m key_env=TEAM_LLM", "key_env=TEAM_LLM: a key variable's name must say"),
    ]:
        with pytest.raises(AgentbenchError, match=re.escape(message)):
            resolve({}, {"agentbench_models": [line]}, {"ANTHROPIC_API_KEY": "k"})
