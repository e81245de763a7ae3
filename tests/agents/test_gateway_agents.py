"""Command agents under test, end to end: real `pytest --agentbench` runs (pytester,
subprocess) of real agent programs — the example's stand-in agent and a probe agent
written here — calling the scripted model through the run's gateway. Pass, an agent that
fails itself, one that makes no model call, a loop killed live with the agent's whole
process group, a deadline, usage counted, attribution under xdist with 16 agents in
flight, no real key anywhere, repair rounds that continue the agent's session, resume
and shards."""

from __future__ import annotations

import fcntl
import json
import shutil
from pathlib import Path

import pytest

from pytest_agentbench.schemas import schema_for, validate
from pytest_agentbench.scripted.server import ScriptedServer

ROOT = Path(__file__).resolve().parents[2]
STANDIN = ROOT / "example_suites" / "agents" / "standin_agent.py"

#: A probe agent: what it does is its first argument.
PROBE = r"""
import fcntl, json, os, subprocess, sys, time, urllib.request

def call(content):
    body = {"model": "m", "stream": True, "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": content}]}
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=json.dumps(body).encode(),
        headers={"content-type": "application/json",
                 "authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
    with urllib.request.urlopen(request, timeout=120) as response:
        return response.read().decode()

mode = sys.argv[1]
if mode == "exit1":
    print("starting", flush=True)
    print("warming up\nboom: no config file", file=sys.stderr)
    sys.exit(1)
if mode == "nocall":
    print("I did nothing")
if mode == "env":
    call("hello")
    print(json.dumps(dict(os.environ)))
if mode == "hold-then-call":
    # a child in the agent's process group holds a lock while it lives
    subprocess.Popen([sys.executable, "-c",
        "import fcntl, time\n"
        "f = open('held.lock', 'w')\n"
        "fcntl.flock(f, fcntl.LOCK_EX)\n"
        "open('held.ready', 'w').close()\n"
        "time.sleep(600)\n"])
    while not os.path.exists("held.ready"):
        time.sleep(0.01)
    call("go on")
    time.sleep(600)
if mode == "netcheck":
    import socket
    call("hi")
    try:
        socket.create_connection(("1.1.1.1", 80), timeout=3).close()
        print("outside: reached")
    except OSError as exc:
        print("outside: blocked", exc)
if mode == "call-then-sleep":
    call("one question")
    time.sleep(600)
"""


def _agent_table(argv: list[str], **extra: object) -> str:
    fields = {"kind": "command", "argv": argv, **extra}
    return "agent = " + _inline(fields)


def _inline(value: object) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_inline(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


def _setup(pytester: pytest.Pytester) -> None:
    agents = pytester.path / "agents"
    agents.mkdir(exist_ok=True)
    shutil.copy(STANDIN, agents / "standin_agent.py")
    (agents / "probe.py").write_text(PROBE)


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "--agentbench", "-p", "no:cacheprovider", *args, timeout=300
    )


def _results(pytester: pytest.Pytester) -> Path:
    return pytester.path / "agentbench-results" / "latest" / "tasks"


def _result(pytester: pytest.Pytester, suite: str, task: str) -> dict[str, object]:
    folder = _results(pytester) / suite / f"{task}[scripted]"
    data = json.loads((folder / "result.json").read_text())
    assert isinstance(data, dict)
    return data


def _trajectory(pytester: pytest.Pytester, suite: str, task: str) -> list[dict[str, object]]:
    folder = _results(pytester) / suite / f"{task}[scripted]"
    entries = json.loads((folder / "trajectory.json").read_text())["requests"]
    assert isinstance(entries, list)
    return entries


STANDIN_ARGV = ["{python}", "{suite_dir}/agents/standin_agent.py", "{prompt}"]
PROBE_ARGV = ["{python}", "{suite_dir}/agents/probe.py"]

