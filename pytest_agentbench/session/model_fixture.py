"""The ``agentbench_model`` fixture: the run's model in an ordinary pytest test.

The test talks to the model through the same client a task uses (so the same settings,
retries, rate limit and circuit breaker), each reply watched by the same loop guard, its
usage added up. When the test ends it gets a task record like a suite's task (suite: its
module, task id: its name; reward 1 for a pass, 0 for a failure), which reaches the CTRF,
summary.json and the failure lines with its tokens. Under the scripted provider its
replies come from ``@pytest.mark.agentbench_scripted("reply", …)``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.record_parts import LoopRecord, RepairSettings, Round
from pytest_agentbench.core.records import loop_evidence
from pytest_agentbench.core.task_record import Failure
from pytest_agentbench.core.usage import Usage, sum_usage
from pytest_agentbench.errors import AgentbenchError, ModelError

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import pytest

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
            generation = client.generate(request, guard)
        except LoopKilled as exc:
            self._took(recovered_usage(guard.answer, guard.thinking), guard.record())
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
