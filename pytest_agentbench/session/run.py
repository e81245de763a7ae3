"""The state of one benchmark run in one process, split by what owns each part:

* ``RunConfig`` (frozen): what the run is, fixed at ``pytest_configure``: pytest's
  config, the settings, the run id and folder, whether this process is an xdist worker;
* ``RunFolder``: the run folder on disk, made when the first task runs here;
* ``RunServices`` (services.py): what the run talks to and must release: the model
  client, verifiers, tools, the shared rate limit, the scripted server, the crash marks;
* ``InFlight`` (inflight.py): the task items this process runs and the rollout pool
  running them ahead;
* ``ResultSink``: what reached the run: records, counts and the coverage made of them
  (filled where reports arrive: a serial run, or the xdist controller).

``RunState`` only composes them, and closes them in order at the end.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, NotRequired, TypeAlias, TypedDict

import pytest

from pytest_agentbench.artifacts.paths import mark_run_folder, new_run_id, point_latest
from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.urls import url_secrets
from pytest_agentbench.hooks.plugin_hooks import PluginHooks
from pytest_agentbench.session.inflight import InFlight
from pytest_agentbench.session.services import RunServices

if TYPE_CHECKING:
    from pytest_agentbench.artifacts.baseline import BaselineRun
    from pytest_agentbench.config.settings import Settings
    from pytest_agentbench.core.jsontypes import JsonObject
    from pytest_agentbench.core.task_record import TaskRecord
    from pytest_agentbench.report.compare import RecordComparison
    from pytest_agentbench.report.gate import GateResult
    from pytest_agentbench.scripted.server import ScriptedServer
    from pytest_agentbench.session.sequential import Sequential

#: Environment variables whose values never reach an artifact, set or not for this run.
SECRET_ENV = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
#: Environment variables whose URL credentials (``user:password@``) are secrets too.
SECRET_URL_ENV = ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL")

#: A signal's handler as ``signal.signal`` takes and returns it.
SignalHandler: TypeAlias = Callable[[int, FrameType | None], object] | int | signal.Handlers | None


class WorkerInput(TypedDict):
    """What an xdist worker is sent to join the run (``RunState.worker_input``), in its
    ``workerinput`` beside xdist's own keys (``workerid`` among them)."""

    agentbench_run_id: str
    agentbench_run_dir: str
    agentbench_start_ms: int
    agentbench_base_url: str | None
    agentbench_scripted_url: str | None
    agentbench_limit: str | None
    agentbench_marks_dir: str
    workerid: NotRequired[str]


def resume_dir(out_dir: Path, target: str) -> Path:
    """The run folder ``--agentbench-resume`` names (``latest``: the newest in out_dir)."""
    path = out_dir / "latest" if target == "latest" else Path(target)
    if not path.is_dir():
        raise pytest.UsageError(
            f"--agentbench-resume: {path} is not a run folder"
            + (" (no earlier run in this results folder)" if target == "latest" else "")
        )
    return path.resolve()


@dataclass(frozen=True)
class RunConfig:
    """What one run is in this process; never changes once made."""

    config: pytest.Config
    settings: Settings
    run_id: str
    run_dir: Path
    is_worker: bool
    start_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    worker_id: str = ""

    @property
    def secrets(self) -> tuple[str, ...]:
        values = [os.environ.get(name, "") for name in SECRET_ENV]
        lineup = self.settings.lineup()  # every model's key and URL credentials
        values.extend(one.api_key or "" for one in lineup)
        urls = [one.base_url for one in lineup]
        for url in (*urls, *(os.environ.get(n) for n in SECRET_URL_ENV)):
            values.extend(url_secrets(url))
        return tuple(v for v in values if v)


class RunFolder:
    """The run folder, made (and ``latest`` pointed at it) once, when a task first runs
    in this process (an xdist worker points it at the same folder); ``started`` is then
    True. Nothing is made before: ``--collect-only`` or a failed collection leave no
    trace."""

    def __init__(self, path: Path, out_dir: Path) -> None:
        self.path = path
        self.out_dir = out_dir
        self.started = False
        self._lock = threading.Lock()

    def ensure(self) -> Path:
        if self.started:
            return self.path
        with self._lock:  # rollouts in flight reach here together
            if not self.started:
                self.path.mkdir(parents=True, exist_ok=True)
                mark_run_folder(self.path)
                if self.path.parent == self.out_dir.resolve():
                    point_latest(self.out_dir, self.path)
                self.started = True
        return self.path


