"""The start of a run, once ``--agentbench`` is given: the settings resolved and checked
(API keys, the strict sandbox, a local server's slots), the keys hidden from child
processes, the scripted server started when no real model is configured, the run's state
made and stashed on the config, and the run's own plugins registered (records, session
end, xdist crashes, built-ins, pytest-timeout), the hooks of the run itself among them
(session/plugin.py). Called by ``plugin.pytest_configure``.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

from pytest_agentbench.session.stash import STATE_KEY

if TYPE_CHECKING:
    from types import FrameType

    from pytest_agentbench.config.settings import Settings
    from pytest_agentbench.session.run import SignalHandler


def start_run(config: pytest.Config) -> None:
    """Resolve the settings, make the run's state and register the run's plugins; a
    setting that cannot be used is a ``pytest.UsageError``."""
    from pytest_agentbench.config.resolve import resolve_settings
    from pytest_agentbench.config.settings import HOSTED_NEED_KEY, PROVIDER_ENV
    from pytest_agentbench.errors import AgentbenchError
    from pytest_agentbench.hooks.plugin_hooks import load_entry_points
    from pytest_agentbench.session.collector import RecordCollector
    from pytest_agentbench.session.run import RunState

    load_entry_points(config.pluginmanager)
    try:
        settings = resolve_settings(config.getoption, config.getini, os.environ)
    except AgentbenchError as exc:
        raise pytest.UsageError(str(exc)) from None
    provider = settings.model.provider
    for one in settings.lineup():
        if (
            one.model.provider in HOSTED_NEED_KEY
            and not one.api_key
            and not settings.controls
            and not settings.calibrate
        ):
            key_var = PROVIDER_ENV[one.model.provider][0]
            raise pytest.UsageError(
                f"model {one.model_name} needs an API key: set {key_var} "
                "(or use --agentbench-model openai-compat/<model> with --agentbench-base-url "
                "for a local server)"
            )
    for judge in (settings.judge, settings.judge_ini):
        if judge is not None and judge.spec.provider in HOSTED_NEED_KEY:
            key_var = judge.key_env or PROVIDER_ENV[judge.spec.provider][0]
            if key_var and not os.environ.get(key_var):
                raise pytest.UsageError(
                    f"judge {judge.spec.label} ({judge.source}) needs an API key: set {key_var}"
                )
    # Every process of the run hides its keys from /proc/<pid>/environ before any task
    # runs: in the `basic` sandbox, code under test can read other processes' environ,
    # the xdist controller's included (docs/sandbox.md, "Secrets").
    from pytest_agentbench.sandbox.environ_guard import guard_harness

    guard_harness()
    if settings.sandbox == "strict":
        from pytest_agentbench.sandbox.isolation import containment

        found = containment("auto")
        if found["level"] != "strong":
            raise pytest.UsageError(
                "--agentbench-sandbox strict: this machine offers no strong isolation for "
                f"code tasks ({found['detail']}); install bubblewrap (Debian: apt-get install "
                "bubblewrap) or use --agentbench-sandbox auto"
            )
    if provider == "openai-compat" and settings.base_url and not settings.concurrency_given:
        from pytest_agentbench.models.slots import probe_slots

        slots = probe_slots(settings.base_url)
        if slots is not None:
            settings = replace(
                settings, concurrency=slots, concurrency_given=True, concurrency_from_slots=True
            )
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        settings = _with_base_url(settings, workerinput.get("agentbench_scripted_url"))
        state = RunState.for_worker(config, settings, workerinput)
    else:
        baseline = None
        if settings.baseline is not None:
            from pytest_agentbench.artifacts.baseline import load_baseline

            try:
                baseline = load_baseline(settings.baseline)
            except AgentbenchError as exc:
                raise pytest.UsageError(str(exc)) from None
        server = None
        if any(one.model.provider == "scripted" and not one.base_url for one in settings.lineup()):
            from pytest_agentbench.scripted.server import ScriptedServer

            server = ScriptedServer()
            settings = _with_base_url(settings, server.start())
        state = RunState.for_controller(config, settings, server=server)
        state.restore_sigterm = _interrupt_on_sigterm()
        state.results.baseline = baseline
        if config.getoption("agentbench_sequential", None) is not None:
            from pytest_agentbench.session.sequential import make_sequential

            state.sequential = make_sequential(
                config,
                [one.model_name for one in settings.lineup()],
                None if baseline is None else baseline.records,
            )
        config.pluginmanager.register(RecordCollector(state), "agentbench-records")
        otlp = config.getoption("agentbench_otlp") or config.getini("agentbench_otlp")
        if otlp:
            _register_otlp(config, str(otlp), state.run.run_id, settings)
        from pytest_agentbench.session.end_guard import SessionEndGuard

        config.pluginmanager.register(SessionEndGuard(), "agentbench-session-end")
        if config.pluginmanager.hasplugin("xdist"):
            from pytest_agentbench.session.controller import XdistController

            config.pluginmanager.register(XdistController(state), "agentbench-xdist-crashes")
    config.stash[STATE_KEY] = state
    from pytest_agentbench.session.plugin import SessionPlugin

    config.pluginmanager.register(SessionPlugin(state), "agentbench-session")
    from pytest_agentbench.hooks import builtins

    config.pluginmanager.register(builtins, "agentbench-builtins")
    for one in settings.lineup():
        if one.model.builtin:
            continue
        try:  # a plugin's provider: claimed now, or a usage error
            state.services.client(one.model_name if settings.models else "")
        except pytest.UsageError:
            raise
        except Exception as exc:
            raise pytest.UsageError(
                f"the model client for {one.model.label} could not be made: "
                f"{type(exc).__name__}: {exc}"
            ) from None
    if config.pluginmanager.hasplugin("timeout"):
        from pytest_agentbench.session.timeouts import TimeoutTakeover

        config.pluginmanager.register(TimeoutTakeover(), "agentbench-timeout")


def _register_otlp(config: pytest.Config, value: str, run_id: str, settings: Settings) -> None:
    """The OTLP sender, where records arrive (docs/interchange.md); a usage error when
    its URL is not one."""
    from pytest_agentbench import __version__
    from pytest_agentbench.session.otlp import make_otlp_plugin

    models = {one.model_name: (one.model.provider, one.model.model) for one in settings.lineup()}
    try:
        plugin = make_otlp_plugin(
            value,
            run_id,
            models,
            content=bool(config.getoption("agentbench_otlp_content")),
            version=__version__,
        )
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.pluginmanager.register(plugin, "agentbench-otlp")


def _interrupt_on_sigterm() -> SignalHandler:
    """Make SIGTERM end the run like Ctrl-C does, so the reports of what finished are
    written (marked partial); returns the previous handler, or None where not installed."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    return signal.signal(signal.SIGTERM, interrupt)


def _with_base_url(settings: Settings, url: str | None) -> Settings:
    """``settings`` with the scripted server's ``url`` for each scripted model that has no
    base URL of its own."""
    if url is None:
        return settings

    def served(one: Settings) -> Settings:
        needs = one.model.provider == "scripted" and not one.base_url
        return replace(one, base_url=url) if needs else one

    models = tuple(served(one) for one in settings.models)
    return replace(served(settings), models=models)