GREET_TESTS = (
    "from greet import greet\\ndef test_greet():\\n    assert greet('Ada') == 'Hello, Ada!'\\n"
)
GREET_VERIFIER = f'{{ kind = "python_tests", module = "greet", tests = "{GREET_TESTS}" }}'
DONE_WITH_USAGE = '{ text = "done", usage = { prompt_tokens = 40, completion_tokens = 2 } }'
RESUME_ARGV = ["{python}", "{suite_dir}/agents/standin_agent.py", "--resume", "{prompt}"]
SLEEP_CALL = '[{ name = "bash", arguments = { command = "sleep 0.3" } }]'

WRITE_GREETING = (
    '{ text = "Writing.", tool_calls = [{ name = "write_file", arguments = { path = "greet.py", '
    "content = \"def greet(name):\\n    return 'Hello, ' + name + '!'\\n\" } }] }"
)


@pytest.mark.slow
def test_command_agents_end_to_end(pytester: pytest.Pytester) -> None:
    """One run, five agents: one passes (its tool call run for real by the agent, usage
    counted and matching what the agent reports), one exits 1, one never calls its
    model, one is killed live for a loop in its model's stream — its whole process
    group with it — and one outlives its deadline."""
    _setup(pytester)
    pytester.makefile(
        ".toml",
        bench_agents=f"""
[suite]
name = "agents"
timeout_s = 60
verifier = {{ kind = "includes" }}

[[task]]
id = "passes"
input = "Write greet.py."
{_agent_table(STANDIN_ARGV)}
verifier = {GREET_VERIFIER}
scripted = [{WRITE_GREETING}, {DONE_WITH_USAGE}]

[[task]]
id = "exits"
target = "done"
input = "Fail."
{_agent_table([*PROBE_ARGV, "exit1"])}

[[task]]
id = "silent"
target = "done"
input = "Do nothing."
{_agent_table([*PROBE_ARGV, "nocall"])}

[[task]]
id = "loops"
target = "done"
input = "Loop."
{_agent_table([*PROBE_ARGV, "hold-then-call"])}
scripted = [{{ text = "and again ", repeat = 5000, chunk_delay_s = 0.0005 }}]

[[task]]
id = "sleeps"
target = "done"
input = "Sleep."
timeout_s = 3
{_agent_table([*PROBE_ARGV, "call-then-sleep"])}
scripted = ["one answer"]
""",
    )
    result = _run(pytester, "--agentbench-html", "report.html")
    out = result.stdout.str()
    assert "5 tasks: 1 passed" in out, out
    # the HTML report shows what each agent did
    page = (pytester.path / "report.html").read_text()
    assert "exit 0 · 2 model calls · network shared with the host" in page
    assert "✗ agents::exits: agent exited 1: boom: no config file" in out
    assert "✗ agents::silent: agent made no model call" in out
    assert "✗ agents::loops: agent killed: loop in the model's stream at " in out
    assert "✗ agents::sleeps: agent timed out after 3 s (1 model calls)" in out

    passed = _result(pytester, "agents", "passes")
    assert passed["outcome"] == "passed"
    usage = passed["usage"]
    assert isinstance(usage, dict)
    assert usage["output"] is not None and usage["output"] >= 2
    trajectory = _trajectory(pytester, "agents", "passes")
    calls = [e for e in trajectory if "call" in e]
    assert [e["call"] for e in calls] == [1, 2]
    assert calls[1]["usage"]["input"] == 40  # type: ignore[index]
    agent = next(e["agent"] for e in trajectory if "agent" in e)
    assert isinstance(agent, dict)
    assert agent["exit_code"] == 0 and agent["model_calls"] == 2
    assert agent["reported"] is not None and agent["usage_disagreement"] is None
    workspace = _results(pytester) / "agents" / "passes[scripted]" / "workspace"
    assert "Hello, ' + name" in (workspace / "greet.py").read_text()

    loops = _result(pytester, "agents", "loops")
    assert loops["outcome"] == "loop_killed"
    # the child that held the lock is gone: the lock is free
    lock = _results(pytester) / "agents" / "loops[scripted]" / "workspace" / "held.lock"
    with lock.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    loop_trajectory = _trajectory(pytester, "agents", "loops")
    killed = [e for e in loop_trajectory if "killed" in e]
    assert killed and killed[0]["killed"]["channel"] == "answer"  # type: ignore[index]
    ended = next(e["agent"] for e in loop_trajectory if "agent" in e)
    assert ended["killed_by"] == "stopped" and ended["stopped"] == "loop_killed"  # type: ignore[index]

    # every file the run wrote fits its published schema, the agents' trajectories too
    run_dir = (pytester.path / "agentbench-results" / "latest").resolve()
    checked = set()
    for path in run_dir.rglob("*.json"):
        name = schema_for(path.relative_to(run_dir))
        if name is not None:
            validate(name, json.loads(path.read_text()))
            checked.add(name)
    assert {"trajectory", "result", "summary"} <= checked
    assert _result(pytester, "agents", "sleeps")["outcome"] == "timeout"
    assert _result(pytester, "agents", "exits")["outcome"] == "failed"


