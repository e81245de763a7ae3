"""The python_checks verifier: HumanEval check(candidate) and MBPP assert lists, run by our
own runner in the sandbox; per-assertion outcomes; every cheat scores 0 in every mode (the
fork server under bubblewrap, a fresh bubblewrap process, the basic sandbox's fork server
and a fresh basic process); what one fork-server task can see of the one before and of
its server; CPU slots shared across processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from verifiers_support import verifier_task

from pytest_agentbench.errors import SandboxError
from pytest_agentbench.sandbox import Limits, forkserver
from pytest_agentbench.sandbox.cpuslots import SLOTS_VARIABLE, cpu_slot, slots_dir
from pytest_agentbench.sandbox.isolation import plan_for
from pytest_agentbench.suites.task import Task
from pytest_agentbench.verifiers.base import Check, Verdict
from pytest_agentbench.verifiers.checks import PYTHON_CHECKS

FORK = forkserver.usable("auto")
BASIC_FORK = forkserver.usable("basic")
#: Set by test_python_checks_no_cgroup.py, which runs the basic tests again where no pids
#: cgroup can be made.
NO_CGROUP = os.environ.get("AGENTBENCH_TEST_NO_CGROUP") == "1"
#: fork: the fork server (auto under bubblewrap); fresh: a new bubblewrap process per run
#: (an agent workspace never takes the fork server); basic: no namespaces (the basic fork
#: server where a pids cgroup can be made, else a fresh process); basic-fresh: no
#: namespaces, a fresh process (an agent workspace).
MODES = [
    pytest.param("fork", marks=pytest.mark.skipif(not FORK, reason="no bubblewrap + pids cgroup")),
    pytest.param("fresh", marks=pytest.mark.skipif(not FORK, reason="no bubblewrap + pids cgroup")),
    "basic",
    "basic-fresh",
]
CHECK = """
def check(candidate):
    assert candidate(1, 2) == 3
    for a in range(5):
        assert candidate(a, a) == 2 * a, f"doubling {a}"
    assert abs(candidate(0.1, 0.2) - 0.3) < 1e-9
"""
RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"


def task(**options: Any) -> Task:
    return verifier_task("python_checks", options)


def verify(answer: str, tmp_path: Path, mode: str = "fork", **options: Any) -> Verdict:
    if "asserts" not in options:
        options = {"test": CHECK, "entry_point": "add", **options}
    options = {"isolation": "basic" if mode.startswith("basic") else "auto", **options}
    verifier_dir = tmp_path / "rollout" / "verifier"
    verifier_dir.mkdir(parents=True, exist_ok=True)
    workspace = None
    if mode in ("fresh", "basic-fresh"):  # an agent's workspace: the code is already there
        workspace = tmp_path / "agent-ws"
        workspace.mkdir(exist_ok=True)
        (workspace / "solution.py").write_text(answer.strip("`\n").removeprefix("python\n"))
    return PYTHON_CHECKS.verify(Check(answer, task(**options), options, verifier_dir, workspace))


@pytest.mark.parametrize("mode", MODES)
def test_check_passes_and_reports_each_assertion(tmp_path: Path, mode: str) -> None:
    verdict = verify(RIGHT, tmp_path, mode)
    assert verdict.error is None and verdict.reward == 1.0, verdict
    ctrf = json.loads((tmp_path / "rollout/verifier/ctrf.json").read_text())
    names = [t["name"] for t in ctrf["results"]["tests"]]
    assert names == ["check line 3", "check line 5", "check line 6", "check"]
    assert all(t["status"] == "passed" for t in ctrf["results"]["tests"])
    assert verdict.metrics == {"checks_passed": 4, "checks_total": 4}
    stdout = (tmp_path / "rollout/verifier/test-stdout.txt").read_text()
    assert "4 of 4 checks passed" in stdout


@pytest.mark.parametrize("mode", MODES)
def test_failing_assertion_named_with_its_message(tmp_path: Path, mode: str) -> None:
    wrong = "def add(a, b):\n    return a + b if a != 3 else 0\n"
    verdict = verify(wrong, tmp_path, mode)
    assert verdict.reward == 0.0
    assert verdict.details["failures"]["check line 5"] == "AssertionError: doubling 3"
    assert verdict.details["failures"]["check line 6"].startswith("did not run")
    assert verdict.details["failures"]["check"] == "check line 5 failed: AssertionError: doubling 3"
    fraction = verify(wrong, tmp_path, mode, scoring="fraction")
    assert fraction.metrics == {"checks_passed": 1, "checks_total": 4}


NESTED = """
def check(candidate):
    if candidate(1, 1) == 2:
        assert candidate(1, 2) == 3
    else:
        pass
    while False:
        pass
    else:
        assert candidate(2, 2) == 4
    try:
        raise ValueError
    except ValueError:
        assert candidate(3, 3) == 6
    finally:
        assert candidate(4, 4) == 8
    with open(__import__("os").devnull) as null:
        assert candidate(5, 5) == 10
    match candidate(0, 0):
        case 0:
            assert candidate(6, 6) == 12
    def inner():
        assert candidate(7, 7) == 14
    inner()
    class Inner:
        assert candidate(8, 8) == 16
