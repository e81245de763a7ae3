"""Sampling settings: each protocol's own fields on the wire (read from the scripted
server's request log, over real sockets), refusals before anything is sent, the order of
precedence (task > suite > command line > ini), and the stamp in every record, summary.json,
ctrf.json and the fingerprint."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.config.resolve import resolve_settings
from pytest_agentbench.core.sampling import Sampling
from pytest_agentbench.errors import AgentbenchError
from pytest_agentbench.models.anthropic import AnthropicClient
from pytest_agentbench.models.base import ModelClient, ModelRequest, ModelSpec
from pytest_agentbench.models.openai_chat import OpenAIChatClient
from pytest_agentbench.models.openai_responses import OpenAIResponsesClient
from pytest_agentbench.scripted import ScriptedServer

#: What each protocol's body holds whatever the sampling settings say.
BASE_KEYS = {
    "chat": {"model", "messages", "stream", "stream_options"},
    "responses": {"model", "input", "stream", "store"},
    "anthropic": {"model", "messages", "stream", "max_tokens"},
}

#: Every setting a protocol has a field for, and the body it must give.
ALL_SET = {
    "chat": (
        {
            "temperature": 0.0,
            "top_p": 0.5,
            "seed": 11,
            "stop": ["END", "STOP"],
            "reasoning_effort": "low",
            "extra_body": {"min_p": 0.1},
        },
        {
            "temperature": 0.0,
            "top_p": 0.5,
            "seed": 11,
            "stop": ["END", "STOP"],
            "reasoning_effort": "low",
            "min_p": 0.1,
        },
    ),
    "responses": (
        {"temperature": 0.25, "top_p": 0.5, "reasoning_effort": "high", "extra_body": {"a": 1}},
        {"temperature": 0.25, "top_p": 0.5, "reasoning": {"effort": "high"}, "a": 1},
    ),
    "anthropic": (
        {
            "temperature": 1.0,
            "top_p": 0.5,
            "top_k": 40,
            "stop": "END",
            "thinking_budget": 2048,
            "extra_body": {"metadata": {"user_id": "u"}},
        },
        {
            "temperature": 1.0,
            "top_p": 0.5,
            "top_k": 40,
            "stop_sequences": ["END"],
            "thinking": {"type": "enabled", "budget_tokens": 2048},
            "metadata": {"user_id": "u"},
        },
    ),
}


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer({"m": ["hello"]}) as running:
        yield running


def client(protocol: str, server: ScriptedServer) -> ModelClient:
    if protocol == "chat":
        return OpenAIChatClient(ModelSpec("openai-compat", "m"), server.url, "k", trust_env=False)
    if protocol == "responses":
        spec = ModelSpec("openai-responses", "m")
        return OpenAIResponsesClient(spec, server.url, "k", trust_env=False)
    return AnthropicClient(ModelSpec("anthropic", "m"), server.url, "k", trust_env=False)


def sent_body(protocol: str, server: ScriptedServer, sampling: Sampling) -> dict[str, Any]:
    model = client(protocol, server)
    try:
        request = ModelRequest(({"role": "user", "content": "hi"},), sampling=sampling)
        assert model.generate(request).text == "hello"
    finally:
        model.close()
    body: dict[str, Any] = server.requests[-1]["body"]
    return body


@pytest.mark.parametrize("protocol", ["chat", "responses", "anthropic"])
def test_the_request_log_shows_exactly_the_fields_set(
    server: ScriptedServer, protocol: str
) -> None:
    settings, expected = ALL_SET[protocol]
    body = sent_body(protocol, server, Sampling.parse(settings))
    extra = {key: body[key] for key in body if key not in BASE_KEYS[protocol]}
    assert extra == expected


@pytest.mark.parametrize("protocol", ["chat", "responses", "anthropic"])
def test_nothing_is_sent_when_nothing_is_set(server: ScriptedServer, protocol: str) -> None:
    body = sent_body(protocol, server, Sampling())
    assert set(body) == BASE_KEYS[protocol]


def test_anthropic_default_limit_leaves_room_for_the_thinking_budget(
    server: ScriptedServer,
) -> None:
    body = sent_body("anthropic", server, Sampling(thinking_budget=8000))
    assert body["max_tokens"] > 8000


def resolve(cli: dict[str, Any], ini: dict[str, Any] | None = None) -> Any:
    ini = ini or {}
    return resolve_settings(lambda n: cli.get(n), lambda n: ini.get(n, ""), {})


@pytest.mark.parametrize(
    ("cli", "message"),
    [
        (
            {"agentbench_temperature": -1.0},
            "--agentbench-temperature / agentbench_temperature: expected a number from 0 to 2, "
            "got -1.0",
        ),
        (
            {"agentbench_top_k": 5},
            "--agentbench-top-k / agentbench_top_k: Chat Completions has no top_k field",
        ),
        (
            {"agentbench_model": "openai-responses/x", "agentbench_sampling_seed": 1},
            "agentbench_sampling_seed: the Responses API has no seed field (the model "
            "openai-responses/x speaks the Responses API)",
        ),
        (
            {"agentbench_model": "anthropic/x", "agentbench_reasoning_effort": "low"},
            "agentbench_reasoning_effort: the Anthropic Messages API takes a thinking budget",
        ),
        (
            {"agentbench_model": "anthropic/x", "agentbench_temperature": 1.5},
            "temperature: the Anthropic Messages API takes 0 to 1, got 1.5",
        ),
        (
            {"agentbench_extra_body": '{"model": "other"}'},
            "extra_body: may not set model: the harness sends those",
        ),
        ({"agentbench_extra_body": "[1"}, "extra_body: expected a JSON object"),
    ],
)
def test_bad_or_unsendable_settings_are_refused_at_start(cli: dict[str, Any], message: str) -> None:
    with pytest.raises(AgentbenchError) as caught:
        resolve(cli)
    assert message in str(caught.value)


def test_the_command_line_beats_the_ini_file_setting_by_setting() -> None:
    ini = {
        "agentbench_temperature": "0.7",
        "agentbench_sampling_seed": "3",
        "agentbench_stop": ["X"],
    }
    settings = resolve({"agentbench_temperature": 0.0}, ini)
    assert settings.sampling.public() == {"temperature": 0.0, "seed": 3, "stop": ["X"]}
    with pytest.raises(AgentbenchError, match="agentbench_sampling_seed: expected an integer"):
        resolve({}, {"agentbench_sampling_seed": "three"})


def test_the_fingerprint_changes_when_a_setting_changes() -> None:
    plain = resolve({})
    cold = resolve({"agentbench_temperature": 0.0})
    warm = resolve({"agentbench_temperature": 0.5})
    seeded = resolve({"agentbench_temperature": 0.0, "agentbench_sampling_seed": 1})
    prints = {s.fingerprint() for s in (plain, cold, warm, seeded)}
    assert len(prints) == 4
    assert cold.public()["sampling"] == {"temperature": 0.0}


SUITE = """
[suite]
name = "samp"
sampling = {{ temperature = 0.5, seed = 7 }}

