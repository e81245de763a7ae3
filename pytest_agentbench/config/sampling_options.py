"""The run's sampling settings from the command line and the ini file (docs/sampling.md).

Each setting is read from its option (typed by the option's ``type=``), else from its
ini key (text, read here), then checked as a whole (``core/sampling.py``) and against
what the model's wire protocol can send (``models/sampling_wire.py``). A message names
the option and the ini key, so a user finds the line to fix.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from pytest_agentbench.config.option_values import OptionReader
from pytest_agentbench.core.jsontypes import JsonValue
from pytest_agentbench.core.sampling import Sampling, sampling_problems
from pytest_agentbench.errors import AgentbenchError
from pytest_agentbench.models.base import ModelSpec
from pytest_agentbench.models.sampling_wire import PROTOCOL_NAMES, protocol_of, sampling_refusals


def _lines(value: object) -> JsonValue:
    return [str(line) for line in value] if isinstance(value, list) else list(str(value))


def _json(value: object) -> JsonValue:
    found: JsonValue = json.loads(str(value))
    return found


#: How each sampling setting is read from the ini file (the command line types its own),
#: and what it is said to expect when it cannot be read.
_SAMPLING_INI: dict[str, tuple[Callable[[object], JsonValue], str]] = {
    "temperature": (lambda value: float(str(value)), "a number"),
    "top_p": (lambda value: float(str(value)), "a number"),
    "top_k": (lambda value: int(str(value)), "an integer"),
    "seed": (lambda value: int(str(value)), "an integer"),
    "stop": (_lines, "lines of text"),
    "reasoning_effort": (str, "a word"),
    "thinking_budget": (lambda value: int(str(value)), "an integer"),
    "extra_body": (_json, "a JSON object"),
}


def resolve_sampling(option: OptionReader, ini: OptionReader, model: ModelSpec) -> Sampling:
    """The run's sampling settings, each from the command line, else the ini file.
    Raises AgentbenchError naming the option and key for a bad value, or for a setting the
    model's protocol has no field for."""
    values: dict[str, object] = {}
    for key, (read, kind) in _SAMPLING_INI.items():
        name = option_name(key)
        value = option(f"agentbench_{name}")
        if value is None or value == []:
            value = ini(f"agentbench_{name}")
            if value in (None, "", []):
                continue
            try:
                value = read(value)
            except ValueError:
                raise AgentbenchError(
                    f"{sampling_source(key)}: expected {kind}, got {value!r}"
                ) from None
        elif key == "extra_body":
            try:
                value = _json(value)
            except ValueError as exc:
                raise AgentbenchError(
                    f"{sampling_source(key)}: expected a JSON object, got {value!r} ({exc})"
                ) from None
        values[key] = value
    for key, reason in sampling_problems(values):
        raise AgentbenchError(f"{sampling_source(key)}: {reason}")
    protocol = protocol_of(model)
    for key, reason in sampling_refusals(protocol, values):
        raise AgentbenchError(
            f"{sampling_source(key)}: {reason} (the model {model.label} speaks "
            f"{PROTOCOL_NAMES[protocol]})"
        )
    return Sampling.parse(values)


def option_name(key: str) -> str:
    """The option and ini name of a sampling setting: the model's seed is
    ``--agentbench-sampling-seed``, as ``--agentbench-seed`` is the run's own seed
    (perturbations, samples)."""
    return "sampling_seed" if key == "seed" else key


def sampling_source(key: str) -> str:
    """Where a sampling setting is given: ``--agentbench-top-p / agentbench_top_p``."""
    name = option_name(key)
    return f"--agentbench-{name.replace('_', '-')} / agentbench_{name}"
