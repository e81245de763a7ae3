"""A Harbor task's ``task.toml``, read and checked key by key.

Harbor's schema versions 1.0–1.4 (``schema_version``) and the older ``version = "1.0"``
are read. Each known key is checked for its type and range; a wrong one is a problem
naming the key, what was expected and what was found (the loader adds the file). An
unknown key is a warning, never a refusal: real tasks carry keys of newer Harbor
releases and of their own tools. Nothing here raises for bad input.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import field
from typing import Literal

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.suites.environment import (
    DEFAULT_AGENT_TIMEOUT_S,
    DEFAULT_BUILD_TIMEOUT_S,
    DEFAULT_VERIFIER_TIMEOUT_S,
)
from pytest_agentbench.suites.validate import show, type_name

SCHEMA_VERSIONS = ("1.0", "1.1", "1.2", "1.3", "1.4")
OLD_VERSIONS = ("1.0",)
ENVIRONMENT_MODES = ("shared", "separate")

#: A problem's text completes a sentence whose subject is the key (``must be …; got …``).
Check = Callable[[JsonValue], str | None]


def _positive(value: JsonValue) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"must be a number of seconds; got {type_name(value)} {show(value)}"
    if not math.isfinite(value) or value <= 0:
        return f"must be a number greater than 0; got {show(value)}"
    return None


def _count(minimum: int) -> Check:
    def check(value: JsonValue) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int):
            return f"must be an integer; got {type_name(value)} {show(value)}"
        if value < minimum:
            return f"must be at least {minimum}; got {value}"
        return None

    return check


def _cpus(value: JsonValue) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"must be a number of CPUs; got {type_name(value)} {show(value)}"
    if not math.isfinite(value) or value <= 0:
        return f"must be a number greater than 0; got {show(value)}"
    return None


def _string(value: JsonValue) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return f"must be a non-empty string; got {type_name(value)} {show(value)}"
    return None


def _user(value: JsonValue) -> str | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return None
    return _string(value)


def _boolean(value: JsonValue) -> str | None:
    if not isinstance(value, bool):
        return f"must be true or false; got {type_name(value)} {show(value)}"
    return None


def _table(value: JsonValue) -> str | None:
    if not isinstance(value, dict):
        return f"must be a table; got {type_name(value)} {show(value)}"
    return None


def _env(value: JsonValue) -> str | None:
    if not isinstance(value, dict):
        return f"must be a table of strings; got {type_name(value)} {show(value)}"
    for key, item in value.items():
        if not isinstance(item, str):
            return f"must be a table of strings; {key} is {type_name(item)} {show(item)}"
        if "\x00" in item or "\x00" in key or "=" in key:
            return f"must hold plain variable names and values; got {show(key)}"
    return None


def _workdir(value: JsonValue) -> str | None:
    if not isinstance(value, str) or not value.startswith("/"):
        return f"must be an absolute path in the container; got {type_name(value)} {show(value)}"
    return None


_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*", re.IGNORECASE)
_UNIT_MB = {"": 1 / (1024 * 1024), "K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}


def size_mb(text: str) -> int | None:
    """``"2G"`` → 2048 (binary units, as Docker reads them; a bare number is bytes); None
    when ``text`` is no size."""
    found = _SIZE.fullmatch(text)
    if found is None:
        return None
    return max(1, round(float(found.group(1)) * _UNIT_MB[found.group(2).upper()]))


def _size(value: JsonValue) -> str | None:
    if isinstance(value, str) and size_mb(value) is not None:
        return None
    return f'must be a size such as "2G" or "512M"; got {type_name(value)} {show(value)}'


def _one_of(choices: tuple[str, ...]) -> Check:
    def check(value: JsonValue) -> str | None:
        if value in choices:
            return None
        words = ", ".join(f'"{c}"' for c in choices)
        return f"must be one of {words}; got {type_name(value)} {show(value)}"

    return check


def _array(value: JsonValue) -> str | None:
    if not isinstance(value, list):
        return f"must be an array; got {type_name(value)} {show(value)}"
    return None


#: The keys of each table Harbor defines, and their checks. ``metadata`` is free-form.
KNOWN: dict[str, dict[str, Check]] = {
    "": {
        "schema_version": _one_of(SCHEMA_VERSIONS),
        "version": _one_of(OLD_VERSIONS),
        "metadata": _table,
        "agent": _table,
        "verifier": _table,
        "environment": _table,
        "solution": _table,
        "source": _string,
    },
    "agent": {"timeout_sec": _positive, "user": _user},
    "verifier": {
        "timeout_sec": _positive,
        "env": _env,
        "user": _user,
        "environment_mode": _one_of(ENVIRONMENT_MODES),
    },
    "environment": {
        "build_timeout_sec": _positive,
        "docker_image": _string,
        "cpus": _cpus,
        "memory_mb": _count(1),
        "memory": _size,
        "storage_mb": _count(1),
        "storage": _size,
        "gpus": _count(0),
        "gpu_types": _array,
        "allow_internet": _boolean,
        "env": _env,
        "workdir": _workdir,
        "healthcheck": _table,
        "mcp_servers": _array,
    },
    "solution": {"env": _env},
}
#: Keys read and checked but not acted on: what each is ignored as (docs/environments.md).
IGNORED = {
    "environment.healthcheck": "a healthcheck is not run: the agent starts once the "
    "container is up",
    "environment.mcp_servers": "MCP servers are not started for the built-in agent",
    "environment.gpu_types": "GPUs are not given to containers",
    "agent.user": "the agent's commands run as the image's user",
    "solution.env": "the reference solution runs with the container's environment",
}


@dataclass(frozen=True)
class HarborConfig:
    """A task.toml's values, defaults filled in (Harbor's own)."""

    agent_timeout_s: float = DEFAULT_AGENT_TIMEOUT_S
    verifier_timeout_s: float = DEFAULT_VERIFIER_TIMEOUT_S
    verifier_env: Mapping[str, str] = field(default_factory=dict)
    verifier_user: str | None = None
    environment_mode: Literal["shared", "separate"] = "shared"
    build_timeout_s: float = DEFAULT_BUILD_TIMEOUT_S
    docker_image: str | None = None
    cpus: float | None = None
    memory_mb: int | None = None
    storage_mb: int | None = None
    gpus: int = 0
    allow_internet: bool = True
    env: Mapping[str, str] = field(default_factory=dict)
    workdir: str | None = None
    metadata: JsonObject = field(default_factory=dict)


def read_config(document: JsonObject) -> tuple[HarborConfig | None, list[str], list[str]]:
    """The config of a parsed task.toml, the problems that refuse it (config None when
    any) and the warnings about it (unknown keys, keys read but not acted on)."""
    problems: list[str] = []
    warnings: list[str] = []
    for table, checks in KNOWN.items():
        values = document if not table else document.get(table, {})
        if not isinstance(values, dict):
            continue  # the top-level check says so
        for key, value in values.items():
            where = f"{table}.{key}" if table else key
            check = checks.get(key)
            if check is None:
                warnings.append(f"{where} is not a key Harbor defines here; ignored")
                continue
            problem = check(value)
            if problem is not None:
                problems.append(f"{where} {problem}")
            elif where in IGNORED:
                warnings.append(f"{where}: {IGNORED[where]}")
    if "schema_version" in document and "version" in document:
        problems.append('give schema_version or the older version = "1.0", not both')
    environment = document.get("environment", {})
    environment = environment if isinstance(environment, dict) else {}
    for short, long in (("memory", "memory_mb"), ("storage", "storage_mb")):
        if short in environment and long in environment:
            problems.append(f"environment.{short} and environment.{long}: give one of them")
    if problems:
        return None, problems, warnings
    return _config(document, environment), problems, warnings


def _float(table: Mapping[str, JsonValue], key: str, default: float) -> float:
    value = table.get(key)
    return float(value) if isinstance(value, int | float) else default


def _strings(value: JsonValue) -> dict[str, str]:
    return {k: v for k, v in value.items() if isinstance(v, str)} if isinstance(value, dict) else {}


def _config(document: JsonObject, environment: JsonObject) -> HarborConfig:
    agent = document.get("agent", {})
    verifier = document.get("verifier", {})
    metadata = document.get("metadata", {})
    agent = agent if isinstance(agent, dict) else {}
    verifier = verifier if isinstance(verifier, dict) else {}
    memory = environment.get("memory_mb")
    if isinstance(environment.get("memory"), str):
        memory = size_mb(str(environment["memory"]))
    storage = environment.get("storage_mb")
    if isinstance(environment.get("storage"), str):
        storage = size_mb(str(environment["storage"]))
    user = verifier.get("user")
    image = environment.get("docker_image")
    cpus = environment.get("cpus")
    gpus = environment.get("gpus", 0)
    workdir = environment.get("workdir")
    mode = verifier.get("environment_mode", "shared")
    return HarborConfig(
        agent_timeout_s=_float(agent, "timeout_sec", DEFAULT_AGENT_TIMEOUT_S),
        verifier_timeout_s=_float(verifier, "timeout_sec", DEFAULT_VERIFIER_TIMEOUT_S),
        verifier_env=_strings(verifier.get("env")),
        verifier_user=None if user is None else str(user),
        environment_mode="separate" if mode == "separate" else "shared",
        build_timeout_s=_float(environment, "build_timeout_sec", DEFAULT_BUILD_TIMEOUT_S),
        docker_image=image if isinstance(image, str) else None,
        cpus=float(cpus) if isinstance(cpus, int | float) else None,
        memory_mb=memory if isinstance(memory, int) else None,
        storage_mb=storage if isinstance(storage, int) else None,
        gpus=gpus if isinstance(gpus, int) else 0,
        allow_internet=environment.get("allow_internet", True) is not False,
        env=_strings(environment.get("env")),
        workdir=workdir if isinstance(workdir, str) else None,
        metadata=metadata if isinstance(metadata, dict) else {},
    )
