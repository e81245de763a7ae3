"""Run one task: generate, verify, repair with verifier feedback, decide the outcome."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_agentbench.core.jsontypes import JsonObject
from pytest_agentbench.core.records import Attempt, Failure, FailureKind, Outcome, Rollout
from pytest_agentbench.core.stream import EventSink
from pytest_agentbench.core.task_record import FailureStage
from pytest_agentbench.core.usage import sum_usage
from pytest_agentbench.errors import (
    AgentbenchError,
    BudgetExhausted,
    SandboxError,
    WorkerCrashed,
)
from pytest_agentbench.models.base import ModelClient
from pytest_agentbench.runner.agent import AgentSession
from pytest_agentbench.runner.agent_run import AgentRun, OpenAgent, Session
from pytest_agentbench.runner.loopguard import KillPolicy, fresh_guards
from pytest_agentbench.runner.pool import step_aside, step_back
from pytest_agentbench.runner.repair import repair_request, repairs_allowed
from pytest_agentbench.runner.turn_requests import first_messages
from pytest_agentbench.runner.verification import (
    own_time_limit,
    runs_sandboxed,
    verdict_dict,
    verify_by,
)
from pytest_agentbench.suites.task import Task
from pytest_agentbench.verifiers.base import Check, JudgeError, Verifier, out_of_time

if TYPE_CHECKING:  # the agent's tools (and their sandbox), a task's container: when used
    from pytest_agentbench.environments.container import Container
    from pytest_agentbench.runner.container_session import EnvironmentPlace
    from pytest_agentbench.runner.tools import Tool


def _open_session(
    task: Task,
    client: ModelClient,
    tools: Mapping[str, Tool] | None,
    verifier_dir: Path | None,
    isolation: str | None,
    *,
    max_tokens: int | None,
    stream: bool,
    kill_policy: KillPolicy,
    open_agent: OpenAgent | None = None,
    place: EnvironmentPlace | None = None,
) -> Session:
    """The session whose attempts generate the answers: the task's agent under test
    (``open_agent``), the agent loop over a fresh workspace in agent mode, else the same
    loop with no tools and one turn."""
    if task.agent is not None:
        if verifier_dir is None or open_agent is None:
            raise AgentbenchError(
                f"task {task.id!r} names an agent of kind {task.agent.kind!r}: it needs a "
                "rollout directory and an agent runner (the plugin's run provides both)"
            )
        return open_agent(task, verifier_dir.parent / "workspace")
    if task.mode != "agent":
        return AgentSession.plain(
            task, client, max_tokens=max_tokens, stream=stream, kill_policy=kill_policy
        )
    if verifier_dir is None:
        raise AgentbenchError(f"task {task.id!r}: agent mode needs a rollout directory")
    from pytest_agentbench.runner.tools import BUILTIN_TOOLS

    if tools is None:
        tools = {tool.name: tool for tool in BUILTIN_TOOLS}
    if task.environment is not None:
        if place is None:
            raise AgentbenchError(
                f"task {task.id!r} runs in a container: it needs the run's engine settings "
                "(the plugin's run provides them)"
            )
        from pytest_agentbench.runner.container_session import ContainerAgentSession

        return ContainerAgentSession.start(
            task,
            client,
            tools,
            verifier_dir.parent,
            place,
            max_tokens=max_tokens,
            stream=stream,
            kill_policy=kill_policy,
        )
    mode = isolation or str(task.verifier.options.get("isolation", "auto"))
    root = verifier_dir.parent / "workspace"
    return AgentSession.open(
        task,
        client,
        tools,
        root,
        isolation=mode,
        max_tokens=max_tokens,
        stream=stream,
        kill_policy=kill_policy,
    )


def _container(session: Session) -> Container | None:
    """The container the session works in (runner/container_session.container_of), its
    module imported only for a session that has one."""
    if getattr(session, "container", None) is None:
        return None
    from pytest_agentbench.runner.container_session import container_of

    return container_of(session)


def _where(verifier_dir: Path | None) -> str | None:
    """The verifier folder, the evidence of a verifier's failure (None when there is none)."""
    return None if verifier_dir is None else str(verifier_dir)


#: How long past its own time limit a judge's verification is waited for, so that the
#: judge itself says why it stopped (and writes verifier/judge.json).
JUDGE_GRACE_S = 5.0


