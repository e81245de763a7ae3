"""The run's spending cap (``--agentbench-max-cost USD``): a ledger every process of the
run shares, and the client wrapper that asks it before each request.

Before a request is sent, its worst case is reserved: the estimated prompt at the
dearest prompt price of the model (input, cache read or cache write) plus ``max_tokens``
at the output price. When the run's spend plus the reservations in flight plus this
one would pass the cap, the request is not sent (``BudgetExhausted``), and from then on
nothing more is: the ledger is stopped for the rest of the run. When the reply comes,
its reservation is replaced by what it cost (its usage at the price); a reply whose
usage is not known is charged its whole worst case, a request the provider refused with
an HTTP error and no reply is charged nothing.

The ledger is one small file (``spent``, ``reserved``, ``stopped``) in a folder the
xdist controller shares with its workers, read and written under an exclusive
``flock``: the cap holds for the whole run, every worker together. It lives as long as
the run; a resumed run starts a new one (what the earlier session spent is not counted
again, and the tasks it finished are not sent again).
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import struct
from collections.abc import Callable, Mapping
from pathlib import Path

from pytest_agentbench.core.cost import Price, money, usage_cost
from pytest_agentbench.core.jsontypes import JsonValue
from pytest_agentbench.errors import BudgetExhausted, ModelError
from pytest_agentbench.models.base import EventSink, Generation, ModelClient, ModelRequest

#: Characters per token assumed for the prompt's worst case: English prose runs near 4,
#: code and other scripts lower; 3 keeps the estimate above the usual tokenizers' counts.
CHARS_PER_TOKEN = 3
#: The output a request without max_tokens is assumed to reach, for its worst case.
DEFAULT_MAX_TOKENS = 16_384
_STATE = struct.Struct("<ddB")


def prompt_chars(request: ModelRequest) -> int:
    """The characters of everything the request sends as its prompt: the system text,
    the messages and the tools' schemas (as JSON)."""
    size = len(request.system or "")
    for message in request.messages:
        size += len(json.dumps(dict(message), ensure_ascii=False, default=str))
    for tool in request.tools:
        parameters: Mapping[str, JsonValue] = tool.parameters
        size += len(tool.name) + len(tool.description) + len(json.dumps(dict(parameters)))
    return size


def estimated_prompt_tokens(request: ModelRequest) -> int:
    """A deliberately high estimate of the request's prompt tokens (characters / 3)."""
    return math.ceil(prompt_chars(request) / CHARS_PER_TOKEN)


def worst_case(request: ModelRequest, price: Price) -> float:
    """The most the request can cost in USD: the estimated prompt at the dearest prompt
    price, ``max_tokens`` (else DEFAULT_MAX_TOKENS) at the output price."""
    rates = [rate for rate in (price.input, price.cache_read, price.cache_write) if rate]
    prompt_rate = max(rates, default=0.0)
    output_rate = price.output or 0.0
    output = request.max_tokens or DEFAULT_MAX_TOKENS
    return (estimated_prompt_tokens(request) * prompt_rate + output * output_rate) / 1_000_000


class BudgetLedger:
    """The run's spend and reservations, in the file ``path`` (made when missing),
    shared by every process that opens it."""

    def __init__(self, path: Path, cap: float) -> None:
        self.path = path
        self.cap = cap
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        os.close(fd)

    def _update(self, change: float, spent: float = 0.0, reserve: float = 0.0) -> bool:
        """Under the lock: release ``change`` of reservations and add ``spent``; then
        reserve ``reserve`` unless that could pass the cap (which stops the ledger).
        Whether the reservation was made (True when none was asked)."""
        fd = os.open(self.path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            raw = os.pread(fd, _STATE.size, 0)
            total, reserved, stopped = (
                _STATE.unpack(raw) if len(raw) == _STATE.size else (0.0, 0.0, 0)
            )
            total += spent
            reserved = max(0.0, reserved - change)
            granted = True
            if reserve > 0:
                if stopped or total + reserved + reserve > self.cap:
                    stopped, granted = 1, False
                else:
                    reserved += reserve
            os.pwrite(fd, _STATE.pack(total, reserved, stopped), 0)
            return granted
        finally:
            os.close(fd)  # closing releases the lock

    def reserve(self, amount: float) -> bool:
        """Reserve ``amount`` USD for a request about to be sent; False (and the ledger
        stopped) when it could pass the cap."""
        return self._update(0.0, reserve=amount)

    def settle(self, reserved: float, cost: float) -> None:
        """A request's reservation ``reserved`` is over; it cost ``cost``."""
        self._update(reserved, spent=cost)

    def state(self) -> tuple[float, float, bool]:
        """(spent, reserved, stopped) as the file holds them now."""
        try:
            raw = self.path.read_bytes()[: _STATE.size]
        except OSError:
            return 0.0, 0.0, False
        if len(raw) != _STATE.size:
            return 0.0, 0.0, False
        spent, reserved, stopped = _STATE.unpack(raw)
        return spent, reserved, bool(stopped)


def _replayed(generation: Generation) -> bool:
    """Whether the reply was replayed, not sent: from the response cache (free), or from
    the run's batch store (charged when its batch was submitted, session/batch.py)."""
    reply = generation.exchange.get("response")
    return isinstance(reply, dict) and (reply.get("cached") is True or reply.get("batch") is True)


class BudgetClient:
    """A client that sends a request only when the ledger grants its worst case, and
    charges it what it cost (module docstring)."""

    def __init__(
        self,
        inner: ModelClient,
        ledger: BudgetLedger,
        price: Price,
        replays: Callable[[ModelRequest], bool] | None = None,
    ) -> None:
        self.inner = inner
        self.spec = inner.spec
        self.ledger = ledger
        self.price = price
        self.replays = replays

    def generate(self, request: ModelRequest, on_event: EventSink | None = None) -> Generation:
        if self.replays is not None and self.replays(request):
            # the response cache holds its reply: nothing is sent, nothing reserved (an
            # entry that turns out unreadable is sent after all, and charged)
            generation = self.inner.generate(request, on_event)
            if not _replayed(generation):
                known = usage_cost(generation.usage, self.price)
                self.ledger.settle(0.0, worst_case(request, self.price) if known is None else known)
            return generation
        worst = worst_case(request, self.price)
        if not self.ledger.reserve(worst):
            spent, _, _ = self.ledger.state()
            raise BudgetExhausted(
                f"{self.spec.label}: not sent: the run's --agentbench-max-cost "
                f"{money(self.ledger.cap)} would be passed ({money(spent)} spent, this "
                f"request up to {money(worst)}); --agentbench-resume finishes the run later",
                endpoint="",
            )
        cost = worst
        try:
            generation = self.inner.generate(request, on_event)
        except ModelError as exc:
            refused = exc.partial is None and exc.status is not None
            cost = 0.0 if refused else worst
            raise
        else:
            known = usage_cost(generation.usage, self.price)
            cost = worst if known is None else known
            if _replayed(generation):
                cost = 0.0  # replayed from the response cache or the batch: not sent now
            return generation
        finally:
            self.ledger.settle(worst, cost)

    def close(self) -> None:
        self.inner.close()
