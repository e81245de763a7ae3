"""``python -m pytest_agentbench merge RUN_DIR... --out DIR``: one report from many runs."""

from __future__ import annotations

import argparse
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
    args = parser.parse_args(argv)
    from pytest_agentbench.artifacts.merge import merge_runs

    try:
        summary = merge_runs(args.runs, args.out, force=args.force, tool_version=__version__)
    except AgentbenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    totals = summary["totals"]
    print(
        f"merged {len(args.runs)} run(s): {totals['tasks']} tasks, score "
        f"{totals['score'] if totals['score'] is None else round(totals['score'], 3)} "
        f"-> {args.out / 'ctrf.json'}, {args.out / 'summary.json'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
