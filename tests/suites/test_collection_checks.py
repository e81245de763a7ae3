"""A verifier's setup is checked at collection: a task no answer could pass is a
collection error naming file, task and option, and no request reaches the model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_agentbench.errors import SuiteError
from pytest_agentbench.scripted.server import ScriptedServer
from pytest_agentbench.suites.load import load_suite
from pytest_agentbench.verifiers.base import ConfigProblem, FunctionVerifier, Verdict
from pytest_agentbench.verifiers.builtin import BUILTIN_VERIFIERS

VERIFIERS = {verifier.kind: verifier for verifier in BUILTIN_VERIFIERS}

#: name → (suite text, the problem line expected, with its place). Every one of these
#: loaded before and failed (or errored) only after the model had been asked.
BAD_SETUPS = {
    "regex_option": (
        '[[task]]\nid = "r"\ninput = "x"\nverifier = { kind = "regex", pattern = "(a" }\n',
        'task 1 ("r"): $.task[0].verifier.pattern cannot be used: regex verifier: '
        "invalid pattern '(a' in options.pattern: missing ) at position 2",
    ),
    "regex_target": (
        '[[task]]\nid = "r"\ninput = "x"\ntarget = "[z-a]"\nverifier = { kind = "regex" }\n',
        'task 1 ("r"): $.task[0].target cannot be used: regex verifier: invalid pattern',
    ),
    "regex_suite_option": (
        '[suite]\nverifier = { kind = "regex", pattern = "a**" }\n'
        '[[task]]\nid = "r"\ninput = "x"\n',
        'task 1 ("r"): $.suite.verifier.pattern cannot be used: regex verifier: invalid',
    ),
    "schema_not_a_schema": (
        '[[task]]\nid = "j"\ninput = "x"\n'
        'verifier = { kind = "json_schema", schema = { type = "banana" } }\n',
        'task 1 ("j"): $.task[0].verifier.schema cannot be used: json_schema verifier: '
        "options.schema is not a valid JSON Schema",
    ),
    "schema_target_without_keyword": (
        '[[task]]\nid = "j"\ninput = "x"\ntarget = { name = "Ann" }\n'
        'verifier = { kind = "json_schema" }\n',
        'task 1 ("j"): $.task[0].target cannot be used: json_schema verifier: target has '
        "no JSON Schema keyword",
    ),
    "schema_dangling_ref": (
        '[[task]]\nid = "j"\ninput = "x"\n'
        'verifier = { kind = "json_schema", schema = { properties = { a = '
        '{ "$ref" = "#/$defs/nope" } } } }\n',
        'task 1 ("j"): $.task[0].verifier.schema cannot be used: json_schema verifier: '
        "options.schema has a $ref that points at nothing: '#/$defs/nope'",
    ),
    "choice_out_of_range": (
        '[[task]]\nid = "c"\ninput = "x"\nchoices = ["a", "b"]\ntarget = "D"\n'
        'verifier = { kind = "choice" }\n',
        'task 1 ("c"): $.task[0].target cannot be used: choice verifier: target',
    ),
    "choice_without_choices": (
        '[[task]]\nid = "c"\ninput = "x"\ntarget = "A"\nverifier = { kind = "choice" }\n',
        'task 1 ("c"): $.task[0].choices cannot be used: choice verifier: the task has no',
    ),
    "number_target": (
        '[[task]]\nid = "n"\ninput = "x"\ntarget = "seven"\nverifier = { kind = "number" }\n',
        'task 1 ("n"): $.task[0].target cannot be used: number verifier: target',
    ),
    "exact_no_target": (
        '[[task]]\nid = "e"\ninput = "x"\n',
        'task 1 ("e"): $.task[0].target cannot be used: exact verifier: target must be',
    ),
    "includes_empty": (
        '[[task]]\nid = "i"\ninput = "x"\ntarget = ["a", ""]\nverifier = { kind = "includes" }\n',
        'task 1 ("i"): $.task[0].target cannot be used: includes verifier: target contains',
    ),
    "python_tests_syntax": (
        '[[task]]\nid = "p"\ninput = "x"\n'
        'verifier = { kind = "python_tests", tests = "def test_a(:\\n  pass" }\n',
        'task 1 ("p"): $.task[0].verifier.tests cannot be used: python_tests verifier: the '
        "task's tests are not valid Python",
    ),
    "python_tests_none": (
        '[[task]]\nid = "p"\ninput = "x"\ntarget = "x = 1"\nverifier = { kind = "python_tests" }\n',
        'task 1 ("p"): $.task[0].target cannot be used: python_tests verifier: the task\'s '
        "tests define no test",
    ),
    "command_no_run": (
        '[[task]]\nid = "k"\ninput = "x"\nverifier = { kind = "command" }\n',
        'task 1 ("k"): $.task[0].target cannot be used: command verifier: set options.run',
    ),
}


@pytest.mark.parametrize("name", sorted(BAD_SETUPS))
def test_a_setup_no_answer_could_pass_fails_to_load(tmp_path: Path, name: str) -> None:
    text, expected = BAD_SETUPS[name]
    path = tmp_path / "bench_bad.toml"
    path.write_text(text)
    with pytest.raises(SuiteError) as caught:
        load_suite(path, VERIFIERS)
    assert len(caught.value.problems) == 1, caught.value.problems
    assert caught.value.problems[0].startswith(expected), caught.value.problems


def test_a_dataset_task_names_its_record_line_and_field(tmp_path: Path) -> None:
    (tmp_path / "data.jsonl").write_text(
        '{"q": "one", "a": "1"}\n{"q": "two", "a": "two"}\n', encoding="utf-8"
    )
    path = tmp_path / "bench_ds.toml"
    path.write_text(
        '[suite]\ndataset = "data.jsonl"\nfields = { input = "q", target = "a" }\n'
        'verifier = { kind = "number" }\n'
    )
    with pytest.raises(SuiteError) as caught:
        load_suite(path, VERIFIERS)
    assert caught.value.problems == [
        "task 2 at data.jsonl line 2: $.a cannot be used: number verifier: target 'two' is "
        'not a number; write it as a number or a numeric string such as "42" or "-3.5"'
    ]


def test_a_regex_timeout_option_is_checked_by_its_schema(tmp_path: Path) -> None:
    path = tmp_path / "bench_t.toml"
    path.write_text(
        '[[task]]\ninput = "x"\ntarget = "a"\nverifier = { kind = "regex", timeout_s = 0 }\n'
    )
    with pytest.raises(SuiteError, match=r"timeout_s must be greater than 0"):
        load_suite(path, VERIFIERS)


def _never_ok(task: object) -> list[ConfigProblem]:
    return [ConfigProblem(("options", "word"), "is not a word this verifier knows")]


def _crashes(task: object) -> list[ConfigProblem]:
    raise KeyError("oops")


def _verdict(check: object) -> Verdict:
    return Verdict(reward=1.0)


@pytest.mark.parametrize(
    ("check", "expected"),
    [
        (_never_ok, "$.task[0].verifier.word is not a word this verifier knows"),
        (_crashes, '$.task[0].verifier could not be checked: the "plug" verifier\'s check_task'),
    ],
)
def test_a_plugin_verifier_gets_the_same_check(tmp_path: Path, check, expected: str) -> None:
    plug = FunctionVerifier("plug", _verdict, task_check=check)
    path = tmp_path / "bench_p.toml"
    path.write_text('[[task]]\nid = "p"\ninput = "x"\nverifier = { kind = "plug", word = 1 }\n')
    with pytest.raises(SuiteError) as caught:
        load_suite(path, {**VERIFIERS, "plug": plug})
    assert caught.value.problems[0].startswith(f'task 1 ("p"): {expected}')


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    provider = ScriptedServer(default=["7"])
    provider.start()
    try:
        yield provider
    finally:
        provider.stop()


GOOD = '[[task]]\nid = "fine"\ninput = "x"\ntarget = "7"\nscripted = ["7"]\n'

PLUGIN = """
from pytest_agentbench.verifiers.base import ConfigProblem, FunctionVerifier, Verdict


