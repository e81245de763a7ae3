"""The independent CTRF checker (../shared/ctrf/check-ctrf) as tests call it: it ships
beside the repository in CI, not in a user's clone, where the tests asking it skip."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHECK_CTRF = ROOT.parent / "shared" / "ctrf" / "check-ctrf"
# pytester moves HOME; keep the checker's npm cache where it survives between tests.
NPM_CACHE = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")


def assert_ctrf_accepted(*reports: Path) -> None:
    """The independent checker accepts ``reports``. Call it as the last statement of a
    test: without the checker beside the checkout (a user's clone) it skips, and a skip
    must never hide the test's own assertions (test_the_checker_is_the_last_step)."""
    checked = check_ctrf(*reports)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def check_ctrf(*reports: Path) -> subprocess.CompletedProcess[str]:
    """The checker's verdict on ``reports``; skips when it is not beside the checkout."""
    if not CHECK_CTRF.exists():
        pytest.skip(
            f"{CHECK_CTRF} is missing: the CTRF checker ships beside the repository in CI "
            "(../shared/ctrf), not in a user's clone"
        )
    args = [sys.executable, str(CHECK_CTRF)]
    if shutil.which("npm") is None or os.environ.get("AGENTBENCH_CTRF_NO_NPM"):
        args.append("--no-npm")
    env = {**os.environ, "XDG_CACHE_HOME": NPM_CACHE}
    return subprocess.run(
        [*args, *map(str, reports)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env=env,
    )
