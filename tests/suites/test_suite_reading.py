"""Suite reading: syntax and unreadable files, JSONL manifests, bad types anywhere, and a
fuzz of whole documents: every broken file is one clear SuiteError, never a traceback."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from suites_support import HUMANEVAL, MANIFEST, VERIFIERS, problems, write

from pytest_agentbench.errors import SuiteError
from pytest_agentbench.suites import load_suite

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
        f"$.suite.dataset names no file: looked for {tmp_path / 'nowhere.jsonl'}",
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
        "choices, id, input, oracle, scripted, target, vars, verifier",
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
