"""The state of one benchmark run in one process: settings, run folder, the model client,
the verifiers, and (in the controller) the scripted server and the collected records."""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_agentbench.artifacts.paths import new_run_id, point_latest
from pytest_agentbench.runner.pool import RolloutPool
from pytest_agentbench.stash import STATE_KEY as STATE_KEY  # re-exported: the glue's key
from pytest_agentbench.urls import url_secrets

if TYPE_CHECKING:
    from pytest_agentbench.models.base import ModelClient
    from pytest_agentbench.models.breaker import CircuitBreaker
    from pytest_agentbench.models.ratelimit import SharedLimit
    from pytest_agentbench.models.ratelimit_remote import LimitService
    from pytest_agentbench.report.gate import GateResult
    from pytest_agentbench.report.live import LiveStatus, StatusWriter
    from pytest_agentbench.runner.tools import Tool
    from pytest_agentbench.scripted.server import ScriptedServer
    from pytest_agentbench.settings import Settings
    from pytest_agentbench.verifiers.base import Verifier

#: Environment variables whose values never reach an artifact, set or not for this run.
SECRET_ENV = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
#: Environment variables whose URL credentials (``user:password@``) are secrets too.
SECRET_URL_ENV = ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL")


def resume_dir(out_dir: Path, target: str) -> Path:
    """The run folder ``--agentbench-resume`` names (``latest``: the newest in out_dir)."""
    path = out_dir / "latest" if target == "latest" else Path(target)
    if not path.is_dir():
        raise pytest.UsageError(
            f"--agentbench-resume: {path} is not a run folder"
            + (" (no earlier run in this results folder)" if target == "latest" else "")
        )
    return path.resolve()


