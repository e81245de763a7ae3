"""summary.json's ``judge``: what the judges cost (apart from the model under test), who
they were, how they agreed with people's labels (calibration), and the judged pass rate
corrected for their measured error.

Every report reads this one function's answer for the records it shows.
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_agentbench.artifacts.controls import calibration_records, task_records
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.judge_stats import (
    corrected_difference,
    corrected_rate,
    kappa_estimate,
    kappa_unknown,
)
from pytest_agentbench.core.stats import DEFAULT_LEVEL, Estimate, wilson
from pytest_agentbench.core.task_record import TaskRecord

NOT_CALIBRATED = "judge not calibrated"


def _judge(record: TaskRecord) -> JsonObject:
    return record.judge or {}


def _count(value: JsonValue) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def judge_usage(records: Sequence[TaskRecord]) -> JsonObject:
    """The judges' calls, tokens and wall time over ``records`` (a token field unknown
    for some judged record is counted in ``unknown``)."""
    calls = 0
    elapsed = 0.0
    sums: dict[str, int | None] = {"input": None, "output": None, "total": None}
    unknown = dict.fromkeys(sums, 0)
    for record in records:
        table = _judge(record)
        calls += _count(table.get("calls")) or 0
        seconds = table.get("elapsed_s")
        if isinstance(seconds, int | float):
            elapsed += float(seconds)
        usage = table.get("usage")
        for name in sums:
            value = _count(usage.get(name)) if isinstance(usage, dict) else None
            if value is None:
                unknown[name] += 1
            else:
                sums[name] = (sums[name] or 0) + value
    return {
        "calls": calls,
        **sums,
        "elapsed_s": round(elapsed, 3),
        "unknown": {k: v for k, v in unknown.items() if v},
    }


def _scale(records: Sequence[TaskRecord]) -> int | None:
    scales = {_judge(r).get("scale") for r in records}
    if len(scales) == 1:
        only = scales.pop()
        return only if isinstance(only, int) else None
    return None


def calibration(records: Sequence[TaskRecord]) -> JsonObject | None:
    """The judge against people's labels: pass/fail agreement (accuracy, Cohen's κ,
    sensitivity, specificity, each with its 95 % interval, and the confusion matrix);
    on a 1–N scale also the quadratic-weighted κ of the scores. None without labels."""
    labelled = calibration_records(records)
    if not labelled:
        return None
    errors = [r for r in labelled if r.outcome == "harness_error"]
    judged = [r for r in labelled if r.outcome != "harness_error" and r.control is not None]
    pairs: list[tuple[str, str]] = []
    for record in judged:
        assert record.control is not None
        label = "pass" if record.control.expect == "pass" else "fail"
        pairs.append((label, "pass" if record.outcome == "passed" else "fail"))
    pairs.sort()  # the bootstrap's draws do not depend on the order records arrived in
    tp = sum(1 for a, b in pairs if a == b == "pass")
    tn = sum(1 for a, b in pairs if a == b == "fail")
    positives = sum(1 for a, _ in pairs if a == "pass")
    negatives = len(pairs) - positives
    unknown = kappa_unknown(pairs, ["pass", "fail"])
    kappa = Estimate(None, len(pairs), None, None, None, "bootstrap", DEFAULT_LEVEL)
    result: JsonObject = {
        "labelled": len(labelled),
        "judged": len(pairs),
        "errors": len(errors),
        "accuracy": wilson(tp + tn, len(pairs)).as_dict(),
        "kappa": (kappa if unknown else kappa_estimate(pairs, ["pass", "fail"])).as_dict(),
        "kappa_unknown": unknown,
        "sensitivity": wilson(tp, positives).as_dict(),
        "specificity": wilson(tn, negatives).as_dict(),
        "confusion": {
            "rows": "label",
            "columns": "judge",
            "categories": ["pass", "fail"],
            "matrix": [[tp, positives - tp], [negatives - tn, tn]],
        },
        "counts": {"true_pos": tp, "positives": positives, "true_neg": tn, "negatives": negatives},
        "weighted_kappa": None,
    }
    points = _scale(judged)
    if points is not None:
        scored: list[tuple[int, int]] = []
        for record in judged:
            assert record.control is not None
            value, score = record.control.label, _judge(record).get("score")
            if isinstance(value, int) and isinstance(score, int):
                scored.append((value, score))
        scored.sort()
        categories = list(range(1, points + 1))
        why = kappa_unknown(scored, categories, "gave")
        weighted = kappa_estimate(scored, categories, "quadratic").as_dict()
        if why is not None:
            weighted = {**weighted, "value": None, "se": None, "lo": None, "hi": None}
        result["weighted_kappa"] = {**weighted, "scale": points, "unknown": why}
    return result


def _kappa(cal: JsonObject | None) -> float | None:
    """The κ a calibration is judged by: the weighted one on a 1–N scale, else the
    pass/fail one."""
    if cal is None:
        return None
    chosen = cal.get("weighted_kappa") or cal.get("kappa")
    value = chosen.get("value") if isinstance(chosen, dict) else None
    return float(value) if isinstance(value, int | float) else None


def corrected(records: Sequence[TaskRecord], cal: JsonObject | None) -> JsonObject | None:
    """The judged pass rate of the scored judged tasks, raw and corrected for the
    calibrated judge's sensitivity and specificity (Rogan–Gladen); None with no judged
    task or no calibration."""
    scored = [r for r in task_records(records) if r.judge is not None]
    scored = [r for r in scored if r.outcome != "harness_error"]
    counts = cal.get("counts") if cal is not None else None
    if not scored or not isinstance(counts, dict):
        return None
    passed = sum(1 for r in scored if r.outcome == "passed")
    c = {k: _count(v) or 0 for k, v in counts.items()}
    judge = (c["true_pos"], c["positives"], c["true_neg"], c["negatives"])
    fixed = corrected_rate(passed, len(scored), *judge)
    result: JsonObject = {
        "raw": wilson(passed, len(scored)).as_dict(),
        "corrected": fixed.as_dict(),
    }
    models: dict[str, tuple[int, int]] = {}
    for record in scored:
        won, total = models.get(record.model, (0, 0))
        models[record.model] = (won + (record.outcome == "passed"), total + 1)
    if len(models) > 1:
        result["by_model"] = [
            {
                "model": name,
                "raw": wilson(won, total).as_dict(),
                "corrected": corrected_rate(won, total, *judge).as_dict(),
            }
            for name, (won, total) in models.items()
        ]
        result["pairs"] = [
            _pair(first, second, models[first], models[second], judge)
            for i, first in enumerate(models)
            for second in list(models)[i + 1 :]
        ]
    return result


def _pair(
    first: str,
    second: str,
    a: tuple[int, int],
    b: tuple[int, int],
    judge: tuple[int, int, int, int],
) -> JsonObject:
    """Two models graded by one calibrated judge: whether their difference holds once
    the judge's measured error is carried in."""
    raw, fixed = corrected_difference(a, b, *judge)

    def excludes_zero(e: Estimate) -> bool:
        return e.lo is not None and e.hi is not None and (e.lo > 0 or e.hi < 0)

    differ, still = excludes_zero(raw), excludes_zero(fixed)
    if differ and not still:
        words = "the judge's error could change this conclusion"
    elif differ:
        words = "the difference holds after correcting for the judge's error"
    elif still:
        words = "a difference appears only after correcting for the judge's error"
    else:
        words = "within noise, judged and corrected"
    return {
        "first": first,
        "second": second,
        "raw_difference": raw.as_dict(),
        "corrected_difference": fixed.as_dict(),
        "judge_could_change": differ != still,
        "words": words,
    }


