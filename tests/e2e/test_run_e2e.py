"""End-to-end runs of `pytest --agentbench` through pytester, against the real scripted
server over real sockets."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

SUITE = """
[suite]
name = "mini"
system = "Answer with the number only."
verifier = { kind = "number" }
repairs = 1

[[task]]
id = "right"
input = "2 + 2?"
target = 4
scripted = ["4"]

[[task]]
id = "repaired"
input = "3 + 4?"
target = 7
scripted = ["8", "7"]

[[task]]
id = "wrong"
input = "5 + 5?"
target = 10
scripted = ["11", "12"]
"""


def run_dir(pytester: pytest.Pytester) -> Path:
    latest = pytester.path / "agentbench-results" / "latest"
    assert latest.is_dir(), "the run should have written agentbench-results/latest"
    return latest.resolve()


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def test_pass_fail_and_repair_end_to_end(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_mini=SUITE)
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "agentbench: model scripted (offline) — set --agentbench-model to benchmark a real"
            " model",
            "*= agentbench =*",
            "3 tasks: 2 passed, 1 failed",
            "score 0.667 ± 0.272 (n=3, 95 % CI 0.208–0.939)",
            "first try 0.333 ± 0.272 (n=3, 95 % CI 0.061–0.792) · 1 repaired",
            "✗ mini::wrong: reward 0 — *",
            "(details: *verifier)",
        ]
    )
    rdir = run_dir(pytester)
    repaired = load(rdir / "tasks" / "mini" / "repaired[scripted]" / "result.json")
    assert repaired["outcome"] == "passed"
    assert repaired["repaired"] is True
    assert repaired["first_attempt_reward"] == 0
    assert [a["answer"] for a in repaired["attempts"]] == ["8", "7"]
    wrong = rdir / "tasks" / "mini" / "wrong[scripted]"
    assert load(wrong / "result.json")["outcome"] == "failed"
    assert load(wrong / "verifier" / "reward.json")["reward"] == 0
    trajectory = load(wrong / "trajectory.json")
    assert len(trajectory["requests"]) == 2
    second = trajectory["requests"][1]["request"]["body"]["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert second[2]["content"] == "11"
    summary = load(rdir / "summary.json")
    assert summary["totals"]["outcomes"]["passed"] == 2
    assert summary["totals"]["outcomes"]["failed"] == 1
    assert sum(summary["totals"]["outcomes"].values()) == summary["totals"]["tasks"] == 3
    assert summary["partial"] is False
    stats = summary["totals"]["stats"]
    assert (stats["score"]["value"], stats["score"]["n"], stats["score"]["method"]) == (
        summary["totals"]["score"],
        3,
        "wilson",
    )
    assert stats["first_try"]["value"] == summary["totals"]["first_try_score"]
    curve = summary["totals"]["repair_curve"]
    assert [(r["round"], r["score"]["value"], r["new_passes"]) for r in curve] == [
        (0, summary["totals"]["first_try_score"], 1),
        (1, summary["totals"]["score"], 1),
    ]
    assert sum(r["tokens"] for r in curve) == summary["totals"]["usage"]["total"]
    run_extra = load(rdir / "ctrf.json")["results"]["environment"]["extra"]
    assert run_extra["pytest-agentbench.run"]["stats"] == stats


def test_failure_report_is_one_readable_line_without_traceback(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_mini=SUITE)
    result = pytester.runpytest("--agentbench", "-k", "wrong", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1, deselected=2)
    out = result.stdout.str()
    assert "Traceback" not in out
    assert "pytest_agentbench" not in out.split("= agentbench =")[0].split("FAILURES")[1]
    result.stdout.fnmatch_lines(["FAILED *bench_mini.toml::wrong - reward 0*"])


def test_harness_error_is_reported_apart_and_excluded_from_score(pytester: pytest.Pytester) -> None:
    pytester.makefile(
        ".toml",
        bench_err="""
