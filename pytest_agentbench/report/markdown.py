"""A Markdown summary of a run, for GitHub's step summary or any file: a table of suites ×
models, the failures with their reasons, where the artifacts are."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_agentbench.artifacts.controls import task_records
from pytest_agentbench.artifacts.coverage import partial_line
from pytest_agentbench.artifacts.score_stats import interval_text
from pytest_agentbench.core.task_record import RunSummary
from pytest_agentbench.report.controls import control_lines
from pytest_agentbench.report.evidence import failure_reason
from pytest_agentbench.report.terminal import task_label, tokens_text

MAX_FAILURES = 20


def _cell(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def _ci(row: Mapping[str, Any], name: str) -> str:
    est = (row.get("stats") or {}).get(name) or {}
    lo, hi = est.get("lo"), est.get("hi")
    return "–" if lo is None or hi is None else f"{lo:.3f}–{hi:.3f}"


def stats_lines(totals: Mapping[str, Any]) -> list[str]:
    """The run's final and first-try scores with n, standard error and interval, then
    the repair curve (one row per round) when repairs ran."""
    stats = totals.get("stats")
    if not isinstance(stats, Mapping) or totals.get("score") is None:
        return []
    lines = [
        f"Score {interval_text(stats['score'])} · first try "
        f"{interval_text(stats['first_try'])} (± is the standard error)",
        "",
    ]
    curve = totals.get("repair_curve")
    if curve:
        lines += [
            "| round | score | 95 % CI | n | new passes | tokens |",
            "| ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for row in curve:
            est = row["score"]
            lines.append(
                "| "
                + " | ".join(
                    _cell(v)
                    for v in (
                        row["round"],
                        est.get("value"),
                        _ci({"stats": row}, "score"),
                        est.get("n"),
                        row["new_passes"],
                        row["tokens"],
                    )
                )
                + " |"
            )
        lines.append("")
    return lines


def comparison_markdown(summary: Mapping[str, Any]) -> list[str]:
    """The baseline comparison and the robustness drops, from summary.json's sections."""
    lines: list[str] = []
    baseline = summary.get("baseline")
    if isinstance(baseline, Mapping):
        lines += ["", f"### Against the baseline `{_cell(baseline.get('run_id'))}`", ""]
        for comparison in baseline.get("comparisons") or []:
            lines.append(f"- {_cell(comparison['words'])}")
            left_out = comparison.get("excluded")
            if left_out:
                lines.append(f"  - {left_out} task(s) excluded: a harness error on either side")
            found = comparison.get("regressions") or []
            if found:
                shown = ", ".join(f"`{_cell(name)}`" for name in found[:MAX_FAILURES])
                more = (
                    f" … and {len(found) - MAX_FAILURES} more" if len(found) > MAX_FAILURES else ""
                )
                lines.append(f"  - {len(found)} regression(s): {shown}{more}")
        if not baseline.get("comparisons"):
            lines.append("- no model of this run ran in the baseline")
    robustness = summary.get("robustness")
    if robustness:
        lines += ["", "### Robustness", ""]
        lines.append("| perturbation | pairs | drop | 95 % CI | test | p | verdict |")
        lines.append("| --- | ---: | ---: | ---: | --- | ---: | --- |")
        for row in robustness:
            d = row["difference"]
            value = None if d.get("value") is None else 0.0 - d["value"]
            ci = "–" if d.get("lo") is None else f"{0.0 - d['hi']:+.3f} to {0.0 - d['lo']:+.3f}"
            verdict = "significant" if row["significant"] else "within noise"
            cells = (row["second"], row["paired"], value, ci, row["test"], row["p_value"], verdict)
            lines.append("| " + " | ".join(_cell(v) for v in cells) + " |")
    return lines


