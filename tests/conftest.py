"""Shared test setup.

pytester's in-process runs restore ``sys.modules`` afterwards, dropping every module the
inner run imported. A module imported again later is a new object with new exception
classes, and httpx would then fail to map httpcore's errors. Importing these modules here,
before any inner run, keeps one copy of each for the whole session.
"""

from __future__ import annotations

import os

import httpcore  # noqa: F401
import httpx  # noqa: F401
import jsonschema  # noqa: F401
import pytest

import pytest_agentbench.models.openai_chat
import pytest_agentbench.models.scripted
import pytest_agentbench.scripted.server
import pytest_agentbench.suites.load  # noqa: F401

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
