"""A Harbor task is verified after its agent runs out of time, as Harbor does (its trial
records the agent's timeout and still runs the verifier): every process the agent left
in the container is ended first, then test.sh decides. A stand-in that writes the right
answer and then hangs passes (its record says it ran out of time); the built-in loop
hanging before it wrote anything is a ``timeout`` whose reward is the verifier's 0, its
failure line saying both. Our own suites' tasks keep theirs: past their time, unverified.
"""

from __future__ import annotations

import json

import pytest
from harbor_support import TASK_TOML, TEST_SH, write_task

from pytest_agentbench.environments.engine import Engine

pytestmark = pytest.mark.slow

#: The agent writes the answer, leaves a straggler that would spoil it after the
#: deadline (it shed the exec's mark: a session of its own, an empty environment), and
#: hangs.
WRITES_THEN_HANGS = (
    "echo 42 > /app/answer.txt; "
    "setsid env -i sh -c 'sleep 4; echo 41 > /app/answer.txt' </dev/null >/dev/null 2>&1 & "
    "exec sleep 600"
)


def test_a_harbor_task_is_verified_after_its_agent_ran_out_of_time(
    pytester: pytest.Pytester, engine: Engine
) -> None:
    short = TASK_TOML.replace("[agent]\ntimeout_sec = 120", "[agent]\ntimeout_sec = 2")
    # test.sh waits past the straggler's time: a straggler left running would spoil it
    test_sh = TEST_SH.replace("#!/bin/bash\n", "#!/bin/bash\nsleep 5\n", 1)
    agent = (
        '\n[metadata.agentbench.agent]\nkind = "command"\n'
        f"argv = {json.dumps(['sh', '-c', WRITES_THEN_HANGS])}\n"
    )
    write_task(pytester.path / "late", "writes-then-hangs", toml=short + agent, test_sh=test_sh)
    hangs = "\n[metadata.agentbench]\nscripted = [{ hang = true }]\n"
    write_task(pytester.path / "late", "hangs-first", toml=short + hangs)
    result = pytester.runpytest_subprocess(
        "--agentbench", "late", "-p", "no:cacheprovider", "--agentbench-engine", engine.name
    )
    out = result.stdout.str()
    assert result.ret == 1, out
    run_dir = (pytester.path / "agentbench-results" / "latest").resolve()

    def record_of(name: str) -> dict[str, object]:
        [folder] = (run_dir / "tasks" / "late").glob(f"{name}*")
        assert (folder / "verifier" / "reward.txt").is_file()  # test.sh ran: verified
        return dict(json.loads((folder / "result.json").read_text()))

    passed = record_of("writes-then-hangs")
    assert passed["outcome"] == "passed" and passed["reward"] == 1.0, passed
    assert "[agent] timeout_sec" in str(passed["error"]), passed["error"]
    assert "verified anyway" in str(passed["error"])

    late = record_of("hangs-first")
    assert late["outcome"] == "timeout" and late["reward"] == 0.0, late
    assert "[agent] timeout_sec" in str(late["error"]) and "verified anyway" in str(late["error"])
    # the failure line: the verifier's reward, and that the agent ran out of time
    [line] = [x for x in out.splitlines() if x.startswith("✗ late::hangs-first: reward 0")]
    assert "[agent] timeout_sec" in line and "verified anyway" in line, line