def markdown_summary(run: RunSummary, *, run_dir: str) -> str:
    """The Markdown text for ``run`` (summary.json) and its records."""
    records = run.tasks
    summary: Mapping[str, Any] = {
        **run.sections,
        "partial": run.partial,
        "totals": run.totals,
        "scores": run.scores,
    }
    totals = summary["totals"]
    outcomes = totals["outcomes"]
    head = f"{totals['tasks']} tasks: {outcomes['passed']} passed"
    for key, label in (
        ("failed", "failed"),
        ("timeout", "timed out"),
        ("loop_killed", "loop killed"),
        ("length_exceeded", "length exceeded"),
        ("harness_error", "harness errors"),
    ):
        if outcomes.get(key):
            head += f", {outcomes[key]} {label}"
    score = totals.get("score")
    if score is not None:
        head += f" · score {score:.3f}"
    partial = partial_line(summary.get("coverage"))
    if partial is None and summary.get("partial"):
        partial = "partial run"
    lines = [f"## agentbench — {partial + ' · ' if partial else ''}{head}", ""]
    if partial:
        lines += [f"**{partial[:1].upper() + partial[1:]}**: the score covers these only.", ""]
    usage = totals.get("usage")
    if isinstance(usage, Mapping):
        lines += [f"Tokens: {tokens_text(usage)}", ""]
    lines += stats_lines(totals)
    lines.append(
        "| suite | model | tasks | passed | not passed | harness errors | score | 95 % CI "
        "| first try | 95 % CI |"
    )
    lines.append("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in summary.get("scores", []):
        counts = row["outcomes"]
        not_passed = row["tasks"] - counts["passed"] - counts["harness_error"]
        lines.append(
            "| "
            + " | ".join(
                _cell(v)
                for v in (
                    row["suite"],
                    row["model"],
                    row["tasks"],
                    counts["passed"],
                    not_passed,
                    counts["harness_error"],
                    row["score"],
                    _ci(row, "score"),
                    row["first_try_score"],
                    _ci(row, "first_try"),
                )
            )
            + " |"
        )
    lines += _lineup_lines(summary)
    gate = summary.get("gate")
    if gate:
        verdict = "passed" if gate["ok"] else "**failed**"
        checks = ", ".join(
            f"{c['label']} {_cell(c['score'])}"
            + (" (95 % CI lower bound)" if c.get("on") == "lower" else "")
            + f" (min {c['threshold']:g})"
            for c in gate["checks"]
        )
        lines += ["", f"Score gate {verdict}: {checks}"]
    lines += comparison_markdown(summary)
    if summary.get("invalid"):
        lines += ["", f"**Result invalid**: {summary['invalid']}"]
    controls = control_lines(records)
    if controls:
        lines += ["", "### Controls", "", *(f"- {_cell(line)}" for line in controls)]
    failures = [r for r in task_records(records) if r.outcome != "passed"]
    if failures:
        lines += ["", "### Not passed", ""]
        for record in failures[:MAX_FAILURES]:
            reason = record.message or failure_reason(record)
            cause = record.error
            if record.outcome == "harness_error" and cause:
                reason = f"harness error: {cause}"  # whole: the reason line is cut
            where = record.rollout_dir or ""
            name = task_label(record)
            mark = "⚠" if record.outcome == "harness_error" else "✗"
            lines.append(f"- {mark} `{name}` — {_cell(reason)} (`{where}`)")
        if len(failures) > MAX_FAILURES:
            lines.append(f"- … and {len(failures) - MAX_FAILURES} more (see summary.json)")
    lines += ["", f"Results: `{run_dir}` (ctrf.json, summary.json, tasks/)", ""]
    return "\n".join(lines)


def _lineup_lines(summary: Mapping[str, Any]) -> list[str]:
    """With epochs: each suite × model's reduced score; with several models: each pair
    compared (summary.json's ``reduced`` and ``comparisons``)."""
    lines = []
    for row in summary.get("scores", []):
        reduced = row.get("reduced")
        if isinstance(reduced, Mapping):
            score = reduced["score"]
            excluded = f", {reduced['excluded']} excluded" if reduced["excluded"] else ""
            lines.append(
                f"- `{row['suite']}` × `{row['model']}`: {reduced['reducer']} over "
                f"{reduced['epochs']} epochs {_cell(score.get('value'))} "
                f"(n={score.get('n')} tasks{excluded})"
            )
    for pair in summary.get("comparisons") or []:
        scope = f"`{pair['suite']}`: " if pair.get("suite") is not None else ""
        lines.append(f"- {scope}{_cell(pair['words'])}")
    return ["", *lines] if lines else []
