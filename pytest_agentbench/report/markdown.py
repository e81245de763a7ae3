"""A Markdown summary of a run, for GitHub's step summary or any file: a table of suites ×
models, the failures with their reasons, where the artifacts are."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pytest_agentbench.artifacts.controls import task_records
from pytest_agentbench.artifacts.coverage import partial_line
from pytest_agentbench.artifacts.score_stats import interval_text
from pytest_agentbench.core.cost import money
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.task_record import RunSummary, TaskRecord
from pytest_agentbench.report.compare import model_disagreements
from pytest_agentbench.report.controls import control_lines, judge_block, standing_mark
from pytest_agentbench.report.evidence import failure_reason
from pytest_agentbench.report.terminal import (
    batch_text,
    cache_text,
    cost_text,
    score_lines,
    shown_path,
    task_label,
    tokens_text,
)

MAX_FAILURES = 20


def _object(value: JsonValue | None) -> JsonObject:
    """``value`` when it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def _objects(value: JsonValue | None) -> list[JsonObject]:
    """The objects of a JSON array (none when ``value`` is not one)."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _number(value: JsonValue) -> float:
    """A JSON number as a float; TypeError naming what it is otherwise."""
    if isinstance(value, int | float):
        return float(value)
    raise TypeError(f"not a number: {value!r}")


def _count(value: JsonValue) -> int:
    """A JSON count; TypeError naming what it is otherwise."""
    if isinstance(value, int):
        return value
    raise TypeError(f"not a count: {value!r}")


def _cell(value: JsonValue) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def _ci(row: JsonObject, name: str) -> str:
    est = _object(_object(row.get("stats")).get(name))
    lo, hi = est.get("lo"), est.get("hi")
    return "–" if lo is None or hi is None else f"{lo:.3f}–{hi:.3f}"


def stats_lines(totals: JsonObject) -> list[str]:
    """The run's final and first-try scores with n, standard error and interval, then
    the repair curve (one row per round) when repairs ran."""
    stats = totals.get("stats")
    if not isinstance(stats, dict) or totals.get("score") is None:
        return []
    lines = [
        f"Score {interval_text(_object(stats['score']))} · first try "
        f"{interval_text(_object(stats['first_try']))} (± is the standard error)",
        "",
    ]
    curve = totals.get("repair_curve")
    if curve:
        lines += [
            "| round | score | 95 % CI | n | new passes | tokens |",
            "| ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for row in _objects(curve):
            est = _object(row["score"])
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


def comparison_markdown(summary: JsonObject) -> list[str]:
    """The baseline comparison and the robustness drops, from summary.json's sections."""
    lines: list[str] = []
    baseline = summary.get("baseline")
    if isinstance(baseline, dict):
        lines += ["", f"### Against the baseline `{_cell(baseline.get('run_id'))}`", ""]
        for comparison in _objects(baseline.get("comparisons")):
            lines.append(f"- {_cell(comparison['words'])}")
            lines += [f"  {line}" for line in disagreement_lines(comparison)]
            left_out = comparison.get("excluded")
            if left_out:
                lines.append(f"  - {left_out} task(s) excluded: a harness error on either side")
            found = comparison.get("regressions")
            found = found if isinstance(found, list) else []
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
        for row in _objects(robustness):
            d = _object(row["difference"])
            value = None if d.get("value") is None else 0.0 - _number(d["value"])
            ci = (
                "–"
                if d.get("lo") is None
                else f"{0.0 - _number(d['hi']):+.3f} to {0.0 - _number(d['lo']):+.3f}"
            )
            verdict = _verdict_cell(row)
            cells = (row["second"], row["paired"], value, ci, row["test"], row["p_value"], verdict)
            lines.append("| " + " | ".join(_cell(v) for v in cells) + " |")
    return lines


def disagreement_lines(comparison: Mapping[str, JsonValue]) -> list[str]:
    """Where two sides differ: each task one passed and the other did not, with both
    sides' reason lines (summary.json's ``disagreements``, capped; the rest counted)."""
    found = _objects(comparison.get("disagreements"))
    total = comparison.get("disagreements_total")
    count = total if isinstance(total, int) else len(found)
    return differ_lines(comparison.get("first"), comparison.get("second"), count, found)


def differ_lines(
    first_name: JsonValue, second_name: JsonValue, count: int, found: list[JsonObject]
) -> list[str]:
    """``where they differ (N task(s))``, then a task a line with both sides' reasons."""
    if not found:
        return []
    first, second = _cell(first_name), _cell(second_name)
    lines = [f"- where they differ ({count} task(s)):"]
    for row in found:
        lines.append(
            f"  - `{_cell(row.get('task'))}` — {first}: {_cell(row.get('first'))} · "
            f"{second}: {_cell(row.get('second'))}"
        )
    if count > len(found):
        lines.append(f"  - … and {count - len(found)} more (see summary.json)")
    return lines


def _verdict_cell(row: Mapping[str, JsonValue]) -> str:
    """A comparison's verdict in a table cell: *worse*, *better*, *equivalent within ±D*
    or *inconclusive* (never a bare "not significant")."""
    decision = row.get("decision")
    if isinstance(decision, dict) and isinstance(decision.get("words"), str):
        words = str(decision["words"])
        return words.split(" — ")[0] if words.startswith("inconclusive") else words
    return str(row.get("verdict", "—"))


