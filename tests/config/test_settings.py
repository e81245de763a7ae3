"""Settings resolution: CLI beats ini beats environment beats default."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.config.resolve import resolve_settings
from pytest_agentbench.errors import AgentbenchError


def resolve(cli: dict[str, Any], ini: dict[str, Any], env: dict[str, str]):
    return resolve_settings(lambda n: cli.get(n), lambda n: ini.get(n, ""), env)


def test_defaults_choose_the_scripted_model_offline() -> None:
    settings = resolve({"agentbench": True}, {}, {})
    assert settings.model.provider == "scripted"
    assert settings.model_configured is False
    assert settings.out_dir == Path("agentbench-results")
    assert settings.timeout_s is None and settings.max_tokens is None


def test_cli_beats_ini_beats_env() -> None:
    env = {
        "AGENTBENCH_MODEL": "openai/env-model",
        "OPENAI_BASE_URL": "http://env/v1",
        "OPENAI_API_KEY": "sk-env",
    }
    ini = {
        "agentbench_model": "openai/ini-model",
        "agentbench_base_url": "http://ini/v1",
        "agentbench_timeout": "30",
    }
    cli = {"agentbench_model": "openai-compat/cli-model", "agentbench_timeout": 5.0}
    settings = resolve(cli, ini, env)
    assert settings.model.label == "openai-compat/cli-model"
    assert settings.base_url == "http://ini/v1"
    assert settings.timeout_s == 5.0
    assert settings.api_key == "sk-env"
    settings = resolve({}, ini, env)
    assert settings.model.label == "openai/ini-model"
    assert settings.timeout_s == 30.0
    settings = resolve({}, {}, env)
    assert settings.model.label == "openai/env-model"
    assert settings.base_url == "http://env/v1"


def test_key_never_in_repr_or_public_settings() -> None:
    settings = resolve({"agentbench_model": "openai/x"}, {}, {"OPENAI_API_KEY": "sk-very-secret"})
    assert "sk-very-secret" not in repr(settings)
    assert "sk-very-secret" not in str(settings.public())


@pytest.mark.parametrize(
    ("cli", "message"),
    [
        ({"agentbench_model": "/pro"}, "unknown model spec '/pro'"),
        ({"agentbench_model": "openai"}, "unknown model spec 'openai'"),
        ({"agentbench_timeout": "soon"}, "expected a number"),
        ({"agentbench_max_tokens": 0}, "expected a number >= 1"),
    ],
)
def test_bad_values_are_errors_a_user_can_act_on(cli: dict[str, Any], message: str) -> None:
    with pytest.raises(AgentbenchError, match=message.replace("(", r"\(")):
        resolve(cli, {}, {})


def test_fingerprint_changes_with_what_changes_results() -> None:
    a = resolve({"agentbench_model": "openai-compat/a"}, {}, {})
    b = resolve({"agentbench_model": "openai-compat/b"}, {}, {})
    c = resolve({"agentbench_model": "openai-compat/a", "agentbench_out": "elsewhere"}, {}, {})
    assert a.fingerprint() != b.fingerprint()
    assert a.fingerprint() == c.fingerprint()


def test_the_fingerprint_is_made_once_per_settings_and_anew_for_a_changed_copy() -> None:
    import dataclasses

    a = resolve({"agentbench_model": "openai-compat/a"}, {}, {})
    b = resolve({"agentbench_model": "openai-compat/b"}, {}, {})
    assert a.fingerprint() is a.fingerprint()
    changed = dataclasses.replace(a, model=b.model)
    assert changed.fingerprint() != a.fingerprint()
    assert changed.fingerprint() == b.fingerprint()
    assert a == dataclasses.replace(a)  # the kept fingerprint is no field: equality holds
