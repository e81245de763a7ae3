"""The model clients of a run, one side of the run's services (session/services.py has
the other: what the tasks are played and checked with). Each model's client is made
through the ``pytest_agentbench_model_client`` hook and wrapped here: the response cache,
the batch store, retries, the circuit breaker, the rate limit shared by the whole run
(served to xdist workers from the controller) and the spending cap, whose ledger lives in
the folder the controller shares with its workers (``marks``); and each model's client
per wire protocol, which the gateway relays agents under test through.

Each is made once, on first use, by whichever thread asks first (rollouts run on the
pool's threads, runner/pool.py); ``close_clients`` and ``close_shared`` release them.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_agentbench.config.settings import Settings
    from pytest_agentbench.models.base import ModelClient
    from pytest_agentbench.models.batch_store import BatchStore
    from pytest_agentbench.models.breaker import CircuitBreaker
    from pytest_agentbench.models.budget import BudgetLedger
    from pytest_agentbench.models.http import ProtocolClient
    from pytest_agentbench.models.ratelimit import Limit, SharedLimit
    from pytest_agentbench.models.ratelimit_remote import LimitService
    from pytest_agentbench.models.reply_reader import Received


class ModelClients:
    """The clients of one process's models (the base of session/services.RunServices). In
    an xdist worker ``limit_address`` is the controller's rate limit service and
    ``marks_dir`` the controller's crash-marks folder; in the controller (or a serial run)
    both are made here when first asked for."""

    def __init__(
        self,
        config: pytest.Config,
        settings: Settings,
        *,
        is_worker: bool = False,
        limit_address: str | None = None,
        marks_dir: Path | None = None,
    ) -> None:
        self.config = config
        self.settings = settings
        self.is_worker = is_worker
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
        #: each model's client per wire protocol the gateway relays (agents/gateway.py)
        self._protocol_clients: dict[tuple[str, str], ModelClient | None] = {}
        self._lock = threading.Lock()

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

    def close_clients(self) -> None:
        """Close every model's client, those per wire protocol first."""
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

    def close_shared(self) -> None:
        """Stop the rate limit service; the controller removes the marks folder."""
        if self.limit_service is not None:
            self.limit_service.stop()
            self.limit_service = None
        if self.marks_dir is not None and not self.is_worker:
            import shutil

            shutil.rmtree(self.marks_dir, ignore_errors=True)
