"""``--agentbench-otlp`` (docs/interchange.md): the run's spans over OTLP/HTTP while it
runs, received here by a real loopback collector; one trace per run under xdist; content
only when asked; a collector that is down changes nothing but the count it says."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from interchange_support import SUITE

from pytest_agentbench.report.otlp_proto import encode_request


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


PHOENIX_PYTHON = Path("/work/venvs/phoenix/bin/python")


def test_the_protobuf_encoding_is_what_the_official_classes_read(tmp_path: Path) -> None:
    """Our hand-written protobuf against opentelemetry-proto's own classes (installed
    with Arize Phoenix, outside this venv)."""
    import os

    python = Path(os.environ.get("AGENTBENCH_PHOENIX_PYTHON", str(PHOENIX_PYTHON)))
    if not python.exists():
        pytest.skip(f"no Python with opentelemetry-proto at {python} (AGENTBENCH_PHOENIX_PYTHON)")
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
