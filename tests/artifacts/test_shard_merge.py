"""Sharding partitions the tasks the same way everywhere; merging shard runs gives one
report with every task, accepted by the independent CTRF checker."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from ctrf_support import assert_ctrf_accepted

TASKS = "".join(
    f'\n[[task]]\nid = "t{i:02d}"\ninput = "say {i}"\ntarget = "{i}"\n'
    f'scripted = ["{i if i % 4 else "wrong"}"]\n'
    for i in range(24)
)
SUITE = '[suite]\nname = "many"\nverifier = { kind = "exact" }\n' + TASKS


def run_shard(pytester: pytest.Pytester, spec: str | None, out: str, *extra: str) -> Path:
    args = ["--agentbench", "--agentbench-out", out, "-p", "no:cacheprovider", *extra]
    if spec:
        args += ["--agentbench-shard", spec]
    pytester.runpytest(*args)
    return (pytester.path / out / "latest").resolve()


def names(run: Path) -> list[str]:
    ctrf = json.loads((run / "ctrf.json").read_text())
    return [t["name"] for t in ctrf["results"]["tests"]]


def merge(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_agentbench", "merge", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


@pytest.mark.slow
def test_shards_partition_the_tasks_and_merge_back_into_one_report(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".toml", bench_many=SUITE)
    full = names(run_shard(pytester, None, "full"))
    shards = [run_shard(pytester, f"{k}/3", f"shard{k}") for k in (1, 2, 3)]
    parts = [names(run) for run in shards]
    assert all(parts), "every shard of 24 tasks should get some"
    assert sorted(n for part in parts for n in part) == sorted(full)  # union, no overlap

    out = pytester.path / "merged"
    merged = merge(*map(str, shards), "--out", str(out))
    assert merged.returncode == 0, merged.stderr
    assert "merged 3 run(s): 24 tasks" in merged.stdout
    assert sorted(names(out)) == sorted(full)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["totals"]["outcomes"]["failed"] == 6
    assert summary["totals"]["score"] == 0.75
    assert_ctrf_accepted(out / "ctrf.json", *(run / "ctrf.json" for run in shards))


def test_the_partition_does_not_depend_on_order_or_paths(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_many=SUITE)
    first = names(run_shard(pytester, "2/3", "a"))
    (pytester.path / "sub").mkdir()
    # same suite, other folder, tasks reversed: the same task ids land in shard 2
    head, _, rest = SUITE.partition("\n[[task]]")
    tasks = ["[[task]]" + t for t in ("\n[[task]]" + rest).split("\n[[task]]") if t]
    (pytester.path / "sub" / "bench_many.toml").write_text(head + "\n" + "\n".join(tasks[::-1]))
    (pytester.path / "bench_many.toml").unlink()
    second = names(run_shard(pytester, "2/3", "b"))
    assert sorted(n.split("::")[-1] for n in first) == sorted(n.split("::")[-1] for n in second)


def test_merge_refuses_runs_with_different_settings_unless_forced(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".toml", bench_many=SUITE)
    a = run_shard(pytester, "1/2", "a")
    b = run_shard(pytester, "2/2", "b", "--agentbench-max-tokens", "64")
    refused = merge(str(a), str(b), "--out", str(pytester.path / "m"))
    assert refused.returncode == 2
    assert "different settings" in refused.stderr and "--force" in refused.stderr
    forced = merge(str(a), str(b), "--out", str(pytester.path / "m"), "--force")
    assert forced.returncode == 0, forced.stderr
    summary = json.loads((pytester.path / "m" / "summary.json").read_text())
    assert summary["settings"]["fingerprint"] == "mixed"


@pytest.mark.parametrize("spec", ["0/3", "4/3", "two/3", "3"])
def test_a_bad_shard_spec_is_a_usage_error(pytester: pytest.Pytester, spec: str) -> None:
    pytester.makefile(".toml", bench_many=SUITE)
    result = pytester.runpytest("--agentbench", "--agentbench-shard", spec)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*expected K/N with 1 <= K <= N*"])


def test_merge_of_a_folder_that_is_not_a_run_says_so(tmp_path: Path) -> None:
    result = merge(str(tmp_path), "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    assert "no summary.json" in result.stderr


@pytest.mark.slow
def test_pytest_split_groups_partition_the_tasks_and_merge(pytester: pytest.Pytester) -> None:
    """pytest-split (``--splits N --group K``) deselects items like any plugin: each group
    runs and reports only its own tasks, and the groups merge into the full run."""
    pytest.importorskip("pytest_split", reason="pytest-split is a dev extra")
    pytester.makefile(".toml", bench_many=SUITE)
    full = names(run_shard(pytester, None, "full"))
    groups = [
        run_shard(pytester, None, f"group{k}", "--splits", "3", "--group", str(k))
        for k in (1, 2, 3)
    ]
    parts = [names(run) for run in groups]
    assert all(len(part) == 8 for part in parts), [len(part) for part in parts]
    assert sorted(n for part in parts for n in part) == sorted(full)  # union, no overlap
    out = pytester.path / "merged"
    merged = merge(*map(str, groups), "--out", str(out))
    assert merged.returncode == 0, merged.stderr
    assert sorted(names(out)) == sorted(full)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["totals"]["tasks"] == 24
