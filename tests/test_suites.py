"""Suite loading: TOML, JSON, YAML and JSONL manifests into Task records, and one clear
SuiteError listing every problem of a broken file (file, task, JSON path, expectation)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_agentbench.errors import SuiteError
from pytest_agentbench.suites import Suite, load_suite
from pytest_agentbench.suites.task import VerifierConfig
from pytest_agentbench.verifiers.base import Check, FunctionVerifier, Verdict


def _judge(check: Check) -> Verdict:
    return Verdict(1.0 if check.answer == str(check.task.target) else 0.0)


def _verifier(kind: str, properties: dict[str, Any], required: tuple[str, ...] = ()) -> Any:
    schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    return FunctionVerifier(kind, _judge, schema)


VERIFIERS = {
    v.kind: v
    for v in (
        _verifier("number", {"tolerance": {"type": "number", "minimum": 0}}),
        _verifier("exact", {"case_sensitive": {"type": "boolean"}}),
        _verifier("includes", {}),
        _verifier("choice", {}),
        _verifier("regex", {"pattern": {"type": "string"}}, ("pattern",)),
    )
}
KINDS = "choice, exact, includes, number, regex"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def problems(path: Path, verifiers: Any = None, **kwargs: Any) -> list[str]:
    """Load a broken suite; return its problems after checking the message names the file."""
    with pytest.raises(SuiteError) as info:
        load_suite(path, VERIFIERS if verifiers is None else verifiers, **kwargs)
    error = info.value
    assert error.path == str(path)
    assert str(error).startswith(f"{path}: invalid suite")
    assert all(f"  - {problem}\n" in f"{error}\n" for problem in error.problems)
    assert "Traceback" not in str(error)
    return error.problems


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


HUMANEVAL = [
    {
        "task_id": "HumanEval/0",
        "prompt": "def add(a, b):\n",
        "canonical": "a + b",
        "entry_point": "add",
    },
    {"task_id": "HumanEval/1", "prompt": "def neg(a):\n", "canonical": "-a", "entry_point": "neg"},
]
MANIFEST = """
[suite]
name = "humaneval"
dataset = "data/humaneval.jsonl"
fields = { id = "task_id", input = "prompt", target = "canonical", vars = ["entry_point"] }
template = "Complete {entry_point}:\\n{input}"
verifier = { kind = "exact" }
marks = ["code"]
"""


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
        "choices, feedback, files, id, input, marks, max_tokens, max_tool_output, max_turns, "
        "mode, pass_threshold, repair_mode, repairs, sampling, scripted, scripted_by_model, "
        "system, target, template, timeout_s, tools, vars, verifier",
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


# --- reading ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        (
            "bench_s.toml",
            '[suite]\nname = "a"\nrepairs = \n',
            "TOML syntax error: Invalid value (at line 3, column 11)",
        ),
        (
            "bench_s.json",
            '{"task": [\n  {"input": "a"}\n  {"input": "b"}]}',
            "JSON syntax error at line 3, column 3: Expecting ',' delimiter",
        ),
        ("bench_s.yaml", "task:\n  - input: [a\n", "YAML syntax error at line 3, column 1: "),
    ],
)
def test_syntax_errors_name_line_and_column(
    tmp_path: Path, name: str, text: str, expected: str
) -> None:
    (problem,) = problems(write(tmp_path, name, text))
    assert problem.startswith(expected)


@pytest.mark.parametrize("suffix", [".toml", ".json", ".yaml"])
def test_values_past_pythons_limits_are_problems(tmp_path: Path, suffix: str) -> None:
    huge = "1" * 5000
    texts = {
        ".toml": f'[[task]]\ninput = "a"\ntarget = {huge}\n',
        ".json": f'{{"task": [{{"input": "a", "target": {huge}}}]}}',
        ".yaml": f"task:\n- input: a\n  target: {huge}\n",
    }
    (problem,) = problems(write(tmp_path, f"bench_huge{suffix}", texts[suffix]))
    assert problem.startswith(f"the {suffix[1:].upper()} file cannot be read: Exceeds the limit")
    deep = "[" * 50_000 + "]" * 50_000
    texts = {".toml": f"a = {deep}\n", ".json": f'{{"task": {deep}}}', ".yaml": f"task: {deep}\n"}
    (problem,) = problems(write(tmp_path, f"bench_deep{suffix}", texts[suffix]))
    assert "nested too deeply" in problem or "exceeded maximum nesting depth" in problem


def test_unreadable_files_are_one_clear_problem(tmp_path: Path) -> None:
    assert problems(tmp_path / "bench_missing.toml") == [
        f"cannot read {tmp_path / 'bench_missing.toml'}: No such file or directory"
    ]
    path = tmp_path / "bench_latin1.toml"
    path.write_bytes(b'[[task]]\ninput = "caf\xe9"\n')
    assert problems(path) == [f"{path} is not UTF-8 text (bad byte at line 2)"]
    assert problems(write(tmp_path, "bench_x.txt", "")) == [
        'unknown suite format ".txt"; use .toml, .json or .yaml'
    ]
    assert problems(write(tmp_path, "bench_list.json", "[1, 2]")) == [
        'the file must hold an object with "suite" and "task" keys; got array'
    ]
    assert problems(write(tmp_path, "bench_empty.yaml", "")) == [
        'the file must hold an object with "suite" and "task" keys; got null'
    ]


def test_yaml_without_pyyaml_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "yaml", None)
    path = write(tmp_path, "bench_y.yaml", "task: []\n")
    assert problems(path) == ['YAML suites need PyYAML: pip install "pytest-agentbench[yaml]"']


# --- manifests ---------------------------------------------------------------------------------


def test_bad_dataset_lines_name_the_file_and_line(tmp_path: Path) -> None:
    good = json.dumps(HUMANEVAL[0])
    text = "\n".join(
        [
            good,
            "",
            json.dumps({**HUMANEVAL[1], "prompt": 3}),
            "not json",
            "[1]",
            json.dumps({"task_id": "HumanEval/0", "prompt": "p", "canonical": "c"}),
            json.dumps({**HUMANEVAL[1], "task_id": "HumanEval/9", "entry_point": math.nan}),
        ]
    )
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "humaneval.jsonl").write_text(text)
    path = write(tmp_path, "bench_he.toml", MANIFEST)
    assert problems(path) == [
        'task 2 ("HumanEval/1") at data/humaneval.jsonl line 3: $.prompt must be a string; '
        "got integer 3",
        "task 3 at data/humaneval.jsonl line 4: the line is not valid JSON: Expecting value "
        "(column 1)",
        "task 4 at data/humaneval.jsonl line 5: the record must be a JSON object; got array",
        'task 5 ("HumanEval/0") at data/humaneval.jsonl line 6: the record has no field '
        '"entry_point" (fields.vars)',
        'task 5 ("HumanEval/0") at data/humaneval.jsonl line 6: $.task_id repeats the id '
        '"HumanEval/0" of task 1 ("HumanEval/0") at data/humaneval.jsonl line 1',
        'task 6 ("HumanEval/9") at data/humaneval.jsonl line 7: $.entry_point must be a finite '
        "number; got nan",
    ]


def test_a_field_missing_from_every_record_is_one_line(tmp_path: Path) -> None:
    text = "\n".join(json.dumps({"question": f"q{i}", "answer": i}) for i in range(6))
    (tmp_path / "gsm.jsonl").write_text(text)
    path = write(
        tmp_path,
        "bench_gsm.toml",
        '[suite]\ndataset = "gsm.jsonl"\nfields = { input = "question", target = "anwser" }\n',
    )
    assert problems(path) == [
        'gsm.jsonl lines 1, 2, 3 and 3 more: the record has no field "anwser" (fields.target)'
    ]


def test_manifest_mistakes(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "bench_m.toml",
        '[suite]\ndataset = "nowhere.jsonl"\n[[task]]\ninput = "a"\n',
    )
    found = problems(path)
    assert found == [
        "$.task cannot be used in a manifest: its tasks come from $.suite.dataset",
        "$.suite.dataset names a file that cannot be read: cannot read "
        f"{tmp_path / 'nowhere.jsonl'}: No such file or directory",
    ]
    (tmp_path / "blank.jsonl").write_text("\n  \n")
    path = write(tmp_path, "bench_b.toml", '[suite]\ndataset = "blank.jsonl"\n')
    assert problems(path) == ['$.suite.dataset names a file with no records: "blank.jsonl"']
    path = write(
        tmp_path,
        "bench_f.toml",
        '[suite]\nfields = { input = "q", inptu = "x" }\n[[task]]\ninput = "a"\n',
    )
    assert problems(path) == [
        '$.suite.fields has unknown key "inptu" (did you mean "input"?); known keys: '
        "choices, id, input, scripted, target, vars",
        '$.suite has "fields" but no "dataset"',
    ]


# --- robustness --------------------------------------------------------------------------------


def test_bad_types_everywhere_give_problems_not_tracebacks(tmp_path: Path) -> None:
    document = {
        "suite": {
            "name": 3,
            "description": [],
            "system": {},
            "template": 5,
            "verifier": "number",
            "repairs": "1",
            "timeout_s": None,
            "max_tokens": 1.5,
            "pass_threshold": True,
            "marks": "slow",
            "vars": [],
            "dataset": 1,
            "fields": "x",
        },
        "task": [
            None,
            "text",
            {
                "id": True,
                "input": None,
                "target": {"a": [1]},
                "scripted": "8",
                "choices": [1, None],
                "system": 1,
                "template": [],
                "verifier": {"kind": 1},
                "repairs": -1,
                "timeout_s": "5",
                "max_tokens": 0,
                "pass_threshold": -0.5,
                "marks": [1],
                "vars": "x",
            },
        ],
    }
    path = write(tmp_path, "bench_types.json", json.dumps(document))
    found = problems(path)
    assert len(found) == 29
    assert "task 1: $.task[0] must be an object; got null" in found
    assert 'task 2: $.task[1] must be an object; got string "text"' in found
    assert "task 3: $.task[2].id must be a string or an integer; got boolean true" in found
    assert '$.suite.verifier must be an object; got string "number"' in found
    assert "task 3: $.task[2].verifier.kind must be a string; got integer 1" in found


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats() | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)


def mostly(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Usually a well-typed value, sometimes any JSON value at all."""
    return st.one_of(strategy, strategy, strategy, JSON_VALUES)


