"""``--agentbench-otlp`` (docs/interchange.md): the run's spans over OTLP/HTTP while it
runs, received here by a real loopback collector; one trace per run under xdist; content
only when asked; a collector that is down changes nothing but the count it says."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from interchange_support import SUITE
from otlp_backend_support import backend_python
from records_support import make_record

from pytest_agentbench.agents.gateway import Gateway
from pytest_agentbench.models.anthropic import AnthropicClient
from pytest_agentbench.models.base import ModelSpec
from pytest_agentbench.models.scripted import register_scripts, scripted_client
from pytest_agentbench.models.siblings import sibling
from pytest_agentbench.report.otlp_proto import encode_request
from pytest_agentbench.report.otlp_spans import task_spans
from pytest_agentbench.scripted.server import ScriptedServer


class Collector(ThreadingHTTPServer):
    bodies: list[dict[str, object]]
    headers_seen: list[dict[str, str]]


class _Handler(BaseHTTPRequestHandler):
    server: Collector

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.headers_seen.append(dict(self.headers))
        self.server.bodies.append(json.loads(body))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def collector() -> Iterator[Collector]:
    server = Collector(("127.0.0.1", 0), _Handler)
    server.bodies, server.headers_seen = [], []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _spans(server: Collector) -> list[dict[str, object]]:
    return [
        span
        for body in server.bodies
        for rs in body["resourceSpans"]  # type: ignore[attr-defined]
        for ss in rs["scopeSpans"]
        for span in ss["spans"]
    ]


def _attrs(span: dict[str, object]) -> dict[str, object]:
    out: dict[str, object] = {}
    for kv in span.get("attributes", []):  # type: ignore[attr-defined]
        (value,) = kv["value"].values()
        out[kv["key"]] = value
    return out


def test_a_run_under_xdist_lands_in_one_trace_with_genai_attributes(
    pytester: pytest.Pytester, collector: Collector, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-team=bench%20a")
    pytester.makefile(".toml", bench_b=SUITE)
    url = f"http://127.0.0.1:{collector.server_address[1]}"
    result = pytester.runpytest_subprocess(
        "--agentbench",
        "-p",
        "no:cacheprovider",
        "-n",
        "2",
        "--agentbench-model",
        "big=scripted",
        "--agentbench-model",
        "small=scripted",
        "--agentbench-otlp",
        url,
    )
    result.assert_outcomes(passed=4, failed=2)
    spans = _spans(collector)
    result.stdout.fnmatch_lines([f"agentbench otlp: {len(spans)} span(s) sent to {url}/v1/traces"])
    assert {s["traceId"] for s in spans} == {spans[0]["traceId"]}  # one trace, both workers
    by_name: dict[str, list[dict[str, object]]] = {}
    for s in spans:
        by_name.setdefault(str(s["name"]).split(" ")[0], []).append(s)
    (run,) = by_name["agentbench.run"]
    tasks = by_name["agentbench.task"]
    assert len(tasks) == 6 and all(t["parentSpanId"] == run["spanId"] for t in tasks)
    # model calls: repaired 2, looping 1, tools 2 — per model
    assert len(by_name["chat"]) == 10 and len(by_name["execute_tool"]) == 2
    task_ids = {t["spanId"] for t in tasks}
    assert all(c["parentSpanId"] in task_ids for c in by_name["chat"] + by_name["execute_tool"])
    looping = next(t for t in tasks if _attrs(t)["agentbench.task_id"] == "looping")
    assert _attrs(looping)["agentbench.outcome"] == "loop_killed"
    assert "loop" in str(_attrs(looping)["agentbench.failure"])
    assert looping["events"][0]["name"] == "agentbench.loop_killed"  # type: ignore[index]
    repaired = [t for t in tasks if _attrs(t)["agentbench.task_id"] == "repaired"]
    assert {_attrs(t)["agentbench.model"] for t in repaired} == {"big", "small"}
    assert all(_attrs(t)["agentbench.reward"] == 1.0 for t in repaired)
    # a call of a repaired task: the looping task's call was cut, its usage never reported
    # (which one a worker sends first varies with the schedule)
    repaired_ids = {t["spanId"] for t in repaired}
    call = _attrs(next(c for c in by_name["chat"] if c["parentSpanId"] in repaired_ids))
    assert call["gen_ai.operation.name"] == "chat" and call["gen_ai.request.model"] == "scripted"
    assert "gen_ai.usage.output_tokens" in call and "agentbench.retries" in call
    tool = _attrs(by_name["execute_tool"][0])
    assert tool["gen_ai.tool.name"] == "write_file"
    # no content unless asked; the headers of the environment reach the collector
    assert not any("gen_ai.input.messages" in _attrs(s) for s in spans)
    assert all(h.get("x-team") == "bench a" for h in collector.headers_seen)


def _calls(server: Collector) -> list[dict[str, object]]:
    """The model-call spans received so far, in the order of their task's calls."""
    chats = [s for s in _spans(server) if str(s["name"]).startswith("chat ")]
    return [_attrs(s) | {"_s": _seconds(s)} for s in sorted(chats, key=_start)]


