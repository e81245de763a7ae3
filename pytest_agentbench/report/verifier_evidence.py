"""Tiers 2 to 4 of a failure reason (``evidence.py`` has the tiers and the lines): the
evidence a verdict and its verifier's artifacts give — the inner CTRF's first failure,
what the verifier expected and got, a judge's rationale, the verdict's metric
breakdown, then ``reward.json`` and ``test-stdout.txt``. Each probe is bounded and never
raises: a surprise degrades to the next one."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.task_record import TaskRecord
from pytest_agentbench.report.ctrf_scan import CtrfFindings, scan_ctrf
from pytest_agentbench.report.mismatch import count_note, mismatch_line
from pytest_agentbench.report.probes import judge_rationale, read_reward_json, stdout_evidence
from pytest_agentbench.report.reason_text import clean, cut, finite_number, number_text

MAX_METRICS = 3
_PAIRED_SUFFIXES = ("_found", "_passed", "_ok")
_T = TypeVar("_T")


def _numeric(metrics: Mapping[str, object]) -> dict[str, float]:
    found: dict[str, float] = {}
    for name, value in metrics.items():
        number = finite_number(value)
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
                text = f"{base} {suffix[1:]} {number_text(value)}/{number_text(total)}"
                shown.append((_rank(value / total), order, text))
                used.update({name, f"{base}_total"})
                break
    for order, (name, value) in enumerate(numeric.items()):
        if name not in used:
            shown.append((_rank(value), order, f"{name} {number_text(value)}"))
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
        body = cut(clean(self.body))
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
    reward = finite_number(reward_json.get("reward"))
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


def verdict_evidence(record: TaskRecord) -> Evidence | None:
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
