"""One frozen Settings, resolved once per run: CLI beats ini beats environment beats default.

Each value is read and checked by ``option_values.py``, the sampling settings by
``sampling_options.py``; the closed sets are the ``Literal`` types of ``core/choices.py``.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_agentbench.config.container_options import ContainerSettings, container_settings
from pytest_agentbench.config.model_list import (
    ModelEntry,
    model_entries,
    parse_epochs,
    parse_reducer,
)
from pytest_agentbench.config.option_values import (
    MAX_OPTION_NUMBER,
    OptionReader,
    choice,
    first,
    fraction,
    int_option,
    number,
    optional_int,
    perturbations,
    range_text,
    shard,
    task_range,
    text,
)
from pytest_agentbench.config.sampling_options import resolve_sampling
from pytest_agentbench.core.choices import (
    FEEDBACK_LEVELS,
    GATE_ON,
    ISOLATION_MODES,
    REPAIR_MODES,
    FeedbackLevel,
    GateOn,
    Isolation,
    RepairMode,
)
from pytest_agentbench.core.cost import Price
from pytest_agentbench.core.jsontypes import JsonObject
from pytest_agentbench.core.sampling import Sampling, sampling_problems
from pytest_agentbench.core.urls import public_url
from pytest_agentbench.errors import AgentbenchError
from pytest_agentbench.models.base import ModelSpec
from pytest_agentbench.models.sampling_wire import PROTOCOL_NAMES, protocol_of, sampling_refusals
from pytest_agentbench.suites.agent_file import RunAgent, run_agent

if TYPE_CHECKING:
    from pytest_agentbench.verifiers.judge_model import JudgeModel

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "HOSTED_NEED_KEY",
    "MAX_OPTION_NUMBER",
    "PROVIDER_ENV",
    "Settings",
    "resolve_sampling",
    "resolve_settings",
    "with_models",
]

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
    repair_mode: RepairMode | None = None
    feedback: FeedbackLevel | None = None
    min_score: float | None = None
    errors_as_failures: bool = False
    gate_on: GateOn = "point"
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
    #: The model's server serves one request at a time (declared: models/queue.py).
    serial_server: bool = False
    max_file_mb: float = 64.0
    breaker_threshold: int = 5
    loop_kill: int = 80
    loop_kill_seconds: float = 10.0
    loop_kill_tokens: int = 1024
    sandbox: Isolation | None = None
    containers: ContainerSettings = field(default_factory=ContainerSettings)
    #: --agentbench-agent: the agent under test of every agent task naming none
    agent: RunAgent | None = None
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
    #: A reducer is no closed set (``pass@K`` takes any K): model_list.parse_reducer checks it.
    epochs: int | None = None
    reducer: str | None = None
    #: The model's price (models/prices.py), None when nobody knows it; the user's price
    #: file; the run's spending cap in USD (--agentbench-max-cost).
    price: Price | None = None
    prices_file: Path | None = None
    max_cost: float | None = None
    #: The response cache's folder (--agentbench-cache) and mode; None: no cache.
    cache_dir: Path | None = None
    cache_mode: str = "read-write"
    #: --agentbench-dry-run: forecast the run, send nothing
    dry_run: bool = False
    #: --agentbench-batch: first-round requests through the provider's batch API
    #: (session/batch.py); seconds between status checks (None: the provider's default)
    #: and the longest wait
    batch: bool = False
    batch_poll_s: float | None = None
    batch_wait_s: float = 86_400.0

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
    #: the difference that matters: comparisons become better / worse / equivalent within
    #: ±margin / inconclusive (core/verdicts.py); None: no equivalence is ever claimed
    margin: float | None = None
    perturb: tuple[str, ...] = ()
    seed: int = 0
    html: Path | None = None
    #: The judge of judge tasks from the command line (beats every suite's) and from the
    #: ini (a suite's ``judge`` table beats it); None when not given.
    judge: JudgeModel | None = None
    judge_ini: JudgeModel | None = None
    #: People's labels of answers (``--agentbench-judge-labels``), the calibration run
    #: (``--agentbench-calibrate``) and the kappa a judge must reach.
    judge_labels: Path | None = None
    calibrate: bool = False
    judge_min_kappa: float | None = None
    #: The judge's own time limit per answer (seconds): the command line's beats every
    #: suite's ``judge.timeout_s``, which beats the ini's; None when not given.
    judge_timeout_s: float | None = None
    judge_timeout_ini_s: float | None = None

    def seed_of_sample(self) -> int:
        """The seed of ``--agentbench-sample``: its own, else the run's ``--agentbench-seed``."""
        return self.sample_seed if self.sample_seed is not None else self.seed

    def fingerprint(self) -> str:
        """A short hash of the settings that change results (never the key)."""
        return _fingerprint(self)

    def public(self) -> JsonObject:
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
            "agent": None if self.agent is None else self.agent.public(),
            "breaker_threshold": self.breaker_threshold,
            "shard": f"{self.shard[0]}/{self.shard[1]}" if self.shard else None,
            "controls": self.controls,
            "canary": self.canary,
            "limit": range_text(self.limit),
            "sample": self.sample,
            "sample_seed": self.seed_of_sample() if self.sample is not None else None,
            "sampling": self.sampling.public(),
            "baseline": str(self.baseline) if self.baseline else None,
            "perturb": list(self.perturb),
            "margin": self.margin,
            "seed": self.seed,
            "fingerprint": self.fingerprint(),
            "models": [
                {
                    "name": one.model_name,
                    "model": one.model.label,
                    "base_url": public_url(one.base_url) if one.base_url else None,
                    "sampling": one.sampling.public(),
                    "fingerprint": one.fingerprint(),
                    "price": one.price.to_json() if one.price is not None else None,
                }
                for one in self.lineup()
            ],
            "epochs": self.epochs,
            "reducer": self.reducer,
            "prices_file": str(self.prices_file) if self.prices_file else None,
            "max_cost": self.max_cost,
            "cache": str(self.cache_dir) if self.cache_dir else None,
            "cache_mode": self.cache_mode if self.cache_dir else None,
            "batch": self.batch,
            "judge": None if self.judge is None else self.judge.public(),
            "judge_ini": None if self.judge_ini is None else self.judge_ini.public(),
            "judge_labels": str(self.judge_labels) if self.judge_labels else None,
            "calibrate": self.calibrate,
            "judge_min_kappa": self.judge_min_kappa,
            "judge_timeout_s": self.judge_timeout_s,
            "judge_timeout_ini_s": self.judge_timeout_ini_s,
        }


