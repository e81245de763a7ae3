"""Where a run's state lives on the pytest config: a module of its own, so the plugin can
look for it without importing the run (and the layers under it) when ``--agentbench`` is
absent."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_agentbench.session.run import RunState

STATE_KEY: pytest.StashKey[RunState] = pytest.StashKey()
