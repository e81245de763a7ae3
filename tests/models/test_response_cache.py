"""The response cache (--agentbench-cache, docs/cost.md): a cached rerun gives the same
records apart from timings and the cached flag, sends zero requests (the scripted
server's own request count proves it) and costs 0; a corrupt entry is a miss with a
warning; entries hold no key; the cache command reports and prunes."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from pytest_agentbench.__main__ import main
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
scripted = [{ text = "3", thinking = "one two three" }]
"""
PRICES = "[models.scripted]\ninput = 2\noutput = 8\n"
#: what changes from one run of a task to the next, cached or not
TIMINGS = (
    "start_ms",
    "duration_ms",
    "rollout_dir",
    "verifier_dir",
    "cached",
    "cost",
    "waited_s",
)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    served = ScriptedServer()
    served.start()
    try:
        yield served
    finally:
        served.stop()


def _requests(server: ScriptedServer) -> int:
    stats = httpx.get(f"{server.url.rstrip('/')}/_agentbench/stats").json()
    count: int = stats["requests"]
    return count


def _records(pytester: pytest.Pytester) -> dict[str, dict[str, Any]]:
    run = (pytester.path / "agentbench-results" / "latest").resolve()
    summary = json.loads((run / "summary.json").read_text())
    return {r["task_id"]: r for r in summary["tasks"]} | {"": summary}


def test_a_cached_rerun_sends_nothing_costs_nothing_and_records_the_same(
    pytester: pytest.Pytester, server: ScriptedServer
) -> None:
    pytester.makefile(".toml", bench_k=SUITE)
    pytester.makefile(".toml", prices=PRICES)
    args = ["--agentbench", "-p", "no:cacheprovider", "--agentbench-prices", "prices.toml"]
    args += ["--agentbench-base-url", server.url, "--agentbench-cache", "cache"]
    first = pytester.runpytest(*args)
    first.assert_outcomes(passed=3)
    sent = _requests(server)
    assert sent == 4  # one per attempt: the repaired task asked twice
    live = _records(pytester)
    entries = list((pytester.path / "cache").glob("*/*.json"))
    assert len(entries) == 4
    for entry in entries:  # no key, no header: only the reply and where it came from
        text = entry.read_text()
        assert "authorization" not in text.lower() and "x-api-key" not in text.lower()

    second = pytester.runpytest(*args)
    second.assert_outcomes(passed=3)
    assert _requests(server) == sent  # zero requests: every call was replayed
    cached = _records(pytester)
    assert "cache: 4 model call(s) of 3 task(s) replayed, not sent" in second.stdout.str()
    for task in ("right", "repaired", "thinks"):
        before, after = live[task], cached[task]
        assert "cached" not in before
        assert after["cached"] == before["attempts"]
        strip = {k: v for k, v in before.items() if k not in TIMINGS}
        assert {k: v for k, v in after.items() if k not in TIMINGS} == strip
        assert after["cost"]["usd"] == 0
        assert after["cost"]["saved_usd"] == pytest.approx(before["cost"]["usd"])
    totals = cached[""]["totals"]
    assert totals["cost"]["usd"] == 0
    assert totals["cache"] == {
        "hits": 4,
        "tasks": 3,
        "saved_usd": pytest.approx(live[""]["totals"]["cost"]["usd"]),
    }
    # the trajectory says which replies were replayed
    trajectory = Path(cached["right"]["rollout_dir"]) / "trajectory.json"
    assert '"cached":true' in trajectory.read_text()

    # read mode: a changed task is a miss, sent, and not recorded
    pytester.makefile(".toml", bench_k=SUITE.replace("1?", "one?"))
    third = pytester.runpytest(*args, "--agentbench-cache-mode", "read")
    third.assert_outcomes(passed=3)
    assert _requests(server) == sent + 1
    assert len(list((pytester.path / "cache").glob("*/*.json"))) == 4


def test_epochs_are_distinct_samples_and_a_corrupt_entry_is_a_miss(
    pytester: pytest.Pytester, server: ScriptedServer
) -> None:
    """Through the OpenAI-compatible client (no script or turn header: the request body
    alone names the model), the two epochs of a task send identical bodies: only the
    epoch in the key keeps them two samples."""
    httpx.post(f"{server.url.rstrip('/')}/_agentbench/scripts", json={"scripts": {"m": ["1"]}})
    pytester.makefile(".toml", bench_k=SUITE)
    args = ["--agentbench", "-p", "no:cacheprovider", "--agentbench-base-url", server.url]
    args += ["--agentbench-model", "openai-compat/m", "--agentbench-concurrency", "1"]
    args += ["--agentbench-cache", "cache", "--agentbench-epochs", "2", "-k", "right"]
    pytester.runpytest(*args).assert_outcomes(passed=2)
    entries = sorted((pytester.path / "cache").glob("*/*.json"))
    assert len(entries) == 2  # epoch 1 and epoch 2: two keys
    assert _requests(server) == 2
    entries[0].write_text("{ not json")
    again = pytester.runpytest(*args)
    again.assert_outcomes(passed=2)
    assert _requests(server) == 3  # the corrupt one was sent again, the other replayed
    assert "cannot be read" in again.stdout.str()  # the warning, in pytest's summary
    json.loads(entries[0].read_text())  # and recorded anew