def resolve_settings(option: OptionReader, ini: OptionReader, env: Mapping[str, str]) -> Settings:
    """Build Settings from the CLI (``option``), ini file (``ini``) and environment.

    Raises AgentbenchError for values a user must fix (unknown provider, bad number).
    """

    def given(name: str) -> object:
        """The option ``agentbench_<name>``, else the ini key of the same name."""
        return first(option(f"agentbench_{name}"), ini(f"agentbench_{name}"))

    enabled = bool(option("agentbench"))
    entries = model_entries(
        option("agentbench_model"),
        ini("agentbench_models"),
        first(ini("agentbench_model"), env.get("AGENTBENCH_MODEL")),
    )
    model = entries[0].spec if entries else ModelSpec("scripted", "scripted")
    key_var, url_var = PROVIDER_ENV.get(model.provider, (None, None))  # a plugin's: none
    base_url = first(given("base_url"), env.get(url_var) if url_var else None)
    api_key = env.get(key_var) if key_var else None
    epochs, reducer = given("epochs"), given("reducer")
    timeout, max_tokens, max_file_mb = given("timeout"), given("max_tokens"), given("max_file_mb")
    files = ini("agentbench_files")
    repairs = given("repairs")
    if repairs is not None:
        repairs = number("agentbench repairs", repairs, int, 0)
        if repairs > 10:
            raise AgentbenchError(f"agentbench repairs: expected 0 to 10, got {repairs}")
    min_score, kill_seconds = given("min_score"), given("loop_kill_seconds")
    retry_errors = bool(option("agentbench_retry_errors"))
    resume = option("agentbench_resume") or ("latest" if retry_errors else None)
    concurrency, max_connections, rpm = given("concurrency"), given("max_connections"), given("rpm")
    markdown, baseline, html = given("markdown"), given("baseline"), given("html")
    if option("agentbench_fail_on_regression") and not baseline:
        raise AgentbenchError(
            "--agentbench-fail-on-regression compares with a baseline: "
            "give --agentbench-baseline RUN_DIR (or the agentbench_baseline ini key)"
        )
    repair_mode = choice("agentbench repair mode", given("repair_mode"), REPAIR_MODES)
    feedback = choice("agentbench feedback", given("feedback"), FEEDBACK_LEVELS)
    settings = Settings(
        enabled=enabled,
        model=model,
        model_configured=bool(entries),
        base_url=str(base_url).rstrip("/") if base_url else None,
        api_key=api_key or None,
        out_dir=Path(str(first(given("out"), DEFAULT_OUT))),
        timeout_s=number("agentbench timeout", timeout, float, 0.001, 86400)
        if timeout is not None
        else None,
        max_tokens=number("agentbench max tokens", max_tokens, int, 1)
        if max_tokens is not None
        else None,
        files=tuple(map(str, files)) if isinstance(files, list) and files else DEFAULT_FILES,
        stream=not option("agentbench_no_stream"),
        repairs=repairs,
        repair_mode=repair_mode,
        feedback=feedback,
        min_score=fraction("agentbench min score", min_score) if min_score is not None else None,
        errors_as_failures=bool(option("agentbench_errors_as_failures")),
        gate_on=choice("agentbench gate on", given("gate_on"), GATE_ON) or "point",
        resume=text(resume),
        retry_errors=retry_errors,
        max_retries=int_option(option, ini, "agentbench_max_retries", 3, 0, 20),
        serial_server=bool(option("agentbench_serial_server") or ini("agentbench_serial_server")),
        max_file_mb=number("agentbench max file mb", max_file_mb, float, 0.000001)
        if max_file_mb is not None
        else 64.0,
        breaker_threshold=int_option(option, ini, "agentbench_breaker", 5, 0, 1000),
        sandbox=choice("agentbench sandbox", given("sandbox"), ISOLATION_MODES),
        containers=container_settings(option, ini),
        agent=run_agent(given("agent")),
        loop_kill=int_option(option, ini, "agentbench_loop_kill", 80, 0, 100),
        loop_kill_tokens=int_option(option, ini, "agentbench_loop_kill_tokens", 1024, 1, 10**7),
        loop_kill_seconds=number("agentbench loop kill seconds", kill_seconds, float, 0.0, 86400)
        if kill_seconds is not None
        else 10.0,
        shard=shard(given("shard")),
        limit=task_range(given("limit")),
        sample=optional_int(option, ini, "agentbench_sample", 1),
        sample_seed=optional_int(option, ini, "agentbench_sample_seed", 0),
        concurrency_given=concurrency is not None,
        concurrency=number("agentbench concurrency", concurrency, int, 1, 1024)
        if concurrency is not None
        else DEFAULT_CONCURRENCY,
        max_connections=number("agentbench max connections", max_connections, int, 1)
        if max_connections is not None
        else None,
        rpm=number("agentbench rpm", rpm, float, 0.001) if rpm is not None else None,
        markdown=Path(str(markdown)) if markdown else None,
        controls=bool(option("agentbench_controls")),
        canary=bool(option("agentbench_canary")),
        sampling=resolve_sampling(option, ini, model),
        epochs=parse_epochs(epochs, "agentbench epochs") if epochs is not None else None,
        reducer=parse_reducer(reducer, "agentbench reducer") if reducer is not None else None,
        baseline=Path(str(baseline)) if baseline else None,
        fail_on_regression=bool(option("agentbench_fail_on_regression")),
        margin=_margin(given("margin")),
        perturb=perturbations(given("perturb")),
        seed=int_option(option, ini, "agentbench_seed", 0, 0, MAX_OPTION_NUMBER),
        html=Path(str(html)) if html else None,
        judge=judge_setting(option("agentbench_judge_model"), "--agentbench-judge-model"),
        judge_ini=judge_setting(ini("agentbench_judge_model"), "agentbench_judge_model"),
        judge_labels=Path(str(labels)) if (labels := given("judge_labels")) else None,
        calibrate=bool(option("agentbench_calibrate")),
        judge_min_kappa=fraction("agentbench judge min kappa", kappa)
        if (kappa := given("judge_min_kappa")) is not None
        else None,
        judge_timeout_s=_seconds("--agentbench-judge-timeout", option("agentbench_judge_timeout")),
        judge_timeout_ini_s=_seconds("agentbench_judge_timeout", ini("agentbench_judge_timeout")),
    )
    settings = replace(settings, dry_run=bool(option("agentbench_dry_run")))
    return with_prices(with_models(settings, entries, option, ini, env), entries, given)


