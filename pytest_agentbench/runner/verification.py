"""One verification bounded in time: by the task's deadline, or by the verifier's own
time limit where it has one (a judge: its time is the judge's, not the answer's).

The rollout (runner/rollout.py) calls ``verify_by`` with the deadline ``deadline_for``
gives it; in-process verifiers run in a daemon thread reused from task to task.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import asdict

from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.verifiers.base import Check, OwnTimeLimit, Verdict, Verifier, resolved
from pytest_agentbench.verifiers.text import EXACT, INCLUDES


def own_time_limit(verifier: Verifier, options: Mapping[str, JsonValue]) -> float | None:
    """The verifier's own time limit for one verification (a judge's), in seconds; None
    for a verifier bounded by the task's deadline."""
    real = resolved(verifier)  # the judge is loaded lazily (verifiers/builtin.py)
    # (a runtime protocol's isinstance walks its attributes, ~15 us: asked of judges only)
    if hasattr(type(real), "time_limit_s") and isinstance(real, OwnTimeLimit):
        return real.time_limit_s(options)
    return None


def _verify(verifier: Verifier, check: Check) -> Verdict:
    verdict = verifier.verify(check)
    reward = min(1.0, max(0.0, float(verdict.reward)))
    if reward != verdict.reward:
        verdict = Verdict(reward, verdict.metrics, verdict.details, verdict.feedback, verdict.error)
    return verdict


#: Built-in verifiers whose work is a few string operations on the answer: they run in
#: the rollout's own thread (handing them to another thread cost more than they do).
_INLINE = (EXACT, INCLUDES)

#: How long a verifier whose own time limit was cut to the task's deadline may take past
#: it to stop its command and clean up; its verdict is not used either way.
CLEANUP_GRACE_S = 5.0


def runs_sandboxed(verifier: Verifier) -> bool:
    """True for a verifier that runs its check as a sandboxed command: the ones with a
    ``timeout_s`` option (python_tests, python_checks, command, and plugins built alike)."""
    schema = getattr(verifier, "options_schema", None) or {}
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    return isinstance(properties, Mapping) and "timeout_s" in properties


def _bounded_options(
    verifier: Verifier, options: Mapping[str, JsonValue], deadline: float
) -> JsonObject | None:
    """``options`` with ``timeout_s`` cut to what is left of the task, for a verifier that
    has that option (the sandboxed ones), so its command stops at the task's deadline.
    None when the verifier has no such option."""
    schema = getattr(verifier, "options_schema", None) or {}
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(properties, Mapping) or "timeout_s" not in properties:
        return None
    default = (
        properties["timeout_s"].get("default")
        if isinstance(properties["timeout_s"], Mapping)
        else None
    )
    own = options.get("timeout_s", default)
    left = max(deadline - time.monotonic(), 0.01)
    if isinstance(own, int | float) and own <= left:
        return None
    return {**options, "timeout_s": left}


class VerifierThread:
    """The daemon thread that runs the verifications of one rollout thread, one at a time,
    reused from task to task (a new thread per verification cost more than the built-in
    verifiers themselves). A verifier that overruns its deadline keeps its thread: the
    rollout thread is given a new one. The thread ends when its rollout thread does."""

    local = threading.local()

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        threading.Thread(
            target=self._serve, args=(self.jobs,), name="agentbench-verifier", daemon=True
        ).start()
        weakref.finalize(self, self.jobs.put, None)

    @staticmethod
    def _serve(jobs: queue.SimpleQueue[Callable[[], None] | None]) -> None:
        while (job := jobs.get()) is not None:
            job()
            del job

    @classmethod
    def mine(cls) -> VerifierThread:
        helper: VerifierThread | None = getattr(cls.local, "helper", None)
        if helper is None:
            helper = cls.local.helper = cls()
        return helper


def verify_by(verifier: Verifier, check: Check, deadline: float) -> Verdict | None:
    """``_verify`` bounded by the task's deadline: None when the verifier has not answered
    by then (an in-process verifier is left to finish in a daemon thread; a sandboxed one
    has its command's limit cut to the deadline; the string checks of ``_INLINE`` run in
    this thread). An exception of the verifier
    propagates."""
    if any(verifier is quick for quick in _INLINE):
        verdict = _verify(verifier, check)
        return verdict if time.monotonic() <= deadline else None
    options = _bounded_options(verifier, check.options, deadline)
    if options is not None:
        check = dataclasses.replace(check, options=options)
    box: list[tuple[Verdict | BaseException, float]] = []
    done = threading.Event()

    def run() -> None:
        result: Verdict | BaseException
        try:
            result = _verify(verifier, check)
        except BaseException as exc:  # handed to the caller's thread
            result = exc
        box.append((result, time.monotonic()))
        done.set()

    helper = VerifierThread.mine()
    helper.jobs.put(run)
    done.wait(max(deadline - time.monotonic(), 0.0))
    if options is not None and not done.is_set():
        done.wait(CLEANUP_GRACE_S)  # its command was stopped at the deadline
    if not done.is_set():
        VerifierThread.local.helper = None  # it is stuck: the next verification gets a new one
    if not box or box[0][1] > deadline:
        return None
    result = box[0][0]
    if isinstance(result, BaseException):
        raise result
    return result


class _NotPlain(Exception):
    """A value ``_plain_copy`` leaves to ``dataclasses.asdict``."""


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _plain_copy(value: object) -> object:
    """A copy of plain JSON data (dicts, lists, scalars), as ``asdict`` makes it;
    ``_NotPlain`` for anything else."""
    if type(value) in _SCALARS:
        return value
    if type(value) is dict:
        return {_plain_copy(k): _plain_copy(v) for k, v in value.items()}
    if type(value) is list:
        return [_plain_copy(v) for v in value]
    raise _NotPlain


def verdict_dict(verdict: Verdict) -> dict[str, object]:
    """``asdict(verdict)``: built directly when the verdict holds plain JSON (the usual
    case; ``asdict``'s generic walk cost more than the string verifiers' whole check),
    by ``asdict`` otherwise."""
    try:
        return {
            "reward": _plain_copy(verdict.reward),
            "metrics": _plain_copy(verdict.metrics),
            "details": _plain_copy(verdict.details),
            "feedback": _plain_copy(verdict.feedback),
            "error": _plain_copy(verdict.error),
        }
    except _NotPlain:
        return asdict(verdict)
