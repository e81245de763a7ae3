"""What the tests of agents under test in a container share: a task's model played by
the scripted provider (the gateway and the provider are tests/environments/conftest.py's
fixtures)."""

from __future__ import annotations

import dataclasses

from pytest_agentbench.agents.route import ClientFor
from pytest_agentbench.models.base import ModelClient, ModelSpec
from pytest_agentbench.models.scripted import register_scripts, scripted_client
from pytest_agentbench.models.siblings import sibling
from pytest_agentbench.suites.task import Task


def clients_for(task: Task, url: str, replies: list[object]) -> ClientFor:
    """The task's model: the scripted provider at ``url`` answering ``replies``."""
    bare = scripted_client(ModelSpec("scripted", "scripted"), url)
    register_scripts(bare, [dataclasses.replace(task, scripted=tuple(replies))])

    def clients(protocol: str) -> ModelClient | None:
        return sibling(bare, protocol)

    return clients
