"""Re-judging in ``rescore`` (``rescore.py``): where the judges come from (``Judges``),
which judge the rescored run's settings recorded (``recorded_judge``), a judge's price
as the run found it (``JudgePrices``), a record's cost with its judge part made again
(``rejudged_cost``) and what the whole re-judging cost (``Rejudged``: summary.json's
``rescored.judge``)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import field, replace
from pathlib import Path
from typing import Protocol

from pytest_agentbench.artifacts.cost_totals import judge_cost
from pytest_agentbench.core.cost import CostRecord, Price
from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.task_record import TaskRecord
from pytest_agentbench.core.usage import sum_usage
from pytest_agentbench.errors import AgentbenchError
from pytest_agentbench.models.base import ModelClient
from pytest_agentbench.verifiers.judge_model import JudgeModel


class Judges(Protocol):
    """Where rescore's judges come from (session/judges.OfflineJudges): each judge's
    client and the bare client under its retries."""

    def connect(self, judge: JudgeModel) -> tuple[ModelClient, ModelClient]: ...


#: A judge model's price by its label and URL (``JudgePrices``).
PriceOf = Callable[[str, str | None], Price | None]


class JudgePrices:
    """A judge's price as the run found it (models/prices.judge_price): one of the run's
    models at the same URL has the price its settings recorded, else the price file
    (``prices_file``, else the run's own when it is still there), else the shipped
    table."""

    def __init__(self, settings: JsonValue, prices_file: Path | None) -> None:
        recorded = settings.get("prices_file") if isinstance(settings, dict) else None
        if prices_file is None and isinstance(recorded, str) and Path(recorded).is_file():
            prices_file = Path(recorded)
        self.prices_file = prices_file
        self.lineup: dict[tuple[str, str | None], Price | None] = {}
        models = settings.get("models") if isinstance(settings, dict) else None
        for one in models if isinstance(models, list) else []:
            if isinstance(one, dict) and isinstance(one.get("model"), str):
                url = one.get("base_url")
                key = (str(one["model"]), url if isinstance(url, str) else None)
                self.lineup[key] = _price(one.get("price"))

    def __call__(self, label: str, base_url: str | None) -> Price | None:
        from pytest_agentbench.models.prices import judge_price

        return judge_price(label, base_url, prices_file=self.prices_file, lineup=self.lineup)


def _price(data: JsonValue) -> Price | None:
    """A price as settings record it (core/cost.Price.to_json), None when it is not one."""
    if not isinstance(data, dict):
        return None
    rates = [data.get(kind) for kind in ("input", "output", "cache_read", "cache_write")]
    if any(r is not None and not isinstance(r, int | float) for r in rates):
        return None
    given, output, read, write = (float(r) if isinstance(r, int | float) else None for r in rates)
    if given is None or output is None:
        return None
    source = data.get("source")
    return Price(given, output, read, write, source if isinstance(source, str) else "")


@dataclass
class Rejudged:
    """What the re-judging did, for summary.json's ``rescored.judge``."""

    tasks: int = 0
    calls: int = 0
    usages: list[JsonObject] = field(default_factory=list)
    usd: list[float | None] = field(default_factory=list)
    replaced: list[float | None] = field(default_factory=list)

    def add(self, table: JsonObject, spent: float | None, replaced: float | None) -> None:
        calls, usage = table.get("calls"), table.get("usage")
        self.tasks += 1
        self.calls += calls if isinstance(calls, int) else 0
        self.usages.append(usage if isinstance(usage, dict) else {})
        self.usd.append(spent)
        self.replaced.append(replaced)

    def section(self) -> JsonObject:
        def total(values: list[float | None]) -> float | None:
            known = [v for v in values if v is not None]
            return math.fsum(known) if len(known) == len(values) else None

        return {
            "tasks": self.tasks,
            "calls": self.calls,
            "usage": sum_usage(self.usages),
            "usd": total(self.usd),
            "replaced_usd": total(self.replaced),
        }


def rejudged_cost(
    record: TaskRecord, judge: JsonObject, price: Price | None
) -> tuple[CostRecord | None, float | None]:
    """The record's cost with its judge part the new judging's at ``price`` (the model's
    part stays what the run spent), and the new judging's cost."""
    new = judge_cost(replace(record, judge=judge), price)
    old = record.cost
    if old is None and price is None:
        return None, new
    model = old.model_usd if old is not None else None
    cost = CostRecord(
        usd=None if model is None or new is None else model + new,
        model_usd=model,
        judge_usd=new,
        price=old.price if old is not None else None,
        saved_usd=old.saved_usd if old is not None else None,
        judge_price=price.source if price is not None else None,
    )
    return cost, new


def recorded_judge(settings: JsonValue, key: str) -> JudgeModel | None:
    """The judge a run's settings recorded under ``key`` (``judge``: the command line's,
    ``judge_ini``: the ini's); None when none was given or it cannot be read."""
    from pytest_agentbench.core.sampling import Sampling
    from pytest_agentbench.models.base import ModelSpec

    table = settings.get(key) if isinstance(settings, dict) else None
    if not isinstance(table, dict) or not isinstance(table.get("model"), str):
        return None
    sampling = table.get("sampling")
    base_url, key_env, max_tokens = (table.get(k) for k in ("base_url", "key_env", "max_tokens"))
    try:
        return JudgeModel(
            spec=ModelSpec.parse(str(table["model"])),
            base_url=base_url if isinstance(base_url, str) else None,
            key_env=key_env if isinstance(key_env, str) else None,
            sampling=Sampling.parse(sampling if isinstance(sampling, dict) else {}),
            max_tokens=max_tokens if isinstance(max_tokens, int) else JudgeModel().max_tokens,
            source="the rescored run's " + ("command line" if key == "judge" else "ini"),
        )
    except (AgentbenchError, ValueError):
        return None