TEMPLATES = st.sampled_from(
    [
        "{input}",
        "{input} {choices}",
        "{x}",
        "{{",
        "{input!r}",
        "{input:>5}",
        "{input[0]}",
        "{x[0]}",
        "{input.upper}",
        "{input:{x}}",
        "{target}",
        "{}",
        "{input!z}",
        "{x.y}",
    ]
)
VERIFIER_TABLES = st.sampled_from(
    [
        {"kind": "number", "tolerance": 1},
        {"tolerance": -1},
        {"kind": "regex"},
        {"kind": "regex", "pattern": "a"},
        {"kind": "zz"},
        {},
        {"kind": "exact", "case_sensitive": True},
    ]
)
SETTINGS = {
    "system": mostly(st.text(max_size=3)),
    "template": mostly(TEMPLATES),
    "verifier": mostly(VERIFIER_TABLES),
    "repairs": mostly(st.integers(-1, 11)),
    "timeout_s": mostly(st.floats(0, 100)),
    "max_tokens": mostly(st.integers(0, 5)),
    "pass_threshold": mostly(st.floats(-0.1, 1.1)),
    "marks": mostly(st.lists(st.sampled_from(["slow", "a b", "x1", "1x"]), max_size=2)),
    "vars": mostly(st.dictionaries(st.sampled_from(["x", "y", "input", "target"]), JSON_VALUES)),
}
REPLIES = st.one_of(
    st.text(max_size=2), st.just(0), st.none(), st.dictionaries(st.text(), JSON_VALUES)
)
TASKS = st.fixed_dictionaries(
    {"input": mostly(st.text(max_size=4))},
    optional={
        **SETTINGS,
        "id": mostly(st.text(max_size=3) | st.integers(0, 3)),
        "target": JSON_VALUES,
        "scripted": mostly(st.lists(REPLIES, max_size=2)),
        "choices": mostly(st.lists(st.text(max_size=2), max_size=3)),
        "typo": st.none(),
    },
)
SUITES = st.fixed_dictionaries(
    {},
    optional={
        **SETTINGS,
        "name": mostly(st.text(max_size=3)),
        "description": mostly(st.text(max_size=3)),
        "dataset": st.sampled_from(["data.jsonl", "nowhere.jsonl", ""]),
        "fields": mostly(st.fixed_dictionaries({}, optional={"input": st.just("q")})),
    },
)
DOCUMENTS = st.fixed_dictionaries(
    {},
    optional={
        "suite": mostly(SUITES),
        "task": mostly(st.lists(mostly(TASKS), max_size=3)),
        "tasks": st.lists(TASKS, max_size=1),
    },
)