def with_prices(settings: Settings, entries: list[ModelEntry], given: OptionReader) -> Settings:
    """``settings`` with each model's price (models/prices.resolve_price: its models
    list keys, the user's ``agentbench_prices`` file, the shipped table) and the
    ``--agentbench-max-cost`` cap."""
    from pytest_agentbench.models.prices import load_price_file, resolve_price

    prices, cap = given("prices"), given("max_cost")
    cache, mode = given("cache"), given("cache_mode")
    cache_dir = Path(str(cache)) if cache else None
    cache_mode = "read-write"
    if mode is not None:  # (the cache's module, and httpx with it, only when it is named)
        from pytest_agentbench.models.response_cache import CACHE_MODES

        cache_mode = choice("agentbench cache mode", mode, CACHE_MODES) or "read-write"
    batch, poll, wait = given("batch"), given("batch_poll"), given("batch_wait")
    batch_poll_s = number("agentbench batch poll", poll, float, 0.01) if poll is not None else None
    batch_wait_s = (
        number("agentbench batch wait", wait, float, 0.0) if wait is not None else 86_400.0
    )
    path = Path(str(prices)) if prices else None
    user = load_price_file(path) if path is not None else {}
    max_cost = number("agentbench max cost", cap, float, 0.0) if cap is not None else None
    listed = {entry.label: entry.prices for entry in entries}

    def priced(one: Settings) -> Settings:
        price = resolve_price(
            one.model,
            name=one.name,
            base_url=one.base_url,
            user=user,
            listed=listed.get(one.model_name),
        )
        return replace(
            one,
            price=price,
            prices_file=path,
            max_cost=max_cost,
            cache_dir=cache_dir,
            cache_mode=cache_mode,
            batch=batch is True or str(batch).lower() in ("true", "1", "yes", "on"),
            batch_poll_s=batch_poll_s,
            batch_wait_s=batch_wait_s,
        )

    models = tuple(priced(one) for one in settings.models)
    settings = replace(priced(settings), models=models)
    unpriced = [one.model_name for one in settings.lineup() if one.price is None]
    if max_cost is not None and unpriced:
        raise AgentbenchError(
            f"--agentbench-max-cost needs the price of every model, and "
            f"{', '.join(unpriced)} has none: give it in a price file (--agentbench-prices) "
            "or the models list (price_in=, price_out=); see docs/cost.md"
        )
    return settings


