"""Every fenced block of README.md and docs/*.md is an example, and every example is a test.

Blocks are found and sorted by ``tests/docs_examples_support.py``. Suites go through the real
loader, and those that carry scripted replies run, with the plugin snippets loaded, in
one real ``pytest --agentbench`` run; Python snippets are executed (against a real
scripted server where they talk to one); command lines are checked for syntax
(``bash -n``), for options that exist and for paths that exist; expected output is
compared with what a real run prints. A block marked ``<!-- example: fragment -->`` is
skipped and counted; a block of a colleague's page that does not hold yet is skipped
with its reason in SKIPPED (see the report at the end of the run).
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))  # the helpers (*_support.py)
import docs_examples_support as dx
from docs_outputs_support import OUTPUT_CHECKS

from pytest_agentbench.errors import SuiteError
from pytest_agentbench.scripted.server import ScriptedServer

ROOT = dx.ROOT
BLOCKS = dx.all_blocks()
KINDS = {block.id: dx.kind(block) for block in BLOCKS}
#: Blocks of pages owned by others that do not hold today: (page, first line) -> reason.
SKIPPED: dict[tuple[str, str], str] = {}
#: Marks are for blocks that cannot run; they must stay rare.
MAX_FRAGMENTS = 3
RUN_TIMEOUT_S = 600


def of_kind(*kinds: str) -> list[Any]:
    return [pytest.param(b, id=b.id) for b in BLOCKS if KINDS[b.id] in kinds]


def skip_if_listed(block: dx.Block) -> None:
    for (doc, first), reason in SKIPPED.items():
        if block.doc == doc and block.first.startswith(first):
            pytest.skip(f"{block.id}: {reason}")


def run_pytest(folder: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """A real ``python -m pytest`` in ``folder``; its stdout and stderr."""
    full_env = {**os.environ, "COLUMNS": "80", **(env or {})}
    full_env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=folder, env=full_env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
    )  # fmt: skip
    return done.stdout + done.stderr


def real_loader() -> Callable[[Path], Any]:
    from suite_fuzz_support import real_loader as loader

    return loader()


# -- every block is accounted for -------------------------------------------------------


def test_every_block_is_an_example_of_a_known_kind() -> None:
    for block in BLOCKS:
        if KINDS[block.id] == "invalid":
            try:
                dx.parse_data(block)
            except Exception as exc:
                pytest.fail(f"{block.id}: the {block.lang} block does not parse: {exc}")
    unknown = [b.id for b in BLOCKS if KINDS[b.id] == "unknown"]
    assert not unknown, f"blocks no check understands (give them a mark): {unknown}"
    counts = Counter(KINDS.values())
    print(
        f"docs examples: {len(BLOCKS)} blocks: "
        + ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    )
    fragments = [f"{b.id} ({b.mark})" for b in BLOCKS if KINDS[b.id] == "fragment"]
    print(f"docs examples: {len(fragments)} skipped as fragments: {fragments}")
    print(f"docs examples: {len(SKIPPED)} skipped until they hold: {sorted(SKIPPED)}")
    assert len(fragments) <= MAX_FRAGMENTS
    for block in BLOCKS:
        if KINDS[block.id] == "output":
            assert any(block.first.startswith(first) for _, first in OUTPUT_CHECKS), (
                f"{block.id}: no check for this expected output; add one to OUTPUT_CHECKS"
            )


# -- suites -------------------------------------------------------------------------------


def suite_file(block: dx.Block, folder: Path) -> Path:
    """Write the block as a suite file (a part completed into a suite) with what it
    needs next to it (a seed directory, a dataset); returns the suite's path."""
    folder.mkdir(parents=True, exist_ok=True)
    text = block.text
    if KINDS[block.id] == "suite-part":
        if block.first.startswith("[[task.scripted]]"):
            text = (
                '[suite]\nmode = "agent"\n[[task]]\nid = "part"\ninput = "Fix it."\n'
                'files = { "stats/core.py" = "x = 1\\n" }\n'
                'verifier = { kind = "command", run = "true" }\n' + text
            )
        else:
            text = f'[suite]\n{text}[[task]]\nid = "part"\ninput = "1 + 1?"\ntarget = "2"\n'
            text += 'scripted = ["2"]\n'
    value = tomllib.loads(text) if block.lang == "toml" else dx.parse_data(block)
    table = value.get("suite", {})
    if isinstance(table.get("files"), str):
        (folder / table["files"]).mkdir(parents=True, exist_ok=True)
    # a manifest of docs/datasets.md: its sample file (data/HumanEval.jsonl.gz: the sample
    # data/humaneval.jsonl, gzipped)
    named = str(table.get("dataset"))
    sample = ROOT / "example_datasets" / named.removesuffix(".gz")
    sample = sample.with_name(sample.name.lower()) if not sample.is_file() else sample
    if "dataset" in table and sample.is_file():
        (folder / named).parent.mkdir(parents=True, exist_ok=True)
        if named.endswith(".gz"):
            (folder / named).write_bytes(gzip.compress(sample.read_bytes()))
        else:
            shutil.copy(sample, folder / named)
    elif "dataset" in table:
        fields = table.get("fields", {})
        record = {fields.get(key, key): f"{key} value" for key in ("id", "input", "target")}
        record.update({var: "f" for var in fields.get("vars", [])})
        record[fields.get("id", "id")] = "HumanEval/0"
        dataset = folder / table["dataset"]
        dataset.parent.mkdir(parents=True, exist_ok=True)
        dataset.write_text(json.dumps(record) + "\n", encoding="utf-8")
    stem = re.sub(r"\W", "_", f"{Path(block.doc).stem}_{block.line}")
    path = folder / f"bench_{stem}.{block.lang}"
    path.write_text(text, encoding="utf-8")
    return path


