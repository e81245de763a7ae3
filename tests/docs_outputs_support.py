"""Checks of expected-output blocks: each compares a block with what a real run prints.

A check takes the block and the test's FixtureRequest (for the run it needs, e.g. the
``example_run`` fixture of tests/package/test_docs_examples.py) and fails with the difference.
OUTPUT_CHECKS maps (page, first line) to the check; a new output block needs one here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import docs_examples_support as dx
import pytest
from suite_fuzz_support import real_loader

from pytest_agentbench.errors import SuiteError

ROOT = dx.ROOT

VOLATILE = [
    (re.compile(r"\d{8}-\d{6}-[0-9a-f]{6}"), "<run-id>"),
    (re.compile(r"wall \d+\.\ds"), "wall <s>"),
    (re.compile(r" at \d+(?:\.\d+)? s\b"), " at <s>"),  # a loop kill (core/durations.py)
    (re.compile(r"· \d+\.\ds ·"), "· <s> ·"),  # the judge's wall time
]


def normalised(text: str) -> list[str]:
    for pattern, replacement in VOLATILE:
        text = pattern.sub(replacement, text)
    return text.strip("\n").splitlines()


def check_readme_summary(block: dx.Block, request: pytest.FixtureRequest) -> None:
    out, _ = request.getfixturevalue("example_run")
    section = out.split(block.first, 1)[1].split("\n=====", 1)[0]
    got, want = normalised(block.first + section), normalised(block.text)
    assert got == want, "\n".join(["got:", *got, "want:", *want])


def check_run_layout(block: dx.Block, request: pytest.FixtureRequest) -> None:
    _, results = request.getfixturevalue("example_run")
    assert (results / "latest").is_symlink()
    stack: list[tuple[int, str]] = []
    checked = 0
    for line in block.text.splitlines():
        name = line.strip().split(" ")[0]
        if not name or not ("/" in name or "." in name) or "→" in line:
            continue
        depth = len(line) - len(line.lstrip())
        while stack and stack[-1][0] >= depth:
            stack.pop()
        path = "/".join([p for _, p in stack] + [name]).replace("//", "/")
        pattern = re.sub(r"<[^>]+>(\[<[^>]+>\])?", "*", path).removeprefix("agentbench-results/")
        assert list(results.glob(pattern.rstrip("/"))), f"{path}: nothing like it in a real run"
        checked += 1
        if name.endswith("/"):
            stack.append((depth, name.rstrip("/")))
    assert checked >= 6


def check_tool_cap_marker(block: dx.Block, request: pytest.FixtureRequest) -> None:
    from pytest_agentbench.runner.tools import cap_output

    numbers = [int(n) for n in re.findall(r"\d+", block.first)]
    omitted, limit = numbers
    capped, cut = cap_output("x" * (omitted + limit), limit)
    assert cut and block.first in capped.splitlines()


def check_failure_lines_form(block: dx.Block, request: pytest.FixtureRequest) -> None:
    """Output of a real model: its form and the task names it cites are checked."""
    names = set()
    for path in (ROOT / "example_suites").glob("bench_*"):
        suite = real_loader()(path)
        names.update(f"{suite.name}::{task.id}" for task in suite.tasks)
    for line in block.text.splitlines():
        match = re.match(r"✗ (\S+::\S+): reward [\d.]+ — \S", line)
        assert match, f"not a failure line: {line}"
        assert match.group(1) in names, f"{match.group(1)} is no example task"


def check_bench_output(block: dx.Block, request: pytest.FixtureRequest) -> None:
    """Output of a bench script (its numbers vary): the script the mark (or BENCH_SCRIPTS)
    names exists, and every word of the output's heading lines is in its source."""
    named = re.search(r"bench/\w+\.py", block.mark or "")
    script = ROOT / (named.group(0) if named else BENCH_SCRIPTS[block.doc])
    source = script.read_text(encoding="utf-8")
    headings = [line for line in block.text.splitlines() if not re.search(r"\d", line)]
    assert headings
    for line in headings:
        for word in line.split():
            assert word in source, f"{script.name} never prints {word!r}"


