"""One frozen Settings, resolved once per run: CLI beats ini beats environment beats default.

This module is the record (every field, its defaults, what summary.json shows of it and
its fingerprint); ``resolve.py`` builds it from the command line, the ini file and the
environment. The closed sets are the ``Literal`` types of ``core/choices.py``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_agentbench.config.option_values import (
    range_text,
)
from pytest_agentbench.core.choices import (
    FeedbackLevel,
    GateOn,
    Isolation,
    RepairMode,
)
from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject
from pytest_agentbench.core.sampling import Sampling
from pytest_agentbench.core.urls import public_url
from pytest_agentbench.models.base import ModelSpec

if TYPE_CHECKING:  # (a run's agent file and prices: their modules when they are used)
    from pytest_agentbench.core.cost import Price
    from pytest_agentbench.suites.agent_file import RunAgent
    from pytest_agentbench.verifiers.judge_model import JudgeModel

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "HOSTED_NEED_KEY",
    "PROVIDER_ENV",
    "Settings",
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
class ContainerSettings:
    """``engine``: the engine asked for (None: Podman if it answers, else Docker);
    ``image_map``: (image name, local image) pairs (a tuple: settings are hashed). Read
    by config/container_options.py, which a run imports only when one is given."""

    engine: str | None = None
    image_map: tuple[tuple[str, str], ...] = ()


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
    #: and the longest wait (session/batch_answers.py)
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
        """A short hash of the settings that change results (never the key); made once
        per Settings (every task writes it) and kept on the instance."""
        made = self.__dict__.get("_fingerprint")
        if made is None:
            made = _fingerprint(self)
            object.__setattr__(self, "_fingerprint", made)
        return made

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


def _fingerprint(settings: Settings) -> str:
    """What Settings.fingerprint hashes, hashed."""
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
