"""What the judge's calls for one answer add up to: the samples combined into one
verdict, the summary the task record keeps, ``verifier/judge.json`` (the whole of it)
and the repair feedback. The calls themselves are ``judge_calls.py``'s."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.usage import sum_usage
from pytest_agentbench.verifiers.base import Check
from pytest_agentbench.verifiers.judge_calls import Calls
from pytest_agentbench.verifiers.judge_model import JudgeModel
from pytest_agentbench.verifiers.judge_prompt import TEMPLATE_HASH, Parsed, Rubric

JUDGE_FILE = "judge.json"
JUDGE_FILE_VERSION = 1


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


def judge_summary(
    model: JudgeModel,
    rubric: Rubric,
    calls: Calls,
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


def write_judge_file(
    check: Check,
    model: JudgeModel,
    rubric: Rubric,
    reference: str | None,
    system: str,
    calls: Calls,
    parsed: list[Parsed],
    summary: JsonObject,
) -> None:
    """``verifier/judge.json``: what the judge was sent, its raw replies and the parsed
    verdicts with their rationales (nothing without a verifier folder)."""
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


def repair_feedback(rubric: Rubric, score: JsonValue, rationale: str, reference: str | None) -> str:
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
