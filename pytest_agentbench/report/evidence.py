"""The one-line reason a task failed, mined from its record and its verifier artifacts.

Tiers, first that yields wins (docs/failure-reasons.md has the rules and examples):

1. the verifier's own error;
2. ``reward R — <first failed test>[: <message>]`` from the inner ``verifier/ctrf.json``,
   else ``reward R — expected …, got …`` from ``verifier/reward.json``'s details;
3. ``reward R — <metric breakdown>`` from the verdict's metrics;
4. ``reward R — <evidence>`` from ``verifier/reward.json``, then
   ``verifier/test-stdout.txt``;
5. ``reward R`` (or the bare outcome when no reward is known).

Outcomes other than ``failed`` get their own line (loop kill, timeout, output-token limit,
provider error, repairs exhausted). Never raises: any surprise degrades to the next tier,
and the result is always one non-empty line that never says ``reward None``.

This module makes the line for each outcome and orders the failures; tiers 2 to 4 (the
verdict and its verifier's artifacts) are ``verifier_evidence.py``'s, the line's text
(collapsed, cut, numbers) ``reason_text.py``'s.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

from pytest_agentbench.core.durations import seconds_text
from pytest_agentbench.core.task_record import TaskRecord
from pytest_agentbench.errors import RATE_LIMIT_STATUSES
from pytest_agentbench.report.reason_text import (
    clean,
    cut,
    finite_number,
    format_reward,
    number_text,
)

if TYPE_CHECKING:  # the artifact miner: imported when a line is made (a task failed)
    from pytest_agentbench.report.verifier_evidence import Evidence

MAX_FAILURE_LINES = 5
_SEVERITY = {"harness_error": 0, "loop_killed": 1, "timeout": 2, "length_exceeded": 3}
_STATUS_WORDS = {
    429: "rate limited",
    500: "server error",
    502: "bad gateway",
    503: "unavailable",
    504: "gateway timeout",
    529: "overloaded",
}


def _harness_line(record: TaskRecord) -> str:
    """``provider 529 overloaded after 4 retries: <detail>`` for an HTTP error response
    (a failure with a status and the provider's ``detail``) that was retried or is a rate
    limit; else the error text, with any retry count as a suffix. Status, retry count,
    detail and message come from the record's structured ``failure`` (set where the error
    happened); a record without one shows its error."""
    failure = record.failure
    message = failure.message if failure is not None else ""
    text = message if message.strip() else record.error
    text = clean(str(text or "")) or "unknown error"
    retries = max(0, failure.retries) if failure is not None else 0
    after = f"after {retries} retr{'y' if retries == 1 else 'ies'}" if retries else ""
    status = failure.status if failure is not None else None
    detail = clean(failure.detail if failure is not None else "").strip(" :")
    if status is not None and detail and (retries or status in RATE_LIMIT_STATUSES):
        line = f"provider {status} {_STATUS_WORDS.get(status, 'error')}"
        line += f" {after}" if after else ""
        return "harness error: " + cut(f"{line}: {detail}" if detail else line)
    return "harness error: " + cut(text) + (f" ({after})" if after else "")


def _loop_line(record: TaskRecord) -> str:
    if record.error and record.error.startswith("agent killed:"):
        return record.error  # an agent under test's own line: where the loop was
    loop = record.loop
    parts = []
    if loop is not None:
        period, reps = finite_number(loop.period), finite_number(loop.repetitions)
        if period is not None:
            parts.append(
                f"period {number_text(period)}" + (f" ×{number_text(reps)}" if reps else "")
            )
        if loop.channel and loop.channel.strip():
            parts.append(f"in {loop.channel}")
        at = finite_number(loop.killed_s)
        at = at if at is not None else finite_number(loop.detected_s)
        if loop.rule == "whole reply":
            parts.append("(the reply arrived whole)")
        elif at is not None:
            parts.append(f"at {seconds_text(at)} s")
    if not parts and record.error:
        parts.append(record.error)
    return "loop killed" + (f": {' '.join(parts)}" if parts else "")


def _timeout_line(record: TaskRecord) -> str:
    if record.error and record.error.startswith("agent timed out"):
        return record.error  # an agent under test's own line, with its model calls
    limit = finite_number(record.extras.get("timeout_s"))
    if limit is not None:
        return f"timeout after {number_text(limit)}s"
    return record.error or "timeout"


def _length_note(record: TaskRecord) -> str:
    """Which limit cut the answer: the output-token limit, or the context window (the
    prompt and the answer filled it before the output-token limit was reached)."""
    limit = finite_number(record.max_tokens)
    if record.length_limit == "context_window":
        rounds = record.rounds
        used = finite_number(rounds[-1].tokens) if rounds else None
        size = f" at {number_text(used)} tokens (prompt and answer)" if used else ""
        before = (
            f", before the output-token limit ({number_text(limit)})"
            if limit is not None and limit > 0
            else ""
        )
        return f"context window full{size}{before}"
    if limit is not None and limit > 0:
        return f"output-token limit ({number_text(limit)}) reached"
    return "output-token limit reached"


def _repairs_evidence(record: TaskRecord, evidence: Evidence | None) -> Evidence | None:
    """``repairs exhausted (N): …`` for a failed task that had N repair rounds: the inner
    test report's first failure when there is one (it names the test and its assertion,
    which repair feedback may leave out on purpose), else the last feedback sent when the
    record has it (keeping the tier evidence's count suffix), else the tier evidence."""
    from pytest_agentbench.report.verifier_evidence import Evidence

    attempts = record.attempts
    if attempts < 2:
        return evidence
    lead = f"repairs exhausted ({attempts - 1})"
    feedback = record.last_feedback
    if evidence is not None and evidence.from_report:
        return Evidence(f"{lead}: {evidence.body}", evidence.suffix, from_report=True)
    if feedback is not None and feedback.strip():
        return Evidence(f"{lead}: {feedback}", evidence.suffix if evidence else "")
    if evidence is None:
        return Evidence(lead)
    return Evidence(f"{lead}: {evidence.body}", evidence.suffix)


def failure_reason(record: TaskRecord) -> str:
    """The reason line for a record that did not pass (without the task name): one
    non-empty line, never ``reward None``, never an exception."""
    try:
        line = clean(_reason(record))
    except Exception:  # mining must never break a run
        line = ""
    return line or "failed (no reason could be read from the record)"


def _reason(record: TaskRecord) -> str:
    from pytest_agentbench.report.verifier_evidence import Evidence, verdict_evidence

    outcome = record.outcome
    if outcome == "harness_error":
        return _harness_line(record)
    verdict = record.verdict
    reward = format_reward(record.reward)
    if reward is None and verdict is not None:
        reward = format_reward(verdict.reward)
    prefix = f"reward {reward} — " if reward is not None else ""
    if outcome == "loop_killed":
        return prefix + cut(clean(_loop_line(record)))
    if outcome == "timeout" and verdict is not None and "verified anyway" in (record.error or ""):
        # a Harbor task verified after its agent ran out of time: what the verifier found
        found = Evidence(verdict.error) if verdict.error else verdict_evidence(record)
        body = f"agent out of time, verified: {found.body}" if found else record.error or ""
        return prefix + Evidence(body, found.suffix if found else "").render()
    if outcome == "timeout":
        return prefix + cut(clean(_timeout_line(record)))
    if verdict is not None and verdict.error:
        return cut(clean(verdict.error))
    if outcome == "failed" and verdict is None and record.error:
        return cut(clean(record.error))  # unverified: an agent under test failed itself
    evidence = verdict_evidence(record)
    if outcome == "length_exceeded":
        note = _length_note(record)
        evidence = Evidence(f"{note}; {evidence.body}", evidence.suffix) if evidence else None
        evidence = evidence or Evidence(note)
    elif outcome == "failed":
        evidence = _repairs_evidence(record, evidence)
    if evidence is not None and (line := evidence.render()):
        return prefix + line
    if reward is not None:
        return f"reward {reward}"
    return outcome or "failed"


def _severity(record: TaskRecord) -> tuple[int, float, str]:
    rank = _SEVERITY.get(record.outcome, len(_SEVERITY))
    reward = finite_number(record.reward)
    return rank, -1.0 if reward is None else reward, record.nodeid


def order_failures(records: Iterable[TaskRecord]) -> list[TaskRecord]:
    """The records that did not pass, most severe first: harness error, loop kill, timeout,
    output-token limit, then any other failure; lowest reward first within each (no reward
    counts lowest); ties by node id, so the lines are the same whichever order the tasks
    finished in (concurrency, xdist)."""
    failed = [r for r in records if r.outcome != "passed"]
    return sorted(failed, key=_severity)


def shown_failures(records: Iterable[TaskRecord]) -> list[TaskRecord]:
    """The ``✗`` lines' records in order (harness errors are listed apart), all of them;
    the terminal shows the first :data:`MAX_FAILURE_LINES`."""
    return [r for r in order_failures(records) if r.outcome != "harness_error"]


def details_pointer(records: Iterable[TaskRecord]) -> str | None:
    """The verifier dir of the first shown failure whose verifier dir exists, whichever
    tier gave its line; None when no shown failure has one."""
    for record in shown_failures(records)[:MAX_FAILURE_LINES]:
        vdir = record.verifier_dir
        if vdir and os.path.isdir(vdir):
            return vdir
    return None
