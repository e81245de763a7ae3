"""Compare two sets of task records task by task: a baseline run with this one, two
models of one run, or perturbed tasks with their originals.

Pure: two lists of task records in (``TaskRecord``: this run's, or summary.json's read
back), a typed :class:`RecordComparison` out. Tasks pair by a key (suite and task id unless told
otherwise); a pair where either side is a harness error is excluded and counted. The
statistics are core/stats.py's ``compare_paired``: McNemar's exact test on pass/fail, a
sign test and a paired bootstrap on rewards.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Literal

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.paired import Comparison, compare_paired, detectable_words
from pytest_agentbench.core.stats import DEFAULT_LEVEL, Estimate
from pytest_agentbench.core.task_record import TaskRecord
from pytest_agentbench.core.verdicts import Decision, VerdictWord
from pytest_agentbench.report.evidence import failure_reason

Record = TaskRecord
#: What two runs are compared on; ``Metric`` adds ``auto`` (reward when both have one).
PairMetric = Literal["pass", "reward"]
Metric = Literal["auto", PairMetric]
Verdict = VerdictWord
#: the disagreeing tasks a comparison keeps with their reasons (the rest are counted)
MAX_DISAGREEMENTS = 20


def task_key(record: Record) -> tuple[str, str]:
    """The default pairing key: the suite and the task id."""
    return (record.suite, record.task_id)


def sample_key(record: Record) -> tuple[str, ...]:
    """The pairing key of a comparison: the suite and the task id, and the epoch of a task
    run more than once (epoch K pairs with epoch K: one record per task never hides the
    other epochs)."""
    epoch = record.epoch
    return task_key(record) + ((f"epoch{epoch}",) if epoch else ())


def _label(key: Hashable) -> str:
    if isinstance(key, tuple):
        return "::".join(str(part) for part in key)
    return str(key)


def reason_line(record: Record) -> str:
    """One side of a disagreement in a line: ``passed``, or why the task did not pass."""
    if record.outcome == "passed":
        return "passed"
    return record.message or failure_reason(record)


@dataclass(frozen=True)
class Disagreement:
    """A task one side passed and the other did not, with each side's reason line and
    the folders of its two rollouts (relative to their run folders when known)."""

    task: str
    first: str
    second: str
    first_dir: str | None = None
    second_dir: str | None = None

    def as_dict(self) -> JsonObject:
        return {
            "task": self.task,
            "first": self.first,
            "second": self.second,
            "first_dir": self.first_dir,
            "second_dir": self.second_dir,
        }


def find_disagreements(
    first: Mapping[Hashable, Record], second: Mapping[Hashable, Record]
) -> tuple[int, tuple[Disagreement, ...]]:
    """The tasks (by pairing key) one side passed and the other did not, harness errors
    left out: how many, and the first MAX_DISAGREEMENTS by label with their reasons."""
    differ = sorted(
        (
            (_label(k), a, second[k])
            for k, a in first.items()
            if k in second
            and "harness_error" not in (a.outcome, second[k].outcome)
            and (a.outcome == "passed") != (second[k].outcome == "passed")
        ),
        key=lambda item: item[0],
    )
    return len(differ), tuple(
        Disagreement(label, reason_line(a), reason_line(b), a.rollout_dir, b.rollout_dir)
        for label, a, b in differ[:MAX_DISAGREEMENTS]
    )


def model_disagreements(
    records: Sequence[Record], first: str, second: str
) -> tuple[int, tuple[Disagreement, ...]]:
    """Where two models of one run differ, task by task (epoch K with epoch K)."""
    return find_disagreements(
        {sample_key(r): r for r in records if r.model == first},
        {sample_key(r): r for r in records if r.model == second},
    )


@dataclass(frozen=True)
class RecordComparison:
    """``second`` against ``first`` on the tasks both ran: ``difference`` is second −
    first (positive: second scored higher) with its paired interval; ``regressions``
    are the tasks that passed in ``first`` and not in ``second`` (``improvements`` the
    reverse), by ``suite::task`` label."""

    first: str
    second: str
    metric: PairMetric
    paired: int
    excluded: int
    only_first: int
    only_second: int
    difference: Estimate
    test: str
    p_value: float | None
    significant: bool
    regressions: tuple[str, ...]
    improvements: tuple[str, ...]
    decision: Decision
    #: the first MAX_DISAGREEMENTS tasks one side passed and the other not (by label)
    disagreements: tuple[Disagreement, ...] = ()
    #: paired tasks graded by a different judge on each side (spec, settings or prompt
    #: templates changed): their difference may be the judge's, not the model's
    judge_changed: int = 0

    @property
    def comparable(self) -> bool:
        """False when a judge changed between the sides on any paired task."""
        return self.judge_changed == 0

    @property
    def level(self) -> float:
        return self.difference.level

    @property
    def verdict(self) -> Verdict:
        """``better`` / ``worse`` (the test rejects no difference), ``equivalent`` (within
        the margin, by two one-sided tests), ``inconclusive``, or ``none`` (no pair)."""
        if self.difference.value is None or self.paired == 0:
            return "none"
        return self.decision.word

    def words(self) -> str:
        """One sentence: the difference, its interval, the test, and the verdict."""
        alpha = f"{1 - self.level:g}"
        if self.verdict == "none":
            return f"{self.second} vs {self.first}: no task ran on both sides"
        d = self.difference
        assert d.value is not None
        interval = ""
        if d.lo is not None and d.hi is not None:
            interval = f", {round(d.level * 100)} % CI {d.lo:+.3f} to {d.hi:+.3f}"
        what = "pass rate" if self.metric == "pass" else "mean reward"
        verdict = {
            "worse": f"worse (significant at {alpha})",
            "better": f"better (significant at {alpha})",
        }.get(self.verdict, self.decision.words())
        p = "" if self.p_value is None else f"{self.test} p={self.p_value:.3g}"
        return (
            f"{self.second} vs {self.first}: {what} {d.value:+.3f} over {self.paired} "
            f"paired task(s){interval} ({p}): {verdict}{detectable_words(self.decision)}"
        )

    def notes(self) -> list[str]:
        """What was left out of the pairing, in words (nothing when nothing was)."""
        notes = []
        if self.judge_changed:
            notes.append(
                f"not comparable: {self.judge_changed} paired task(s) were graded by a "
                "different judge (its model, settings or prompt template changed)"
            )
        if self.excluded:
            notes.append(f"{self.excluded} task(s) excluded: a harness error on either side")
        if self.only_first:
            notes.append(f"{self.only_first} task(s) only in {self.first}")
        if self.only_second:
            notes.append(f"{self.only_second} task(s) only in {self.second}")
        return notes

    def as_dict(self) -> JsonObject:
        return {
            "first": self.first,
            "second": self.second,
            "metric": self.metric,
            "paired": self.paired,
            "excluded": self.excluded,
            "only_first": self.only_first,
            "only_second": self.only_second,
            "difference": self.difference.as_dict(),
            "test": self.test,
            "p_value": self.p_value,
            "significant": self.significant,
            "verdict": self.verdict,
            "decision": self.decision.as_dict(),
            "words": self.words(),
            "regressions": list(self.regressions),
            "improvements": list(self.improvements),
            "disagreements": [found.as_dict() for found in self.disagreements],
            "disagreements_total": len(self.regressions) + len(self.improvements),
            "comparable": self.comparable,
            "judge_changed": self.judge_changed,
        }


def _value(record: Record, metric: PairMetric) -> float | bool | None:
    """Pass/fail or reward of one record; None for a harness error (no verdict)."""
    if record.outcome == "harness_error":
        return None
    if metric == "pass":
        return record.outcome == "passed"
    return float(record.reward) if record.reward is not None else 0.0


def _binary(records: Sequence[Record]) -> bool:
    """True when every reward is 0 or 1 (or missing): pass/fail is the whole story."""
    for record in records:
        reward = record.reward
        if reward is not None and float(reward) not in (0.0, 1.0):
            return False
    return True


def compare_records(
    first: Sequence[Record],
    second: Sequence[Record],
    *,
    first_label: str = "baseline",
    second_label: str = "this run",
    level: float = DEFAULT_LEVEL,
    metric: Metric = "auto",
    key: Callable[[Record], Hashable] = sample_key,
    second_key: Callable[[Record], Hashable] | None = None,
    margin: float | None = None,
) -> RecordComparison:
    """Compare ``second`` with ``first`` task by task. ``key`` pairs the records
    (``second_key`` for the second side when it differs, e.g. a perturbed task's
    original id). ``metric`` ``auto`` compares pass/fail when every reward is 0 or 1,
    else rewards. A key seen twice on one side keeps its last record."""
    before = {key(r): r for r in first}
    after = {(second_key or key)(r): r for r in second}
    if metric == "auto":
        shared_records = [r for k, r in before.items() if k in after]
        shared_records += [r for k, r in after.items() if k in before]
        metric = "pass" if _binary(shared_records) else "reward"
    values_before = {k: _value(r, metric) for k, r in before.items()}
    values_after = {k: _value(r, metric) for k, r in after.items()}
    stats: Comparison = compare_paired(values_after, values_before, level=level, margin=margin)
    shared = [k for k in before if k in after]
    regressions, improvements = [], []
    for k in shared:
        if values_before[k] is None or values_after[k] is None:
            continue
        was = before[k].outcome == "passed"
        now = after[k].outcome == "passed"
        if was and not now:
            regressions.append(_label(k))
        elif now and not was:
            improvements.append(_label(k))
    _, disagreements = find_disagreements(before, after)
    paired = len(shared) - stats.excluded
    changed = sum(1 for k in shared if _judge_id(before[k]) != _judge_id(after[k]))
    return RecordComparison(
        first=first_label,
        second=second_label,
        metric=metric,
        paired=paired,
        excluded=stats.excluded,
        only_first=len(before) - len(shared),
        only_second=len(after) - len(shared),
        difference=stats.difference,
        test=stats.test,
        p_value=stats.p_value if paired else None,
        significant=stats.significant,
        regressions=tuple(sorted(regressions)),
        improvements=tuple(sorted(improvements)),
        decision=stats.decision,
        disagreements=disagreements,
        judge_changed=changed,
    )


def _judge_id(record: Record) -> JsonValue:
    """What identifies a record's judge (its fingerprint holds the spec, settings and
    prompt templates; the rubric digest the task's rubric); None when none judged it."""
    judge = record.judge
    if judge is None:
        return None
    return [judge.get("fingerprint"), judge.get("rubric_digest")]
