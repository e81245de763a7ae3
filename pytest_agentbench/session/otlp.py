"""``--agentbench-otlp URL``: the run's spans sent over OTLP/HTTP (JSON) while it runs.

Registered only when asked for, and only where records arrive (the serial process or
the xdist controller), so a run without it imports none of this, and under xdist every
task's spans leave from one process into the one trace of the run (report/otlp_spans.py
derives the trace id from the run id). The spans are made and sent by one daemon thread
from a bounded queue: a finished task only enqueues its record. A collector that is
down, slow or refusing never slows, fails or changes the run: a span that finds the
queue full, or whose batch cannot be delivered (each POST has a short timeout), is
dropped and counted, and the terminal says so at the end. At the end of the run the
thread gets a bounded time to send what is queued; what is left then is dropped too.

OTLP/HTTP is spoken here with httpx (a core dependency already), protobuf by default
(report/otlp_proto.py) or JSON (``OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL=http/json``),
rather than through the OpenTelemetry SDK: the SDK would be a new dependency of every
run that sends spans, its exporter retries with backoff (it would hold the end of the
run), and our spans are finished records with their own times, not live SDK spans.
The endpoint and headers follow the SDK's environment variables
(``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, ``OTEL_EXPORTER_OTLP_ENDPOINT``,
``OTEL_EXPORTER_OTLP_[TRACES_]HEADERS``, ``OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT``).
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
import urllib.parse
from collections.abc import Mapping

import httpx
import pytest

from pytest_agentbench.artifacts.jsonio import dumps
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.task_record import TaskRecord
from pytest_agentbench.report.otlp_proto import encode_request
from pytest_agentbench.report.otlp_spans import attributes, span, span_id, task_spans, trace_id

QUEUE_LIMIT = 4096
BATCH = 256
FINAL_WAIT_S = 3.0


def otlp_endpoint(value: str, environ: Mapping[str, str]) -> str:
    """The traces URL of ``--agentbench-otlp VALUE``: ``env`` takes the SDK's variables
    (the traces endpoint as it is, the generic one plus ``/v1/traces``); a URL with no
    path gets ``/v1/traces``. ValueError saying what is missing."""
    if value == "env":
        traces = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
        if traces:
            return traces
        base = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "")
        if not base:
            raise ValueError(
                "--agentbench-otlp env: neither OTEL_EXPORTER_OTLP_TRACES_ENDPOINT nor "
                "OTEL_EXPORTER_OTLP_ENDPOINT is set"
            )
        return base.rstrip("/") + "/v1/traces"
    parsed = urllib.parse.urlsplit(value)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ValueError(f"--agentbench-otlp: expected an http(s) URL or env, got {value!r}")
    return value if parsed.path not in ("", "/") else value.rstrip("/") + "/v1/traces"


def otlp_headers(environ: Mapping[str, str]) -> dict[str, str]:
    """The headers of ``OTEL_EXPORTER_OTLP_TRACES_HEADERS`` (else the generic one):
    ``key=value`` pairs, comma separated, URL-encoded."""
    text = environ.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS") or environ.get(
        "OTEL_EXPORTER_OTLP_HEADERS", ""
    )
    headers: dict[str, str] = {}
    for pair in text.split(","):
        key, sep, value = pair.partition("=")
        if sep and key.strip():
            headers[urllib.parse.unquote(key.strip())] = urllib.parse.unquote(value.strip())
    return headers


def _timeout_s(environ: Mapping[str, str]) -> float:
    text = environ.get("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT") or environ.get(
        "OTEL_EXPORTER_OTLP_TIMEOUT", ""
    )
    try:
        return min(max(float(text) / 1000, 0.1), 5.0) if text else 2.0
    except ValueError:
        return 2.0


class OtlpSender:
    """A daemon thread posting span batches to ``url``; never raises into the run."""

    def __init__(
        self, url: str, headers: Mapping[str, str], timeout_s: float, version: str, *, json: bool
    ):
        self.url, self.version, self.json = url, version, json
        kind = "application/json" if json else "application/x-protobuf"
        self.headers = {**headers, "Content-Type": kind}
        self.timeout_s = timeout_s
        self.queue: queue.Queue[JsonValue | None] = queue.Queue(QUEUE_LIMIT)
        self.accepted = self.sent = self.dropped = 0
        self.problem: str | None = None
        #: set once the end of the run has counted what is left: the counts stay as said
        self.final = False
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, name="agentbench-otlp", daemon=True)
        self.thread.start()

    def put(self, one: JsonValue) -> None:
        try:
            self.queue.put_nowait(one)
        except queue.Full:
            self._count(dropped=1, problem=f"more than {QUEUE_LIMIT} spans waiting")
        else:
            with self.lock:
                self.accepted += 1

    def _count(self, *, sent: int = 0, dropped: int = 0, problem: str | None = None) -> None:
        with self.lock:
            if self.final:  # too late: counted as dropped already
                return
            self.sent += sent
            self.dropped += dropped
            if problem is not None:
                self.problem = self.problem or problem

    def close(self) -> None:
        """Let the thread send what is queued, for at most FINAL_WAIT_S seconds (or one
        request's timeout and a second, when that is longer); what is left after that,
        queued or in a request still going, is counted as dropped."""
        wait = max(FINAL_WAIT_S, self.timeout_s + 1)
        with contextlib.suppress(queue.Full):
            self.queue.put(None, timeout=wait)
        self.thread.join(wait)
        with self.lock:
            self.final = True
            left = self.accepted - self.sent - self.dropped
            if self.thread.is_alive() and left:
                self.dropped += left
                self.problem = self.problem or f"the collector was too slow ({left} left)"

    def _run(self) -> None:
        with httpx.Client(timeout=self.timeout_s) as client:
            done = False
            while not done:
                batch: list[JsonValue] = []
                item = self.queue.get()
                while True:
                    if item is None:
                        done = True
                        break
                    batch.append(item)
                    if len(batch) >= BATCH:
                        break
                    try:
                        item = self.queue.get(timeout=0.2)
                    except queue.Empty:
                        break
                if batch:
                    self._post(client, batch)

    def _post(self, client: httpx.Client, spans: list[JsonValue]) -> None:
        body: JsonObject = {
            "resourceSpans": [
                {
                    "resource": {"attributes": attributes({"service.name": "pytest-agentbench"})},
                    "scopeSpans": [
                        {
                            "scope": {"name": "pytest-agentbench", "version": self.version},
                            "spans": spans,
                        }
                    ],
                }
            ]
        }
        try:
            payload = dumps(body, indent=None).encode() if self.json else encode_request(body)
            reply = client.post(self.url, content=payload, headers=self.headers)
        except Exception as exc:  # a collector's trouble never reaches the run
            self._count(dropped=len(spans), problem=f"{type(exc).__name__}: {exc}"[:200])
            return
        if reply.status_code >= 300:
            self._count(dropped=len(spans), problem=f"HTTP {reply.status_code}")
        else:
            self._count(sent=len(spans))


class OtlpPlugin:
    """The run's spans: a task's as its record arrives, the run's at the end."""

    def __init__(
        self,
        sender: OtlpSender,
        run_id: str,
        models: Mapping[str, tuple[str, str]],
        *,
        content: bool,
    ) -> None:
        self.sender, self.run_id, self.models, self.content = sender, run_id, models, content
        self.trace = trace_id(run_id)
        self.run_span = span_id(run_id, "run")
        self.start_ns = time.time_ns()
        self.tasks = 0
        self.seen: set[tuple[str, int | None, int]] = set()

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        record: TaskRecord | None = getattr(report, "agentbench", None)
        if record is None:
            return
        key = (record.nodeid, record.epoch, record.start_ms)
        if key in self.seen:  # one record, once (a report of each phase may carry it)
            return
        self.seen.add(key)
        self.tasks += 1
        for one in task_spans(
            record, self.run_id, self.run_span, self.models, content=self.content
        ):
            self.sender.put(one)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.sender.put(
            span(
                self.trace,
                self.run_span,
                None,
                "agentbench.run",
                self.start_ns,
                time.time_ns(),
                {
                    "openinference.span.kind": "CHAIN",
                    "agentbench.run_id": self.run_id,
                    "agentbench.tasks": self.tasks,
                    "agentbench.exit_status": int(exitstatus),
                    "agentbench.models": sorted(self.models),
                },
            )
        )
        self.sender.close()

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        sender = self.sender
        line = f"agentbench otlp: {sender.sent} span(s) sent to {sender.url}"
        if sender.dropped:
            line += f"; {sender.dropped} dropped ({sender.problem})"
        terminalreporter.write_line(line)


def make_otlp_plugin(
    value: str,
    run_id: str,
    models: Mapping[str, tuple[str, str]],
    *,
    content: bool,
    version: str,
) -> OtlpPlugin:
    """The plugin sending to ``value`` (a URL, or ``env``); ValueError when unusable."""
    environ = os.environ
    url = otlp_endpoint(value, environ)
    protocol = environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or environ.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"
    )
    if protocol not in ("http/protobuf", "http/json"):
        raise ValueError(
            f"--agentbench-otlp: OTEL_EXPORTER_OTLP_PROTOCOL {protocol!r}: this sender speaks "
            "http/protobuf (the default) and http/json"
        )
    sender = OtlpSender(
        url, otlp_headers(environ), _timeout_s(environ), version, json=protocol == "http/json"
    )
    return OtlpPlugin(sender, run_id, models, content=content)
