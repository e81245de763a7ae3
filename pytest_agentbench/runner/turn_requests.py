"""The requests of a rollout's model calls, built in one place: the first request's
conversation (the task's prompt), the tools an agent-mode task is offered, and each
call's request with its task, call and epoch metadata. A request built ahead of the
rollout (the batch of first-round requests, session/batch.py) is thus the one the
rollout's loop (runner/agent.py) sends, body and cache key alike."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.models.base import (
    REQUEST_CALL,
    REQUEST_EPOCH,
    REQUEST_TASK,
    ModelRequest,
    ToolSpec,
)
from pytest_agentbench.suites.task import Task

if TYPE_CHECKING:  # the tools: imported by sessions that run tools only
    from pytest_agentbench.runner.tools import Tool


def first_messages(task: Task) -> list[JsonObject]:
    """The conversation of a rollout's first request: the task's prompt."""
    return [{"role": "user", "content": task.prompt}]


def turn_request(
    task: Task,
    messages: Sequence[Mapping[str, JsonValue]],
    *,
    tools: tuple[ToolSpec, ...] = (),
    max_tokens: int | None,
    stream: bool,
    call: int,
    timeout_s: float | None = None,
) -> ModelRequest:
    """The request of one model call of ``task``'s rollout: ``call`` is its number in the
    rollout (0 for the first). The one place a rollout's requests are built, so a request
    built ahead of the rollout (the batch of first-round requests, session/batch.py) is
    the one the rollout sends, body and cache key alike."""
    return ModelRequest(
        messages=tuple(messages),
        system=task.system,
        sampling=task.sampling,
        tools=tools,
        max_tokens=max_tokens,
        timeout_s=timeout_s,
        stream=stream,
        metadata={
            REQUEST_TASK: task.key,
            REQUEST_CALL: str(call),
            REQUEST_EPOCH: str(task.epoch or 0),
        },
    )


def first_request(
    task: Task, *, max_tokens: int | None, stream: bool, tools: Mapping[str, Tool] | None = None
) -> ModelRequest:
    """The first request of a rollout of ``task``, as ``AgentSession.attempt`` sends it
    (without its deadline): no tools for a plain answer; in agent mode the task's tools
    out of ``tools`` (all the run's tools by name), in the task's order."""
    specs = tool_specs(task, tools) if task.mode == "agent" and tools is not None else ()
    return turn_request(
        task, first_messages(task), tools=specs, max_tokens=max_tokens, stream=stream, call=0
    )


def tool_specs(task: Task, tools: Mapping[str, Tool]) -> tuple[ToolSpec, ...]:
    """The specs of the tools an agent-mode ``task`` is offered, in its order."""
    return tuple(tools[name].spec for name in task.tools)
