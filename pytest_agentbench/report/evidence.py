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
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pytest_agentbench.core.durations import seconds_text
from pytest_agentbench.core.task_record import TaskRecord
from pytest_agentbench.errors import RATE_LIMIT_STATUSES
from pytest_agentbench.report.ctrf_scan import CtrfFindings, scan_ctrf
from pytest_agentbench.report.mismatch import count_note, mismatch_line
from pytest_agentbench.report.probes import judge_rationale, read_reward_json, stdout_evidence

BODY_LIMIT = 100
MAX_METRICS = 3
MAX_FAILURE_LINES = 5
_PAIRED_SUFFIXES = ("_found", "_passed", "_ok")
_SEVERITY = {"harness_error": 0, "loop_killed": 1, "timeout": 2, "length_exceeded": 3}
_STATUS_WORDS = {
    429: "rate limited",
    500: "server error",
    502: "bad gateway",
    503: "unavailable",
    504: "gateway timeout",
    529: "overloaded",
}
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_T = TypeVar("_T")


def collapse(text: str) -> str:
    """Whitespace runs become one space; ends stripped."""
    return re.sub(r"\s+", " ", text).strip()


def cut(text: str, limit: int = BODY_LIMIT) -> str:
    """``text`` cut to ``limit`` characters, with an ellipsis when anything was dropped."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _clean(text: str) -> str:
    """One printable line: control characters and unencodable surrogates removed."""
    text = text.encode("utf-8", errors="replace").decode("utf-8")
    return collapse(_CONTROL.sub(" ", text))


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _number_text(value: float) -> str:
    """``3``, ``0.25``, ``1000000``: whole numbers without exponent or ``.0``."""
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else f"{value:g}"


def format_reward(reward: object) -> str | None:
    """``0.4``-style text for a finite numeric reward; None when there is none to show."""
    number = _number(reward)
    return None if number is None else f"{number:.3g}"


def _numeric(metrics: Mapping[str, object]) -> dict[str, float]:
    found: dict[str, float] = {}
    for name, value in metrics.items():
        number = _number(value)
        if isinstance(name, str) and name != "reward" and number is not None:
            found[name] = number
    return found


def _metric_level(metrics: Mapping[str, object]) -> dict[str, float]:
    """The flat level's numeric metrics, else those nested under ``metrics``, else under
    ``details`` (one level only)."""
    flat = _numeric(metrics)
    if flat:
        return flat
    for key in ("metrics", "details"):
        nested = metrics.get(key)
        if isinstance(nested, Mapping) and (found := _numeric(nested)):
            return found
    return {}


def _rank(fraction: float) -> float:
    """Worst first: 0, then partial credit by its size, then perfect and non-scores."""
    return fraction if 0 <= fraction <= 1 else 1.0


def metric_breakdown(metrics: Mapping[str, object]) -> str | None:
    """``tests passed 2/5, format 0.5, style 1``: numeric metrics of the level chosen by
    :func:`_metric_level`, ``reward`` excluded. ``<x>_found`` / ``_passed`` / ``_ok`` pairs
    with a positive ``<x>_total`` and ranks by that fraction (the total is not shown again);
    other metrics rank by their value when in [0, 1]; worst first, stable, at most three."""
    numeric = _metric_level(metrics)
    shown: list[tuple[float, int, str]] = []
    used: set[str] = set()
    for order, (name, value) in enumerate(numeric.items()):
        for suffix in _PAIRED_SUFFIXES:
            base = name[: -len(suffix)]
            total = numeric.get(f"{base}_total")
            if name.endswith(suffix) and base and total is not None and total > 0:
                text = f"{base} {suffix[1:]} {_number_text(value)}/{_number_text(total)}"
                shown.append((_rank(value / total), order, text))
                used.update({name, f"{base}_total"})
                break
    for order, (name, value) in enumerate(numeric.items()):
        if name not in used:
            shown.append((_rank(value), order, f"{name} {_number_text(value)}"))
    if not shown:
        return None
    shown.sort(key=lambda item: (item[0], item[1]))
    return ", ".join(text for _, _, text in shown[:MAX_METRICS])


@dataclass(frozen=True)
class Evidence:
    """A free-text ``body`` (cut to :data:`BODY_LIMIT`) and a count ``suffix`` added after
    the cut, so "more is broken" is never truncated away. ``from_report`` is True when it
    says exactly what failed (a failed test of the inner test report, or what the verifier
    expected and what came instead): it wins over a repair round's feedback, which may
    hold the expected answer back on purpose."""

    body: str
    suffix: str = ""
    from_report: bool = False

    def render(self) -> str:
        body = cut(_clean(self.body))
        return f"{body} {self.suffix}" if self.suffix else body


def _attempt(probe: Callable[[Path], _T | None], path: Path) -> _T | None:
    """A probe's result; None when the file is missing or anything about it surprises."""
    try:
        return probe(path) if path.is_file() else None
    except Exception:  # a broken artifact degrades to the next probe, on purpose
        return None