def _check(task):
    if task.verifier.options.get("word") != "ok":
        yield ConfigProblem(("options", "word"), 'must be "ok"')


def pytest_agentbench_verifiers():
    return [FunctionVerifier("plug", lambda check: Verdict(reward=1.0), task_check=_check)]
"""


def test_no_request_reaches_the_model_for_a_task_that_cannot_be_judged(
    pytester: pytest.Pytester, server: ScriptedServer
) -> None:
    pytester.makeconftest(PLUGIN)
    (pytester.path / "bench_good.toml").write_text(GOOD)
    bad = {name: text for name, (text, _) in BAD_SETUPS.items() if "python" not in name}
    for name, text in bad.items():
        (pytester.path / f"bench_{name}.toml").write_text(text.replace('"x"', '"7"', 1))
    (pytester.path / "bench_plug.toml").write_text(
        '[[task]]\nid = "p"\ninput = "x"\nverifier = { kind = "plug", word = "no" }\n'
    )
    result = pytester.runpytest(
        "--agentbench",
        "--agentbench-model",
        "scripted",
        "--agentbench-base-url",
        server.url,
        "--continue-on-collection-errors",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(passed=1, errors=len(bad) + 1)
    result.stdout.fnmatch_lines(['*task 1 ("p"): $.task[[]0].verifier.word must be "ok"'])
    assert "Traceback" not in result.stdout.str()
    assert server.stats["requests"] == 1  # the good task's, and no other


@pytest.mark.parametrize(
    ("template", "written"),
    [
        ("{input.upper}", "{input.upper}"),
        ("{items[0]}", "{items[0]}"),
        ("{input!r}", "{input!r}"),
        ("{input:>9}", "{input:>9}"),
        ("{items.__class__}", "{items.__class__}"),
    ],
)
def test_a_template_field_must_be_a_plain_name(tmp_path: Path, template: str, written: str) -> None:
    path = tmp_path / "bench_t.toml"
    path.write_text(
        f'[suite]\ntemplate = "Q: {template}"\nvars = {{ items = ["a", "b"] }}\n'
        '[[task]]\nid = "t"\ninput = "x"\ntarget = "x"\n'
    )
    root = written[1:].split(".")[0].split("[")[0].split("!")[0].split(":")[0]
    with pytest.raises(SuiteError) as caught:
        load_suite(path, VERIFIERS)
    assert caught.value.problems == [
        f"$.suite.template uses {written}, which is not a plain field name; write {{{root}}} "
        "(attribute, index, !conversion and :format are not supported)"
    ]
