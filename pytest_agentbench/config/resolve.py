"""Settings resolved once per run from the command line (``option``), the ini file
(``ini``) and the environment: CLI beats ini beats environment beats default.

Each value is read and checked by ``option_values.py``, the sampling settings by
``sampling_options.py``, the models list by ``model_list.py``; the result is the frozen
record of ``settings.py``, one per model when a run has several, priced.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

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
    shard,
    task_range,
    text,
)
from pytest_agentbench.config.sampling_options import resolve_sampling
from pytest_agentbench.config.settings import (
    DEFAULT_CONCURRENCY,
    DEFAULT_FILES,
    DEFAULT_OUT,
    PROVIDER_ENV,
    ContainerSettings,
    Settings,
)
from pytest_agentbench.core.choices import (
    FEEDBACK_LEVELS,
    GATE_ON,
    ISOLATION_MODES,
    REPAIR_MODES,
)
from pytest_agentbench.core.sampling import Sampling, sampling_problems
from pytest_agentbench.errors import AgentbenchError
from pytest_agentbench.models.base import ModelSpec
from pytest_agentbench.models.sampling_wire import PROTOCOL_NAMES, protocol_of, sampling_refusals

if TYPE_CHECKING:
    from pytest_agentbench.suites.agent_file import RunAgent
    from pytest_agentbench.verifiers.judge_model import JudgeModel

#: The options config/container_options.py reads (``--agentbench-engine``, the image map).
CONTAINER_OPTIONS = ("agentbench_engine", "agentbench_image_map")


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
        containers=_containers(option, ini),
        agent=_run_agent(given("agent")),
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
    if mode is not None:  # (the cache's module only when a mode is named)
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


def _containers(option: OptionReader, ini: OptionReader) -> ContainerSettings:
    """The run's container settings; their reader's module only when one is given."""
    if not any(read(name) for read in (option, ini) for name in CONTAINER_OPTIONS):
        return ContainerSettings()
    from pytest_agentbench.config.container_options import container_settings

    return container_settings(option, ini)


def _run_agent(value: object) -> RunAgent | None:
    """The ``--agentbench-agent`` file's agent; its module only when one is named."""
    if value is None or not str(value).strip():
        return None
    from pytest_agentbench.suites.agent_file import run_agent

    return run_agent(value)


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