@pytest.mark.slow
def test_sixteen_agents_in_flight_under_xdist_each_on_its_own_task(
    pytester: pytest.Pytester,
) -> None:
    """16 agents at once over two workers: every call lands on its own task (its own
    script answers, its own prompt is in every request it made)."""
    _setup(pytester)
    tasks = "".join(
        f"""
[[task]]
id = "t{i}"
input = "Task number t{i}."
target = "answer-t{i}"
scripted = [{{ text = "thinking about t{i}", tool_calls = {SLEEP_CALL} }}, "answer-t{i}"]
"""
        for i in range(16)
    )
    pytester.makefile(
        ".toml",
        bench_many=f"""
[suite]
name = "many"
timeout_s = 120
verifier = {{ kind = "exact" }}
{_agent_table(STANDIN_ARGV)}
{tasks}""",
    )
    result = _run(pytester, "-n", "2", "--agentbench-concurrency", "8")
    assert "16 tasks: 16 passed" in result.stdout.str(), result.stdout.str()
    for i in range(16):
        for entry in _trajectory(pytester, "many", f"t{i}"):
            if "call" not in entry:
                continue
            body = json.dumps(entry["request"])  # type: ignore[index]
            assert f"Task number t{i}." in body
            assert all(f"Task number t{j}." not in body for j in range(16) if j != i)


@pytest.mark.slow
def test_a_planted_agent_sees_no_real_key_and_no_file_holds_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model is reached with a real key (an OpenAI-compatible server); the agent
    prints its whole environment: it holds only its stand-in, and no file the run wrote
    holds the real key."""
    _setup(pytester)
    secret = "sk-real-credential-4b1d9e7f0a"
    server = ScriptedServer()
    url = server.start()
    server.set_default(["hello"])
    try:
        pytester.makefile(
            ".toml",
            bench_planted=f"""
[suite]
name = "planted"
timeout_s = 60
verifier = {{ kind = "includes" }}

[[task]]
id = "prints-env"
target = "OPENAI_API_KEY"
input = "Print your environment."
{_agent_table([*PROBE_ARGV, "env"], final_message="stdout")}
""",
        )
        monkeypatch.setenv("OPENAI_API_KEY", secret)
        result = _run(
            pytester, "--agentbench-model", "openai-compat/anything", "--agentbench-base-url", url
        )
        out = result.stdout.str()
        assert "1 passed" in out, out
        # the upstream request carried a key: the gateway added the real one
        assert server.requests[-1]["headers"]["authorization"] == "[redacted]"
    finally:
        server.stop()
    folder = pytester.path / "agentbench-results"
    answers = []
    for path in folder.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert secret.encode() not in data, path
            if path.name == "result.json":
                answers.append(json.loads(data)["attempts"][0]["answer"])
    printed = json.loads(answers[0].strip().splitlines()[-1])
    assert printed["OPENAI_API_KEY"].startswith("agb-")
    assert secret not in json.dumps(printed)


@pytest.mark.slow
def test_a_repair_round_continues_the_agents_session(pytester: pytest.Pytester) -> None:
    """The verifier fails the first attempt; the repair round runs resume_argv with the
    feedback, and the agent continues its own conversation (the first prompt is still in
    the requests it sends)."""
    _setup(pytester)
    pytester.makefile(
        ".toml",
        bench_repair=f"""
