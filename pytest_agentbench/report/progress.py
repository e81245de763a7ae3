"""What a person watching the run sees per task: the ``-v`` status word."""

from __future__ import annotations

from pytest_agentbench.core.task_record import TaskRecord
from pytest_agentbench.report.reason_text import format_reward

_WORDS = {
    "passed": "PASSED",
    "failed": "FAILED",
    "timeout": "TIMEOUT",
    "loop_killed": "LOOP KILLED",
    "length_exceeded": "LENGTH EXCEEDED",
    "harness_error": "HARNESS ERROR",
}


def verbose_word(record: TaskRecord) -> str:
    """``PASSED reward 1 · 52 tokens``: the status word ``-v`` shows for a task; for a
    control, whether it behaved (``BEHAVED (verdict failed · reward 0)``)."""
    word = _WORDS.get(record.outcome, "FAILED")
    control = record.control
    if control is not None:
        verdict = word.lower()
        behaved = control.behaved
        word = "BEHAVED" if behaved is True else "MISBEHAVED" if behaved is False else word
        if word != verdict.upper():
            word = f"{word} (verdict {verdict}"
            reward = format_reward(record.reward)
            return word + (f" · reward {reward})" if reward is not None else ")")
    parts = []
    reward = format_reward(record.reward)
    if reward is not None:
        parts.append(f"reward {reward}")
    total = record.usage.total
    if total is not None:
        parts.append(f"{total:,} tokens")
    if record.attempts > 1:
        parts.append(f"{record.attempts} attempts")
    if record.resumed:
        parts.append("resumed")
    return f"{word} ({' · '.join(parts)})" if parts else word
