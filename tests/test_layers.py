"""The layer rule of DESIGN.md ("Records and the layer rule"), checked on the source.

Imports point down the data flow and never back up. Every module of the package is parsed
(never imported) and every import in it is checked: top-level and inside functions, under
``TYPE_CHECKING`` or not, absolute or relative. A failure names the file, the line and the
forbidden import. ``docs/architecture.md`` shows the same table; a test keeps the two equal.

What the rule does not see: a module named in a string (``importlib.import_module``); the
package has none, and ``test_no_import_by_name`` keeps it so.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest_agentbench

PACKAGE = Path(pytest_agentbench.__file__).parent
ROOT = PACKAGE.parent
ARCHITECTURE = ROOT / "docs" / "architecture.md"

#: One folder per layer. ``core`` is the bottom: the shared records, usage and stream
#: events every layer may import.
LAYERS = (
    "core",
    "agents",
    "suites",
    "models",
    "scripted",
    "runner",
    "sandbox",
    "verifiers",
    "artifacts",
    "report",
    "schemas",
)
#: Modules at the package root that belong to the bottom too (stdlib only): the public
#: error tree and URL credential stripping. Every other root module is glue (plugin.py,
#: run.py, settings.py …), which may import any layer and which no layer may import.
BOTTOM_MODULES = ("errors", "urls")

_ONLY_THE_BOTTOM = frozenset(LAYERS) - {"core"}
#: DESIGN.md's table: the layers a layer never imports. Three rows import only the
#: bottom: core/ (it is the bottom), sandbox/ (what verifiers and the agent loop ask; it
#: importing a verifier would be a cycle) and scripted/ (it runs standalone).
NEVER: dict[str, frozenset[str]] = {
    "report": frozenset({"models", "runner", "verifiers", "sandbox", "scripted"}),
    "artifacts": frozenset({"runner", "models", "report", "verifiers"}),
    "models": frozenset({"runner", "verifiers", "report", "artifacts", "sandbox", "suites"}),
    "verifiers": frozenset({"runner", "report"}),
    "sandbox": _ONLY_THE_BOTTOM - {"sandbox"},
    "suites": frozenset({"runner", "models", "report", "artifacts"}),
    "runner": frozenset({"report", "scripted"}),
    "scripted": _ONLY_THE_BOTTOM - {"scripted"},
    "core": _ONLY_THE_BOTTOM,
    # agents under test and their gateway sit above the runner: below them, anything
    "agents": frozenset(),
}
#: schemas/ holds the published JSON Schemas of the files a run writes and their loader,
#: for users and tests: it imports only the bottom, and no layer reads it while running.
NEVER = {
    layer: rule | {"schemas"} | ({"agents"} if layer != "agents" else set())
    for layer, rule in NEVER.items()
}
NEVER["schemas"] = _ONLY_THE_BOTTOM - {"schemas"}
#: The agent loop asks sandbox/ for its workspace, never a verifier.
AGENT_LOOP = ("runner/agent.py", "runner/tools.py")
#: Where pytest may be imported: the glue at the root, and verifiers/ (python_tests runs
#: pytest as its check). The runner and the layers below it know nothing of pytest.
PYTEST_LAYERS = frozenset({"verifiers"})


@dataclass(frozen=True)
class Import:
    """One import statement's target, resolved to an absolute module name."""

    file: Path
    line: int
    module: str

    def where(self, package: Path) -> str:
        return f"{package.name}/{self.file.relative_to(package).as_posix()}:{self.line}"


def _module_parts(file: Path, package: Path) -> list[str]:
    parts = [package.name, *file.relative_to(package).with_suffix("").parts]
    return parts[:-1] if parts[-1] == "__init__" else parts