def strict_reply_check(reply: Any, where: str) -> None:
    if reply == 0:
        raise ValueError(f"{where}: zero is not a reply")
    if reply is None:
        raise TypeError("a buggy check")


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("fuzz")
    (folder / "data.jsonl").write_text('{"input": "a", "id": 1}\n{"q": "b"}\n')
    return folder


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document=DOCUMENTS, fmt=st.sampled_from(["json", "yaml"]), check=st.booleans())
def test_any_document_loads_or_fails_with_a_suite_error(
    fuzz_dir: Path, document: dict[str, Any], fmt: str, check: bool
) -> None:
    path = fuzz_dir / f"bench_fuzz.{fmt}"
    path.write_text(json.dumps(document))
    try:
        suite = load_suite(path, VERIFIERS, reply_check=strict_reply_check if check else None)
    except SuiteError as exc:
        assert exc.problems
        assert all(isinstance(p, str) and p and "\n" not in p for p in exc.problems)
    else:
        for task in suite.tasks:
            assert isinstance(task.prompt, str) and isinstance(task.id, str)
            json.dumps([task.target, task.scripted, dict(task.vars)], allow_nan=False)


def test_problem_list_is_capped(tmp_path: Path) -> None:
    tasks = "".join(f'[[task]]\nid = "t{i}"\ninput = "a"\nrepairs = -{i + 1}\n' for i in range(120))
    found = problems(write(tmp_path, "bench_many.toml", tasks))
    assert len(found) == 101
    assert found[0] == 'task 1 ("t0"): $.task[0].repairs must be at least 0; got -1'
    assert found[-1] == "… and 20 more problems"