#: The suites behind docs/failure-reasons.md's example: two code tasks (five of seven
#: tests pass; a solution that hangs), a verifier with metrics and no test report, and an
#: answer cut at the output-token limit. ``rubric`` is a plugin's verifier (conftest.py).
FAILURE_REASON_FILES = {
    "conftest.py": (
        "import pytest\n"
        "from pytest_agentbench.verifiers.base import FunctionVerifier, Verdict\n\n"
        "def rubric(check):\n"
        '    return Verdict(reward=check.options["reward"], '
        'metrics=dict(check.options["metrics"]))\n\n'
        "@pytest.hookimpl\n"
        "def pytest_agentbench_verifiers():\n"
        '    return [FunctionVerifier(kind="rubric", function=rubric)]\n'
    ),
    "bench_code.toml": (
        '[suite]\nname = "code"\n'
        '[[task]]\nid = "add"\ninput = "Write add(a, b)."\n'
        'scripted = ["def add(a, b):\\n    return a + b\\n"]\n'
        'verifier = { kind = "python_tests" }\ntarget = """\nfrom solution import add\n'
        "def test_one(): assert add(1, 1) == 2\ndef test_two(): assert add(1, 2) == 3\n"
        "def test_three(): assert add(0, 0) == 0\ndef test_four(): assert add(-1, 1) == 0\n"
        "def test_five(): assert add(2, 2) == 4\n"
        'def test_fail(): assert 1 == 2, "one is not two"\n'
        'def test_other(): assert add(2, 2) == 5\n"""\n'
        '[[task]]\nid = "slow"\ninput = "Write small()."\n'
        'scripted = ["def small():\\n    while True:\\n        pass\\n"]\n'
        'verifier = { kind = "python_tests", timeout_s = 3 }\n'
        'target = """\nfrom solution import small\n'
        'def test_small(): assert small() == 1\ndef test_big(): assert small() < 10\n"""\n'
    ),
    "bench_math.toml": (
        '[suite]\nname = "math"\n[[task]]\nid = "gcd"\ninput = "Write gcd(a, b)."\n'
        'scripted = ["def gcd(a, b): ..."]\nverifier = { kind = "rubric", reward = 0.5, '
        "metrics = { tests_passed = 2, tests_total = 4, style = 1 } }\n"
    ),
    "bench_essay.toml": (
        '[suite]\nname = "essay"\nmax_tokens = 512\n[[task]]\nid = "short"\n'
        'input = "Write a short essay."\nscripted = [{ text = "", finish_reason = "length" }]\n'
        'verifier = { kind = "rubric", reward = 0, metrics = { words = 0 } }\n'
    ),
}


def check_failure_reasons(block: dx.Block, request: pytest.FixtureRequest) -> None:
    """The failure lines a real run of FAILURE_REASON_FILES prints, in its order (most
    severe first), with its details pointer. Normalised: the run id, and the measured
    time in ``timed out after 3.0s`` (the sandbox's clock, a tenth more under load)."""
    pytester: pytest.Pytester = request.getfixturevalue("pytester")
    for name, text in FAILURE_REASON_FILES.items():
        (pytester.path / name).write_text(text, encoding="utf-8")
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    out = result.stdout.str()
    start = out.index("✗ ")
    shown = out[start:].split("\nresults: ", 1)[0]

    def plain(text: str) -> list[str]:
        text = re.sub(r"\d{8}-\d{6}-[0-9a-f]{6}", "<run>", text)
        text = re.sub(r"timed out after \d+\.\ds", "timed out after <s>", text)
        return text.strip("\n").splitlines()

    assert plain(shown) == plain(block.text)


