"""``python -m pytest_agentbench merge RUN_DIR... --out DIR``: one report from many runs;
``python -m pytest_agentbench report RUN_DIR [--html PATH]``: (re)build a run's HTML report;
``python -m pytest_agentbench plan --difference D (--baseline RUN_DIR | --rate P)``: how
many tasks x epochs a comparison needs;
``python -m pytest_agentbench cache [DIR] [--max-age-days D] [--max-size-mb M]``: the
response cache's size, and pruning it;
``python -m pytest_agentbench export atif RUN_DIR [--out DIR]`` and ``import atif FILES...
--out RUN_DIR``: a run's rollouts as ATIF trajectories, and back (docs/interchange.md)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from pytest_agentbench import __version__
from pytest_agentbench.errors import AgentbenchError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_agentbench")
    commands = parser.add_subparsers(dest="command", required=True)
    merge = commands.add_parser(
        "merge", help="merge shard runs into one ctrf.json and summary.json"
    )
    merge.add_argument("runs", nargs="+", type=Path, help="run folders (agentbench-results/<id>)")
    merge.add_argument("--out", required=True, type=Path, help="folder for the merged reports")
    merge.add_argument(
        "--force", action="store_true", help="merge runs whose settings fingerprints differ"
    )
    report = commands.add_parser(
        "report", help="build the HTML report of a run folder (a merged one too)"
    )
    report.add_argument("run", type=Path, help="run folder (agentbench-results/<id>)")
    report.add_argument(
        "--html", type=Path, default=None, help="where to write it (default RUN/report.html)"
    )
    report.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="another run folder to set side by side with this one (regressions first)",
    )
    cache = commands.add_parser(
        "cache", help="report the response cache's size (--agentbench-cache) and prune it"
    )
    cache.add_argument(
        "folder", type=Path, nargs="?", default=Path(".agentbench-cache"), help="cache folder"
    )
    cache.add_argument("--max-age-days", type=float, help="remove entries older than this")
    cache.add_argument(
        "--max-size-mb", type=float, help="then remove the oldest until the folder fits"
    )
    rescore = commands.add_parser(
        "rescore",
        help="run the current verifiers on a finished run's saved answers, into a new run "
        "folder (the model is not asked again)",
    )
    rescore.add_argument("run", type=Path, help="run folder (agentbench-results/<id>)")
    rescore.add_argument(
        "--out", type=Path, default=None, help="the new run folder (default RUN-rescored)"
    )
    rescore.add_argument(
        "--no-judge",
        action="store_true",
        help="keep judged tasks as they were (re-judging calls the judge model, which may cost)",
    )
    rescore.add_argument(
        "--judge-model",
        default=None,
        help='the judge, as --agentbench-judge-model takes it ("SPEC [base_url=URL] '
        "[key_env=VAR] ...\"); default: the run's command-line judge, else the suite's, "
        "else the run's ini judge",
    )
    rescore.add_argument(
        "--prices",
        type=Path,
        default=None,
        help="the price file for the judge's cost (default: the run's, when it is still there)",
    )
    planner = commands.add_parser(
        "plan",
        help="how many tasks x epochs a paired comparison needs to detect a difference",
    )
    planner.add_argument(
        "--difference", required=True, type=float, help="the smallest difference that matters"
    )
    planner.add_argument(
        "--baseline", type=Path, default=None, help="an earlier run folder: base rate and noise"
    )
    planner.add_argument("--rate", type=float, default=None, help="the base pass rate (0-1)")
    planner.add_argument("--power", type=float, default=0.8, help="power (default 0.8)")
    planner.add_argument("--level", type=float, default=0.95, help="confidence (default 0.95)")
    planner.add_argument("--epochs", default="1,2,3,5", help="epochs per row (default 1,2,3,5)")
    planner.add_argument("--json", action="store_true", help="print the plans as JSON")
    _interchange_commands(commands)
    args = parser.parse_args(argv)
    if args.command in ("export", "import"):
        return _interchange(args)
    if args.command == "plan":
        return _plan(args)
    if args.command == "rescore":
        return _rescore(args.run, args.out, args.no_judge, args.judge_model, args.prices)
    if args.command == "cache":
        return _cache(args.folder, args.max_age_days, args.max_size_mb)
    if args.command == "report":
        return _report(args.run, args.html, args.baseline)
    from pytest_agentbench.artifacts.merge import merge_runs

    try:
        summary = merge_runs(args.runs, args.out, force=args.force, tool_version=__version__)
    except AgentbenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    score = summary.totals.get("score")
    print(
        f"merged {len(args.runs)} run(s): {len(summary.tasks)} tasks, score "
        f"{round(score, 3) if isinstance(score, float) else score} "
        f"-> {args.out / 'ctrf.json'}, {args.out / 'summary.json'}"
    )
    return 0


def _interchange_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    export = commands.add_parser(
        "export", help="write a finished run's rollouts in another format (atif)"
    )
    export.add_argument("format", choices=["atif"], help="atif: Harbor's trajectory format")
    export.add_argument("run", type=Path, help="run folder (agentbench-results/<id>)")
    export.add_argument(
        "--out", type=Path, default=None, help="folder for the files (default RUN/atif)"
    )
    imported = commands.add_parser(
        "import", help="read trajectories of another format (atif) into a new run folder"
    )
    imported.add_argument("format", choices=["atif"], help="atif: Harbor's trajectory format")
    imported.add_argument("files", nargs="+", type=Path, help="ATIF trajectory files")
    imported.add_argument("--out", required=True, type=Path, help="the new run folder")


def _interchange(args: argparse.Namespace) -> int:
    from pytest_agentbench.artifacts.atif_export import export_run
    from pytest_agentbench.artifacts.atif_import import import_files

    try:
        if args.command == "export":
            written = export_run(args.run, args.out, __version__)
            where = args.out if args.out is not None else args.run / "atif"
            print(f"exported {len(written)} rollout(s) of {args.run} as ATIF -> {where}")
        else:
            summary = import_files(args.files, args.out, __version__)
            print(f"imported {len(summary.tasks)} ATIF trajectory(ies) -> {args.out}")
    except (AgentbenchError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def _plan(args: argparse.Namespace) -> int:
    import json

    from pytest_agentbench.report.planning import make_planning, parse_epochs

    try:
        found = make_planning(
            float(args.difference),
            baseline=args.baseline,
            rate=args.rate,
            power=float(args.power),
            level=float(args.level),
            epochs=parse_epochs(str(args.epochs)),
        )
    except AgentbenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(found.as_dict(), indent=2))
    else:
        print("\n".join(found.lines()))
    return 0


def _report(run_dir: Path, html: Path | None, baseline: Path | None) -> int:
    from pytest_agentbench.core.urls import url_secrets
    from pytest_agentbench.report.html_report import write_html_report
    from pytest_agentbench.session.run import SECRET_ENV, SECRET_URL_ENV

    secrets = [os.environ.get(name, "") for name in SECRET_ENV]
    for name in SECRET_URL_ENV:
        secrets.extend(url_secrets(os.environ.get(name)))
    try:
        path = write_html_report(
            run_dir, html, secrets=[s for s in secrets if s], baseline=baseline
        )
    except (AgentbenchError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    return 0


def _rescore(
    run_dir: Path, out: Path | None, no_judge: bool, judge_model: str | None, prices: Path | None
) -> int:
    from pytest_agentbench.config.resolve import judge_setting
    from pytest_agentbench.core.cost import money
    from pytest_agentbench.runner.rescore import rescore_run
    from pytest_agentbench.session.judges import OfflineJudges

    judges = None if no_judge else OfflineJudges()
    try:
        judge = judge_setting(judge_model, "--judge-model") if judge_model else None
        target, summary = rescore_run(
            run_dir,
            out,
            tool_version=__version__,
            judges=judges,
            judge=judge,
            prices_file=prices,
        )
    except (AgentbenchError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        if judges is not None:
            judges.close()
    section = summary.sections.get("rescored")
    changed = section.get("changed") if isinstance(section, dict) else None
    score = summary.totals.get("score")
    print(
        f"rescored {len(summary.tasks)} task(s) of {run_dir}: {changed} changed, score "
        f"{round(score, 3) if isinstance(score, float) else score} -> {target}"
    )
    judged = section.get("judge") if isinstance(section, dict) else None
    if isinstance(judged, dict):
        usd = judged.get("usd")
        print(
            f"re-judged {judged.get('tasks')} task(s): {judged.get('calls')} judge call(s), "
            f"{money(usd if isinstance(usd, int | float) else None)}"
        )
    return 0


def _cache(folder: Path, max_age_days: float | None, max_size_mb: float | None) -> int:
    from pytest_agentbench.models.response_cache import cache_stats, prune

    if not folder.is_dir():
        print(f"error: {folder}: no such cache folder", file=sys.stderr)
        return 2
    if max_age_days is not None or max_size_mb is not None:
        removed = prune(
            folder,
            max_age_s=None if max_age_days is None else max_age_days * 86400,
            max_bytes=None if max_size_mb is None else int(max_size_mb * 1024 * 1024),
        )
        print(f"removed {removed} entr{'y' if removed == 1 else 'ies'}")
    stats = cache_stats(folder)
    oldest = "" if stats.oldest_s is None else f", the oldest {stats.oldest_s / 86400:.1f} days old"
    print(f"{folder}: {stats.entries} entries, {stats.size / 1024 / 1024:.2f} MB{oldest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