#: ``rawStatus`` values of a test that got no verdict of its own (it never ran, the run was
#: tampered with, the verifier was killed): its message already says why, so the line is
#: ``<test> <message>`` rather than ``<test> failed: <message>``.
_NO_VERDICT = ("not_run", "tampered", "verifier_killed")


def _ctrf_evidence(findings: CtrfFindings) -> Evidence | None:
    test = findings.first_failure
    if test is None:
        return None
    name = test.name.split("::", 1)[1] if "::" in test.name else test.name
    name = name or "a test"
    raw = test.raw_status.lower()
    message = test.message.strip()
    if raw in _NO_VERDICT and message:
        body = f"{name} {message}"
    else:
        if raw == "setup_failed":
            verb = "error at setup"
        elif raw == "teardown_failed":
            verb = "error at teardown"
        else:
            verb = "failed" if test.status == "failed" else "error"
        body = f"{name} {verb}" + (f": {message}" if message else "")
    counts = []
    if findings.failures is not None and findings.failures > 1:
        more = findings.failures - 1
        counts.append(f"+{more} more failure{'s' if more > 1 else ''}")
    if findings.passed is not None and findings.total:
        counts.append(f"{findings.passed}/{findings.total} checks passed")
    return Evidence(body, f"({'; '.join(counts)})" if counts else "", from_report=True)


def ctrf_evidence(verifier_dir: Path) -> Evidence | None:
    """The first failed test of ``verifier/ctrf.json`` with its assertion message and the
    counts; None when there is no such file or no failed test in it."""
    findings = _attempt(scan_ctrf, verifier_dir / "ctrf.json")
    return _ctrf_evidence(findings) if findings is not None else None


def mismatch_evidence(directory: Path) -> Evidence | None:
    """What the verifier expected and what came instead (report/mismatch.py), from the
    ``details`` of ``reward.json``, with its ``<x>_found`` counts as the suffix; None when
    the file or its details say neither."""
    reward_json = _attempt(read_reward_json, directory / "reward.json")
    if reward_json is None:
        return None
    details, metrics = reward_json.get("details"), reward_json.get("metrics")
    reward = _number(reward_json.get("reward"))
    if not isinstance(details, dict) or (reward is not None and reward >= 1):
        return None  # a full reward: nothing came instead of what was expected
    try:
        line = mismatch_line(details)
        note = count_note(metrics) if isinstance(metrics, dict) else ""
    except Exception:  # a hostile reward.json degrades to the next tier
        return None
    if not line:
        return None
    return Evidence(line, f"({note})" if note else "", from_report=True)


def _file_evidence(directory: Path) -> Evidence | None:
    """``reward.json``'s metric breakdown, else ``test-stdout.txt``'s last line that says
    how the tests went."""
    reward_json = _attempt(read_reward_json, directory / "reward.json")
    if reward_json is not None:
        try:
            breakdown = metric_breakdown(reward_json)
        except Exception:  # a hostile reward.json degrades to test stdout
            breakdown = None
        if breakdown:
            return Evidence(breakdown)
    line = _attempt(stdout_evidence, directory / "test-stdout.txt")
    return Evidence(line) if line else None


def _judge_said(directory: Path) -> str | None:
    try:
        return judge_rationale(directory)
    except Exception:  # a broken judge.json degrades to the next tier, on purpose
        return None


