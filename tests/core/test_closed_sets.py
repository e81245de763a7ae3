"""Each closed set of words has one definition, a ``Literal`` whose ``get_args`` is the
runtime tuple; the JSON Schemas and the command-line choices list exactly those words."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, get_args, get_type_hints

import pytest

from pytest_agentbench import schemas
from pytest_agentbench.config.option_values import choice
from pytest_agentbench.config.settings import Settings
from pytest_agentbench.core.records import CTRF_STATUSES, OUTCOMES, CtrfStatus, Outcome
from pytest_agentbench.core.sampling import REASONING_EFFORTS, ReasoningEffort, Sampling
from pytest_agentbench.core.stats import REDUCERS, Reducer
from pytest_agentbench.core.stream import WIRE_PROTOCOLS, WireProtocol
from pytest_agentbench.errors import AgentbenchError
from pytest_agentbench.models.sampling_wire import PROTOCOL_NAMES
from pytest_agentbench.report.compare import PairMetric, Verdict
from pytest_agentbench.report.gate import GATE_ON, GateOn
from pytest_agentbench.sandbox.isolation import ISOLATION_MODES, Isolation
from pytest_agentbench.suites.raw_task import as_word
from pytest_agentbench.suites.task import (
    CONTROL_EXPECTS,
    FEEDBACK_LEVELS,
    REPAIR_MODES,
    TASK_MODES,
    ControlExpect,
    FeedbackLevel,
    RepairMode,
    TaskMode,
)
from pytest_agentbench.suites.validate import suite_schema
from pytest_agentbench.verifiers.builtin import BUILTIN_VERIFIERS
from pytest_agentbench.verifiers.stamped import SCORINGS, Scoring


def enums(node: Any, name: str) -> Iterator[list[Any]]:
    """Every ``enum`` of a property called ``name``, anywhere in a schema."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == name and isinstance(value, dict) and "enum" in value:
                yield value["enum"]
            yield from enums(value, name)
    elif isinstance(node, list):
        for value in node:
            yield from enums(value, name)


@pytest.mark.parametrize(
    ("schema", "name", "words"),
    [
        ("suite", "repair_mode", get_args(RepairMode)),
        ("suite", "feedback", get_args(FeedbackLevel)),
        ("suite", "mode", get_args(TaskMode)),
        ("suite", "reasoning_effort", get_args(ReasoningEffort)),
        ("summary", "metric", get_args(PairMetric)),
        ("summary", "verdict", get_args(Verdict)),
        ("ctrf", "status", get_args(CtrfStatus)),
        ("task_record", "expect", get_args(ControlExpect)),
    ],
)
def test_a_schema_lists_exactly_the_words_of_its_type(
    schema: str, name: str, words: tuple[str, ...]
) -> None:
    document = suite_schema() if schema == "suite" else schemas.load(schema)
    found = list(enums(document, name))
    assert found, f"{schema} schema: no enum for {name!r}"
    for listed in found:
        assert listed == list(words), f"{schema} schema, {name!r}"


@pytest.mark.parametrize(
    ("runtime", "alias"),
    [
        (OUTCOMES, Outcome),
        (CTRF_STATUSES, CtrfStatus),
        (REASONING_EFFORTS, ReasoningEffort),
        (REDUCERS, Reducer),
        (GATE_ON, GateOn),
        (ISOLATION_MODES, Isolation),
        (REPAIR_MODES, RepairMode),
        (FEEDBACK_LEVELS, FeedbackLevel),
        (TASK_MODES, TaskMode),
        (SCORINGS, Scoring),
        (CONTROL_EXPECTS, ControlExpect),
        (WIRE_PROTOCOLS, WireProtocol),
        (tuple(PROTOCOL_NAMES), WireProtocol),
    ],
)
def test_each_runtime_tuple_is_its_literal(runtime: tuple[str, ...], alias: Any) -> None:
    assert runtime == get_args(alias)


@pytest.mark.parametrize("kind", ["python_tests", "python_checks"])
def test_a_code_verifiers_options_list_the_scoring_and_isolation_words(kind: str) -> None:
    (verifier,) = [v for v in BUILTIN_VERIFIERS if v.kind == kind]
    options = verifier.options_schema
    assert list(enums(options, "scoring")) == [list(get_args(Scoring))]
    assert list(enums(options, "isolation")) == [list(get_args(Isolation))]


@pytest.mark.parametrize(
    ("record", "name", "alias"),
    [
        (Settings, "repair_mode", RepairMode | None),
        (Settings, "feedback", FeedbackLevel | None),
        (Settings, "gate_on", GateOn),
        (Settings, "sandbox", Isolation | None),
        (Sampling, "reasoning_effort", ReasoningEffort | None),
    ],
)
def test_a_settings_field_of_a_closed_set_has_its_literal(
    record: type, name: str, alias: Any
) -> None:
    from pytest_agentbench.core.cost import Price
    from pytest_agentbench.suites.agent_file import RunAgent
    from pytest_agentbench.verifiers.judge_model import JudgeModel

    # (Settings names types a run imports only when it uses them: the judge's model, the
    # run's agent file, a price)
    names = {"JudgeModel": JudgeModel, "RunAgent": RunAgent, "Price": Price}
    assert get_type_hints(record, localns=names)[name] == alias


def test_a_word_read_is_the_word_of_its_set_and_nothing_else() -> None:
    """The command line's and the suite's readers hand back the set's own word (its
    Literal); any other value is refused, never passed on as a plain string."""
    assert choice("agentbench gate on", "lower", GATE_ON) == "lower"
    assert choice("agentbench gate on", None, GATE_ON) is None
    with pytest.raises(AgentbenchError, match="gate on: expected one of point, lower"):
        choice("agentbench gate on", "upper", GATE_ON)
    assert as_word("stateless", REPAIR_MODES) == "stateless"
    # the schema lists the same words (above): another value reaching here is a bug
    with pytest.raises(TypeError, match="one of conversation, stateless"):
        as_word("sideways", REPAIR_MODES)
