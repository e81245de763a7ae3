"""Shared test setup.

pytester's in-process runs restore ``sys.modules`` afterwards, dropping every module the
inner run imported. A module imported again later is a new object with new exception
classes, and httpx would then fail to map httpcore's errors. Importing these modules here,
before any inner run, keeps one copy of each for the whole session.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import httpcore  # noqa: F401
import httpx  # noqa: F401
import jsonschema  # noqa: F401
import pytest

import pytest_agentbench.models.openai_chat
import pytest_agentbench.models.scripted
import pytest_agentbench.scripted.server
import pytest_agentbench.suites.load  # noqa: F401

# The tests mirror the package: a folder per layer (core/, suites/, models/ … session/),
# e2e/ for whole runs, package/ for checks of the package as a whole. The helpers shared
# by several folders are the *_support.py modules here, importable by name (pytest puts
# this folder on sys.path for this conftest). Two tests take a data constant from
# another test module (a suite, a conftest): every test folder is on the path too.
_TESTS = Path(__file__).parent
for _folder in sorted(p for p in _TESTS.iterdir() if p.is_dir() and any(p.glob("test_*.py"))):
    if str(_folder) not in sys.path:
        sys.path.append(str(_folder))

# pytest-randomly (dev extra) is off unless asked for (`-p randomly`, see pyproject.toml).
# Inner runs must not pick it up either, whatever the outer run does: their tests check
# order and output. Child pytest processes read PYTEST_ADDOPTS; pytester clears it for its
# runs, so its fixture sets it again.
_NO_RANDOMLY = "-p no:randomly"
if _NO_RANDOMLY not in os.environ.get("PYTEST_ADDOPTS", ""):
    os.environ["PYTEST_ADDOPTS"] = f"{os.environ.get('PYTEST_ADDOPTS', '')} {_NO_RANDOMLY}".strip()


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("PYTEST_ADDOPTS", _NO_RANDOMLY)
    return pytester
