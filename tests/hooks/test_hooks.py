"""Third-party verifiers and model clients plug in through the same hooks as the built-ins."""

from __future__ import annotations

import pytest

CONFTEST = """
import pytest
from pytest_agentbench.verifiers import FunctionVerifier, Verdict

def _palindrome(check):
    text = check.answer.strip().lower()
    ok = text == text[::-1] and len(text) >= check.options.get("min_length", 1)
    return Verdict(1.0 if ok else 0.0, metrics={"palindrome": int(ok)},
                   feedback="" if ok else "That is not a palindrome.")

@pytest.hookimpl
def pytest_agentbench_verifiers():
    schema = {"type": "object", "properties": {"min_length": {"type": "integer"}},
              "additionalProperties": False}
    return [FunctionVerifier("palindrome", _palindrome, schema)]
"""

SUITE = """
[suite]
verifier = { kind = "palindrome", min_length = 3 }
[[task]]
id = "yes"
input = "Give a palindrome."
scripted = ["Racecar"]
[[task]]
id = "no"
input = "Give a palindrome."
scripted = ["banana"]
"""


def test_a_conftest_verifier_is_used_and_its_options_are_validated(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makefile(".toml", bench_pal=SUITE)
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["✗ pal::no: reward 0 — palindrome 0"])

    pytester.makefile(".toml", bench_pal=SUITE.replace("min_length = 3", "min_len = 3"))
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*$.suite.verifier*min_len*"])


CLIENT_CONFTEST = '''
import pytest
from pytest_agentbench.models import Generation, ModelSpec, Usage

class EchoClient:
    """A model that answers with the last word of the prompt."""
    def __init__(self, spec):
        self.spec = spec
    def generate(self, request, on_event=None):
        word = request.messages[-1]["content"].split()[-1]
        return Generation(text=word, finish_reason="stop", usage=Usage(input=3, output=1, total=4))
    def close(self):
        pass

@pytest.hookimpl
def pytest_agentbench_model_client(spec, settings):
    if spec.provider == "openai-compat" and spec.model == "echo":
        return EchoClient(spec)
'''


def test_a_conftest_model_client_overrides_the_builtin(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CLIENT_CONFTEST)
    pytester.makefile(
        ".toml",
        bench_echo=(
            '[suite]\nverifier = { kind = "exact" }\n'
            '[[task]]\nid = "a"\ninput = "say pong"\ntarget = "pong"\n'
        ),
    )
    result = pytester.runpytest(
        "--agentbench", "--agentbench-model", "openai-compat/echo", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["agentbench: model openai-compat/echo*", "tokens 3 in / 1 out*"])


def test_the_package_exports_the_hookimpl_marker_it_promises(pytester: pytest.Pytester) -> None:
    """``pytest_agentbench.hookimpl`` (promised by the package docstring) marks a hook
    implementation the run calls (``tryfirst`` honoured), and importing the package alone
    still imports no pytest: the marker is fetched when asked for."""
    import subprocess
    import sys

    import pytest_agentbench

    assert pytest_agentbench.hookimpl.project_name == pytest.hookimpl.project_name == "pytest"
    assert pytest_agentbench.hookimpl is pytest_agentbench.hookimpl  # made once
    assert "hookimpl" in pytest_agentbench.__all__
    assert "hookimpl" in (pytest_agentbench.__doc__ or "")
    pytester.makeconftest(
        """
import pytest_agentbench

@pytest_agentbench.hookimpl(tryfirst=True)
def pytest_agentbench_failure_reason(record):
    return f"marked by the exported hookimpl: {record.task_id}"
"""
    )
    pytester.makefile(
        ".toml",
        bench_one='[suite]\nverifier = { kind = "exact" }\n\n'
        '[[task]]\nid = "no"\ninput = "say yes"\ntarget = "yes"\nscripted = ["no"]\n',
    )
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["✗ one::no: marked by the exported hookimpl: no"])
    code = "import sys, pytest_agentbench; print({'pytest', 'pluggy'} & set(sys.modules))"
    cheap = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert cheap.stdout.strip() == "set()"
