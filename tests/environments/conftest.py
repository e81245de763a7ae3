"""Fixtures of the container tests: the engine (or a skip saying why), a run id of the
test's own, and the check that the test left no container of it behind."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from containers_support import fresh_run_id, nothing_left, usable_engine

from pytest_agentbench.agents.gateway import Gateway
from pytest_agentbench.environments.engine import Engine
from pytest_agentbench.scripted.server import ScriptedServer


@pytest.fixture
def engine() -> Engine:
    return usable_engine()


@pytest.fixture
def run_id(engine: Engine) -> Iterator[str]:
    value = fresh_run_id()
    yield from _checked(engine, value)


def _checked(engine: Engine, value: str) -> Iterator[str]:
    checker = nothing_left(engine, value)
    next(checker)
    yield value
    next(checker, None)


@pytest.fixture
def gateway() -> Iterator[Gateway]:
    made = Gateway()
    yield made
    made.close()


@pytest.fixture(scope="module")
def provider() -> Iterator[str]:
    server = ScriptedServer()
    url = server.start()
    yield url
    server.stop()
