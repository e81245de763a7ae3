"""The ``agentbench_model`` fixture: the run's model in an ordinary pytest test.

The test talks to the model through the same client a task uses (so the same settings,
retries, rate limit and circuit breaker), each reply watched by the same loop guard, its
usage added up. When the test ends it gets a task record like a suite's task (suite: its
module, task id: its name; reward 1 for a pass, 0 for a failure), which reaches the CTRF,
summary.json and the failure lines with its tokens. Under the scripted provider its
replies come from ``@pytest.mark.agentbench_scripted("reply", …)``.

For an agent the test runs itself (in-process, or as a subprocess), ``endpoint()`` gives
a base URL and stand-in key on the run's gateway: every call through it is attributed to
the test, watched for loops and counted into its record like ``generate`` calls.
"""

from __future__ import annotations

import threading
import time
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.record_parts import LoopRecord, RepairSettings, Round
from pytest_agentbench.core.records import loop_evidence
from pytest_agentbench.core.task_record import Failure
from pytest_agentbench.core.usage import Usage, sum_usage
from pytest_agentbench.errors import AgentbenchError, ModelError

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import pytest

    from pytest_agentbench.agents.endpoint import AgentEndpoint
    from pytest_agentbench.agents.route import Route
    from pytest_agentbench.core.task_record import Outcome, TaskRecord
    from pytest_agentbench.session.run import RunState

#: Registered (with its help) in plugin.py, which must not import this module unasked.
MARKER = "agentbench_scripted"


@dataclass(frozen=True)
class Reply:
    """What one ``generate`` call got back: the answer, the thinking, why it stopped, and
    the call's normalised token usage."""

    text: str
    thinking: str = ""
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)


def _rest(script: _TestScript) -> tuple[str, Path, tuple[object, ...]]:
    return script.id, script.path, script.scripted


@dataclass(frozen=True)
class _TestScript:
    """What the scripted client's ``register`` reads of a task, for a test's replies."""

    key: str
    id: str
    path: Path
    scripted: tuple[object, ...]