def _verified_anyway(task: Task, session: Session, run: AgentRun, deadline: float) -> str | None:
    """What the record says of an attempt that ran out of the agent's time on a Harbor
    task, verified anyway as Harbor does (the agent's processes are ended by then: its
    session ends them inside the container); None for any other attempt, and when the
    task's own deadline has passed (no time is left to verify)."""
    if run.stop != "timeout" or task.verifier.kind != "harbor" or _container(session) is None:
        return None
    if deadline - time.monotonic() <= 0:
        return None
    ran_out = run.error or "the agent ran out of time"
    return f"{ran_out}; verified anyway, as Harbor does"


def _workspace_entry(agent: Session) -> JsonObject | None:
    """The trajectory's last entry in agent mode: where the workspace was kept, what was
    pruned from it, and the containment its commands ran under. None without one."""
    pruned = agent.close()
    if agent.workspace is None:
        return None
    return {
        "workspace": str(agent.workspace.path),
        "pruned": [*pruned],
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
    open_agent: OpenAgent | None = None,
    place: EnvironmentPlace | None = None,
) -> Rollout:
    """Run ``task`` to an outcome. Never raises for model or verifier failures: they become
    the ``timeout`` / ``harness_error`` / ``loop_killed`` outcomes with every earlier
    attempt kept. Every stream is watched for loops (``kill_policy``); ``on_event`` sees
    the stream and ``on_phase`` each step (waiting, repair k, verifying) as they happen.

    Every attempt is generated by one path, the agent loop (runner/agent.py): for a plain
    answer task it offers no tools and makes one model call. In agent mode
    (``task.mode``) it offers ``tools`` (the built-in ones when None) in a workspace at
    ``verifier_dir.parent / "workspace"``, kept after the run; the verifier judges that
    workspace. A turn limit ends the rollout without repairs: ``passed`` when the verifier
    passes the workspace anyway, else ``failed`` with the limit as the error.
    ``isolation`` overrides the sandbox mode the verifier's options name (default
    ``auto``). A task naming an agent under test (``task.agent``) is run by the session
    ``open_agent`` opens; an attempt its agent failed (it exited with an error, or made
    no model call) fails unverified, without repairs."""
    started_at = time.time()
    start = time.monotonic()
    deadline = start + timeout_s
    messages: list[JsonObject] = first_messages(task)
    attempts: list[Attempt] = []
    trajectory: list[JsonObject] = []
    total_attempts = 1 + repairs_allowed(task)
    outcome: Outcome = "failed"
    error: str | None = None
    answer: str = ""
    finish_reason: str | None = None
    turn_limit: str | None = None
    failure: FailureKind | None = None
    failure_detail: Failure | None = None  # a model error's status, retries and detail
    try:
        session = _open_session(
            task,
            client,
            tools,
            verifier_dir,
            isolation,
            max_tokens=max_tokens,
            stream=stream,
            kill_policy=kill_policy or KillPolicy(),
            open_agent=open_agent,
            place=place,
        )
    except AgentbenchError as exc:
        stage: FailureStage = "sandbox" if isinstance(exc, SandboxError) else "harness"
        return Rollout.harness_error(
            task.key,
            task.suite,
            task.id,
            client.spec.label,
            str(exc),
            task.pass_threshold,
            failure=Failure(kind="harness", stage=stage, message=str(exc)),
        )

    judge_watch = fresh_guards(kill_policy or KillPolicy())
    rewards: list[float] = []  # the verdicts' rewards, one per attempt that reached one
    first_attempt_reward: float | None = None
    for index in range(total_attempts):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            outcome, error = "timeout", f"timeout after {timeout_s:g}s"
            failure_detail = Failure(kind="model_timeout", stage="deadline", message=error)
            break
        if index:
            step_back()  # a repair round is a model call: it counts in the pool again
        attempt = Attempt(index=index)
        attempts.append(attempt)
        run = session.attempt(
            messages,
            index=index,
            deadline=deadline,
            timeout_s=timeout_s,
            on_event=on_event,
            on_phase=on_phase,
            phase="waiting" if index == 0 else f"repair {index}",
        )
        run.fill(attempt)
        deadline += run.waited_s  # time queued at the server is not the task's
        trajectory.extend(run.trajectory)
        ran_out = _verified_anyway(task, session, run, deadline)
        if run.stop in ("loop_killed", "timeout", "harness_error") and ran_out is None:
            outcome, failure = run.stop, run.failure
            failure_detail = run.failure_detail
            built_in = isinstance(session, AgentSession)
            # the built-in loop in a container (ContainerAgentSession) hit the agent's limit
            in_container = built_in and getattr(session, "container", None) is not None
            agent_limit = in_container and bool(run.error)
            timed_out = run.stop == "timeout" and (built_in or not run.error) and not agent_limit
            error = f"timeout after {timeout_s:g}s" if timed_out else run.error
            break
        if ran_out is not None:
            attempt.error = ran_out
        if run.stop == "agent_failed":
            outcome, error = "failed", run.error
            attempt.error = error
            break
        answer, finish_reason, messages = run.text, run.finish_reason, run.messages
        turn_limit = run.error if run.stop == "turn_limit" else None

        if on_phase is not None:
            on_phase("verifying")
        workspace = session.workspace.path if session.workspace is not None else None
        # a judge's time is the judge's: its own limit bounds it, and the task's clock
        # stops meanwhile (the answer is not charged for a slow judge)
        own_limit = own_time_limit(verifier, task.verifier.options)
        verifying_from = time.monotonic()
        verify_deadline = deadline if own_limit is None else verifying_from + own_limit
        check = Check(
            answer,
            task,
            task.verifier.options,
            verifier_dir,
            workspace,
            deadline=verify_deadline,
            watch=judge_watch,  # a judge's stream is watched like the model's
            container=_container(session),
        )
        if workspace is not None:
            # the agent's commands ran as untrusted code: whatever they left in the
            # verifier dir (a forged report, where the sandbox leaves the host writable)
            # must never be read as this task's result
            from pytest_agentbench.verifiers.sandboxed import discard_foreign_files

            discard_foreign_files(check)
        if runs_sandboxed(verifier):
            # a sandboxed verification uses a core (sandbox/cpuslots.py), not the model:
            # the pool may start the next rollout's generation meanwhile (runner/pool.py).
            # An in-process verifier keeps its place: it would share this process (and a
            # crash of it ends the process), so it overlaps nothing
            step_aside()
        try:
            grace = 0.0 if own_limit is None else JUDGE_GRACE_S  # it says why itself first
            verdict = verify_by(verifier, check, verify_deadline + grace)
        except WorkerCrashed as exc:  # not a crash: the reason the controller gave the first time
            outcome, failure, error = "harness_error", "harness", str(exc)
            failure_detail = Failure.of(failure, error, evidence=_where(verifier_dir))
            attempt.error = error
            break
        except JudgeError as exc:  # the judge's failure: a harness error of its own kind
            outcome, failure, error = "harness_error", "judge_error", str(exc)
            failure_detail = Failure.of(failure, error, evidence=_where(verifier_dir))
            attempt.error = error
            attempt.judge = exc.record
            break
        except BudgetExhausted as exc:  # a judge call the cap refused: the task was not
            # fully run, so it is not run (reason budget), never failed nor judged
            outcome, failure, error = "harness_error", "budget", str(exc)
            failure_detail = Failure.of(failure, error)
            attempt.error = error
            break
        except Exception as exc:  # a crashing verifier is the harness's fault, not the model's
            outcome, failure = "harness_error", "verifier_crash"
            error = f"verifier {task.verifier.kind!r} raised {type(exc).__name__}: {exc}"
            failure_detail = Failure.of(failure, error, evidence=_where(verifier_dir))
            attempt.error = error
            break
        if own_limit is not None:
            deadline += time.monotonic() - verifying_from
        if verdict is None and own_limit is not None:  # no verdict in the judge's own time
            outcome, failure = "harness_error", "judge_error"
            error = out_of_time(own_limit)
            failure_detail = Failure.of(failure, error, evidence=_where(verifier_dir))
            attempt.error = error
            break
        if verdict is None:
            outcome, failure = "timeout", "verifier_timeout"
            error = (
                f"timeout after {timeout_s:g}s: verifier {task.verifier.kind!r} of attempt "
                f"{index + 1} had not finished"
            )
            failure_detail = Failure.of(failure, error, evidence=_where(verifier_dir))
            attempt.error = error
            break
        attempt.verdict = verdict_dict(verdict)
        judged = verdict.details.get("judge") if task.verifier.kind == "judge" else None
        if isinstance(judged, dict):
            attempt.judge = judged
        rewards.append(verdict.reward)
        if index == 0:
            first_attempt_reward = verdict.reward
        cut_off = finish_reason == "length"
        if verdict.error is not None:
            outcome = "failed"
            break
        if ran_out is not None:  # no repair after the agent's time: the verdict decides
            passed = verdict.error is None and verdict.reward >= task.pass_threshold
            outcome, error = ("passed" if passed else "timeout"), ran_out
            failure = None if passed else run.failure
            failure_detail = None if passed else run.failure_detail
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

    kept = _workspace_entry(session)
    if kept is not None:
        trajectory.append(kept)
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
        first_attempt_reward=first_attempt_reward,
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
        failure=failure_detail,
    )
