"""Malformed suites never crash or hang loading or collection (seeded fuzz).

The cases come from ``tests/suite_fuzz_support.py`` (valid suites of every format, broken at
random). Every outcome must be a suite or a SuiteError naming the file; anything else,
or a case that does not finish, fails the test with the case number, its mutation steps
and the traceback, so it can be replayed. ``AGENTBENCH_FUZZ_CASES`` runs more cases
(default 1000 in-process, 200 through pytest); ``AGENTBENCH_FUZZ_SEED`` another seed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))  # the helpers (*_support.py)
import suite_fuzz_support as suite_fuzz

from pytest_agentbench.errors import SuiteError

CASES = int(os.environ.get("AGENTBENCH_FUZZ_CASES", "1000"))
SEED = int(os.environ.get("AGENTBENCH_FUZZ_SEED", str(suite_fuzz.SEED)))
COLLECT_CASES = max(200, CASES // 8)
#: Hang guards only (the loop normally ends in seconds); never a timing assertion.
CASE_LIMIT_S = 30.0
RUN_LIMIT_S = 1800.0


@pytest.mark.slow
def test_thousands_of_malformed_suites_load_or_fail_with_a_suite_error() -> None:
    """The real loader in a child process, each case under its own alarm: a hang is
    reported per case; a hang the alarm cannot break ends the child at the run limit."""
    script = Path(suite_fuzz.__file__)
    args = [str(script), "--seed", str(SEED), "--count", str(CASES)]
    args += ["--limit-s", str(CASE_LIMIT_S)]
    done = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=RUN_LIMIT_S
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    print(f"fuzz: seed {SEED}, {CASES} cases: {report['suite']} loaded, {report['error']} refused")
    assert report["suite"] + report["error"] == CASES
    shown = [f"case {f['case']} {f['steps']}:\n{f['problem']}" for f in report["failures"][:5]]
    assert not report["failures"], f"{len(report['failures'])} bad outcomes\n" + "\n".join(shown)
    # the generator must produce both kinds, or it tests nothing
    assert report["suite"] > CASES // 20 and report["error"] > CASES // 2


def test_a_files_directory_name_too_long_for_the_os_is_a_suite_error(tmp_path: Path) -> None:
    """Found by the fuzz: ``files = "<300 characters>"`` raised OSError (ENAMETOOLONG)."""
    path = tmp_path / "bench_long.toml"
    path.write_text(f'[suite]\nfiles = "{"x" * 300}"\n[[task]]\ninput = "hi"\n')
    with pytest.raises(SuiteError) as info:
        suite_fuzz.real_loader()(path)
    assert str(info.value).startswith(f"{path}: invalid suite (1 problem)")
    assert "$.suite.files names no directory next to the suite file" in str(info.value)


def test_a_table_with_a_key_that_is_not_a_string_still_has_its_keys_checked(
    tmp_path: Path,
) -> None:
    """Found by the run-time fuzz: a YAML ``[suite]`` with a date as a key hid every
    schema problem below it, and a verifier without ``kind`` then raised KeyError."""
    path = tmp_path / "bench_key.yaml"
    path.write_text("suite:\n  2020-01-01: 1\n  verifier: {type: object}\ntask:\n- input: x\n")
    with pytest.raises(SuiteError) as info:
        suite_fuzz.real_loader()(path)
    assert "$.suite has a key that is not a string: datetime.date(2020, 1, 1)" in str(info.value)
    assert '$.suite.verifier is missing required key "kind"' in str(info.value)


@pytest.mark.slow
def test_collection_of_malformed_suites_shows_no_traceback(pytester: pytest.Pytester) -> None:
    """A few hundred cases, one folder each, collected by one real ``pytest --agentbench
    --collect-only``: each case the loader refuses is exactly one collection error
    naming its file, each it accepts collects, and nothing shows a traceback."""
    load = suite_fuzz.real_loader()
    expected: dict[str, str] = {}
    for number in range(COLLECT_CASES):
        case = suite_fuzz.make_case(number, SEED + 1, own_name=True)
        outcome = suite_fuzz.check_case(case, pytester.path, load, CASE_LIMIT_S)
        assert outcome in ("suite", "error"), f"case {number} {case.steps}: {outcome}"
        expected[f"case{number}/{case.suite}"] = outcome
    result = pytester.runpytest_subprocess(
        "--agentbench", "--collect-only", "-q", "-p", "no:cacheprovider", timeout=600
    )
    out = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in out
    assert "INTERNALERROR" not in out
    errors = {line.split("ERROR collecting ", 1)[1].split(" ")[0] for line in out.splitlines()
              if "ERROR collecting " in line}  # fmt: skip
    refused = {name for name, outcome in expected.items() if outcome == "error"}
    # Cases share the seeds' suite names, so a case the loader accepts alone may repeat
    # another case's suite and task id: that is a collection error of its own (two tasks
    # would share one artifact folder), and the only one allowed beyond the loader's.
    duplicates = errors - refused
    for name in duplicates:
        block = out.split(f"{name}: invalid suite (", 1)[1].split("\n_", 1)[0]
        assert "already has a task" in block, f"{name}: {block}"
    assert errors - duplicates == refused
    for name in refused:
        assert f"{name}: invalid suite (" in out, name
    for name in set(expected) - refused - duplicates:
        assert f"{name}::" in out, name
    print(
        f"fuzz collect: {COLLECT_CASES} cases, {len(refused)} collection errors, "
        f"{len(duplicates)} duplicate suite and task ids"
    )


#: The run-time leg: how many mutated suites that load run in one real pytest run, and
#: the task timeout they get (a hang guard for replies that hang or stream slowly).
RUN_CASES = max(80, CASES // 12)
RUN_TASK_LIMIT_S = 2.0
#: Cases (of seed SEED + 2) that found a class, always run first: 2600 seeds an agent
#: workspace from ``files = "../.."`` (a folder holding the results: the copy copied
#: itself without end); 3181 is a YAML suite with a date as a key (the loader raised
#: KeyError). More than 3000 cases in, so the default sample would not reach them.
FOUND_CASES = (2600, 3181)


@pytest.mark.slow
def test_mutated_suites_that_load_run_to_a_recorded_outcome(pytester: pytest.Pytester) -> None:
    """Suites the loader accepts must also *run*: a seeded sample of them, each in its
    own folder under its own suite name, run together by one real ``pytest --agentbench``
    against the scripted provider. Nothing may show a traceback, every collected task is
    one record in summary.json and one test in ctrf.json, and the exit status is that of
    a run whose tasks passed or failed (0 or 1)."""
    load = suite_fuzz.real_loader()
    taken: list[suite_fuzz.Case] = []
    expected: set[str] = set()
    found = FOUND_CASES if SEED == suite_fuzz.SEED else ()
    sample = (number for number in range(RUN_CASES * 20) if number not in found)
    for number in (*found, *sample):
        if len(taken) == RUN_CASES:
            break
        case = suite_fuzz.make_case(number, SEED + 2, run_limit_s=RUN_TASK_LIMIT_S)
        outcome = suite_fuzz.check_case(case, pytester.path, load, CASE_LIMIT_S)
        assert outcome in ("suite", "error"), f"case {case.number} {case.steps}: {outcome}"
        folder = pytester.path / f"case{case.number}"
        if outcome == "error":
            shutil.rmtree(folder)
            continue
        taken.append(case)
        suite = load(folder / case.suite)
        expected.update(f"case{case.number}/{case.suite}::{task.id}" for task in suite.tasks)
    assert len(taken) == RUN_CASES, "the generator must give enough suites that load"
    result = pytester.runpytest_subprocess(
        "--agentbench", "-q", "-p", "no:cacheprovider", "-W", "ignore", timeout=900
    )
    out = result.stdout.str() + result.stderr.str()
    steps = {f"case{c.number}": c.steps for c in taken}
    assert "Traceback" not in out, out[-6000:]
    assert "INTERNALERROR" not in out, out[-6000:]
    assert result.ret in (0, 1), f"exit status {result.ret}\n{out[-6000:]}"
    run = (pytester.path / "agentbench-results" / "latest").resolve()
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    ctrf = json.loads((run / "ctrf.json").read_text(encoding="utf-8"))
    recorded = [task["nodeid"] for task in summary["tasks"]]
    tested = [test["name"] for test in ctrf["results"]["tests"]]
    skipped = summary["coverage"]["skipped"]
    missing = sorted(expected - set(recorded))
    assert not missing or skipped, [(name, steps[name.split("/")[0]]) for name in missing[:5]]
    assert len(recorded) == len(set(recorded)) == len(expected) - skipped
    assert sorted(tested) == sorted(recorded)
    assert summary["coverage"]["tasks"] + skipped == len(expected)
    print(f"fuzz run: {RUN_CASES} suites, {len(expected)} tasks, exit {result.ret}")
