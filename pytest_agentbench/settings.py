"""One frozen Settings, resolved once per run: CLI beats ini beats environment beats default."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_agentbench.core.sampling import Sampling, sampling_problems
from pytest_agentbench.errors import AgentbenchError
from pytest_agentbench.model_list import ModelEntry, model_entries, parse_epochs, parse_reducer
from pytest_agentbench.models.base import ModelSpec
from pytest_agentbench.models.sampling_wire import PROTOCOL_NAMES, protocol_of, sampling_refusals
from pytest_agentbench.report.gate import GATE_ON
from pytest_agentbench.sandbox.isolation import ISOLATION_MODES
from pytest_agentbench.suites.task import FEEDBACK_LEVELS, REPAIR_MODES
from pytest_agentbench.urls import public_url

DEFAULT_FILES = ("bench_*.toml", "bench_*.yaml", "bench_*.yml", "bench_*.json", "bench_*.py")
DEFAULT_OUT = "agentbench-results"
DEFAULT_CONCURRENCY = 8
DEFAULT_TIMEOUT_S = 120.0

#: Which environment variables hold the key and base URL for each provider.
PROVIDER_ENV = {
    "openai": ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
    "openai-responses": ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
    "openai-compat": ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
    "anthropic": ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
    "scripted": (None, None),
}

#: Hosted providers that refuse requests without a key (local servers usually need none).
HOSTED_NEED_KEY = ("openai", "openai-responses", "anthropic")


@dataclass(frozen=True)
class Settings:
    """Everything a run needs to know, fixed before the first task is collected.

    ``timeout_s`` and ``max_tokens`` are None unless the user set them; when set they
    override every suite's own value. ``model_configured`` is False when the scripted
    default was chosen because nothing named a model. ``api_key`` never appears in repr,
    artifacts or messages.
    """

    enabled: bool = False
    model: ModelSpec = field(default_factory=lambda: ModelSpec("scripted", "scripted"))
    model_configured: bool = False
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    out_dir: Path = Path(DEFAULT_OUT)
    timeout_s: float | None = None
    max_tokens: int | None = None
    files: tuple[str, ...] = DEFAULT_FILES
    stream: bool = True
    repairs: int | None = None
    repair_mode: str | None = None
    feedback: str | None = None
    min_score: float | None = None
    errors_as_failures: bool = False
    gate_on: str = "point"
    concurrency: int = DEFAULT_CONCURRENCY
    concurrency_given: bool = False
    concurrency_from_slots: bool = False
    max_connections: int | None = None
    rpm: float | None = None
    shard: tuple[int, int] | None = None
    limit: tuple[int | None, int | None] | None = None
    sample: int | None = None
    sample_seed: int | None = None
    resume: str | None = None
    retry_errors: bool = False
    max_retries: int = 3
    max_file_mb: float = 64.0
    breaker_threshold: int = 5
    loop_kill: int = 80
    loop_kill_seconds: float = 10.0
    loop_kill_tokens: int = 1024
    sandbox: str | None = None
    markdown: Path | None = None
    controls: bool = False
    canary: bool = False
    sampling: Sampling = field(default_factory=Sampling)
    #: The model's name when the user gave one (NAME=SPEC); ``model_name`` is the name used.
    name: str | None = None
    #: With several models, one Settings per model (its own model, URL, key, sampling);
    #: empty for a one-model run (``lineup()`` is then this Settings alone).
    models: tuple[Settings, ...] = ()
    #: Runs of each task (None: the suite's ``epochs``, else 1) and the reducer of its
    #: samples (None: the suite's ``reducer``, else mean); both override every suite.
    epochs: int | None = None
    reducer: str | None = None

    @property
    def model_name(self) -> str:
        """What item ids, rollout folders, records and the summary call the model."""
        return self.name or self.model.label

    def lineup(self) -> tuple[Settings, ...]:
        """The settings of each model of the run, in the order given."""
        return self.models or (self,)

    def for_model(self, name: str) -> Settings:
        """The settings of the model called ``name`` (this one for an unknown name)."""
        for one in self.models:
            if one.model_name == name:
                return one
        return self

    baseline: Path | None = None
    fail_on_regression: bool = False
    perturb: tuple[str, ...] = ()
    seed: int = 0
    html: Path | None = None

    def seed_of_sample(self) -> int:
        """The seed of ``--agentbench-sample``: its own, else the run's ``--agentbench-seed``."""
        return self.sample_seed if self.sample_seed is not None else self.seed

    def fingerprint(self) -> str:
        """A short hash of the settings that change results (never the key)."""
        return _fingerprint(self)

    def public(self) -> dict[str, Any]:
        """The settings as recorded in summary.json (no secrets)."""
        return {
            "model": self.model.label,
            "model_configured": self.model_configured,
            "base_url": public_url(self.base_url) if self.base_url else None,
            "out_dir": str(self.out_dir),
            "timeout_s": self.timeout_s,
            "max_tokens": self.max_tokens,
            "files": list(self.files),
            "stream": self.stream,
            "repairs": self.repairs,
            "repair_mode": self.repair_mode,
            "feedback": self.feedback,
            "min_score": self.min_score,
            "errors_as_failures": self.errors_as_failures,
            "gate_on": self.gate_on,
            "concurrency": self.concurrency,
            "max_connections": self.max_connections,
            "rpm": self.rpm,
            "max_retries": self.max_retries,
            "loop_kill": self.loop_kill,
            "loop_kill_seconds": self.loop_kill_seconds,
            "loop_kill_tokens": self.loop_kill_tokens,
            "sandbox": self.sandbox,
            "breaker_threshold": self.breaker_threshold,
            "shard": f"{self.shard[0]}/{self.shard[1]}" if self.shard else None,
            "controls": self.controls,
            "canary": self.canary,
            "limit": _limit_text(self.limit),
            "sample": self.sample,
            "sample_seed": self.seed_of_sample() if self.sample is not None else None,
            "sampling": self.sampling.public(),
            "baseline": str(self.baseline) if self.baseline else None,
            "perturb": list(self.perturb),
            "seed": self.seed,
            "fingerprint": self.fingerprint(),
            "models": [
                {
                    "name": one.model_name,
                    "model": one.model.label,
                    "base_url": public_url(one.base_url) if one.base_url else None,
                    "sampling": one.sampling.public(),
                    "fingerprint": one.fingerprint(),
                }
                for one in self.lineup()
            ],
            "epochs": self.epochs,
            "reducer": self.reducer,
        }


