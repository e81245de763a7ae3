"""Which runner opens the session of a task's agent under test, by the agent's kind.

The session glue builds one ``AgentContext`` per task (the run's gateway, the task's
model per protocol, the sandbox mode, the kill policy) and hands ``agent_opener(context)``
to the rollout, which calls it with the task and its workspace folder.
"""

from __future__ import annotations

import dataclasses
from dataclasses import field
from pathlib import Path

from pytest_agentbench.agents.gateway import Gateway
from pytest_agentbench.agents.route import ClientFor
from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.errors import AgentbenchError
from pytest_agentbench.runner.agent_run import OpenAgent, Session
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


def open_container_session(
    task: Task,
    root: Path,
    gateway: Gateway,
    clients: ClientFor,
    model_label: str,
    place: EnvironmentPlace,
    *,
    kill_policy: KillPolicy,
) -> Session:
    """The session of ``task``'s agent under test in the task's container (started here;
    its image built or reused): a command agent's (agents/container_agent.py) or an ACP
    agent's (agents/container_acp.py). ``root`` is the host folder the rollout's
    ``workspace`` would be: kept empty, the files are the container's. Raises AgentbenchError (a
    ContainerError when the engine fails): an agent kind not run in a container, a
    mount not there, an image that does not build; nothing is left running."""
    from pytest_agentbench.agents.acp_agent import AcpOptions
    from pytest_agentbench.agents.command import CommandOptions
    from pytest_agentbench.agents.container_acp import ContainerAcpSession
    from pytest_agentbench.agents.container_agent import (
        ContainerCommandSession,
        own_timeout,
        start_in_container,
    )

    agent = task.agent
    if agent is None or task.environment is None:
        raise AgentbenchError(f"task {task.id!r} has no agent under test and environment")
    if agent.kind not in ("command", "acp"):
        raise AgentbenchError(
            f"task {task.id!r}: an agent of kind {agent.kind!r} does not run in a task's "
            "container (command and acp agents do: docs/environments.md, Agents under test "
            "in a container)"
        )
    if agent.kind == "acp":
        acp = AcpOptions.parse(agent.options)
        acp = dataclasses.replace(acp, process=own_timeout(acp.process, task))
        started = start_in_container(task, root, gateway, clients, model_label, place, kill_policy)
        return ContainerAcpSession(task, acp, gateway, started)
    options = CommandOptions.parse(agent.options)
    options = dataclasses.replace(options, process=own_timeout(options.process, task))
    started = start_in_container(task, root, gateway, clients, model_label, place, kill_policy)
    return ContainerCommandSession(
        task, options, started.workspace, gateway, started.route,
        rollout_dir=started.rollout_dir, bridge=started.bridge, mounts=started.mounts,
    )  # fmt: skip


def agent_opener(context: AgentContext) -> OpenAgent:
    """``open_session`` bound to ``context``: what run_rollout's ``open_agent`` takes."""

    def opener(task: Task, root: Path) -> Session:
        return open_session(task, root, context)

    return opener
