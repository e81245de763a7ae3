"""``python -m pytest_agentbench rescore RUN_DIR``: the current verifiers on a finished
run's saved answers, into a new run folder; the model is not asked again.

For each task that reached a verdict (passed or failed), and each control and labelled
answer (calibration) that did, the saved attempts' answers are verified again, in order,
against the task as its suite file says now (target, verifier and its options), until
one passes: the repair loop's rule (the rounds after it would not have run, so they are
not verified, their verdict null). That attempt is the answer, else the last. Its
outcome, reward, first-try reward and verdict are replaced (a control's ``behaved``
too); its usage and the model's cost stay what the run spent. A task that ended another
way (a timeout, a killed loop, a harness error), an agent task (its workspace is gone),
and a task whose suite or verifier cannot be found now are kept as they were, each with
a note saying why.

A judged task is judged again through ``judges`` (session/judges.py): by the judge the
command names (``--judge-model``), else the run's command-line judge, else the suite's
``judge`` table as it is now, else the run's ini judge; a scripted judge plays the
suite's rules on a scripted server of the command's own, a hosted one is called with its
key from the environment. Its record's ``judge`` table, ``verifier/judge.json`` and the
summary's judge section (calibration included) are the new judging's; its cost is the
model's as the run spent it plus the new judging at the judge's price, and summary.json's
``rescored.judge`` says what the re-judging cost (calls, tokens, USD) and what the run's
judging of those tasks had cost at the same price (``replaced_usd``). Without ``judges``
(``--no-judge``) judged tasks are kept; a judging that fails now (its model down, no
usable verdict) keeps its task too.

The new folder holds ``summary.json`` (with ``rescored``: the run it came from, when,
how many tasks changed and how many were kept) and ``ctrf.json``, and for each rescored
task its ``result.json`` (the earlier one, with the new verdicts) beside the earlier
trajectory.

Which judge grades again, at what price, and what the re-judging cost is
``rejudge.py``'s; this module makes the verdicts again and writes the new folder.
"""

from __future__ import annotations

import pkgutil
import shutil
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from pytest_agentbench.artifacts.controls import behaved
from pytest_agentbench.artifacts.cost_totals import judge_cost
from pytest_agentbench.artifacts.jsonio import write_json_atomic
from pytest_agentbench.artifacts.paths import mark_run_folder
from pytest_agentbench.artifacts.record import judge_totals, verdict_record
from pytest_agentbench.artifacts.reports import write_run_reports
from pytest_agentbench.artifacts.rollout_files import read_result
from pytest_agentbench.artifacts.summary import RunFacts, load_summary
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.record_parts import Round
from pytest_agentbench.core.task_record import RunSummary, TaskRecord
from pytest_agentbench.errors import AgentbenchError, SuiteError
from pytest_agentbench.runner.rejudge import (
    JudgePrices,
    Judges,
    PriceOf,
    Rejudged,
    recorded_judge,
    rejudged_cost,
)
from pytest_agentbench.suites.load import load_suite
from pytest_agentbench.suites.task import Control, Task
from pytest_agentbench.verifiers.base import Check, FunctionVerifier, JudgeError, Verdict, Verifier
from pytest_agentbench.verifiers.builtin import BUILTIN_VERIFIERS
from pytest_agentbench.verifiers.judge import JUDGE, JudgeRuntime
from pytest_agentbench.verifiers.judge_model import JudgeModel

SUMMARY_LIMIT = 512 * 1024 * 1024


def _verifiers(
    judges: Judges | None = None,
    judge: JudgeModel | None = None,
    fallback: JudgeModel | None = None,
) -> dict[str, Verifier]:
    """The built-in verifiers, the judge bound to ``judges`` (``judge`` beats every
    suite, a suite's table beats ``fallback``)."""
    table: dict[str, Verifier] = {verifier.kind: verifier for verifier in BUILTIN_VERIFIERS}
    if judges is not None:
        runtime = JudgeRuntime(judges.connect, override=judge, fallback=fallback)
        table["judge"] = JUDGE.bind(runtime)
    return table


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
    except JudgeError:  # the judge could not grade it now: the task is kept
        raise
    except Exception as exc:  # a verifier's crash is its verdict's error, as in a run
        return Verdict(reward=0.0, error=f"{type(exc).__name__}: {exc}")


def _as_control(task: Task, record: TaskRecord) -> Task:
    """The task as its control (or labelled answer) ran: a scripted judge's rules match
    the control's name."""
    control = record.control
    if control is None:
        return task
    made = Control(control.name, control.expect, control.source, control.canary, control.label)
    return replace(task, control=made, repairs=0)


def _verdict_json(verdict: Verdict) -> JsonObject:
    return {
        "reward": verdict.reward,
        "metrics": dict(verdict.metrics),
        "details": dict(verdict.details),
        "feedback": verdict.feedback,
        "error": verdict.error,
    }