def judge_summary(
    records: Sequence[TaskRecord], min_kappa: float | None = None
) -> JsonObject | None:
    """summary.json's ``judge`` (see the module docstring); None when no judge ran."""
    judged = [r for r in records if r.judge is not None]
    if not judged and not calibration_records(records):
        return None
    seen: dict[tuple[str, str], JsonObject] = {}
    for record in judged:
        table = _judge(record)
        key = (str(table.get("model")), str(table.get("fingerprint")))
        entry = seen.setdefault(
            key,
            {
                "model": table.get("model"),
                "fingerprint": table.get("fingerprint"),
                "template_hash": table.get("template_hash"),
                "tasks": 0,
            },
        )
        entry["tasks"] = (_count(entry["tasks"]) or 0) + 1
    scored = task_records(judged)
    disagreeing: list[JsonValue] = [
        f"{r.suite}::{r.task_id}"
        for r in scored
        if isinstance(a := _judge(r).get("agreement"), int | float) and a < 1
    ]
    cal = calibration(records)
    kappa = _kappa(cal)
    calibrated: bool | None = None
    if min_kappa is not None:
        calibrated = kappa is not None and kappa >= min_kappa
    return {
        "usage": judge_usage(judged),
        "judges": list(seen.values()),
        "errors": sum(1 for r in scored if r.failure_kind == "judge_error"),
        "self_disagreeing": disagreeing,
        "calibration": cal,
        "kappa": kappa,
        "min_kappa": min_kappa,
        "calibrated": calibrated,
        "status": NOT_CALIBRATED if calibrated is False else None,
        "pass_rate": corrected(records, cal),
    }


