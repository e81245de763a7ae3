"""Repair rounds: what the model is told after a failed verdict.

Two modes: ``conversation`` appends the answer and the feedback as turns of the same
conversation; ``stateless`` sends a fresh request holding the task, the previous answer
and the feedback. Four feedback levels decide how much of the verdict is shown, so a suite
can stop feedback from leaking the expected answer: ``none`` (only that it failed),
``counts`` (how many checks passed), ``names`` (the verifier's feedback sentence, written
not to reveal expected values; the default), ``raw`` (that plus the verdict's details,
capped at ``RAW_LIMIT`` characters). Tools are never mentioned: a repair prompt says only
what the task itself provides.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.suites.task import FeedbackLevel, Task
from pytest_agentbench.verifiers.base import Verdict

RAW_LIMIT = 4000
_PAIRED = ("_found", "_passed", "_ok")


def repairs_allowed(task: Task) -> int:
    """Repair rounds this task may use. A choice task with two or fewer options gets none:
    after one wrong answer, "wrong" would give the right one away."""
    if task.verifier.kind == "choice" and len(task.choices) <= 2:
        return 0
    return task.repairs


def check_counts(metrics: Mapping[str, object]) -> tuple[float, float] | None:
    """(passed, total) from a ``<x>_found|_passed|_ok`` metric and its ``<x>_total``."""
    for name, value in metrics.items():
        for suffix in _PAIRED:
            if name.endswith(suffix):
                total = metrics.get(name[: -len(suffix)] + "_total")
                if isinstance(value, int | float) and isinstance(total, int | float) and total:
                    return float(value), float(total)
    return None


def feedback_text(verdict: Verdict, level: FeedbackLevel) -> str:
    """The verdict as shown to the model at ``level`` (a FeedbackLevel)."""
    lines = ["Your previous answer did not pass the check."]
    if level == "none":
        return lines[0]
    counts = check_counts(verdict.metrics)
    if counts is not None:
        lines.append(f"{counts[0]:g} of {counts[1]:g} checks passed.")
    elif level == "counts":
        lines.append(f"Score: {verdict.reward:.2g} out of 1.")
    if level in ("names", "raw") and verdict.feedback:
        lines.append(f"Feedback: {verdict.feedback}")
    if level == "raw" and verdict.details:
        raw = json.dumps(verdict.details, ensure_ascii=False, default=str)
        if len(raw) > RAW_LIMIT:
            raw = raw[: RAW_LIMIT - 1] + "…"
        lines.append(f"Details: {raw}")
    return "\n".join(lines)


def repair_request(
    task: Task,
    messages: Sequence[Mapping[str, JsonValue]],
    answer: str,
    verdict: Verdict,
    attempts_left: int,
    cut_off: bool,
) -> tuple[list[JsonObject], str]:
    """The messages of the next attempt and the feedback text sent with them."""
    parts = [feedback_text(verdict, task.feedback)]
    if cut_off:
        parts.append("Your answer was cut off at the output-token limit; be shorter.")
    plural = "s" if attempts_left != 1 else ""
    parts.append(f"Please answer again. {attempts_left} attempt{plural} left, this one included.")
    feedback = "\n".join(parts)
    if task.repair_mode == "stateless":
        prompt = f"{task.prompt}\n\nYour previous answer was:\n{answer}\n\n{feedback}"
        return [{"role": "user", "content": prompt}], feedback
    turns = [dict(m) for m in messages]
    turns.append({"role": "assistant", "content": answer})
    turns.append({"role": "user", "content": feedback})
    return turns, feedback