def test_the_cache_command_reports_and_prunes(tmp_path: Path, capsys: Any) -> None:
    folder = tmp_path / "cache"
    for index in range(4):
        path = folder / f"{index:02d}" / f"{index:02d}{'0' * 62}.json"
        path.parent.mkdir(parents=True)
        path.write_text("x" * 1000)
        age = time.time() - (4 - index) * 86400
        os.utime(path, (age, age))
    assert main(["cache", str(folder)]) == 0
    assert "4 entries" in capsys.readouterr().out
    assert main(["cache", str(folder), "--max-age-days", "2.5"]) == 0
    assert "removed 2" in capsys.readouterr().out
    assert main(["cache", str(folder), "--max-size-mb", "0.0015"]) == 0
    assert "removed 1" in capsys.readouterr().out
    assert len(list(folder.glob("*/*.json"))) == 1
    assert main(["cache", str(tmp_path / "none")]) == 2


class ServedCount:
    """Reads the run's own embedded scripted server's request count as the session ends
    (the server stops after it): what the plain offline default sent."""

    def __init__(self) -> None:
        self.requests: int | None = None

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        from pytest_agentbench.session.stash import STATE_KEY

        server = session.config.stash[STATE_KEY].services.server
        assert server is not None
        self.requests = server.stats["requests"]


def test_a_cached_rerun_of_the_plain_offline_default_sends_nothing(
    pytester: pytest.Pytester,
) -> None:
    """No --agentbench-base-url: each run starts its scripted server on a new port, and the
    key names the protocol path and the script, not the port, so the rerun replays
    everything. An edited script is a new key: that task is sent again, never replayed
    stale."""
    pytester.makefile(".toml", bench_k=SUITE)
    args = ["--agentbench", "-p", "no:cacheprovider", "--agentbench-cache", "cache"]
    urls = []
    for expected in (4, 0):
        count = ServedCount()
        result = pytester.runpytest(*args, plugins=[count])
        result.assert_outcomes(passed=3)
        assert count.requests == expected
        urls.append(_records(pytester)[""]["settings"]["base_url"])
    assert urls[0] != urls[1]  # two servers, two ports
    assert all(r["cached"] == r["attempts"] for r in _records(pytester)[""]["tasks"])

    # the "thinks" task's script now thinks something else: same task key, same turn,
    # same request body, another script: sent, and the others still replayed
    pytester.makefile(".toml", bench_k=SUITE.replace("one two three", "three two one"))
    count = ServedCount()
    pytester.runpytest(*args, plugins=[count]).assert_outcomes(passed=3)
    assert count.requests == 1
    records = _records(pytester)
    assert "cached" not in records["thinks"]
    assert records["right"]["cached"] == 1 and records["repaired"]["cached"] == 2


PAIR = """
[suite]
name = "pair"
verifier = { kind = "exact" }

[[task]]
id = "apples"
input = "3 + 4?"
target = "7"
scripted = [{ text = "7", usage = { prompt_tokens = 1000, completion_tokens = 10 } }]
scripted_by_model = { candidate = [\
{ text = "8", usage = { prompt_tokens = 1000, completion_tokens = 10 } }] }

[[task]]
id = "pears"
input = "2 + 2?"
target = "4"
scripted = [{ text = "4", usage = { prompt_tokens = 1000, completion_tokens = 10 } }]
"""


def test_a_against_b_on_every_pull_request_pays_for_b_only(pytester: pytest.Pytester) -> None:
    """The baseline model's requests are the same on every pull request: the second
    pull request's run replays them from the cache and sends (and pays for) only the
    candidate's, which changed."""
    pytester.makefile(".toml", bench_pair=PAIR)
    models = "\n    base = scripted price_in=2 price_out=8\n    candidate = scripted {}"
    args = ["--agentbench", "-p", "no:cacheprovider", "--agentbench-cache", "cache"]
    sent = []
    for candidate in (
        "temperature=0.2 price_in=2 price_out=8",
        "temperature=0.7 price_in=2 price_out=8",
    ):
        pytester.makeini("[pytest]\nagentbench_models =" + models.format(candidate) + "\n")
        count = ServedCount()
        result = pytester.runpytest(*args, plugins=[count])
        result.assert_outcomes(passed=3, failed=1)
        sent.append(count.requests)
    assert sent == [4, 2]  # the first pull request pays for both, the next for B only
    summary = _records(pytester)[""]
    by_model: dict[str, list[dict[str, Any]]] = {}
    for record in summary["tasks"]:
        by_model.setdefault(record["model"], []).append(record)
    assert all(r["cached"] == 1 and r["cost"]["usd"] == 0 for r in by_model["base"])
    assert all(r["cost"]["saved_usd"] > 0 for r in by_model["base"])
    assert all("cached" not in r and r["cost"]["usd"] > 0 for r in by_model["candidate"])
    paid = sum(r["cost"]["usd"] for r in by_model["candidate"])
    assert summary["totals"]["cost"]["usd"] == pytest.approx(paid)
