"""Suite and dataset files are read only when they are regular files under a size cap
(--agentbench-max-file-mb), and YAML aliases are bounded: a FIFO, a device, a huge file
or an alias bomb is one clear collection error naming the path, never a hang or an OOM."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from pytest_agentbench.errors import SuiteError
from pytest_agentbench.suites.load import load_suite
from pytest_agentbench.verifiers.builtin import BUILTIN_VERIFIERS

VERIFIERS = {verifier.kind: verifier for verifier in BUILTIN_VERIFIERS}
GOOD = '[[task]]\nid = "fine"\ninput = "x"\ntarget = "x"\nscripted = ["x"]\n'
MANIFEST = '[suite]\ndataset = "data.jsonl"\nfields = { input = "q", target = "a" }\n'
#: The inner run may not grow past this, so that code reading /dev/zero fails fast
#: instead of taking the machine down.
GUARD = """
import resource
resource.setrlimit(resource.RLIMIT_AS, (3 * 1024**3, resource.RLIM_INFINITY))
"""


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    pytester.makeconftest(GUARD)
    # a hang guard only: each case is refused before anything is read
    return pytester.runpytest_subprocess(
        "--agentbench", "-p", "no:cacheprovider", *args, timeout=60
    )


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["fifo", "device", "directory"])
def test_a_dataset_that_is_not_a_regular_file_is_a_collection_error(
    pytester: pytest.Pytester, kind: str
) -> None:
    data = pytester.path / "data.jsonl"
    if kind == "fifo":
        os.mkfifo(data)
        what = "a FIFO (named pipe)"
    elif kind == "device":
        data.symlink_to("/dev/zero")
        what = "a device"
    else:
        data.mkdir()
        what = "a directory"
    (pytester.path / "bench_ds.toml").write_text(MANIFEST)
    (pytester.path / "bench_good.toml").write_text(GOOD)
    result = _run(pytester, "--continue-on-collection-errors")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [f"*$.suite.dataset names a file that cannot be read: *data.jsonl is {what};*"]
    )
    assert "Traceback" not in result.stdout.str()


@pytest.mark.slow
def test_bench_files_that_are_not_regular_files_are_collection_errors(
    pytester: pytest.Pytester,
) -> None:
    # pytest skips such entries without a word; each must say why it is not run
    sub = pytester.path / "sub"
    sub.mkdir()
    os.mkfifo(pytester.path / "bench_fifo.toml")
    (sub / "bench_zero.toml").symlink_to("/dev/zero")
    (pytester.path / "bench_gone.toml").symlink_to(pytester.path / "missing.toml")
    (sub / "bench_good.toml").write_text(GOOD)
    result = _run(pytester, "--continue-on-collection-errors")
    result.assert_outcomes(passed=1, errors=3)
    result.stdout.fnmatch_lines_random(
        [
            "*bench_fifo.toml is a FIFO (named pipe); only regular files are read",
            "*sub/bench_zero.toml is a device; only regular files are read",
            "*cannot read *bench_gone.toml: No such file or directory",
        ]
    )


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_suite_path_that_is_not_a_regular_file_is_refused_unread(
    tmp_path: Path, kind: str
) -> None:
    # pytest itself never hands such a path to the plugin; load_suite is public API
    path = tmp_path / "bench_x.toml"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    problems: list[str] = []

    def load() -> None:
        try:
            load_suite(path, VERIFIERS, max_bytes=1024 * 1024)
        except SuiteError as exc:
            problems.extend(exc.problems)

    # a thread, so that a reader that blocks fails this test instead of hanging it
    reader = threading.Thread(target=load, daemon=True)
    reader.start()
    reader.join(timeout=30)
    assert not reader.is_alive(), "load_suite blocked on a special file"
    what = "a FIFO (named pipe)" if kind == "fifo" else "a device"
    assert problems == [f"{path} is {what}; only regular files are read"]


@pytest.mark.slow
def test_a_suite_over_the_size_cap_names_the_path_and_the_flag(pytester: pytest.Pytester) -> None:
    big = GOOD + "# padding\n" * 2000  # ~22 KB
    (pytester.path / "bench_big.toml").write_text(big)
    (pytester.path / "bench_good.toml").write_text(GOOD)
    result = _run(pytester, "--agentbench-max-file-mb", "0.01", "--continue-on-collection-errors")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            f"*bench_big.toml is too large ({len(big)} bytes); the limit is 0.01 MB "
            "(--agentbench-max-file-mb)*"
        ]
    )


@pytest.mark.slow
def test_the_size_cap_applies_to_datasets_and_comes_from_the_ini_file(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini("[pytest]\nagentbench_max_file_mb = 0.001\n")
    lines = "".join(f'{{"q": "{i}", "a": "{i}"}}\n' for i in range(100))
    (pytester.path / "data.jsonl").write_text(lines)
    (pytester.path / "bench_ds.toml").write_text(MANIFEST)
    result = _run(pytester)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*$.suite.dataset*data.jsonl is too large*0.001 MB*"])


def test_the_default_cap_refuses_a_huge_file(tmp_path: Path) -> None:
    path = tmp_path / "bench_huge.toml"
    with path.open("wb") as file:
        file.truncate(65 * 1024 * 1024)  # sparse: no disk space used
    with pytest.raises(SuiteError, match=r"bench_huge\.toml is too large \(68157440 bytes\)"):
        load_suite(path, VERIFIERS)


@pytest.mark.parametrize(("where", "value"), [("cli", "0"), ("cli", "-1"), ("ini", "lots")])
def test_a_bad_size_cap_is_a_usage_error(pytester: pytest.Pytester, where: str, value: str) -> None:
    (pytester.path / "bench_good.toml").write_text(GOOD)
    if where == "ini":
        pytester.makeini(f"[pytest]\nagentbench_max_file_mb = {value}\n")
        result = pytester.runpytest("--agentbench")
    else:
        result = pytester.runpytest("--agentbench", f"--agentbench-max-file-mb={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    output = result.stderr.str() + result.stdout.str()
    assert "agentbench max file mb: expected a number" in output
    assert "Traceback" not in output


BOMB = """
suite:
  template: "{input} {i}"
  vars:
    a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
    b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
    c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
    d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
    e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
    f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
    g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
    h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
    i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]