[[task]]
id = "own"
input = "a"
target = "hello"
sampling = {{ temperature = 0.0, stop = ["END"] }}

[[task]]
id = "suite"
input = "b"
target = "hello"
{extra}
"""


def run(pytester: pytest.Pytester, server: ScriptedServer, *args: str, extra: str = "") -> Any:
    if not (pytester.path / "bench_samp.toml").exists():
        pytester.makefile(".toml", bench_samp=SUITE.format(extra=extra))
    return pytester.runpytest(
        "--agentbench",
        "--agentbench-model",
        "openai-compat/m",
        "--agentbench-base-url",
        server.url,
        "-p",
        "no:cacheprovider",
        *args,
    )


def test_task_beats_suite_beats_cli_beats_ini_and_every_report_says_what_was_sent(
    pytester: pytest.Pytester, server: ScriptedServer
) -> None:
    pytester.makeini("[pytest]\nagentbench_top_p = 0.25\nagentbench_sampling_seed = 99\n")
    result = run(pytester, server, "--agentbench-temperature", "1.0", "--agentbench-top-p", "0.9")
    result.assert_outcomes(passed=2)
    own = {"temperature": 0.0, "top_p": 0.9, "seed": 7, "stop": ["END"]}
    suite = {"temperature": 0.5, "top_p": 0.9, "seed": 7}
    bodies = {r["body"]["messages"][-1]["content"]: r["body"] for r in server.requests}
    for prompt, want in (("a", own), ("b", suite)):
        sent = {k: v for k, v in bodies[prompt].items() if k not in BASE_KEYS["chat"]}
        assert sent == want
    run_dir = (pytester.path / "agentbench-results" / "latest").resolve()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["settings"]["sampling"] == {"temperature": 1.0, "top_p": 0.9, "seed": 99}
    records = {task["task_id"]: task for task in summary["tasks"]}
    assert records["own"]["sampling"] == own and records["suite"]["sampling"] == suite
    assert summary["scores"][0]["sampling"] == [own, suite]
    ctrf = json.loads((run_dir / "ctrf.json").read_text())
    stamps = [
        test["extra"]["pytest-agentbench.rollout"]["sampling"] for test in ctrf["results"]["tests"]
    ]
    assert stamps == [own, suite]
    result_json = json.loads(
        (run_dir / "tasks" / "samp" / "own[openai-compat_m]" / "result.json").read_text()
    )
    assert result_json["record"]["sampling"] == own


def test_a_setting_the_protocol_cannot_send_is_a_collection_error_where_it_is_written(
    pytester: pytest.Pytester, server: ScriptedServer
) -> None:
    result = run(pytester, server, extra="sampling = { top_k = 5, thinking_budget = 2000 }")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    output = str(result.stdout)
    assert (
        'task 2 ("suite"): $.task[1].sampling.top_k cannot be sent: Chat Completions has no '
        "top_k field" in output
    )
    assert (
        'task 2 ("suite"): $.task[1].sampling.thinking_budget cannot be sent: Chat '
        "Completions has no thinking budget; use reasoning_effort" in output
    )
    assert server.requests == []


def test_a_bad_value_in_a_suite_is_a_collection_error_naming_its_path(
    pytester: pytest.Pytester, server: ScriptedServer
) -> None:
    result = run(
        pytester, server, extra="sampling = { temperature = -1, extra_body = { stream = false } }"
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED
    output = str(result.stdout)
    assert "$.task[1].sampling.temperature must be at least 0; got -1" in output
    assert "$.task[1].sampling.extra_body" in output and "stream" in output
    assert server.requests == []


def test_a_resumed_task_whose_suite_sampling_changed_runs_again(
    pytester: pytest.Pytester, server: ScriptedServer
) -> None:
    run(pytester, server).assert_outcomes(passed=2)
    assert len(server.requests) == 2
    path = Path(pytester.path / "bench_samp.toml")
    path.write_text(path.read_text().replace("temperature = 0.5", "temperature = 0.6"))
    run(pytester, server, "--agentbench-resume").assert_outcomes(passed=2)
    # "own" sets its own temperature (unchanged, resumed); "suite" took the suite's: re-sent
    assert [r["body"]["messages"][-1]["content"] for r in server.requests[2:]] == ["b"]


AGENT_SUITE = """
[suite]
name = "agent-samp"
mode = "agent"
timeout_s = 60
sampling = { temperature = 0.3, seed = 5 }

[[task]]
id = "touch"
input = "Make ok.txt."
verifier = { kind = "command", run = "test -f ok.txt" }
scripted = [
  { tool_calls = [{ name = "bash", arguments = { command = "touch ok.txt" } }] },
  "done",
]
"""


def test_every_call_of_an_agent_loop_carries_the_settings(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_agent_samp=AGENT_SUITE)
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    run_dir = (pytester.path / "agentbench-results" / "latest").resolve()
    task = run_dir / "tasks" / "agent-samp" / "touch[scripted]"
    calls = json.loads((task / "trajectory.json").read_text())["requests"][:-1]
    bodies = [call["request"]["body"] for call in calls]
    assert len(bodies) == 2
    for body in bodies:
        assert (body["temperature"], body["seed"]) == (0.3, 5)
        assert set(body) - BASE_KEYS["chat"] == {"temperature", "seed", "tools"}
    assert json.loads((task / "result.json").read_text())["record"]["sampling"] == {
        "temperature": 0.3,
        "seed": 5,
    }
