"""Suite loading: TOML, JSON, YAML and JSONL manifests into Task records, and one clear
SuiteError listing every problem of a broken file (file, task, JSON path, expectation)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from suites_support import HUMANEVAL, KINDS, MANIFEST, VERIFIERS, _judge, problems, write

from pytest_agentbench.errors import SuiteError
from pytest_agentbench.suites import Suite, load_suite
from pytest_agentbench.suites.task import VerifierConfig
from pytest_agentbench.verifiers.base import FunctionVerifier

# --- happy paths -------------------------------------------------------------------------

ARITHMETIC = """
[suite]
description = "word problems"
system = "Answer with the number only."
template = "{input} Count {unit}."
verifier = { kind = "number", tolerance = 0.01 }
repairs = 1
timeout_s = 60
max_tokens = 256
pass_threshold = 0.5
marks = ["slow"]
vars = { unit = "apples", lang = "en" }

[[task]]
id = "apples"
input = "Tom has 3 apples and buys 4 more. How many now?"
target = "7"
scripted = ["8", { text = "7" }]

[[task]]
input = "2 + 2 {{literal}}?"
target = 4
template = "{input} in {lang}, {{braces}} kept"
verifier = { tolerance = 0.5 }
repairs = 0
timeout_s = 5
max_tokens = 10
pass_threshold = 1
marks = ["fast", "slow"]
vars = { lang = "fr" }
system = "Be brief."