"""


@pytest.mark.parametrize("mode", MODES[0::2])
def test_an_assert_in_any_block_is_its_own_case(tmp_path: Path, mode: str) -> None:
    """The harness finds and wraps every assert of check in whatever block it stands (if,
    loop else, except, finally, with, match, a nested def or class): each one that runs
    passes as its own case (an assert left unwrapped would read as never reached), and a
    failure lands on its own line."""
    verdict = verify(RIGHT, tmp_path, mode, test=NESTED, entry_point="add")
    lines = [4, 10, 14, 16, 18, 21, 23, 26]
    assert verdict.metrics == {"checks_passed": 9, "checks_total": 9}, verdict
    ctrf = json.loads((tmp_path / "rollout/verifier/ctrf.json").read_text())
    assert [t["name"] for t in ctrf["results"]["tests"]] == [
        *(f"check line {n}" for n in lines),
        "check",
    ]
    wrong = "def add(a, b):\n    return a + b if a != 7 else 0\n"
    failed = verify(wrong, tmp_path, mode, test=NESTED, entry_point="add")
    assert failed.metrics == {"checks_passed": 6, "checks_total": 9}
    assert failed.details["failures"]["check line 23"] == (
        "AssertionError: assert candidate(7, 7) == 14"
    )
    assert failed.details["failures"]["check line 26"].startswith("did not run")


def test_return_none_and_errors_fail_on_the_running_assertion(tmp_path: Path) -> None:
    verdict = verify("def add(a, b):\n    return None\n", tmp_path)
    assert verdict.reward == 0.0
    assert (
        verdict.details["failures"]["check line 3"] == "AssertionError: assert candidate(1, 2) == 3"
    )
    raising = verify("def add(a, b):\n    return a + b + ''\n", tmp_path)
    assert raising.details["failures"]["check line 3"].startswith("TypeError:")
    missing = verify("def plus(a, b):\n    return a + b\n", tmp_path)
    assert missing.details["failures"]["check"] == "LookupError: the solution defines no 'add'"


def test_unreached_assertion_of_a_passing_check_is_skipped(tmp_path: Path) -> None:
    test = (
        "def check(candidate):\n    if candidate(1, 1) != 2:\n        assert False\n"
        "    assert True\n"
    )
    verdict = verify(RIGHT, tmp_path, test=test, entry_point="add")
    assert verdict.reward == 1.0 and verdict.metrics == {"checks_passed": 2, "checks_total": 2}
    ctrf = json.loads((tmp_path / "rollout/verifier/ctrf.json").read_text())
    assert ctrf["results"]["summary"]["skipped"] == 1


@pytest.mark.parametrize("mode", MODES)
def test_mbpp_asserts_each_a_case_with_setup(tmp_path: Path, mode: str) -> None:
    asserts = [
        "assert add(1, 2) == 3",
        "assert add(2, 2) == 5",
        "assert math.isclose(add(.1, .2), .3)",
    ]
    answer = "def add(a, b):\n    return a + b\n"
    verdict = verify(
        answer, tmp_path, mode, asserts=asserts, setup="import math", scoring="fraction"
    )
    assert verdict.metrics == {"checks_passed": 2, "checks_total": 3}
    assert verdict.details["failed_tests"] == ["assert_2"]
    assert verdict.details["failures"]["assert_2"] == "AssertionError: assert add(2, 2) == 5"


CHEATS = {
    "exit 0 at import": "import sys\nsys.exit(0)\n",
    "os._exit at import": "import os\nos._exit(0)\n",
    "os._exit in candidate": "import os\ndef add(a, b):\n    os._exit(0)\n",
    "kill the parent": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n"
    "def add(a, b):\n    return 0\n",
    "patch abs": "import builtins\nbuiltins.abs = lambda x: 0\n"
    "def add(a, b):\n    return a + b if isinstance(a, int) else 99\n",
    "eq always true": "",  # filled below: needs the class
    "replace the probes": "import sys\ndef add(a, b):\n"
    "    g = sys._getframe(1).f_globals\n"
    "    g['__agentbench_enter__'] = g['__agentbench_pass__'] = lambda k: None\n"
    "    raise AssertionError\n",
    "trace jump": "import sys\ndef add(a, b):\n"
    "    sys.settrace(lambda *x: None)\n    return a + b\n",
    "trace set and unset": "import sys\ndef add(a, b):\n"
    "    sys.settrace(lambda *x: None)\n    sys.settrace(None)\n    return a + b\n",
    "forge the report": "import os, json\n"
    "fake = json.dumps({'results': {'tests': [], 'extra': {}}}).encode()\n"
    "for fd in range(3, 64):\n"
    "    try:\n        os.lseek(fd, 0, 0); os.ftruncate(fd, 0); os.write(fd, fake)\n"
    "    except OSError:\n        pass\n"
    "os._exit(0)\n",
    "fork bomb": "import os\nwhile True:\n"
    "    try:\n        os.fork()\n    except OSError:\n        pass\n",
    "memory bomb": "x = bytearray(8 * 1024 ** 3)\ndef add(a, b):\n    return a + b\n",
}
CHEATS["eq always true"] = (
    "import builtins\nclass Yes:\n    def __eq__(self, other):\n        return True\n"
    "builtins.isinstance = lambda *a: True\ndef add(a, b):\n    return Yes()\n"
)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", list(CHEATS))
def test_cheats_score_zero(tmp_path: Path, mode: str, name: str) -> None:
    verdict = verify(CHEATS[name], tmp_path, mode, timeout_s=20, memory_mb=512)
    assert verdict.reward == 0.0, (name, verdict)
    assert verdict.metrics.get("checks_passed", 0) == 0 or name in ("eq always true",), verdict


class _Secret(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"3")

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize("mode", MODES[:2])
def test_no_network_no_secrets_no_host_writes(
    tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = HTTPServer(("127.0.0.1", 0), _Secret)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    outside = tmp_path / "outside.txt"
    monkeypatch.setenv("AGENTBENCH_CHECKS_API_KEY", "sk-test-PLANTED-checks")
    answer = (
        "import os, urllib.request\n"
        "def add(a, b):\n"
        "    found = [k for k in os.environ if 'PLANTED' in os.environ[k]]\n"
        "    for pid in os.listdir('/proc'):\n"
        "        try:\n"
        "            text = open(f'/proc/{pid}/environ', 'rb').read()\n"
        "            found += [1] if b'PLANTED' in text else []\n"
        "        except OSError:\n"
        "            pass\n"
        f"    try:\n        open({str(outside)!r}, 'w').write('x')\n"
        "    except OSError:\n        pass\n"
        f"    url = 'http://127.0.0.1:{server.server_port}/'\n"
        "    assert not found, found\n"
        "    return int(urllib.request.urlopen(url, timeout=5).read())\n"
    )
    try:
        verdict = verify(answer, tmp_path, mode, test="def check(c):\n    assert c(1, 2) == 3\n")
    finally:
        server.shutdown()
    assert verdict.reward == 0.0
    assert "URLError" in verdict.details["failures"]["check line 2"], verdict.details
    assert not outside.exists()


def host_binds_under_tmp() -> list[str]:
    """The names in the sandbox's /tmp that are the host's, not a task's: the sandbox binds
    the running Python (a virtualenv or checkout may live under /tmp, as in a fresh-clone
    CI there) read-only over its private /tmp, with the folders leading to it."""
    names = set()
    for path in (sys.prefix, sys.base_prefix, sys.executable, str(Path(__file__).parent)):
        for candidate in (Path(path), Path(path).resolve()):
            parts = candidate.parts
            if len(parts) > 2 and parts[1] == "tmp":
                names.add(parts[2])
    return sorted(names)


@pytest.mark.skipif(not FORK, reason="no bubblewrap + pids cgroup")
def test_fork_server_task_sees_nothing_of_the_task_before(tmp_path: Path) -> None:
    leave = (
        "import os, subprocess\n"
        "open('/tmp/left-behind', 'w').write('x')\n"
        "subprocess.Popen(['sleep', '300'], start_new_session=True)\n"
        "def add(a, b):\n    return a + b\n"
    )
    assert verify(leave, tmp_path / "a").reward == 1.0
    look = (
        "import os\n"
        "def add(a, b):\n"
        "    others = [p for p in os.listdir('/proc') if p.isdigit() and int(p) not in"
        " (1, os.getpid(), os.getppid())]\n"
        "    seen = set(os.listdir('/tmp')) - {os.path.basename(os.getcwd())}\n"
        f"    seen -= set({host_binds_under_tmp()!r})\n"
        "    assert all(n.startswith('agentbench-forkserver-') for n in seen), seen\n"
        "    assert not [f for n in seen for f in os.listdir('/tmp/' + n)], seen\n"
        "    assert not others, [open(f'/proc/{p}/cmdline').read() for p in others]\n"
        "    return a + b\n"
    )
    verdict = verify(look, tmp_path / "b")
    assert verdict.reward == 1.0, verdict.details["failures"]


@pytest.mark.skipif(not FORK, reason="no bubblewrap + pids cgroup")
def test_fork_server_is_out_of_a_kill_and_keeps_the_workspace(tmp_path: Path) -> None:
    """The server is the init of its pid namespace, as a fresh sandbox's is: a task's
    kill(getppid()) is ignored and the checks run on; what the task wrote in its directory
    is copied back to the workspace kept for inspection."""
    answer = (
        "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n"
        "open('note.txt', 'w').write('left by the task')\n"
        "def add(a, b):\n    return a + b\n"
    )
    verdict = verify(answer, tmp_path / "a")
    assert verdict.reward == 1.0 and not verdict.details["verifier_killed"], verdict.details
    assert (tmp_path / "a/rollout/workspace/note.txt").read_text() == "left by the task"
    assert verify(RIGHT, tmp_path / "b").reward == 1.0


BASIC_ONLY = pytest.mark.skipif(not BASIC_FORK, reason="no basic fork server here")


@pytest.mark.skipif(not NO_CGROUP, reason="run by test_python_checks_no_cgroup.py")
def test_basic_without_a_pids_cgroup_still_takes_the_fork_server() -> None:
    assert plan_for("basic").processes in ("rlimit", "watch") and BASIC_FORK


@BASIC_ONLY
def test_basic_fork_server_stops_a_fork_bomb_as_processes(tmp_path: Path) -> None:
    """With a pids cgroup its refused fork, without one the server's count of the task's
    processes (every 50 ms): either way the run is stopped and says why."""
    bomb = (
        "import os, time\n"
        "def add(a, b):\n"
        "    for _ in range(200):\n"
        "        try:\n"
        "            if os.fork() == 0:\n"
        "                time.sleep(60)\n"
        "                os._exit(0)\n"
        "        except OSError:\n"
        "            break\n"
        "    time.sleep(60)\n"
    )
    verdict = verify(bomb, tmp_path, "basic", timeout_s=20)
    assert verdict.reward == 0.0 and verdict.details["killed_by"] == "processes", verdict.details


@BASIC_ONLY
def test_basic_fork_server_kills_what_a_task_leaves_and_runs_it_in_place(tmp_path: Path) -> None:
    """No namespace hides a task's processes in basic: what it leaves running, even a
    grandchild in a session of its own whose parent has exited, is found in the pids
    cgroup it shares with the server, killed and reaped before the verdict; the task ran
    in its workspace as it is (its file is there, nothing copied)."""
    pid_file = tmp_path / "left.pid"
    leave = (
        "import os, time\n"
        "open('note.txt', 'w').write('left by the task')\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        open({str(pid_file)!r} + '.new', 'w').write(str(os.getpid()))\n"
        f"        os.rename({str(pid_file)!r} + '.new', {str(pid_file)!r})\n"
        "        time.sleep(300)\n"
        "    os._exit(0)\n"
        f"while not os.path.exists({str(pid_file)!r}):\n"
        "    time.sleep(0.01)\n"
        "def add(a, b):\n    return a + b\n"
    )
    verdict = verify(leave, tmp_path / "a", "basic")
    assert verdict.reward == 1.0, verdict.details
    pid = int(pid_file.read_text())
    status = Path(f"/proc/{pid}/status")
    assert not status.exists() or "sleep" not in Path(f"/proc/{pid}/cmdline").read_text(), (
        status.read_text()
    )
    assert (tmp_path / "a/rollout/workspace/note.txt").read_text() == "left by the task"
    assert verify(RIGHT, tmp_path / "b", "basic").reward == 1.0


@BASIC_ONLY
def test_basic_fork_server_memory_is_out_of_a_tasks_reach(tmp_path: Path) -> None:
    """The server's memory holds earlier requests: non-dumpable, and (as root) started
    without CAP_SYS_PTRACE, which its forked tasks inherit, a task cannot open it."""
    look = (
        "import os\n"
        "def add(a, b):\n"
        "    server = os.getppid()\n"
        "    assert b'basic' in open(f'/proc/{server}/cmdline', 'rb').read().split(b'\\0')\n"
        "    try:\n"
        "        open(f'/proc/{server}/mem', 'rb').close()\n"
        "    except PermissionError:\n"
        "        return a + b\n"
        "    return 0\n"
    )
    verdict = verify(look, tmp_path, "basic")
    assert verdict.reward == 1.0, verdict.details["failures"]


@BASIC_ONLY
def test_basic_fork_server_killed_by_its_task_proves_nothing(tmp_path: Path) -> None:
    """No pid namespace makes the server immune to kill(getppid()) as bubblewrap's init
    is: the task's own run ends with it (parent signal 9, the verifier killed, reward 0),
    as under a fresh basic run's shim; the next task gets a new server."""
    answer = (
        "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n"
        "def add(a, b):\n    return a + b\n"
    )
    verdict = verify(answer, tmp_path / "a", "basic")
    assert verdict.reward == 0.0 and verdict.details["verifier_killed"], verdict.details
    assert verify(RIGHT, tmp_path / "b", "basic").reward == 1.0


