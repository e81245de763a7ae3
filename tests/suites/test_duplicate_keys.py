"""A key set twice in one mapping is a collection error in every format, naming the file,
the place and the key: JSON and YAML parsers would keep the last value without a word
(TOML refuses it itself; its message now names the key). Dataset rows (JSONL lines, JSON
array items) the same, by their line. A YAML merge (``<<: *base``) overridden by the
mapping is not a duplicate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from suite_fuzz_support import real_loader

from pytest_agentbench.errors import SuiteError

ONCE = "set each key once (the file would silently keep only the last value)"


def problems(path: Path) -> list[str]:
    with pytest.raises(SuiteError) as info:
        real_loader()(path)
    assert str(info.value).startswith(f"{path}: invalid suite")
    return list(info.value.problems)


def test_a_json_suite_names_each_key_set_twice_by_its_path(tmp_path: Path) -> None:
    path = tmp_path / "bench_d.json"
    path.write_text(
        '{"suite": {"name": "a", "name": "b"},\n "task": [{"id": "x", "input": "1", '
        '"input": "2", "input": "3", "target": "1",\n "verifier": {"kind": "exact", '
        '"kind": "number"}}]}\n'
    )
    assert problems(path) == [
        f'$.suite sets the key "name" twice; {ONCE}',
        f'$.task[0] sets the key "input" 3 times; {ONCE}',
        f'$.task[0].verifier sets the key "kind" twice; {ONCE}',
    ]


def test_a_yaml_suite_names_each_key_set_twice_with_its_line(tmp_path: Path) -> None:
    pytest.importorskip("yaml")
    path = tmp_path / "bench_d.yaml"
    path.write_text(
        "suite:\n  name: a\n  name: b\n"
        "tasks:\n"
        "  - {id: x, input: '1', target: '1', id: y}\n"
        "  - id: z\n    input: '2'\n    target: '2'\n    target: '3'\n"
    )
    assert problems(path) == [
        f'$.suite sets the key "name" twice (again at line 3, column 3); {ONCE}',
        f'$.tasks[0] sets the key "id" twice (again at line 5, column 38); {ONCE}',
        f'$.tasks[1] sets the key "target" twice (again at line 9, column 5); {ONCE}',
    ]


def test_a_yaml_merge_overridden_by_the_mapping_is_not_a_duplicate(tmp_path: Path) -> None:
    pytest.importorskip("yaml")
    path = tmp_path / "bench_m.yaml"
    path.write_text(
        "suite:\n  vars: &base {unit: cm, scale: 1}\n"
        "task:\n  - id: x\n    input: x\n    template: '{unit}'\n    target: m\n"
        "    vars:\n      <<: *base\n      unit: m\n"
    )
    (task,) = real_loader()(path).tasks
    assert task.prompt == "m" and task.vars["scale"] == 1


def test_a_toml_suite_names_the_key_set_twice(tmp_path: Path) -> None:
    path = tmp_path / "bench_d.toml"
    path.write_text('[[task]]\nid = "x"\ninput = "1"\nid = "y"\n')
    assert problems(path) == ['TOML syntax error: the key "id" is set twice (at line 4, column 9)']


def test_dataset_rows_name_the_key_set_twice_and_their_line(tmp_path: Path) -> None:
    rows = [
        '{"question": "1?", "answer": "#### 1"}',
        '{"question": "1?", "question": "2?", "answer": "#### 2"}',
        '{"question": "3?", "answer": "#### 3", "meta": {"a": 1, "a": 2}}',
    ]
    (tmp_path / "d.jsonl").write_text("\n".join(rows) + "\n")
    (tmp_path / "d.json").write_text("[\n" + ",\n".join(rows) + "\n]\n")
    for name in ("d.jsonl", "d.json"):
        path = tmp_path / f"bench_{name.replace('.', '_')}.toml"
        path.write_text(
            f'[suite]\ndataset = "{name}"\nverifier = {{ kind = "number" }}\n[suite.fields]\n'
            'input = "question"\ntarget = { field = "answer", after = "####" }\n'
        )
        assert problems(path) == [
            f"task 2 at {name} line {2 + (name == 'd.json')}: the record sets the key "
            f'"question" twice; {ONCE}',
            f"task 3 at {name} line {3 + (name == 'd.json')}: the record's $.meta sets the "
            f'key "a" twice; {ONCE}',
        ], name
    # the same rows without the repeated keys load
    (tmp_path / "d.jsonl").write_text(json.dumps({"question": "1?", "answer": "#### 1"}) + "\n")
    assert len(real_loader()(tmp_path / "bench_d_jsonl.toml").tasks) == 1
