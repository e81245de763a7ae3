"""Opt-in: the example suites against a real model served with an OpenAI-compatible API.

Skipped unless ``AGENTBENCH_REAL_MODEL_URL`` names the server's base URL (e.g.
``http://127.0.0.1:8000/v1`` for ``python -m llama_cpp.server``); ``AGENTBENCH_REAL_MODEL``
names the model (default ``local``). docs/real-model.md tells how to get one offline. The
runs go through ``openai-compat/<model>`` in pytest subprocesses; a small model fails
tasks, so only the harness is judged: each run completes with no harness errors, writes
its reports, and records usage as the server reported it.

Streaming is the product's default, and some servers (llama-cpp-python's among them)
report no usage on a stream, whatever ``stream_options`` asks: then the output count is
recovered from the streamed text and must be flagged so. A short non-streamed run checks
that usage the server does report arrives unchanged and unflagged.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.session.finish import UNUSABLE_EXIT

URL_ENV = "AGENTBENCH_REAL_MODEL_URL"
MODEL_ENV = "AGENTBENCH_REAL_MODEL"
EXAMPLES = Path(__file__).resolve().parents[2] / "example_suites"
SUITES = ("bench_arithmetic.toml", "bench_science_choice.json", "bench_invoice_json.toml")
QUICK_SUITE = "bench_science_choice.json"
RUN_TIMEOUT_S = 1800

pytestmark = pytest.mark.skipif(
    not os.environ.get(URL_ENV),
    reason=(
        f"opt-in: set {URL_ENV} to an OpenAI-compatible base URL (e.g. "
        f"http://127.0.0.1:8000/v1) and optionally {MODEL_ENV} (default 'local') to run the "
        "example suites against a real model; see docs/real-model.md"
    ),
)


def run_suites(pytester: pytest.Pytester, out: str, *extra: str) -> tuple[Path, str]:
    """Run ``pytest --agentbench`` against the real model; return the run dir and output."""
    url = os.environ[URL_ENV]
    model = os.environ.get(MODEL_ENV) or "local"
    result = pytester.runpytest_subprocess(
        "--agentbench",
        "--agentbench-model",
        f"openai-compat/{model}",
        "--agentbench-base-url",
        url,
        "--agentbench-out",
        out,
        "--agentbench-concurrency",
        "1",
        "-p",
        "no:cacheprovider",
        *extra,
        timeout=RUN_TIMEOUT_S,
    )
    output = str(result.stdout)
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), output
    return (pytester.path / out / "latest").resolve(), output


def completed(run: Path, streamed: bool) -> list[dict[str, Any]]:
    """Check a run completed with reports and no harness error; return its tasks."""
    model = os.environ.get(MODEL_ENV) or "local"
    ctrf = json.loads((run / "ctrf.json").read_text(encoding="utf-8"))
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    tasks: list[dict[str, Any]] = summary["tasks"]
    assert len(ctrf["results"]["tests"]) == len(tasks) > 0
    assert summary["settings"]["model"] == f"openai-compat/{model}"
    assert summary["settings"]["stream"] is streamed
    assert summary["partial"] is False
    errors = {t["nodeid"]: t["error"] for t in tasks if t["outcome"] == "harness_error"}
    assert not errors, f"harness errors against {os.environ[URL_ENV]}: {errors}"
    assert not [t["name"] for t in ctrf["results"]["tests"] if t["status"] == "other"]
    return tasks


def attempts(task: dict[str, Any]) -> list[dict[str, Any]]:
    result = json.loads((Path(task["rollout_dir"]) / "result.json").read_text(encoding="utf-8"))
    return list(result["attempts"])


def test_example_suites_stream_from_a_real_model(pytester: pytest.Pytester) -> None:
    for name in SUITES:
        shutil.copy(EXAMPLES / name, pytester.path / name)
    run, output = run_suites(pytester, "streamed")
    tasks = completed(run, streamed=True)
    for task in tasks:
        for attempt in attempts(task):
            usage, native = attempt["usage"], attempt["usage_native"]
            where = f"{task['nodeid']} attempt {attempt['index']}: {usage} from {native}"
            if native is None:
                # the server streamed no usage: the output is counted, and says so
                assert usage["recovered"] is True or not attempt["answer"].strip(), where
                assert usage["input"] is None, where
            else:
                assert usage["recovered"] is False, where
                assert usage["output"] == native["completion_tokens"], where
    assert any(isinstance(t["usage"]["output"], int) and t["usage"]["output"] > 0 for t in tasks), (
        output
    )


def test_reported_usage_from_a_real_model_is_kept(pytester: pytest.Pytester) -> None:
    shutil.copy(EXAMPLES / QUICK_SUITE, pytester.path / QUICK_SUITE)
    run, output = run_suites(pytester, "whole", "--agentbench-no-stream")
    tasks = completed(run, streamed=False)
    reported = [
        attempt
        for task in tasks
        for attempt in attempts(task)
        if attempt["usage_native"] and not attempt["usage"]["recovered"]
    ]
    assert reported, output
    for attempt in reported:
        usage, native = attempt["usage"], attempt["usage_native"]
        assert usage["output"] == native["completion_tokens"] > 0, attempt
        # Chat Completions arithmetic: prompt_tokens is the whole input, cached a subset
        assert usage["input"] + (usage["cache_read"] or 0) == native["prompt_tokens"] > 0, attempt
        assert usage["total"] == native["total_tokens"], attempt


def test_temperature_zero_and_a_seed_give_the_same_answers_on_a_rerun(
    pytester: pytest.Pytester,
) -> None:
    """The sampling settings reach a real server, and it honours them: two runs at
    temperature 0 with one seed answer every attempt alike, and both records say what was
    sent."""
    shutil.copy(EXAMPLES / QUICK_SUITE, pytester.path / QUICK_SUITE)
    fixed = (
        "--agentbench-temperature",
        "0",
        "--agentbench-sampling-seed",
        "1234",
        "--agentbench-no-stream",
    )
    answers = []
    for out in ("first", "again"):
        run, _ = run_suites(pytester, out, *fixed)
        tasks = completed(run, streamed=False)
        for task in tasks:
            assert task["sampling"] == {"temperature": 0.0, "seed": 1234}, task["nodeid"]
        answers.append({t["nodeid"]: [a["answer"] for a in attempts(t)] for t in tasks})
    assert answers[0] == answers[1]


def _run_own(pytester: pytest.Pytester, suite: str, *extra: str) -> Path:
    """``pytest --agentbench`` over one suite of its own against the real model, at the
    run's default concurrency; the run dir."""
    url = os.environ[URL_ENV]
    model = os.environ.get(MODEL_ENV) or "local"
    pytester.makefile(".toml", bench_own=suite)
    result = pytester.runpytest_subprocess(
        "--agentbench",
        "--agentbench-model",
        f"openai-compat/{model}",
        "--agentbench-base-url",
        url,
        "-p",
        "no:cacheprovider",
        *extra,
        timeout=RUN_TIMEOUT_S,
    )
    # a suite of one harness error (the overflow's) is a run whose number is not usable
    ended = (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED, UNUSABLE_EXIT)
    assert result.ret in ended, str(result.stdout)
    return (pytester.path / "agentbench-results" / "latest").resolve()


