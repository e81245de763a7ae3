"""``python -m pytest_agentbench rescore RUN_DIR``: the current verifiers on a finished
run's saved answers, into a new run folder; the model is not asked again.

For each task that reached a verdict (passed or failed), every saved attempt's answer is
verified again, against the task as its suite file says now (target, verifier and its
options). The repair loop's rule decides the result: the first attempt that now passes
is the answer (the rounds after it would not have run), else the last. Its outcome,
reward, first-try reward and verdict are replaced; its usage and cost stay what the run
spent. A task that ended another way (a timeout, a killed loop, a harness error), an
agent task (its workspace is gone), a control, and a task whose suite or verifier cannot
be found now are kept as they were, each with a note saying why.

The new folder holds ``summary.json`` (with ``rescored``: the run it came from, when,
how many tasks changed and how many were kept) and ``ctrf.json``, and for each rescored
task its ``result.json`` (the earlier one, with the new verdicts) beside the earlier
trajectory.
"""

from __future__ import annotations

import pkgutil
import shutil
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from pytest_agentbench.artifacts.jsonio import write_json_atomic
from pytest_agentbench.artifacts.paths import mark_run_folder
from pytest_agentbench.artifacts.record import verdict_record
from pytest_agentbench.artifacts.reports import write_run_reports
from pytest_agentbench.artifacts.rollout_files import read_result
from pytest_agentbench.artifacts.summary import RunFacts, load_summary
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.record_parts import Round
from pytest_agentbench.core.task_record import RunSummary, TaskRecord
from pytest_agentbench.errors import AgentbenchError, SuiteError
from pytest_agentbench.suites.load import load_suite
from pytest_agentbench.suites.task import Task
from pytest_agentbench.verifiers.base import Check, FunctionVerifier, Verdict, Verifier
from pytest_agentbench.verifiers.builtin import BUILTIN_VERIFIERS

SUMMARY_LIMIT = 512 * 1024 * 1024


def _verifiers() -> dict[str, Verifier]:
    return {verifier.kind: verifier for verifier in BUILTIN_VERIFIERS}


def _verifier(kind: str, table: dict[str, Verifier]) -> Verifier | None:
    """The built-in verifier of ``kind``, or a ``module:function`` one; None when it
    cannot be found here (a plugin's, registered only inside pytest)."""
    if kind in table:
        return table[kind]
    module, sep, name = kind.partition(":")
    if not sep or not module or not name:
        return None
    try:
        function = pkgutil.resolve_name(kind)
    except Exception:  # the user's module failing to import: the task is kept
        return None
    return FunctionVerifier(kind, function) if callable(function) else None


class _Suites:
    """Suite files loaded once each, by path; None for one that cannot be loaded now."""

    def __init__(self) -> None:
        self.loaded: dict[str, dict[str, Task] | None] = {}

    def task(self, key: str) -> Task | None:
        path, _, rest = key.partition("::")
        if path not in self.loaded:
            try:
                suite = load_suite(Path(path), _verifiers())
                self.loaded[path] = {task.id: task for task in suite.tasks}
            except (SuiteError, OSError):
                self.loaded[path] = None
        tasks = self.loaded[path]
        task_id = rest.partition("[")[0].partition("#")[0].partition("::")[0]
        return None if tasks is None else tasks.get(task_id)


def _verify(verifier: Verifier, answer: str, task: Task, where: Path) -> Verdict:
    where.mkdir(parents=True, exist_ok=True)
    try:
        return verifier.verify(Check(answer, task, task.verifier.options, where))
    except Exception as exc:  # a verifier's crash is its verdict's error, as in a run
        return Verdict(reward=0.0, error=f"{type(exc).__name__}: {exc}")


def _verdict_json(verdict: Verdict) -> JsonObject:
    return {
        "reward": verdict.reward,
        "metrics": dict(verdict.metrics),
        "details": dict(verdict.details),
        "feedback": verdict.feedback,
        "error": verdict.error,
    }