class BenchModel:
    """The model as a pytest test sees it (the ``agentbench_model`` fixture)."""

    def __init__(self, state: RunState, item: pytest.Item) -> None:
        self._state = state
        self.nodeid = item.nodeid
        self.label = state.settings.model_name  # the first model (of several: by its name)
        marker = item.get_closest_marker(MARKER)
        self._script = _TestScript(
            key=f"test::{item.nodeid}",
            id=item.name,
            path=Path(str(item.path)),
            scripted=tuple(marker.args) if marker is not None else (),
        )
        self.calls = 0
        self.usages: list[JsonObject] = []
        self.loops: list[JsonObject] = []
        self.failure: Failure | None = None
        self.start_ms = int(time.time() * 1000)
        self._lock = threading.Lock()
        self._route: Route | None = None

    def endpoint(self) -> AgentEndpoint:
        """The gateway endpoint of this test for an agent it runs: ``base_url`` (OpenAI
        clients add ``/v1``) and ``key`` (a stand-in, good for this test's route only;
        ``environment()`` gives the variables SDKs and CLIs read). Every call through it
        reaches the run's model with the real key, counts into this test's usage, and is
        watched for loops: a confirmed loop ends the request and fails the test as
        ``loop_killed``. Under the scripted provider the marker's replies answer these
        calls too, from the first (apart from ``generate``'s own count)."""
        from pytest_agentbench.runner.loopguard import KillPolicy

        with self._lock:
            if self._route is not None:
                return self._route.endpoint
            state = self._state
            services = state.services
            settings = state.settings
            key = f"{self._script.key}::gateway"
            if self._script.scripted:
                services.prepare(key, (_TestScript(key, *_rest(self._script)),))
            self._route = services.gateway().open_route(
                key,
                self.label,
                lambda protocol: services.protocol_client("", protocol),
                kill_policy=KillPolicy(
                    settings.loop_kill / 100, settings.loop_kill_seconds, settings.loop_kill_tokens
                ),
            )
            return self._route.endpoint

    def _gateway_calls(self) -> None:
        """Take in what the gateway recorded of this test's calls, once; close its route."""
        with self._lock:
            route, self._route = self._route, None
        if route is None:
            return
        with route.lock:
            records = list(route.records)
        for record in records:
            self._took(
                Usage.from_json(record.usage) if record.usage is not None else Usage(),
                record.guard.as_dict() if record.guard is not None else {},
            )
        with self._lock:
            self.calls += len(records)
        stop = route.stop_info
        if stop is not None and self.failure is None:
            if stop.reason == "loop_killed":
                self.failure = Failure.of("loop_killed", f"agent killed: {stop.message}")
            elif stop.reason == "timeout":
                self.failure = Failure.of("model_timeout", f"agent stopped: {stop.message}")
            elif stop.failure is not None:  # a context overflow: its own kind
                self.failure = stop.failure
            else:
                self.failure = Failure.of("harness", f"agent stopped: {stop.message}")
        self._state.services.gateway().close_route(route)

    def generate(
        self,
        prompt: str | Sequence[Mapping[str, JsonValue]],
        *,
        system: str | None = None,
        max_tokens: int | None = None,
        timeout_s: float | None = None,
    ) -> Reply:
        """Ask the model: ``prompt`` is the user's message (or the whole list of turns, as
        ``ModelRequest.messages``). Raises the client's ModelError, or AgentbenchError when
        the loop guard killed a looping reply; either is the test's outcome."""
        from pytest_agentbench.config.settings import DEFAULT_TIMEOUT_S
        from pytest_agentbench.models.base import REQUEST_CALL, REQUEST_TASK, ModelRequest
        from pytest_agentbench.models.usage import recovered_usage
        from pytest_agentbench.runner.loopguard import KillPolicy, LoopGuard, LoopKilled

        settings = self._state.settings
        services = self._state.services
        try:
            client = services.client()
            if self._script.scripted:
                services.prepare(self._script.key, (self._script,))
        except ModelError as exc:
            self.failure = Failure.from_error(exc)
            raise
        except AgentbenchError as exc:  # a reply the scripted server cannot play
            self.failure = Failure.of("harness", str(exc))
            raise
        except Exception as exc:  # a plugin's client failing to be made: not the model's fault
            from pytest_agentbench.errors import unexpected_cause

            self.failure = Failure.of("harness", f"unexpected {unexpected_cause(exc)}")
            raise
        messages = (
            ({"role": "user", "content": prompt},) if isinstance(prompt, str) else tuple(prompt)
        )
        with self._lock:
            call = self.calls
            self.calls += 1
        request = ModelRequest(
            messages=messages,
            system=system,
            max_tokens=max_tokens or settings.max_tokens,
            timeout_s=timeout_s or settings.timeout_s or DEFAULT_TIMEOUT_S,
            stream=settings.stream,
            metadata={REQUEST_TASK: self._script.key, REQUEST_CALL: str(call)},
        )
        guard = LoopGuard(
            KillPolicy(
                settings.loop_kill / 100, settings.loop_kill_seconds, settings.loop_kill_tokens
            )
        )
        try:
            generation = guard.check(client.generate(request, guard))
        except LoopKilled as exc:
            whole = exc.whole
            usage = whole.usage if whole is not None else None
            self._took(usage or recovered_usage(guard.answer, guard.thinking), guard.record())
            self.failure = Failure.of("loop_killed", str(exc))
            raise AgentbenchError(f"{self.label}: {exc}") from None
        except ModelError as exc:
            partial = getattr(exc, "partial", None)
            if partial is not None and hasattr(partial, "usage"):
                self._took(partial.usage, guard.record())
            self.failure = Failure.from_error(exc)
            raise
        except Exception as exc:  # a bug in a plugin's client (or ours): a harness error
            from pytest_agentbench.errors import unexpected_cause

            self.failure = Failure.of("harness", f"unexpected {unexpected_cause(exc)}")
            raise
        self._took(generation.usage, guard.record())
        return Reply(
            text=generation.text,
            thinking=generation.thinking,
            finish_reason=generation.finish_reason,
            usage=generation.usage,
        )

    def _took(self, usage: Usage, loop: JsonObject) -> None:
        with self._lock:
            self.usages.append(usage.as_dict())
            self.loops.append(loop)

    def record(self, item: pytest.Item, report: pytest.TestReport) -> TaskRecord:
        """The test's task record, from its report (the ``call`` phase, or a failed
        ``setup``) and what the model did."""
        from pytest_agentbench.artifacts.record import build_record

        self._gateway_calls()
        failure = self.failure
        outcome: Outcome = "passed" if report.passed else "failed"
        if failure is not None:
            ends: dict[str, Outcome] = {"loop_killed": "loop_killed", "model_timeout": "timeout"}
            outcome = ends.get(failure.kind, "harness_error")
        elif report.failed and report.when != "call":
            outcome = "harness_error"
            failure = Failure.of("harness", f"the test's {report.when} failed")
        reward = {"passed": 1.0, "failed": 0.0}.get(outcome)
        crash = getattr(report.longrepr, "reprcrash", None)
        message = str(getattr(crash, "message", "") or "") if report.failed else ""
        message = message.splitlines()[0] if message else ("" if report.passed else outcome)
        if failure is not None:  # the model's (or the harness's) own words, not the traceback's
            message = failure.message
        trace = str(report.longreprtext) if report.failed else None
        loop = loop_evidence(self.loops)
        usage = Usage.from_json(sum_usage(self.usages))
        module = Path(str(item.path)).stem
        return build_record(
            nodeid=item.nodeid,
            file=item.nodeid.split("::")[0],
            suite=module,
            task_id=item.name,
            model=self.label,
            outcome=outcome,
            reward=reward,
            first_attempt_reward=reward,
            pass_threshold=1.0,
            attempts=1,
            rounds=(Round(reward=reward, tokens=usage.total),),
            repaired=False,
            incomplete=False,
            failure_kind=failure.kind if failure is not None else None,
            repair=RepairSettings(),
            loop=None if loop is None else LoopRecord.from_json(loop),
            last_feedback=None,
            usage=usage,
            error=failure.message if failure is not None else None,
            verdict=None,
            max_tokens=self._state.settings.max_tokens,
            min_score=None,
            start_ms=self.start_ms,
            duration_ms=max(0, int(report.duration * 1000)),
            rollout_dir=None,
            verifier_dir=None,
            failure=failure,
            message=message or None,
            trace=trace,
        )