def check_circuit_open(block: dx.Block, request: pytest.FixtureRequest) -> None:
    """The breaker's message, from a real client that gets the documented error from the
    scripted server as often as the message says; only the server's URL differs."""
    from pytest_agentbench.errors import ModelError
    from pytest_agentbench.models.base import ModelRequest, ModelSpec
    from pytest_agentbench.models.breaker import BreakerClient, CircuitBreaker
    from pytest_agentbench.models.openai_chat import OpenAIChatClient
    from pytest_agentbench.scripted.server import ScriptedServer

    pattern = (
        r"not sent: (\d+) identical errors in a row: "
        r"openai/(\S+): HTTP (\d+) from (\S+)/chat/completions: (.+)"
    )
    match = re.fullmatch(pattern, block.first)
    assert match, f"not a circuit-open line of the chat client: {block.first}"
    count, model, status, base, message = match.groups()
    error = {"error": {"status": int(status), "message": message}}
    ask = ModelRequest(messages=({"role": "user", "content": "hi"},), timeout_s=30)
    with ScriptedServer({model: [error]}) as server:
        inner = OpenAIChatClient(ModelSpec("openai", model), server.url, "k", trust_env=False)
        client = BreakerClient(inner, CircuitBreaker())  # the default threshold
        seen: list[ModelError] = []
        while not seen or type(seen[-1]).__name__ != "CircuitOpen":
            assert len(seen) < 50, "the breaker never opened"
            try:
                client.generate(ask)
            except ModelError as exc:
                seen.append(exc)
        inner.close()
        shown = str(seen[-1]).replace(server.url, base)
    assert shown == block.first
    assert len(seen) == int(count) + 1


def _check_suite_error(
    name: str, text: str, extra: dict[str, str] | None = None
) -> Callable[[dx.Block, pytest.FixtureRequest], None]:
    """A documented collection error, checked against a real load of the suite it
    describes (``name`` with ``text``, and ``extra`` files beside it: path → text)."""

    def check(block: dx.Block, request: pytest.FixtureRequest) -> None:
        folder = request.getfixturevalue("tmp_path")
        for path, content in {name: text, **(extra or {})}.items():
            (folder / path).parent.mkdir(parents=True, exist_ok=True)
            (folder / path).write_text(content, encoding="utf-8")
        request.getfixturevalue("monkeypatch").chdir(folder)
        with pytest.raises(SuiteError) as info:
            real_loader()(Path(name))
        real = str(info.value).splitlines()
        shown = block.text.strip("\n").splitlines()
        assert len(real) == len(shown), "\n".join(real)
        for want, got in zip(shown, real, strict=True):
            pattern = re.escape(want).replace("…", ".*")
            assert re.fullmatch(pattern, got), f"\ndoc:  {want}\nreal: {got}"

    return check


check_suite_error = _check_suite_error(
    "bench_math.toml",
    '[suite]\nrepairs = 12\n[[task]]\nid = "apples"\ninput = "3 + 4?"\ninptu = "3 + 4?"\n'
    '[[task]]\ninput = "2 + 2?"\nverifier = { kind = "nuber" }\n',
)
check_verifier_setup_error = _check_suite_error(
    "bench_quiz.toml",
    '[suite]\nverifier = { kind = "regex", pattern = "(a" }\n'
    '[[task]]\nid = "capital"\ninput = "The capital of France?"\n'
    'choices = ["Paris", "Lyon"]\ntarget = "D"\nverifier = { kind = "choice" }\n'
    '[[task]]\nid = "mail"\ninput = "Write an email address."\n',
)

check_dataset_rows_error = _check_suite_error(
    "bench_gsm8k.toml",
    (ROOT / "example_datasets" / "bench_gsm8k.toml").read_text(encoding="utf-8"),
    {
        "data/gsm8k.jsonl": '{"question": "1 + 1?", "answer": "1 + 1 = 2\\n#### 2"}\n'
        '{"question": "2 + 2?", "answer": "no marker here: 4"}\n'
        '{"question": "q", "answer": \n'
        '{"answer": "#### 3"}\n'
    },
)


def check_partial_coverage(block: dx.Block, request: pytest.FixtureRequest) -> None:
    """summary.json's partial flag and coverage, from a real run that deselects tasks:
    the same keys, values of the same types, and counts that add up as documented."""
    import json
    import subprocess
    import sys

    shown = json.loads(block.text)
    folder = request.getfixturevalue("tmp_path")
    tasks = "".join(
        f'[[task]]\nid = "t{n}"\ninput = "Say {n}."\ntarget = "{n}"\nscripted = ["{n}"]\n'
        for n in range(3)
    )
    (folder / "bench_three.toml").write_text(tasks, encoding="utf-8")
    subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--agentbench", "-k", "t1"],
        cwd=folder, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    summary = json.loads((folder / "agentbench-results/latest/summary.json").read_text())
    real = {key: summary[key] for key in shown}
    assert real["partial"] is True
    assert set(real["coverage"]) == set(shown["coverage"])
    for key, value in shown["coverage"].items():
        assert type(real["coverage"][key]) is type(value), key
    for coverage in (shown["coverage"], real["coverage"]):
        assert coverage["planned"] == coverage["selected"] + coverage["deselected"]
        assert coverage["tasks"] == coverage["selected"] - coverage["skipped"]
    assert real["coverage"]["reasons"] == ["2 deselected"]


