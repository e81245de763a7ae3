"""A real backend receives a run's spans (docs/interchange.md): Arize Phoenix, started
here on 127.0.0.1, gets a two-model run of the example stand-in command agent over
``--agentbench-otlp`` (OTLP/HTTP protobuf), and its own REST API returns the spans with
their attributes and counts.

Phoenix is not a dependency of ours: it is looked for in the Python that
``AGENTBENCH_PHOENIX_PYTHON`` names, else ``/work/venvs/phoenix/bin/python``, else the
venv ``.ci/run`` installs it into (``~/.cache/pytest-agentbench-phoenix``); the test is
skipped, saying so, where none has it."""

from __future__ import annotations

import json
import os
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from otlp_backend_support import backend_python, free_port, serving, two_model_agent_run

CANDIDATES = (
    os.environ.get("AGENTBENCH_PHOENIX_PYTHON", ""),
    "/work/venvs/phoenix/bin/python",
    str(Path.home() / ".cache" / "pytest-agentbench-phoenix" / "bin" / "python"),
)


@pytest.fixture
def phoenix(tmp_path: Path) -> Iterator[str]:
    python = backend_python(CANDIDATES, "phoenix")
    if python is None:
        pytest.skip(
            "Arize Phoenix is not installed (set AGENTBENCH_PHOENIX_PYTHON to a Python that "
            "has arize-phoenix; .ci/run installs one into ~/.cache/pytest-agentbench-phoenix)"
        )
    port = free_port()
    env = {
        **os.environ,
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(free_port()),
        "PHOENIX_WORKING_DIR": str(tmp_path / "phoenix"),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    url = f"http://127.0.0.1:{port}"
    command = [str(python.parent / "phoenix"), "serve"]
    with serving(command, env, f"{url}/healthz", tmp_path / "phoenix.log", "Phoenix"):
        yield url


def _get(url: str) -> object:
    with urllib.request.urlopen(url, timeout=10) as reply:
        return json.loads(reply.read())


def _flat(attrs: object, prefix: str = "") -> dict[str, object]:
    """Phoenix returns dotted attribute names nested; flattened back here."""
    if not isinstance(attrs, dict):
        return {prefix[:-1]: attrs}
    out: dict[str, object] = {}
    for key, value in attrs.items():
        out.update(
            _flat(value, f"{prefix}{key}.")
            if isinstance(value, dict)
            else {f"{prefix}{key}": value}
        )
    return out


def test_phoenix_receives_a_two_model_external_agent_run(
    phoenix: str, pytester: pytest.Pytester
) -> None:
    result = two_model_agent_run(pytester, phoenix)
    result.stdout.fnmatch_lines([f"agentbench otlp: 13 span(s) sent to {phoenix}/v1/traces"])
    spans: list[dict[str, object]] = []
    deadline = time.monotonic() + 60  # Phoenix writes what it received in the background
    while len(spans) < 13 and time.monotonic() < deadline:
        time.sleep(1)
        found = _get(f"{phoenix}/v1/projects/default/spans?limit=1000")
        spans = found["data"]  # type: ignore[index]
    assert len(spans) == 13
    assert len({s["context"]["trace_id"] for s in spans}) == 1  # type: ignore[index]
    named: dict[str, list[dict[str, object]]] = {}
    for s in spans:
        named.setdefault(str(s["name"]).split(" ")[0], []).append(s)
    assert {k: len(v) for k, v in named.items()} == {
        "agentbench.run": 1,
        "agentbench.task": 4,
        "chat": 8,
    }
    tasks = {
        (a["agentbench.task_id"], a["agentbench.model"]): a
        for a in (_flat(t["attributes"]) for t in named["agentbench.task"])
    }
    assert set(tasks) == {
        (t, m) for t in ("write-greeting", "stuck-agent") for m in ("big", "small")
    }
    assert tasks[("write-greeting", "big")]["agentbench.outcome"] == "passed"
    assert tasks[("write-greeting", "big")]["agentbench.reward"] == 1.0
    assert tasks[("stuck-agent", "small")]["agentbench.outcome"] == "loop_killed"
    assert tasks[("write-greeting", "small")]["gen_ai.usage.input_tokens"] == 61
    calls = [_flat(c["attributes"]) for c in named["chat"]]
    assert all(
        c["gen_ai.operation.name"] == "chat" and c["agentbench.protocol"] == "chat" for c in calls
    )
    assert sum(1 for c in calls if c.get("gen_ai.usage.output_tokens") == 13) == 2
    assert {s["span_kind"] for s in named["chat"]} == {"LLM"}
    # the external agent's calls, streamed to the model by the gateway: the time to the
    # first chunk of each that was answered
    answered = [_flat(s["attributes"]) for s in named["chat"] if s["status_code"] != "ERROR"]
    assert len(answered) == 6 and all(
        isinstance(c.get("gen_ai.response.time_to_first_chunk"), float) for c in answered
    )
    killed = [s for s in named["chat"] if s["status_code"] == "ERROR"]
    assert len(killed) == 2 and all(
        e["name"] == "agentbench.loop_killed"
        for s in killed
        for e in s["events"]  # type: ignore[attr-defined]
    )
