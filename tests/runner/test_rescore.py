"""python -m pytest_agentbench rescore RUN_DIR (docs/cost.md): the current verifiers on
a finished run's saved answers, into a new run folder that says where it came from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_agentbench import schemas
from pytest_agentbench.__main__ import main

SUITE = """
[suite]
name = "r"
verifier = { kind = "exact" }
repairs = 1

[[task]]
id = "case"
input = "say hi"
target = "hi"
scripted = ["Hi", "hi"]

[[task]]
id = "fixed"
input = "say yo"
target = "yo"
scripted = ["yo"]

[[task]]
id = "slow"
input = "wait"
target = "x"
timeout_s = 0.5
scripted = [{ text = "x", delay_s = 3 }]
"""


def test_a_fixed_verifier_rescores_the_saved_answers_into_a_new_run(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = pytester.makefile(".toml", bench_r=SUITE)
    pytester.runpytest("--agentbench", "-p", "no:cacheprovider").assert_outcomes(passed=2, failed=1)
    run = (pytester.path / "agentbench-results" / "latest").resolve()
    before = {r["task_id"]: r for r in json.loads((run / "summary.json").read_text())["tasks"]}
    assert before["case"]["repaired"] is True
    # the verifiers change: "case" now passes first time, "fixed" now fails
    changed = SUITE.replace('target = "yo"', 'target = "you"')
    suite.write_text(
        changed.replace('target = "hi"', 'target = "i"\nverifier = { kind = "includes" }')
    )
    capsys.readouterr()  # (the inner pytest run's output)
    assert main(["rescore", str(run)]) == 0
    printed = capsys.readouterr().out
    out = run.parent / f"{run.name}-rescored"
    assert f"-> {out}" in printed and "2 changed" in printed
    summary = json.loads((out / "summary.json").read_text())
    schemas.validate("summary", summary)
    schemas.validate("ctrf", json.loads((out / "ctrf.json").read_text()))
    assert summary["rescored"]["from"] == str(run)
    assert summary["rescored"]["changed"] == 2
    after = {r["task_id"]: r for r in summary["tasks"]}
    for record in after.values():
        schemas.validate("task_record", record)
    assert after["case"]["outcome"] == "passed"
    assert after["case"]["repaired"] is False and after["case"]["first_attempt_reward"] == 1
    assert len(after["case"]["rounds"]) == 1  # the repair round would not have run
    assert after["fixed"]["outcome"] == "failed" and after["fixed"]["reward"] == 0
    assert after["fixed"]["usage"] == before["fixed"]["usage"]  # what the run spent
    assert after["slow"] == {**before["slow"], "rescore_kept": "ended timeout, not by a verdict"}
    result = json.loads((Path(after["fixed"]["rollout_dir"]) / "result.json").read_text())
    schemas.validate("result", result)
    assert result["record"]["outcome"] == "failed"
    assert (Path(after["fixed"]["rollout_dir"]) / "trajectory.json").exists()
    # the earlier run is untouched, and a second rescore into the same folder is refused
    assert json.loads((run / "summary.json").read_text())["tasks"][0]["task_id"] == "case"
    assert main(["rescore", str(run)]) == 2
    assert "exists already" in capsys.readouterr().err


def _rule(word: str | None, verdict: str, prompt: int, out: int) -> str:
    """A scripted judge rule: an answer including ``word`` (any answer: None) gets
    ``verdict``, the judge declaring its usage."""
    text = json.dumps({"rationale": f"{word}?", "verdict": verdict})
    usage = f"usage = {{ prompt_tokens = {prompt}, completion_tokens = {out} }}"
    condition = f'includes = "{word}", ' if word else ""
    return f"{{ {condition}reply = {{ text = '{text}', {usage} }} }}"


def _reply(text: str, prompt: int) -> str:
    return f'{{ text = "{text}", usage = {{ prompt_tokens = {prompt}, completion_tokens = 5 }} }}'


ANSWERS = {
    "a": [_reply("Paris", 50)],
    "b": [_reply("Lyon", 50), _reply("Paris", 90)],
    "c": [_reply("Nice", 50), _reply("Nice", 90)],
}


def _judged(rules: list[str]) -> str:
    head = (
        '[suite]\nname = "rj"\nrepairs = 1\n[suite.verifier]\nkind = "judge"\n'
        'rubric = "The answer names the capital of France."\n'
        "scripted_judge = [\n" + "".join(f"  {rule},\n" for rule in rules) + "]\n"
    )
    return head + "".join(
        f'\n[[task]]\nid = "{task}"\ninput = "Capital of France?"\n'
        f"scripted = [{', '.join(replies)}]\n"
        for task, replies in ANSWERS.items()
    )


#: the run's judge passes Paris; the rescore's passes Lyon (and declares other usage)
BEFORE = [_rule("Paris", "pass", 700, 30), _rule(None, "fail", 600, 15)]
AFTER = [_rule("Lyon", "pass", 1000, 20), _rule(None, "fail", 800, 10)]
LABELS = (
    '{"task": "a", "answer": "Paris", "label": "pass"}\n'
    '{"task": "a", "answer": "Lyon", "label": "fail"}\n'
)
JUDGE_PRICE = (0.5, 1.5)  # per million input / output tokens
PRICES = "[models.dear]\ninput = 2\noutput = 8\n\n[models.scripted]\ninput = 0.5\noutput = 1.5\n"


def _usd(prompt: int, out: int) -> float:
    return (prompt * JUDGE_PRICE[0] + out * JUDGE_PRICE[1]) / 1e6


def test_rescore_judges_again_with_the_changed_rules_and_the_costs_add_up(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = pytester.makefile(".toml", bench_rj=_judged(BEFORE))
    pytester.makefile(".toml", prices=PRICES)
    pytester.makefile(".jsonl", labels=LABELS)
    args = ["--agentbench", "-p", "no:cacheprovider", "--agentbench-prices", "prices.toml"]
    args += ["--agentbench-model", "dear=scripted/openai"]
    result = pytester.runpytest(*args, "--agentbench-judge-labels", "labels.jsonl")
    result.assert_outcomes(passed=4, failed=1)  # (two labelled answers: never failed)
    run = (pytester.path / "agentbench-results" / "latest").resolve()
    before_summary = json.loads((run / "summary.json").read_text())
    before = {r["task_id"]: r for r in before_summary["tasks"] if r.get("control") is None}
    assert before_summary["judge"]["calibration"]["accuracy"]["value"] == 1.0
    suite.write_text(_judged(AFTER))
    capsys.readouterr()

    # --no-judge: judged tasks kept as they were, the judge not called
    assert main(["rescore", str(run), "--no-judge", "--out", str(pytester.path / "kept")]) == 0
    kept = json.loads((pytester.path / "kept" / "summary.json").read_text())
    assert kept["rescored"]["kept"] == {"a judged task (not judged again: --no-judge)": 5}
    assert "judge" not in kept["rescored"]

    assert main(["rescore", str(run)]) == 0
    printed = capsys.readouterr().out
    assert "re-judged 5 task(s): 6 judge call(s), $0.0027" in printed, printed
    out = run.parent / f"{run.name}-rescored"
    summary = json.loads((out / "summary.json").read_text())
    schemas.validate("summary", summary)
    records = [r for r in summary["tasks"]]
    for record in records:
        schemas.validate("task_record", record)
    after = {r["task_id"]: r for r in records if r.get("control") is None}
    assert (after["a"]["outcome"], after["b"]["outcome"], after["c"]["outcome"]) == (
        "failed",
        "passed",
        "failed",
    )
    assert after["b"]["repaired"] is False and after["b"]["judge"]["calls"] == 1
    judge_json = json.loads(
        (Path(after["a"]["rollout_dir"]) / "verifier" / "judge.json").read_text()
    )
    schemas.validate("judge", judge_json)
    assert judge_json["samples"][0]["score"] == "fail"
    assert all(r.get("cost") is None for r in records if r.get("control") is not None)
    # the calibration now disagrees with both labels
    assert summary["judge"]["calibration"]["accuracy"]["value"] == 0.0
    # costs: the model's as the run spent it; the judge's the new judging's
    new_judge = {"a": _usd(800, 10), "b": _usd(1000, 20), "c": 2 * _usd(800, 10)}
    for task, record in after.items():
        cost = record["cost"]
        assert cost["model_usd"] == pytest.approx(before[task]["cost"]["model_usd"])
        assert cost["judge_usd"] == pytest.approx(new_judge[task])
        assert cost["usd"] == pytest.approx(cost["model_usd"] + new_judge[task])
    totals = summary["totals"]["cost"]
    model_usd = sum(r["cost"]["model_usd"] for r in before.values())
    assert totals["model_usd"] == pytest.approx(model_usd)
    assert totals["judge_usd"] == pytest.approx(sum(new_judge.values()))
    section = summary["rescored"]["judge"]
    labels_usd = _usd(800, 10) + _usd(1000, 20)  # Paris now fails, Lyon now passes
    assert section["tasks"] == 5 and section["calls"] == 6
    assert section["usd"] == pytest.approx(sum(new_judge.values()) + labels_usd)
    # what the run's judging of the same five had cost: the tasks' and the labels'
    run_labels = _usd(700, 30) + _usd(600, 15)
    assert section["replaced_usd"] == pytest.approx(
        sum(r["cost"]["judge_usd"] for r in before.values()) + run_labels
    )


def test_rescore_calls_a_hosted_judge_with_its_key_from_the_environment(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """--judge-model names an OpenAI judge at a base URL (a scripted server answering by model
    name stands in for it): it is called through its own client with its key from its
    key_env, and priced from --prices."""
    import httpx

    from pytest_agentbench.scripted.server import ScriptedServer

    pytester.makefile(".toml", bench_rj=_judged(BEFORE))
    pytester.runpytest("--agentbench", "-p", "no:cacheprovider").assert_outcomes(passed=2, failed=1)
    run = (pytester.path / "agentbench-results" / "latest").resolve()
    prices = pytester.makefile(".toml", hosted='[models."openai/grader"]\ninput = 3\noutput = 9\n')
    monkeypatch.setenv("GRADER_KEY", "sk-test-grader")
    verdict = json.dumps({"rationale": "fine", "verdict": "pass"})
    reply = {"text": verdict, "usage": {"prompt_tokens": 400, "completion_tokens": 12}}
    server = ScriptedServer()
    url = server.start()
    try:
        httpx.post(
            url.removesuffix("/v1") + "/_agentbench/scripts",
            json={"scripts": {"grader": [reply] * 3}},
        ).raise_for_status()
        judge = f"openai/grader base_url={url} key_env=GRADER_KEY"
        code = main(["rescore", str(run), "--judge-model", judge, "--prices", str(prices)])
        sent = server.requests
    finally:
        server.stop()
    assert code == 0, capsys.readouterr().err
    # one call per task: each first attempt now passes
    assert [r["body"]["model"] for r in sent] == ["grader"] * 3
    assert all(r["headers"]["authorization"] == "[redacted]" for r in sent)
    summary = json.loads((run.parent / f"{run.name}-rescored" / "summary.json").read_text())
    assert [r["outcome"] for r in summary["tasks"]] == ["passed"] * 3
    for record in summary["tasks"]:
        assert record["judge"]["model"] == "openai/grader"
        assert record["cost"]["judge_usd"] == pytest.approx((400 * 3 + 12 * 9) / 1e6)
    assert summary["rescored"]["judge"]["usd"] == pytest.approx(3 * (400 * 3 + 12 * 9) / 1e6)
    monkeypatch.delenv("GRADER_KEY")
    out = str(pytester.path / "again")
    assert main(["rescore", str(run), "--judge-model", judge, "--out", out]) == 0
    kept = json.loads((pytester.path / "again" / "summary.json").read_text())["rescored"]["kept"]
    assert kept == {"re-judging failed: judge openai/grader needs an API key: set GRADER_KEY": 3}