@dataclass
class RunState:
    """One per process. ``records`` fills only where reports arrive (serial run, or the
    xdist controller); workers only run tasks and write their artifacts."""

    config: pytest.Config
    settings: Settings
    run_id: str
    run_dir: Path
    is_worker: bool
    start_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    records: list[dict[str, Any]] = field(default_factory=list)
    server: ScriptedServer | None = None
    failed_reports: int = 0
    gate: GateResult | None = None
    queue: list[Any] = field(default_factory=list)
    positions: dict[str, int] = field(default_factory=dict)
    pool: RolloutPool | None = None
    restore_sigterm: Any = None
    breaker: CircuitBreaker | None = None
    live: LiveStatus | None = None
    status: StatusWriter | None = None
    limit: SharedLimit | None = None
    limit_service: LimitService | None = None
    limit_address: str | None = None
    marks_dir: Path | None = None
    worker_id: str = ""
    started: bool = False
    selected: int = 0
    deselected: int = 0
    skipped: set[str] = field(default_factory=set)
    ran_here: set[str] = field(default_factory=set)
    coverage: dict[str, Any] | None = None
    _interactor: Any = None
    _client: ModelClient | None = None
    _verifiers: dict[str, Verifier] | None = None
    _tools: dict[str, Tool] | None = None
    _planned_to: int = 0
    _prepared: set[str] = field(default_factory=set)
    _preparing: dict[str, threading.Lock] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def for_controller(cls, config: pytest.Config, settings: Settings) -> RunState:
        """A new run folder, or with ``resume`` the folder of the run to finish. Nothing is
        made on disk here: the folder and ``latest`` wait for the first task that runs
        (``ensure_run_dir``), so ``--collect-only`` or a failed collection leave no trace."""
        if settings.resume:
            run_dir = resume_dir(settings.out_dir, settings.resume)
        else:
            run_dir = (settings.out_dir / new_run_id()).resolve()
        return cls(config, settings, run_dir.name, run_dir.resolve(), is_worker=False)

    def ensure_run_dir(self) -> Path:
        """Make the run folder and point ``latest`` at it, once, when a task first runs in
        this process (an xdist worker points it at the same folder); ``started`` is then
        True."""
        if self.started:
            return self.run_dir
        with self._lock:
            if not self.started:
                out_dir = self.settings.out_dir
                self.run_dir.mkdir(parents=True, exist_ok=True)
                if self.run_dir.parent == out_dir.resolve():
                    point_latest(out_dir, self.run_dir)
                self.started = True
        return self.run_dir

    @classmethod
    def for_worker(
        cls, config: pytest.Config, settings: Settings, info: Mapping[str, Any]
    ) -> RunState:
        return cls(
            config,
            settings,
            str(info["agentbench_run_id"]),
            Path(info["agentbench_run_dir"]),
            is_worker=True,
            start_ms=int(info["agentbench_start_ms"]),
            limit_address=info.get("agentbench_limit"),
            marks_dir=Path(info["agentbench_marks_dir"])
            if info.get("agentbench_marks_dir")
            else None,
            worker_id=str(info.get("workerid", "?")),
        )

    def worker_input(self) -> dict[str, Any]:
        """What an xdist worker needs to join this run."""
        return {
            "agentbench_run_id": self.run_id,
            "agentbench_run_dir": str(self.run_dir),
            "agentbench_start_ms": self.start_ms,
            "agentbench_base_url": self.settings.base_url,
            "agentbench_limit": self._serve_limit(),
            "agentbench_marks_dir": str(self._marks()),
        }

    def _serve_limit(self) -> str | None:
        """The address of the run's shared limit, served to workers from here (started
        on the first call); None when no limit was asked for."""
        limit = self.shared_limit()
        if limit is None:
            return None
        if self.limit_service is None:
            from pytest_agentbench.models.ratelimit_remote import LimitService

            self.limit_service = LimitService(limit)
        return self.limit_service.start()

    def _marks(self) -> Path:
        """The folder where workers mark the verifications they are running (removed at
        the end); see pytest_agentbench.workers."""
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

    @property
    def secrets(self) -> tuple[str, ...]:
        values = [os.environ.get(name, "") for name in SECRET_ENV]
        values.append(self.settings.api_key or "")
        for url in (self.settings.base_url, *(os.environ.get(n) for n in SECRET_URL_ENV)):
            values.extend(url_secrets(url))
        return tuple(v for v in values if v)

    def client(self) -> ModelClient:
        """The model client, made once through the ``pytest_agentbench_model_client`` hook."""
        made = self._client
        if made is not None:  # every task asks: no lock once it exists
            return made
        with self._lock:
            if self._client is None:
                hook = self.config.hook
                client = hook.pytest_agentbench_model_client(
                    spec=self.settings.model, settings=self.settings
                )
                if client is None:
                    raise pytest.UsageError(
                        f"no model client for provider {self.settings.model.provider!r} "
                        f"(model {self.settings.model.label}); a plugin must implement "
                        "pytest_agentbench_model_client for it"
                    )
                self._client = self._reliable(client)
            return self._client

    def _reliable(self, client: ModelClient) -> ModelClient:
        """Retries inside, the circuit breaker outside: a retried failure counts once."""
        from pytest_agentbench.models.breaker import BreakerClient
        from pytest_agentbench.models.retry import RetryingClient, RetryPolicy

        settings = self.settings
        limit: Any = self.shared_limit() if not self.is_worker else None
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

            self.breaker = CircuitBreaker(settings.breaker_threshold)
            wrapped = BreakerClient(wrapped, self.breaker)
        return wrapped

    def prepare(self, key: str, tasks: Any) -> None:
        """Let the client see a suite's tasks once (the scripted client registers replies)
        before any of them runs; concurrent callers for the same suite wait for the first.
        A failure (ModelError) propagates and is tried again by the suite's next task."""
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
            self.client().prepare(tasks)
            with self._lock:
                self._prepared.add(key)

    def verifiers(self) -> dict[str, Verifier]:
        """Every verifier by kind; a plugin's verifier replaces a built-in of the same kind."""
        if self._verifiers is None:
            found: dict[str, Verifier] = {}
            for batch in reversed(self.config.hook.pytest_agentbench_verifiers()):
                for verifier in batch or ():
                    found[verifier.kind] = verifier
            if self.is_worker and self.marks_dir is not None:
                from pytest_agentbench.workers import VerifyMarks

                marks = VerifyMarks(self.marks_dir, self.worker_id)
                found = {kind: marks.guard(verifier) for kind, verifier in found.items()}
            self._verifiers = found
        return self._verifiers

    def tools(self) -> dict[str, Tool]:
        """Every agent tool by name; a plugin's tool replaces a built-in of the same name."""
        if self._tools is None:
            found: dict[str, Tool] = {}
            for batch in reversed(self.config.hook.pytest_agentbench_tools()):
                for tool in batch or ():
                    found[tool.name] = tool
            self._tools = found
        return self._tools

    def set_queue(self, items: list[Any]) -> None:
        """The task items this process will run, in pytest's order (after selection)."""
        self.queue = items
        self.positions = {item.nodeid: i for i, item in enumerate(items)}
        wants_pool = self.settings.concurrency > 1 and len(items) > 1
        if (wants_pool or self.live is not None) and self.pool is None and items:
            self.pool = RolloutPool(self.settings.concurrency)

    def record_for(self, item: Any, job: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
        """The record of ``item``'s rollout. With a pool, the rollouts of the next items in
        the queue are planned too: the pool keeps its size in flight and runs at most
        ``pool.ahead`` uncollected; ``job(item)`` runs one."""
        if self.pool is None or item.nodeid not in self.positions:
            return job(item)
        if self.is_worker:  # only what xdist sent this worker, never session.items
            from pytest_agentbench.workers import find_interactor, worker_queue

            if self._interactor is None:
                self._interactor = find_interactor(self.config) or False
            queue = worker_queue(self.config, self._interactor or None, item, self.pool.ahead)
            following = [other for other in queue if other.nodeid in self.positions]
        else:
            start = self.positions[item.nodeid]
            end = start + self.pool.ahead
            following = self.queue[max(start, self._planned_to) : end]
            self._planned_to = max(self._planned_to, end)
        for ahead in following:
            self.pool.plan(ahead.nodeid, functools.partial(job, ahead))
        status, live = self.status, self.live
        record: dict[str, Any]
        if status is None or live is None:
            record = self.pool.result(item.nodeid, lambda: job(item))
            return record

        def show() -> None:
            status.show(live.line(item.nodeid))

        try:
            record = self.pool.result(item.nodeid, lambda: job(item), on_wait=show)
            return record
        finally:
            status.clear()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
        if self._client is not None:
            self._client.close()
            self._client = None
        if self.server is not None:
            self.server.stop()
            self.server = None
        if self.limit_service is not None:
            self.limit_service.stop()
            self.limit_service = None
        if self.marks_dir is not None and not self.is_worker:
            import shutil

            shutil.rmtree(self.marks_dir, ignore_errors=True)