def _start(span: dict[str, object]) -> int:
    return int(str(span["startTimeUnixNano"]))


def _seconds(span: dict[str, object]) -> float:
    return (int(str(span["endTimeUnixNano"])) - _start(span)) / 1e9


def test_each_call_says_its_time_to_first_chunk_and_if_it_was_cached_or_batched(
    pytester: pytest.Pytester, collector: Collector, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The repaired task's two calls, sent live (streamed: the time to their first chunk,
    within the call's own time), replayed from the response cache (no time to a first
    chunk: nothing was sent), and with the first round answered by the batch API (the
    repair round sent live)."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
    pytester.makefile(".toml", bench_b=SUITE)
    server = ScriptedServer()
    server.start()
    url = f"http://127.0.0.1:{collector.server_address[1]}"
    args = ["--agentbench", "-p", "no:cacheprovider", "-k", "repaired"]
    args += ["--agentbench-base-url", server.url, "--agentbench-otlp", url]
    runs: list[list[dict[str, object]]] = []
    try:
        for more in (
            ["--agentbench-cache", "c"],
            ["--agentbench-cache", "c"],
            ["--agentbench-batch"],
        ):
            collector.bodies.clear()
            pytester.runpytest_subprocess(*args, *more).assert_outcomes(passed=1)
            runs.append(_calls(collector))
    finally:
        server.stop()
    live, cached, batched = runs
    assert [len(r) for r in runs] == [2, 2, 2]
    for call in live:
        assert call["gen_ai.request.stream"] is True
        first = call["gen_ai.response.time_to_first_chunk"]
        assert isinstance(first, float) and 0 <= first <= float(str(call["_s"])) + 0.0005
        assert call["agentbench.cached"] is False and call["agentbench.batched"] is False
    for call in cached:
        assert call["agentbench.cached"] is True and call["agentbench.batched"] is False
        assert "gen_ai.response.time_to_first_chunk" not in call
    assert [c["agentbench.batched"] for c in batched] == [True, False]
    assert [c["agentbench.cached"] for c in batched] == [False, False]
    assert "gen_ai.response.time_to_first_chunk" not in batched[0]
    assert "gen_ai.response.time_to_first_chunk" in batched[1]


def test_content_is_sent_only_when_asked(
    pytester: pytest.Pytester, collector: Collector, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json")
    monkeypatch.setenv(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        f"http://127.0.0.1:{collector.server_address[1]}/custom/traces",
    )
    pytester.makefile(".toml", bench_b=SUITE)
    result = pytester.runpytest_subprocess(
        "--agentbench",
        "-p",
        "no:cacheprovider",
        "-k",
        "repaired",
        "--agentbench-otlp",
        "env",
        "--agentbench-otlp-content",
    )
    result.assert_outcomes(passed=1)
    calls = [_attrs(s) for s in _spans(collector) if str(s["name"]).startswith("chat")]
    assert [c["gen_ai.output.text"] for c in calls] == ["Hi", "hi"]
    assert "say hi" in str(calls[0]["gen_ai.input.messages"])


def test_a_collector_that_is_down_changes_nothing_but_the_count(
    pytester: pytest.Pytester,
) -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    pytester.makefile(".toml", bench_b=SUITE)
    result = pytester.runpytest_subprocess(
        "--agentbench", "-p", "no:cacheprovider", "--agentbench-otlp", f"http://127.0.0.1:{port}"
    )
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["agentbench otlp: 0 span(s) sent to *; * dropped (ConnectError*"])
    plain = pytester.runpytest_subprocess("--agentbench", "-p", "no:cacheprovider")
    plain.assert_outcomes(passed=2, failed=1)
    assert "agentbench otlp" not in plain.stdout.str()


def test_a_bad_url_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_b=SUITE)
    result = pytester.runpytest_subprocess("--agentbench", "--agentbench-otlp", "localhost:4318")
    result.stderr.fnmatch_lines(
        ["*--agentbench-otlp: expected an http(s) URL or env, got 'localhost:4318'*"]
    )


#: Pythons that have opentelemetry-proto: those Arize Phoenix is installed in
PHOENIX_PYTHONS = (
    os.environ.get("AGENTBENCH_PHOENIX_PYTHON", ""),
    "/work/venvs/phoenix/bin/python",
    str(Path.home() / ".cache" / "pytest-agentbench-phoenix" / "bin" / "python"),
)