def imports_of(file: Path, package: Path) -> Iterator[Import]:
    """Every import in ``file``, wherever it stands, with relative ones made absolute.
    ``from a import b`` yields ``a.b`` when ``b`` is a module of the package, else ``a``."""
    tree = ast.parse(file.read_text(encoding="utf-8"), filename=str(file))
    here = _module_parts(file, package)
    if file.name != "__init__.py":
        here = here[:-1]
    nodes = (n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom))
    for node in sorted(nodes, key=lambda n: n.lineno):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(file, node.lineno, alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = here[: len(here) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                is_module = _path_of(sub, package) is not None
                yield Import(file, node.lineno, sub if is_module else module)


def _path_of(module: str, package: Path) -> Path | None:
    parts = module.split(".")
    if parts[0] != package.name:
        return None
    path = package.joinpath(*parts[1:])
    if path.with_suffix(".py").is_file() or (path / "__init__.py").is_file():
        return path
    return None


def layer_of(file: Path, package: Path) -> str | None:
    """The layer folder ``file`` is in, or None for a module at the package root."""
    parts = file.relative_to(package).parts
    return parts[0] if len(parts) > 1 else None


def target_of(module: str, package: Path) -> str | None:
    """What an imported module is: a layer name, ``root:<name>`` for a root module,
    ``package`` for the package itself, or None when it is not ours."""
    parts = module.split(".")
    if parts[0] != package.name:
        return None
    if len(parts) == 1:
        return "package"
    if (package / parts[1]).is_dir():
        return parts[1]
    return f"root:{parts[1]}"


def violations(package: Path) -> list[str]:
    """Every import in ``package`` that breaks the layer rule, one line each:
    ``<file>:<line>: <layer>/ imports <module> (<rule>)``."""
    found = []
    for file in sorted(package.rglob("*.py")):
        layer = layer_of(file, package)
        if layer is None:
            continue
        relative = file.relative_to(package).as_posix()
        for imp in imports_of(file, package):
            target = target_of(imp.module, package)
            problem = None
            if target is None:
                top = imp.module.split(".")[0]
                if top in ("pytest", "_pytest") and layer not in PYTEST_LAYERS:
                    problem = f"{layer}/ knows nothing of pytest"
            elif target.startswith("root:") and target[5:] not in BOTTOM_MODULES:
                problem = f"{layer}/ never imports the glue at the package root"
            elif target in NEVER.get(layer, ()):
                problem = f"{layer}/ never imports {target}"
            elif target == "verifiers" and relative in AGENT_LOOP:
                problem = "the agent loop asks sandbox/, not a verifier"
            if problem:
                found.append(f"{imp.where(package)}: {layer}/ imports {imp.module} ({problem})")
    return found


def test_every_layer_folder_is_known() -> None:
    """A new folder must be given its place in the table before it can pass unchecked."""
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and any(p.glob("*.py"))}
    unknown = sorted(folders - set(LAYERS))
    assert not unknown, f"give {unknown} a row in NEVER here and in docs/architecture.md"
    assert folders == set(LAYERS)


def test_imports_point_down_the_data_flow() -> None:
    problems = violations(PACKAGE)
    assert not problems, "imports against the layer rule:\n" + "\n".join(problems)


def test_no_import_by_name() -> None:
    """The AST walk cannot follow a module named in a string; none may be."""
    calls = []
    for file in sorted(PACKAGE.rglob("*.py")):
        text = file.read_text(encoding="utf-8")
        for match in re.finditer(r"import_module\(|__import__\(", text):
            line = text.count("\n", 0, match.start()) + 1
            calls.append(f"{file.relative_to(ROOT).as_posix()}:{line}")
    assert not calls, "imports by name escape tests/test_layers.py: " + ", ".join(calls)


def _write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_the_check_sees_every_kind_of_import(tmp_path: Path) -> None:
    """The checker itself, on a package of real files that breaks the rule in every way it
    can be written: relative, inside a function, under TYPE_CHECKING, ``from pkg import
    layer``, a plain ``import``, the glue, pytest, and the agent loop asking a verifier."""
    package = tmp_path / "pytest_agentbench"
    for name in (*LAYERS, ""):
        _write(package, f"{name}/__init__.py" if name else "__init__.py", "")
    _write(package, "errors.py", "")
    _write(package, "plugin.py", "")
    _write(package, "runner/records.py", "")
    _write(package, "verifiers/sandboxed.py", "")
    _write(
        package,
        "artifacts/record.py",
        "from ..runner.records import Rollout\n"
        "from pytest_agentbench import errors\n"
        "def load():\n"
        "    from ..report import live\n",
    )
    _write(
        package,
        "report/live.py",
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    import pytest_agentbench.models\n"
        "from pytest_agentbench import runner\n"
        "from .. import plugin\n"
        "import pytest\n",
    )
    _write(package, "runner/agent.py", "from pytest_agentbench.verifiers.sandboxed import X\n")
    _write(package, "runner/rollout.py", "from pytest_agentbench.verifiers import sandboxed\n")
    _write(package, "core/records.py", "from pytest_agentbench.errors import AgentbenchError\n")

    assert violations(package) == [
        "pytest_agentbench/artifacts/record.py:1: artifacts/ imports "
        "pytest_agentbench.runner.records (artifacts/ never imports runner)",
        "pytest_agentbench/artifacts/record.py:4: artifacts/ imports "
        "pytest_agentbench.report.live (artifacts/ never imports report)",
        "pytest_agentbench/report/live.py:3: report/ imports "
        "pytest_agentbench.models (report/ never imports models)",
        "pytest_agentbench/report/live.py:4: report/ imports "
        "pytest_agentbench.runner (report/ never imports runner)",
        "pytest_agentbench/report/live.py:5: report/ imports "
        "pytest_agentbench.plugin (report/ never imports the glue at the package root)",
        "pytest_agentbench/report/live.py:6: report/ imports pytest "
        "(report/ knows nothing of pytest)",
        "pytest_agentbench/runner/agent.py:1: runner/ imports "
        "pytest_agentbench.verifiers.sandboxed (the agent loop asks sandbox/, not a verifier)",
    ]


def _architecture_table() -> dict[str, set[str]]:
    """``docs/architecture.md``'s layer table: folder → the layers it may import."""
    table = {}
    for line in ARCHITECTURE.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and (folder := re.fullmatch(r"`(\w+)/`", cells[0])):
            table[folder.group(1)] = set(re.findall(r"`(\w+)/`", cells[2]))
    return table


def test_architecture_page_shows_the_rule() -> None:
    """docs/architecture.md's "may import" column is exactly what this rule allows: every
    other layer that is not forbidden (the bottom is always allowed and not listed)."""
    expected = {layer: set(LAYERS) - NEVER[layer] - {layer, "core"} for layer in LAYERS}
    assert _architecture_table() == expected


def test_architecture_page_names_real_files() -> None:
    """Every file docs/architecture.md names is a file of the package: the page is a map,
    and a map with a missing street sends a newcomer nowhere."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    named = set(re.findall(r"`([\w/]+\.(?:py|json))`", text))
    missing = sorted(
        name for name in named if not (PACKAGE / name).is_file() and not (ROOT / name).is_file()
    )
    assert len(named) > 50
    assert not missing, f"docs/architecture.md names files that do not exist: {missing}"