def has_replies(block: dx.Block) -> bool:
    return "scripted" in block.text or KINDS[block.id] == "suite-part"


@pytest.mark.parametrize("block", of_kind("suite", "suite-part"))
def test_suite_examples_load(block: dx.Block, tmp_path: Path) -> None:
    skip_if_listed(block)
    path = suite_file(block, tmp_path)
    error = None
    try:
        suite = real_loader()(path)
    except SuiteError as exc:
        error = exc
    if error is not None:
        pytest.fail(f"{block.id}: the documented suite does not load:\n{error}", pytrace=False)
    assert suite.tasks


#: Suites the plugin snippets are run with (the snippet's hook name -> suite text), and
#: what each task must end as.
PLUGIN_SUITES = {
    "pytest_agentbench_verifiers": (
        'verifier = { kind = "palindrome" }\n'
        '[[task]]\nid = "level"\ninput = "A palindrome?"\nscripted = ["Level"]\n'
        '[[task]]\nid = "abc"\ninput = "A palindrome?"\nscripted = ["abc"]\n',
        {"level": "passed", "abc": "failed"},
    ),
    "pytest_agentbench_tools": (
        'mode = "agent"\ntools = ["word_count"]\nfiles = { "a.txt" = "one two three" }\n'
        '[[task]]\nid = "count"\ninput = "How many words in a.txt?"\ntarget = "3"\n'
        'scripted = [{ tool_calls = [{ name = "word_count", arguments = { path = "a.txt" } }] },'
        ' "3"]\n',
        {"count": "passed"},
    ),
    "pytest_agentbench_paraphrase": (  # loaded only: no --agentbench-perturb in that run
        '[[task]]\nid = "p"\ninput = "say ok"\ntarget = "ok"\nscripted = ["ok"]\n',
        {"p": "passed"},
    ),
    "pytest_agentbench_failure_reason": (
        '[[task]]\nid = "no"\ninput = "Say yes."\ntarget = "yes"\nscripted = ["no"]\n',
        {"no": "failed"},
    ),
}


@pytest.fixture(scope="module")
def docs_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """One real run of every suite example with scripted replies, and of every plugin
    snippet with its suite; returns the output and the run folder."""
    folder = tmp_path_factory.mktemp("docs_run")
    plugins: list[str] = []
    for block in BLOCKS:
        kind = KINDS[block.id]
        if kind in ("suite", "suite-part") and has_replies(block):
            suite_file(block, folder / f"s{block.line}_{Path(block.doc).stem}")
        elif kind == "plugin":
            hook = next(h for h in PLUGIN_SUITES if f"def {h}(" in block.text)
            name = f"docs_plugin_{list(PLUGIN_SUITES).index(hook)}"
            (folder / f"{name}.py").write_text(block.text, encoding="utf-8")
            plugins += ["-p", name]
            suite = f'[suite]\nname = "{name}"\n' + PLUGIN_SUITES[hook][0]
            (folder / f"bench_{name}.toml").write_text(suite, encoding="utf-8")
    out = run_pytest(folder, "--agentbench", *plugins, env={"PYTHONPATH": str(folder)})
    return out, folder / "agentbench-results" / "latest"