@dataclass
class ResultSink:
    """What reached the run. ``records`` holds one record per task (collector.py keeps
    it so); the counts say what the run meant to cover, for ``coverage``."""

    records: list[TaskRecord] = field(default_factory=list)
    failed_reports: int = 0
    selected: int = 0
    deselected: int = 0
    skipped: set[str] = field(default_factory=set)
    #: Node ids not run because the run's spending cap was reached (--agentbench-max-cost)
    over_budget: set[str] = field(default_factory=set)
    #: Node ids not sent because the sequential comparison was decided (saved)
    sequential_saved: set[str] = field(default_factory=set)
    #: Node ids run in this session: a rerun runs again, never resumes (execution.py).
    ran_here: set[str] = field(default_factory=set)
    coverage: JsonObject | None = None
    gate: GateResult | None = None
    #: --agentbench-baseline: the earlier run, and this run compared with it at the end.
    baseline: BaselineRun | None = None
    compared: list[RecordComparison] = field(default_factory=list)
    #: --agentbench-perturb: each perturbation compared with the original tasks.
    robustness: list[tuple[str, RecordComparison]] = field(default_factory=list)
    #: judge tasks with ``mode = "pairwise"``: each pair of models compared by the judge
    pairwise: JsonObject | None = None


class RunState:
    """One per process, composing the parts above."""

    def __init__(
        self,
        run: RunConfig,
        services: RunServices | None = None,
        inflight: InFlight | None = None,
    ) -> None:
        self.run = run
        self.folder = RunFolder(run.run_dir, run.settings.out_dir)
        self.services = services or RunServices(run.config, run.settings)
        self.inflight = inflight or InFlight(run.config, run.settings, run.is_worker)
        self.results = ResultSink()
        self.hooks = PluginHooks(run.config.pluginmanager)
        self.restore_sigterm: SignalHandler = None
        #: --agentbench-sequential: the looks at the two sides' comparison (controller only)
        self.sequential: Sequential | None = None
        #: Keys dropped from the C environment while xdist workers may be started
        #: (plugin.pytest_xdist_setupnodes), given back at the end of the run.
        self.withheld_env: tuple[str, ...] = ()
        #: --agentbench-batch under xdist: stops the controller's watch of the batch log
        self.batch_watch: threading.Event | None = None

    @property
    def settings(self) -> Settings:
        return self.run.settings

    @classmethod
    def for_controller(
        cls, config: pytest.Config, settings: Settings, server: ScriptedServer | None = None
    ) -> RunState:
        """A new run folder, or with ``resume`` the folder of the run to finish."""
        if settings.resume:
            run_dir = resume_dir(settings.out_dir, settings.resume)
        else:
            run_dir = (settings.out_dir / new_run_id()).resolve()
        run = RunConfig(config, settings, run_dir.name, run_dir.resolve(), is_worker=False)
        return cls(run, RunServices(config, settings, server=server))

    @classmethod
    def for_worker(cls, config: pytest.Config, settings: Settings, info: WorkerInput) -> RunState:
        """An xdist worker joining the run ``info`` (``worker_input``) describes."""
        run = RunConfig(
            config,
            settings,
            str(info["agentbench_run_id"]),
            Path(info["agentbench_run_dir"]),
            is_worker=True,
            start_ms=int(info["agentbench_start_ms"]),
            worker_id=str(info.get("workerid", "?")),
        )
        marks = info.get("agentbench_marks_dir")
        services = RunServices(
            config,
            settings,
            is_worker=True,
            worker_id=run.worker_id,
            limit_address=info.get("agentbench_limit"),
            marks_dir=Path(marks) if marks else None,
        )
        return cls(run, services)

    def worker_input(self) -> WorkerInput:
        """What an xdist worker needs to join this run."""
        return {
            "agentbench_run_id": self.run.run_id,
            "agentbench_run_dir": str(self.run.run_dir),
            "agentbench_start_ms": self.run.start_ms,
            "agentbench_base_url": self.settings.base_url,
            "agentbench_scripted_url": self.services.server.url
            if self.services.server is not None
            else None,
            "agentbench_limit": self.services.serve_limit(),
            "agentbench_marks_dir": str(self.services.marks()),
        }

    def close(self) -> None:
        """Stop planning rollouts, then release what they use (closing the client ends
        the ones still running promptly; see runner/pool.py)."""
        self.inflight.close()
        self.services.close()
