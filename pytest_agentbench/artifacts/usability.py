"""Whether a run's number is usable: a run whose harness errors pass
:data:`UNUSABLE_ERROR_SHARE` of its tasks (they outnumber the tasks it scored: a server
that died mid-run, a judge that was down) scores only the few tasks that got through, so
its score says little about the model. Such a run says so on its headline, in
summary.json's ``totals.unusable`` and in its exit status (session/finish.py), and names
the rerun that completes it."""

from __future__ import annotations

from collections.abc import Sequence

from pytest_agentbench.core.jsontypes import JsonObject
from pytest_agentbench.core.task_record import TaskRecord

#: The share of a run's tasks that, once harness errors pass it, makes its score not
#: usable: half (the errors outnumber the tasks scored).
UNUSABLE_ERROR_SHARE = 0.5

#: The options that rerun a run's harness errors and keep its other records.
RETRY_OPTIONS = "--agentbench-resume {run} --agentbench-retry-errors"


def unusable(records: Sequence[TaskRecord], run: str = "latest") -> JsonObject | None:
    """summary.json's ``totals.unusable`` for the ``records`` (controls left out
    already): the harness errors, the tasks, their share, the share that makes a run not
    usable, the words and the rerun's options (``run``: the run folder as the user names
    it); None for a usable run (or one with no task)."""
    if not records:
        return None
    errors = sum(1 for r in records if r.outcome == "harness_error")
    share = errors / len(records)
    if share <= UNUSABLE_ERROR_SHARE:
        return None
    retry = RETRY_OPTIONS.format(run=run)
    return {
        "harness_errors": errors,
        "tasks": len(records),
        "share": round(share, 4),
        "limit": UNUSABLE_ERROR_SHARE,
        "words": (
            f"not usable: {errors} of {len(records)} tasks are harness errors "
            f"(more than {UNUSABLE_ERROR_SHARE:.0%}), so the score covers {len(records) - errors} "
            f"task(s) only; rerun them with {retry}"
        ),
        "retry": retry,
    }