#: Bench output blocks on pages without marks: page -> the script that prints them.
BENCH_SCRIPTS = {"docs/reliability.md": "bench/clients.py"}


def check_model_table(block: dx.Block, request: pytest.FixtureRequest) -> None:
    """The suites × models table and the comparison a real two-model run of the example
    arithmetic suite prints (the command the page shows)."""
    pytester: pytest.Pytester = request.getfixturevalue("pytester")
    suite = ROOT / "example_suites" / "bench_arithmetic.toml"
    models = ["--agentbench-model", "big=scripted", "--agentbench-model", "small=scripted"]
    result = pytester.runpytest("--agentbench", str(suite), *models, "-p", "no:cacheprovider")
    out = result.stdout.str()
    start = out.index(block.first)
    shown = out[start:].split("\ntokens ", 1)[0]
    assert normalised(shown) == normalised(block.text)


#: Output blocks and the run that produces them: (page, first line) -> check.
def check_controls_output(block: dx.Block, request: pytest.FixtureRequest) -> None:
    """The controls block of a real ``--agentbench-controls`` run of the page's own
    planted suite (its ``loose`` TOML block), line for line."""
    import subprocess
    import sys

    page = ROOT / block.doc
    suite = next(b for b in dx.blocks(page) if b.lang == "toml" and 'name = "loose"' in b.text)
    where = request.getfixturevalue("tmp_path")
    (where / "bench_loose.toml").write_text(suite.text, encoding="utf-8")
    options = ["-p", "no:randomly", "-p", "no:cacheprovider", "bench_loose.toml"]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--agentbench", "--agentbench-controls", *options],
        cwd=where,
        capture_output=True,
        text=True,
        timeout=300,  # a hang guard only
    )
    lines = run.stdout.splitlines()
    start = lines.index(block.first)
    assert lines[start : start + len(block.text.splitlines())] == block.text.splitlines()


def _quiz(name: str, replies: list[str], **task: str) -> str:
    extra = "".join(f"{key} = {value}\n" for key, value in task.items())
    return f'[suite]\nname = "{name}"\n' + "".join(
        f'[[task]]\nid = "t{i}"\n{extra}scripted = [{reply}]\n' for i, reply in enumerate(replies)
    )


#: docs/comparing-models.md: a baseline where all eight tasks pass; now six fail, one
#: passes and one meets a provider outage (a harness error, excluded).
BASELINE_BEFORE = _quiz("base", ['"ok"'] * 8, input='"say ok"', target='"ok"')
BASELINE_AFTER = _quiz(
    "base",
    ['"no"'] * 6
    + ['"ok"', '{ text = "ok", error = { status = 503, times = 9, retry_after = 0 } }'],
    input='"say ok"',
    target='"ok"',
)
#: docs/robustness.md: seven two-option tasks the scripted model answers A (right).
ROBUSTNESS_SUITE = _quiz(
    "rob", ['"A"'] * 7, input='"Is it so?"', choices='["yes", "no"]', target='"A"'
).replace('[suite]\nname = "rob"\n', '[suite]\nname = "rob"\nverifier = { kind = "choice" }\n')


def _contains(block: dx.Block, out: str) -> None:
    want, got = normalised(block.text), normalised(out)
    starts = [i for i, line in enumerate(got) if line == want[0]]
    assert starts, f"no line {want[0]!r} in the run's output:\n{out[-3000:]}"
    seen = got[starts[0] : starts[0] + len(want)]
    assert seen == want, "\n".join(["got:", *seen, "want:", *want])


def _run(folder: Path, *args: str) -> str:
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--agentbench", *args],
        cwd=folder, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    return done.stdout + done.stderr


