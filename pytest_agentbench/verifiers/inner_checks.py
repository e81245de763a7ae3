"""The runner inside a ``python_checks`` run: HumanEval's ``check(candidate)`` or a list of
MBPP-style assert lines, without pytest.

The harness loads this file by its path (standard library only; never imported as part of
the package inside the sandbox) and calls :func:`main` with its orders, the run's nonce and
a file descriptor of an unlinked file. Everything the checks need is compiled before any
solution code runs; the builtins, the runner's own functions and the probes planted in the
checks' namespace are snapshotted then, and every report (rewritten after each check and at
the end) names what changed since (``tampered``), and says whether the run's parent (the
sandbox's shim) is gone (``orphaned``). The harness imports this module only for its
constants; it trusts nothing but the stamped report. The checks arrive compiled
(``checks_program.py``: by the harness for a fresh run, or here, loaded by path, in a fork
server's child), so a fresh run imports neither ``ast`` nor ``json`` nor ``typing``.
Loaded alone, it can import nothing of ours: the report writing it shares with
``inner_ctrf.py`` (the report's shape, ``_flush``) is repeated there on purpose.

In ``check`` mode every ``assert`` statement inside ``check`` is one reported case, named
``check line N`` (N: its line in the test code), plus the call itself, ``check``. Each
assert is wrapped in two probe calls (entered, passed), so a failure lands on the
assertion that was running; an exception outside any assertion lands on ``check``.
In ``asserts`` mode each line is its own case (``assert_1``, ``assert_2``, …) and a
failure does not stop the next one.
"""

from __future__ import annotations

import builtins
import marshal
import os
import sys
import time

TYPE_CHECKING = False  # typing costs a fresh run more than its checks: read by mypy only
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from types import CodeType
    from typing import TypedDict

    class _Test(TypedDict, total=False):
        """One case of the report, in CTRF's words."""

        name: str
        status: str
        rawStatus: str
        duration: int
        message: str

    class _Armed(TypedDict, total=False):
        """The run's state, set by ``main`` before any solution code runs."""

        nonce: str
        fd: int
        start: int
        tests: dict[str, _Test]
        order: list[str]
        tampered: list[str]
        setup_error: str
        phase: str
        ppid: int
        own: dict[str, object]
        snapshot: dict[str, object]
        namespace: dict[str, object]
        sources: list[str]

    class _Progress(TypedDict):
        """The assertion of ``check`` that is running (its index) and when it started."""

        current: int | None
        started: float | None


EXTRA_KEY = "pytest-agentbench.checks"
MESSAGE_LIMIT = 1000
CHECK_CASE = "check"
ENTER, PASS = "__agentbench_enter__", "__agentbench_pass__"

_write, _lseek, _ftruncate, _clock, _getppid = (
    os.write,
    os.lseek,
    os.ftruncate,
    time.time,
    os.getppid,
)


def _json_dumps() -> Callable[[object], str]:
    """``json.dumps(value, ensure_ascii=False, default=str)``, made from CPython's C encoder
    where there is one: ``json`` imports ``re``, which costs a fresh run more than its
    checks."""
    try:
        from _json import encode_basestring, make_encoder

        encoder = make_encoder(None, str, encode_basestring, None, ": ", ", ", False, False, True)
    except (ImportError, TypeError):  # another Python, or another signature
        from json import dumps as json_dumps

        return lambda value: json_dumps(value, ensure_ascii=False, default=str)
    return lambda value: "".join(encoder(value, 0))


dumps = _json_dumps()
_armed: _Armed = {}
_WATCHED_EVENTS = ("sys.settrace", "sys.setprofile")


def _cut(text: str) -> str:
    return text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 1] + "…"


def _describe(exc: BaseException, source: str | None = None) -> str:
    kind = type(exc).__name__
    try:
        text = str(exc)
    except Exception:  # a hostile __str__
        text = ""
    if not text and isinstance(exc, AssertionError) and source:
        text = source
    return _cut(f"{kind}: {text}" if text else kind)


def _snapshot() -> dict[str, object]:
    found: dict[str, object] = {f"builtins.{k}": v for k, v in vars(builtins).items()}
    found.update({f"runner.{k}": v for k, v in _armed["own"].items()})
    namespace = _armed.get("namespace")
    if namespace is not None:
        for key in (ENTER, PASS):
            found[f"probe {key}"] = namespace.get(key)
    found["sys.settrace"] = sys.gettrace()
    found["sys.setprofile"] = sys.getprofile()
    return found


def _check_tampering() -> None:
    before = _armed.get("snapshot")
    if before is None:
        return
    after = _snapshot()
    for key in sorted(set(before) | set(after)):
        if before.get(key) is not after.get(key) and key not in _armed["tampered"]:
            _armed["tampered"].append(key)