def _first(*values: Any) -> Any:
    for value in values:
        if value is not None and value != "" and value != []:
            return value
    return None


#: The largest number any numeric option takes (a day in seconds, ten million tokens,
#: megabytes, requests per minute): far beyond it the clock arithmetic overflows and a
#: task ends in an OverflowError instead of an outcome.
MAX_OPTION_NUMBER = 10_000_000


def _number(
    name: str,
    value: Any,
    kind: Callable[[Any], Any],
    minimum: float,
    maximum: float = MAX_OPTION_NUMBER,
) -> Any:
    try:
        number = kind(value)
    except (TypeError, ValueError, OverflowError):
        raise AgentbenchError(f"{name}: expected a number, got {value!r}") from None
    if number < minimum:
        raise AgentbenchError(f"{name}: expected a number >= {minimum}, got {value!r}")
    if not number <= maximum:  # NaN too
        raise AgentbenchError(f"{name}: expected a number <= {maximum:g}, got {value!r}")
    return number


def _fraction(name: str, value: Any) -> float:
    number = float(_number(name, value, float, 0.0))
    if number > 1:
        raise AgentbenchError(f"{name}: expected a score from 0 to 1, got {value!r}")
    return number


def _int_option(
    option: Callable[[str], Any],
    ini: Callable[[str], Any],
    name: str,
    default: int,
    low: int,
    high: int,
) -> int:
    value = _first(option(name), ini(name))
    if value is None:
        return default
    number = int(_number(name.replace("_", " "), value, int, low))
    if number > high:
        raise AgentbenchError(f"{name.replace('_', ' ')}: expected {low} to {high}, got {value!r}")
    return number


def _optional_int(
    option: Callable[[str], Any], ini: Callable[[str], Any], name: str, low: int
) -> int | None:
    value = _first(option(name), ini(name))
    if value is None:
        return None
    return int(_number(name.replace("_", " "), value, int, low, 2**63 - 1))


def _shard(value: Any) -> tuple[int, int] | None:
    """``K/N`` (1 <= K <= N) as a pair, None when not given."""
    if value is None:
        return None
    k, sep, n = str(value).partition("/")
    if sep and k.strip().isdigit() and n.strip().isdigit():
        shard, total = int(k), int(n)
        if 1 <= shard <= total:
            return shard, total
    raise AgentbenchError(f"agentbench shard: expected K/N with 1 <= K <= N, got {value!r}")


