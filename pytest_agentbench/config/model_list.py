"""The models of a run: ``--agentbench-model`` (repeatable, ``NAME=SPEC``) or the
``agentbench_models`` ini lines, each with its own base URL, key variable and sampling
settings; and how a task's epochs become its score (the reducer).

Parsed here, resolved into one Settings per model by resolve.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import field

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.errors import AgentbenchError
from pytest_agentbench.models.base import ModelSpec
from pytest_agentbench.models.prices import BATCH_KEY, LIST_KEYS, MAX_PRICE

#: A model name: what item ids, rollout folders and the summary call the model.
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+/-]{0,79}$")
#: A model line's sampling value, as read (Sampling.parse checks its range).
SamplingValue = int | float | str
#: The sampling settings a model line may set, and how each is read.
_SAMPLING_KEYS: dict[str, Callable[[str], SamplingValue]] = {
    "temperature": float,
    "top_p": float,
    "top_k": int,
    "seed": int,
    "reasoning_effort": str,
    "thinking_budget": int,
}
#: The reducers a suite or the run may name (``pass@K`` and ``pass^K`` take a K).
PLAIN_REDUCERS = ("mean", "median", "max", "majority")
MAX_EPOCHS = 1000


@dataclass(frozen=True)
class ModelEntry:
    """One model of the run as the user wrote it. ``name`` is None when the user named
    none (the spec's label is then its name); ``sampling`` holds raw values."""

    spec: ModelSpec
    name: str | None = None
    base_url: str | None = None
    key_env: str | None = None
    sampling: dict[str, SamplingValue] = field(default_factory=dict)
    #: ``price_in=`` ... per million tokens (models/prices.LIST_KEYS), as given
    prices: dict[str, float] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return self.name or self.spec.label


def _name(text: str, where: str) -> str:
    name = text.strip()
    if not _NAME.match(name):
        raise AgentbenchError(
            f"{where}: model name {name!r} must start with a letter or digit and hold only "
            "letters, digits and . _ + / - (at most 80 characters)"
        )
    return name


def parse_model_arg(text: str, where: str = "--agentbench-model") -> ModelEntry:
    """``SPEC`` or ``NAME=SPEC``."""
    name, sep, spec = text.partition("=")
    if not sep:
        return ModelEntry(ModelSpec.parse(text))
    return ModelEntry(ModelSpec.parse(spec), name=_name(name, where))


def parse_model_line(line: str, number: int, where: str = "") -> ModelEntry:
    """One ``agentbench_models`` line: ``NAME = SPEC key=value ...`` (or ``SPEC ...``).
    Keys: ``base_url``, ``key_env`` and the sampling settings of _SAMPLING_KEYS.
    ``where`` names the line in errors (default: the ini line ``number``)."""
    where = where or f"agentbench_models line {number}"
    text = line.strip()
    name: str | None = None
    named = re.match(r"^(\S+?)\s*=\s*(\S.*)$", text)
    if named:
        name = _name(named.group(1), where)
        text = named.group(2)
    words = text.split()
    if not words:
        raise AgentbenchError(f"{where}: expected NAME = SPEC [key=value ...], got {line!r}")
    try:
        spec = ModelSpec.parse(words[0])
    except AgentbenchError as exc:
        raise AgentbenchError(f"{where}: {exc}") from None
    entry: dict[str, str | None] = {"base_url": None, "key_env": None}
    sampling: dict[str, SamplingValue] = {}
    prices: dict[str, float] = {}
    for word in words[1:]:
        key, eq, value = word.partition("=")
        if not eq or not value:
            raise AgentbenchError(f"{where}: expected key=value, got {word!r}")
        if key in entry:
            entry[key] = value
        elif key in LIST_KEYS:
            prices[key] = _price(value, f"{where}: {key}")
        elif key == BATCH_KEY:
            prices[key] = _share(value, f"{where}: {key}")
        elif key in _SAMPLING_KEYS:
            try:
                sampling[key] = _SAMPLING_KEYS[key](value)
            except ValueError:
                raise AgentbenchError(f"{where}: {key}: expected a number, got {value!r}") from None
        else:
            known = ", ".join(["base_url", "key_env", *_SAMPLING_KEYS, *LIST_KEYS, BATCH_KEY])
            raise AgentbenchError(f"{where}: unknown key {key!r} (known: {known})")
    key_env = entry["key_env"]
    if key_env is not None:  # (the guard's module, and ctypes with it, only when it is named)
        from pytest_agentbench.sandbox.environ_guard import secret_like

        if not secret_like(key_env):
            raise AgentbenchError(
                f"{where}: key_env={key_env}: a key variable's name must say it holds a "
                "secret (contain KEY, TOKEN or SECRET), so the run hides its value from the "
                "code it runs (docs/sandbox.md, The harness's secrets)"
            )
    return ModelEntry(spec, name, entry["base_url"], key_env, sampling, prices)


def _price(value: str, where: str) -> float:
    """A models list price (USD per million tokens)."""
    try:
        found = float(value)
    except ValueError:
        found = -1.0
    if not 0 <= found <= MAX_PRICE:
        raise AgentbenchError(
            f"{where}: expected a price from 0 to {MAX_PRICE:g} USD per million tokens, "
            f"got {value!r}"
        )
    return found


def _share(value: str, where: str) -> float:
    """A models list batch price: the share of the model's prices a batch costs."""
    try:
        found = float(value)
    except ValueError:
        found = -1.0
    if not 0 <= found <= 1:
        raise AgentbenchError(
            f"{where}: expected the share of the model's prices a batch costs, from 0 to 1 "
            f"(0.5 for half), got {value!r}"
        )
    return found


def model_entries(cli: object, ini_lines: object, single: object) -> list[ModelEntry]:
    """The run's models: the command line's (each ``--agentbench-model``: a list, or one
    text), else the ini's ``agentbench_models`` lines (a list), else ``single`` (the ini's
    or environment's one spec); empty when nothing names a model (the scripted default).
    Two models with one name are refused: they would share item ids and rollout folders."""
    given = [cli] if isinstance(cli, str) else _texts(cli)
    lines = _texts(ini_lines)
    if given:
        entries = [parse_model_arg(text) for text in given]
    elif lines:
        entries = [
            parse_model_line(line, number)
            for number, line in enumerate(lines, start=1)
            if line.strip() and not line.strip().startswith("#")
        ]
    elif single:
        entries = [parse_model_arg(str(single), "agentbench_model")]
    else:
        entries = []
    seen: set[str] = set()
    for entry in entries:
        if entry.label in seen:
            raise AgentbenchError(
                f"the model {entry.label!r} is given twice: give each a distinct name "
                "(NAME=SPEC on the command line, NAME = SPEC in agentbench_models)"
            )
        seen.add(entry.label)
    return entries


def _texts(value: object) -> list[str]:
    """A list option's (or ini key's) values as texts; none when it is not a list."""
    if isinstance(value, list | tuple):
        return [str(text) for text in value]
    return []


def parse_reducer(value: object, where: str) -> str:
    """A reducer name: mean, median, max, majority, ``pass@K`` or ``pass^K`` (K >= 1)."""
    text = str(value).strip()
    if text in PLAIN_REDUCERS:
        return text
    match = re.fullmatch(r"pass([@^])(\d{1,4})", text)
    if match and int(match.group(2)) >= 1:
        return text
    raise AgentbenchError(
        f"{where}: expected one of {', '.join(PLAIN_REDUCERS)}, pass@K or pass^K (K >= 1), "
        f"got {value!r}"
    )


def parse_epochs(value: object, where: str) -> int:
    try:
        if not isinstance(value, int | float | str):
            raise TypeError(value)
        number = int(value)
    except (TypeError, ValueError):
        raise AgentbenchError(f"{where}: expected a whole number, got {value!r}") from None
    if isinstance(value, bool) or not 1 <= number <= MAX_EPOCHS:
        raise AgentbenchError(
            f"{where}: expected a whole number from 1 to {MAX_EPOCHS}, got {value!r}"
        )
    return number
