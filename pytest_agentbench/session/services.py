"""What one run talks to and must release, one per process. Its model clients (with
their rate limit, retries, circuit breaker and spending cap, and each one per wire
protocol) are the base class, session/model_clients.ModelClients; here is what the
run's tasks are played and checked with: the verifiers and the judges, the agent tools,
the scripted servers (the run's, and the one controls play on), each suite's scripted
replies registered ahead of its tasks, and the gateway agents under test call.

Each is made once, on first use, by whichever thread asks first (rollouts run on the
pool's threads, runner/pool.py); ``close()`` releases them at the end of the run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_agentbench.session.model_clients import ModelClients

if TYPE_CHECKING:
    from pytest_agentbench.agents.gateway import Gateway
    from pytest_agentbench.config.settings import Settings
    from pytest_agentbench.models.base import ModelClient
    from pytest_agentbench.models.scripted import ScriptedTask
    from pytest_agentbench.runner.tools import Tool
    from pytest_agentbench.scripted.server import ScriptedServer
    from pytest_agentbench.session.judge_services import RunJudges
    from pytest_agentbench.verifiers.base import Verifier


class RunServices(ModelClients):
    """One per process: the run's model clients (``ModelClients``, where ``limit_address``
    and ``marks_dir`` are explained) and what its tasks are played and checked with."""

    def __init__(
        self,
        config: pytest.Config,
        settings: Settings,
        *,
        is_worker: bool = False,
        worker_id: str = "",
        server: ScriptedServer | None = None,
        limit_address: str | None = None,
        marks_dir: Path | None = None,
    ) -> None:
        super().__init__(
            config,
            settings,
            is_worker=is_worker,
            limit_address=limit_address,
            marks_dir=marks_dir,
        )
        self.worker_id = worker_id
        self.server = server
        self._control_client: ModelClient | None = None
        self._control_server: ScriptedServer | None = None
        self._verifiers: dict[str, Verifier] | None = None
        self._tools: Mapping[str, Tool] | None = None
        #: the gateway agents under test call (agents/gateway.py), started on first use
        self._gateway: Gateway | None = None
        self._prepared: set[str] = set()
        self._preparing: dict[str, threading.Lock] = {}
        #: the run's judges (session/judge_services.py), made when a task first needs one
        self._judges: RunJudges | None = None

    def control_client(self) -> ModelClient:
        """The scripted client that plays controls (suites/controls.py): the run's own
        client when the run's model is scripted, else a scripted client on a scripted
        server of this process's own, started on first use."""
        if self.settings.model.provider == "scripted":
            return self.client()
        made = self._control_client
        if made is not None:
            return made
        with self._lock:
            if self._control_client is None:
                from pytest_agentbench.models.base import ModelSpec
                from pytest_agentbench.models.scripted import scripted_client
                from pytest_agentbench.scripted.server import ScriptedServer

                self._control_server = server = ScriptedServer()
                spec = ModelSpec("scripted", "scripted")
                self._control_client = scripted_client(spec, server.start())
            return self._control_client

    def prepare(
        self,
        key: str,
        tasks: Iterable[ScriptedTask],
        model: str = "",
        *,
        controls: bool = False,
    ) -> None:
        """Register a suite's scripted replies once, before any of its tasks runs, when
        the model's client is the scripted one (models/scripted.register_scripts);
        concurrent callers for the same suite wait for the first. A failure (ModelError)
        propagates and is tried again by the suite's next task. With ``controls`` the tasks
        are control runs, registered on the control client."""
        if controls:
            key = f"{key}::controls"
        if key in self._prepared:  # every task asks: no lock once it is done
            return
        with self._lock:
            if key in self._prepared:
                return
            gate = self._preparing.setdefault(key, threading.Lock())
        with gate:
            with self._lock:
                if key in self._prepared:
                    return
            if controls and self.settings.model.provider != "scripted":
                from pytest_agentbench.models.scripted import register_scripts

                register_scripts(self.control_client(), tasks)
            else:
                name = "" if controls else model
                self.client(name)
                settings = self.settings.for_model(name) if name else self.settings
                # only the scripted provider's client takes replies ahead of a task; a
                # real model's run never imports the scripted client (nor its protocols)
                if settings.model.provider == "scripted":
                    from pytest_agentbench.models.scripted import register_scripts

                    register_scripts(self._bare[settings.model_name], tasks)
            with self._lock:
                self._prepared.add(key)

    def verifiers(self) -> dict[str, Verifier]:
        """Every verifier by kind; a plugin's verifier replaces a built-in of the same kind.
        In an xdist worker each one marks its verifications (workers.VerifyMarks)."""
        if self._verifiers is None:
            found: dict[str, Verifier] = {}
            for batch in reversed(self.config.hook.pytest_agentbench_verifiers()):
                for verifier in batch or ():
                    found[verifier.kind] = verifier
            found = self._with_judge(found)
            wrap: Callable[[Verifier], Verifier] | None = None
            if self.is_worker and self.marks_dir is not None:
                from pytest_agentbench.session.workers import VerifyMarks

                wrap = VerifyMarks(self.marks_dir, self.worker_id).guard
                found = {kind: wrap(verifier) for kind, verifier in found.items()}
            from pytest_agentbench.session.verifier_table import VerifierTable

            self._verifiers = VerifierTable(found, wrap=wrap)
        return self._verifiers

    @property
    def judges(self) -> RunJudges:
        """The run's judges: each judge's client and price (imported on first use)."""
        with self._lock:
            if self._judges is None:
                from pytest_agentbench.session.judge_services import RunJudges

                self._judges = RunJudges(self)
            return self._judges

    def _with_judge(self, found: dict[str, Verifier]) -> dict[str, Verifier]:
        """The built-in judge verifier bound to this run's judges (a plugin's ``judge``
        kind is left as it is), imported when a task first uses it."""
        from pytest_agentbench.verifiers.base import LazyVerifier

        judge = found.get("judge")
        if judge is None:
            return found
        settings = self.settings

        def bound() -> Verifier:
            from pytest_agentbench.verifiers.base import resolved
            from pytest_agentbench.verifiers.judge import JudgeRuntime, JudgeVerifier

            real = resolved(judge)
            assert real is not None
            if not isinstance(real, JudgeVerifier):
                return real
            runtime = JudgeRuntime(
                self.judges.client,
                override=settings.judge,
                fallback=settings.judge_ini,
                timeout_s=settings.judge_timeout_s,
                timeout_ini_s=settings.judge_timeout_ini_s,
            )
            return real.bind(runtime)

        return {**found, "judge": LazyVerifier("judge", bound)}

    def scripted_url(self) -> str:
        """The URL of a scripted server for a scripted judge: the run's, else one of this
        process's own (the one controls play on)."""
        if self.settings.model.provider == "scripted" and self.settings.base_url:
            return self.settings.base_url
        self.control_client()
        with self._lock:
            assert self._control_server is not None or self.settings.base_url
            if self._control_server is not None:
                return self._control_server.url
        return str(self.settings.base_url)

    def tools(self) -> Mapping[str, Tool]:
        """Every agent tool by name; a plugin's tool replaces a built-in of the same name.
        The hook is called on the first look (hooks/plugin_hooks.Gathered): a run whose
        tasks ask for no tool never imports the built-in ones, nor their sandbox."""
        if self._tools is None:
            from pytest_agentbench.hooks.plugin_hooks import Gathered

            self._tools = Gathered(self._gather_tools)
        return self._tools

    def _gather_tools(self) -> dict[str, Tool]:
        found: dict[str, Tool] = {}
        for batch in reversed(self.config.hook.pytest_agentbench_tools()):
            for tool in batch or ():
                found[tool.name] = tool
        return found

    def gateway(self) -> Gateway:
        """This process's gateway for agents under test, started on first use."""
        with self._lock:
            if self._gateway is None:
                from pytest_agentbench.agents.gateway import Gateway

                self._gateway = Gateway()
            return self._gateway

    def close(self) -> None:
        if self._gateway is not None:
            self._gateway.close()
            self._gateway = None
        self.close_clients()
        if self._judges is not None:
            self._judges.close()
        if self._control_client is not None:
            self._control_client.close()
            self._control_client = None
        if self._control_server is not None:
            self._control_server.stop()
            self._control_server = None
        if self.server is not None:
            self.server.stop()
            self.server = None
        self.close_shared()
