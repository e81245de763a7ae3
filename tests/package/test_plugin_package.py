"""A third-party package, built and really pip-installed, plugs in through the
``pytest_agentbench`` entry point: the example package of docs/plugins.md (taken from the
page itself, so the docs cannot drift) adds a provider, a suite format, a verifier, a
tool, a stream observer and a report writer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))  # the helpers (*_support.py)
import docs_examples_support as dx
from ctrf_support import assert_ctrf_accepted
from schemas_support import validate_run

DOC = dx.ROOT / "docs" / "plugins.md"


def example_file(name: str) -> str:
    """The block of docs/plugins.md marked as the example package's file ``name``."""
    mark = f"package file {name} "
    found = [b.text for b in dx.blocks(DOC) if b.mark and b.mark.startswith(mark)]
    assert len(found) == 1, f"docs/plugins.md: expected one block marked for {name}"
    return found[0]


def install(root: Path, group: str) -> Path:
    """The example package, its entry point in ``group``, pip-installed (built by its own
    backend) into a folder the runs below put on PYTHONPATH; returns that folder."""
    source = root / "pytest-agentbench-foo"
    source.mkdir()
    pyproject = example_file("pyproject.toml")
    assert "[project.entry-points.pytest_agentbench]" in pyproject
    pyproject = pyproject.replace("entry-points.pytest_agentbench]", f"entry-points.{group}]")
    (source / "pyproject.toml").write_text(pyproject, encoding="utf-8")
    (source / "agentbench_foo.py").write_text(example_file("agentbench_foo.py"), encoding="utf-8")
    target = root / "site"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
         str(source)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert list(target.glob("pytest_agentbench_foo-*.dist-info/entry_points.txt"))
    return target


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install(tmp_path_factory.mktemp("pkg"), "pytest_agentbench")


SUITE_TOML = """
[suite]
mode = "agent"
tools = ["shout"]
verifier = { kind = "exact" }
[[task]]
id = "tool"
input = "shout hey"
target = "HEY!"
"""


@pytest.fixture
def run(pytester: pytest.Pytester, site: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Run ``pytest --agentbench`` in a subprocess that sees the installed package."""
    pytester.makefile(".lines", bench_shout="hello | say hello | HELLO\nlow | whisper hi | hi\n")
    pytester.makefile(".toml", bench_tool=SUITE_TOML)
    monkeypatch.setenv("PYTHONPATH", str(site))

    def runner(*args: str) -> pytest.RunResult:
        return pytester.runpytest_subprocess("--agentbench", "-p", "no:cacheprovider", *args)

    return runner


@pytest.mark.slow
def test_an_installed_package_adds_a_provider_format_verifier_tool_and_report(
    pytester: pytest.Pytester, run: Any
) -> None:
    result = run("--agentbench-model", "foo/any", "-v")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "agentbench: model foo/any*",
            "bench_shout.lines::hello PASSED*",
            "bench_shout.lines::low FAILED*",
            "bench_tool.toml::tool PASSED*",
        ]
    )
    run_dir = (pytester.path / "agentbench-results" / "latest").resolve()
    report = (run_dir / "foo-report.txt").read_text(encoding="utf-8").splitlines()
    # the tool task streams its final answer, each .lines task one: three events observed
    assert sorted(report) == sorted(
        [
            "shout::hello passed 1.0",
            "shout::low failed 0.0",
            "tool::tool passed 1.0",
            "3 streamed events",
        ]
    )
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    assert {t["task_id"]: t["usage"]["total"] for t in summary["tasks"]} == {
        "hello": 7,
        "low": 7,
        "tool": 14,
    }
    assert validate_run(run_dir)["result"] == 3


def test_an_unclaimed_provider_names_the_installed_plugins(
    pytester: pytest.Pytester, run: Any
) -> None:
    result = run("--agentbench-model", "bar/x")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*no model client for provider 'bar' (model bar/x): the built-in providers are "
            "openai, openai-responses, anthropic, openai-compat, scripted; installed plugins "
            "implementing pytest_agentbench_model_client: foo *"
        ]
    )


def test_a_blocked_package_is_not_loaded(run: Any) -> None:
    result = run("--agentbench-model", "foo/any", "-p", "no:foo")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*no model client for provider 'foo'*plugins*: none*"])


def test_its_ctrf_passes_the_official_checker(pytester: pytest.Pytester, run: Any) -> None:
    run("--agentbench-model", "foo/any")
    assert_ctrf_accepted(pytester.path / "agentbench-results" / "latest" / "ctrf.json")


@pytest.mark.slow
def test_a_package_may_register_through_pytest11_instead(
    pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory, monkeypatch: Any
) -> None:
    """pytest loads it (its hooks are checked once ours are declared); we do not load it
    twice."""
    site = install(tmp_path_factory.mktemp("pkg11"), "pytest11")
    pytester.makefile(".lines", bench_shout="hello | say hello | HELLO\n")
    monkeypatch.setenv("PYTHONPATH", str(site))
    result = pytester.runpytest_subprocess(
        "--agentbench", "-p", "no:cacheprovider", "--agentbench-model", "foo/any"
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["plugins: *foo-0.1.0*"])
    report = (pytester.path / "agentbench-results" / "latest" / "foo-report.txt").read_text()
    assert report.splitlines() == ["shout::hello passed 1.0", "1 streamed events"]


def test_a_package_that_fails_to_load_is_a_usage_error_naming_it(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: Any
) -> None:
    """An installed distribution (its metadata written as an installer would) whose
    entry point cannot be imported."""
    info = tmp_path / "pytest_agentbench_broken-0.2.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: pytest-agentbench-broken\nVersion: 0.2.0\n"
    )
    (info / "entry_points.txt").write_text("[pytest_agentbench]\nbroken = agentbench_broken\n")
    (tmp_path / "agentbench_broken.py").write_text("raise ImportError('needs libfoo')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    pytester.makefile(".toml", bench_tool=SUITE_TOML)
    result = pytester.runpytest_subprocess("--agentbench", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*agentbench plugin 'broken' (agentbench_broken, from pytest-agentbench-broken) "
            "failed to load: ImportError: needs libfoo*"
        ]
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")  # inert: not loaded
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
