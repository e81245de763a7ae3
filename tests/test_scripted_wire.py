"""Wire details of the scripted provider that a client can see: script keys in headers,
the shapes of streams, errors and usage per protocol, and request checks the real APIs
make. Driven over real loopback sockets."""

from __future__ import annotations

import json
from collections.abc import Iterator
from urllib.parse import quote

import httpx
import pytest

from pytest_agentbench.scripted import ScriptedServer


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10, trust_env=False) as client:
        yield client


CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
MESSAGES = {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}


# --- script keys: any Unicode, percent-encoded in the header -------------------------

UNICODE_SUITE = """
[suite]
verifier = { kind = "exact" }

[[task]]
id = "äpfel-日本"
input = "hi"
target = "ok"
scripted = ["wrong", "ok"]
repairs = 1
"""


def test_non_ascii_suite_path_and_task_id_run_end_to_end(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", **{"bench_grüße": UNICODE_SUITE})
    result = pytester.runpytest_inprocess("--agentbench", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    latest = (pytester.path / "agentbench-results" / "latest").resolve()
    (record,) = latest.glob("tasks/*/*/result.json")
    data = json.loads(record.read_text(encoding="utf-8"))
    assert data["outcome"] == "passed" and len(data["attempts"]) == 2


def test_percent_encoded_script_header_picks_the_unicode_script(server, http):
    server.add_scripts({"bench_ü.toml::日本": ["unicode"], "plain%41": ["literal"]})
    for key, text in (("bench_ü.toml::日本", "unicode"), ("plain%41", "literal")):
        headers = {"x-agentbench-script": quote(key, safe=""), "x-agentbench-turn": "0"}
        response = http.post(f"{server.url}/chat/completions", json=CHAT, headers=headers)
        assert response.status_code == 200, response.text
        assert response.json()["choices"][0]["message"]["content"] == text
    assert server.requests[0]["key"] == "bench_ü.toml::日本"


def test_a_script_header_that_is_not_utf8_is_a_clear_400(server, http):
    server.add_scripts({"k": ["x"]})
    response = http.post(
        f"{server.url}/chat/completions", json=CHAT, headers={"x-agentbench-script": "%ff%fe"}
    )
    assert response.status_code == 400
    assert "percent-encoded UTF-8" in response.json()["error"]["message"]