def _seconds(name: str, value: object) -> float | None:
    """A time limit in seconds (None when not given)."""
    if value is None or not str(value).strip():
        return None
    return number(name, value, float, 0.001, 86400)


def judge_setting(value: object, where: str) -> JudgeModel | None:
    """The judge a ``SPEC [key=value ...]`` line names (None when not given)."""
    if not value or not str(value).strip():
        return None
    from pytest_agentbench.config.model_list import parse_model_line

    entry = parse_model_line(str(value), 1, where)
    if entry.name is not None:
        raise AgentbenchError(f"{where}: a judge takes no NAME=, got {value!r}")
    sampling = Sampling.parse(entry.sampling).over(Sampling(temperature=0.0))
    source = "command line" if where.startswith("--") else "ini"
    from pytest_agentbench.verifiers.judge_model import JudgeModel

    return JudgeModel(entry.spec, entry.base_url, entry.key_env, sampling, source=source)


def with_models(
    settings: Settings,
    entries: list[ModelEntry],
    option: OptionReader,
    ini: OptionReader,
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
        base_url = first(
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


@functools.lru_cache(maxsize=16)
def _fingerprint(settings: Settings) -> str:
    """Settings.fingerprint, computed once per Settings (every task writes it)."""
    material: JsonObject = {
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
    if (
        settings.judge is not None or settings.judge_ini is not None
    ):  # a changed judge: not comparable
        material["judge"] = [j.fingerprint() for j in (settings.judge, settings.judge_ini) if j]
    if settings.perturb:  # the same perturbed id holds another task under another seed
        material["perturb"] = [*settings.perturb, f"seed={settings.seed}"]
    blob = json.dumps(material, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def _margin(value: object) -> float | None:
    """``--agentbench-margin``: a difference strictly between 0 and 1."""
    if value is None:
        return None
    found = number("agentbench margin", value, float, 0.0)
    if not 0 < found < 1:
        raise AgentbenchError(
            f"agentbench margin: expected a difference between 0 and 1, got {value!r}"
        )
    return found