@pytest.mark.slow
def test_suite_examples_with_replies_and_plugin_snippets_run(docs_run: tuple[str, Path]) -> None:
    """Every task of every example passes, the plugin suites end as designed; read from
    summary.json by node id (two examples may share a suite name and a task id)."""
    out, run = docs_run
    assert "Traceback" not in out and "ERROR collecting" not in out, out[-3000:]
    records = json.loads((run / "summary.json").read_text(encoding="utf-8"))["tasks"]
    expected: dict[tuple[str, str], str] = {}
    for index, (_, tasks) in enumerate(PLUGIN_SUITES.values()):
        expected.update({(f"docs_plugin_{index}", t): o for t, o in tasks.items()})
    for record in records:
        want = expected.pop((record["suite"], record["task_id"]), "passed")
        assert record["outcome"] == want, f"{record['nodeid']}: {record['outcome']}"
    assert not expected, f"plugin suites that did not run: {sorted(expected)}"
    examples = sum(has_replies(b) for b in BLOCKS if KINDS[b.id] in ("suite", "suite-part"))
    assert len({r["file"] for r in records}) == examples + len(PLUGIN_SUITES)
    tool_task = next(r for r in records if r["suite"] == "docs_plugin_1")
    trajectory = json.loads((Path(tool_task["rollout_dir"]) / "trajectory.json").read_text())
    results = [r for step in trajectory["requests"] for r in step.get("tool_results", [])]
    assert [(r["name"], r["output"], r["is_error"]) for r in results] == [
        ("word_count", "3", False)
    ]


@pytest.mark.parametrize("block", of_kind("script"))
def test_script_examples_load(block: dx.Block, tmp_path: Path) -> None:
    from pytest_agentbench.scripted.script import load_script_file

    path = tmp_path / f"replies.{block.lang}"
    path.write_text(block.text, encoding="utf-8")
    script = load_script_file(path)
    assert script.scripts or script.default


@pytest.mark.parametrize("block", of_kind("agent"))
def test_agent_files_load(block: dx.Block, tmp_path: Path) -> None:
    """An agent file (``--agentbench-agent``) is read and checked by the loader a run uses,
    ``{agent_dir}`` filled in with its folder."""
    from pytest_agentbench.suites.agent_file import load_agent_file

    path = tmp_path / "agent.toml"
    path.write_text(block.text, encoding="utf-8")
    table = load_agent_file(path).as_json()
    assert "{agent_dir}" not in json.dumps(table) and table["kind"] == block_kind(block)


def block_kind(block: dx.Block) -> object:
    return dx.parse_data(block)["kind"]


@pytest.mark.parametrize("block", of_kind("prices"))
def test_price_files_load(block: dx.Block, tmp_path: Path) -> None:
    """A price file of docs/cost.md is read by the loader a run uses."""
    from pytest_agentbench.models.prices import load_price_file

    path = tmp_path / f"prices.{block.lang}"
    path.write_text(block.text, encoding="utf-8")
    assert load_price_file(path)


# -- commands -----------------------------------------------------------------------------


