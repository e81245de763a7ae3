"""A golden test of the whole agentbench terminal section for the example suites: what a
person reads at the end of the default run stays exactly as reviewed, run after run."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "example_summary.txt"
SUITES = (
    "bench_arithmetic.toml",
    "bench_invoice_json.toml",
    "bench_reasoning_loops.toml",
    "bench_science_choice.json",
)
VOLATILE = [
    (re.compile(r"\d{8}-\d{6}-[0-9a-f]{6}"), "<run-id>"),
    (re.compile(r"wall \d+\.\ds"), "wall <s>"),
    (re.compile(r" at \d+(?:\.\d+)? s\b"), " at <s>"),
]


def agentbench_section(output: str) -> str:
    section = output.split("= agentbench =", 1)[1].split("\n", 1)[1]
    section = section.split("=========", 1)[0]
    for pattern, replacement in VOLATILE:
        section = pattern.sub(replacement, section)
    return section.strip() + "\n"


def test_example_summary_matches_the_golden_file(pytester: pytest.Pytester) -> None:
    for name in SUITES:
        shutil.copy(ROOT / "example_suites" / name, pytester.path / name)
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    section = agentbench_section(result.stdout.str())
    if os.environ.get("AGENTBENCH_UPDATE_GOLDEN"):
        GOLDEN.write_text(section, encoding="utf-8")
    assert section == GOLDEN.read_text(encoding="utf-8"), (
        "the terminal summary changed; review it and regenerate with AGENTBENCH_UPDATE_GOLDEN=1"
    )
