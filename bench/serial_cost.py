"""Benchmark: the marginal CPU of one serial task, ours against the floor (and an older revision).

Run: .venv/bin/python bench/serial_cost.py [--tasks 600] [--rounds 5] [--against REV]
     [--profile FILE]

The first figure of ``bench/throughput.py`` alone, so a change to the per-task path can be
measured in a minute: CPU (user + sys, from wait4) of ``pytest --agentbench
--agentbench-concurrency 1`` at N and N/10 tasks against ``bench/floor_server.py``, the
difference per task (start-up cancels out), against two floors: plain pytest tests each
making one streamed httpx request, and the same tests that also write the files a task
must write (``FLOOR_WRITES_TEST``): its folder, trajectory.json, verifier/reward.json and
result.json, each atomically (a temp file and a rename), with the very bytes one task of
ours wrote (captured from a one-task run first), and at the end ctrf.json and
summary.json holding one entry per test, as ours do. ``--against REV`` also runs the
package as it was at git revision REV (copied to a temp folder put first on
``PYTHONPATH``), in the same rounds, so a before/after pair meets the same load. Each
figure is the best of ``--rounds``; runs alternate, so a busy moment hits every side
alike. ``--profile FILE`` instead writes a cProfile of one run of ours at N tasks to FILE
and exits.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from throughput import (
    FLOOR_TEST,
    MODEL_ARGS,
    NO_DEV,
    Run,
    plain,
    run_pytest,
    start_server,
    suite_text,
)

HERE = Path(__file__).resolve().parent
SERIAL = ("--agentbench-concurrency", "1")

#: The writes floor: each test makes the request, then writes the task's files as ours
#: do (atomically, the same bytes); the session's end writes ctrf.json and summary.json
#: with one entry per test. The bytes come from ``artifacts/`` beside the test file.
FLOOR_WRITES_TEST = """
import os
from pathlib import Path

import httpx
import pytest

URL = {url!r}
CLIENT = httpx.Client(trust_env=False, timeout=60)
BODY = {{"model": "x", "messages": [{{"role": "user", "content": "q"}}], "stream": True}}
HERE = Path(__file__).parent
BYTES = {{p.name: p.read_bytes() for p in (HERE / "artifacts").iterdir() if p.is_file()}}
TASK = HERE / "artifacts" / "task"
#: the task's files in the order ours writes them, and the folders they need
FILES = [(p.relative_to(TASK), p.read_bytes()) for p in sorted(TASK.rglob("*.json"))]
FILES.sort(key=lambda item: item[0].name == "result.json")  # result.json comes last
OUT = HERE / "results" / "run" / "tasks" / "tp"
DONE = []


def write(path, data):
    tmp = path.parent / ("." + path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)


@pytest.mark.parametrize("i", range({count}))
def test_request(i):
    with CLIENT.stream("POST", URL + "/chat/completions", json=BODY) as response:
        assert response.status_code == 200
        for _ in response.iter_lines():
            pass
    task = OUT / ("t" + str(i))
    task.mkdir(parents=True)
    for relative, data in FILES:
        if relative.parent.name:
            (task / relative.parent).mkdir(exist_ok=True)
        write(task / relative, data)
    DONE.append(i)


@pytest.fixture(scope="session", autouse=True)
def reports():
    yield
    run = OUT.parent.parent
    for name in ("ctrf", "summary"):
        head, entry, tail = (BYTES[name + part] for part in (".head", ".entry", ".tail"))
        write(run / (name + ".json"), head + b",".join(entry for _ in DONE) + tail)
