"""The judge's model calls for one answer: a sample called, and once more with its
problem shown when the reply cannot be used; a server that refuses structured output
asked again without it; each call recorded as ``judge.json`` keeps it. What the calls
add up to (the verdict, the summary, the file) is ``judge.py``'s and
``judge_record.py``'s."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import field

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.sampling import Sampling
from pytest_agentbench.errors import BudgetExhausted, ProviderError
from pytest_agentbench.models.base import (
    REQUEST_CALL,
    REQUEST_TASK,
    Generation,
    ModelClient,
    ModelRequest,
)
from pytest_agentbench.verifiers.base import Check, out_of_time
from pytest_agentbench.verifiers.judge_model import JudgeModel
from pytest_agentbench.verifiers.judge_prompt import (
    RETRY_TEMPLATE,
    Parsed,
    Rubric,
    parse_reply,
    reply_schema,
)


@dataclass
class Calls:
    """The judge calls of one verification, as judge.json records them."""

    records: list[JsonObject] = field(default_factory=list)
    usages: list[JsonObject] = field(default_factory=list)
    elapsed_s: float = 0.0


def _out_of_time(model: JudgeModel, limit_s: float | None) -> str:
    return out_of_time(limit_s, model.spec.label)


def judge_sample(
    client: ModelClient,
    model: JudgeModel,
    rubric: Rubric,
    check: Check,
    system: str,
    user: str,
    sampling: Sampling,
    script_key: str | None,
    turn: int,
    sample: int,
    calls: Calls,
    limit_s: float | None,
) -> tuple[Parsed | None, int, str | None]:
    """One judged sample: a call, and once more with the problem shown when the
    reply cannot be used. (parsed, next turn, None) or (None, next turn, error);
    ``limit_s`` is the judge's time limit, named when the deadline passes."""
    conversation: list[Mapping[str, JsonValue]] = [{"role": "user", "content": user}]
    problem = ""
    schema: JsonObject | None = reply_schema(rubric)
    for attempt in range(2):
        metadata = {} if script_key is None else {REQUEST_TASK: script_key, REQUEST_CALL: str(turn)}
        turn += 1
        timeout = None
        if check.deadline is not None:
            timeout = check.deadline - time.monotonic()
            if timeout <= 0:
                return None, turn, _out_of_time(model, limit_s)
        request = ModelRequest(
            messages=tuple(conversation),
            system=system,
            max_tokens=model.max_tokens,
            sampling=sampling,
            timeout_s=timeout,
            stream=True,
            metadata=metadata,
            response_schema=schema,
        )
        started = time.monotonic()
        sink = check.watch() if check.watch is not None else None
        try:
            try:
                generation = client.generate(request, sink)
            except ProviderError as exc:
                if schema is None or not _refuses_structured_output(exc):
                    raise
                # a server without the protocol's structured output (llama-cpp-python
                # takes only json_object): the instructions ask for the JSON anyway
                schema = None
                request = dataclasses.replace(request, response_schema=None)
                sink = check.watch() if check.watch is not None else None
                generation = client.generate(request, sink)
        except BudgetExhausted:  # not sent (the run's cap): the task was not fully run
            raise
        except Exception as exc:  # the judge's model failed: never the model's failure
            calls.elapsed_s += time.monotonic() - started
            calls.records.append(
                _call_record(sample, attempt, conversation, None, str(exc), sampling.seed)
            )
            if check.deadline is not None and time.monotonic() >= check.deadline:
                return None, turn, _out_of_time(model, limit_s)
            return None, turn, f"judge {model.spec.label} failed: {type(exc).__name__}: {exc}"
        calls.elapsed_s += time.monotonic() - started
        calls.usages.append(generation.usage.as_dict())
        try:
            if generation.finish_reason == "length":
                raise ValueError(f"it was cut at the token limit (max_tokens {model.max_tokens})")
            parsed = parse_reply(rubric, generation.text)
        except ValueError as exc:
            problem = str(exc)
            calls.records.append(
                _call_record(sample, attempt, conversation, generation, problem, sampling.seed)
            )
            conversation = [
                *conversation,
                {"role": "assistant", "content": generation.text},
                {"role": "user", "content": RETRY_TEMPLATE.format(problem=problem)},
            ]
            continue
        calls.records.append(
            _call_record(sample, attempt, conversation, generation, None, sampling.seed)
        )
        return parsed, turn, None
    return (
        None,
        turn,
        f"judge {model.spec.label} gave no usable verdict after a retry: {problem}",
    )


def _refuses_structured_output(error: ProviderError) -> bool:
    """Whether a provider's 4xx/5xx refused the structured-output field itself."""
    text = str(error)
    return error.status is not None and ("response_format" in text or "text.format" in text)


def _call_record(
    sample: int,
    attempt: int,
    conversation: Sequence[Mapping[str, JsonValue]],
    generation: Generation | None,
    problem: str | None,
    seed: int | None = None,
) -> JsonObject:
    """One judge call in judge.json: the messages sent (the system prompt is recorded
    once), the raw reply, its usage and what was wrong with it."""
    sent: list[JsonValue] = [dict(message) for message in conversation]
    return {
        "sample": sample,
        "try": attempt,
        "seed": seed,
        "sent": sent,
        "reply": None if generation is None else generation.text,
        "finish_reason": None if generation is None else generation.finish_reason,
        "usage": None if generation is None else generation.usage.as_dict(),
        "elapsed_s": None if generation is None else round(generation.elapsed_s, 6),
        "problem": problem,
    }