def test_the_protobuf_encoding_is_what_the_official_classes_read(tmp_path: Path) -> None:
    """Our hand-written protobuf against opentelemetry-proto's own classes (installed
    with Arize Phoenix, outside this venv)."""
    python = backend_python(PHOENIX_PYTHONS, "phoenix")
    if python is None:
        pytest.skip(
            "no Python with opentelemetry-proto: Arize Phoenix is not installed "
            "(AGENTBENCH_PHOENIX_PYTHON; .ci/install-phoenix)"
        )
    request = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": "x"}}]
                },
                "scopeSpans": [
                    {
                        "scope": {"name": "s", "version": "1"},
                        "spans": [
                            {
                                "traceId": "0af7651916cd43dd8448eb211c80319c",
                                "spanId": "b7ad6b7169203331",
                                "parentSpanId": "00f067aa0ba902b7",
                                "name": "chat m",
                                "kind": 3,
                                "startTimeUnixNano": "1700000000000000000",
                                "endTimeUnixNano": "1700000001000000000",
                                "attributes": [
                                    {"key": "i", "value": {"intValue": "-7"}},
                                    {"key": "d", "value": {"doubleValue": 0.5}},
                                    {"key": "b", "value": {"boolValue": True}},
                                    {
                                        "key": "a",
                                        "value": {
                                            "arrayValue": {"values": [{"stringValue": "stop"}]}
                                        },
                                    },
                                ],
                                "events": [
                                    {
                                        "timeUnixNano": "1700000000500000000",
                                        "name": "e",
                                        "attributes": [{"key": "k", "value": {"stringValue": "v"}}],
                                    }
                                ],
                                "status": {"code": 2, "message": "bad"},
                            }
                        ],
                    }
                ],
            }
        ]
    }
    (tmp_path / "body.bin").write_bytes(encode_request(request))
    (tmp_path / "body.json").write_text(json.dumps(request))
    script = (
        "import sys, json\n"
        "from google.protobuf import json_format\n"
        "from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import "
        "ExportTraceServiceRequest as R\n"
        "got = R.FromString(open(sys.argv[1], 'rb').read())\n"
        "import base64\n"
        "data = json.load(open(sys.argv[2]))\n"
        "for rs in data['resourceSpans']:\n"
        "    for ss in rs['scopeSpans']:\n"
        "        for sp in ss['spans']:\n"
        "            for k in ('traceId', 'spanId', 'parentSpanId'):\n"
        "                sp[k] = base64.b64encode(bytes.fromhex(sp[k])).decode()\n"
        "want = json_format.ParseDict(data, R())\n"
        "print('same' if got == want else 'differ', got)\n"
    )
    done = subprocess.run(
        [str(python), "-c", script, str(tmp_path / "body.bin"), str(tmp_path / "body.json")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.stdout.startswith("same"), done.stdout + done.stderr


@dataclass(frozen=True)
class _Script:
    key: str
    scripted: tuple[object, ...]
    id: str = "t"
    path: str = "bench_otlp.toml"


def test_a_call_the_gateway_translated_says_so(tmp_path: Path) -> None:
    """A Chat Completions request of an agent to a model that speaks only Anthropic
    Messages: the real gateway translates it, and the span of that call says which way
    (and, the model's reply being streamed, its time to the first chunk)."""
    server, gateway = ScriptedServer(), Gateway()
    server.start()
    try:
        script = _Script("otlp-translated", ("hello",))
        register_scripts(scripted_client(ModelSpec("scripted", "scripted"), server.url), [script])
        bare = AnthropicClient(ModelSpec("anthropic", script.key), server.url, "k", trust_env=False)
        route = gateway.open_route(script.key, bare.spec.label, lambda p: sibling(bare, p))
        route.begin_attempt(0, time.monotonic() + 60, None)
        env = route.endpoint.environment()
        reply = httpx.post(
            f"{env['OPENAI_BASE_URL']}/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
            headers={"Authorization": f"Bearer {env['OPENAI_API_KEY']}"},
            timeout=30,
        )
        assert reply.status_code == 200, reply.text
        entries = [r.entry for r in route.records_of(0)]
        bare.close()
    finally:
        gateway.close()
        server.stop()
    trajectory = {"task": "t", "model": "m", "requests": entries}
    (tmp_path / "trajectory.json").write_text(json.dumps(trajectory))
    record = make_record(model="m", rollout_dir=str(tmp_path), start_ms=1_700_000_000_000)
    spans = task_spans(record, "run", "0" * 16, {"m": ("anthropic", script.key)}, content=False)
    chats = [s for s in spans if isinstance(s, dict) and str(s["name"]).startswith("chat ")]
    (call,) = [_attrs(dict(s)) for s in chats]
    assert call["agentbench.translated"] == "chat→messages"
    assert call["agentbench.protocol"] == "chat"
    assert call["gen_ai.provider.name"] == "anthropic"
    assert isinstance(call["gen_ai.response.time_to_first_chunk"], float)