def _audit(event: str, args: tuple[object, ...]) -> None:
    """A trace or profile function can jump over an assert; none may be set once the
    solution runs (the runner sets none itself)."""
    if event in _WATCHED_EVENTS and event not in _armed["tampered"]:
        _armed["tampered"].append(event)


def _report(complete: bool) -> dict[str, object]:
    tests = [_armed["tests"][name] for name in _armed["order"]]
    return {
        "reportFormat": "CTRF",
        "specVersion": "0.0.0",
        "results": {
            "tool": {"name": "agentbench-checks"},
            "summary": {
                "tests": len(tests),
                "start": _armed["start"],
                "stop": int(_clock() * 1000),
            },
            "tests": tests,
            "extra": {
                EXTRA_KEY: {
                    "nonce": _armed["nonce"],
                    "complete": complete,
                    "tampered": list(_armed["tampered"]),
                    "orphaned": _getppid() != _armed["ppid"],
                    "setup_error": _armed["setup_error"],
                    "phase": _armed.get("phase", "starting"),
                }
            },
        },
    }


def _flush(complete: bool = False) -> None:
    _check_tampering()
    data = dumps(_report(complete)).encode("utf-8")
    fd = _armed["fd"]
    _lseek(fd, 0, os.SEEK_SET)
    _ftruncate(fd, 0)
    view = memoryview(data)
    while view:
        view = view[_write(fd, view) :]


def _record(name: str, status: str, message: str = "", started: float | None = None) -> None:
    """Set a case's outcome; a failure sticks, so a later pass never hides it."""
    test = _armed["tests"].get(name)
    if test is None:
        test = {"name": name, "status": "other", "rawStatus": "not_run", "duration": 0}
        _armed["tests"][name] = test
        _armed["order"].append(name)
    if test["status"] == "failed" or status == "other":
        return
    test["status"] = test["rawStatus"] = status
    if message:
        test["message"] = message
    if started is not None:
        test["duration"] = max(0, int((_clock() - started) * 1000))


def _unreached(status: str, raw: str, message: str) -> None:
    """Give every case that never ran ``status``, ``raw`` and ``message``."""
    for test in _armed["tests"].values():
        if test["status"] == "other":
            test["status"], test["rawStatus"], test["message"] = status, raw, message


def _load_solution(path: str, module: str) -> tuple[dict[str, object] | None, str]:
    """The solution's globals after running it as module ``module``; None and why not.
    (``importlib.machinery`` rather than ``importlib.util``, whose imports cost a fresh run
    more than its checks; the module gets the same spec, loader and file.)"""
    from importlib.machinery import ModuleSpec, SourceFileLoader

    loader = SourceFileLoader(module, path)
    spec = ModuleSpec(module, loader, origin=path)
    spec.has_location = True
    loaded = type(sys)(module)
    loaded.__spec__, loaded.__loader__, loaded.__file__ = spec, loader, path
    loaded.__package__ = ""
    sys.modules[module] = loaded
    try:
        loader.exec_module(loaded)
    except SystemExit as exc:
        return None, f"the answer's module exited during import ({_describe(exc)})"
    except BaseException as exc:  # KeyboardInterrupt too: all a failed import
        return None, f"importing the solution raised {_describe(exc)}"
    return dict(vars(loaded)), ""


def _run_check(
    name: str,
    entry_point: str,
    compiled: CodeType,
    names: list[str],
    sources: list[str],
    namespace: dict[str, object],
) -> None:
    state: _Progress = {"current": None, "started": None}

    def enter(index: int) -> None:
        current = state["current"]
        if current is not None:  # entered before and never finished: caught, or jumped
            _record(names[current], "failed", "the assertion never finished", state["started"])
        state["current"], state["started"] = index, _clock()

    def passed(index: int) -> None:
        _record(names[index], "passed", started=state["started"])
        state["current"] = None

    namespace[ENTER], namespace[PASS] = enter, passed
    _armed["snapshot"].update({f"probe {ENTER}": enter, f"probe {PASS}": passed})
    _armed["namespace"] = namespace
    started = _clock()
    try:
        exec(compiled, namespace)
        function = namespace.get(name)
        candidate = namespace.get(entry_point)
        if not callable(function):
            raise LookupError(f"the test code defines no function {name!r}")
        if candidate is None:
            raise LookupError(f"the solution defines no {entry_point!r}")
        function(candidate)
    except BaseException as exc:
        current = state["current"]
        if current is not None:
            _record(names[current], "failed", _describe(exc, sources[current]), state["started"])
        message = _describe(exc)
        if current is not None:
            message = f"{names[current]} failed: {message}"
        _record(name, "failed", message, started)
        _unreached("failed", "not_run", "did not run: the check stopped before it")
        return
    current = state["current"]
    if current is not None:  # entered, never passed nor failed: a jump over its end
        _record(names[current], "failed", "the assertion never finished", state["started"])
        _record(name, "failed", f"{names[current]} never finished", started)
    else:
        _record(name, "passed", started=started)
    _unreached("skipped", "not_reached", "not reached: the check returned without running it")


