"""The layer rule of DESIGN.md ("Records and the layer rule"), checked on the source.

The rule is an import ORDER: every module of the package belongs to a layer (its folder;
at the root, ``plugin`` and ``__main__`` are the top, ``errors`` and the package's
``__init__`` the bottom, ``python_tasks`` a suite format), and a module may import only
modules of its own layer, of a peer layer, or of a layer after it in ``ORDER``. Every
module is parsed (never imported) and every import in it is checked: top-level and
inside functions, under ``TYPE_CHECKING`` or not, absolute or relative. A failure names
the file, the line and the forbidden import. Besides the order, no two modules may import
each other round a circle (``cycles``), whatever their layers.

``docs/architecture.md`` shows the same order; a test keeps the two equal.

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

#: The import order, top first: a layer may import only its own, its peers' (the layers
#: on the same line) and those after it. ``plugin`` is the pytest entry; ``session``,
#: ``config`` and ``hooks`` the glue that wires the layers into pytest; ``core`` and
#: ``errors`` the bottom everyone may import, which imports nothing of ours but each other.
ORDER: tuple[tuple[str, ...], ...] = (
    ("plugin",),
    ("session",),
    ("config", "hooks"),
    ("agents",),
    ("runner",),
    ("verifiers",),
    ("sandbox",),
    ("environments",),
    ("models",),
    ("scripted",),
    ("report",),
    ("artifacts",),
    ("suites",),
    ("schemas",),
    ("core", "errors"),
)
RANK = {layer: rank for rank, peers in enumerate(ORDER) for layer in peers}
#: The layer of each module at the package root (the public face only).
ROOT_MODULES = {
    "plugin": "plugin",
    "__main__": "plugin",
    "python_tasks": "suites",
    "__init__": "errors",
    "errors": "errors",
}
#: The root may hold at most this many modules: the rest lives in folders.
MAX_ROOT_MODULES = 6
#: schemas/ holds the published JSON Schemas of the files a run writes and their loader,
#: for users and tests: no module of the package imports it while running.
NEVER_IMPORTED = frozenset({"schemas"})
#: Modules that import nothing of ours at all: the public exception tree is the floor.
STANDALONE = ("errors.py",)
#: The agent loop asks sandbox/ for its workspace, never a verifier.
AGENT_LOOP = (
    "runner/agent.py",
    "runner/agent_run.py",
    "runner/turn_requests.py",
    "runner/tool_loop.py",
    "runner/tools.py",
)
#: Where pytest may be imported: the glue, and verifiers/ (python_tests runs pytest as its
#: check). The agents, the runner and the layers below it know nothing of pytest.
PYTEST_LAYERS = frozenset({"plugin", "session", "config", "hooks", "verifiers"})


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


def layer_of(file: Path, package: Path) -> str:
    """The layer ``file`` is in: its folder, or for a module at the root its row of
    ``ROOT_MODULES`` (a root module not listed there is its own name, in no layer)."""
    parts = file.relative_to(package).parts
    if len(parts) > 1:
        return parts[0]
    return ROOT_MODULES.get(file.stem, f"root:{file.stem}")


def module_name(file: Path, package: Path) -> str:
    return ".".join(_module_parts(file, package))


def file_of(module: str, package: Path) -> Path | None:
    """The file of one of our modules (a package's ``__init__.py``), or None."""
    path = _path_of(module, package)
    if path is None:
        return None
    return path.with_suffix(".py") if path.with_suffix(".py").is_file() else path / "__init__.py"


def graph(package: Path) -> dict[str, dict[str, Import]]:
    """Every module of ``package`` → the modules of ours it imports, each with its first
    import statement. Importing ``a.b`` runs ``a/__init__`` too; that implicit edge is not
    counted (a package's ``__init__`` importing its own modules is no circle)."""
    edges: dict[str, dict[str, Import]] = {}
    for file in sorted(package.rglob("*.py")):
        found = edges.setdefault(module_name(file, package), {})
        for imp in imports_of(file, package):
            target = file_of(imp.module, package)
            if target is not None and target != file:
                found.setdefault(module_name(target, package), imp)
    return edges


def violations(package: Path) -> list[str]:
    """Every import in ``package`` against the order, one line each:
    ``<file>:<line>: <layer> imports <module> (<rule>)``."""
    found = []
    for file in sorted(package.rglob("*.py")):
        layer = layer_of(file, package)
        relative = file.relative_to(package).as_posix()
        for imp in imports_of(file, package):
            target_file = file_of(imp.module, package)
            problem = None
            if imp.module.split(".")[0] != package.name:
                top = imp.module.split(".")[0]
                if top in ("pytest", "_pytest") and layer not in PYTEST_LAYERS:
                    problem = f"{layer} knows nothing of pytest"
            elif target_file is None or target_file == file:
                continue
            else:
                target = layer_of(target_file, package)
                if relative in STANDALONE:
                    problem = f"{relative} imports nothing of ours"
                elif target == layer:
                    continue
                elif layer not in RANK or target not in RANK:
                    unknown = layer if layer not in RANK else target
                    problem = f"{unknown} has no place in the order"
                elif target in NEVER_IMPORTED:
                    problem = f"nothing of the package imports {target}"
                elif RANK[target] < RANK[layer]:
                    problem = f"{target} comes before {layer} in the order"
                elif target == "verifiers" and relative in AGENT_LOOP:
                    problem = "the agent loop asks sandbox/, not a verifier"
            if problem:
                found.append(f"{imp.where(package)}: {layer} imports {imp.module} ({problem})")
    return found


def cycles(package: Path) -> list[str]:
    """Every import circle in ``package``, one line each: the modules of one strongly
    connected component, each with the import that leads on (Tarjan's algorithm)."""
    edges = graph(package)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, {}):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    lines = []
    for component in sorted(components):
        members = set(component)
        links = [
            f"{imp.where(package)} imports {nxt}"
            for node in component
            for nxt, imp in sorted(edges[node].items())
            if nxt in members
        ]
        lines.append(f"circle of {len(component)}: " + "; ".join(links))
    return lines


