"""Broken suites: one clear collection error each, all reported together, nothing sent."""

from __future__ import annotations

import pytest

GOOD = """
[suite]
verifier = { kind = "exact" }
[[task]]
id = "fine"
input = "say hi"
target = "hi"
scripted = ["hi"]
"""

BROKEN = {
    "bench_syntax.toml": (
        "[suite\nname = 1\n",
        ["*TOML syntax error*line 1, column 7*"],
    ),
    "bench_schema.toml": (
        '[suite]\nrepairs = "many"\n[[task]]\nid = "a"\ninput = "x"\n',
        ['*$.suite.repairs must be an integer; got string "many"'],
    ),
    "bench_dupe.toml": (
        '[[task]]\nid = "a"\ninput = "x"\ntarget = "x"\n[[task]]\nid = "a"\ninput = "y"\n',
        ['*task 2 ("a"): $.task[1].id repeats the id "a" of task 1*'],
    ),
    "bench_kind.toml": (
        '[[task]]\nid = "a"\ninput = "x"\nverifier = { kind = "nuber" }\n',
        ['*task 1 ("a"): $.task[0].verifier.kind must be one of *number*got "nuber"*'],
    ),
    "bench_template.toml": (
        '[suite]\ntemplate = "{input} in {unit}"\n[[task]]\nid = "a"\ninput = "x"\n',
        ['*task 1 ("a"): $.suite.template uses {unit}, which is not defined*'],
    ),
}


def literal_brackets(pattern: str) -> str:
    """fnmatch reads ``[1]`` as a character class; make brackets literal."""
    return pattern.replace("[", "[[]")


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_each_kind_of_broken_suite_is_one_clear_collection_error(
    pytester: pytest.Pytester, name: str
) -> None:
    text, patterns = BROKEN[name]
    (pytester.path / name).write_text(text)
    (pytester.path / "bench_good.toml").write_text(GOOD)
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [f"*ERROR collecting {name}*", f"{name}: invalid suite (1 problem)"]
        + [literal_brackets(p) for p in patterns]
    )
    out = result.stdout.str()
    assert "Traceback" not in out
    assert "pytest_agentbench/" not in out
    # a collection error stops the run before any task is sent
    assert not list(pytester.path.rglob("result.json"))


def test_all_broken_suites_are_reported_together(pytester: pytest.Pytester) -> None:
    for name, (text, _) in BROKEN.items():
        (pytester.path / name).write_text(text)
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=len(BROKEN))
    for name in BROKEN:
        result.stdout.fnmatch_lines([f"*ERROR collecting*{name}*"])


def test_continue_on_collection_errors_runs_the_valid_suites(pytester: pytest.Pytester) -> None:
    text, _ = BROKEN["bench_kind.toml"]
    (pytester.path / "bench_kind.toml").write_text(text)
    (pytester.path / "bench_good.toml").write_text(GOOD)
    result = pytester.runpytest(
        "--agentbench", "--continue-on-collection-errors", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1, errors=1)
    assert len(list(pytester.path.rglob("result.json"))) == 1


def test_a_scripted_reply_with_an_unknown_key_is_a_collection_error(
    pytester: pytest.Pytester,
) -> None:
    (pytester.path / "bench_reply.toml").write_text(
        '[[task]]\nid = "a"\ninput = "x"\nscripted = [{ txet = "oops" }]\n'
    )
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([literal_brackets("*$.task[0].scripted[0]*txet*")])
