"""The comparisons a run prints: this run against its baseline, model by model, and each
perturbation against the original tasks it was made from; and the lines that say them.

Each is a ``compare_records`` (report/compare.py) of two groups of this run's records;
this module only says which groups pair, in what order, and with what labels.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pytest_agentbench.core.jsontypes import JsonValue
from pytest_agentbench.core.paired import detectable_words
from pytest_agentbench.core.stats import DEFAULT_LEVEL
from pytest_agentbench.core.task_record import TaskRecord
from pytest_agentbench.report.compare import RecordComparison, compare_records

Record = TaskRecord


def _by_model(records: Sequence[Record]) -> dict[str, list[Record]]:
    groups: dict[str, list[Record]] = {}
    for record in records:
        groups.setdefault(record.model, []).append(record)
    return groups


def baseline_comparisons(
    baseline: Sequence[Record],
    records: Sequence[Record],
    *,
    level: float = DEFAULT_LEVEL,
    margin: float | None = None,
) -> list[RecordComparison]:
    """This run against the baseline, per model: a model compares with the baseline's
    records of the same model, or with the whole baseline when it holds one model only."""
    before, after = _by_model(baseline), _by_model(records)
    out = []
    for model, members in sorted(after.items()):
        if model in before:
            earlier = before[model]
        elif len(before) == 1:
            earlier = next(iter(before.values()))
        else:
            continue
        same = len(after) == 1 and len(before) == 1 and model in before
        first = "baseline" if same else f"baseline [{_only_model(earlier)}]"
        second = "this run" if same else f"this run [{model}]"
        out.append(
            compare_records(
                earlier, members, first_label=first, second_label=second, level=level, margin=margin
            )
        )
    return out


def _only_model(records: Sequence[Record]) -> str:
    return records[0].model if records else "?"


def _perturbation(record: Record) -> Mapping[str, JsonValue] | None:
    """A perturbed copy's ``perturbation`` (name, of, seed): one of the record's extras."""
    found = record.extras.get("perturbation")
    return found if isinstance(found, dict) else None


def robustness_comparisons(
    records: Sequence[Record],
    *,
    level: float = DEFAULT_LEVEL,
    order: Sequence[str] = (),
    margin: float | None = None,
) -> list[tuple[str, RecordComparison]]:
    """Each perturbation (per model) against the original tasks it was made from: a
    negative difference is the robustness drop. Perturbations come in ``order`` (as the
    run named them), any other after it by name: never in the order records arrived."""
    out = []
    for model, members in sorted(_by_model(records).items()):
        originals = [r for r in members if _perturbation(r) is None]
        found = {str(p["name"]) for r in members if (p := _perturbation(r)) is not None}
        names = [n for n in order if n in found] + sorted(found - set(order))
        several = len(_by_model(records)) > 1
        for name in names:
            perturbed = [
                r for r in members if (p := _perturbation(r)) is not None and p["name"] == name
            ]
            comparison = compare_records(
                originals,
                perturbed,
                first_label=f"original [{model}]" if several else "original",
                second_label=f"{name} [{model}]" if several else name,
                level=level,
                second_key=_original_key,
                margin=margin,
            )
            out.append((name, comparison))
    return out


def _original_key(record: Record) -> tuple[str, ...]:
    found = _perturbation(record)
    of = found.get("of") if found is not None else None
    epoch = record.epoch
    key = (record.suite, str(of if of is not None else record.task_id))
    return key + ((f"epoch{epoch}",) if epoch else ())


MAX_LISTED = 20


def comparison_lines(comparison: RecordComparison, *, regressions: bool = True) -> list[str]:
    """The comparison in words, what was left out, and the regressions by id (at most
    MAX_LISTED, then how many more)."""
    lines = [comparison.words()]
    notes = comparison.notes()
    if notes:
        lines.append("  (" + "; ".join(notes) + ")")
    found = comparison.regressions
    if regressions and found:
        shown = ", ".join(found[:MAX_LISTED])
        more = f" … and {len(found) - MAX_LISTED} more" if len(found) > MAX_LISTED else ""
        lines.append(
            f"  {len(found)} regression(s), passed in {comparison.first} and not in "
            f"{comparison.second}: {shown}{more}"
        )
    return lines


def robustness_line(name: str, comparison: RecordComparison) -> str:
    """``robustness shuffle: drop +0.400 over 5 pair(s), 95 % CI …, McNemar exact p=…:
    worse (significant at 0.05)`` — or *equivalent within ±D*, or *inconclusive* with the
    smallest drop the pairs could have shown."""
    d = comparison.difference
    if d.value is None or comparison.verdict == "none":
        return f"robustness {name}: no task paired with its original"
    interval = ""
    if d.lo is not None and d.hi is not None:
        interval = f", {round(d.level * 100)} % CI {0.0 - d.hi:+.3f} to {0.0 - d.lo:+.3f}"
    alpha = f"{1 - comparison.level:g}"
    verdict = {
        "worse": f"a real drop (significant at {alpha})",
        "better": f"a real gain (significant at {alpha})",
    }.get(comparison.verdict, comparison.decision.words())
    p = "" if comparison.p_value is None else f", {comparison.test} p={comparison.p_value:.3g}"
    excluded = f"; {comparison.excluded} excluded (harness error)" if comparison.excluded else ""
    return (
        f"robustness {comparison.second}: drop {0.0 - d.value:+.3f} over {comparison.paired} "
        f"pair(s){interval}{p}: {verdict}{detectable_words(comparison.decision)}{excluded}"
    )