"""


def capture_artifacts(root: Path, url: str) -> Path:
    """The files one serial task of ours writes, from a real one-task run: the task's
    folder as it is (trajectory.json, verifier/reward.json, result.json), and the head,
    the one task entry and the tail of ctrf.json and summary.json."""
    folder = root / "capture"
    folder.mkdir(parents=True)
    (folder / "bench_tp.toml").write_text(suite_text(1))
    env = {**os.environ, "OPENAI_API_KEY": "x"}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *NO_DEV]
    command += [*MODEL_ARGS, "--agentbench-base-url", url, *SERIAL]
    subprocess.run(command, cwd=folder, env=env, check=True, capture_output=True)
    run = (folder / "agentbench-results" / "latest").resolve()
    (task,) = (run / "tasks" / "tp").iterdir()  # t0, or t0[model]
    out = root / "artifacts"
    shutil.copytree(task, out / "task")
    for name, key in (("ctrf", '"tests":['), ("summary", '"tasks":[')):
        text = (run / f"{name}.json").read_text(encoding="utf-8")
        head, _, rest = text.partition(key)
        entry, _, tail = rest.rpartition("]")
        (out / f"{name}.head").write_text(head + key, encoding="utf-8")
        (out / f"{name}.entry").write_text(entry, encoding="utf-8")
        (out / f"{name}.tail").write_text("]" + tail, encoding="utf-8")
    return out


def writes_floor(root: Path, url: str, count: int, artifacts: Path) -> Run:
    folder = root / f"floorw{count}"
    if not folder.exists():
        folder.mkdir(parents=True)
        (folder / "test_plain.py").write_text(FLOOR_WRITES_TEST.format(url=url, count=count))
        shutil.copytree(artifacts, folder / "artifacts")
    shutil.rmtree(folder / "results", ignore_errors=True)  # each round writes afresh
    return run_pytest(folder)


def side(root: Path, url: str, count: int, label: str, pythonpath: str | None) -> Run:
    """One run of ours (``pythonpath`` first on the path: an older copy of the package)."""
    folder = root / f"{label}-{count}"
    if not folder.exists():
        folder.mkdir(parents=True)
        (folder / "bench_tp.toml").write_text(suite_text(count))
    old = os.environ.get("PYTHONPATH")
    if pythonpath:
        os.environ["PYTHONPATH"] = pythonpath
    try:
        return run_pytest(folder, *MODEL_ARGS, "--agentbench-base-url", url, *SERIAL)
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


def checkout(rev: str, into: Path) -> str:
    """The package as it was at ``rev``, under ``into``; the folder to put on the path."""
    into.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "archive", rev, "pytest_agentbench"],
        cwd=HERE.parent,
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return str(into)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--against", help="a git revision to measure in the same rounds")
    parser.add_argument("--profile", help="write a cProfile of ours at --tasks to this file")
    args = parser.parse_args()
    small, large = args.tasks // 10, args.tasks
    server, url = start_server()
    try:
        with tempfile.TemporaryDirectory(prefix="agentbench-serial-") as tmp:
            root = Path(tmp)
            if args.profile:
                folder = root / "profile"
                folder.mkdir()
                (folder / "bench_tp.toml").write_text(suite_text(large))
                env = {**os.environ, "OPENAI_API_KEY": "x"}
                env.pop("PYTHONDONTWRITEBYTECODE", None)
                command = [
                    sys.executable,
                    "-m",
                    "cProfile",
                    "-o",
                    str(Path(args.profile).resolve()),
                ]
                command += ["-m", "pytest", "-q", "-p", "no:cacheprovider", *NO_DEV, *MODEL_ARGS]
                command += ["--agentbench-base-url", url, *SERIAL]
                subprocess.run(command, cwd=folder, env=env, check=True, capture_output=True)
                return
            artifacts = capture_artifacts(root, url)
            sides: dict[str, str | None] = {"ours": None}
            if args.against:
                sides[args.against] = checkout(args.against, root / "against")
            cpu: dict[tuple[str, int], list[float]] = {}
            user: dict[tuple[str, int], list[float]] = {}
            for _ in range(args.rounds):
                for count in (small, large):
                    for label, path in sides.items():
                        run = side(root, url, count, label.replace("/", "_"), path)
                        cpu.setdefault((label, count), []).append(run.cpu_s)
                        user.setdefault((label, count), []).append(run.user_s)
                    source = FLOOR_TEST.format(url=url, count=count)
                    run = plain(root, f"floor{count}", source)
                    cpu.setdefault(("floor", count), []).append(run.cpu_s)
                    user.setdefault(("floor", count), []).append(run.user_s)
                    run = writes_floor(root, url, count, artifacts)
                    cpu.setdefault(("writes", count), []).append(run.cpu_s)
                    user.setdefault(("writes", count), []).append(run.user_s)
    finally:
        server.terminate()
        server.wait()

    def marginal(label: str, table: dict[tuple[str, int], list[float]]) -> float:
        span: int = large - small
        return (min(table[(label, large)]) - min(table[(label, small)])) / span

    for name, table in (("CPU (user + system)", cpu), ("user CPU alone", user)):
        floor, writes = marginal("floor", table), marginal("writes", table)
        sizes = f"{small} and {large} tasks, best of {args.rounds}"
        print(f"marginal {name} per serial task ({sizes}):")
        print(f"  floor (pytest + one streamed httpx request): {floor * 1000:.3f} ms")
        print(f"  floor with the task's writes (its files, atomically): {writes * 1000:.3f} ms")
        for label in sides:
            mine = marginal(label, table)
            print(
                f"  {label}: {mine * 1000:.3f} ms, {mine / floor:.2f}x the floor, "
                f"{mine / writes:.2f}x the floor with writes"
            )


if __name__ == "__main__":
    main()