def _limit(value: Any) -> tuple[int | None, int | None] | None:
    """``N`` (the first N tasks) or ``START:STOP`` (0-based, STOP excluded, either may be
    left out) as a pair, None when not given."""
    if value is None:
        return None
    text = str(value).strip()
    start, _, stop = text.rpartition(":") if ":" in text else ("", "", text)
    parts = [part.strip() for part in (start, stop)]
    if all(not part or part.isdigit() for part in parts) and any(parts):
        low, high = (int(part) if part else None for part in parts)
        if low is None or high is None or low <= high:
            return low, high
    raise AgentbenchError(
        f"agentbench limit: expected N or START:STOP (0-based, STOP excluded), got {value!r}"
    )


def _limit_text(limit: tuple[int | None, int | None] | None) -> str | None:
    if limit is None:
        return None
    start, stop = ("" if end is None else str(end) for end in limit)
    return f"{start}:{stop}"


def _choice(name: str, value: Any, choices: tuple[str, ...]) -> str | None:
    if value is None:
        return None
    if value not in choices:
        raise AgentbenchError(f"{name}: expected one of {', '.join(choices)}, got {value!r}")
    return str(value)


def resolve_settings(
    option: Callable[[str], Any],
    ini: Callable[[str], Any],
    env: Mapping[str, str],
) -> Settings:
    """Build Settings from the CLI (``option``), ini file (``ini``) and environment.

    Raises AgentbenchError for values a user must fix (unknown provider, bad number).
    """
    enabled = bool(option("agentbench"))
    entries = model_entries(
        option("agentbench_model"),
        ini("agentbench_models"),
        _first(ini("agentbench_model"), env.get("AGENTBENCH_MODEL")),
    )
    model_text = entries[0].spec.label if entries else None
    model = entries[0].spec if entries else ModelSpec("scripted", "scripted")
    key_var, url_var = PROVIDER_ENV.get(model.provider, (None, None))  # a plugin's: none
    base_url = _first(
        option("agentbench_base_url"),
        ini("agentbench_base_url"),
        env.get(url_var) if url_var else None,
    )
    api_key = env.get(key_var) if key_var else None
    epochs = _first(option("agentbench_epochs"), ini("agentbench_epochs"))
    reducer = _first(option("agentbench_reducer"), ini("agentbench_reducer"))
    timeout = _first(option("agentbench_timeout"), ini("agentbench_timeout"))
    max_tokens = _first(option("agentbench_max_tokens"), ini("agentbench_max_tokens"))
    max_file_mb = _first(option("agentbench_max_file_mb"), ini("agentbench_max_file_mb"))
    files = ini("agentbench_files") or list(DEFAULT_FILES)
    repairs = _first(option("agentbench_repairs"), ini("agentbench_repairs"))
    if repairs is not None:
        repairs = _number("agentbench repairs", repairs, int, 0)
        if repairs > 10:
            raise AgentbenchError(f"agentbench repairs: expected 0 to 10, got {repairs}")
    min_score = _first(option("agentbench_min_score"), ini("agentbench_min_score"))
    retry_errors = bool(option("agentbench_retry_errors"))
    kill_seconds = _first(
        option("agentbench_loop_kill_seconds"), ini("agentbench_loop_kill_seconds")
    )
    resume = option("agentbench_resume") or ("latest" if retry_errors else None)
    concurrency = _first(option("agentbench_concurrency"), ini("agentbench_concurrency"))
    max_connections = _first(
        option("agentbench_max_connections"), ini("agentbench_max_connections")
    )
    rpm = _first(option("agentbench_rpm"), ini("agentbench_rpm"))
    markdown = _first(option("agentbench_markdown"), ini("agentbench_markdown"))
    baseline = _first(option("agentbench_baseline"), ini("agentbench_baseline"))
    perturb = _first(option("agentbench_perturb"), ini("agentbench_perturb"))
    if option("agentbench_fail_on_regression") and not baseline:
        raise AgentbenchError(
            "--agentbench-fail-on-regression compares with a baseline: "
            "give --agentbench-baseline RUN_DIR (or the agentbench_baseline ini key)"
        )
    html = _first(option("agentbench_html"), ini("agentbench_html"))
    repair_mode = _choice(
        "agentbench repair mode",
        _first(option("agentbench_repair_mode"), ini("agentbench_repair_mode")),
        REPAIR_MODES,
    )
    feedback = _choice(
        "agentbench feedback",
        _first(option("agentbench_feedback"), ini("agentbench_feedback")),
        FEEDBACK_LEVELS,
    )
    settings = Settings(
        enabled=enabled,
        model=model,
        model_configured=model_text is not None,
        base_url=str(base_url).rstrip("/") if base_url else None,
        api_key=api_key or None,
        out_dir=Path(_first(option("agentbench_out"), ini("agentbench_out"), DEFAULT_OUT)),
        timeout_s=_number("agentbench timeout", timeout, float, 0.001, 86400)
        if timeout is not None
        else None,
        max_tokens=_number("agentbench max tokens", max_tokens, int, 1)
        if max_tokens is not None
        else None,
        files=tuple(files),
        stream=not option("agentbench_no_stream"),
        repairs=repairs,
        repair_mode=repair_mode,
        feedback=feedback,
        min_score=_fraction("agentbench min score", min_score) if min_score is not None else None,
        errors_as_failures=bool(option("agentbench_errors_as_failures")),
        gate_on=_choice(
            "agentbench gate on",
            _first(option("agentbench_gate_on"), ini("agentbench_gate_on")),
            GATE_ON,
        )
        or "point",
        resume=resume,
        retry_errors=retry_errors,
        max_retries=_int_option(option, ini, "agentbench_max_retries", 3, 0, 20),
        max_file_mb=float(_number("agentbench max file mb", max_file_mb, float, 0.000001))
        if max_file_mb is not None
        else 64.0,
        breaker_threshold=_int_option(option, ini, "agentbench_breaker", 5, 0, 1000),
        sandbox=_choice(
            "agentbench sandbox",
            _first(option("agentbench_sandbox"), ini("agentbench_sandbox")),
            ISOLATION_MODES,
        ),
        loop_kill=_int_option(option, ini, "agentbench_loop_kill", 80, 0, 100),
        loop_kill_tokens=_int_option(option, ini, "agentbench_loop_kill_tokens", 1024, 1, 10**7),
        loop_kill_seconds=float(
            _number("agentbench loop kill seconds", kill_seconds, float, 0.0, 86400)
            if kill_seconds is not None
            else 10.0
        ),
        shard=_shard(_first(option("agentbench_shard"), ini("agentbench_shard"))),
        limit=_limit(_first(option("agentbench_limit"), ini("agentbench_limit"))),
        sample=_optional_int(option, ini, "agentbench_sample", 1),
        sample_seed=_optional_int(option, ini, "agentbench_sample_seed", 0),
        concurrency_given=concurrency is not None,
        concurrency=_number("agentbench concurrency", concurrency, int, 1, 1024)
        if concurrency is not None
        else DEFAULT_CONCURRENCY,
        max_connections=_number("agentbench max connections", max_connections, int, 1)
        if max_connections is not None
        else None,
        rpm=float(_number("agentbench rpm", rpm, float, 0.001)) if rpm is not None else None,
        markdown=Path(markdown) if markdown else None,
        controls=bool(option("agentbench_controls")),
        canary=bool(option("agentbench_canary")),
        sampling=resolve_sampling(option, ini, model),
        epochs=parse_epochs(epochs, "agentbench epochs") if epochs is not None else None,
        reducer=parse_reducer(reducer, "agentbench reducer") if reducer is not None else None,
        baseline=Path(baseline) if baseline else None,
        fail_on_regression=bool(option("agentbench_fail_on_regression")),
        perturb=_perturbations(perturb),
        seed=_int_option(option, ini, "agentbench_seed", 0, 0, MAX_OPTION_NUMBER),
        html=Path(html) if html else None,
    )
    return with_models(settings, entries, option, ini, env)


