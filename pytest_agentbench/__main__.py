"""``python -m pytest_agentbench merge RUN_DIR... --out DIR``: one report from many runs;
``python -m pytest_agentbench report RUN_DIR [--html PATH]``: (re)build a run's HTML report."""

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
    args = parser.parse_args(argv)
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


if __name__ == "__main__":
    sys.exit(main())
