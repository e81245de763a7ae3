"""The built-in model clients, verifiers and agent tools, registered through the public hooks
exactly as a third-party plugin would register its own (and marked trylast so plugins win)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_agentbench.config.settings import Settings
from pytest_agentbench.models.base import ModelClient, ModelSpec
from pytest_agentbench.verifiers.base import Verifier

if TYPE_CHECKING:
    from pytest_agentbench.runner.tools import Tool

OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"


@pytest.hookimpl(trylast=True)
def pytest_agentbench_model_client(spec: ModelSpec, settings: Settings) -> ModelClient | None:
    if spec.provider == "scripted":
        from pytest_agentbench.models.scripted import scripted_client

        if not settings.base_url:
            return None
        return scripted_client(spec, settings.base_url)
    if spec.provider in ("openai", "openai-compat"):
        from pytest_agentbench.models.openai_chat import OpenAIChatClient

        base_url = settings.base_url or OPENAI_DEFAULT_BASE_URL
        return OpenAIChatClient(spec, base_url, settings.api_key)
    if spec.provider == "openai-responses":
        from pytest_agentbench.models.openai_responses import OpenAIResponsesClient

        base_url = settings.base_url or OPENAI_DEFAULT_BASE_URL
        return OpenAIResponsesClient(spec, base_url, settings.api_key)
    if spec.provider == "anthropic":
        from pytest_agentbench.models.anthropic import DEFAULT_BASE_URL, AnthropicClient

        return AnthropicClient(spec, settings.base_url or DEFAULT_BASE_URL, settings.api_key)
    return None


@pytest.hookimpl(trylast=True)
def pytest_agentbench_verifiers() -> Iterable[Verifier]:
    from pytest_agentbench.verifiers.builtin import BUILTIN_VERIFIERS

    return BUILTIN_VERIFIERS


@pytest.hookimpl(trylast=True)
def pytest_agentbench_tools() -> Iterable[Tool]:
    from pytest_agentbench.runner.tools import BUILTIN_TOOLS

    return BUILTIN_TOOLS


@pytest.hookimpl(trylast=True)
def pytest_agentbench_load_suite(path: Path) -> Mapping[str, object] | None:
    """Python bench files (``bench_*.py``, see python_tasks.py); TOML, JSON and YAML
    suites are read by the suite loader itself."""
    if path.suffix != ".py":
        return None
    from pytest_agentbench.python_tasks import suite_document

    return suite_document(path)
