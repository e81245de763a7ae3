"""The scripted judge: a suite's ``scripted_judge`` rules, matched against the answer
(or the control), and the replies the scripted provider plays for the first that
matches (docs/judges.md, "The scripted judge"). The judge verifier (verifiers/judge.py)
and the pairwise judge (verifiers/judge_pairwise.py) register them."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.suites.task import Task

#: Keys of a scripted judge reply table that make it a verdict (sent as JSON text).
_VERDICT_KEYS = ("verdict", "score", "criteria", "rationale")

RULE_SCHEMA: JsonObject = {
    "type": "object",
    "properties": {
        "control": {"type": "string"},
        "answer": {"type": "string"},
        "includes": {"type": "string"},
        "reply": {},
    },
    "required": ["reply"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class ScriptEntry:
    """A scripted judge's replies as the scripted provider registers them."""

    key: str
    id: str
    path: object
    scripted: Sequence[object]


def scripted_reply(reply: JsonValue) -> JsonValue:
    """A ``scripted_judge`` reply as the scripted provider plays it: a table holding a
    verdict's keys becomes its JSON text; a string or a reply table stays as written."""
    if isinstance(reply, dict) and any(k in reply for k in _VERDICT_KEYS):
        return json.dumps(reply, ensure_ascii=False)
    return reply


def rules_of(options: Mapping[str, JsonValue]) -> list[Mapping[str, JsonValue]]:
    raw = options.get("scripted_judge")
    return [r for r in raw if isinstance(r, dict)] if isinstance(raw, list) else []


def matching_rule(task: Task, answer: str) -> int | None:
    """The index of the first ``scripted_judge`` rule matching the answer (its
    ``control``, exact ``answer`` and ``includes`` conditions all hold), else None."""
    control = task.control.name if task.control is not None else ""
    for index, rule in enumerate(rules_of(task.verifier.options)):
        want = rule.get("control")
        if isinstance(want, str) and want != control:
            continue
        exact = rule.get("answer")
        if isinstance(exact, str) and exact.strip() != answer.strip():
            continue
        part = rule.get("includes")
        if isinstance(part, str) and part.casefold() not in answer.casefold():
            continue
        return index
    return None


def replies_of(rule: Mapping[str, JsonValue]) -> list[JsonValue]:
    reply = rule.get("reply")
    items = reply if isinstance(reply, list) else [reply]
    return [scripted_reply(item) for item in items]