def check_baseline_comparison(block: dx.Block, request: pytest.FixtureRequest) -> None:
    """The comparison a real run against a real baseline run prints (BASELINE_*)."""
    folder: Path = request.getfixturevalue("tmp_path")
    (folder / "bench_base.toml").write_text(BASELINE_BEFORE, encoding="utf-8")
    _run(folder, "--agentbench-out", "before")
    (folder / "bench_base.toml").write_text(BASELINE_AFTER, encoding="utf-8")
    out = _run(folder, "--agentbench-max-retries", "0", "--agentbench-baseline", "before/latest")
    _contains(block, out)


def check_robustness_lines(block: dx.Block, request: pytest.FixtureRequest) -> None:
    """The robustness lines of a real run of ROBUSTNESS_SUITE, shuffle and case, seed 7."""
    folder: Path = request.getfixturevalue("tmp_path")
    (folder / "bench_rob.toml").write_text(ROBUSTNESS_SUITE, encoding="utf-8")
    out = _run(folder, "--agentbench-perturb", "shuffle,case", "--agentbench-seed", "7")
    _contains(block, out)


def check_plan_output(block: dx.Block, request: pytest.FixtureRequest) -> None:
    """What ``python -m pytest_agentbench plan`` prints for the page's command."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "pytest_agentbench", "plan", "--difference", "0.1", "--rate",
         "0.7", "--epochs", "1,3"],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    got, want = normalised(done.stdout), normalised(block.text)
    assert got == want, "\n".join(["got:", *got, "want:", *want])


def _judged_example(*args: str) -> list[str]:
    """The terminal summary of a run of the judged example suite with its labels."""
    import shutil
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        shutil.copytree(ROOT / "example_suites", Path(folder) / "example_suites")
        done = subprocess.run(
            [
                sys.executable,
                *("-m", "pytest", "-p", "no:cacheprovider", "--agentbench"),
                "example_suites/bench_support_replies.toml",
                *("--agentbench-judge-labels", "example_suites/support_replies_labels.jsonl"),
                *args,
            ],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=600,
        )
    return normalised(done.stdout)


def check_judge_calibration(block: dx.Block, request: pytest.FixtureRequest) -> None:
    got = _judged_example("--agentbench-calibrate")
    want = normalised(block.text)
    assert all(line in got for line in want), "\n".join(["got:", *got, "want:", *want])


def check_judge_corrected(block: dx.Block, request: pytest.FixtureRequest) -> None:
    got = _judged_example("--agentbench-judge-min-kappa", "0.6")
    want = normalised(block.text)
    assert all(line in got for line in want), "\n".join(["got:", *got, "want:", *want])


OUTPUT_CHECKS: dict[tuple[str, str], Callable[[dx.Block, pytest.FixtureRequest], None]] = {
    ("README.md", "===="): check_readme_summary,
    ("README.md", "agentbench-results/<run-id>/"): check_run_layout,
    ("docs/agent.md", "[… "): check_tool_cap_marker,
    ("docs/real-model.md", "✗ "): check_failure_lines_form,
    ("docs/failure-reasons.md", "✗ "): check_failure_reasons,
    ("docs/reliability.md", "  protocol  "): check_bench_output,
    ("docs/reliability.md", "not sent: "): check_circuit_open,
    ("docs/suite-format.md", "bench_math.toml: invalid suite"): check_suite_error,
    ("docs/verifiers.md", "bench_quiz.toml: invalid suite"): check_verifier_setup_error,
    ("docs/run-reports.md", "{"): check_partial_coverage,
    ("docs/comparing-models.md", "scores by suite × model"): check_model_table,
    ("docs/trust-your-suite.md", "controls: "): check_controls_output,
    ("docs/comparing-models.md", "against the baseline"): check_baseline_comparison,
    ("docs/robustness.md", "robustness "): check_robustness_lines,
    ("docs/datasets.md", "bench_gsm8k.toml: invalid suite"): check_dataset_rows_error,
    ("docs/statistics.md", "base rate "): check_plan_output,
    ("docs/judges.md", "judge: "): check_judge_calibration,
    ("docs/judges.md", "judged pass rate"): check_judge_corrected,
}
