"""Datasets as published: HumanEval, MBPP, GSM8K and MMLU shaped files (JSONL, a JSON
array, CSV) run through a manifest, bad rows are collection errors naming the line, and
--agentbench-limit / --agentbench-sample choose the tasks of each suite file."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from suite_fuzz_support import real_loader

from pytest_agentbench.errors import SuiteError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "example_datasets"


def example(tmp_path: Path, name: str) -> Path:
    """A copy of one example manifest with its data folder."""
    shutil.copytree(EXAMPLES / "data", tmp_path / "data", dirs_exist_ok=True)
    return Path(shutil.copy(EXAMPLES / name, tmp_path / name))


def rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_rows(path: Path, records: list[Any]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def problems(path: Path) -> list[str]:
    with pytest.raises(SuiteError) as info:
        real_loader()(path)
    return list(info.value.problems)


def outcomes(pytester: pytest.Pytester, *args: str) -> dict[str, str]:
    """Run pytest --agentbench on the suites of the pytester folder
    (named: a bare run would also collect the test files kept in the results folder);
    task → outcome."""
    suites = sorted(str(path) for path in pytester.path.glob("bench_*"))
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider", *suites, *args)
    assert "ERROR collecting" not in result.stdout.str()
    summary = pytester.path / "agentbench-results" / "latest" / "summary.json"
    tasks = json.loads(summary.read_text())["tasks"]
    return {f"{t['suite']}::{t['task_id']}": t["outcome"] for t in tasks}


# -- the four shapes, as published ---------------------------------------------------------


def test_each_shape_maps_its_published_fields(tmp_path: Path) -> None:
    load = real_loader()
    humaneval = load(example(tmp_path, "bench_humaneval.toml")).tasks
    first = rows(EXAMPLES / "data" / "humaneval.jsonl")[0]
    assert [t.id for t in humaneval] == ["Toy/0", "Toy/1", "Toy/2"]
    assert humaneval[0].prompt == first["prompt"]
    assert humaneval[0].target == first["test"]
    assert humaneval[0].verifier.options == {
        "entry_point": first["entry_point"],
        "prompt": first["prompt"],
    }
    assert humaneval[0].scripted == (
        f"```python\n{first['prompt']}{first['canonical_solution']}```",
    )

    mbpp = load(example(tmp_path, "bench_mbpp.toml")).tasks
    record = rows(EXAMPLES / "data" / "mbpp.jsonl")[1]
    assert mbpp[1].id == str(record["task_id"])
    assert mbpp[1].target == record["test_list"]
    assert mbpp[1].verifier.options == {"setup": ""}
    assert mbpp[1].prompt == (
        record["text"] + "\nYour code should pass these tests:\n\n" + "\n".join(record["test_list"])
    )

    gsm8k = load(example(tmp_path, "bench_gsm8k.toml")).tasks
    answers = [r["answer"] for r in rows(EXAMPLES / "data" / "gsm8k.jsonl")]
    assert [t.target for t in gsm8k] == [a.split("####")[-1].strip() for a in answers]
    assert [t.scripted for t in gsm8k] == [(a,) for a in answers]

    mmlu = load(example(tmp_path, "bench_mmlu.toml")).tasks
    assert [t.id for t in mmlu] == ["1", "2", "3"]
    assert mmlu[1].choices == ("10", "25", "32", "64") and mmlu[1].target == "C"
    assert mmlu[1].prompt.endswith("\n\nA. 10\nB. 25\nC. 32\nD. 64")


@pytest.mark.slow
def test_the_example_datasets_run_and_wrong_answers_fail(pytester: pytest.Pytester) -> None:
    """Every example task passes with the row's own solution as the scripted reply; the
    same rows with a wrong reply fail: the checks really run (HumanEval's check())."""
    for entry in EXAMPLES.iterdir():
        copy = shutil.copytree if entry.is_dir() else shutil.copy
        copy(entry, pytester.path / entry.name)
    found = outcomes(pytester)
    assert len(found) == 12 and set(found.values()) == {"passed"}, found
    data = pytester.path / "data"
    he = rows(data / "humaneval.jsonl")
    he[1]["canonical_solution"] = "    return numbers\n"  # passes check()'s [] case only
    write_rows(data / "humaneval.jsonl", he)
    mbpp = rows(data / "mbpp.jsonl")
    mbpp[0]["code"] = "def digit_square_sum(n):\n    return 0"
    write_rows(data / "mbpp.jsonl", mbpp)
    csv_path = data / "mmlu_sample_test.csv"  # the reply stays "A", the target is now "D"
    csv_path.write_text(csv_path.read_text().replace(",Spleen,A", ",Spleen,D"))
    bench = pytester.path / "bench_mmlu.toml"
    bench.write_text(bench.read_text().replace('scripted = "answer"', 'scripted = "B"'))
    found = outcomes(pytester)
    failed = sorted(key for key, outcome in found.items() if outcome != "passed")
    assert failed == [
        "humaneval-sample::Toy/1",
        "mbpp-sample::901",
        "mmlu-sample::2",
        "mmlu-sample::3",
    ]


def test_humaneval_under_python_tests_calls_check_from_a_generated_test(
    pytester: pytest.Pytester,
) -> None:
    """The python_tests form docs/datasets.md gives: a template makes each row's test file."""
    shutil.copytree(EXAMPLES / "data", pytester.path / "data")
    manifest = (EXAMPLES / "bench_humaneval.toml").read_text()
    manifest = manifest.replace('kind = "python_checks"', 'kind = "python_tests", scoring = "all"')
    manifest = manifest.replace(
        'verifier = { entry_point = "entry_point", prompt = "prompt" }\n', ""
    ).replace(
        'target = "test"',
        'target = { template = "from solution import *\\n\\n{test}\\n\\n'
        'def test_check():\\n    check({entry_point})\\n" }',
    )
    (pytester.path / "bench_humaneval.toml").write_text(manifest)
    he = rows(pytester.path / "data" / "humaneval.jsonl")
    he[2]["canonical_solution"] = "    return b in a + a\n"  # "abc", "abca" is no rotation
    he[2]["test"] += '    assert candidate("abc", "abca") is False\n'
    write_rows(pytester.path / "data" / "humaneval.jsonl", he)
    found = outcomes(pytester)
    assert found == {
        "humaneval-sample::Toy/0": "passed",
        "humaneval-sample::Toy/1": "passed",
        "humaneval-sample::Toy/2": "failed",
    }


# -- bad rows, one shape each -----------------------------------------------------------------


def test_gsm8k_bad_rows_name_their_lines(tmp_path: Path) -> None:
    path = example(tmp_path, "bench_gsm8k.toml")
    good = rows(tmp_path / "data" / "gsm8k.jsonl")
    lines = [
        json.dumps(good[0]),
        "",
        json.dumps({**good[1], "answer": "no marker here: 4"}),
        '{"question": "q", "answer": ',
        json.dumps({"answer": "#### 3"}),
        json.dumps({**good[2], "answer": "#### many"}),
    ]
    (tmp_path / "data" / "gsm8k.jsonl").write_text("\n".join(lines))
    assert problems(path) == [
        'task 2 at data/gsm8k.jsonl line 3: the field "answer" has no "####" (fields.target.after)',
        "task 3 at data/gsm8k.jsonl line 4: the line is not valid JSON: Expecting value "
        "(column 29)",
        'task 4 at data/gsm8k.jsonl line 5: the record has no field "question" (fields.input)',
        "task 5 at data/gsm8k.jsonl line 6: $.answer cannot be used: number "
        "verifier: target 'many' is not a number; write it as a number or a numeric string "
        'such as "42" or "-3.5"',
    ]


def test_humaneval_as_a_json_array_names_the_line_of_each_bad_item(tmp_path: Path) -> None:
    path = example(tmp_path, "bench_humaneval.toml")
    records = rows(tmp_path / "data" / "humaneval.jsonl")
    items = [
        json.dumps(records[0], indent=1),
        '"not an object"',
        json.dumps({k: v for k, v in records[1].items() if k != "entry_point"}, indent=1),
        json.dumps({**records[2], "prompt": ["a list"]}),
    ]
    (tmp_path / "data" / "humaneval.json").write_text("[\n" + ",\n".join(items) + "\n]\n")
    text = path.read_text().replace("humaneval.jsonl", "humaneval.json")
    path.write_text(text)
    second = 2 + items[0].count("\n") + 1
    third = second + 1
    fourth = third + items[2].count("\n") + 1
    assert problems(path) == [
        f"task 2 at data/humaneval.json line {second}: the record must be a JSON object; "
        "got string",
        f'task 3 ("Toy/1") at data/humaneval.json line {third}: the record has no field '
        '"entry_point" (fields.verifier.entry_point)',
        f'task 4 ("Toy/2") at data/humaneval.json line {fourth}: $.prompt must be a string; '
        'got array ["a list"]',
    ]
    (tmp_path / "data" / "humaneval.json").write_text('[\n{"task_id": "x"},\n{"oops"}\n]')
    assert problems(path) == [
        "$.suite.dataset names a file that cannot be read: JSON syntax error at line 3: "
        "Expecting ':' delimiter"
    ]


def test_mmlu_csv_bad_rows_and_header(tmp_path: Path) -> None:
    path = example(tmp_path, "bench_mmlu.toml")
    csv_path = tmp_path / "data" / "mmlu_sample_test.csv"
    lines = csv_path.read_text().splitlines()
    lines[1] = "Too few,1,2,3,C"
    lines[2] = lines[2].rsplit(",", 1)[0] + ",E"
    lines.append('"A question over\ntwo lines?",w,x,y,z,Q')
    csv_path.write_text("\n".join(lines) + "\n")
    assert problems(path) == [
        "task 2 at data/mmlu_sample_test.csv line 2: the row has 5 values; suite.columns "
        "names 6 columns",
        "task 3 at data/mmlu_sample_test.csv line 3: $.answer cannot be used: choice verifier: "
        "target 'E' is not a letter A–D, a 0-based index or the text of one of the 4 choices",
        "task 4 at data/mmlu_sample_test.csv line 4: $.answer cannot be used: choice verifier: "
        "target 'Q' is not a letter A–D, a 0-based index or the text of one of the 4 choices",
    ]
    path.write_text(path.read_text().replace("columns = [", "# columns = ["))
    csv_path.write_text("question,A,B,A,D,answer\nq,1,2,3,4,A\n")
    assert problems(path) == [
        "$.suite.dataset names a file that cannot be read: the CSV header names the column "
        '"A" twice'
    ]
    csv_path.write_text("question,A,B,C,D,answer\nq,1,2,3,4,A\nr,1,2\n")
    assert problems(path) == [
        "task 2 at data/mmlu_sample_test.csv line 3: the row has 3 values; the header row "
        "(line 1) names 6 columns"
    ]


def test_mbpp_bad_rows(tmp_path: Path) -> None:
    path = example(tmp_path, "bench_mbpp.toml")
    records = rows(tmp_path / "data" / "mbpp.jsonl")
    records[0]["test_list"] = ["assert digit_square_sum(12) == 5", 7]
    records[1]["test_list"] = "assert long_words(3, 'a') == []"
    del records[2]["code"]
    write_rows(tmp_path / "data" / "mbpp.jsonl", records)
    assert problems(path) == [
        'task 1 ("901") at data/mbpp.jsonl line 1: $.test_list cannot be used: python_checks '
        "verifier: set options.test (code defining check(candidate), with options.entry_point) "
        "or options.asserts (a list of assert lines), or make the target one of them",
        'task 2 ("902") at data/mbpp.jsonl line 2: $.test_list cannot be used: python_checks '
        "verifier: options.entry_point must name the solution's function that check(candidate) "
        "is given",
        'task 3 ("903") at data/mbpp.jsonl line 3: the record has no field "code" '
        "(fields.scripted template)",
        'task 3 ("903") at data/mbpp.jsonl line 3: the record has no field "code" (fields.oracle)',
    ]


def test_field_spec_mistakes_and_a_missing_dataset(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_text('{"q": "x"}\n')
    path = tmp_path / "bench_s.toml"
    path.write_text(
        '[suite]\ndataset = "d.jsonl"\n[suite.fields]\ninput = { after = "#" }\n'
        'target = { field = "q", template = "{q}" }\nvars = { v = { template = "{q.x} {}" } }\n'
    )
    assert problems(path) == [
        '$.suite.fields.input must have one of "field" or "template"',
        '$.suite.fields.target must have one of "field" or "template"',
        "$.suite.fields.vars.v.template uses {q.x}, which is not a plain field name; write {field}",
        "$.suite.fields.vars.v.template uses {}, which is not a plain field name; write {field}",
    ]
    path.write_text('[suite]\ndataset = "data/missing.jsonl"\n')
    assert problems(path) == [
        f"$.suite.dataset names no file: looked for {tmp_path / 'data' / 'missing.jsonl'}"
    ]
    path.write_text('[suite]\ndataset = "d.parquet"\n')
    assert problems(path) == [
        '$.suite.dataset has an unknown dataset extension ".parquet"; use .jsonl, .ndjson, '
        ".json, .csv (each may be gzipped: .gz)"
    ]
    path.write_text('[suite]\ndataset = "d.parquet.gz"\n')
    assert problems(path) == [
        '$.suite.dataset has an unknown dataset extension ".parquet.gz"; use .jsonl, .ndjson, '
        ".json, .csv (each may be gzipped: .gz)"
    ]
    path.write_text('[suite]\ndataset = "d.jsonl"\ncolumns = ["a", "a"]\n')
    assert problems(path)[0].startswith("$.suite.columns is invalid")


# -- gzipped, as published ---------------------------------------------------------------------


def gzipped(tmp_path: Path, manifest: str, data: str) -> Path:
    """A copy of an example manifest whose dataset is the same file gzipped."""
    path = example(tmp_path, manifest)
    source = tmp_path / "data" / data
    (tmp_path / "data" / f"{data}.gz").write_bytes(gzip.compress(source.read_bytes()))
    source.unlink()
    path.write_text(path.read_text().replace(f'"data/{data}"', f'"data/{data}.gz"'))
    return path


@pytest.mark.parametrize(
    ("manifest", "data"),
    [
        ("bench_humaneval.toml", "humaneval.jsonl"),
        ("bench_mmlu.toml", "mmlu_sample_test.csv"),
        ("bench_gsm8k.toml", "gsm8k.jsonl"),
    ],
)
def test_a_gzipped_dataset_reads_as_the_file_it_holds(
    tmp_path: Path, manifest: str, data: str
) -> None:
    load = real_loader()
    plain = load(example(tmp_path / "plain", manifest)).tasks
    packed = load(gzipped(tmp_path / "packed", manifest, data)).tasks
    assert len(packed) == 3
    assert [(t.id, t.prompt, t.target, t.scripted) for t in packed] == [
        (t.id, t.prompt, t.target, t.scripted) for t in plain
    ]


def test_a_gzipped_json_array_names_the_line_of_a_bad_item(tmp_path: Path) -> None:
    items = [{"question": "1 + 1?", "answer": "#### 2"}, ["not", "an", "object"]]
    text = "[\n" + ",\n".join(json.dumps(item) for item in items) + "\n]\n"
    (tmp_path / "d.json.gz").write_bytes(gzip.compress(text.encode()))
    path = tmp_path / "bench_g.toml"
    path.write_text(
        '[suite]\ndataset = "d.json.gz"\nverifier = { kind = "number" }\n[suite.fields]\n'
        'input = "question"\ntarget = { field = "answer", after = "####" }\n'
    )
    assert problems(path) == [
        "task 2 at d.json.gz line 3: the record must be a JSON object; got array"
    ]


def test_a_gzip_bomb_is_refused_by_its_decompressed_size(tmp_path: Path) -> None:
    """A small file that decompresses past the cap is refused with the cap named, and is
    never decompressed whole (the read stops one byte past the cap)."""
    from pytest_agentbench.suites.load import load_suite
    from pytest_agentbench.verifiers.builtin import BUILTIN_VERIFIERS

    cap = 1024 * 1024
    bomb = gzip.compress(b"{}\n" * (4 * cap // 3), compresslevel=9)
    assert len(bomb) < cap // 50
    (tmp_path / "d.jsonl.gz").write_bytes(bomb)
    path = tmp_path / "bench_bomb.toml"
    path.write_text('[suite]\ndataset = "d.jsonl.gz"\nverifier = { kind = "includes" }\n')
    verifiers = {v.kind: v for v in BUILTIN_VERIFIERS}
    with pytest.raises(SuiteError) as info:
        load_suite(path, verifiers, max_bytes=cap)
    (problem,) = info.value.problems
    assert problem == (
        f"$.suite.dataset names a file that cannot be read: {tmp_path / 'd.jsonl.gz'} is too "
        f"large once decompressed (over {cap} bytes from {len(bomb)} compressed: a gzip "
        "bomb?); the limit is 1 MB (--agentbench-max-file-mb)"
    )
    # the same data under the cap reads
    (tmp_path / "d.jsonl.gz").write_bytes(gzip.compress(b'{"input": "x", "target": "x"}\n' * 1000))
    assert len(load_suite(path, verifiers, max_bytes=cap).tasks) == 1000


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"plain text, not gzip\n", "is not a readable gzip file: Not a gzipped file (b'pl')"),
        (
            gzip.compress(b'{"input": "x"}\n' * 100)[:-12],
            "is not a readable gzip file: it ends early (truncated)",
        ),
    ],
    ids=["not-gzip", "truncated"],
)
def test_a_broken_gzip_file_is_a_clear_error(tmp_path: Path, data: bytes, reason: str) -> None:
    (tmp_path / "d.jsonl.gz").write_bytes(data)
    path = tmp_path / "bench_broken.toml"
    path.write_text('[suite]\ndataset = "d.jsonl.gz"\n')
    (problem,) = problems(path)
    where = tmp_path / "d.jsonl.gz"
    assert problem == f"$.suite.dataset names a file that cannot be read: {where} {reason}"


# -- choosing tasks -----------------------------------------------------------------------------


def ten_rows(pytester: pytest.Pytester) -> None:
    write_rows(
        pytester.path / "gsm.jsonl",
        [{"question": f"{i} + 0?", "answer": f"#### {i}"} for i in range(10)],
    )
    pytester.makefile(
        ".toml",
        bench_gsm='[suite]\ndataset = "gsm.jsonl"\nverifier = { kind = "number" }\n'
        '[suite.fields]\ninput = "question"\ntarget = { field = "answer", after = "####" }\n'
        'scripted = "answer"\n',
    )


def collected(pytester: pytest.Pytester, *args: str) -> list[str]:
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider", "--co", "-q", *args)
    return [line.split("::")[1] for line in result.outlines if "::" in line]


def test_limit_range_and_seeded_sample_pick_tasks(pytester: pytest.Pytester) -> None:
    ten_rows(pytester)
    assert collected(pytester, "--agentbench-limit", "3") == ["1", "2", "3"]
    assert collected(pytester, "--agentbench-limit", "4:7") == ["5", "6", "7"]
    assert collected(pytester, "--agentbench-limit", "8:") == ["9", "10"]
    sample = collected(pytester, "--agentbench-sample", "4", "--agentbench-sample-seed", "11")
    assert len(sample) == 4 and sample == sorted(sample, key=int)
    assert (
        collected(pytester, "--agentbench-sample", "4", "--agentbench-sample-seed", "11") == sample
    )
    # without a seed of its own, the sample takes the run's sampling seed
    assert collected(pytester, "--agentbench-sample", "4", "--agentbench-seed", "11") == sample
    others = {
        tuple(
            collected(pytester, "--agentbench-sample", "4", "--agentbench-sample-seed", str(seed))
        )
        for seed in range(12, 16)
    }
    assert others - {tuple(sample)}, "every seed gave the same sample"
    inside = collected(pytester, "--agentbench-limit", "2:8", "--agentbench-sample", "3")
    assert len(inside) == 3 and all(3 <= int(i) <= 8 for i in inside)
    assert collected(pytester, "--agentbench-sample", "50") == [str(i) for i in range(1, 11)]


def test_a_sample_runs_and_is_recorded(pytester: pytest.Pytester) -> None:
    ten_rows(pytester)
    found = outcomes(pytester, "--agentbench-sample", "2", "--agentbench-sample-seed", "5")
    assert len(found) == 2 and set(found.values()) == {"passed"}
    summary = pytester.path / "agentbench-results" / "latest" / "summary.json"
    settings = json.loads(summary.read_text())["settings"]
    assert (settings["sample"], settings["sample_seed"], settings["limit"]) == (2, 5, None)


@pytest.mark.parametrize("value", ["x", "5:2", "-1", "1:2:3", ":"])
def test_a_bad_limit_is_a_usage_error(pytester: pytest.Pytester, value: str) -> None:
    ten_rows(pytester)
    result = pytester.runpytest(
        "--agentbench", "-p", "no:cacheprovider", f"--agentbench-limit={value}"
    )
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*agentbench limit: expected N or START:STOP*"])


# -- a plugin provides the file -------------------------------------------------------------


FETCH_PLUGIN = """
import json
from pathlib import Path

import pytest


@pytest.hookimpl
def pytest_agentbench_dataset(name, manifest, config):
    if not name.startswith("cache://"):
        return None
    if name == "cache://broken":
        raise ConnectionError("no route to the dataset host")
    local = Path(config.rootpath) / "cache" / (name.removeprefix("cache://") + ".jsonl")
    local.parent.mkdir(exist_ok=True)
    rows = [{"question": "2 + 3?", "answer": "#### 5"}, {"question": "4 + 4?", "answer": "#### 8"}]
    local.write_text("".join(json.dumps(r) + "\\n" for r in rows))
    return str(local)
"""


def test_a_plugin_hook_can_provide_the_dataset(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(FETCH_PLUGIN)
    manifest = (EXAMPLES / "bench_gsm8k.toml").read_text()
    pytester.makefile(".toml", bench_remote=manifest.replace("data/gsm8k.jsonl", "cache://gsm"))
    found = outcomes(pytester)
    assert found == {"gsm8k-sample::1": "passed", "gsm8k-sample::2": "passed"}
    pytester.makefile(".toml", bench_remote=manifest.replace("data/gsm8k.jsonl", "cache://broken"))
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider", "bench_remote.toml")
    result.stdout.fnmatch_lines(
        [
            "*$.suite.dataset could not be fetched by a plugin: "
            '"ConnectionError: no route to the dataset host"'
        ]
    )


def test_verifier_options_and_vars_per_row(tmp_path: Path) -> None:
    """fields.verifier gives each row its own options (merged over the suite's), as
    HumanEval's entry_point would be; a bad one is named at the row's field."""
    write_rows(
        tmp_path / "d.jsonl",
        [
            {"q": "Say hi.", "pat": "^hi$", "lang": "en"},
            {"q": "Say ok.", "pat": "(ok", "lang": "en"},
        ],
    )
    path = tmp_path / "bench_r.toml"
    path.write_text(
        '[suite]\ndataset = "d.jsonl"\ntemplate = "{input} ({language})"\n'
        'verifier = { kind = "regex", flags = "i" }\n'
        '[suite.fields]\ninput = "q"\nverifier = { pattern = "pat" }\n'
        'vars = { language = { template = "lang={lang}" } }\n'
    )
    assert problems(path) == [
        "task 2 at d.jsonl line 2: $.pat cannot be used: regex verifier: invalid pattern '(ok' "
        "in options.pattern: missing ) at position 3"
    ]
    write_rows(tmp_path / "d.jsonl", [{"q": "Say hi.", "pat": "^hi$", "lang": "en"}])
    (task,) = real_loader()(path).tasks
    assert task.verifier.options == {"flags": "i", "pattern": "^hi$"}
    assert task.prompt == "Say hi. (lang=en)"


def test_mmlu_as_jsonl_with_a_choices_list_and_an_index(tmp_path: Path) -> None:
    write_rows(
        tmp_path / "mmlu.jsonl",
        [{"question": "2 + 2?", "subject": "math", "choices": ["3", "4", "5", "22"], "answer": 1}],
    )
    path = tmp_path / "bench_mmlu.toml"
    path.write_text(
        '[suite]\ndataset = "mmlu.jsonl"\nverifier = { kind = "choice" }\n'
        '[suite.fields]\ninput = "question"\ntarget = "answer"\n'
    )
    (task,) = real_loader()(path).tasks
    assert (task.choices, task.target) == (("3", "4", "5", "22"), 1)
    write_rows(tmp_path / "mmlu.jsonl", [{"question": "2 + 2?", "choices": ["3"], "answer": 4}])
    assert problems(path) == [
        "task 1 at mmlu.jsonl line 1: $.answer cannot be used: choice verifier: target index 4 "
        "is out of range for 1 choices (indexes start at 0)"
    ]


@pytest.mark.slow
def test_xdist_workers_draw_the_same_sample(pytester: pytest.Pytester) -> None:
    """Each worker collects on its own: an unseeded draw would differ between them and
    xdist would refuse the run ("Different tests were collected")."""
    ten_rows(pytester)
    found = outcomes(
        pytester, "-n", "2", "--agentbench-sample", "5", "--agentbench-sample-seed", "9"
    )
    expected = collected(pytester, "--agentbench-sample", "5", "--agentbench-sample-seed", "9")
    assert sorted(found) == sorted(f"gsm::{i}" for i in expected)
    assert set(found.values()) == {"passed"}


def test_the_sample_follows_the_run_seed_unless_it_has_its_own(pytester: pytest.Pytester) -> None:
    """`--agentbench-sample N --agentbench-seed S` (the issue's form) seeds the sample; a
    `--agentbench-sample-seed` of the same value draws the same tasks."""
    ten_rows(pytester)
    by_run_seed = collected(pytester, "--agentbench-sample", "4", "--agentbench-seed", "11")
    by_own_seed = collected(pytester, "--agentbench-sample", "4", "--agentbench-sample-seed", "11")
    assert by_run_seed == by_own_seed
    assert collected(pytester, "--agentbench-sample", "4", "--agentbench-seed", "12") != by_run_seed