@pytest.mark.parametrize(
    "isolation",
    [
        pytest.param("auto", marks=pytest.mark.skipif(not FORK, reason="no bwrap + pids cgroup")),
        pytest.param("basic", marks=BASIC_ONLY),
    ],
)
def test_a_fork_server_that_cannot_start_says_why(isolation: str) -> None:
    """A server that ends before it says it is ready is the harness's problem, named with
    the end of its stderr, never a task's run "killed by signal 9"."""

    class Broken(forkserver.ForkServer):
        program = "import sys\nsys.exit('the runner could not be loaded: no such module')"

    server = Broken(isolation)
    try:
        with pytest.raises(SandboxError) as caught:
            server.run({}, "runner.py", "runner", {}, "nonce", Limits(), {}, 1024)
    finally:
        server.close()
    assert str(caught.value) == (
        "the fork server did not start: it exited with status 1: "
        "the runner could not be loaded: no such module"
    )


def test_cpu_slots_are_shared_with_other_processes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(SLOTS_VARIABLE, "1")
    # a slots folder of this test's own: the machine's is shared by every run of this
    # user (the other xdist worker, other checkouts' suites), whose verifications may
    # hold slot-0 at any moment and make "after" read taken
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    probe = (
        "import fcntl, os, sys\n"
        "fd = os.open(sys.argv[1], os.O_RDWR)\n"
        "try:\n    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n    print('free')\n"
        "except BlockingIOError:\n    print('taken')\n"
    )
    assert slots_dir().parent == tmp_path
    slot = str(slots_dir() / "slot-0")
    with cpu_slot() as number:
        assert number == 0
        held = subprocess.run([sys.executable, "-c", probe, slot], capture_output=True, text=True)
    after = subprocess.run([sys.executable, "-c", probe, slot], capture_output=True, text=True)
    assert (held.stdout.strip(), after.stdout.strip()) == ("taken", "free")


