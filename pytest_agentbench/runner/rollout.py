"""Run one task: generate, verify, repair with verifier feedback, decide the outcome."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pytest_agentbench.core.records import Attempt, FailureKind, Outcome, Rollout, failure_kind
from pytest_agentbench.core.stream import EventSink
from pytest_agentbench.core.usage import sum_usage
from pytest_agentbench.errors import AgentbenchError, CircuitOpen, ModelError, ModelTimeout
from pytest_agentbench.models.base import Generation, ModelClient, ModelRequest
from pytest_agentbench.models.usage import recovered_usage
from pytest_agentbench.runner.agent import AgentSession
from pytest_agentbench.runner.loopguard import KillPolicy, LoopGuard, LoopKilled
from pytest_agentbench.runner.repair import repair_request, repairs_allowed
from pytest_agentbench.runner.tools import BUILTIN_TOOLS, Tool
from pytest_agentbench.suites.task import Task
from pytest_agentbench.verifiers.base import Check, Verdict, Verifier
from pytest_agentbench.verifiers.sandboxed import discard_foreign_files


def _verify(verifier: Verifier, check: Check) -> Verdict:
    verdict = verifier.verify(check)
    reward = min(1.0, max(0.0, float(verdict.reward)))
    if reward != verdict.reward:
        verdict = Verdict(reward, verdict.metrics, verdict.details, verdict.feedback, verdict.error)
    return verdict


#: How long a verifier whose own time limit was cut to the task's deadline may take past
#: it to stop its command and clean up; its verdict is not used either way.
CLEANUP_GRACE_S = 5.0


def _bounded_options(verifier: Verifier, options: Mapping[str, Any], deadline: float) -> Any:
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


def _verify_by(verifier: Verifier, check: Check, deadline: float) -> Verdict | None:
    """``_verify`` bounded by the task's deadline: None when the verifier has not answered
    by then (an in-process verifier is left to finish in a daemon thread; a sandboxed one
    has its command's limit cut to the deadline). An exception of the verifier
    propagates."""
    options = _bounded_options(verifier, check.options, deadline)
    if options is not None:
        check = dataclasses.replace(check, options=options)
    box: list[tuple[Verdict | BaseException, float]] = []

    def run() -> None:
        result: Verdict | BaseException
        try:
            result = _verify(verifier, check)
        except BaseException as exc:  # handed to the caller's thread
            result = exc
        box.append((result, time.monotonic()))

    worker = threading.Thread(target=run, name="agentbench-verifier", daemon=True)
    worker.start()
    worker.join(max(deadline - time.monotonic(), 0.0))
    if options is not None and worker.is_alive():
        worker.join(CLEANUP_GRACE_S)  # its command was stopped at the deadline
    if not box or box[0][1] > deadline:
        return None
    result = box[0][0]
    if isinstance(result, BaseException):
        raise result
    return result


def _fill(attempt: Attempt, generation: Generation) -> None:
    attempt.answer = generation.text
    attempt.thinking = generation.thinking
    attempt.finish_reason = generation.finish_reason
    attempt.usage = generation.usage.as_dict()
    attempt.usage_native = dict(generation.usage_native) if generation.usage_native else None


def _open_agent(
    task: Task,
    client: ModelClient,
    tools: Mapping[str, Tool] | None,
    verifier_dir: Path | None,
    isolation: str | None,
) -> AgentSession:
    if verifier_dir is None:
        raise AgentbenchError(f"task {task.id!r}: agent mode needs a rollout directory")
    if tools is None:
        tools = {tool.name: tool for tool in BUILTIN_TOOLS}
    mode = isolation or str(task.verifier.options.get("isolation", "auto"))
    root = verifier_dir.parent / "workspace"
    return AgentSession.open(task, client, tools, root, isolation=mode)


def _workspace_entry(agent: AgentSession) -> dict[str, Any]:
    """The trajectory's last entry in agent mode: where the workspace was kept, what was
    pruned from it, and the containment its commands ran under."""
    pruned = agent.close()
    return {
        "workspace": str(agent.workspace.path),
        "pruned": pruned,
        "containment": agent.workspace.containment(),
        "model_calls": agent.calls,
    }


def run_rollout(
    task: Task,
    client: ModelClient,
    verifier: Verifier,
    *,
    timeout_s: float,
    max_tokens: int | None,
    verifier_dir: Path | None = None,
    stream: bool = True,
    on_event: EventSink | None = None,
    kill_policy: KillPolicy | None = None,
    on_phase: Callable[[str], None] | None = None,
    tools: Mapping[str, Tool] | None = None,
    isolation: str | None = None,
) -> Rollout:
    """Run ``task`` to an outcome. Never raises for model or verifier failures: they become
    the ``timeout`` / ``harness_error`` / ``loop_killed`` outcomes with every earlier
    attempt kept. Every stream is watched for loops (``kill_policy``); ``on_event`` sees
    the stream and ``on_phase`` each step (waiting, repair k, verifying) as they happen.

    In agent mode (``task.mode``) each attempt is the agent loop (runner/agent.py) with
    ``tools`` (the built-in ones when None) in a workspace at ``verifier_dir.parent /
    "workspace"``, kept after the run; the verifier judges that workspace. A turn limit
    ends the rollout without repairs: ``passed`` when the verifier passes the workspace
    anyway, else ``failed`` with the limit as the error. ``isolation`` overrides the
    sandbox mode the verifier's options name (default ``auto``)."""
    started_at = time.time()
    start = time.monotonic()
    deadline = start + timeout_s
    messages: list[dict[str, Any]] = [{"role": "user", "content": task.prompt}]
    attempts: list[Attempt] = []
    trajectory: list[dict[str, Any]] = []
    total_attempts = 1 + repairs_allowed(task)
    outcome: Outcome = "failed"
    error: str | None = None
    answer: str = ""
    finish_reason: str | None = None
    turn_limit: str | None = None
    failure: FailureKind | None = None
    agent: AgentSession | None = None
    if task.mode == "agent":
        try:
            agent = _open_agent(task, client, tools, verifier_dir, isolation)
        except AgentbenchError as exc:
            return Rollout.harness_error(
                task.key, task.suite, task.id, client.spec.label, str(exc), task.pass_threshold
            )
        agent.max_tokens, agent.stream = max_tokens, stream
        agent.kill_policy = kill_policy or KillPolicy()

    for index in range(total_attempts):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            outcome, error = "timeout", f"timeout after {timeout_s:g}s"
            break
        attempt = Attempt(index=index)
        attempts.append(attempt)
        if agent is not None:
            run = agent.attempt(
                messages,
                index=index,
                deadline=deadline,
                timeout_s=timeout_s,
                on_event=on_event,
                on_phase=on_phase,
                phase="waiting" if index == 0 else f"repair {index}",
            )
            run.fill(attempt)
            trajectory.extend(run.trajectory)
            if run.stop in ("loop_killed", "timeout", "harness_error"):
                outcome, failure = run.stop, run.failure
                error = f"timeout after {timeout_s:g}s" if run.stop == "timeout" else run.error
                break
            answer, finish_reason, messages = run.text, run.finish_reason, run.messages
            turn_limit = run.error if run.stop == "turn_limit" else None
        else:
            request = ModelRequest(
                messages=tuple(messages),
                system=task.system,
                sampling=task.sampling,
                max_tokens=max_tokens,
                timeout_s=remaining,
                stream=stream,
                script_key=task.key,
                turn=index,
            )
            if on_phase is not None:
                on_phase("waiting" if index == 0 else f"repair {index}")
            t0 = time.monotonic()
            guard = LoopGuard(kill_policy or KillPolicy())
            sink = guard.chain(on_event)
            try:
                generation = client.generate(request, sink)
            except LoopKilled as exc:
                attempt.elapsed_s = time.monotonic() - t0
                attempt.answer, attempt.thinking = guard.answer, guard.thinking
                attempt.usage = recovered_usage(guard.answer, guard.thinking).as_dict()
                attempt.loop = guard.record()
                attempt.error = str(exc)
                trajectory.append({"killed": exc.evidence, "answer_chars": len(guard.answer)})
                outcome, error = "loop_killed", str(exc)
                break
            except ModelError as exc:
                attempt.elapsed_s = time.monotonic() - t0
                attempt.error = str(exc)
                partial = getattr(exc, "partial", None)
                if isinstance(partial, Generation):
                    _fill(attempt, partial)
                    trajectory.append(dict(partial.exchange))
                else:
                    trajectory.append(
                        {
                            "error": str(exc),
                            "status": exc.status,
                            "endpoint": exc.endpoint,
                            "sent": not isinstance(exc, CircuitOpen),
                            "retries": list(getattr(exc, "retries", None) or []),
                        }
                    )
                failure = failure_kind(exc)
                if isinstance(exc, ModelTimeout):
                    outcome, error = "timeout", f"timeout after {timeout_s:g}s"
                else:
                    outcome, error = "harness_error", str(exc)
                break
            attempt.elapsed_s = time.monotonic() - t0
            attempt.loop = guard.record()
            _fill(attempt, generation)
            trajectory.append(dict(generation.exchange))
            answer, finish_reason = generation.text, generation.finish_reason

        if on_phase is not None:
            on_phase("verifying")
        workspace = agent.workspace.path if agent is not None else None
        check = Check(answer, task, task.verifier.options, verifier_dir, workspace)
        if agent is not None:
            # the agent's commands ran as untrusted code: whatever they left in the
            # verifier dir (a forged report, where the sandbox leaves the host writable)
            # must never be read as this task's result
            discard_foreign_files(check)
        try:
            verdict = _verify_by(verifier, check, deadline)
        except Exception as exc:  # a crashing verifier is the harness's fault, not the model's
            outcome, failure = "harness_error", "verifier_crash"
            error = f"verifier {task.verifier.kind!r} raised {type(exc).__name__}: {exc}"
            attempt.error = error
            break
        if verdict is None:
            outcome, failure = "timeout", "verifier_timeout"
            error = (
                f"timeout after {timeout_s:g}s: verifier {task.verifier.kind!r} of attempt "
                f"{index + 1} had not finished"
            )
            attempt.error = error
            break
        attempt.verdict = asdict(verdict)
        cut_off = finish_reason == "length"
        if verdict.error is not None:
            outcome = "failed"
            break
        if verdict.reward >= task.pass_threshold:
            outcome = "passed"
            break
        outcome = "length_exceeded" if cut_off else "failed"
        if turn_limit is not None:
            error = turn_limit
            break
        attempts_left = total_attempts - index - 1
        if attempts_left:
            messages, attempt.feedback_sent = repair_request(
                task, messages, answer, verdict, attempts_left, cut_off
            )

    if agent is not None:
        trajectory.append(_workspace_entry(agent))
    rewards = [a.verdict["reward"] for a in attempts if a.verdict is not None]
    if outcome == "harness_error":
        rewards = []  # the rounds the harness could not run have no final score
    if outcome == "timeout" and failure is None:
        failure = "model_timeout"
    return Rollout(
        task_key=task.key,
        suite=task.suite,
        task_id=task.id,
        model=client.spec.label,
        outcome=outcome,
        reward=rewards[-1] if rewards else None,
        first_attempt_reward=attempts[0].verdict["reward"]
        if attempts and attempts[0].verdict is not None
        else None,
        pass_threshold=task.pass_threshold,
        attempts=attempts,
        usage=sum_usage([a.usage for a in attempts if a.usage]),
        started_at=started_at,
        elapsed_s=time.monotonic() - start,
        error=error,
        trajectory=trajectory,
        repair={
            "repairs": repairs_allowed(task),
            "mode": task.repair_mode,
            "feedback": task.feedback,
        },
        failure_kind=failure,
    )
