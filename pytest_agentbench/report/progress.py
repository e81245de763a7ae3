"""What a person watching the run sees per task: the ``-v`` status word."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_agentbench.report.evidence import format_reward

_WORDS = {
    "passed": "PASSED",
    "failed": "FAILED",
    "timeout": "TIMEOUT",
    "loop_killed": "LOOP KILLED",
    "length_exceeded": "LENGTH EXCEEDED",
    "harness_error": "HARNESS ERROR",
}


def verbose_word(record: Mapping[str, Any]) -> str:
    """``PASSED reward 1 · 52 tokens``: the status word ``-v`` shows for a task; for a
    control, whether it behaved (``BEHAVED (verdict failed · reward 0)``)."""
    word = _WORDS.get(str(record.get("outcome")), "FAILED")
    control = record.get("control")
    if isinstance(control, Mapping):
        verdict = word.lower()
        behaved = control.get("behaved")
        word = "BEHAVED" if behaved is True else "MISBEHAVED" if behaved is False else word
        if word != verdict.upper():
            word = f"{word} (verdict {verdict}"
            reward = format_reward(record.get("reward"))
            return word + (f" · reward {reward})" if reward is not None else ")")
    parts = []
    reward = format_reward(record.get("reward"))
    if reward is not None:
        parts.append(f"reward {reward}")
    usage = record.get("usage")
    total = usage.get("total") if isinstance(usage, Mapping) else None
    if isinstance(total, int) and not isinstance(total, bool):
        parts.append(f"{total:,} tokens")
    attempts = record.get("attempts")
    if isinstance(attempts, int) and attempts > 1:
        parts.append(f"{attempts} attempts")
    if record.get("resumed"):
        parts.append("resumed")
    return f"{word} ({' · '.join(parts)})" if parts else word