def test_bad_slot_count_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SLOTS_VARIABLE, "many")
    with (
        pytest.raises(ValueError, match="AGENTBENCH_VERIFY_SLOTS='many' is not a whole number"),
        cpu_slot(),
    ):
        pass


PROMPT = 'import math\n\n\ndef _twice(x):\n    return 2 * x\n\n\ndef add(a, b):\n    """Sum."""\n'


@pytest.mark.parametrize("mode", ["fork", "basic"][0 if FORK else 1 :])
def test_the_prompt_option_runs_the_answer_after_the_prompt(tmp_path: Path, mode: str) -> None:
    """HumanEval's program: prompt + answer. A whole function using the prompt's import and
    helper, and a bare body, pass only with the prompt before them."""
    whole = "```python\ndef add(a, b):\n    return math.fsum([_twice(a), _twice(b)]) / 2\n```"
    body = "```python\n    return a + b\n```"
    for answer in (whole, body):
        with_prompt = verify(answer, tmp_path, mode, prompt=PROMPT)
        assert with_prompt.reward == 1.0 and with_prompt.details["program"] == "prompt + answer"
        alone = verify(answer, tmp_path, mode)
        assert alone.reward == 0.0 and alone.details["program"] == "answer"
    wrong = verify(
        "```python\ndef add(a, b):\n    return _twice(a)\n```", tmp_path, mode, prompt=PROMPT
    )
    assert wrong.reward == 0.0


