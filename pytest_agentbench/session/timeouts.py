"""pytest-timeout and task items: its limit ends the rollout, not the process.

pytest-timeout ends a test in one of two ways: ``signal`` raises ``Failed`` in the main
thread wherever it is, and ``thread`` dumps the stacks and ends the whole process with
``os._exit``. Either way the run's reports lose the task (or everything). For a task item
its limit is instead handed to the rollout as a deadline (the smaller of it and the task's
own ``timeout_s``), so a task that runs too long ends as a ``timeout`` outcome with its
evidence, in every report. pytest-timeout's own timer is still set, as a backstop only, at
``backstop_s(limit)``: a rollout that ignores its deadline is still ended the way the user
asked (with ``signal`` that becomes a ``timeout`` record too; see collector.py).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, SupportsFloat, SupportsIndex

import pytest

if TYPE_CHECKING:
    from pytest_agentbench.session.pytest_compat import TimeoutSettings


def pytest_timeout_s(item: pytest.Item) -> float | None:
    """The pytest-timeout limit that applies to ``item`` (its ``timeout`` marker, else
    ``--timeout``, ``PYTEST_TIMEOUT``, the ``timeout`` ini value); None when there is none,
    it is 0 (off), or pytest-timeout is not installed."""
    config = item.config
    if not config.pluginmanager.hasplugin("timeout"):
        return None
    value: object = None
    marker = item.get_closest_marker("timeout")
    if marker is not None:
        value = marker.kwargs.get("timeout", marker.args[0] if marker.args else None)
    if value is None:
        value = config.getoption("timeout", None)
    if value is None:
        value = os.environ.get("PYTEST_TIMEOUT") or None
    if value is None:
        value = config.getini("timeout") or None
    if not isinstance(value, str | bytes | SupportsFloat | SupportsIndex):
        return None  # None, or no number pytest-timeout could read either
    try:
        limit = float(value)
    except (TypeError, ValueError):
        return None  # pytest-timeout reports its own bad values
    return limit if limit and limit > 0 else None


def backstop_s(limit: float) -> float:
    """When pytest-timeout's own timer fires for a task item: well after the rollout's
    deadline, which may start late when the item waited for a free rollout slot."""
    return 3 * limit + 30


class TimeoutTakeover:
    """Registered when pytest-timeout is present: its timer for a task item is set at the
    backstop; the limit itself goes to the rollout (TaskItem.runtest)."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_timeout_set_timer(self, item: pytest.Item, settings: TimeoutSettings) -> bool | None:
        if getattr(item, "task", None) is None:
            return None
        from pytest_agentbench.session.pytest_compat import set_timeout_timer

        return set_timeout_timer(item, settings, backstop_s(float(settings.timeout)))