[[task]]
id = "capital"
input = "Capital of France?"
choices = ["Paris", "Rome"]
verifier = { kind = "choice" }
"""


def test_toml_suite_applies_every_default(tmp_path: Path) -> None:
    path = write(tmp_path, "bench_arithmetic.toml", ARITHMETIC)
    suite = load_suite(path, VERIFIERS)
    assert isinstance(suite, Suite)
    assert (suite.name, suite.path, suite.description) == ("arithmetic", path, "word problems")
    first, second, third = suite.tasks
    assert first.suite == "arithmetic" and first.path == path
    assert (first.id, first.index) == ("apples", 0)
    assert first.input == "Tom has 3 apples and buys 4 more. How many now?"
    assert first.prompt == first.input + " Count apples."
    assert first.target == "7"
    assert first.system == "Answer with the number only."
    assert first.verifier == VerifierConfig("number", {"tolerance": 0.01})
    assert (first.repairs, first.timeout_s, first.max_tokens) == (1, 60.0, 256)
    assert isinstance(first.timeout_s, float)
    assert first.pass_threshold == 0.5
    assert first.scripted == ("8", {"text": "7"})
    assert first.marks == ("slow",)
    assert first.vars == {"unit": "apples", "lang": "en"}
    assert first.choices == ()

    assert (second.id, second.index) == ("2", 1)
    assert second.prompt == "2 + 2 {{literal}}? in fr, {braces} kept"
    assert second.target == 4
    assert second.system == "Be brief."
    assert second.verifier == VerifierConfig("number", {"tolerance": 0.5})
    assert (second.repairs, second.timeout_s, second.max_tokens) == (0, 5.0, 10)
    assert second.pass_threshold == 1.0
    assert second.marks == ("slow", "fast")
    assert second.vars == {"unit": "apples", "lang": "fr"}
    assert second.scripted == ()

    assert third.verifier == VerifierConfig("choice", {})
    assert third.choices == ("Paris", "Rome")
    assert third.prompt == "Capital of France? Count apples.\n\nA. Paris\nB. Rome"


def test_unset_limits_stay_none_and_name_defaults_to_the_stem(tmp_path: Path) -> None:
    path = write(tmp_path, "bench_tiny.toml", '[[task]]\ninput = "hi"\ntarget = "hi"\n')
    (task,) = load_suite(path, VERIFIERS).tasks
    assert task.suite == "tiny"
    assert (task.timeout_s, task.max_tokens, task.system) == (None, None, None)
    assert (task.repairs, task.pass_threshold, task.marks) == (0, 1.0, ())
    assert task.verifier == VerifierConfig("exact", {})
    assert task.prompt == "hi"
    assert task.key == f"{path.as_posix()}::1"


def test_choices_placed_by_the_template_are_not_repeated(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "bench_quiz.toml",
        '[suite]\ntemplate = "Q: {input}\\n{choices}\\nAnswer:"\n'
        '[[task]]\ninput = "Largest planet?"\nchoices = ["Saturn", "Jupiter", "Mars"]\n',
    )
    (task,) = load_suite(path, VERIFIERS).tasks
    assert task.prompt == "Q: Largest planet?\nA. Saturn\nB. Jupiter\nC. Mars\nAnswer:"


def test_json_suite_accepts_tasks_as_the_list_key(tmp_path: Path) -> None:
    document = {
        "$schema": "suite.schema.json",
        "suite": {"name": "science", "verifier": {"kind": "choice"}},
        "tasks": [{"id": 7, "input": "Boiling point?", "choices": ["50", "100"], "target": "B"}],
    }
    path = write(tmp_path, "bench_science.json", json.dumps(document))
    suite = load_suite(path, VERIFIERS)
    assert suite.name == "science"
    (task,) = suite.tasks
    assert (task.id, task.target, task.choices) == ("7", "B", ("50", "100"))


def test_yaml_suite_loads_like_toml(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "bench_words.yml",
        "suite:\n  verifier: {kind: includes}\n  marks: [smoke]\n"
        "task:\n  - id: greet\n    input: Say hello\n    target: hello\n"
        "    scripted: [hello there]\n",
    )
    (task,) = load_suite(path, VERIFIERS).tasks
    assert (task.suite, task.id, task.prompt, task.scripted) == (
        "words",
        "greet",
        "Say hello",
        ("hello there",),
    )
    assert task.verifier == VerifierConfig("includes", {})
    assert task.marks == ("smoke",)


def test_manifest_maps_jsonl_records_to_tasks(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    lines = [json.dumps(record) for record in HUMANEVAL]
    (tmp_path / "data" / "humaneval.jsonl").write_text(f"{lines[0]}\n\n{lines[1]}\n")
    path = write(tmp_path, "bench_he.toml", MANIFEST)
    suite = load_suite(path, VERIFIERS)
    assert suite.name == "humaneval"
    first, second = suite.tasks
    assert (first.id, first.index, first.target) == ("HumanEval/0", 0, "a + b")
    assert first.prompt == "Complete add:\ndef add(a, b):\n"
    assert first.vars == {"entry_point": "add"}
    assert (second.id, second.index, second.marks) == ("HumanEval/1", 1, ("code",))
    assert second.verifier == VerifierConfig("exact", {})


def test_manifest_fields_default_to_their_own_names(tmp_path: Path) -> None:
    records = [{"task_id": 601, "input": "x?", "target": "y"}, {"input": "z?", "choices": ["a"]}]
    (tmp_path / "mbpp.jsonl").write_text("\n".join(json.dumps(r) for r in records))
    path = write(tmp_path, "bench_mbpp.toml", '[suite]\ndataset = "mbpp.jsonl"\n')
    first, second = load_suite(path, VERIFIERS).tasks
    assert (first.id, first.target) == ("1", "y")
    assert (second.id, second.choices, second.prompt) == ("2", ("a",), "z?\n\nA. a")
    path = write(
        tmp_path,
        "bench_mbpp2.toml",
        '[suite]\ndataset = "mbpp.jsonl"\nfields = { id = "task_id" }\n',
    )
    with pytest.raises(SuiteError) as info:
        load_suite(path, VERIFIERS)
    assert info.value.problems == [
        'task 2 at mbpp.jsonl line 2: the record has no field "task_id" (fields.id)'
    ]


def test_reply_check_sees_each_reply_with_its_path(tmp_path: Path) -> None:
    seen: list[tuple[Any, str]] = []

    def check(reply: Any, where: str) -> None:
        seen.append((reply, where))
        if isinstance(reply, dict) and "tetx" in reply:
            raise ValueError(f"{where}: unknown reply key 'tetx'")
        if reply == 5:
            raise ValueError("a reply must be a string or a table")

    path = write(
        tmp_path,
        "bench_r.json",
        json.dumps(
            {
                "tasks": [
                    {"input": "a"},
                    {"id": "b", "input": "b", "scripted": ["ok", {"tetx": "x"}, 5]},
                ]
            }
        ),
    )
    found = problems(path, reply_check=check)
    assert seen == [
        ("ok", "$.tasks[1].scripted[0]"),
        ({"tetx": "x"}, "$.tasks[1].scripted[1]"),
        (5, "$.tasks[1].scripted[2]"),
    ]
    assert found == [
        'task 2 ("b"): $.tasks[1].scripted[1] is not a valid scripted reply: '
        "unknown reply key 'tetx'",
        'task 2 ("b"): $.tasks[1].scripted[2] is not a valid scripted reply: '
        "a reply must be a string or a table",
    ]


# --- every problem of a file in one error --------------------------------------------------

BROKEN = """
[suite]
repairs = 12
verifier = { kind = "number", tolernce = 1 }

