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

This module is the verifier (its options, the run's ``JudgeRuntime``, the rubric and
the reference of a task, one answer judged); the calls to the judge's model are
``judge_calls.py``'s, what they add up to (the combined verdict, the summary,
``judge.json``, the repair feedback) ``judge_record.py``'s.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import field

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.sampling import Sampling
from pytest_agentbench.errors import AgentbenchError
from pytest_agentbench.models.base import (
    ModelClient,
)
from pytest_agentbench.suites.task import Task
from pytest_agentbench.verifiers.base import (
    Check,
    ConfigProblem,
    JudgeError,
    Verdict,
)
from pytest_agentbench.verifiers.judge_calls import Calls, judge_sample
from pytest_agentbench.verifiers.judge_model import (
    DEFAULT_TIMEOUT_S,
    JUDGE_TABLE_SCHEMA,
    JudgeModel,
    judge_from_table,
    table_timeout_s,
)
from pytest_agentbench.verifiers.judge_prompt import (
    PASS_FAIL,
    Parsed,
    Rubric,
    criteria_of,
    messages,
)
from pytest_agentbench.verifiers.judge_record import (
    combined,
    judge_summary,
    repair_feedback,
    write_judge_file,
)
from pytest_agentbench.verifiers.judge_script import (
    RULE_SCHEMA,
    ScriptEntry,
    matching_rule,
    replies_of,
    rules_of,
)

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
        calls = Calls()
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
            found, turn, error = judge_sample(
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
                self.time_limit_s(check.options),
            )
            if found is None:
                break
            parsed.append(found)
        summary = judge_summary(model, rubric, calls, count, parsed, combine, error)
        write_judge_file(check, model, rubric, reference, system, calls, parsed, summary)
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
        feedback = "" if passed else repair_feedback(rubric, score, rationale, reference)
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


JUDGE = JudgeVerifier()
