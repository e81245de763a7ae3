"""The Harbor dataset of example_suites/harbor, run as docs/environments.md says: one
task the scripted agent passes, one it fails with the check's own words as the failure
line, and both reference solutions pass as the oracle (the nop agent fails both). Needs
a container engine and the local base image (the image map stands in for the registry);
skipped saying why without them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from containers_support import BASE_IMAGE, left_by, usable_engine

from pytest_agentbench.environments.engine import Engine

DATASET = Path(__file__).resolve().parents[2] / "example_suites" / "harbor"
MAP = ("--agentbench-image-map", f"python:3.12-slim={BASE_IMAGE}")


@pytest.fixture
def engine() -> Engine:
    return usable_engine()


def test_the_example_dataset_passes_one_task_and_explains_the_other(
    pytester: pytest.Pytester, engine: Engine
) -> None:
    shutil.copytree(DATASET, pytester.path / "harbor")
    result = pytester.runpytest("--agentbench", "harbor", *MAP, "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(
        [
            "2 tasks: 1 passed, 1 failed",
            "✗ harbor::sum-numbers: reward 0 — test_sum_content failed: expected '100', got '4'*",
        ]
    )
    controls = pytester.runpytest(
        "--agentbench", "harbor", *MAP, "--agentbench-controls", "-p", "no:cacheprovider"
    )
    controls.stdout.fnmatch_lines(["controls: 4 run — 4 behaved, 0 misbehaved"])
    for run in (pytester.path / "agentbench-results").glob("2*"):
        assert left_by(engine, run.name) == []