[[task]]
id = "apples"
inptu = "x"

[[task]]
id = "apples"
input = "y"
verifier = { kind = "nuber" }
scripted = [3, "ok"]
max_tokens = "many"

[[task]]
input = "z"
pass_threshold = 1.5
timeout_s = 0
marks = ["not a mark"]
"""


def test_one_error_lists_every_problem_with_task_and_path(tmp_path: Path) -> None:
    path = write(tmp_path, "bench_broken.toml", BROKEN)
    assert problems(path) == [
        "$.suite.repairs must be at most 10; got 12",
        '$.suite.verifier has unknown key "tolernce" (did you mean "tolerance"?); '
        "known keys: tolerance",
        'task 1 ("apples"): $.task[0] is missing required key "input"',
        'task 1 ("apples"): $.task[0] has unknown key "inptu" (did you mean "input"?); known keys: '
        "agent, choices, environment, feedback, files, id, input, marks, max_tokens, "
        "max_tool_output, "
        "max_turns, mode, oracle, pass_threshold, repair_mode, repairs, sampling, scripted, "
        "scripted_by_model, system, target, template, timeout_s, tools, vars, verifier",
        'task 2 ("apples"): $.task[1].max_tokens must be an integer; got string "many"',
        'task 2 ("apples"): $.task[1].id repeats the id "apples" of task 1 ("apples")',
        'task 2 ("apples"): $.task[1].scripted[0] must be a string or a table; got integer 3',
        f'task 2 ("apples"): $.task[1].verifier.kind must be one of {KINDS}; got "nuber" '
        '(did you mean "number"?)',
        "task 3: $.task[2].timeout_s must be greater than 0; got 0",
        "task 3: $.task[2].pass_threshold must be at most 1; got 1.5",
        "task 3: $.task[2].marks[0] must be a marker name (letters, digits, _; not starting "
        'with a digit); got "not a mark"',
    ]


def test_verifier_options_are_checked_against_the_verifiers_schema(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "bench_v.toml",
        '[suite]\nverifier = { kind = "number", tolerance = -1 }\n'
        '[[task]]\ninput = "a"\nverifier = { kind = "regex" }\n'
        '[[task]]\ninput = "b"\nverifier = { kind = "exact", case_sensitive = "yes" }\n'
        '[[task]]\ninput = "c"\n',
    )
    assert problems(path) == [
        "$.suite.verifier.tolerance must be at least 0; got -1",
        'task 1: $.task[0].verifier is missing required key "pattern"',
        'task 2: $.task[1].verifier.case_sensitive must be a boolean; got string "yes"',
    ]


def test_task_verifier_without_kind_extends_the_suites(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "bench_v.toml",
        '[suite]\nverifier = { kind = "number", tolerance = 0.1 }\n'
        '[[task]]\ninput = "a"\nverifier = { tolerance = "wide" }\n',
    )
    assert problems(path) == [
        'task 1: $.task[0].verifier.tolerance must be a number; got string "wide"'
    ]


def test_missing_default_verifier_is_said_once_for_all_tasks(tmp_path: Path) -> None:
    path = write(tmp_path, "bench_d.toml", '[[task]]\ninput = "a"\n[[task]]\ninput = "b"\n')
    only_number = {"number": VERIFIERS["number"]}
    assert problems(path, only_number) == [
        'tasks 1, 2: no verifier kind is set and the default "exact" is not available; '
        "set verifier.kind to one of: number"
    ]


def test_broken_options_schema_is_blamed_on_the_plugin(tmp_path: Path) -> None:
    broken = FunctionVerifier("odd", _judge, {"type": "no-such-type"})
    path = write(
        tmp_path, "bench_o.toml", '[suite]\nverifier = { kind = "odd" }\n[[task]]\ninput = "a"\n'
    )
    (problem,) = problems(path, {"odd": broken})
    assert problem.startswith(
        '$.suite.verifier cannot be checked: the "odd" verifier\'s options_schema'
    )
    assert "bug in the plugin" in problem


def test_template_problems_name_the_field_and_what_is_available(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "bench_t.toml",
        '[suite]\ntemplate = "{input} in {unit} ({target})"\n'
        '[[task]]\ninput = "a"\n'
        '[[task]]\ninput = "b"\nvars = { unit = "cm" }\n'
        '[[task]]\ninput = "c"\ntemplate = "{input} {0} {choices} {oops"\n'
        '[[task]]\ninput = "d"\ntemplate = "{input} {choices} {vars}"\n',
    )
    assert problems(path) == [
        "$.suite.template uses {target}, which would give the answer away; it is not a field",
        "task 1: $.suite.template uses {unit}, which is not defined; defined: input",
        "task 3: $.task[2].template is not a valid template: expected '}' before end of string "
        "(write {{ and }} for braces)",
        "task 4: $.task[3].template uses {choices}, but the task has no choices",
        "task 4: $.task[3].template uses {vars}, which is not defined; defined: input",
    ]


def test_same_template_problem_in_many_tasks_is_one_line(tmp_path: Path) -> None:
    tasks = "".join(f'[[task]]\ninput = "q{i}"\n' for i in range(5))
    path = write(tmp_path, "bench_t.toml", f'[suite]\ntemplate = "{{input}} {{unit}}"\n{tasks}')
    assert problems(path) == [
        "tasks 1, 2, 3 and 2 more: $.suite.template uses {unit}, which is not defined; "
        "defined: input"
    ]


def test_positional_fields_and_reserved_vars_are_refused(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "bench_p.toml",
        '[suite]\ntemplate = "{} {input}"\nvars = { target = 1 }\n'
        '[[task]]\ninput = "a"\nvars = { input = "b" }\n',
    )
    assert problems(path) == [
        "$.suite.template uses a positional field {}; name a field such as {input}",
        "$.suite.vars.target is a reserved name (the task's own target); rename the var",
        "task 1: $.task[0].vars.input is a reserved name (the task's own input); rename the var",
    ]


@pytest.mark.parametrize(
    ("task_id", "expected"),
    [
        ('""', "must not be empty"),
        ('"a\\u0007b"', 'must not contain control characters; got "a\\u0007b"'),
        (f'"{"x" * 201}"', "must be at most 200 characters long; got 201"),
    ],
)
def test_unsafe_task_ids_are_refused(tmp_path: Path, task_id: str, expected: str) -> None:
    path = write(tmp_path, "bench_ids.toml", f'[[task]]\nid = {task_id}\ninput = "a"\n')
    (problem,) = problems(path)
    assert problem.startswith("task 1 (")
    assert problem.endswith(f"$.task[0].id {expected}")


def test_default_ids_may_collide_with_explicit_ones(tmp_path: Path) -> None:
    path = write(
        tmp_path, "bench_c.toml", '[[task]]\nid = "2"\ninput = "a"\n[[task]]\ninput = "b"\n'
    )
    assert problems(path) == [
        'task 2: its default id "2" (its position) is taken by task 1 ("2"); give this task an id'
    ]


def test_both_task_and_tasks_keys_and_tasks_in_toml(tmp_path: Path) -> None:
    path = write(tmp_path, "bench_b.json", '{"task": [{"input": "a"}], "tasks": []}')
    assert problems(path) == ['$ has both "task" and "tasks"; keep one of them']
    path = write(tmp_path, "bench_b.toml", '[[tasks]]\ninput = "a"\n')
    assert problems(path) == [
        '$ has unknown key "tasks" (did you mean "task"?); known keys: $schema, suite, task'
    ]


def test_a_suite_without_tasks_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "bench_e.toml", '[suite]\nname = "empty"\n')
    assert problems(path) == ["the suite has no tasks: add [[task]] tables or a dataset"]


def test_values_json_cannot_hold_are_refused(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "bench_n.toml",
        "[suite]\npass_threshold = nan\n[[task]]\ninput = 1979-05-27\ntarget = inf\n",
    )
    assert problems(path) == [
        "$.suite.pass_threshold must be a finite number; got nan",
        "task 1: $.task[0].input is a date/time (1979-05-27); quote it to make it a string",
        "task 1: $.task[0].target must be a finite number; got inf",
    ]


def test_yaml_oddities_are_refused_without_crashing(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "bench_y.yaml",
        "task:\n  - input: a\n    target: 2024-01-01\n    vars: &v {x: *v}\n"
        "    choices: [yes, no]\n  - input: b\n    vars: {1: one}\n",
    )
    assert problems(path) == [
        "task 1: $.task[0].target is a date/time (2024-01-01); quote it to make it a string",
        "task 1: $.task[0].vars.x contains itself (a recursive YAML alias)",
        "task 1: $.task[0].choices[0] must be a string; got boolean true",
        "task 1: $.task[0].choices[1] must be a string; got boolean false",
        "task 2: $.task[1].vars has a key that is not a string: 1",
    ]
