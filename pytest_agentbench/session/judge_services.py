"""A run's judges (verifiers/judge.py): each judge's client (made once per judge, with
retries and the shared rate limit) and its price, for the spending cap and the record.
Part of the run's services (session/services.py, which binds the judge verifier to
them), imported when a task first needs a judge."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

import pytest

if TYPE_CHECKING:
    from pytest_agentbench.config.settings import Settings
    from pytest_agentbench.core.cost import Price
    from pytest_agentbench.core.jsontypes import JsonValue
    from pytest_agentbench.models.base import ModelClient
    from pytest_agentbench.verifiers.base import Verifier
    from pytest_agentbench.verifiers.judge_model import JudgeModel


class JudgeHost(Protocol):
    """What the judges use of the run's services (session/services.RunServices)."""

    config: pytest.Config
    settings: Settings

    def verifiers(self) -> dict[str, Verifier]: ...
    def scripted_url(self) -> str: ...
    def unclaimed(self, settings: Settings) -> str: ...
    def reliable(self, client: ModelClient, settings: Settings) -> ModelClient: ...


class RunJudges:
    """The judges of the run ``services`` serves."""

    def __init__(self, services: JudgeHost) -> None:
        self.services = services
        #: each judge's client and its bare client, by judge
        self._made: dict[str, tuple[ModelClient, ModelClient]] = {}
        self._lock = threading.Lock()

    def client(self, judge: JudgeModel) -> tuple[ModelClient, ModelClient]:
        """The client of ``judge`` (with retries and the shared rate limit) and its bare
        client, made once per judge. A scripted judge plays on the run's scripted server
        (or a server of this process's own); another gets its key from its ``key_env``
        (else its provider's variable) and its URL from its ``base_url`` (else the
        provider's variable), never the model under test's."""
        from dataclasses import replace

        services = self.services
        identity = judge.fingerprint() + (judge.key_env or "")
        with self._lock:
            made = self._made.get(identity)
        if made is not None:
            return made
        if judge.scripted:
            from pytest_agentbench.models.scripted import scripted_client

            bare = scripted_client(judge.spec, services.scripted_url())
        else:
            from pytest_agentbench.session.judges import judge_settings

            settings = judge_settings(services.settings, judge)
            client = services.config.hook.pytest_agentbench_model_client(
                spec=judge.spec, settings=settings
            )
            if client is None:
                raise pytest.UsageError(services.unclaimed(settings))
            bare = client
        # the cap (--agentbench-max-cost) reserves and charges the judge's calls at the
        # judge's own price (a judge with no price is refused at collection, items.py)
        price = self.price(judge)
        wrapped = services.reliable(
            bare, replace(services.settings, breaker_threshold=0, price=price)
        )
        with self._lock:
            made = self._made.setdefault(identity, (wrapped, bare))
        return made

    def of(self, options: Mapping[str, JsonValue]) -> JudgeModel | None:
        """The judge that grades a task with these verifier options (the command line's,
        the task's or suite's table, the ini's, else the scripted one); None when the
        ``judge`` kind is a plugin's or the table cannot be read (its own problem)."""
        from pytest_agentbench.verifiers.base import JudgeError, resolved
        from pytest_agentbench.verifiers.judge import JudgeRuntime, JudgeVerifier

        services = self.services
        if not isinstance(resolved(services.verifiers().get("judge")), JudgeVerifier):
            return None
        runtime = JudgeRuntime(
            self.client, override=services.settings.judge, fallback=services.settings.judge_ini
        )
        try:
            return runtime.model_for(options)
        except JudgeError:
            return None

    def price(self, judge: JudgeModel) -> Price | None:
        """The price of ``judge`` (docs/cost.md, "The judge's cost"): the same answer for
        the cap's reservations and the record's ``judge_usd``."""
        from pytest_agentbench.core.urls import public_url

        base_url = None if judge.scripted or not judge.base_url else public_url(judge.base_url)
        return self.price_by(judge.spec.label, base_url)

    def price_by(self, label: str, base_url: str | None) -> Price | None:
        """The price of the judge model ``label`` at ``base_url`` (its record's ``model``
        and ``base_url``), by models/prices.judge_price: one of the run's models at the
        same URL has that model's price, else the price file, else the shipped table."""
        from pytest_agentbench.core.urls import public_url
        from pytest_agentbench.models.prices import judge_price

        def key(one: Settings) -> tuple[str, str | None]:
            url = public_url(one.base_url.rstrip("/")) if one.base_url else None
            return one.model.label, url

        settings = self.services.settings
        lineup = {key(one): one.price for one in (settings, *settings.lineup())}
        return judge_price(label, base_url, prices_file=settings.prices_file, lineup=lineup)

    def close(self) -> None:
        with self._lock:
            made, self._made = self._made, {}
        for client, _bare in made.values():
            client.close()
