"""Shared test setup.

pytester's in-process runs restore ``sys.modules`` afterwards, dropping every module the
inner run imported. A module imported again later is a new object with new exception
classes, and httpx would then fail to map httpcore's errors. Importing these modules here,
before any inner run, keeps one copy of each for the whole session.
"""

from __future__ import annotations

import httpcore  # noqa: F401
import httpx  # noqa: F401
import jsonschema  # noqa: F401

import pytest_agentbench.models.openai_chat
import pytest_agentbench.models.scripted
import pytest_agentbench.scripted.server
import pytest_agentbench.suites.load  # noqa: F401
