"""The kill rule: watch a generation's stream and cancel it when it has degenerated.

One LoopWatch per channel (thinking, answer). A channel is killed when its confirmed
cycle's score stays at or above the threshold for the kill window in seconds, or for the
character budget (so fast and slow servers are treated alike) — whichever comes first.
The guard is the stream's event sink: it raises ``LoopKilled`` from inside the client's
read loop, which closes the stream. With a threshold of 0 nothing is killed, but every
verdict is still recorded.

A reply that arrives whole (not streamed: ``--agentbench-no-stream``, a provider batch, a
server that ignores ``stream``) comes as one long event. The guard reads it in pieces of
``WHOLE_PIECE`` characters, so the rule sees the loop grow as a stream would have shown
it; no time passes within the reply, so the token budget alone can end it. There is
nothing left to cancel then: the guard notes the kill, and ``check`` raises it once the
reply is in, carrying the reply (its usage is the provider's, not an estimate).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from pytest_agentbench.core.durations import any_seconds_text
from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.stream import StreamEvent
from pytest_agentbench.runner.loopwatch import LoopVerdict, LoopWatch

if TYPE_CHECKING:
    from pytest_agentbench.models.base import Generation

CHARS_PER_TOKEN = 4
#: A text event longer than this is a reply that arrived whole, read in pieces this long.
WHOLE_PIECE = 256
#: Points of a channel's score trace kept at most (halved by dropping every other one).
TRACE_POINTS = 200


@dataclass(frozen=True)
class KillPolicy:
    """``threshold`` in [0, 1] (0: never kill); ``window_s`` seconds or ``budget_tokens``
    more tokens (estimated at four characters each) of a confirmed loop before the kill."""

    threshold: float = 0.8
    window_s: float = 10.0
    budget_tokens: int = 1024


class LoopKilled(Exception):
    """Raised from the event sink to cancel a looping stream; ``evidence`` says why.
    ``whole`` is the reply when it arrived whole (LoopGuard.check): nothing was cut."""

    def __init__(self, evidence: JsonObject, whole: Generation | None = None) -> None:
        self.evidence = evidence
        self.whole = whole
        where = (
            "(the reply arrived whole)"
            if evidence.get("rule") == "whole reply"
            else f"at {any_seconds_text(evidence['killed_s'])} s"
        )
        super().__init__(
            f"loop killed: period {evidence['period']} ×{evidence['repetitions']:g} in "
            f"{evidence['channel']} {where}"
        )


@dataclass(frozen=True, slots=True)
class ChannelPeak:
    """A channel's highest verdict over one generation, with its score ``trace``
    (``[seconds, characters, score]`` points)."""

    verdict: LoopVerdict
    trace: list[list[float]]

    @property
    def rank(self) -> tuple[bool, float]:
        """What makes one peak higher than another: a confirmed loop, then the score (as
        recorded, to three places)."""
        return self.verdict.confirmed, round(self.verdict.score, 3)

    def as_dict(self) -> JsonObject:
        """The record's shape; ``trace`` only when the score ever rose above 0."""
        verdict, cycle = self.verdict, self.verdict.cycle
        record: JsonObject = {
            "state": verdict.state,
            "score": round(verdict.score, 3),
            "confirmed": verdict.confirmed,
            "period": cycle.period if cycle else None,
            "repetitions": round(cycle.repetitions, 1) if cycle else None,
            "numeric": cycle.numeric if cycle else None,
            "excerpt": cycle.excerpt if cycle else None,
        }
        if round(verdict.score, 3) > 0:
            points: list[JsonValue] = [list[JsonValue](point) for point in self.trace]
            record["trace"] = points
        return record


@dataclass(frozen=True, slots=True)
class GuardSummary:
    """What one guard saw of its generation: the kill evidence (None when not killed),
    whether the thinking recovered from a loop, and each channel's peak."""

    killed: JsonObject | None
    recovered: bool
    channels: dict[str, ChannelPeak]

    def as_dict(self) -> JsonObject:
        channels: JsonObject = {name: peak.as_dict() for name, peak in self.channels.items()}
        return {"killed": self.killed, "recovered": self.recovered, "channels": channels}


