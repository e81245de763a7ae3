"""A judge's client: the settings a hosted judge's client is made with (its key from its
``key_env``, else its provider's variable; its URL from its ``base_url``, else its
provider's variable, never the model under test's), shared by the run's services and by
``rescore``, which judges outside any pytest run (``OfflineJudges``)."""

from __future__ import annotations

import os
import threading
from dataclasses import replace
from typing import TYPE_CHECKING

from pytest_agentbench.config.settings import HOSTED_NEED_KEY, PROVIDER_ENV, Settings

if TYPE_CHECKING:
    from pytest_agentbench.models.base import ModelClient
    from pytest_agentbench.scripted.server import ScriptedServer
    from pytest_agentbench.verifiers.judge_model import JudgeModel


def judge_settings(base: Settings, judge: JudgeModel) -> Settings:
    """``base`` for the hosted ``judge``: its spec, URL, key and sampling."""
    key_var, url_var = PROVIDER_ENV.get(judge.spec.provider, (None, None))
    key_env = judge.key_env or key_var
    base_url = judge.base_url or (os.environ.get(url_var) if url_var else None)
    return replace(
        base,
        model=judge.spec,
        name=None,
        models=(),
        base_url=base_url.rstrip("/") if base_url else None,
        api_key=(os.environ.get(key_env) if key_env else None) or None,
        sampling=judge.sampling,
    )


class OfflineJudges:
    """The judges of ``python -m pytest_agentbench rescore``: a scripted judge plays on a
    scripted server started on first use (``close`` stops it), a hosted judge is called
    through its provider's built-in client (a plugin's provider judges only inside
    pytest), each with retries as in a run."""

    def __init__(self, max_retries: int = 3) -> None:
        self.max_retries = max_retries
        self.server: ScriptedServer | None = None
        self._made: dict[str, tuple[ModelClient, ModelClient]] = {}
        self._lock = threading.Lock()

    def connect(self, judge: JudgeModel) -> tuple[ModelClient, ModelClient]:
        from pytest_agentbench.models.retry import RetryingClient, RetryPolicy

        identity = judge.fingerprint() + (judge.key_env or "")
        with self._lock:
            made = self._made.get(identity)
            if made is not None:
                return made
            bare = self._bare(judge)
            wrapped = RetryingClient(bare, RetryPolicy(max_attempts=self.max_retries + 1))
            self._made[identity] = (wrapped, bare)
            return wrapped, bare

    def _bare(self, judge: JudgeModel) -> ModelClient:
        if judge.scripted:
            from pytest_agentbench.models.scripted import scripted_client
            from pytest_agentbench.scripted.server import ScriptedServer

            if self.server is None:
                self.server = ScriptedServer()
                self.server.start()
            return scripted_client(judge.spec, self.server.url)
        from pytest_agentbench.hooks.builtins import pytest_agentbench_model_client
        from pytest_agentbench.verifiers.base import JudgeError

        settings = judge_settings(Settings(), judge)
        if settings.api_key is None and judge.spec.provider in HOSTED_NEED_KEY:
            variable = judge.key_env or PROVIDER_ENV[judge.spec.provider][0]
            raise JudgeError(f"judge {judge.spec.label} needs an API key: set {variable}")
        client = pytest_agentbench_model_client(spec=judge.spec, settings=settings)
        if client is None:
            raise JudgeError(
                f"judge {judge.spec.label}: provider {judge.spec.provider!r} is not built in "
                "(a plugin's provider judges only inside a pytest run)"
            )
        return client

    def close(self) -> None:
        with self._lock:
            for client, _bare in self._made.values():
                client.close()
            self._made.clear()
            if self.server is not None:
                self.server.stop()
                self.server = None