def rescore_record(
    record: TaskRecord, suites: _Suites, table: dict[str, Verifier], out: Path
) -> tuple[TaskRecord, str | None]:
    """The record with its verdicts made again, and None; or the record as it was and
    why it was kept."""
    if record.control is not None:
        return record, "a control"
    if record.outcome not in ("passed", "failed"):
        return record, f"ended {record.outcome}, not by a verdict"
    old_dir = Path(record.rollout_dir) if record.rollout_dir else None
    result = read_result(old_dir) if old_dir is not None else None
    if result is None or old_dir is None:
        return record, "its result.json is gone"
    key = result.get("task_key")
    task = suites.task(str(key)) if isinstance(key, str) else None
    if task is None:
        return record, "its task is not in its suite file now"
    if task.mode == "agent":
        return record, "an agent task (its workspace is gone)"
    verifier = _verifier(task.verifier.kind, table)
    if verifier is None:
        return record, f"verifier {task.verifier.kind!r} is not available outside pytest"
    new_dir = out / old_dir.relative_to(old_dir.parents[2])
    attempts = result.get("attempts")
    saved = [a for a in attempts if isinstance(a, dict)] if isinstance(attempts, list) else []
    verdicts: list[Verdict] = []
    for number, attempt in enumerate(saved, start=1):
        answer = attempt.get("answer")
        where = new_dir / ("verifier" if number == len(saved) else f"verifier-{number}")
        verdicts.append(_verify(verifier, str(answer or ""), task, where))
    if not verdicts:
        return record, "no saved answer"
    threshold = task.pass_threshold
    chosen = next((i for i, v in enumerate(verdicts) if v.reward >= threshold), None)
    final = len(verdicts) - 1 if chosen is None else chosen
    verdict = verdicts[final]
    rounds = tuple(
        Round(reward=v.reward, tokens=old.tokens)
        for v, old in zip(verdicts[: final + 1], record.rounds or (), strict=False)
    )
    rescored = replace(
        record,
        outcome="passed" if chosen is not None else "failed",
        reward=verdict.reward,
        first_attempt_reward=verdicts[0].reward,
        repaired=chosen is not None and chosen > 0,
        verdict=verdict_record(_verdict_json(verdict)),
        rounds=rounds or record.rounds,
        last_feedback=verdict.feedback or None,
        message=None if chosen is not None else (verdict.error or verdict.feedback or None),
        trace=None,
        rollout_dir=str(new_dir),
        verifier_dir=str(new_dir / "verifier"),
    )
    data: JsonObject = dict(result)
    for attempt, made in zip(saved, verdicts, strict=True):
        attempt["verdict"] = _verdict_json(made)
    data["attempts"] = list[JsonValue](saved)
    data.update(
        outcome=rescored.outcome,
        reward=rescored.reward,
        final_reward=rescored.reward,
        first_attempt_reward=rescored.first_attempt_reward,
        repaired=rescored.repaired,
        rollout_dir=str(new_dir),
        record=rescored.to_json(),
    )
    write_json_atomic(new_dir / "result.json", data)
    trajectory = old_dir / "trajectory.json"
    if trajectory.exists():
        shutil.copyfile(trajectory, new_dir / "trajectory.json")
    return rescored, None


def _verdicts(record: TaskRecord) -> tuple[object, ...]:
    return record.outcome, record.reward, record.first_attempt_reward


def rescore_run(run_dir: Path, out: Path | None, *, tool_version: str) -> tuple[Path, RunSummary]:
    """Rescore ``run_dir`` into ``out`` (default: ``<run_id>-rescored`` beside it); the
    new folder and its summary. AgentbenchError naming the folder for anything that is
    not a finished run, or an ``out`` that exists already."""
    head = load_summary(run_dir, SUMMARY_LIMIT)
    summary = RunSummary.from_json(head)
    target = out or run_dir.parent / f"{summary.run_id}-rescored"
    if target.exists():
        raise AgentbenchError(f"{target}: exists already (give --out a new folder)")
    target.mkdir(parents=True)
    mark_run_folder(target)
    suites, table = _Suites(), _verifiers()
    records: list[TaskRecord] = []
    kept: dict[str, int] = {}
    changed = 0
    for record in summary.tasks:
        made, why = rescore_record(record, suites, table, target)
        if why is not None:
            kept[why] = kept.get(why, 0) + 1
            made = replace(made, extras={**made.extras, "rescore_kept": why})
        elif _verdicts(made) != _verdicts(record):
            changed += 1
        records.append(made)
    settings = summary.sections.get("settings")
    coverage = summary.sections.get("coverage")
    section: JsonObject = {
        "from": str(run_dir),
        "run_id": summary.run_id,
        "at_ms": int(time.time() * 1000),
        "changed": changed,
        "kept": dict[str, JsonValue](kept),
    }
    facts = RunFacts(
        run_id=f"{summary.run_id}-rescored",
        settings=settings if isinstance(settings, Mapping) else {},
        tool_version=tool_version,
        start_ms=summary.start_ms,
        stop_ms=summary.stop_ms,
        partial=summary.partial,
        exit_status=None,
        coverage=coverage if isinstance(coverage, Mapping) else None,
        sections={"rescored": section},
    )
    written = write_run_reports(target, records, facts)
    return target, written