task:
  - id: boom
    input: hi
    target: hi
"""


def test_a_yaml_alias_bomb_is_refused_at_load(tmp_path: Path) -> None:
    pytest.importorskip("yaml")
    path = tmp_path / "bench_lol.yaml"
    path.write_text(BOMB)
    with pytest.raises(SuiteError) as caught:
        load_suite(path, VERIFIERS)
    assert caught.value.problems == [
        "the YAML file's aliases expand it by 490329036 values, over the limit of 1000000 "
        "(an alias bomb?); write the values out or use fewer aliases"
    ]
    # aliases within reason still work
    path.write_text(
        "suite:\n  verifier: &v {kind: exact, case_sensitive: false}\n"
        "task:\n  - {id: a, input: x, target: X, verifier: *v}\n"
        "  - {id: b, input: y, target: Y, verifier: *v}\n"
    )
    suite = load_suite(path, VERIFIERS)
    assert [task.verifier.options for task in suite.tasks] == [{"case_sensitive": False}] * 2


def test_a_manifest_maps_the_scripted_replies_from_a_field(pytester: pytest.Pytester) -> None:
    (pytester.path / "data.jsonl").write_text(
        '{"q": "3+4?", "a": "7", "reply": "7"}\n'
        '{"q": "4+4?", "a": "8", "reply": ["9", "8"]}\n'
        '{"q": "5+4?", "a": "9", "reply": ["1", "2"]}\n'
    )
    (pytester.path / "bench_ds.toml").write_text(
        '[suite]\ndataset = "data.jsonl"\nrepairs = 1\n'
        'fields = { input = "q", target = "a", scripted = "reply" }\n'
    )
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    answers = {}
    for path in pytester.path.rglob("result.json"):
        record = json.loads(path.read_text(encoding="utf-8"))
        answers[record["task_id"]] = [a["answer"] for a in record["attempts"]]
    assert answers == {"1": ["7"], "2": ["9", "8"], "3": ["1", "2"]}


def test_a_scripted_field_of_the_wrong_type_names_the_record_and_field(tmp_path: Path) -> None:
    (tmp_path / "data.jsonl").write_text('{"q": "a", "a": "1", "reply": 5}\n')
    path = tmp_path / "bench_ds.toml"
    path.write_text(MANIFEST.replace('target = "a"', 'target = "a", scripted = "reply"'))
    with pytest.raises(SuiteError) as caught:
        load_suite(path, VERIFIERS)
    assert caught.value.problems == [
        'task 1 at data.jsonl line 1: the field "reply" must be a string (one reply) or a '
        "list of replies; got integer 5"
    ]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["fifo", "device", "too big"])
def test_a_files_directory_that_cannot_be_copied_is_a_collection_error(
    pytester: pytest.Pytester, kind: str
) -> None:
    fixture = pytester.path / "fixture" / "sub"
    fixture.mkdir(parents=True)
    (fixture / "ok.txt").write_text("fine")
    args = ["--continue-on-collection-errors"]
    if kind == "fifo":
        os.mkfifo(fixture / "entry")
        reason = 'holds "sub/entry", which is a FIFO (named pipe); only regular files'
    elif kind == "device":
        (fixture / "entry").symlink_to("/dev/zero")
        reason = 'holds "sub/entry", which is a device; only regular files'
    else:
        (fixture / "entry").write_text("x" * 20_000)
        args += ["--agentbench-max-file-mb", "0.01"]
        reason = "holds more than 0.01 MB (--agentbench-max-file-mb) of files (at *)"
    (pytester.path / "bench_code.toml").write_text(
        '[suite]\nfiles = "fixture"\nverifier = { kind = "command", run = "true" }\n'
        '[[task]]\nid = "t"\ninput = "x"\nscripted = ["x"]\n'
    )
    (pytester.path / "bench_good.toml").write_text(GOOD)
    result = _run(pytester, *args)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [f"*$.suite.files names a directory that cannot seed a workspace: {reason}"]
    )
