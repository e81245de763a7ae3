"""A real MLflow tracking server receives a run's spans (docs/interchange.md): started
here on 127.0.0.1 with a SQLite store (MLflow ingests OTLP/HTTP at ``/v1/traces`` only
with a SQL store), it gets a two-model run of the example stand-in command agent over
``--agentbench-otlp`` with the experiment named in the ``x-mlflow-experiment-id``
header, and MLflow's own client (``MlflowClient.search_traces``, run in MLflow's Python)
returns the spans with their attributes, types and counts.

MLflow is not a dependency of ours: it is looked for in the Python that
``AGENTBENCH_MLFLOW_PYTHON`` names, else the venv ``.ci/install-mlflow`` installs it
into (``~/.cache/pytest-agentbench-mlflow``); the test is skipped, saying so, where
none has it."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from otlp_backend_support import (
    backend_python,
    copy_agent_suite,
    free_port,
    serving,
    two_model_agent_run,
)

CANDIDATES = (
    os.environ.get("AGENTBENCH_MLFLOW_PYTHON", ""),
    str(Path.home() / ".cache" / "pytest-agentbench-mlflow" / "bin" / "python"),
)
#: the spans of an experiment, read with MLflow's client, as JSON lines
READ = """
import json, sys
from mlflow import MlflowClient
for trace in MlflowClient(sys.argv[1]).search_traces(locations=[sys.argv[2]], max_results=100):
    for span in trace.data.spans:
        print(json.dumps({
            "trace": trace.info.trace_id,
            "name": span.name,
            "type": span.span_type,
            "status": span.status.status_code.value,
            "attributes": span.attributes,
            "events": [event.name for event in span.events],
        }, default=str))
"""


@pytest.fixture
def mlflow(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    python = backend_python(CANDIDATES, "mlflow")
    if python is None:
        pytest.skip(
            "MLflow is not installed (set AGENTBENCH_MLFLOW_PYTHON to a Python that has "
            "mlflow; .ci/install-mlflow installs one into ~/.cache/pytest-agentbench-mlflow)"
        )
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [
        str(python.parent / "mlflow"),
        "server",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
        "--backend-store-uri",
        f"sqlite:///{tmp_path / 'mlflow.db'}",
        "--default-artifact-root",
        str(tmp_path / "artifacts"),
    ]
    # no background job runner (scorers, archival): it is not needed to keep traces, and
    # its workers starting up slow the server down on a loaded machine
    env = {**os.environ, "HOME": str(tmp_path), "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    with serving(command, env, f"{url}/health", tmp_path / "mlflow.log", "MLflow"):
        yield python, url


#: a new experiment's id
CREATE = """
import sys
from mlflow import MlflowClient
print(MlflowClient(sys.argv[1]).create_experiment(sys.argv[2]))
"""


def _mlflow(python: Path, script: str, *args: str) -> str:
    done = subprocess.run(
        [str(python), "-c", script, *args], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _spans(python: Path, url: str, experiment: str, want: int) -> list[dict[str, object]]:
    """The experiment's spans once ``want`` are there (MLflow may still be writing what
    it received), or what is there after 60 s."""
    deadline = time.monotonic() + 60
    while True:
        out = _mlflow(python, READ, url, experiment)
        spans = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        if len(spans) >= want or time.monotonic() > deadline:
            return spans
        time.sleep(1)


def _warm_up(python: Path, url: str, pytester: pytest.Pytester) -> None:
    """One task's spans into an experiment of their own, waited for: MLflow's first
    ingestion after it starts does a one-time set-up that took 6-7 s here on a loaded
    machine (a second one of the same spans: 0.15 s), longer than the sender's longest
    per-request timeout (5 s)."""
    warm = _mlflow(python, CREATE, url, "warm-up").strip()
    copy_agent_suite(pytester)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", f"x-mlflow-experiment-id={warm}")
        pytester.runpytest_subprocess(
            "--agentbench",
            "-p",
            "no:cacheprovider",
            "-k",
            "write-greeting",
            "--agentbench-model",
            "scripted",
            "--agentbench-otlp",
            url,
        ).assert_outcomes(passed=1)
    assert len(_spans(python, url, warm, 5)) == 5  # the run, the task, its three calls


def test_mlflow_receives_a_two_model_external_agent_run(
    mlflow: tuple[Path, str], pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    python, url = mlflow
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "5000")
    _warm_up(python, url, pytester)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x-mlflow-experiment-id=0")
    result = two_model_agent_run(pytester, url)
    result.stdout.fnmatch_lines([f"agentbench otlp: 13 span(s) sent to {url}/v1/traces"])
    spans = _spans(python, url, "0", 13)
    assert len(spans) == 13
    assert len({s["trace"] for s in spans}) == 1
    named: dict[str, list[dict[str, object]]] = {}
    for s in spans:
        named.setdefault(str(s["name"]).split(" ")[0], []).append(s)
    assert {k: len(v) for k, v in named.items()} == {
        "agentbench.run": 1,
        "agentbench.task": 4,
        "chat": 8,
    }
    # MLflow's span types come from OpenInference's span kinds
    assert [s["type"] for s in named["agentbench.run"]] == ["CHAIN"]
    assert {s["type"] for s in named["agentbench.task"]} == {"AGENT"}
    assert {s["type"] for s in named["chat"]} == {"LLM"}
    tasks = {
        (a["agentbench.task_id"], a["agentbench.model"]): a
        for a in (dict(t["attributes"]) for t in named["agentbench.task"])  # type: ignore[call-overload]
    }
    assert set(tasks) == {
        (t, m) for t in ("write-greeting", "stuck-agent") for m in ("big", "small")
    }
    greeting = tasks[("write-greeting", "big")]
    assert greeting["agentbench.outcome"] == "passed" and greeting["agentbench.reward"] == 1.0
    # MLflow reads the GenAI usage attributes into its own token usage
    assert greeting["mlflow.chat.tokenUsage"] == {
        "input_tokens": 61,
        "output_tokens": 26,
        "total_tokens": 87,
    }
    assert tasks[("stuck-agent", "small")]["agentbench.outcome"] == "loop_killed"
    calls = [dict(c["attributes"]) for c in named["chat"]]  # type: ignore[call-overload]
    assert all(c["agentbench.protocol"] == "chat" for c in calls)
    answered = [c for c, s in zip(calls, named["chat"], strict=True) if s["status"] != "ERROR"]
    assert len(answered) == 6
    assert all(isinstance(c["gen_ai.response.time_to_first_chunk"], float) for c in answered)
    killed = [s for s in named["chat"] if s["status"] == "ERROR"]
    assert len(killed) == 2 and all(s["events"] == ["agentbench.loop_killed"] for s in killed)
