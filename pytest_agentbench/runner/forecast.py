"""The forecast of ``--agentbench-dry-run``: what a run would send and what it could
cost, per suite × model, before anything is sent.

For each task (one per item: every model and epoch is its own):

* requests: from one (every task right first time) to ``(1 + repairs) × calls`` (every
  repair used; ``calls`` is ``max_turns`` for an agent task, else 1), plus, for a task
  a judge grades, its judge calls: from ``samples`` (each answered usably at once) to
  ``(1 + repairs) × samples × 2`` (each attempt judged, each sample retried once with
  the problem shown). Pairwise comparisons, made once the run has finished, are not
  counted;
* prompt tokens: the characters of the system text and the rendered prompt, over 4
  (about a token per 4 characters of English; no tokenizer is used, none is needed);
* cost, low: every task right first time: one request, its prompt at the input price
  counted at 5 characters a token (below the usual tokenizers' counts), no output;
* cost, high: every repair used at ``max_tokens`` (else 16 384): each request's prompt
  at 3 characters a token (above them) at the dearest prompt price, growing by the
  previous answer and its feedback each round, and ``max_tokens`` of output each.

With ``--agentbench-batch`` the first request of a task the batch carries (a plain
answer's, an agent-mode task's first turn) is priced at its model's batch price at both
ends.

The judge's calls are priced apart, at the judge model's own price, their prompt being
the judge's instructions with the task's rubric, criteria and reference around the
answer (and the reply's JSON Schema, sent as structured output):

* low: ``samples`` calls, the answer empty, the prompt at 5 characters a token at the
  input price, no output;
* high: every attempt judged, each sample asked twice: the answer at the task's
  ``max_tokens`` (else 16 384) tokens, the rest at 3 characters a token at the dearest
  prompt price, the judge's ``max_tokens`` (1024 unless set) of output each; the retry's
  prompt also carries the first reply and its problem.

The real run's cost lies between the two unless a prompt tokenizes outside 3-5
characters a token or a task has no ``max_tokens`` and writes more than 16 384.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from pytest_agentbench.core.cost import PER, Price, money
from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.models.budget import DEFAULT_MAX_TOKENS
from pytest_agentbench.suites.task import Task
from pytest_agentbench.verifiers.judge_model import DEFAULT_MAX_TOKENS as JUDGE_MAX_TOKENS

#: Characters per token: the estimate shown, and the two ends of the cost range.
SHOWN_CHARS, LOW_CHARS, HIGH_CHARS = 4, 5, 3
#: Tokens a repair round adds to the prompt besides the previous answer (the feedback).
FEEDBACK_TOKENS = 512


@dataclass
class Forecast:
    """One suite × model: tasks, requests (least, most), prompt tokens (the first
    requests'), and the cost range (None when the model has no price)."""

    suite: str
    model: str
    tasks: int = 0
    requests_low: int = 0
    requests_high: int = 0
    repairs: int = 0
    agent_turns: int = 0
    judge_calls: int = 0
    judge_calls_high: int = 0
    prompt_tokens: int = 0
    low_usd: float | None = 0.0
    high_usd: float | None = 0.0
    #: the judge's calls' cost range, apart (0 with no judge; None: no judge price)
    judge_low_usd: float | None = 0.0
    judge_high_usd: float | None = 0.0

    def line(self) -> str:
        cost = cost_text(
            (self.low_usd, self.high_usd),
            (self.judge_low_usd, self.judge_high_usd) if self.judge_calls_high else None,
        )
        extra = f", agent turns up to {self.agent_turns}" if self.agent_turns else ""
        judge = str(self.judge_calls)
        if self.judge_calls_high != self.judge_calls:
            judge += f" to {self.judge_calls_high}"
        return (
            f"{self.suite} × {self.model}: {self.tasks} task(s) · requests {self.requests_low} "
            f"to {self.requests_high} (repairs up to {self.repairs}{extra}, judge calls "
            f"{judge}) · prompt ~{self.prompt_tokens:,} tokens (characters / "
            f"{SHOWN_CHARS}) · {cost}"
        )


def cost_text(
    model: tuple[float | None, float | None], judge: tuple[float | None, float | None] | None
) -> str:
    """``cost $A to $B``, with the model under test's and the judge's parts when a judge
    is called (``cost $A to $B (model under test $a to $b, judge $c to $d)``); not known
    when a part's price is not."""
    model_low, model_high = model
    known_model = model_low is not None and model_high is not None
    if judge is None:
        if not known_model:
            return "cost not known (no price: docs/cost.md)"
        return f"cost {range_text(model_low or 0.0, model_high or 0.0)}"
    judge_low, judge_high = judge
    known_judge = judge_low is not None and judge_high is not None
    parts = (
        "model under test "
        + (range_text(model_low or 0.0, model_high or 0.0) if known_model else "not known")
        + ", judge "
        + (range_text(judge_low or 0.0, judge_high or 0.0) if known_judge else "not known")
    )
    if not (known_model and known_judge):
        return f"cost not known (no price: docs/cost.md; {parts})"
    low = (model_low or 0.0) + (judge_low or 0.0)
    high = (model_high or 0.0) + (judge_high or 0.0)
    return f"cost {range_text(low, high)} ({parts})"


def range_text(low: float, high: float) -> str:
    """``$0.0003 to $0.0033``: the low end rounded down, the high end up, so the range
    shown holds the range computed."""
    return f"{money(_rounded(low, math.floor))} to {money(_rounded(high, math.ceil))}"


def _rounded(value: float, how: Callable[[float], int]) -> float:
    step = 100 if value >= 1 else 10_000  # money() shows cents from a dollar, else 1/100 ¢
    return how(value * step) / step


def _chars(task: Task) -> int:
    return len(task.system or "") + len(task.prompt)


def judge_calls(task: Task) -> tuple[int, int]:
    """The least and the most judge calls ``task`` makes (module docstring); (0, 0) when
    no judge grades it."""
    if task.verifier.kind != "judge":
        return 0, 0
    samples = task.verifier.options.get("samples", 1)
    count = samples if isinstance(samples, int) and not isinstance(samples, bool) else 1
    count = max(count, 1)
    return count, (1 + task.repairs) * count * 2


def batched(task: Task) -> bool:
    """Whether ``--agentbench-batch`` sends ``task``'s first request through the batch
    API: a plain-answer or agent-mode task (not an agent under test, not a control)."""
    return task.agent is None and task.control is None


def _rates(price: Price) -> tuple[float, float, float]:
    """The input rate, the dearest prompt rate and the output rate of ``price``."""
    rates = [r for r in (price.input, price.cache_read, price.cache_write) if r]
    return price.input or 0.0, max(rates, default=0.0), price.output or 0.0


def task_range(
    task: Task, price: Price | None, max_tokens: int | None, *, batch: bool = False
) -> tuple[float, float]:
    """The least and the most ``task`` can cost at ``price`` (module docstring); with
    ``batch`` its first request at the batch price (``Price.batched``)."""
    if price is None:
        return math.nan, math.nan
    chars = _chars(task)
    input_rate, prompt_rate, output_rate = _rates(price)
    first = _rates(price.batched()) if batch and batched(task) else None
    output = max_tokens or DEFAULT_MAX_TOKENS
    low = chars / LOW_CHARS * (first or (input_rate,))[0] / PER
    calls = task.max_turns if task.mode == "agent" else 1
    high = 0.0
    prompt = chars / HIGH_CHARS
    for index in range(1 + task.repairs):
        for turn in range(calls):
            at_first = first is not None and index == 0 and turn == 0
            _, p_rate, o_rate = first if first and at_first else (0.0, prompt_rate, output_rate)
            high += (prompt * p_rate + output * o_rate) / PER
            prompt += output  # the next call carries this one's answer (or tool turn)
        prompt += FEEDBACK_TOKENS
    return low, high


@dataclass(frozen=True)
class JudgePlan:
    """The judge that grades a task, as the forecast prices it: its price (None: not
    known) and its ``max_tokens``."""

    price: Price | None
    max_tokens: int = JUDGE_MAX_TOKENS


def _judge_prompt_chars(task: Task) -> tuple[int, int]:
    """The characters of a judge request's prompt with the answer empty: without and
    with the reply's JSON Schema (sent as structured output where the protocol has it)."""
    import json

    from pytest_agentbench.verifiers.judge import reference_of, rubric_of
    from pytest_agentbench.verifiers.judge_prompt import Rubric, messages, reply_schema

    try:
        rubric = rubric_of(task)
    except ValueError:  # (a collection error already): its raw text
        rubric = Rubric(str(task.verifier.options.get("rubric", "")), ())
    system, user = messages(rubric, task.input, "", reference_of(task))
    chars = len(system) + len(user)
    return chars, chars + len(json.dumps(reply_schema(rubric)))


def judge_range(
    task: Task, judge: JudgePlan, max_tokens: int | None
) -> tuple[float | None, float | None]:
    """The least and the most the judge's calls on ``task`` can cost (module docstring);
    (0, 0) when no judge grades it, (None, None) when the judge has no price."""
    low_calls, _ = judge_calls(task)
    if not low_calls:
        return 0.0, 0.0
    price = judge.price
    if price is None:
        return None, None
    bare, with_schema = _judge_prompt_chars(task)
    rates = [r for r in (price.input, price.cache_read, price.cache_write) if r]
    prompt_rate, output_rate = max(rates, default=0.0), price.output or 0.0
    low = low_calls * bare / LOW_CHARS * (price.input or 0.0) / PER
    answer = max_tokens or DEFAULT_MAX_TOKENS
    output = judge.max_tokens
    first = with_schema / HIGH_CHARS + answer
    retry = first + output + FEEDBACK_TOKENS  # the first reply and its problem
    per_sample = (first + retry) * prompt_rate + 2 * output * output_rate
    samples = low_calls
    high = (1 + task.repairs) * samples * per_sample / PER
    return low, high


def forecast(
    tasks: Iterable[tuple[Task, Price | None, int | None, JudgePlan | None]],
    *,
    batch: bool = False,
) -> list[Forecast]:
    """Per suite × model, in the order first seen: each task with its model's price,
    its ``max_tokens`` (the run's, else the task's) and, for a judged task, its judge;
    ``batch``: --agentbench-batch (the first requests at the batch price)."""
    found: dict[tuple[str, str], Forecast] = {}
    for task, price, max_tokens, judge in tasks:
        model = task.model or "scripted"
        group = found.setdefault((task.suite, model), Forecast(task.suite, model))
        calls = task.max_turns if task.mode == "agent" else 1
        judge_low, judge_high = judge_calls(task)
        group.tasks += 1
        group.requests_low += 1 + judge_low
        group.requests_high += (1 + task.repairs) * calls + judge_high
        group.judge_calls += judge_low
        group.judge_calls_high += judge_high
        group.repairs = max(group.repairs, task.repairs)
        if task.mode == "agent":
            group.agent_turns = max(group.agent_turns, task.max_turns)
        group.prompt_tokens += math.ceil(_chars(task) / SHOWN_CHARS)
        low, high = task_range(task, price, max_tokens, batch=batch)
        if math.isnan(low) or group.low_usd is None or group.high_usd is None:
            group.low_usd = group.high_usd = None
        else:
            group.low_usd += low
            group.high_usd += high
        if judge_low:
            j_low, j_high = judge_range(task, judge or JudgePlan(None), max_tokens)
            if j_low is None or j_high is None or group.judge_low_usd is None:
                group.judge_low_usd = group.judge_high_usd = None
            else:
                group.judge_low_usd += j_low
                group.judge_high_usd = (group.judge_high_usd or 0.0) + j_high
    return list(found.values())


def forecast_lines(groups: list[Forecast]) -> list[str]:
    """The dry run's report: one line per suite × model, then the whole run's."""
    lines = ["dry run: nothing was sent; what the run would send and could cost:"]
    lines += [f"  {group.line()}" for group in groups]
    known = [g for g in groups if g.low_usd is not None and g.high_usd is not None]
    known = [g for g in known if g.judge_low_usd is not None and g.judge_high_usd is not None]
    low = math.fsum(g.low_usd or 0.0 for g in known)
    high = math.fsum(g.high_usd or 0.0 for g in known)
    judge_low = math.fsum(g.judge_low_usd or 0.0 for g in known)
    judge_high = math.fsum(g.judge_high_usd or 0.0 for g in known)
    unknown = len(groups) - len(known)
    judged = any(g.judge_calls_high for g in known)
    if not known:
        total = "cost not known"
    elif judged:
        total = cost_text((low, high), (judge_low, judge_high))
    else:
        total = f"cost {range_text(low, high)}"
    if unknown and known:
        total += f" (not known for {unknown} group(s))"
    lines.append(
        f"whole run: {sum(g.tasks for g in groups)} task(s) · requests "
        f"{sum(g.requests_low for g in groups)} to {sum(g.requests_high for g in groups)} · "
        f"{total}"
    )
    return lines