def _run_asserts(compiled: list[CodeType], names: list[str], namespace: dict[str, object]) -> None:
    for code, name, source in zip(compiled, names, _armed["sources"], strict=True):
        started = _clock()
        try:
            exec(code, dict(namespace))
        except BaseException as exc:
            _record(name, "failed", _describe(exc, source), started)
        else:
            _record(name, "passed", started=started)
        _flush()


def _text(orders: Mapping[str, object], key: str, default: str | None = None) -> str:
    value = orders.get(key, default)
    if not isinstance(value, str):
        raise SystemExit(f"orders: {key} must be a string, not {type(value).__name__}")
    return value


def _texts(orders: Mapping[str, object], key: str) -> list[str]:
    value = orders.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise SystemExit(f"orders: {key} must be a list of strings")
    return [str(item) for item in value]


def _compiled(orders: Mapping[str, object], check_name: str) -> dict[str, object]:
    """``code``, ``names`` and ``sources`` from the checks' source in ``orders``, compiled
    by ``checks_program.py`` (standard library only), loaded by its path."""
    from importlib.machinery import SourceFileLoader

    path = _text(orders, "compiler")
    compiler = type(sys)("agentbench_checks_program")
    compiler.__file__ = path
    SourceFileLoader(compiler.__name__, path).exec_module(compiler)
    test = orders.get("test")
    code, names, sources = compiler.compiled_checks(
        _text(orders, "setup", ""),
        test if isinstance(test, str) else None,
        _texts(orders, "asserts"),
        check_name or CHECK_CASE,
        (ENTER, PASS),
    )
    return {"code": code.hex(), "names": names, "sources": sources}


def main(orders: Mapping[str, object], nonce: str, fd: int) -> None:
    """Run the checks ``orders`` describe and report through ``fd``, stamped ``nonce``."""
    _armed.update(
        {
            "nonce": nonce,
            "fd": fd,
            "start": int(_clock() * 1000),
            "tests": {},
            "order": [],
            "tampered": [],
            "setup_error": "",
            "ppid": _getppid(),
            "own": {"_flush": _flush, "_record": _record, "_report": _report, "dumps": dumps},
        }
    )
    check_mode = "check" in orders
    check_name = _text(orders, "check") if check_mode else ""
    entry_point = _text(orders, "entry_point") if check_mode else ""
    # compiled by checks_program.py before any solution code runs: by the harness for a
    # fresh run (no ast to import here), else here, with ast loaded by the fork server
    if "code" not in orders:
        orders = {**orders, **_compiled(orders, check_name)}
    setup, compiled = marshal.loads(bytes.fromhex(_text(orders, "code")))
    names, sources = _texts(orders, "names"), _texts(orders, "sources")
    _armed["sources"] = sources
    for name in names:
        _record(name, "other")
    _armed["snapshot"] = _snapshot()
    _flush()
    sys.addaudithook(_audit)  # cannot be removed: sees every trace or profile function set
    sys.path.extend([*_texts(orders, "paths"), _text(orders, "workspace")])
    _armed["phase"] = "importing"  # a run that ends now ended in the answer's import
    _flush()
    namespace, problem = _load_solution(_text(orders, "solution"), _text(orders, "module"))
    _armed["phase"] = "checks"
    _flush()
    if namespace is not None:
        namespace["__name__"] = "__agentbench_checks__"
        try:
            exec(setup, namespace)
        except BaseException as exc:
            namespace, problem = None, f"the setup code raised {_describe(exc)}"
    if namespace is None:
        _armed["setup_error"] = problem
        _unreached("failed", "not_run", f"did not run: {problem}")
    elif check_mode:
        _run_check(check_name, entry_point, compiled, names, sources, namespace)
    else:
        _run_asserts(compiled, names, namespace)
    _flush(complete=True)
    lines = []
    for test in (_armed["tests"][name] for name in _armed["order"]):
        failed = test["status"] == "failed"
        lines.append(
            f"{test['rawStatus'].upper()} {test['name']}"
            + (": " + test.get("message", "") if failed else "")
        )
    passed = sum(test["status"] == "passed" for test in _armed["tests"].values())
    lines.append(f"{passed} of {len(lines)} checks passed")
    try:  # noqa: SIM105 (contextlib is an import a fresh run need not pay)
        _write(1, ("\n".join(lines) + "\n").encode("utf-8", "replace"))
    except OSError:  # the solution closed stdout
        pass
