"""How much of the planned run a report covers, so a partial score always says so.

``planned`` is every task the suites offered this run: the tasks pytest selected plus the
ones a selection (``-k``, ``-m``, pytest-split, ``--lf``, any plugin) deselected. Tasks in
another ``--agentbench-shard`` are not planned here: the shard's run is whole when its own
tasks all ran (merging the shards makes the whole run). ``tasks`` is how many have a
record. The run is partial when some planned task has none, or pytest was interrupted.
"""

from __future__ import annotations

from pytest_agentbench.core.jsontypes import JsonObject, JsonValue


def run_coverage(
    *,
    tasks: int,
    selected: int,
    deselected: int,
    interrupted: bool,
    stopped: str | None = None,
    skipped: int = 0,
    over_budget: int = 0,
    saved: int = 0,
) -> JsonObject:
    """The ``coverage`` object of summary.json and the CTRF run extra: ``partial``,
    ``tasks``, ``planned``, ``selected``, ``deselected``, ``skipped`` and ``reasons``
    (short phrases, empty when the run is whole). A task skipped by a mark was meant not
    to run: it has no record and does not make the run partial. A task the spending cap
    stopped (``over_budget``) has no record either: it makes the run partial, with the
    reason ``N not run: budget`` and the count as ``over_budget``. A task the sequential
    comparison saved (``saved``: decided before it was sent) was not needed: it does not
    make the run partial, and is counted as ``sequential_saved``."""
    planned = max(selected + deselected, tasks + skipped + saved)
    done = tasks + skipped + saved
    reasons: list[JsonValue] = []
    if interrupted:
        reasons.append("interrupted")
    if stopped and done < max(selected, done):
        reasons.append(stopped)
    if deselected:
        reasons.append(f"{deselected} deselected")
    not_run = max(selected, done) - done
    budget = min(over_budget, not_run)
    if budget:
        reasons.append(f"{budget} not run: budget")
    if not_run - budget and not interrupted and not stopped:
        reasons.append(f"{not_run - budget} selected but not run")
    if skipped:
        reasons.append(f"{skipped} skipped")
    partial = interrupted or done < planned
    return {
        "partial": partial,
        "tasks": tasks,
        "planned": planned,
        "selected": selected,
        "deselected": deselected,
        "skipped": skipped,
        "reasons": reasons if partial else [],
        **({"over_budget": budget} if budget else {}),
        **({"sequential_saved": saved} if saved else {}),
    }


def partial_line(coverage: JsonValue) -> str | None:
    """``partial: 7 of 24 tasks (interrupted, 3 deselected)``; None for a whole run."""
    if not isinstance(coverage, dict) or not coverage.get("partial"):
        return None
    reasons = coverage.get("reasons")
    if not isinstance(reasons, list):
        reasons = []
    why = f" ({', '.join(str(r) for r in reasons)})" if reasons else ""
    return f"partial: {coverage.get('tasks')} of {coverage.get('planned')} tasks{why}"