def test_setup_problems_are_collection_problems() -> None:
    [problem] = PYTHON_CHECKS.check_task(
        verifier_task(
            "python_checks",
            {"test": "def check(c): pass", "entry_point": "f", "prompt": "x = 1\n"},
            mode="agent",
        )
    )
    assert problem.at == ("options", "prompt") and "answer-mode tasks" in problem.text
    assert PYTHON_CHECKS.check_task(task(test="def check(c): pass", entry_point="f")) == []
    [problem] = PYTHON_CHECKS.check_task(task(test="def other(c): pass", entry_point="f"))
    assert problem.at == ("options", "test") and "defines no function check" in problem.text
    [problem] = PYTHON_CHECKS.check_task(task(test="def check(c): pass"))
    assert "entry_point" in problem.text
    [problem] = PYTHON_CHECKS.check_task(task(asserts=["assert f(1) =="]))
    assert problem.at == ("options", "asserts") and "assert 1 is not valid Python" in problem.text
    [problem] = PYTHON_CHECKS.check_task(task(asserts=["assert f(1) == 1"], setup="import (\n"))
    assert problem.at == ("options", "setup")
    assert "options.setup is not valid Python" in problem.text
    assert os.environ.get(SLOTS_VARIABLE) is None


@pytest.mark.parametrize("mode", MODES)
def test_a_setup_that_is_not_python_says_so_in_every_mode(tmp_path: Path, mode: str) -> None:
    """The setup is compiled before the checks (by the harness for a fresh run, by the
    fork server's child otherwise): invalid Python there is named, never a crash."""
    verdict = verify(RIGHT, tmp_path, mode, setup="import (\n")
    assert verdict.error is not None, verdict  # the verifier could not judge: not the model's
    assert "options.setup is not valid Python (line 1" in verdict.error


@pytest.mark.parametrize("mode", MODES)
def test_the_answer_sees_no_command_line_arguments(tmp_path: Path, mode: str) -> None:
    """A program that parses its command line (argparse at import, as scripts do) sees
    what a fresh ``python -c`` gives it in every mode: no arguments of the fork server's."""
    answer = (
        "import argparse, sys\n"
        "args = argparse.ArgumentParser().parse_args()\n"
        "def add(a, b):\n"
        "    assert sys.argv == ['-c'], sys.argv\n"
        "    return a + b\n"
    )
    verdict = verify(answer, tmp_path, mode)
    assert verdict.reward == 1.0, verdict.details


@pytest.mark.parametrize("mode", MODES)
def test_a_hung_check_times_out_and_the_next_task_runs(tmp_path: Path, mode: str) -> None:
    hung = "def add(a, b):\n    while True:\n        pass\n"
    verdict = verify(hung, tmp_path / "a", mode, timeout_s=2)
    assert verdict.reward == 0.0 and verdict.details["killed_by"] == "timeout", verdict.details
    assert verdict.details["failures"]["check"].startswith("did not run: the run timed out")
    assert verify(RIGHT, tmp_path / "b", mode).reward == 1.0
