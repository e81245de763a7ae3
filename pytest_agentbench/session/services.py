"""What one run talks to and must release: the model client (with its rate limit, retries
and circuit breaker), the verifiers and tools, the scripted server, the shared rate limit
served to xdist workers, and the folder of crash marks (see workers.py).

Each is made once, on first use, by whichever thread asks first (rollouts run on the
pool's threads, runner/pool.py); ``close()`` releases them at the end of the run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_agentbench.agents.gateway import Gateway
    from pytest_agentbench.config.settings import Settings
    from pytest_agentbench.models.base import ModelClient
    from pytest_agentbench.models.batch_store import BatchStore
    from pytest_agentbench.models.breaker import CircuitBreaker
    from pytest_agentbench.models.budget import BudgetLedger
    from pytest_agentbench.models.http import ProtocolClient
    from pytest_agentbench.models.ratelimit import Limit, SharedLimit
    from pytest_agentbench.models.ratelimit_remote import LimitService
    from pytest_agentbench.models.reply_reader import Received
    from pytest_agentbench.models.scripted import ScriptedTask
    from pytest_agentbench.runner.tools import Tool
    from pytest_agentbench.scripted.server import ScriptedServer
    from pytest_agentbench.session.judge_services import RunJudges
    from pytest_agentbench.verifiers.base import Verifier


class RunServices:
    """One per process. In an xdist worker ``limit_address`` is the controller's rate
    limit service and ``marks_dir`` the controller's crash-marks folder; in the
    controller (or a serial run) both are made here when first asked for."""

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
        self.config = config
        self.settings = settings
        self.is_worker = is_worker
        self.worker_id = worker_id
        self.server = server
        self.limit_address = limit_address
        self.marks_dir = marks_dir
        self.breaker: CircuitBreaker | None = None
        self.limit: SharedLimit | None = None
        self.limit_service: LimitService | None = None
        self.ledger: BudgetLedger | None = None
        #: the run's batch store (--agentbench-batch, session/batch.py), once complete
        self.batch_store: BatchStore | None = None
        self._client: ModelClient | None = None
        #: the clients of the run's other models, by name (several models in one run)
        self._clients: dict[str, ModelClient] = {}
        #: each model's client before the retry and limit wrappers, by model name
        self._bare: dict[str, ModelClient] = {}
        self._control_client: ModelClient | None = None
        self._control_server: ScriptedServer | None = None
        self._verifiers: dict[str, Verifier] | None = None
        self._tools: Mapping[str, Tool] | None = None
        #: the gateway agents under test call (agents/gateway.py), started on first use,
        #: and each model's client per wire protocol it relays
        self._gateway: Gateway | None = None
        self._protocol_clients: dict[tuple[str, str], ModelClient | None] = {}
        self._prepared: set[str] = set()
        self._preparing: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        #: the run's judges (session/judge_services.py), made when a task first needs one
        self._judges: RunJudges | None = None

    def serve_limit(self) -> str | None:
        """The address of the run's shared limit, served to workers from here (started
        on the first call); None when no limit was asked for."""
        limit = self.shared_limit()
        if limit is None:
            return None
        if self.limit_service is None:
            from pytest_agentbench.models.ratelimit_remote import LimitService

            self.limit_service = LimitService(limit)
        return self.limit_service.start()

    def marks(self) -> Path:
        """The folder where workers mark the verifications they are running (removed at
        the end); see pytest_agentbench.session.workers."""
        if self.marks_dir is None:
            import tempfile

            self.marks_dir = Path(tempfile.mkdtemp(prefix="agentbench-marks-"))
        return self.marks_dir

    def shared_limit(self) -> SharedLimit | None:
        """This process's SharedLimit (the controller's, under xdist), made once; None
        without --agentbench-max-connections or --agentbench-rpm."""
        settings = self.settings
        if self.limit is None and (settings.max_connections or settings.rpm):
            from pytest_agentbench.models.ratelimit import SharedLimit

            self.limit = SharedLimit(settings.max_connections, settings.rpm)
        return self.limit

    def client(self, model: str = "") -> ModelClient:
        """The client of the model called ``model`` ("" or the first model's name: the
        run's first model), made once through the ``pytest_agentbench_model_client`` hook
        with that model's settings. Every model has its own retries and circuit breaker;
        the shared rate limit bounds them all together."""
        settings = self.settings.for_model(model) if model else self.settings
        if settings is self.settings:
            made = self._client
            if made is None:  # every task asks: no lock once it exists
                with self._lock:
                    if self._client is None:
                        self._client = self.reliable(self._made(settings), settings)
                    made = self._client
            return made
        name = settings.model_name
        other = self._clients.get(name)
        if other is None:
            with self._lock:
                if name not in self._clients:
                    self._clients[name] = self.reliable(self._made(settings), settings)
                other = self._clients[name]
        return other

    def _made(self, settings: Settings) -> ModelClient:
        client = self.config.hook.pytest_agentbench_model_client(
            spec=settings.model, settings=settings
        )
        if client is None:
            raise pytest.UsageError(self.unclaimed(settings))
        if settings.serial_server and hasattr(client, "serves_one_at_a_time"):
            client.serves_one_at_a_time()  # declared: its queue is credited at once
        self._cached(client, settings)
        self._bare[settings.model_name] = client
        if self.batch_store is not None and hasattr(client, "batch"):
            client.batch = self.batch_store
        return client  # type: ignore[no-any-return]

    def bare(self, model: str = "") -> ProtocolClient[Received] | None:
        """The built-in protocol client of the model called ``model`` ("" the first),
        before its retry and limit wrappers; None when a plugin's client serves it."""
        from pytest_agentbench.models.http import ProtocolClient

        self.client(model)
        settings = self.settings.for_model(model) if model else self.settings
        made = self._bare.get(settings.model_name)
        return made if isinstance(made, ProtocolClient) else None

    def attach_batch(self, store: BatchStore) -> None:
        """Give every model's client (made now or later) the run's batch store: a request
        it holds an answer to is replayed from it. Judges and the gateway's protocol
        clients are not given it: their requests go live."""
        from pytest_agentbench.models.http import ProtocolClient

        with self._lock:
            self.batch_store = store
            for client in self._bare.values():
                if isinstance(client, ProtocolClient):
                    client.batch = store

    @staticmethod
    def _cached(client: ModelClient, settings: Settings) -> None:
        """Give ``client`` the run's response cache (--agentbench-cache): built-in protocol
        clients only; a plugin's client is never cached."""
        if settings.cache_dir is None:
            return
        from pytest_agentbench.models.http import ProtocolClient
        from pytest_agentbench.models.response_cache import ResponseCache

        if isinstance(client, ProtocolClient):
            client.cache = ResponseCache(settings.cache_dir, settings.cache_mode)  # type: ignore[arg-type]

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

    def unclaimed(self, settings: Settings) -> str:
        """Why no client serves the model: the built-in providers and the plugins asked."""
        from pytest_agentbench.hooks.plugin_hooks import plugin_names
        from pytest_agentbench.models.base import KNOWN_PROVIDERS

        spec = settings.model
        asked = plugin_names(self.config.pluginmanager, "pytest_agentbench_model_client")
        return (
            f"no model client for provider {spec.provider!r} (model {spec.label}): the "
            f"built-in providers are {', '.join(KNOWN_PROVIDERS)}; installed plugins "
            f"implementing pytest_agentbench_model_client: {', '.join(asked) or 'none'} "
            "(none claimed it; install the plugin that adds this provider)"
        )

    def reliable(self, client: ModelClient, settings: Settings) -> ModelClient:
        """Retries inside, the circuit breaker outside: a retried failure counts once."""
        bare = client
        from pytest_agentbench.models.breaker import BreakerClient
        from pytest_agentbench.models.retry import RetryingClient, RetryPolicy

        limit: Limit | None = self.shared_limit() if not self.is_worker else None
        if self.limit_address:
            from pytest_agentbench.models.ratelimit_remote import RemoteLimit

            limit = RemoteLimit(self.limit_address)
        if limit is not None:
            from pytest_agentbench.models.ratelimit import LimitedClient

            named = []
            if settings.max_connections:
                named.append(f"--agentbench-max-connections {settings.max_connections}")
            if settings.rpm:
                named.append(f"--agentbench-rpm {settings.rpm:g}")
            label = " and ".join(named) + " (shared by the whole run)"
            client = LimitedClient(client, limit, label=label)
        wrapped: ModelClient = RetryingClient(
            client, RetryPolicy(max_attempts=settings.max_retries + 1)
        )
        if settings.breaker_threshold > 0:
            from pytest_agentbench.models.breaker import CircuitBreaker

            breaker = CircuitBreaker(settings.breaker_threshold)
            if settings is self.settings:
                self.breaker = breaker
            wrapped = BreakerClient(wrapped, breaker)
        if settings.max_cost is not None and settings.price is not None:
            from pytest_agentbench.models.budget import BudgetClient

            replays = getattr(bare, "replays", None)
            wrapped = BudgetClient(wrapped, self.budget(), settings.price, replays)
        return wrapped

    def budget(self) -> BudgetLedger:
        """The run's spending ledger (--agentbench-max-cost), one file in the folder the
        controller shares with its workers (``marks``), opened once per process."""
        if self.ledger is None:
            from pytest_agentbench.models.budget import BudgetLedger

            assert self.settings.max_cost is not None
            self.ledger = BudgetLedger(self.marks() / "budget", self.settings.max_cost)
        return self.ledger

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

    def protocol_client(self, model: str, protocol: str) -> ModelClient | None:
        """The client of the model called ``model`` over ``protocol`` (``chat``,
        ``responses``, ``messages``), with the model's retries, breaker and the run's rate
        limit; None when the model's provider does not serve that protocol."""
        from pytest_agentbench.models.http import ProtocolClient
        from pytest_agentbench.models.siblings import sibling

        own = self.client(model)
        settings = self.settings.for_model(model) if model else self.settings
        key = (settings.model_name, protocol)
        with self._lock:
            if key not in self._protocol_clients:
                bare = self._bare.get(settings.model_name)
                made = sibling(bare, protocol) if bare is not None else None
                if made is not None and made is not bare:
                    self._cached(made, settings)
                    if isinstance(made, ProtocolClient) and isinstance(bare, ProtocolClient):
                        made.share_queue(bare)  # one server: one queue (models/queue.py)
                if made is bare and made is not None:
                    self._protocol_clients[key] = own
                else:
                    wrapped = self.reliable(made, settings) if made is not None else None
                    self._protocol_clients[key] = wrapped
            return self._protocol_clients[key]

    def close(self) -> None:
        if self._gateway is not None:
            self._gateway.close()
            self._gateway = None
        for made in self._protocol_clients.values():
            if made is not None and made is not self._client:
                made.close()
        self._protocol_clients.clear()
        if self._client is not None:
            self._client.close()
            self._client = None
        for client in self._clients.values():
            client.close()
        self._clients.clear()
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
        if self.limit_service is not None:
            self.limit_service.stop()
            self.limit_service = None
        if self.marks_dir is not None and not self.is_worker:
            import shutil

            shutil.rmtree(self.marks_dir, ignore_errors=True)
