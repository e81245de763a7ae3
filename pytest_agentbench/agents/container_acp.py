"""An ACP agent under test in its task's container: the ``acp`` kind on a task that names an
environment (a Harbor task) runs inside the rollout's container, as a command agent does
(agents/container_agent.py: the host's installation mounted read-only, the gateway
reached from inside, every process ended with the attempt).

Its stdio is carried through the engine's ``exec`` (``Container.exec_live``); what it
asks of us is served in the container (agents/acp_services.py): its file requests at its
paths there, its terminals run there, never the host's filesystem. Its workspace, and the
``cwd`` of its session, is the container's workdir.

The agent lives for one attempt: every process in the container is ended after each (as
for a command agent, and before the verifier runs), so a repair round starts it again
with a new session, prompted with the task and then the verifier's feedback.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from pytest_agentbench.agents.acp_agent import AcpOptions, AcpSession
from pytest_agentbench.agents.acp_process import AcpAgent, ContainerAcpAgent
from pytest_agentbench.agents.container_agent import ContainerPlace, InContainer
from pytest_agentbench.agents.external import Bridged
from pytest_agentbench.agents.gateway import Gateway
from pytest_agentbench.core.jsontypes import JsonValue
from pytest_agentbench.core.stream import EventSink
from pytest_agentbench.runner.agent_run import AgentRun
from pytest_agentbench.suites.task import Task


class ContainerAcpSession(InContainer, AcpSession):
    """An ACP agent's session whose agent runs in the rollout's container."""

    def __init__(
        self, task: Task, options: AcpOptions, gateway: Gateway, place: ContainerPlace
    ) -> None:
        super().__init__(task, options, place.workspace, gateway, place.route)
        self.container = place.workspace.container
        self.workdir = place.workspace.root
        self.rollout_dir = place.rollout_dir
        self.bridge = place.bridge
        self.mounts = place.mounts
        self.copy_problems = []

    def template_values(self) -> dict[str, str]:
        return self.inside_values(super().template_values())

    def make_agent(
        self, argv: list[str], started: Bridged, limit: float, deadline: float
    ) -> AcpAgent:
        """The agent as an ``exec`` in the container: its environment is the image's plus
        the agent table's ``env`` and the task's endpoint (never the host's keys)."""

        def seconds_left() -> float:
            return deadline - time.monotonic()

        return ContainerAcpAgent(
            started.command,
            container=self.container,
            workdir=self.workdir,
            env={**(self.process.env or {}), **started.endpoint.environment()},
            timeout_s=limit,
            seconds_left=seconds_left,
            policy=self.options.permissions,
            output_bytes=self.process.output_bytes,
            runaway_bytes=self.limits(limit).runaway_bytes,
        )

    def attempt(
        self,
        messages: Sequence[Mapping[str, JsonValue]],
        *,
        index: int,
        deadline: float,
        timeout_s: float,
        on_event: EventSink | None = None,
        on_phase: Callable[[str], None] | None = None,
        phase: str = "waiting",
    ) -> AgentRun:
        """One prompt turn in the container; then the agent is ended (its input closed, a
        grace, then killed) and so is every process left in the container."""
        run = super().attempt(
            messages, index=index, deadline=deadline, timeout_s=timeout_s,
            on_event=on_event, on_phase=on_phase, phase=phase,
        )  # fmt: skip
        self._end_agent()
        self.settle(run, timeout_s)
        return run

    def _end_agent(self) -> None:
        agent, self.agent = self.agent, None
        if agent is not None and agent.command is not None:
            agent.stop(grace_s=1.0)

    def close(self) -> list[str]:
        self._end_agent()
        return self.close_container()
