"""The parts of one run, each built alone (no whole pytest run): the run state and its
folder, the services, the in-flight pool, and the record the controller builds for a task
whose xdist worker crashed. A real pytest config (parsed, not configured) stands under
them; the model is the scripted one on a real loopback server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from pytest_agentbench.artifacts.record import record_without_rollout
from pytest_agentbench.config.resolve import resolve_settings
from pytest_agentbench.config.settings import Settings
from pytest_agentbench.core.task_record import TaskRecord
from pytest_agentbench.errors import WorkerCrashed
from pytest_agentbench.hooks import builtins
from pytest_agentbench.models.base import ModelRequest
from pytest_agentbench.models.breaker import BreakerClient
from pytest_agentbench.models.retry import RetryingClient
from pytest_agentbench.scripted.server import ScriptedServer
from pytest_agentbench.session.inflight import InFlight
from pytest_agentbench.session.run import RunFolder, RunState, resume_dir
from pytest_agentbench.session.services import RunServices
from pytest_agentbench.session.workers import MarkedVerifier, VerifyMarks, crash_record
from pytest_agentbench.suites.task import Task, VerifierConfig
from pytest_agentbench.verifiers.base import Check, Verdict


def _config(pytester: pytest.Pytester, *args: str) -> pytest.Config:
    config = pytester.parseconfig("--agentbench", *args)
    if config.pluginmanager.get_plugin("agentbench-builtins") is None:
        config.pluginmanager.register(builtins, "agentbench-builtins")
    return config


def _settings(config: pytest.Config, env: dict[str, str] | None = None) -> Settings:
    return resolve_settings(config.getoption, config.getini, env or {})


# -- the run state and its folder ---------------------------------------------------------


def test_the_run_folder_is_made_once_when_a_task_first_runs(tmp_path: Path) -> None:
    out = tmp_path / "results"
    folder = RunFolder(out / "run-1", out)
    assert not folder.started and not out.exists()  # nothing before a task runs
    paths = []
    threads = [threading.Thread(target=lambda: paths.append(folder.ensure())) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert paths == [out / "run-1"] * 8 and folder.started
    assert (out / "latest").resolve() == (out / "run-1").resolve()


def test_a_run_folder_elsewhere_leaves_latest_alone(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path / "elsewhere" / "run-1", tmp_path / "results")
    folder.ensure()
    assert (tmp_path / "elsewhere" / "run-1").is_dir()
    assert not (tmp_path / "results" / "latest").exists()


def test_resume_names_the_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(pytest.UsageError, match="no earlier run in this results folder"):
        resume_dir(tmp_path, "latest")
    with pytest.raises(pytest.UsageError, match=r"nowhere is not a run folder"):
        resume_dir(tmp_path, str(tmp_path / "nowhere"))
    (tmp_path / "run-9").mkdir()
    assert resume_dir(tmp_path, str(tmp_path / "run-9")) == (tmp_path / "run-9").resolve()


def test_a_worker_joins_the_run_its_controller_describes(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    config = _config(pytester, "--agentbench-out", str(tmp_path / "out"))
    controller = RunState.for_controller(config, _settings(config))
    info = controller.worker_input()
    worker = RunState.for_worker(config, controller.settings, {**info, "workerid": "gw3"})
    try:
        assert worker.run.is_worker and not controller.run.is_worker
        assert (worker.run.run_id, worker.run.run_dir, worker.run.start_ms) == (
            controller.run.run_id,
            controller.run.run_dir,
            controller.run.start_ms,
        )
        assert worker.run.worker_id == "gw3" and worker.services.worker_id == "gw3"
        marks = controller.services.marks_dir
        assert marks is not None and marks.is_dir()
        assert worker.services.marks_dir == marks
        assert controller.run.run_dir.parent == (tmp_path / "out").resolve()
        assert not controller.folder.started  # the folder waits for the first task
        worker.close()
        assert marks.is_dir()  # a worker never removes the run's marks
    finally:
        controller.close()
    assert not marks.exists()


def test_the_run_knows_every_secret_it_must_never_write(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "https://user:pa55@proxy.example/v1")
    config = _config(
        pytester,
        "--agentbench-model",
        "openai-compat/m",
        "--agentbench-base-url",
        "http://bob:hunter2@127.0.0.1:9/v1",
    )
    state = RunState.for_controller(config, _settings(config, dict(os.environ)))
    try:
        secrets = state.run.secrets
    finally:
        state.close()
    assert {"sk-env-key", "hunter2", "pa55"} <= set(secrets)
    assert "" not in secrets


# -- the services -------------------------------------------------------------------------


def test_the_client_is_made_once_through_the_hook_and_wrapped(pytester: pytest.Pytester) -> None:
    config = _config(pytester)
    with ScriptedServer(default=["hi"]) as server:
        services = RunServices(config, replace(_settings(config), base_url=server.url))
        try:
            client = services.client()
            assert services.client() is client
            # retries inside, the circuit breaker outside (a retried failure counts once)
            assert services.breaker is not None
            assert isinstance(client, BreakerClient)
            assert isinstance(client.inner, RetryingClient)
            request = ModelRequest(messages=({"role": "user", "content": "say hi"},))
            assert client.generate(request).text == "hi"
        finally:
            services.close()


def test_a_provider_nobody_claims_is_a_usage_error_naming_it(pytester: pytest.Pytester) -> None:
    config = _config(pytester, "--agentbench-model", "nosuch/model")
    services = RunServices(config, _settings(config))
    with pytest.raises(pytest.UsageError) as caught:
        services.client()
    message = str(caught.value)
    assert "'nosuch'" in message and "none claimed it" in message
    assert "openai-compat" in message  # the built-in providers are listed


def test_the_shared_limit_is_made_once_and_only_when_asked_for(
    pytester: pytest.Pytester,
) -> None:
    config = _config(pytester)
    assert RunServices(config, _settings(config)).shared_limit() is None
    config = _config(pytester, "--agentbench-rpm", "120")
    services = RunServices(config, _settings(config))
    limit = services.shared_limit()
    assert limit is not None and services.shared_limit() is limit


def _loud(check: Check) -> Verdict:
    return Verdict(reward=1.0)


def test_verifiers_by_kind_and_by_module_path(pytester: pytest.Pytester) -> None:
    config = _config(pytester)
    services = RunServices(config, _settings(config))
    table = services.verifiers()
    assert {"exact", "number", "choice", "python_tests"} <= set(table)
    assert services.verifiers() is table
    kind = f"{__name__}:_loud"
    assert kind in table and table[kind].kind == kind
    assert "os:no_such_function" not in table
    why = table.why_missing("os:no_such_function")  # type: ignore[attr-defined]
    assert why is not None and "cannot import 'os:no_such_function'" in why


def test_a_workers_verifiers_mark_what_they_verify(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    config = _config(pytester)
    services = RunServices(
        config, _settings(config), is_worker=True, worker_id="gw1", marks_dir=tmp_path
    )
    table = services.verifiers()
    assert all(isinstance(verifier, MarkedVerifier) for verifier in table.values())
    assert isinstance(table[f"{__name__}:_loud"], MarkedVerifier)


# -- the in-flight pool -------------------------------------------------------------------


@dataclass
class Queued:
    """A task item as the pool sees it (session/inflight.Queued): each rollout counted."""

    nodeid: str
    runs: list[str] = field(default_factory=list)
    gate: threading.Event | None = None

    def rollout_record(self) -> TaskRecord:
        self.runs.append(threading.current_thread().name)
        if self.gate is not None:
            self.gate.wait(10)
        return _record(self.nodeid)


def _record(nodeid: str) -> TaskRecord:
    file, _, task_id = nodeid.rpartition("::")
    return record_without_rollout(
        nodeid=nodeid,
        file=file,
        suite="a",
        task_id=task_id,
        model="scripted",
        outcome="passed",
        cause="",
        failure_kind="harness",
        start_ms=0,
        duration_ms=0,
        rollout_dir=None,
    )


def _inflight(pytester: pytest.Pytester, concurrency: int) -> InFlight:
    config = _config(pytester, "--agentbench-concurrency", str(concurrency))
    return InFlight(config, _settings(config), is_worker=False)


def test_serial_runs_each_item_itself_with_no_pool(pytester: pytest.Pytester) -> None:
    inflight = _inflight(pytester, 1)
    items = [Queued(f"bench_a.toml::t{i}") for i in range(3)]
    inflight.set_queue(items)
    assert inflight.pool is None
    for item in items:
        assert inflight.record_for(item).nodeid == item.nodeid
    assert [len(item.runs) for item in items] == [1, 1, 1]
    assert all(run == threading.current_thread().name for item in items for run in item.runs)


def test_the_pool_runs_the_next_items_ahead_once_each(pytester: pytest.Pytester) -> None:
    inflight = _inflight(pytester, 3)
    gate = threading.Event()
    items = [Queued(f"bench_a.toml::t{i}", gate=gate) for i in range(5)]
    inflight.set_queue(items)
    assert inflight.pool is not None
    first = threading.Thread(target=inflight.record_for, args=(items[0],))
    first.start()
    pool = inflight.pool
    assert pool is not None
    for _ in range(1000):  # the first item plans those after it, up to the pool's reach
        if sum(len(item.runs) for item in items[1:]) >= min(pool.ahead, 5) - 1:
            break
        threading.Event().wait(0.01)
    ahead = [item.nodeid for item in items[1:] if item.runs]
    assert ahead, "nothing was run ahead of the first item"
    gate.set()
    first.join(10)
    records = [inflight.record_for(item) for item in items[1:]]
    assert [r.nodeid for r in records] == [item.nodeid for item in items[1:]]
    assert [len(item.runs) for item in items] == [1, 1, 1, 1, 1]  # never run twice
    inflight.close()
    assert inflight.closing


def test_an_item_outside_the_queue_runs_by_itself(pytester: pytest.Pytester) -> None:
    inflight = _inflight(pytester, 4)
    inflight.set_queue([Queued("bench_a.toml::t0"), Queued("bench_a.toml::t1")])
    stranger = Queued("test_plain.py::test_x")
    assert inflight.record_for(stranger).nodeid == stranger.nodeid
    assert stranger.runs == [threading.current_thread().name]


# -- the record of a task whose worker crashed -------------------------------------------


def _mark(directory: Path, worker: str, node: str, **more: object) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    mark = {"pid": 1, "worker": worker, "node": node, **more}
    name = f"{abs(hash((worker, node))) % 10**12}.json"
    (directory / name).write_text(json.dumps(mark), encoding="utf-8")


def test_a_crash_while_verifying_the_task_names_it_and_its_folder(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    _mark(
        marks,
        "gw1",
        str(tmp_path / "bench_a.toml") + "::t1",
        suite="arith",
        task_id="t1",
        rollout_dir="/runs/r/tasks/arith/t1",
    )
    record = crash_record(
        "bench_a.toml::t1",
        "gw1",
        model="scripted",
        marks_dir=marks,
        suites={},
        start_ms=1000,
        now_ms=1500,
    )
    assert record.outcome == "harness_error" and record.crashed_worker == "gw1"
    assert record.message == (
        "harness error: xdist worker gw1 crashed while verifying this task: "
        "a verifier or plugin exited, or it was killed"
    )
    assert (record.suite, record.task_id, record.rollout_dir) == (
        "arith",
        "t1",
        "/runs/r/tasks/arith/t1",
    )
    assert (record.start_ms, record.duration_ms) == (1000, 500)


def test_a_crash_while_verifying_others_names_them_and_says_rerun(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    _mark(marks, "gw1", "x/bench_a.toml::t2", suite="arith", task_id="t2")
    _mark(marks, "gw2", "x/bench_a.toml::t3", suite="arith", task_id="t3")  # another worker
    record = crash_record(
        "bench_a.toml::t1",
        "gw1",
        model="scripted",
        marks_dir=marks,
        suites={"bench_a.toml": "arith"},
        start_ms=None,
        now_ms=5,
    )
    assert record.suite == "arith" and record.rollout_dir is None
    message = str(record.message)
    assert "while this task was in flight, verifying arith/t2;" in message
    assert "arith/t3" not in message
    assert "--agentbench-resume" in message
    assert (record.start_ms, record.duration_ms) == (0, 0)  # no start known


def test_a_crash_with_no_marks_says_running_and_keeps_the_sample(tmp_path: Path) -> None:
    record = crash_record(
        "suites/bench_b.toml::t1[big:epoch2]",
        "gw4",
        model="small",
        marks_dir=tmp_path / "none",
        suites={},
        start_ms=10**13,  # a start after now is not believed
        now_ms=10,
        sample=("t1", "big", 2),
    )
    assert "crashed while running this task" in str(record.message)
    assert (record.task_id, record.model, record.epoch, record.suite) == ("t1", "big", 2, "b")
    assert record.start_ms == 0


def _dead_pid() -> int:
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(child.stdout)


def test_a_task_whose_verification_killed_a_worker_is_not_verified_again(
    tmp_path: Path,
) -> None:
    """A mark left by a dead process (real files, a real dead pid): the task sent to
    another worker is refused with WorkerCrashed; with no mark left, the verifier runs and
    its mark is gone afterwards."""
    task = Task(
        suite="arith",
        id="t1",
        index=0,
        path=tmp_path / "bench_a.toml",
        input="1+1",
        prompt="1+1",
        target="2",
        verifier=VerifierConfig("loud"),
    )
    calls: list[str] = []

    @dataclass(frozen=True)
    class Loud:
        kind: str = "loud"
        options_schema: dict[str, object] = field(default_factory=dict)

        def verify(self, check: Check) -> Verdict:
            calls.append(check.task.id)
            return Verdict(reward=1.0)

    marks = VerifyMarks(tmp_path / "marks", "gw2")
    verifier = marks.guard(Loud())  # type: ignore[arg-type]
    check = Check(answer="2", task=task, options={})
    assert verifier.verify(check).reward == 1.0
    assert calls == ["t1"] and list(marks.directory.iterdir()) == []
    marks.path(task.key).write_text(
        json.dumps({"pid": _dead_pid(), "worker": "gw1", "key": task.key}), encoding="utf-8"
    )
    with pytest.raises(WorkerCrashed, match="xdist worker gw1 crashed while verifying"):
        verifier.verify(check)
    assert calls == ["t1"]
