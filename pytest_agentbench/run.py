"""The state of one benchmark run in one process: settings, run folder, the model client,
the verifiers, and (in the controller) the scripted server and the collected records."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_agentbench.artifacts.paths import new_run_id, point_latest

if TYPE_CHECKING:
    from pytest_agentbench.models.base import ModelClient
    from pytest_agentbench.report.gate import GateResult
    from pytest_agentbench.scripted.server import ScriptedServer
    from pytest_agentbench.settings import Settings
    from pytest_agentbench.verifiers.base import Verifier

#: Environment variables whose values never reach an artifact, set or not for this run.
SECRET_ENV = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")

STATE_KEY = pytest.StashKey["RunState"]()


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
    _client: ModelClient | None = None
    _verifiers: dict[str, Verifier] | None = None
    _prepared: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def for_controller(cls, config: pytest.Config, settings: Settings) -> RunState:
        run_id = new_run_id()
        run_dir = settings.out_dir / run_id
        run_dir.mkdir(parents=True, exist_ok=True)
        point_latest(settings.out_dir, run_dir)
        return cls(config, settings, run_id, run_dir.resolve(), is_worker=False)

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
        )

    def worker_input(self) -> dict[str, Any]:
        """What an xdist worker needs to join this run."""
        return {
            "agentbench_run_id": self.run_id,
            "agentbench_run_dir": str(self.run_dir),
            "agentbench_start_ms": self.start_ms,
            "agentbench_base_url": self.settings.base_url,
        }

    @property
    def secrets(self) -> tuple[str, ...]:
        values = [os.environ.get(name, "") for name in SECRET_ENV]
        values.append(self.settings.api_key or "")
        return tuple(v for v in values if v)

    def client(self) -> ModelClient:
        """The model client, made once through the ``pytest_agentbench_model_client`` hook."""
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
                self._client = client
            return self._client

    def prepare(self, key: str, tasks: Any) -> None:
        """Let the client see a suite's tasks once (the scripted client registers replies).
        A failure (ModelError) propagates and is tried again by the suite's next task."""
        with self._lock:
            if key in self._prepared:
                return
            self._prepared.add(key)
        try:
            self.client().prepare(tasks)
        except BaseException:
            with self._lock:
                self._prepared.discard(key)
            raise

    def verifiers(self) -> dict[str, Verifier]:
        """Every verifier by kind; a plugin's verifier replaces a built-in of the same kind."""
        if self._verifiers is None:
            found: dict[str, Verifier] = {}
            for batch in reversed(self.config.hook.pytest_agentbench_verifiers()):
                for verifier in batch or ():
                    found[verifier.kind] = verifier
            self._verifiers = found
        return self._verifiers

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        if self.server is not None:
            self.server.stop()
            self.server = None