def test_every_folder_and_root_module_has_its_place() -> None:
    """A new folder (or root module) must be given its place in ORDER here and in
    docs/architecture.md before it can pass unchecked; the root stays the public face."""
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and any(p.glob("*.py"))}
    unknown = sorted(folders - set(RANK))
    assert not unknown, f"give {unknown} a place in ORDER here and in docs/architecture.md"
    root = sorted(p.stem for p in PACKAGE.glob("*.py"))
    assert set(root) <= set(ROOT_MODULES), f"a new module at the root: {root}"
    assert len(root) <= MAX_ROOT_MODULES


def test_imports_follow_the_order() -> None:
    problems = violations(PACKAGE)
    assert not problems, "imports against the layer order:\n" + "\n".join(problems)


def test_no_import_circles() -> None:
    found = cycles(PACKAGE)
    assert not found, "modules that import each other round a circle:\n" + "\n".join(found)


def test_no_import_by_name() -> None:
    """The AST walk cannot follow a module named in a string; none may be."""
    calls = []
    for file in sorted(PACKAGE.rglob("*.py")):
        text = file.read_text(encoding="utf-8")
        for match in re.finditer(r"import_module\(|__import__\(", text):
            line = text.count("\n", 0, match.start()) + 1
            calls.append(f"{file.relative_to(ROOT).as_posix()}:{line}")
    assert not calls, "imports by name escape tests/package/test_layers.py: " + ", ".join(calls)


def _write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _planted(tmp_path: Path) -> Path:
    """A package of real files laid out like ours, every import in it allowed."""
    package = tmp_path / "pytest_agentbench"
    for layer in RANK:
        if layer not in ROOT_MODULES.values():
            _write(package, f"{layer}/__init__.py", "")
    for name in ROOT_MODULES:
        _write(package, f"{name}.py", "")
    _write(package, "runner/records.py", "")
    _write(package, "verifiers/sandboxed.py", "")
    _write(package, "session/run.py", "from pytest_agentbench.config import settings\n")
    _write(package, "config/settings.py", "from ..core import records\nimport pytest\n")
    _write(package, "core/records.py", "from pytest_agentbench.errors import AgentbenchError\n")
    _write(package, "artifacts/record.py", "from ..suites import task\n")
    _write(package, "suites/task.py", "")
    return package


def test_the_check_passes_an_allowed_package(tmp_path: Path) -> None:
    package = _planted(tmp_path)
    assert violations(package) == []
    assert cycles(package) == []