def cli_options(module: str, sub: list[str]) -> str:
    done = subprocess.run(
        [sys.executable, "-m", module, *sub, "--help"], capture_output=True, text=True,
        cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def check_command(words: list[str], text: str, pytester: pytest.Pytester) -> bool:
    """Check one documented command; True when it was one of ours."""
    if (args := dx.pytest_args(words)) is not None:
        pytester.chdir()
        try:
            config = pytester.parseconfig(*args)
        except pytest.UsageError as exc:
            pytest.fail(f"{' '.join(words)}: {exc}", pytrace=False)
        for arg in config.args:
            path = arg.split("::")[0]
            if "..." not in path and not path.startswith("results"):
                assert (ROOT / path).exists(), f"{' '.join(words)}: {path} does not exist"
            if path.endswith(".py"):
                source = (ROOT / path).read_text(encoding="utf-8")
                for name in dx.assignments(text):
                    assert name in source, f"{path} does not read {name}"
        return True
    if (cli := dx.module_cli(words)) is not None:
        module, args = cli
        sub = (
            [args[0]]
            if args and not args[0].startswith("-") and module == "pytest_agentbench"
            else []
        )
        help_text = cli_options(module, sub)
        for arg in args:
            if arg.startswith("--"):
                assert f"{arg.split('=')[0]} " in help_text, f"{module} has no option {arg}"
        for required in re.findall(r"(?<![\[\w])(--[\w-]+) [A-Z]+", help_text.split("\n\n")[0]):
            assert required in args, f"{' '.join(words)}: misses the required {required}"
        return True
    return False


def check_shell(text: str, where: str, pytester: pytest.Pytester) -> int:
    done = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, f"{where}: not valid shell: {done.stderr}"
    return sum(check_command(words, text, pytester) for words in dx.commands(text))


@pytest.mark.parametrize("block", of_kind("shell"))
def test_command_lines_parse_and_name_real_options(
    block: dx.Block, pytester: pytest.Pytester
) -> None:
    skip_if_listed(block)
    check_shell(block.text, block.id, pytester)


@pytest.mark.parametrize("block", of_kind("workflow"))
def test_workflow_steps_name_real_options(block: dx.Block, pytester: pytest.Pytester) -> None:
    workflow = dx.parse_data(block)
    steps = [s for job in workflow["jobs"].values() for s in job["steps"] if "run" in s]
    ours = 0
    for step in steps:
        text = re.sub(r"\$\{\{[^}]*\}\}", "1", step["run"]).replace("\n", " ")
        ours += check_shell(text, f"{block.id} step {step.get('name', step['run'][:30])}", pytester)
    assert ours >= 2  # the pytest run and the merge


# -- Python snippets ----------------------------------------------------------------------


@pytest.mark.parametrize("block", of_kind("ini"))
def test_ini_examples_are_read_by_a_real_run(
    block: dx.Block, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ini file in a real ``pytest --agentbench --collect-only`` (every key variable it
    names set): it is accepted, and each model it lists gets its items."""
    skip_if_listed(block)
    for name in set(re.findall(r"key_env=(\w+)", block.text)) | {"OPENAI_API_KEY"}:
        monkeypatch.setenv(name, "sk-docs-example")
    pytester.makeini(block.text)
    pytester.makefile(".toml", bench_one='[[task]]\nid = "t"\ninput = "hi"\ntarget = "hi"\n')
    result = pytester.runpytest("--agentbench", "--collect-only", "-q", "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    for name in re.findall(r"^\s+([\w.+/-]+)\s*=", block.text, re.M):
        result.stdout.fnmatch_lines([f"*::t[[]{name}[]]"])


@pytest.mark.parametrize("block", of_kind("python"))
def test_python_snippets_run(block: dx.Block) -> None:
    """Run as written; ``PORT`` and ``[...]`` stand for a real scripted server's port and
    a real message list, and the SDK a snippet names is imported for it."""
    skip_if_listed(block)
    namespace: dict[str, Any] = {"__name__": "docs_snippet"}
    with ScriptedServer({"greet": ["Hello!", "Hello again."]}) as server:
        port = server.url.split(":")[2].split("/")[0]
        code = block.text.replace("PORT", port).replace(
            "[...]", '[{"role": "user", "content": "hi"}]'
        )
        for sdk, name in (("anthropic", "Anthropic"), ("openai", "OpenAI")):
            if re.search(rf"\b{name}\(", code) and f"import {name}" not in code:
                namespace[name] = getattr(pytest.importorskip(sdk), name)
        exec(compile(code, block.id, "exec"), namespace)
        if "greet" in code:
            assert [r["key"] for r in server.requests] == ["greet", "greet"]


@pytest.mark.parametrize("block", of_kind("request"))
def test_request_bodies_are_what_the_client_sends(block: dx.Block) -> None:
    """The documented body has the keys of a real request of the same protocol."""
    from pytest_agentbench.models.base import ModelRequest, ModelSpec, ToolSpec

    documented = dx.parse_data(block)
    if "anthropic" in block.doc:
        from pytest_agentbench.models.anthropic import AnthropicClient as Client

        provider = "anthropic"
    else:
        from pytest_agentbench.models.openai_responses import OpenAIResponsesClient as Client

        provider = "openai-responses"
    request = ModelRequest(
        messages=({"role": "user", "content": "hi"},), system="be brief",
        tools=(ToolSpec("t"),), max_tokens=256, stream=True, timeout_s=30,
    )  # fmt: skip
    with ScriptedServer(default=["ok"]) as server:
        client = Client(ModelSpec(provider, documented["model"]), server.url, "k", trust_env=False)
        try:
            client.generate(request)
        finally:
            client.close()
        sent = server.requests[-1]["body"]
    assert set(documented) == set(sent), f"documented {sorted(documented)}, sent {sorted(sent)}"
    for key in ("model", "max_tokens", "max_output_tokens", "stream", "store"):
        if key in documented:
            assert documented[key] == sent[key], key


# -- expected output ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def example_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """The README's first command for real: ``pytest --agentbench example_suites``."""
    folder = tmp_path_factory.mktemp("example_run")
    # the Harbor dataset is left out of this run by the project's norecursedirs
    # (pyproject.toml), which a copy outside the project does not read
    skipped = shutil.ignore_patterns("harbor")
    shutil.copytree(ROOT / "example_suites", folder / "example_suites", ignore=skipped)
    out = run_pytest(folder, "--agentbench", "example_suites")
    return out, folder / "agentbench-results"


@pytest.mark.slow
@pytest.mark.parametrize("block", of_kind("output"))
def test_expected_output_matches_a_real_run(
    block: dx.Block, request: pytest.FixtureRequest
) -> None:
    skip_if_listed(block)
    check = next(
        c
        for (doc, first), c in OUTPUT_CHECKS.items()
        if doc == block.doc and block.first.startswith(first)
    )
    check(block, request)