def test_a_streamed_prompt_past_the_context_window_is_an_overflow(
    pytester: pytest.Pytester,
) -> None:
    """llama-cpp-python answers a streamed prompt longer than its context with HTTP 200 and
    an empty stream: the task is a context-overflow harness error, found by asking once
    more unstreamed, never retried (it was "the stream ended before its finish", retried
    three times)."""
    words = " ".join(["apple banana cherry"] * 4000)  # 12 000 words: past any small n_ctx
    run = _run_own(
        pytester,
        '[suite]\nname = "ctx"\nverifier = { kind = "includes" }\n'
        f'[[task]]\nid = "too-long"\ninput = "{words}"\ntarget = "apple"\n',
    )
    (path,) = (run / "tasks").rglob("result.json")
    record = json.loads(path.read_text(encoding="utf-8"))
    assert (record["outcome"], record["failure_kind"]) == ("harness_error", "context_overflow")
    assert record["failure"]["retries"] == 0
    assert "prompt tokens" in record["error"]


def test_queued_requests_at_the_default_concurrency_do_not_time_out(
    pytester: pytest.Pytester,
) -> None:
    """Eight short tasks at the default concurrency of 8: a server that serves one at a
    time queues seven of them; the queue is not the model's time, so none times out
    (with 10 s each, the last waits for the seven before it: about 14 s here)."""
    tasks = "".join(
        f'\n[[task]]\nid = "n{i}"\ninput = "Write one short sentence about the number {i}."\n'
        f'target = "{i}"\n'
        for i in range(8)
    )
    run = _run_own(
        pytester,
        '[suite]\nname = "queue"\nverifier = { kind = "includes" }\ntimeout_s = 10\n'
        "max_tokens = 60\n" + tasks,
    )
    records = [
        json.loads(path.read_text(encoding="utf-8"))
        for path in (run / "tasks").rglob("result.json")
    ]
    assert len(records) == 8
    stopped = {
        r["task_id"]: (r["outcome"], r["error"])
        for r in records
        if r["outcome"] in ("timeout", "harness_error")
    }
    assert not stopped
