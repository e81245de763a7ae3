"""Which model judges, configured like the model under test: a spec, a base URL, the
variable holding its key, sampling settings (temperature 0 unless set) and a token
limit. The run's judge (``--agentbench-judge-model``, else the ini's
``agentbench_judge_model``) and a suite's or task's ``judge`` table are read into one
``JudgeModel``; the command line wins over the task, the task over the suite, the suite
over the ini. With none of them, the scripted provider judges (offline)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import field

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.sampling import Sampling
from pytest_agentbench.models.base import ModelSpec
from pytest_agentbench.verifiers.judge_prompt import TEMPLATE_HASH

DEFAULT_MAX_TOKENS = 1024
#: The judge's own time limit for grading one answer (every call, retry and sample of
#: it), in seconds, when neither the command line, the suite nor the ini sets one.
DEFAULT_TIMEOUT_S = 300.0
#: The sampling keys a ``judge`` table may set.
SAMPLING_KEYS = ("temperature", "top_p", "top_k", "seed")


@dataclass(frozen=True)
class JudgeModel:
    """One judge: who answers, where, with which key variable and sampling settings."""

    spec: ModelSpec = field(default_factory=lambda: ModelSpec("scripted", "scripted"))
    base_url: str | None = None
    key_env: str | None = None
    sampling: Sampling = field(default_factory=lambda: Sampling(temperature=0.0))
    max_tokens: int = DEFAULT_MAX_TOKENS
    #: where it was configured: ``command line``, ``ini``, ``suite``/``task``, ``default``
    source: str = "default"

    @property
    def scripted(self) -> bool:
        return self.spec.provider == "scripted"

    def public(self) -> JsonObject:
        """The judge as records and summary.json show it (no key, no URL credentials)."""
        from pytest_agentbench.core.urls import public_url

        return {
            "model": self.spec.label,
            "base_url": public_url(self.base_url) if self.base_url else None,
            "key_env": self.key_env,
            "sampling": self.sampling.public(),
            "max_tokens": self.max_tokens,
            "template_hash": TEMPLATE_HASH,
        }

    def fingerprint(self) -> str:
        """A short hash of everything that changes a verdict: spec, URL, sampling, token
        limit and the prompt templates."""
        material = dict(self.public())
        material.pop("key_env")
        if self.scripted:
            material["base_url"] = None  # each run's scripted server has a port of its own
        blob = json.dumps(material, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


def table_timeout_s(options: Mapping[str, JsonValue]) -> float | None:
    """The ``timeout_s`` of a verifier's ``judge`` table (None when it sets none): the
    judge's own time limit, not part of its identity (it changes no verdict)."""
    table = options.get("judge")
    value = table.get("timeout_s") if isinstance(table, Mapping) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def judge_from_table(table: Mapping[str, JsonValue], source: str) -> JudgeModel:
    """A suite's or task's ``judge`` table (its schema checked the shape) as a JudgeModel;
    ValueError for a spec that cannot be parsed."""
    from pytest_agentbench.errors import AgentbenchError

    spec_text = table.get("model", "scripted")
    try:
        spec = ModelSpec.parse(str(spec_text))
    except AgentbenchError as exc:
        raise ValueError(str(exc)) from None
    values = {k: table[k] for k in SAMPLING_KEYS if k in table}
    sampling = Sampling.parse(values).over(Sampling(temperature=0.0))
    max_tokens = table.get("max_tokens", DEFAULT_MAX_TOKENS)
    base_url = table.get("base_url")
    key_env = table.get("key_env")
    return JudgeModel(
        spec=spec,
        base_url=str(base_url).rstrip("/") if isinstance(base_url, str) else None,
        key_env=key_env if isinstance(key_env, str) else None,
        sampling=sampling,
        max_tokens=max_tokens if isinstance(max_tokens, int) else DEFAULT_MAX_TOKENS,
        source=source,
    )


#: The JSON Schema of a ``judge`` table.
JUDGE_TABLE_SCHEMA: JsonObject = {
    "type": "object",
    "properties": {
        "model": {"type": "string", "minLength": 1},
        "base_url": {"type": "string", "pattern": "^https?://"},
        "key_env": {"type": "string", "pattern": "(?i)(KEY|TOKEN|SECRET)"},
        "temperature": {"type": "number", "minimum": 0, "maximum": 2},
        "top_p": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
        "top_k": {"type": "integer", "minimum": 1},
        "seed": {"type": "integer", "minimum": 0},
        "max_tokens": {"type": "integer", "minimum": 16, "maximum": 100000},
        "timeout_s": {"type": "number", "exclusiveMinimum": 0, "maximum": 86400},
    },
    "additionalProperties": False,
}