def markdown_summary(run: RunSummary, *, run_dir: str) -> str:
    """The Markdown text for ``run`` (summary.json) and its records. Each task's folder is
    shown relative to ``run_dir`` (the run folder), not as the runner's absolute path."""
    records = run.tasks
    summary: JsonObject = {
        **run.sections,
        "partial": run.partial,
        "totals": run.totals,
        "scores": run.scores,
    }
    totals = run.totals
    outcomes = _object(totals["outcomes"])
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
    scored = task_records(records)
    several = len({record.model for record in scored}) > 1
    score = totals.get("score")
    judge = run.sections.get("judge")
    if score is not None and not several:
        head += f" · score {score:.3f}"
        mark = standing_mark(totals.get("judge_standing"), short=True)
        head += f" ({mark})" if mark else ""
    partial = partial_line(summary.get("coverage"))
    if partial is None and summary.get("partial"):
        partial = "partial run"
    lines = [f"## agentbench — {partial + ' · ' if partial else ''}{head}", ""]
    broken = totals.get("unusable")
    if isinstance(broken, dict):  # too many harness errors: the score is not usable
        lines[0] = lines[0].replace("## agentbench — ", "## agentbench — ⚠ not usable · ", 1)
        lines += [f"**{_cell(broken.get('words'))}**", ""]
    if several and score is not None:  # one line per model, never a pooled score
        graded = judge if isinstance(judge, dict) else None
        lines += [f"- {_cell(line)}" for line in score_lines(scored, graded)] + [""]
    if partial:
        lines += [f"**{partial[:1].upper() + partial[1:]}**: the score covers these only.", ""]
    usage = totals.get("usage")
    if isinstance(usage, dict):
        lines += [f"Tokens: {tokens_text(usage)}", ""]
    cost = totals.get("cost")
    if isinstance(cost, dict):
        lines += [f"Cost: {cost_text(cost)}", ""]
    cache = totals.get("cache")
    if isinstance(cache, dict):
        lines += [f"{cache_text(cache)[:1].upper()}{cache_text(cache)[1:]}", ""]
    batch = totals.get("batch")
    if isinstance(batch, dict):
        lines += [f"{batch_text(batch)[:1].upper()}{batch_text(batch)[1:]}", ""]
    priced = any(isinstance(row.get("cost"), dict) for row in _objects(run.scores))
    if not several:  # several models: their own lines above, never a pooled score
        lines += stats_lines(totals)
    lines.append(
        "| suite | model | tasks | passed | not passed | harness errors | score | 95 % CI "
        "| first try | 95 % CI |" + (" cost | per solved |" if priced else "")
    )
    lines.append(
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
        + (" ---: | ---: |" if priced else "")
    )
    for row in _objects(run.scores):
        counts = _object(row["outcomes"])
        not_passed = (
            _count(row["tasks"]) - _count(counts["passed"]) - _count(counts["harness_error"])
        )
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
            + (_cost_cells(row) if priced else "")
        )
    lines += _lineup_lines(summary, scored)
    gate = _object(summary.get("gate"))
    if gate:
        verdict = "passed" if gate["ok"] else "**failed**"
        checks = ", ".join(
            f"{c['label']} {_cell(c['score'])}"
            + (" (95 % CI lower bound)" if c.get("on") == "lower" else "")
            + f" (min {c['threshold']:g})"
            for c in _objects(gate["checks"])
        )
        lines += ["", f"Score gate {verdict}: {checks}"]
    lines += comparison_markdown(summary)
    if summary.get("invalid"):
        lines += ["", f"**Result invalid**: {summary['invalid']}"]
    judged = judge_block(run.sections.get("judge"))
    if judged:
        lines += ["", "### Judge", "", *(f"- {_cell(line.strip())}" for line in judged)]
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
            where = shown_path(record.rollout_dir or "", run_dir)  # no runner's own path
            name = task_label(record)
            mark = "⚠" if record.outcome == "harness_error" else "✗"
            lines.append(f"- {mark} `{name}` — {_cell(reason)} (`{where}`)")
        if len(failures) > MAX_FAILURES:
            lines.append(f"- … and {len(failures) - MAX_FAILURES} more (see summary.json)")
    lines += ["", f"Results: `{run_dir}` (ctrf.json, summary.json, tasks/)", ""]
    return "\n".join(lines)


def _cost_cells(row: JsonObject) -> str:
    """The cost and cost-per-solved-task cells of a suite × model row."""
    cost = _object(row.get("cost"))
    return "".join(
        f" {money(value) if isinstance(value, int | float) else '–'} |"
        for value in (cost.get("usd"), cost.get("per_solved_usd"))
    )


def _lineup_lines(summary: JsonObject, records: Sequence[TaskRecord]) -> list[str]:
    """With epochs: each suite × model's reduced score; with several models: each pair
    compared (summary.json's ``reduced`` and ``comparisons``)."""
    lines = []
    for row in _objects(summary.get("scores")):
        reduced = row.get("reduced")
        if isinstance(reduced, dict):
            score = _object(reduced["score"])
            excluded = f", {reduced['excluded']} excluded" if reduced["excluded"] else ""
            lines.append(
                f"- `{row['suite']}` × `{row['model']}`: {reduced['reducer']} over "
                f"{reduced['epochs']} epochs {_cell(score.get('value'))} "
                f"(n={score.get('n')} tasks{excluded})"
            )
    for pair in _objects(summary.get("comparisons")):
        scope = f"`{pair['suite']}`: " if pair.get("suite") is not None else ""
        lines.append(f"- {scope}{_cell(pair['words'])}")
        if pair.get("suite") is None:  # over every task: once, not again per suite
            first, second = str(pair["first"]), str(pair["second"])
            count, found = model_disagreements(records, first, second)
            rows = [row.as_dict() for row in found]
            lines += [f"  {line}" for line in differ_lines(first, second, count, rows)]
    return ["", *lines] if lines else []
