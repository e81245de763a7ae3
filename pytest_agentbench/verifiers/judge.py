"""The ``judge`` verifier: a model grades the answer against a rubric.

The judge model is called through the same clients as the model under test (the run
hands the verifier a ``JudgeRuntime`` that makes them). Its reply must be one JSON
object on the rubric's scale (asked for through the protocol's structured output where
it has one); a reply that cannot be used is shown its problem and asked once more, then
the task is a harness error of its own kind (``judge_error``), never the model's
failure. What the judge was sent, its raw replies and the parsed verdict with its
rationale are written to ``verifier/judge.json``.

With the scripted provider as judge, the suite writes the judge's replies
(``scripted_judge``: rules matched against the answer or the control), so judged
suites run offline.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.sampling import Sampling
from pytest_agentbench.core.usage import sum_usage
from pytest_agentbench.errors import AgentbenchError, BudgetExhausted, ProviderError
from pytest_agentbench.models.base import (
    REQUEST_CALL,
    REQUEST_TASK,
    Generation,
    ModelClient,
    ModelRequest,
)
from pytest_agentbench.suites.task import Task
from pytest_agentbench.verifiers.base import (
    Check,
    ConfigProblem,
    JudgeError,
    Verdict,
    out_of_time,
)
from pytest_agentbench.verifiers.judge_model import (
    DEFAULT_TIMEOUT_S,
    JUDGE_TABLE_SCHEMA,
    JudgeModel,
    judge_from_table,
    table_timeout_s,
)
from pytest_agentbench.verifiers.judge_prompt import (
    PASS_FAIL,
    RETRY_TEMPLATE,
    TEMPLATE_HASH,
    Parsed,
    Rubric,
    criteria_of,
    messages,
    parse_reply,
    reply_schema,
)
from pytest_agentbench.verifiers.judge_script import (
    RULE_SCHEMA,
    ScriptEntry,
    matching_rule,
    replies_of,
    rules_of,
)

JUDGE_FILE = "judge.json"
JUDGE_FILE_VERSION = 1
#: How much of the answer the verdict's details keep.
GOT_CHARS = 500

OPTIONS_SCHEMA: JsonObject = {
    "type": "object",
    "properties": {
        "rubric": {
            "type": "string",
            "minLength": 1,
            "description": "what a good answer does; template fields ({input}, {target}, "
            "the task's vars) are filled in",
        },
        "criteria": {
            "description": "named criteria, each graded on its own; the reward is their "
            "weighted mean",
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "pattern": "^[A-Za-z][A-Za-z0-9_-]{0,39}$"},
                    "description": {"type": "string", "minLength": 1},
                    "weight": {"type": "number", "exclusiveMinimum": 0},
                },
                "required": ["name", "description"],
                "additionalProperties": False,
            },
        },
        "scale": {
            "description": "pass_fail, or N: scores 1 to N mapped to (score - 1) / (N - 1)",
            "anyOf": [{"const": PASS_FAIL}, {"type": "integer", "minimum": 2, "maximum": 100}],
        },
        "reference": {
            "type": "boolean",
            "description": "send the task's target to the judge as a reference answer",
        },
        "judge": {
            **JUDGE_TABLE_SCHEMA,
            "description": "the judge model: model, base_url, key_env, sampling, max_tokens",
        },
        "samples": {
            "type": "integer",
            "minimum": 1,
            "maximum": 25,
            "description": "judge calls per answer, each with its own seed",
        },
        "combine": {
            "enum": ["majority", "mean"],
            "description": "how samples become one verdict",
        },
        "scripted_judge": {
            "type": "array",
            "minItems": 1,
            "items": RULE_SCHEMA,
            "description": "the scripted judge's replies: rules matched against the answer",
        },
        "labels": {
            "type": "string",
            "minLength": 1,
            "description": "a labels file beside the suite, to calibrate the judge with",
        },
        "mode": {
            "enum": ["pointwise", "pairwise"],
            "description": "pairwise: also compare models' answers in both orders",
        },
    },
    "additionalProperties": False,
}


@dataclass
class JudgeRuntime:
    """What the run gives the judge verifier: ``connect`` makes (once per judge) the
    client to call and the bare client under its retries (the scripted one registers
    replies there); ``override`` is the command line's judge (it beats every suite),
    ``fallback`` the ini's (a suite's or task's ``judge`` table beats it). The judge's
    time limit follows the same order: ``timeout_s`` (the command line's), the table's
    ``timeout_s``, ``timeout_ini_s``, else DEFAULT_TIMEOUT_S."""

    connect: Callable[[JudgeModel], tuple[ModelClient, ModelClient]]
    override: JudgeModel | None = None
    fallback: JudgeModel | None = None
    timeout_s: float | None = None
    timeout_ini_s: float | None = None

    def time_limit_s(self, options: Mapping[str, JsonValue]) -> float:
        """How long the judge may take to grade one answer (see the class docstring)."""
        for found in (self.timeout_s, table_timeout_s(options), self.timeout_ini_s):
            if found is not None:
                return found
        return DEFAULT_TIMEOUT_S

    def model_for(self, options: Mapping[str, JsonValue]) -> JudgeModel:
        if self.override is not None:
            return self.override
        table = options.get("judge")
        if isinstance(table, Mapping):
            try:
                return judge_from_table(table, "suite")
            except ValueError as exc:
                raise JudgeError(f"judge: {exc}") from None
        return self.fallback if self.fallback is not None else JudgeModel()


def _out_of_time(model: JudgeModel, limit_s: float | None) -> str:
    return out_of_time(limit_s, model.spec.label)


def rubric_of(task: Task) -> Rubric:
    """The task's rubric, its template fields (``{input}``, ``{target}``, the task's
    vars) filled; ValueError for a field the task does not have."""
    options = task.verifier.options
    raw = options.get("rubric")
    criteria = criteria_of(options.get("criteria"))
    text = str(raw) if isinstance(raw, str) else "Grade each criterion below."
    fields: dict[str, object] = {"input": task.input, "target": _text(task.target)}
    fields.update({k: _text(v) for k, v in task.vars.items()})
    try:
        text = text.format(**fields)
    except (KeyError, IndexError) as exc:
        raise ValueError(f"template field {exc} is not a field of this task") from None
    except ValueError as exc:
        raise ValueError(f"is not a valid template: {exc}") from None
    scale = options.get("scale", PASS_FAIL)
    return Rubric(text, criteria, scale if isinstance(scale, int) else PASS_FAIL)


def _text(value: JsonValue) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def reference_of(task: Task) -> str | None:
    """The reference answer sent to the judge: the task's target unless
    ``reference = false`` (or there is none)."""
    if task.verifier.options.get("reference", True) is False or task.target is None:
        return None
    return _text(task.target)


@dataclass
class _Calls:
    """The judge calls of one verification, as judge.json records them."""

    records: list[JsonObject] = field(default_factory=list)
    usages: list[JsonObject] = field(default_factory=list)
    elapsed_s: float = 0.0


@dataclass(frozen=True)
class JudgeVerifier:
    """The ``judge`` verifier; ``runtime`` is set by the run (``bind``)."""

    runtime: JudgeRuntime | None = None
    kind: str = "judge"
    options_schema: JsonObject = field(default_factory=lambda: OPTIONS_SCHEMA)

    def bind(self, runtime: JudgeRuntime) -> JudgeVerifier:
        return JudgeVerifier(runtime, self.kind, self.options_schema)

    def time_limit_s(self, options: Mapping[str, JsonValue]) -> float | None:
        """The judge's own time limit for one answer (verifiers.base.OwnTimeLimit): the
        rollout bounds the verification by it, not by the task's deadline."""
        return self.runtime.time_limit_s(options) if self.runtime is not None else None

    def check_task(self, task: Task) -> Iterable[ConfigProblem]:
        options = task.verifier.options
        if "rubric" not in options and "criteria" not in options:
            yield ConfigProblem((), "judge verifier: give a rubric (text) or criteria")
            return
        try:
            rubric_of(task)
        except ValueError as exc:
            yield ConfigProblem(("options", "rubric"), f"judge verifier: the rubric {exc}")
        table = options.get("judge")
        if isinstance(table, Mapping):
            try:
                judge_from_table(table, "suite")
            except ValueError as exc:
                yield ConfigProblem(("options", "judge"), f"judge verifier: {exc}")
        from pytest_agentbench.scripted.script import Reply

        for index, rule in enumerate(rules_of(options)):
            for turn, reply in enumerate(replies_of(rule)):
                try:
                    Reply.parse(reply, f"scripted_judge[{index}].reply[{turn}]")
                except ValueError as exc:
                    yield ConfigProblem(("options", "scripted_judge"), f"judge verifier: {exc}")

    def verify(self, check: Check) -> Verdict:
        runtime = self.runtime
        if runtime is None:
            raise JudgeError("the judge verifier needs a run's judge (it was not bound to one)")
        task = check.task
        model = runtime.model_for(check.options)
        try:
            rubric = rubric_of(task)
        except ValueError as exc:
            raise JudgeError(f"judge: the rubric {exc}") from None
        reference = reference_of(task)
        options = check.options
        samples = options.get("samples", 1)
        count = samples if isinstance(samples, int) and samples > 0 else 1
        combine = str(options.get("combine", "majority"))
        client, bare = runtime.connect(model)
        script_key = None
        if model.scripted:
            script_key = self._register_script(bare, task, check.answer)
        calls = _Calls()
        parsed: list[Parsed] = []
        error: str | None = None
        system, user = messages(rubric, task.input, check.answer, reference)
        turn = 0
        for sample in range(count):
            seed = model.sampling.seed
            if count > 1:
                seed = (seed or 0) + sample
            sampling = (
                Sampling(seed=seed).over(model.sampling) if seed is not None else model.sampling
            )
            found, turn, error = self._sample(
                client,
                model,
                rubric,
                check,
                system,
                user,
                sampling,
                script_key,
                turn,
                sample,
                calls,
            )
            if found is None:
                break
            parsed.append(found)
        summary = self._summary(model, rubric, calls, count, parsed, combine, error)
        self._write(check, model, rubric, reference, system, calls, parsed, summary)
        if error is not None or not parsed:
            raise JudgeError(error or "judge: no verdict", record=summary)
        reward, score, agreement = combined(rubric, parsed, combine)
        rationale = (
            parsed[0].rationale if len(parsed) == 1 else " | ".join(p.rationale for p in parsed)
        )
        metrics: dict[str, float] = {}
        if rubric.criteria and len(parsed) == 1 and isinstance(score, dict):
            for name, value in score.items():
                if isinstance(value, str | int):
                    metrics[name] = rubric.mapped(value)
        if count > 1:
            metrics["agreement"] = agreement
        details: JsonObject = {
            "got": check.answer[:GOT_CHARS],
            "extraction": "judge",
            "score": score,
            "rationale": rationale,
            "judge": summary,
        }
        passed = reward >= task.pass_threshold  # a passed answer needs no repair feedback
        feedback = "" if passed else _feedback(rubric, score, rationale, reference)
        return Verdict(reward, metrics, details, feedback=feedback)

    def _register_script(self, bare: ModelClient, task: Task, answer: str) -> str:
        from pytest_agentbench.models.scripted import register_scripts

        index = matching_rule(task, answer)
        if index is None:
            control = f" (control {task.control.name!r})" if task.control is not None else ""
            raise JudgeError(
                f"scripted judge: no scripted_judge rule of task {task.id!r} matches this "
                f"answer{control}; add a rule (control, answer or includes, and reply) or "
                "a last rule with no condition"
            )
        key = f"judge::{task.path.as_posix()}::{task.id}::rule{index}"
        replies = replies_of(rules_of(task.verifier.options)[index])
        try:
            register_scripts(bare, [ScriptEntry(key, task.id, task.path, replies)])
        except AgentbenchError as exc:
            raise JudgeError(f"scripted judge: {exc}") from None
        return key

    def _sample(
        self,
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
        calls: _Calls,
    ) -> tuple[Parsed | None, int, str | None]:
        """One judged sample: a call, and once more with the problem shown when the
        reply cannot be used. (parsed, next turn, None) or (None, next turn, error)."""
        conversation: list[Mapping[str, JsonValue]] = [{"role": "user", "content": user}]
        problem = ""
        schema: JsonObject | None = reply_schema(rubric)
        for attempt in range(2):
            metadata = (
                {} if script_key is None else {REQUEST_TASK: script_key, REQUEST_CALL: str(turn)}
            )
            turn += 1
            timeout = None
            if check.deadline is not None:
                timeout = check.deadline - time.monotonic()
                if timeout <= 0:
                    return None, turn, _out_of_time(model, self.time_limit_s(check.options))
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
                    return None, turn, _out_of_time(model, self.time_limit_s(check.options))
                return None, turn, f"judge {model.spec.label} failed: {type(exc).__name__}: {exc}"
            calls.elapsed_s += time.monotonic() - started
            calls.usages.append(generation.usage.as_dict())
            try:
                if generation.finish_reason == "length":
                    raise ValueError(
                        f"it was cut at the token limit (max_tokens {model.max_tokens})"
                    )
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

    def _summary(
        self,
        model: JudgeModel,
        rubric: Rubric,
        calls: _Calls,
        count: int,
        parsed: list[Parsed],
        combine: str,
        error: str | None,
    ) -> JsonObject:
        """What the task record keeps of the judging (judge.json has the whole)."""
        reward = score = None
        agreement: float | None = None
        if parsed and error is None:
            reward, score, agreement = combined(rubric, parsed, combine)
        return {
            "model": model.spec.label,
            "base_url": None if model.scripted else model.public()["base_url"],
            "fingerprint": model.fingerprint(),
            "template_hash": TEMPLATE_HASH,
            "rubric_digest": rubric.digest(),
            "scale": rubric.scale,
            "calls": len(calls.records),
            "usage": sum_usage(calls.usages) if calls.usages else sum_usage([]),
            "elapsed_s": round(calls.elapsed_s, 6),
            "samples": count,
            "sample_scores": [p.score for p in parsed],
            "agreement": agreement,
            "score": score,
            "reward": reward,
            "error": error,
        }

    def _write(
        self,
        check: Check,
        model: JudgeModel,
        rubric: Rubric,
        reference: str | None,
        system: str,
        calls: _Calls,
        parsed: list[Parsed],
        summary: JsonObject,
    ) -> None:
        if check.verifier_dir is None:
            return
        from pytest_agentbench.artifacts.jsonio import write_json_atomic

        document: JsonObject = {
            "schema_version": JUDGE_FILE_VERSION,
            "judge": {**model.public(), "fingerprint": model.fingerprint(), "source": model.source},
            "rubric": {
                "text": rubric.text,
                "criteria": [
                    {"name": c.name, "description": c.description, "weight": c.weight}
                    for c in rubric.criteria
                ],
                "scale": rubric.scale,
                "digest": rubric.digest(),
            },
            "answer": check.answer,
            "reference": reference,
            "system": system,
            "calls": list(calls.records),
            "samples": [
                {"reward": p.reward, "score": p.score, "rationale": p.rationale} for p in parsed
            ],
            "summary": summary,
        }
        write_json_atomic(Path(check.verifier_dir) / JUDGE_FILE, document)


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


