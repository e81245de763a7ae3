"""An ACP agent's process: started, connected (agents/acp.py's client over its pipes),
prompted, and stopped — on the host in the sandbox (:class:`AcpAgent`, a
``sandbox.LiveCommand``), or in the task's container (:class:`ContainerAcpAgent`, an
``exec`` whose stdin and stdout stay open, ``Container.exec_live``), with file requests
and terminals served there (agents/acp_services.py).

Either process offers what :class:`AgentProcess` says, so the session
(agents/acp_agent.py) reads its end the same way.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Protocol

from pytest_agentbench.agents.acp import CANCEL_GRACE_S, AcpClient, PromptResult
from pytest_agentbench.agents.acp_rpc import AcpError
from pytest_agentbench.agents.acp_services import ContainerFileRequests, ContainerTerminals
from pytest_agentbench.core.jsontypes import JsonObject
from pytest_agentbench.environments.container import Container
from pytest_agentbench.sandbox.isolation import Plan
from pytest_agentbench.sandbox.live import LiveCommand
from pytest_agentbench.sandbox.process import Limits


class ProcessEnd(Protocol):
    """How an agent's process ended (``sandbox.CommandResult``, ``LiveEnd``)."""

    @property
    def exit_code(self) -> int | None: ...

    @property
    def stderr(self) -> str: ...

    @property
    def killed_by(self) -> str | None: ...


class AgentProcess(Protocol):
    """A running agent we talk to over its stdin and stdout."""

    reason: str | None

    @property
    def stdin(self) -> IO[bytes]: ...

    @property
    def stdout(self) -> IO[bytes]: ...

    def stderr_text(self) -> str: ...

    def exit_code(self) -> int | None: ...

    def wait(self, timeout: float) -> bool: ...

    def finish(self, reason: str | None = None) -> ProcessEnd: ...


class AcpAgent:
    """An ACP agent under test, run in the sandbox: started with :meth:`start` (the
    process, ``initialize``, ``session/new`` in the workspace), asked with :meth:`prompt`
    (once for the task, once more per repair round: the same session), ended with
    :meth:`stop` (``session/cancel`` when a turn is still running, a short grace, then
    the whole process group is killed). ``env`` is the agent's whole environment;
    ``network``, ``read_only`` and ``writable`` as for ``run_command``."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        workspace: Path,
        env: Mapping[str, str],
        limits: Limits,
        plan: Plan | None,
        policy: str = "allow",
        on_event: Callable[[JsonObject], None] | None = None,
        network: bool = False,
        read_only: Sequence[Path] = (),
        writable: Sequence[Path] = (),
    ) -> None:
        if not argv:
            raise AcpError("an ACP agent needs a command (argv is empty)")
        self.argv = list(argv)
        self.workspace = workspace
        self.env = dict(env)
        self.limits = limits
        self.plan = plan
        self.policy = policy
        self._on_event = on_event
        self.network = network
        self.read_only = list(read_only)
        self.writable = list(writable)
        self.command: AgentProcess | None = None
        self.client: AcpClient | None = None
        self._prompting = threading.Event()

    def launch(self) -> AgentProcess:
        """The agent's process, started in the sandbox (raises SandboxError)."""
        if self.plan is None:
            raise AcpError("an ACP agent on the host needs the sandbox's plan")
        return LiveCommand.start_command(
            self.argv,
            cwd=self.workspace,
            env=self.env,
            limits=self.limits,
            plan=self.plan,
            network=self.network,
            read_only=self.read_only,
            writable=self.writable,
        )

    def connect(self, process: AgentProcess) -> AcpClient:
        """The ACP connection over ``process``'s pipes, serving the workspace."""
        return AcpClient(
            process.stdin,
            process.stdout,
            workspace=self.workspace,
            policy=self.policy,
            on_event=self._on_event,
        )

    def start(self, deadline: float) -> AcpClient:
        """Start the agent and open its session; raises AcpError (or SandboxError, a
        ContainerError in a container)."""
        self.command = self.launch()
        self.client = self.connect(self.command)
        self.client.start()
        self.client.initialize(deadline)
        self.client.new_session(deadline)
        return self.client

    def prompt(self, text: str, deadline: float) -> PromptResult:
        if self.client is None:
            raise AcpError("ACP agent not started")
        self._prompting.set()
        try:
            return self.client.prompt(text, deadline)
        finally:
            self._prompting.clear()

    def stop(self, reason: str | None = None, grace_s: float = CANCEL_GRACE_S) -> ProcessEnd:
        """End the agent. A running turn is cancelled first (``session/cancel``) and given
        ``grace_s`` to finish; then the agent's stdin is closed, which tells an ACP agent
        to exit, and it gets ``grace_s`` more; whatever still runs of its process group is
        killed. ``killed_by`` is ``reason`` when the agent had to be killed (``closed``
        when no reason was given: an agent that ignored the end of its input)."""
        command = self.command
        if command is None:
            raise AcpError("ACP agent not started")
        if reason is not None:
            if self.client is not None and self._prompting.is_set():
                self.client.cancel()
                end = time.monotonic() + grace_s
                while self._prompting.is_set() and time.monotonic() < end:
                    time.sleep(0.02)
            return command.finish(reason)
        with contextlib.suppress(OSError, ValueError):
            command.stdin.close()
        command.wait(grace_s)
        return command.finish("closed")


class ContainerAcpAgent(AcpAgent):
    """An ACP agent run in its task's ``container``, from ``workdir``: its stdio carried
    through an ``exec`` (``env`` is what the exec adds to the image's environment), its
    file requests and terminals served in the container; ``timeout_s`` bounds the exec,
    whose every process is killed inside at its end."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        container: Container,
        workdir: str,
        env: Mapping[str, str],
        timeout_s: float,
        seconds_left: Callable[[], float],
        policy: str = "allow",
        output_bytes: int = 65536,
        runaway_bytes: int = 1 << 24,
    ) -> None:
        super().__init__(
            argv, workspace=Path(workdir), env=env, limits=Limits(timeout_s=timeout_s),
            plan=None, policy=policy,
        )  # fmt: skip
        self.container = container
        self.workdir = workdir
        self.output_bytes = output_bytes
        self.runaway_bytes = runaway_bytes
        self.terminals = ContainerTerminals(container, workdir, seconds_left)

    def launch(self) -> AgentProcess:
        return self.container.exec_live(
            self.argv,
            timeout_s=self.limits.timeout_s,
            env=self.env,
            workdir=self.workdir,
            err_cap=self.output_bytes,
            runaway=self.runaway_bytes,
        )

    def connect(self, process: AgentProcess) -> AcpClient:
        return AcpClient(
            process.stdin,
            process.stdout,
            workspace=Path(self.workdir),
            agent_cwd=self.workdir,
            policy=self.policy,
            files=ContainerFileRequests(self.container, self.workdir),
            terminals=self.terminals,
        )

    def stop(self, reason: str | None = None, grace_s: float = CANCEL_GRACE_S) -> ProcessEnd:
        try:
            return super().stop(reason, grace_s)
        finally:
            self.terminals.close()