[suite]
verifier = { kind = "exact" }
[[task]]
id = "ok"
input = "say hi"
target = "hi"
scripted = ["hi"]
[[task]]
id = "server-down"
input = "say hi"
target = "hi"
scripted = [{ error = { status = 500, message = "scripted outage" } }]
""",
    )
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, errors=1)
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "2 tasks: 1 passed, 1 harness error(s)",
            "score 1.000 ± 0.000 (n=1, 95 % CI 0.207–1.000)",
            "harness errors (not the model's fault; excluded from the score):",
            "! err::server-down: harness error: *500*scripted outage",
            "HARNESS ERROR *bench_err.toml::server-down - harness error: *",
        ]
    )
    ctrf = load(run_dir(pytester) / "ctrf.json")
    statuses = {
        t["name"].split("::")[-1]: (t["status"], t["rawStatus"]) for t in ctrf["results"]["tests"]
    }
    assert statuses == {"ok": ("passed", "passed"), "server-down": ("other", "harness_error")}


def test_keyword_selection_runs_only_selected_tasks(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_mini=SUITE)
    result = pytester.runpytest("--agentbench", "-k", "right or repaired", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, deselected=1)
    ctrf = load(run_dir(pytester) / "ctrf.json")
    assert sorted(t["name"].split("::")[-1] for t in ctrf["results"]["tests"]) == [
        "repaired",
        "right",
    ]


def test_exitfirst_stops_and_marks_the_run_partial(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_mini=SUITE.replace('id = "right"', 'id = "a-right"'))
    suite = pytester.path / "bench_mini.toml"
    text = suite.read_text()
    # put the failing task first
    head, _, rest = text.partition("[[task]]")
    tasks = ["[[task]]" + t for t in rest.split("[[task]]")]
    suite.write_text(head + tasks[2] + "\n" + "".join(tasks[:2]))
    result = pytester.runpytest("--agentbench", "-x", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    summary = load(run_dir(pytester) / "summary.json")
    assert summary["partial"] is True
    assert summary["totals"]["tasks"] == 1


def test_last_failed_reruns_only_failed_tasks(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_mini=SUITE)
    pytester.runpytest("--agentbench").assert_outcomes(passed=2, failed=1)
    result = pytester.runpytest("--agentbench", "--lf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["collected 1 item", "run-last-failure: rerun previous 1 failure"])


def test_junitxml_carries_outcome_reward_and_tokens(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_mini=SUITE)
    pytester.runpytest("--agentbench", "--junitxml=junit.xml", "-p", "no:cacheprovider")
    xml = (pytester.path / "junit.xml").read_text()
    assert 'name="agentbench_outcome" value="passed"' in xml
    assert 'name="agentbench_outcome" value="failed"' in xml
    assert 'name="agentbench_reward" value="0' in xml
    assert 'name="agentbench_tokens"' in xml


def test_verbose_shows_each_task(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_mini=SUITE)
    result = pytester.runpytest("--agentbench", "-v", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(
        ["*bench_mini.toml::right PASSED*", "*bench_mini.toml::wrong FAILED*"]
    )


def test_task_id_cannot_escape_the_results_folder(pytester: pytest.Pytester) -> None:
    pytester.makefile(
        ".json",
        bench_escape=json.dumps(
            {
                "suite": {"name": "../../evil", "verifier": {"kind": "exact"}},
                "task": [{"id": "../../x", "input": "hi", "target": "hi", "scripted": ["hi"]}],
            }
        ),
    )
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    rdir = run_dir(pytester)
    written = [p for p in pytester.path.rglob("result.json")]
    assert len(written) == 1
    assert rdir in written[0].parents


def test_api_key_in_environment_never_reaches_an_artifact(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-agentbench-test-0123456789abcdefSECRET"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("ANTHROPIC_API_KEY", secret + "-anthropic")
    pytester.makefile(
        ".toml",
        bench_leak=f"""
[suite]
verifier = {{ kind = "exact" }}
[[task]]
id = "echo"
input = "Repeat this: {secret}"
target = "no"
scripted = ["{secret}"]
""",
    )
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    files = [p for p in (pytester.path / "agentbench-results").rglob("*") if p.is_file()]
    assert any(p.name == "trajectory.json" for p in files)
    for path in files:
        assert secret not in path.read_text(encoding="utf-8"), path


def test_unknown_provider_is_a_usage_error_naming_the_known_ones(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_mini=SUITE)
    result = pytester.runpytest("--agentbench", "--agentbench-model", "gemini/pro")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*no model client for provider 'gemini' (model gemini/pro): the built-in providers"
            " are openai, openai-responses, anthropic, openai-compat, scripted; installed"
            " plugins implementing pytest_agentbench_model_client: none*"
        ]
    )


def test_hosted_provider_without_key_is_a_usage_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    pytester.makefile(".toml", bench_mini=SUITE)
    result = pytester.runpytest("--agentbench", "--agentbench-model", "openai/gpt-4.1-mini")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*needs an API key: set OPENAI_API_KEY*"])


def test_plugin_is_inert_without_the_flag(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_mini=SUITE)
    pytester.makepyfile(test_plain="def test_one():\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert not (pytester.path / "agentbench-results").exists()


def test_unreachable_model_server_makes_every_task_a_harness_error(
    pytester: pytest.Pytester,
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    pytester.makefile(".toml", bench_mini=SUITE)
    result = pytester.runpytest(
        "--agentbench",
        "--agentbench-model",
        "scripted",
        "--agentbench-base-url",
        f"http://127.0.0.1:{port}/v1",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(errors=3)
    assert "Traceback" not in result.stdout.str()
    result.stdout.fnmatch_lines(
        ["3 tasks: 3 harness error(s)", f"! mini::right: harness error: *127.0.0.1:{port}*"]
    )
