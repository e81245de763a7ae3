"""--agentbench-batch (docs/cost.md, "Batch APIs"): the first-round requests of a run go
through the provider's batch API, spoken by the scripted server (its own request log and
stats prove what was batched and what was sent live); the records are a live run's
apart from timings and the batch marks, and every report shows the batch price."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench import schemas
from pytest_agentbench.scripted.server import ScriptedServer

SUITE = """
[suite]
name = "k"
verifier = { kind = "number" }
repairs = 1

[[task]]
id = "right"
input = "1?"
target = 1
scripted = [{ text = "1", usage = { prompt_tokens = 2000, completion_tokens = 50 } }]

[[task]]
id = "repaired"
input = "2?"
target = 2
scripted = [{ text = "3", usage = { prompt_tokens = 2000, completion_tokens = 50 } }, \
{ text = "2", usage = { prompt_tokens = 2100, completion_tokens = 40 } }]

[[task]]
id = "thinks"
input = "3?"
target = 3
scripted = [{ text = "3", thinking = "one two three", \
usage = { prompt_tokens = 1000, completion_tokens = 20 } }]
"""
PRICES = "[models.scripted]\ninput = 2\noutput = 8\n"
#: what differs between a live run's record and a batched run's
MARKS = ("start_ms", "duration_ms", "rollout_dir", "verifier_dir", "waited_s", "batch", "cost")


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    served = ScriptedServer()
    served.start()
    try:
        yield served
    finally:
        served.stop()


def _run_dir(pytester: pytest.Pytester) -> Path:
    return (pytester.path / "agentbench-results" / "latest").resolve()


def _records(pytester: pytest.Pytester) -> dict[str, dict[str, Any]]:
    summary = json.loads((_run_dir(pytester) / "summary.json").read_text())
    return {r["task_id"]: r for r in summary["tasks"]} | {"": summary}


def _live_turns(server: ScriptedServer, since: int = 0) -> list[tuple[str, int]]:
    """(task key's last part, turn) of each live generation request the server answered."""
    return sorted(
        (str(r["key"]).rpartition("::")[2], int(r["turn"]))
        for r in server.requests[since:]
        if "batch" not in r and r.get("key")
    )


def _args(server: ScriptedServer, *more: str) -> list[str]:
    args = ["--agentbench", "-p", "no:cacheprovider", "-p", "no:randomly"]
    return [*args, "--agentbench-prices", "prices.toml", "--agentbench-base-url", server.url, *more]


@pytest.mark.parametrize(
    "spec",
    [
        "scripted",
        pytest.param("scripted/anthropic", marks=pytest.mark.slow),
        pytest.param("scripted/openai-responses", marks=pytest.mark.slow),
    ],
)
def test_a_batched_run_sends_no_first_round_live_and_costs_half_in_every_report(
    pytester: pytest.Pytester, server: ScriptedServer, spec: str
) -> None:
    pytester.makefile(".toml", bench_k=SUITE)
    pytester.makefile(".toml", prices=PRICES.replace("scripted", "m"))
    model = ["--agentbench-model", f"m={spec}"]
    pytester.runpytest(*_args(server, *model)).assert_outcomes(passed=3)
    live = _records(pytester)
    assert server.stats["batches"] == 0
    logged = len(server.requests)

    result = pytester.runpytest(
        *_args(server, "--agentbench-batch", "--agentbench-markdown", "s.md", *model)
    )
    result.assert_outcomes(passed=3)
    stats = server.stats
    assert stats["batches"] == 1 and stats["batch_entries"] == 3
    # only the repair round went live: no first-round request was sent
    assert _live_turns(server, logged) == [("repaired", 1)]
    batched = _records(pytester)
    price = {"input": 2.0, "output": 8.0}
    for task in ("right", "repaired", "thinks"):
        before, after = live[task], batched[task]
        schemas.validate("task_record", after)
        assert "batch" not in before and after["batch"] == 1
        assert {k: v for k, v in after.items() if k not in MARKS} == {
            k: v for k, v in before.items() if k not in MARKS
        }
        # the first call at half the price, the repair (if any) at the full one
        first = after["usage"] if task != "repaired" else {"input": 2000, "output": 50}
        half = (first["input"] * price["input"] + first["output"] * price["output"]) / 2e6
        assert after["cost"]["batch_saved_usd"] == pytest.approx(half)
        assert after["cost"]["usd"] == pytest.approx(before["cost"]["usd"] - half)
    summary = batched[""]
    schemas.validate("summary", summary)
    records = [batched[t] for t in ("right", "repaired", "thinks")]
    total = math.fsum(r["cost"]["usd"] for r in records)
    saved = math.fsum(r["cost"]["batch_saved_usd"] for r in records)
    assert summary["totals"]["cost"]["usd"] == pytest.approx(total)
    assert summary["totals"]["batch"] == {
        "requests": 3,
        "tasks": 3,
        "live": 0,
        "saved_usd": pytest.approx(saved),
    }
    assert total + saved == pytest.approx(live[""]["totals"]["cost"]["usd"])
    ctrf = json.loads((_run_dir(pytester) / "ctrf.json").read_text())
    run_extra = ctrf["results"]["environment"]["extra"]["pytest-agentbench.run"]
    assert run_extra["cost"]["usd"] == pytest.approx(total)
    tests = [t["extra"]["pytest-agentbench.rollout"] for t in ctrf["results"]["tests"]]
    assert math.fsum(t["cost"]["usd"] for t in tests) == pytest.approx(total)
    assert [t["batch"] for t in tests] == [1, 1, 1]
    out = result.stdout.str()
    assert f"cost ${total:.4f}" in out
    said = "batch: 3 first-round request(s) of 3 task(s) answered by the provider's batch API"
    assert f"{said} (${saved:.4f} saved)" in out
    markdown = (pytester.path / "s.md").read_text()
    assert f"Cost: ${total:.4f}" in markdown
    assert "Batch: 3 first-round request(s) of 3 task(s)" in markdown
    assert "m: 3 first-round request(s) submitted as " in out
    assert "m: 3/3 done" in out
    # the trajectory marks the batched reply; the run folder names the batch
    trajectory = json.loads((Path(batched["right"]["rollout_dir"]) / "trajectory.json").read_text())
    schemas.validate("trajectory", trajectory)
    assert [e["response"].get("batch") for e in trajectory["requests"]] == [True]
    batches = json.loads((_run_dir(pytester) / "batches.json").read_text())
    schemas.validate("batches", batches)
    assert [b["requests"] for b in batches["batches"]] == [3]


@pytest.mark.slow
def test_under_xdist_one_batch_is_submitted_and_every_worker_replays_it(
    pytester: pytest.Pytester,
) -> None:
    # the batch ends at its 10th status read: both workers are up before it does
    server = ScriptedServer(batch_polls=10)
    server.start()
    pytester.makefile(".toml", bench_k=SUITE)
    pytester.makefile(".toml", prices=PRICES)
    try:
        args = _args(server, "--agentbench-batch", "-n", "2", "--agentbench-batch-poll", "0.1")
        result = pytester.runpytest(*args)
    finally:
        server.stop()
    result.assert_outcomes(passed=3)
    assert server.stats["batches"] == 1 and server.stats["batch_entries"] == 3
    assert _live_turns(server) == [("repaired", 1)]
    records = _records(pytester)
    assert [records[t]["batch"] for t in ("right", "repaired", "thinks")] == [1, 1, 1]
    # both workers ran tasks, and the controller showed the submitting worker's lines
    assert "3 first-round request(s) submitted as batch_" in result.stdout.str()


EXPIRES = """
[suite]
name = "e"
verifier = { kind = "number" }

[[task]]
id = "kept"
input = "1?"
target = 1
scripted = [{ text = "1", usage = { prompt_tokens = 100, completion_tokens = 5 } }]

[[task]]
id = "expires"
input = "2?"
target = 2
scripted = [{ text = "2", batch_expired = true, usage = { prompt_tokens = 100, \
completion_tokens = 5 } }]

[[task]]
id = "errs"
input = "3?"
target = 3
scripted = [{ text = "3", error = { status = 500, message = "overloaded", times = 1 } }]
"""


def test_an_entry_the_batch_did_not_answer_goes_live_and_says_why(
    pytester: pytest.Pytester, server: ScriptedServer
) -> None:
    pytester.makefile(".toml", bench_e=EXPIRES)
    pytester.makefile(".toml", prices=PRICES)
    result = pytester.runpytest(*_args(server, "--agentbench-batch"))
    result.assert_outcomes(passed=3)
    records = _records(pytester)
    assert records["kept"]["batch"] == 1 and "batch_live" not in records["kept"]
    assert "batch" not in records["expires"]
    assert records["expires"]["batch_live"] == "the batch did not answer it: expired"
    assert records["errs"]["batch_live"].startswith("the batch did not answer it: errored")
    assert _live_turns(server) == [("errs", 0), ("expires", 0)]
    # the live one is paid at the live price
    assert records["expires"]["cost"]["usd"] == pytest.approx((100 * 2 + 5 * 8) / 1e6)
    assert records[""]["totals"]["batch"]["live"] == 2
    assert "2 planned request(s) sent live" in result.stdout.str()


def test_the_response_cache_answers_first_and_keeps_batched_replies(
    pytester: pytest.Pytester, server: ScriptedServer
) -> None:
    pytester.makefile(".toml", bench_k=SUITE)
    pytester.makefile(".toml", prices=PRICES)
    args = _args(server, "--agentbench-batch", "--agentbench-cache", "cache")
    pytester.runpytest(*args).assert_outcomes(passed=3)
    assert server.stats["batch_entries"] == 3
    # batched replies are recorded in the cache like live ones (3 batched + the repair)
    assert len(list((pytester.path / "cache").glob("*/*.json"))) == 4
    sent = server.stats["requests"]
    again = pytester.runpytest(*args)
    again.assert_outcomes(passed=3)
    # the cache answers everything: nothing is batched, nothing is sent
    assert server.stats["batches"] == 1 and server.stats["requests"] == sent
    records = _records(pytester)
    assert all(records[t]["cached"] >= 1 and "batch" not in records[t] for t in ("right", "thinks"))
    assert "agentbench batch:" not in again.stdout.str()


def test_the_cap_reserves_batched_requests_at_the_batch_price(
    pytester: pytest.Pytester, server: ScriptedServer
) -> None:
    pytester.makefile(".toml", bench_k=SUITE)
    pytester.makefile(".toml", prices=PRICES)
    # worst case of one first request at the batch price: (prompt/3 chars * 1 + 16384 * 4)
    # per million, about $0.0655; two fit under $0.14, the third does not
    result = pytester.runpytest(
        *_args(server, "--agentbench-batch", "--agentbench-max-cost", "0.14")
    )
    assert server.stats["batch_entries"] == 2  # "thinks" was not submitted
    # it met the cap live and was not run; so did the repair of "repaired": once the cap
    # refused a reservation nothing more is sent (as without a batch)
    result.assert_outcomes(passed=1, skipped=2)
    assert _live_turns(server) == []
    summary = _records(pytester)[""]
    assert summary["budget"]["stopped"] is True and summary["budget"]["not_run"] == 2
    # what was spent is the batched answers at the batch price, not their worst cases
    right = summary["tasks"][0]
    assert right["task_id"] == "right" and right["batch"] == 1
    assert summary["budget"]["spent_usd"] == pytest.approx((2000 * 1 + 50 * 4) * 2 / 1e6)
    assert "batch:" in result.stdout.str()


def test_a_provider_without_a_batch_api_is_refused_at_the_start(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".toml", bench_k=SUITE)
    result = pytester.runpytest(
        "--agentbench",
        "-p",
        "no:cacheprovider",
        "--agentbench-model",
        "openai-compat/qwen",
        "--agentbench-base-url",
        "http://127.0.0.1:9/v1",
        "--agentbench-batch",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stderr.str() + result.stdout.str()
    assert "--agentbench-batch: no batch API for openai-compat/qwen" in text
    assert "no tests ran" in text or "passed" not in text


@pytest.mark.slow
def test_resume_after_an_interrupt_fetches_the_batch_instead_of_paying_again(
    pytester: pytest.Pytester,
) -> None:
    # a batch that ends at its 30th status read: the first run is interrupted before
    served = ScriptedServer(batch_polls=30)
    served.start()
    try:
        pytester.makefile(".toml", bench_k=SUITE)
        pytester.makefile(".toml", prices=PRICES)
        args = [sys.executable, "-m", "pytest", *_args(served, "--agentbench-batch")]
        args += ["--agentbench-batch-poll", "0.05"]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        first = subprocess.Popen(
            args, cwd=pytester.path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        results = pytester.path / "agentbench-results"
        for _ in range(600):  # the batch ids are written before the wait
            if list(results.glob("*/batches.json")) or first.poll() is not None:
                break
            time.sleep(0.05)
        first.send_signal(signal.SIGINT)
        out = first.communicate(timeout=60)[0].decode()
        assert "keep(s) running at the provider" in out, out
        assert served.stats["batches"] == 1 and served.stats["batch_entries"] == 0
        run_dir = next(results.glob("*/batches.json")).parent

        resumed = pytester.runpytest(
            *_args(served, "--agentbench-batch", "--agentbench-batch-poll", "0.05"),
            "--agentbench-resume",
            str(run_dir),
        )
        resumed.assert_outcomes(passed=3)
        assert served.stats["batches"] == 1  # fetched, not submitted again
        assert served.stats["batch_entries"] == 3
        assert _live_turns(served) == [("repaired", 1)]
        assert "fetching the earlier batch(es)" in resumed.stdout.str()
    finally:
        served.stop()


DRY = """
[suite]
name = "d"
verifier = { kind = "number" }
max_tokens = 100

[[task]]
id = "six"
input = "What is 6 times 7?"
target = 42
"""


@pytest.mark.parametrize(
    ("entry", "batch", "share"),
    [
        ("", False, (1.0, 1.0)),
        ("", True, (0.5, 0.5)),  # --agentbench-batch: half of each price
        ("batch = 0.25", True, (0.25, 0.25)),  # the price file's own batch share
        ("batch = { input = 100, output = 400 }", True, (0.1, 0.1)),  # its own prices
    ],
)
def test_the_dry_run_prices_first_round_requests_at_the_batch_price(
    pytester: pytest.Pytester, entry: str, batch: bool, share: tuple[float, float]
) -> None:
    pytester.makefile(".toml", bench_d=DRY)
    pytester.makefile(".toml", prices=f"[models.scripted]\ninput = 1000\noutput = 4000\n{entry}\n")
    args = ["--agentbench", "-p", "no:cacheprovider", "--agentbench-prices", "prices.toml"]
    args += ["--agentbench-dry-run", *(["--agentbench-batch"] if batch else [])]
    result = pytester.runpytest(*args)
    assert result.ret == 0
    line = next(x for x in result.stdout.lines if x.startswith("whole run:"))
    low, high = (float(v) for v in re.findall(r"\$([0-9.]+)", line))
    # 18 characters: low at 5 a token and the input price, high at 3 a token and the
    # output price for max_tokens (shown rounded outward to 1/100 cent)
    assert low == pytest.approx(18 / 5 * 1000 * share[0] / 1e6, abs=1e-4)
    assert high == pytest.approx((18 / 3 * 1000 * share[0] + 100 * 4000 * share[1]) / 1e6, abs=1e-4)


AGENT = """
[suite]
name = "ag"
mode = "agent"
verifier = { kind = "includes" }
max_turns = 3

[[task]]
id = "look"
input = "What number is in n.txt?"
target = "7"
files = { "n.txt" = "7" }
scripted = [
  { tool_calls = [{ name = "read_file", arguments = { path = "n.txt" } }], \
usage = { prompt_tokens = 900, completion_tokens = 30 } },
  { text = "It is 7.", usage = { prompt_tokens = 1000, completion_tokens = 10 } },
]
"""


@pytest.mark.slow
def test_an_agent_tasks_first_turn_is_batched_and_its_later_turns_go_live(
    pytester: pytest.Pytester, server: ScriptedServer
) -> None:
    pytester.makefile(".toml", bench_ag=AGENT)
    pytester.makefile(".toml", prices=PRICES)
    pytester.runpytest(*_args(server)).assert_outcomes(passed=1)
    live = _records(pytester)["look"]
    logged = len(server.requests)
    pytester.runpytest(*_args(server, "--agentbench-batch")).assert_outcomes(passed=1)
    assert server.stats["batch_entries"] == 1
    assert _live_turns(server, logged) == [("look", 1)]  # the second turn, live
    record = _records(pytester)["look"]
    assert record["batch"] == 1
    assert {k: v for k, v in record.items() if k not in MARKS} == {
        k: v for k, v in live.items() if k not in MARKS
    }
    assert record["cost"]["batch_saved_usd"] == pytest.approx((900 * 2 + 30 * 8) / 2e6)


def test_past_the_longest_wait_the_batch_is_canceled_and_its_requests_go_live(
    pytester: pytest.Pytester,
) -> None:
    server = ScriptedServer(batch_polls=10_000)  # a batch that does not end by itself
    server.start()
    try:
        pytester.makefile(".toml", bench_k=SUITE)
        pytester.makefile(".toml", prices=PRICES)
        args = ["--agentbench-batch-poll", "0.05", "--agentbench-batch-wait", "0.3"]
        result = pytester.runpytest(*_args(server, "--agentbench-batch", *args))
    finally:
        server.stop()
    result.assert_outcomes(passed=3)
    assert server.stats["batches"] == 1 and server.stats["batch_entries"] == 0
    assert _live_turns(server) == [("repaired", 0), ("repaired", 1), ("right", 0), ("thinks", 0)]
    records = _records(pytester)
    for task in ("right", "repaired", "thinks"):
        assert "batch" not in records[task]
        assert records[task]["batch_live"].startswith("the batch did not answer it: timed out")
    assert "0 of 3 answered by the batch; 3 go live" in result.stdout.str()


def test_resume_plans_only_the_tasks_not_done_and_fetches_their_earlier_answers(
    pytester: pytest.Pytester, server: ScriptedServer
) -> None:
    pytester.makefile(".toml", bench_k=SUITE)
    pytester.makefile(".toml", prices=PRICES)
    pytester.runpytest(*_args(server, "--agentbench-batch")).assert_outcomes(passed=3)
    run = _run_dir(pytester)
    (run / "tasks" / "k" / "right[scripted]" / "result.json").unlink()  # as if never done
    logged = len(server.requests)
    again = pytester.runpytest(
        *_args(server, "--agentbench-batch", "--agentbench-resume", "latest")
    )
    again.assert_outcomes(passed=3)
    # the earlier batch holds the one request to run: fetched again, nothing submitted
    assert server.stats["batches"] == 1 and server.stats["batch_entries"] == 3
    assert _live_turns(server, logged) == []
    assert "scripted: fetching the earlier batch(es) batch_" in again.stdout.str()
    assert "scripted: 1 of 1 answered by the batch" in again.stdout.str()
    records = _records(pytester)
    assert records["right"]["batch"] == 1 and not records["right"].get("resumed")
    assert records["thinks"]["resumed"] is True


def test_an_earlier_batch_that_cannot_be_read_sends_its_requests_live(
    pytester: pytest.Pytester, server: ScriptedServer
) -> None:
    pytester.makefile(".toml", bench_k=SUITE)
    pytester.makefile(".toml", prices=PRICES)
    pytester.runpytest(*_args(server, "--agentbench-batch")).assert_outcomes(passed=3)
    run = _run_dir(pytester)
    (run / "tasks" / "k" / "right[scripted]" / "result.json").unlink()
    listed = json.loads((run / "batches.json").read_text())
    listed["batches"][0]["ids"] = ["batch_gone"]  # the provider no longer has it
    (run / "batches.json").write_text(json.dumps(listed))
    logged = len(server.requests)
    again = pytester.runpytest(
        *_args(server, "--agentbench-batch", "--agentbench-resume", "latest")
    )
    again.assert_outcomes(passed=3)
    assert server.stats["batches"] == 1  # nothing submitted again: it goes live
    assert _live_turns(server, logged) == [("right", 0)]
    right = _records(pytester)["right"]
    assert right["batch_live"].startswith("the batch could not be read: ")
    assert "batch_gone could not be read, its requests go live" in again.stdout.str()


def test_a_batches_file_that_cannot_be_read_is_said_and_kept_aside(
    pytester: pytest.Pytester, server: ScriptedServer
) -> None:
    """A broken batches.json on resume: said (its path and why), moved aside rather
    than overwritten (the ids it held were paid for), and the request submitted again."""
    pytester.makefile(".toml", bench_k=SUITE)
    pytester.makefile(".toml", prices=PRICES)
    pytester.runpytest(*_args(server, "--agentbench-batch")).assert_outcomes(passed=3)
    run = _run_dir(pytester)
    (run / "tasks" / "k" / "right[scripted]" / "result.json").unlink()
    (run / "batches.json").write_text('{"batches": [')
    again = pytester.runpytest(
        *_args(server, "--agentbench-batch", "--agentbench-resume", "latest")
    )
    again.assert_outcomes(passed=3)
    out = again.stdout.str()
    assert f"{run / 'batches.json'} cannot be read" in out
    assert (run / "batches.json.unreadable").read_text() == '{"batches": ['
    assert server.stats["batches"] == 2  # submitted again, as said
    assert json.loads((run / "batches.json").read_text())["batches"][0]["requests"] == 1