def with_models(
    settings: Settings,
    entries: list[ModelEntry],
    option: Callable[[str], Any],
    ini: Callable[[str], Any],
    env: Mapping[str, str],
) -> Settings:
    """``settings`` for the first model, holding one Settings per model when there are
    several (or the one is named or has settings of its own). A model's own base URL and
    key variable win over the run's; its sampling settings over the run's."""
    if not entries:
        return settings
    lineup = []
    for entry in entries:
        key_var, url_var = PROVIDER_ENV.get(entry.spec.provider, (None, None))
        base_url = _first(
            entry.base_url,
            option("agentbench_base_url"),
            ini("agentbench_base_url"),
            env.get(url_var) if url_var else None,
        )
        own = entry.sampling
        for key, reason in sampling_problems(own):
            raise AgentbenchError(f"model {entry.label}: {key}: {reason}")
        sampling = Sampling.parse(own).over(resolve_sampling(option, ini, entry.spec))
        protocol = protocol_of(entry.spec)
        for key, reason in sampling_refusals(protocol, sampling.public()):
            raise AgentbenchError(
                f"model {entry.label}: {key}: {reason} (it speaks {PROTOCOL_NAMES[protocol]})"
            )
        key_env = entry.key_env or key_var
        lineup.append(
            replace(
                settings,
                model=entry.spec,
                name=entry.name,
                model_configured=True,
                base_url=str(base_url).rstrip("/") if base_url else None,
                api_key=(env.get(key_env) if key_env else None) or None,
                sampling=sampling,
            )
        )
    if len(lineup) == 1:
        return lineup[0]
    return replace(lineup[0], models=tuple(lineup))