[suite]
name = "repair"
timeout_s = 60
repairs = 1
verifier = {{ kind = "exact" }}

[[task]]
id = "second-try"
input = "Say the magic word."
target = "please"
{_agent_table(STANDIN_ARGV, resume_argv=RESUME_ARGV)}
scripted = ["abracadabra", "please"]
""",
    )
    result = _run(pytester)
    assert "1 passed" in result.stdout.str(), result.stdout.str()
    record = _result(pytester, "repair", "second-try")
    assert record["outcome"] == "passed"
    assert len(record["attempts"]) == 2  # type: ignore[arg-type]
    second = [e for e in _trajectory(pytester, "repair", "second-try") if e.get("attempt") == 2]
    body = json.dumps(second[0]["request"])
    assert "Say the magic word." in body and "abracadabra" in body


def test_repairs_without_a_resume_command_are_refused_at_collection(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(
        ".toml",
        bench_norepair=f"""
[suite]
repairs = 2

[[task]]
id = "x"
input = "Hi."
{_agent_table(["agent", "{prompt}"])}
""",
    )
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider", "--collect-only")
    out = result.stdout.str()
    assert "repairs = 2 needs the command agent's resume_argv" in out, out


@pytest.mark.slow
def test_agent_tasks_resume_and_shard(pytester: pytest.Pytester) -> None:
    """A shard runs its share of the agent tasks; --agentbench-resume then keeps what
    was done and runs the rest."""
    _setup(pytester)
    tasks = "".join(
        f'\n[[task]]\nid = "s{i}"\ninput = "Say s{i}."\ntarget = "s{i}"\nscripted = ["s{i}"]\n'
        for i in range(4)
    )
    pytester.makefile(
        ".toml",
        bench_shard=f"""
[suite]
name = "shard"
timeout_s = 60
verifier = {{ kind = "exact" }}
{_agent_table(STANDIN_ARGV)}
{tasks}""",
    )
    first = _run(pytester, "--agentbench-shard", "1/2")
    ran = first.stdout.str()
    assert "2 tasks: 2 passed" in ran, ran
    again = _run(pytester, "--agentbench-resume")
    text = again.stdout.str()
    assert "4 tasks: 4 passed" in text, text
    resumed = [
        json.loads(p.read_text())["record"].get("resumed")
        for p in _results(pytester).rglob("result.json")
    ]
    assert len(resumed) == 4


@pytest.mark.slow
def test_a_strict_sandbox_lets_the_agent_reach_its_gateway_and_nothing_else(
    pytester: pytest.Pytester,
) -> None:
    """Under --agentbench-sandbox strict the agent has no network but its own loopback:
    its model calls reach the gateway through the bridge, anything else is unreachable,
    and the containment record says so."""
    from pytest_agentbench.sandbox.isolation import plan_for

    try:
        plan_for("strict")
    except Exception as exc:  # no bubblewrap here: strict refuses, as documented
        pytest.skip(f"strict sandbox unavailable: {exc}")
    _setup(pytester)
    pytester.makefile(
        ".toml",
        bench_strict=f"""
[suite]
name = "strict"
timeout_s = 60
verifier = {{ kind = "includes" }}

[[task]]
id = "netcheck"
input = "Check the network."
target = "outside: blocked"
scripted = ["fine"]
{_agent_table([*PROBE_ARGV, "netcheck"], final_message="stdout")}
""",
    )
    result = _run(pytester, "--agentbench-sandbox", "strict")
    assert "1 passed" in result.stdout.str(), result.stdout.str()
    trajectory = _trajectory(pytester, "strict", "netcheck")
    assert [e["call"] for e in trajectory if "call" in e] == [1]
    agent = next(e["agent"] for e in trajectory if "agent" in e)
    assert agent["network"] == "gateway only"  # type: ignore[index]
    containment = trajectory[-1]["containment"]
    assert containment["network"] is False  # type: ignore[index]
    assert "gateway alone" in containment["detail"]  # type: ignore[index]