class LoopGuard:
    """The event sink of one generation. Keeps the streamed text (what a killed stream
    produced) and each channel's verdicts."""

    def __init__(self, policy: KillPolicy, clock: Callable[[], float] = time.monotonic) -> None:
        self.policy = policy
        self._clock = clock
        self._start = clock()
        self._watches = {"thinking": LoopWatch(), "answer": LoopWatch()}
        self._parts: dict[str, list[str]] = {"thinking": [], "answer": []}
        self._holding: dict[str, tuple[float, int]] = {}
        self._detected: dict[str, float] = {}
        self._trace: dict[str, list[list[float]]] = {"thinking": [], "answer": []}
        self.killed: JsonObject | None = None

    @property
    def answer(self) -> str:
        return "".join(self._parts["answer"])

    @property
    def thinking(self) -> str:
        return "".join(self._parts["thinking"])

    def __call__(self, event: StreamEvent) -> None:
        if event.kind == "text":
            channel = "answer"
        elif event.kind == "thinking":
            channel = "thinking"
        else:
            return
        text = event.text
        if len(text) <= WHOLE_PIECE:
            if self._take(channel, text) is not None:
                raise LoopKilled(self.killed or {})
            return
        for at in range(0, len(text), WHOLE_PIECE):
            found = self._take(channel, text[at : at + WHOLE_PIECE])
            if found is not None:
                found["rule"] = "whole reply"  # the token budget, in a reply already in

    def check(self, generation: Generation) -> Generation:
        """``generation`` as it is, unless the guard found a loop the rule would have
        killed in a reply that arrived whole: then LoopKilled, carrying the reply."""
        if self.killed is not None:
            raise LoopKilled(self.killed, whole=generation)
        return generation

    def _take(self, channel: str, text: str) -> JsonObject | None:
        """Feed ``text`` to the channel's watch; the kill's evidence when the rule ends
        the generation here (the first time only)."""
        self._parts[channel].append(text)
        watch = self._watches[channel]
        watch.feed(text)
        verdict = watch.verdict()
        now = self._clock() - self._start
        self._note(channel, now, watch.chars, verdict.score)
        looping = verdict.confirmed and verdict.state == "looping"
        if looping:
            self._detected.setdefault(channel, now)
        threshold = self.policy.threshold
        if self.killed is not None or not (
            threshold > 0 and looping and verdict.score >= threshold
        ):
            self._holding.pop(channel, None)
            return None
        since, chars = self._holding.setdefault(channel, (now, watch.chars))
        held_s = now - since
        grown_tokens = (watch.chars - chars) / CHARS_PER_TOKEN
        if held_s < self.policy.window_s and grown_tokens < self.policy.budget_tokens:
            return None
        cycle = verdict.cycle
        assert cycle is not None
        self.killed = {
            "channel": channel,
            "period": cycle.period,
            "repetitions": round(cycle.repetitions, 1),
            "numeric": cycle.numeric,
            "score": round(verdict.score, 3),
            "detected_s": round(self._detected[channel], 3),
            "killed_s": round(now, 3),
            "held_s": round(held_s, 3),
            "chars": watch.chars,
            "excerpt": cycle.excerpt,
            "rule": "window" if held_s >= self.policy.window_s else "token budget",
        }
        return self.killed

    def _note(self, channel: str, now: float, chars: int, score: float) -> None:
        """Add a point to the channel's score trace (seconds, characters, score) when the
        score moved by 0.01 or more; at most ``TRACE_POINTS`` points are kept, evenly
        thinned, the first and the newest always."""
        trace = self._trace[channel]
        point = [round(now, 3), chars, round(score, 3)]
        flat = len(trace) > 1 and all(abs(p[2] - point[2]) < 0.01 for p in trace[-2:])
        if flat:
            trace[-1] = point  # a flat stretch: keep its two ends only
        else:
            trace.append(point)
        if len(trace) > TRACE_POINTS:
            trace[:] = [*trace[:-1:2], trace[-1]]

    @property
    def score(self) -> float:
        """The higher of the two channels' current loop scores."""
        return max(watch.verdict().score for watch in self._watches.values())

    def chain(self, outer: Callable[[StreamEvent], None] | None) -> Callable[[StreamEvent], None]:
        """The event sink for a generation: this guard first (it may kill the stream),
        then ``outer``, which also hears a ``loop`` event each time the score rises past
        0.5 by another tenth (the live status shows it)."""
        if outer is None:
            return self
        shown = [0.0]

        def sink(event: StreamEvent) -> None:
            self(event)
            outer(event)
            score = round(self.score, 1)
            if score >= 0.5 and score > shown[0]:
                shown[0] = score
                outer(StreamEvent("loop", data={"score": score}))

        return sink

    def summary(self) -> GuardSummary:
        """Per channel the highest verdict seen, with its score trace; ``recovered`` when
        the thinking looped (confirmed) yet the model went on to answer without being
        killed."""
        peaks = {
            name: ChannelPeak(watch.peak, self._trace[name])
            for name, watch in self._watches.items()
        }
        thinking_looped = peaks["thinking"].verdict.confirmed
        recovered = bool(thinking_looped and self.killed is None and self.answer.strip())
        return GuardSummary(self.killed, recovered, peaks)

    def record(self) -> JsonObject:
        """``summary()`` as the loop record keeps it (per channel the peak verdict, with
        its ``trace`` when the score ever rose above 0)."""
        return self.summary().as_dict()


def fresh_guards(policy: KillPolicy) -> Callable[[], LoopGuard]:
    """A maker of one new guard per stream, for a model a verifier calls (a judge): its
    stream is watched and killed by the same rule as the model's."""

    def make() -> LoopGuard:
        return LoopGuard(policy)

    return make