def rescore_record(
    record: TaskRecord,
    suites: _Suites,
    table: dict[str, Verifier],
    out: Path,
    *,
    run_dir: Path | None = None,
    judges: Judges | None = None,
    price_of: PriceOf | None = None,
    rejudged: Rejudged | None = None,
) -> tuple[TaskRecord, str | None]:
    """The record with its verdicts made again, and None; or the record as it was and
    why it was kept."""
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
    judged = task.verifier.kind == "judge"
    if judged and judges is None:
        return record, "a judged task (not judged again: --no-judge)"
    verifier = _verifier(task.verifier.kind, table)
    if verifier is None:
        return record, f"verifier {task.verifier.kind!r} is not available outside pytest"
    task = _as_control(task, record)
    new_dir = out / _relative(old_dir, run_dir)
    attempts = result.get("attempts")
    saved = [a for a in attempts if isinstance(a, dict)] if isinstance(attempts, list) else []
    threshold = task.pass_threshold
    verdicts: list[Verdict] = []
    for number, attempt in enumerate(saved, start=1):
        answer = str(attempt.get("answer") or "")
        try:
            made = _verify(verifier, answer, task, new_dir / f"verifier-{number}")
        except JudgeError as exc:
            shutil.rmtree(new_dir, ignore_errors=True)
            return record, f"re-judging failed: {exc}"
        verdicts.append(made)
        if made.reward >= threshold:
            break  # the repair rounds after it would not have run
    if not verdicts:
        return record, "no saved answer"
    chosen = next((i for i, v in enumerate(verdicts) if v.reward >= threshold), None)
    final = len(verdicts) - 1 if chosen is None else chosen
    verdict = verdicts[final]
    (new_dir / f"verifier-{final + 1}").rename(new_dir / "verifier")
    parts = [v.details.get("judge") for v in verdicts] if judged else []
    judge_table = judge_totals([p for p in parts if isinstance(p, dict)])
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
    if rescored.control is not None:
        now = behaved(rescored.control.expect, rescored.outcome)
        rescored = replace(rescored, control=replace(rescored.control, behaved=now))
    if judge_table is not None:
        model, base_url = judge_table.get("model"), judge_table.get("base_url")
        price = None
        if price_of is not None and isinstance(model, str):
            price = price_of(model, base_url if isinstance(base_url, str) else None)
        cost, spent = rejudged_cost(record, judge_table, price)
        if record.control is not None:  # a control has no cost of its own, as in a run
            cost = record.cost
        rescored = replace(rescored, judge=judge_table, cost=cost)
        if rejudged is not None:
            replaced = judge_cost(record, price) if record.judge is not None else 0.0
            rejudged.add(judge_table, spent, replaced)
    data: JsonObject = dict(result)
    for number, attempt in enumerate(saved):
        made_now = verdicts[number] if number < len(verdicts) else None
        attempt["verdict"] = None if made_now is None else _verdict_json(made_now)
        if judged:
            found = None if made_now is None else made_now.details.get("judge")
            attempt["judge"] = found if isinstance(found, dict) else None
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


def _relative(old_dir: Path, run_dir: Path | None) -> Path:
    """A rollout folder's place in its run (``tasks/…`` or ``controls/…``)."""
    if run_dir is not None:
        try:
            return old_dir.relative_to(run_dir)
        except ValueError:  # the run folder was moved since: its last three parts
            pass
    return old_dir.relative_to(old_dir.parents[2])


def rescore_run(
    run_dir: Path,
    out: Path | None,
    *,
    tool_version: str,
    judges: Judges | None = None,
    judge: JudgeModel | None = None,
    prices_file: Path | None = None,
) -> tuple[Path, RunSummary]:
    """Rescore ``run_dir`` into ``out`` (default: ``<run_id>-rescored`` beside it); the
    new folder and its summary. Judged tasks are judged again through ``judges`` (none:
    kept) by ``judge`` when given, else as the module docstring says, and priced with
    ``prices_file`` (else the run's own price file). AgentbenchError
    naming the folder for anything that is not a finished run, or an ``out`` that exists
    already."""
    head = load_summary(run_dir, SUMMARY_LIMIT)
    summary = RunSummary.from_json(head)
    target = out or run_dir.parent / f"{summary.run_id}-rescored"
    if target.exists():
        raise AgentbenchError(f"{target}: exists already (give --out a new folder)")
    target.mkdir(parents=True)
    mark_run_folder(target)
    settings = summary.sections.get("settings")
    override = judge or recorded_judge(settings, "judge")
    suites = _Suites()
    table = _verifiers(judges, override, recorded_judge(settings, "judge_ini"))
    rejudged = Rejudged()
    price_of = JudgePrices(settings, prices_file)
    records: list[TaskRecord] = []
    kept: dict[str, int] = {}
    changed = 0
    for record in summary.tasks:
        made, why = rescore_record(
            record,
            suites,
            table,
            target,
            run_dir=run_dir,
            judges=judges,
            price_of=price_of,
            rejudged=rejudged,
        )
        if why is not None:
            kept[why] = kept.get(why, 0) + 1
            made = replace(made, extras={**made.extras, "rescore_kept": why})
        elif _verdicts(made) != _verdicts(record):
            changed += 1
        records.append(made)
    coverage = summary.sections.get("coverage")
    section: JsonObject = {
        "from": str(run_dir),
        "run_id": summary.run_id,
        "at_ms": int(time.time() * 1000),
        "changed": changed,
        "kept": dict[str, JsonValue](kept),
    }
    if rejudged.tasks:
        section["judge"] = rejudged.section()
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