def test_the_check_sees_every_kind_of_import(tmp_path: Path) -> None:
    """The checker itself, on a package of real files that breaks the order in every way
    it can be written: relative, inside a function, under TYPE_CHECKING, ``from pkg import
    layer``, a plain ``import``, the glue, the bottom, pytest, and the agent loop asking a
    verifier."""
    package = _planted(tmp_path)
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
    _write(package, "errors.py", "from pytest_agentbench.session import run\n")
    _write(package, "__init__.py", "from pytest_agentbench.errors import AgentbenchError\n")
    _write(package, "config/options.py", "from pytest_agentbench.session.run import RunState\n")
    _write(package, "config/model_list.py", "from pytest_agentbench.hooks import specs\n")
    _write(package, "hooks/specs.py", "from pytest_agentbench.config import settings\n")

    assert violations(package) == [
        "pytest_agentbench/artifacts/record.py:1: artifacts imports "
        "pytest_agentbench.runner.records (runner comes before artifacts in the order)",
        "pytest_agentbench/artifacts/record.py:4: artifacts imports "
        "pytest_agentbench.report.live (report comes before artifacts in the order)",
        "pytest_agentbench/config/options.py:1: config imports "
        "pytest_agentbench.session.run (session comes before config in the order)",
        "pytest_agentbench/errors.py:1: errors imports "
        "pytest_agentbench.session.run (errors.py imports nothing of ours)",
        "pytest_agentbench/report/live.py:3: report imports "
        "pytest_agentbench.models (models comes before report in the order)",
        "pytest_agentbench/report/live.py:4: report imports "
        "pytest_agentbench.runner (runner comes before report in the order)",
        "pytest_agentbench/report/live.py:5: report imports "
        "pytest_agentbench.plugin (plugin comes before report in the order)",
        "pytest_agentbench/report/live.py:6: report imports pytest "
        "(report knows nothing of pytest)",
        "pytest_agentbench/runner/agent.py:1: runner imports "
        "pytest_agentbench.verifiers.sandboxed (the agent loop asks sandbox/, not a verifier)",
    ]


def test_the_check_sees_a_circle(tmp_path: Path) -> None:
    """A circle inside one layer (the order allows each link) and one through a
    function-local import across layers are both found, named by their links."""
    package = _planted(tmp_path)
    _write(package, "scripted/handler.py", "from pytest_agentbench.scripted import server\n")
    _write(
        package,
        "scripted/server.py",
        "def serve():\n    from pytest_agentbench.scripted.handler import Handler\n",
    )
    _write(package, "session/items.py", "from pytest_agentbench.session.run import RunState\n")
    _write(package, "session/run.py", "from pytest_agentbench.session.inflight import InFlight\n")
    _write(
        package,
        "session/inflight.py",
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from pytest_agentbench.session.items import TaskItem\n",
    )
    assert cycles(package) == [
        "circle of 2: pytest_agentbench/scripted/handler.py:1 imports "
        "pytest_agentbench.scripted.server; pytest_agentbench/scripted/server.py:2 imports "
        "pytest_agentbench.scripted.handler",
        "circle of 3: pytest_agentbench/session/inflight.py:3 imports "
        "pytest_agentbench.session.items; pytest_agentbench/session/items.py:1 imports "
        "pytest_agentbench.session.run; pytest_agentbench/session/run.py:1 imports "
        "pytest_agentbench.session.inflight",
    ]


def _architecture_order() -> tuple[tuple[str, ...], ...]:
    """The order as ``docs/architecture.md`` writes it: its indented block that begins
    ``plugin →`` (continued on lines that begin ``→``), read as ``a → b, c → …``."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    block = re.search(r"^ {4}(plugin →.*(?:\n +→.*)*)", text, re.MULTILINE)
    assert block, "docs/architecture.md shows the order in an indented block: plugin → …"
    steps = " ".join(block.group(1).split()).split("→")
    return tuple(tuple(name.strip() for name in step.split(",")) for step in steps)


def _architecture_folders() -> set[str]:
    """The folders ``docs/architecture.md``'s layer table has a row for."""
    rows = set()
    for line in ARCHITECTURE.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and (folder := re.fullmatch(r"`(\w+)/`", cells[0])):
            rows.add(folder.group(1))
    return rows


def test_architecture_page_shows_the_rule() -> None:
    """docs/architecture.md shows exactly the order this test enforces, and a row for
    every folder of the package."""
    assert _architecture_order() == ORDER
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and any(p.glob("*.py"))}
    assert _architecture_folders() == folders


def test_architecture_page_names_real_files() -> None:
    """Every file docs/architecture.md names is a file of the package, and every module
    of the package is named there: the page is a map, and a map with a missing street
    sends a newcomer nowhere."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    named = set(re.findall(r"`([\w/]+\.(?:py|json))`", text))
    missing = sorted(
        name for name in named if not (PACKAGE / name).is_file() and not (ROOT / name).is_file()
    )
    assert not missing, f"docs/architecture.md names files that do not exist: {missing}"
    modules = {
        file.relative_to(PACKAGE).as_posix()
        for file in PACKAGE.rglob("*.py")
        if file.name != "__init__.py" or file.parent == PACKAGE
    }
    unnamed = sorted(modules - named)
    assert not unnamed, f"docs/architecture.md does not say where these live: {unnamed}"