def standing(records: Sequence[TaskRecord], judge: JsonObject | None) -> JsonObject | None:
    """The judge's standing beside a score over ``records`` (the run, or one suite ×
    model), from the run's ``judge`` (judge_summary): how many scored tasks a judge
    graded, the "judge not calibrated" status and why, and, when a judge graded every
    scored task of one model and labels calibrated it, the score corrected for its
    error. None when no judge graded a scored task, or there is nothing to say (no
    ``--agentbench-judge-min-kappa`` and no calibration)."""
    if judge is None:
        return None
    scored = [r for r in task_records(records) if r.outcome != "harness_error"]
    judged = [r for r in scored if r.judge is not None]
    if not judged:
        return None
    status = judge.get("status")
    cal = judge.get("calibration")
    fixed: JsonValue = None
    if len(judged) == len(scored) and len({r.model for r in judged}) == 1:
        rate = corrected(judged, cal if isinstance(cal, dict) else None)
        fixed = rate.get("corrected") if rate is not None else None
    if status is None and fixed is None:
        return None
    why = None
    if status is not None:
        why = not_calibrated_why(judge)
    return {
        "judged": len(judged),
        "scored": len(scored),
        "status": status,
        "why": why,
        "corrected": fixed,
    }


def _three(value: JsonValue) -> str:
    return f"{value:.3f}" if isinstance(value, int | float) else "n/a"


def kappa_unknown_why(cal: JsonValue | None) -> str | None:
    """Why the calibration's κ (the weighted one on a 1–N scale) is unknown, or None."""
    if not isinstance(cal, dict):
        return None
    weighted = cal.get("weighted_kappa")
    found = weighted.get("unknown") if isinstance(weighted, dict) else cal.get("kappa_unknown")
    return found if isinstance(found, str) else None


def not_calibrated_why(judge: JsonObject) -> str:
    """Why a judge is "not calibrated" (``judge`` is judge_summary's answer): ``κ 0.100
    < 0.4``, ``κ unknown: the judge never said pass``, or ``no calibration``."""
    kappa, least = judge.get("kappa"), judge.get("min_kappa")
    if kappa is not None:
        return f"κ {_three(kappa)} < {least}"
    unknown = kappa_unknown_why(judge.get("calibration"))
    return f"κ unknown: {unknown}" if unknown else "no calibration"