def _verdict_evidence(record: TaskRecord) -> Evidence | None:
    """Tiers 2 to 4: the inner CTRF's first failure (it names the test and its assertion,
    which a count like ``tests passed 0/1`` does not), what the verifier expected and got,
    a judge's rationale, the verdict's metric breakdown, then the other verifier files."""
    vdir = record.verifier_dir
    directory = Path(vdir) if vdir else None
    if directory is not None and (evidence := ctrf_evidence(directory)) is not None:
        return evidence
    if directory is not None and (evidence := mismatch_evidence(directory)) is not None:
        return evidence
    if directory is not None and (said := _judge_said(directory)):
        return Evidence(said, from_report=True)  # what the judge found, over the feedback
    if record.verdict is not None:
        breakdown = metric_breakdown(record.verdict.metrics)
        if breakdown:
            return Evidence(breakdown)
    return _file_evidence(directory) if directory is not None else None


def _harness_line(record: TaskRecord) -> str:
    """``provider 529 overloaded after 4 retries: <detail>`` for an HTTP error response
    (a failure with a status and the provider's ``detail``) that was retried or is a rate
    limit; else the error text, with any retry count as a suffix. Status, retry count,
    detail and message come from the record's structured ``failure`` (set where the error
    happened); a record without one shows its error."""
    failure = record.failure
    message = failure.message if failure is not None else ""
    text = message if message.strip() else record.error
    text = _clean(str(text or "")) or "unknown error"
    retries = max(0, failure.retries) if failure is not None else 0
    after = f"after {retries} retr{'y' if retries == 1 else 'ies'}" if retries else ""
    status = failure.status if failure is not None else None
    detail = _clean(failure.detail if failure is not None else "").strip(" :")
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
        period, reps = _number(loop.period), _number(loop.repetitions)
        if period is not None:
            parts.append(
                f"period {_number_text(period)}" + (f" ×{_number_text(reps)}" if reps else "")
            )
        if loop.channel and loop.channel.strip():
            parts.append(f"in {loop.channel}")
        at = _number(loop.killed_s)
        at = at if at is not None else _number(loop.detected_s)
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
    limit = _number(record.extras.get("timeout_s"))
    if limit is not None:
        return f"timeout after {_number_text(limit)}s"
    return record.error or "timeout"


def _length_note(record: TaskRecord) -> str:
    """Which limit cut the answer: the output-token limit, or the context window (the
    prompt and the answer filled it before the output-token limit was reached)."""
    limit = _number(record.max_tokens)
    if record.length_limit == "context_window":
        rounds = record.rounds
        used = _number(rounds[-1].tokens) if rounds else None
        size = f" at {_number_text(used)} tokens (prompt and answer)" if used else ""
        before = (
            f", before the output-token limit ({_number_text(limit)})"
            if limit is not None and limit > 0
            else ""
        )
        return f"context window full{size}{before}"
    if limit is not None and limit > 0:
        return f"output-token limit ({_number_text(limit)}) reached"
    return "output-token limit reached"


def _repairs_evidence(record: TaskRecord, evidence: Evidence | None) -> Evidence | None:
    """``repairs exhausted (N): …`` for a failed task that had N repair rounds: the inner
    test report's first failure when there is one (it names the test and its assertion,
    which repair feedback may leave out on purpose), else the last feedback sent when the
    record has it (keeping the tier evidence's count suffix), else the tier evidence."""
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
        line = _clean(_reason(record))
    except Exception:  # mining must never break a run
        line = ""
    return line or "failed (no reason could be read from the record)"


def _reason(record: TaskRecord) -> str:
    outcome = record.outcome
    if outcome == "harness_error":
        return _harness_line(record)
    verdict = record.verdict
    reward = format_reward(record.reward)
    if reward is None and verdict is not None:
        reward = format_reward(verdict.reward)
    prefix = f"reward {reward} — " if reward is not None else ""
    if outcome == "loop_killed":
        return prefix + cut(_clean(_loop_line(record)))
    if outcome == "timeout" and verdict is not None and "verified anyway" in (record.error or ""):
        # a Harbor task verified after its agent ran out of time: what the verifier found
        found = Evidence(verdict.error) if verdict.error else _verdict_evidence(record)
        body = f"agent out of time, verified: {found.body}" if found else record.error or ""
        return prefix + Evidence(body, found.suffix if found else "").render()
    if outcome == "timeout":
        return prefix + cut(_clean(_timeout_line(record)))
    if verdict is not None and verdict.error:
        return cut(_clean(verdict.error))
    if outcome == "failed" and verdict is None and record.error:
        return cut(_clean(record.error))  # unverified: an agent under test failed itself
    evidence = _verdict_evidence(record)
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
    reward = _number(record.reward)
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
