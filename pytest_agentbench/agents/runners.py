"""Which runner opens the session of a task's agent under test, by the agent's kind.

The session glue builds one ``AgentContext`` per task (the run's gateway, the task's
model per protocol, the sandbox mode, the kill policy) and hands ``agent_opener(context)``
to the rollout, which calls it with the task and its workspace folder.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pytest_agentbench.agents.gateway import Gateway
from pytest_agentbench.agents.route import ClientFor
from pytest_agentbench.errors import AgentbenchError
from pytest_agentbench.runner.agent import OpenAgent, Session
from pytest_agentbench.runner.container_session import EnvironmentPlace
from pytest_agentbench.runner.loopguard import KillPolicy
from pytest_agentbench.suites.task import Task

#: The agent kinds a suite may name (the suite schema lists the same).
AGENT_KINDS = ("command", "python", "acp")


@dataclass(frozen=True)
class AgentContext:
    """What every agent runner is given for one task: the run's ``gateway`` (one per
    process), the task's model per protocol (``clients``: ``chat`` / ``responses`` /
    ``messages`` → a client, or None where the model's provider does not speak it) and
    its label, the sandbox mode (``auto`` / ``strict`` / ``basic``), the loop kill
    policy, and where the containers come from for a task that names an environment
    (its agent then runs in the task's container: agents/container_agent.py)."""

    gateway: Gateway
    clients: ClientFor
    model_label: str
    isolation: str = "auto"
    kill_policy: KillPolicy = field(default_factory=KillPolicy)
    place: EnvironmentPlace | None = None


def open_session(task: Task, root: Path, context: AgentContext) -> Session:
    """The session of ``task``'s agent, with its workspace at ``root``."""
    agent = task.agent
    if agent is None:
        raise AgentbenchError(f"task {task.id!r} names no agent under test")
    if task.environment is not None:
        if context.place is None:
            raise AgentbenchError(
                f"task {task.id!r} runs in a container: its agent needs the run's engine "
                "settings (the plugin's run provides them)"
            )
        from pytest_agentbench.agents.container_agent import open_container_session

        return open_container_session(
            task,
            root,
            context.gateway,
            context.clients,
            context.model_label,
            context.place,
            kill_policy=context.kill_policy,
        )
    if agent.kind == "command":
        from pytest_agentbench.agents.command import open_command_session

        return open_command_session(
            task,
            root,
            context.gateway,
            context.clients,
            context.model_label,
            isolation=context.isolation,
            kill_policy=context.kill_policy,
        )
    if agent.kind == "python":
        from pytest_agentbench.agents.python_agent import open_python_session

        return open_python_session(
            task,
            root,
            context.gateway,
            context.clients,
            context.model_label,
            isolation=context.isolation,
            kill_policy=context.kill_policy,
        )
    if agent.kind == "acp":
        from pytest_agentbench.agents.acp_agent import open_acp_session

        return open_acp_session(
            task,
            root,
            context.gateway,
            context.clients,
            context.model_label,
            isolation=context.isolation,
            kill_policy=context.kill_policy,
        )
    raise AgentbenchError(
        f"task {task.id!r}: unknown agent kind {agent.kind!r}; known: {', '.join(AGENT_KINDS)}"
    )


def agent_opener(context: AgentContext) -> OpenAgent:
    """``open_session`` bound to ``context``: what run_rollout's ``open_agent`` takes."""

    def opener(task: Task, root: Path) -> Session:
        return open_session(task, root, context)

    return opener