def combined(
    rubric: Rubric, parsed: Sequence[Parsed], combine: str
) -> tuple[float, JsonValue, float]:
    """Several samples' verdicts as one: (reward, score, agreement). ``majority`` takes
    the most common reward (a tie: the lower, so disagreement never passes a task),
    ``mean`` the mean reward. ``agreement`` is the share of samples giving the most
    common reward (1.0 for one sample)."""
    rewards = [p.reward for p in parsed]
    counts = Counter(rewards)
    top = max(counts.values())
    agreement = top / len(rewards)
    if combine == "mean":
        reward = sum(rewards) / len(rewards)
        score: JsonValue = round(reward, 6) if len(parsed) > 1 else parsed[0].score
        return reward, score, agreement
    reward = min(r for r, n in counts.items() if n == top)
    chosen = next(p for p in parsed if p.reward == reward)
    return reward, chosen.score, agreement


def _feedback(rubric: Rubric, score: JsonValue, rationale: str, reference: str | None) -> str:
    """The repair feedback: the judge's rationale when no reference was shown to it (a
    rationale may quote the reference, which feedback never reveals), else the criteria
    that fell short."""
    if rubric.criteria and isinstance(score, dict):
        short = [
            name
            for name, value in score.items()
            if isinstance(value, str | int) and rubric.mapped(value) < 1
        ]
        if short:
            return "the judge found these criteria not met: " + ", ".join(short)
    if reference is None and rationale:
        return f"the judge found the answer does not meet the rubric: {rationale}"
    return "the judge found the answer does not meet the rubric"


JUDGE = JudgeVerifier()
