"""When an agent's tool calls have become a loop: the same call again and again, or a
short cycle of calls repeated. Watched by the built-in agent loop (runner/agent.py) and,
for agents under test, by the gateway's route (agents/route.py); the kill evidence has
the shape of a generation's text loop (runner/loopguard.py) with channel ``tools``."""

from __future__ import annotations

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject

_EXCERPT = 300


@dataclass(frozen=True)
class ToolLoopPolicy:
    """When repeated tool calls are a loop: the same call (name and arguments) ``same_call``
    times in a row, or a cycle of 2 to ``max_period`` calls repeated ``cycles`` times."""

    same_call: int = 4
    max_period: int = 4
    cycles: int = 3


class ToolLoopWatch:
    """The calls of one attempt, in order; ``add`` says when they have become a loop."""

    def __init__(self, policy: ToolLoopPolicy) -> None:
        self.policy = policy
        self.calls: list[str] = []

    def add(self, signature: str, at_s: float) -> JsonObject | None:
        """Record one call (``canonical_call``); the kill evidence when the calls now end
        in a loop, else None. Shorter periods are tried first, so a cycle of identical
        calls is reported as period 1."""
        calls = self.calls
        calls.append(signature)
        for period in range(1, self.policy.max_period + 1):
            needed = self.policy.same_call if period == 1 else self.policy.cycles
            block = calls[-period:]
            if len(calls) < period * needed or (period > 1 and len(set(block)) == 1):
                continue
            repetitions = 1
            while calls[-(repetitions + 1) * period : len(calls) - repetitions * period] == block:
                repetitions += 1
            if repetitions >= needed:
                excerpt = " → ".join(block)
                if len(excerpt) > _EXCERPT:
                    excerpt = excerpt[: _EXCERPT - 1] + "…"
                return {
                    "channel": "tools",
                    "period": period,
                    "repetitions": repetitions,
                    "rule": "same call" if period == 1 else "cycle",
                    "numeric": False,
                    "score": 1.0,
                    "detected_s": round(at_s, 3),
                    "killed_s": round(at_s, 3),
                    "held_s": 0.0,
                    "calls": len(calls),
                    "excerpt": excerpt,
                }
        return None