#: How each sampling setting is read from the ini file (the command line types its own).
_SAMPLING_INI: dict[str, Callable[[Any], Any]] = {
    "temperature": float,
    "top_p": float,
    "top_k": int,
    "seed": int,
    "stop": list,
    "reasoning_effort": str,
    "thinking_budget": int,
    "extra_body": json.loads,
}


def resolve_sampling(
    option: Callable[[str], Any], ini: Callable[[str], Any], model: ModelSpec
) -> Sampling:
    """The run's sampling settings, each from the command line, else the ini file.
    Raises AgentbenchError naming the option and key for a bad value, or for a setting the
    model's protocol has no field for."""
    values: dict[str, Any] = {}
    for key, read in _SAMPLING_INI.items():
        name = _option_name(key)
        value = option(f"agentbench_{name}")
        if value is None or value == []:
            value = ini(f"agentbench_{name}")
            if value in (None, "", []):
                continue
            try:
                value = read(value)
            except ValueError:
                raise AgentbenchError(
                    f"{_sampling_source(key)}: expected {_KIND[key]}, got {value!r}"
                ) from None
        elif key == "extra_body":
            try:
                value = json.loads(value)
            except ValueError as exc:
                raise AgentbenchError(
                    f"{_sampling_source(key)}: expected a JSON object, got {value!r} ({exc})"
                ) from None
        values[key] = value
    for key, reason in sampling_problems(values):
        raise AgentbenchError(f"{_sampling_source(key)}: {reason}")
    protocol = protocol_of(model)
    for key, reason in sampling_refusals(protocol, values):
        raise AgentbenchError(
            f"{_sampling_source(key)}: {reason} (the model {model.label} speaks "
            f"{PROTOCOL_NAMES[protocol]})"
        )
    return Sampling.parse(values)


_KIND = {
    "temperature": "a number",
    "top_p": "a number",
    "top_k": "an integer",
    "seed": "an integer",
    "stop": "lines of text",
    "reasoning_effort": "a word",
    "thinking_budget": "an integer",
    "extra_body": "a JSON object",
}


def _option_name(key: str) -> str:
    """The option and ini name of a sampling setting: the model's seed is
    ``--agentbench-sampling-seed``, as ``--agentbench-seed`` is the run's own seed
    (perturbations, samples)."""
    return "sampling_seed" if key == "seed" else key


def _sampling_source(key: str) -> str:
    name = _option_name(key)
    return f"--agentbench-{name.replace('_', '-')} / agentbench_{name}"


def _perturbations(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    from pytest_agentbench.suites.perturb import parse_perturbations

    try:
        return parse_perturbations(str(value))
    except ValueError as exc:
        raise AgentbenchError(f"--agentbench-perturb: {exc}") from None


@functools.lru_cache(maxsize=16)
def _fingerprint(settings: Settings) -> str:
    """Settings.fingerprint, computed once per Settings (every task writes it)."""
    material: dict[str, Any] = {
        "model": settings.model.label,
        "base_url": settings.base_url if settings.model.provider != "scripted" else None,
        "timeout_s": settings.timeout_s,
        "max_tokens": settings.max_tokens,
        "stream": settings.stream,
        "repairs": settings.repairs,
        "repair_mode": settings.repair_mode,
        "feedback": settings.feedback,
        "loop_kill": [settings.loop_kill, settings.loop_kill_seconds, settings.loop_kill_tokens],
    }
    if sampled := settings.sampling.public():  # absent when unset: older fingerprints hold
        material["sampling"] = sampled
    if settings.name:
        material["name"] = settings.name
    if settings.perturb:  # the same perturbed id holds another task under another seed
        material["perturb"] = [*settings.perturb, f"seed={settings.seed}"]
    blob = json.dumps(material, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]
