"""Money: a model's price per million tokens, what a usage costs at it, and the cost a
task record carries.

A price is per million tokens for each kind the providers bill apart: ``input`` (the
uncached prompt), ``output`` (the answer, reasoning included: OpenAI and Anthropic both
bill reasoning and thinking tokens as output, and both count them in the output total
our normalised ``Usage.output`` holds), ``cache_read`` and ``cache_write``. A kind with
no price is None: usage of that kind then has an unknown cost, never a cost of 0.

An unknown cost is None everywhere (a record's, a run's): a sum with an unknown term is
reported with how many terms were unknown, never as if they cost nothing.
"""

from __future__ import annotations

import math

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject
from pytest_agentbench.core.record_parts import (
    json_object,
    maybe_number,
    maybe_str,
    nullable_number,
)
from pytest_agentbench.core.usage import Usage

PER = 1_000_000
#: The price kinds, in the order files and reports name them.
PRICE_KINDS = ("input", "output", "cache_read", "cache_write")
#: What a request answered by a provider's batch API costs, as a share of its price:
#: OpenAI's Batch API and Anthropic's Message Batches both bill every kind (cache reads
#: and writes included) at half the price.
BATCH_FACTOR = 0.5


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens of each kind (None: not known), and where it came from
    (``source``: the built-in table's entry and its date, the user's price file, the
    models list, ...)."""

    input: float | None
    output: float | None
    cache_read: float | None = None
    cache_write: float | None = None
    source: str = ""
    #: the price of a request answered by the provider's batch API, when its entry sets
    #: one; None: ``BATCH_FACTOR`` of this price (``batched``)
    batch: Price | None = None

    def batched(self) -> Price:
        """The price of a request the provider's batch API answered."""
        if self.batch is not None:
            return self.batch
        return self.share(BATCH_FACTOR)

    def share(self, part: float) -> Price:
        """``part`` of every kind of this price (a batch price: ``batch: 0.5 of it``)."""

        def times(rate: float | None) -> float | None:
            return None if rate is None else rate * part

        return Price(
            input=times(self.input),
            output=times(self.output),
            cache_read=times(self.cache_read),
            cache_write=times(self.cache_write),
            source=f"{self.source} (batch: {part:g} of it)",
        )

    def of(self, kind: str) -> float | None:
        value: float | None = getattr(self, kind)
        return value

    def to_json(self) -> JsonObject:
        return {
            "input": self.input,
            "output": self.output,
            "cache_read": self.cache_read,
            "cache_write": self.cache_write,
            "source": self.source,
        }

    @property
    def free(self) -> bool:
        """Input and output priced at 0 and no cache price above it: a local server the
        user said costs nothing (its cache reads, which llama.cpp and vLLM report, then
        cost nothing either)."""
        return self.input == 0 and self.output == 0 and not self.cache_read and not self.cache_write


def usage_cost(usage: Usage, price: Price | None) -> float | None:
    """What ``usage`` costs at ``price`` in USD; None when it cannot be known: no price,
    no input or output count, or tokens of a kind the price does not cover. A cache
    count nobody reported counts as none (the provider then billed those tokens inside
    ``input``, as our normalisation keeps them)."""
    if price is None:
        return None
    if price.free:
        return 0.0
    if usage.input is None or usage.output is None:
        return None
    total = 0.0
    for kind in PRICE_KINDS:
        tokens = usage.get(kind) or 0
        if tokens == 0:
            continue
        rate = price.of(kind)
        if rate is None:
            return None
        total += tokens * rate
    return total / PER


def money(value: float | None) -> str:
    """``$1.2345`` (four decimals under a dollar, two above), ``not known`` for None."""
    if value is None or not math.isfinite(value):
        return "not known"
    if abs(value) >= 1:
        return f"${value:,.2f}"
    return f"${value:.4f}"


@dataclass(frozen=True, slots=True)
class CostRecord:
    """What a task cost, as its record carries it. ``usd`` is the whole: the model under
    test (``model_usd``) plus its judges (``judge_usd``, None when no judge graded it);
    None when a part is not known. ``price`` says where the model's price came from
    (None: no price known). ``saved_usd`` is what the requests replayed from the response
    cache would have cost (None when none was replayed). ``judge_price`` says where the
    judge model's price came from (None: no judge, or its price is not known)."""

    usd: float | None
    model_usd: float | None
    judge_usd: float | None = None
    price: str | None = None
    saved_usd: float | None = None
    judge_price: str | None = None
    #: what the requests answered by the batch API saved against their live price (None
    #: when none was batched)
    batch_saved_usd: float | None = None

    def to_json(self) -> JsonObject:
        data: JsonObject = {
            "usd": self.usd,
            "model_usd": self.model_usd,
            "judge_usd": self.judge_usd,
            "price": self.price,
            "saved_usd": self.saved_usd,
            "judge_price": self.judge_price,
        }
        if self.batch_saved_usd is not None:
            data["batch_saved_usd"] = self.batch_saved_usd
        return data

    @classmethod
    def from_json(cls, data: object, where: str = "cost") -> CostRecord:
        obj = json_object(data, where)
        return cls(
            usd=nullable_number(obj, "usd", where),
            model_usd=nullable_number(obj, "model_usd", where),
            judge_usd=maybe_number(obj, "judge_usd", where),
            price=maybe_str(obj, "price", where),
            saved_usd=maybe_number(obj, "saved_usd", where),
            judge_price=maybe_str(obj, "judge_price", where),
            batch_saved_usd=maybe_number(obj, "batch_saved_usd", where),
        )


def task_cost(
    usage: Usage,
    price: Price | None,
    *,
    judge_usd: float | None = None,
    judged: bool = False,
    judge_price: str | None = None,
    cached_usage: Usage | None = None,
    batch_usage: Usage | None = None,
) -> CostRecord:
    """The cost of a task whose model used ``usage`` (all its requests) at ``price``.
    ``cached_usage`` is the part of it replayed from the response cache: not paid for,
    counted as saved. ``judged`` with ``judge_usd`` adds the judge's cost: ``usd`` is
    the model's plus the judge's when both are known, and None (not known) when either
    is not, so a whole is never reported without one of its parts. ``judge_price`` says
    where the judge's price came from. ``batch_usage`` is the part the provider's batch
    API answered: paid at ``price.batched()``; ``batch_saved_usd`` says what that saved."""
    whole = usage_cost(usage, price)
    saved = usage_cost(cached_usage, price) if cached_usage is not None else None
    model = whole
    if whole is not None and cached_usage is not None:
        model = None if saved is None else max(0.0, whole - saved)
    batch_saved = None
    if batch_usage is not None and price is not None:
        live = usage_cost(batch_usage, price)
        paid = usage_cost(batch_usage, price.batched())
        batch_saved = None if live is None or paid is None else max(0.0, live - paid)
        if model is not None:
            model = None if batch_saved is None else max(0.0, model - batch_saved)
    judge = judge_usd if judged else None
    usd = model
    if judged:  # the judges' place (issue 26): a judge with an unknown cost makes it unknown
        usd = None if model is None or judge is None else model + judge
    return CostRecord(
        usd=usd,
        model_usd=model,
        judge_usd=judge,
        price=price.source if price is not None else None,
        saved_usd=saved,
        judge_price=judge_price if judged else None,
        batch_saved_usd=batch_saved,
    )
