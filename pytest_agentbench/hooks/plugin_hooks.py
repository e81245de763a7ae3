"""Calling plugins' observer hooks so that one plugin's bug never costs a result.

``pytest_agentbench_rollout_event``, ``…_task_finished``, ``…_failure_reason`` and
``…_run_finished`` are called one implementation at a time (in pluggy's order): an
implementation that raises is skipped for that call, the others still run, and the first
failure of each plugin and hook is kept (with how many calls failed) for the run's
terminal summary. Loading the ``pytest_agentbench`` entry points lives here too.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, TypedDict, TypeVar

import pytest

if TYPE_CHECKING:
    from pluggy import HookImpl

    from pytest_agentbench.core.jsontypes import JsonObject, JsonValue

#: The entry-point group an installed package registers its plugin module under.
ENTRY_POINT_GROUP = "pytest_agentbench"
V = TypeVar("V")


class Gathered(Mapping[str, V]):
    """What a hook names (the agent tools by name), gathered on the first look: a run
    that never looks (no task asks for a tool) never calls the hook nor imports what its
    implementations return. Gathered once, whichever thread looks first."""

    def __init__(self, gather: Callable[[], dict[str, V]]) -> None:
        self._gather: Callable[[], dict[str, V]] | None = gather
        self._found: dict[str, V] = {}
        self._lock = threading.Lock()

    def _all(self) -> dict[str, V]:
        if self._gather is not None:
            with self._lock:
                if self._gather is not None:
                    self._found, self._gather = self._gather(), None
        return self._found

    def __getitem__(self, name: str) -> V:
        return self._all()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


def load_entry_points(pluginmanager: pytest.PytestPluginManager) -> list[str]:
    """Register every installed ``pytest_agentbench`` entry point (once; one already
    registered through ``pytest11`` is not registered twice, and ``-p no:<name>`` blocks
    one); returns their names. A plugin that fails to import is a usage error naming it
    and its distribution."""
    from importlib.metadata import entry_points

    names = []
    for point in entry_points(group=ENTRY_POINT_GROUP):
        if pluginmanager.is_blocked(point.name) or pluginmanager.has_plugin(point.name):
            continue
        try:
            plugin = point.load()
        except Exception as exc:
            dist = point.dist.name if point.dist is not None else "an unknown distribution"
            raise pytest.UsageError(
                f"agentbench plugin {point.name!r} ({point.value}, from {dist}) failed to "
                f"load: {type(exc).__name__}: {exc}"
            ) from None
        if not pluginmanager.is_registered(plugin):
            pluginmanager.register(plugin, point.name)
        names.append(point.name)
    return names


def plugin_names(pluginmanager: pytest.PytestPluginManager, hook: str) -> list[str]:
    """The names of the plugins implementing ``hook`` (built-ins left out), for messages."""
    caller = getattr(pluginmanager.hook, hook)
    return [
        _short(impl.plugin_name)
        for impl in caller.get_hookimpls()
        if impl.plugin_name != "agentbench-builtins"
    ]


def _short(name: str) -> str:
    """A conftest plugin's name is its absolute path: shown as ``…/dir/conftest.py``."""
    if name.endswith("conftest.py") and "/" in name:
        return "…/" + "/".join(name.split("/")[-2:])
    return name


class HookFailure(TypedDict):
    """The first failure of one plugin in one hook, and how many calls failed."""

    error: str
    calls: int


class PluginHooks:
    """The observer hooks of one process, with the failures of its plugins."""

    def __init__(self, pluginmanager: pytest.PytestPluginManager) -> None:
        self.pluginmanager = pluginmanager
        self.failures: dict[tuple[str, str], HookFailure] = {}
        self._lock = threading.Lock()

    def has(self, hook: str) -> bool:
        """Whether any plugin implements ``hook`` (to skip building its argument)."""
        return bool(getattr(self.pluginmanager.hook, hook).get_hookimpls())

    def notify(self, hook: str, **kwargs: object) -> None:
        """Call every implementation of ``hook``; the failures are kept, never raised."""
        for impl in self._impls(hook):
            self._call(hook, impl, kwargs)

    def first(self, hook: str, **kwargs: object) -> object:
        """The first non-None answer of ``hook`` (a ``firstresult`` hook), a failing
        implementation passing its turn; None when none answers."""
        for impl in self._impls(hook):
            answer = self._call(hook, impl, kwargs)
            if answer is not None:
                return answer
        return None

    def _impls(self, hook: str) -> list[HookImpl]:
        impls = getattr(self.pluginmanager.hook, hook).get_hookimpls()
        # pluggy calls the last of the list first; wrappers do not observe anything here
        return [
            impl
            for impl in reversed(impls)
            if not getattr(impl, "wrapper", False) and not impl.hookwrapper
        ]

    def _call(self, hook: str, impl: HookImpl, kwargs: Mapping[str, object]) -> object:
        try:
            return impl.function(*[kwargs[name] for name in impl.argnames])
        except Exception as exc:
            key = (_short(impl.plugin_name), hook)
            with self._lock:
                seen = self.failures.get(key)
                if seen is None:
                    self.failures[key] = {"error": f"{type(exc).__name__}: {exc}", "calls": 1}
                else:
                    seen["calls"] += 1
            return None

    def merge(self, failures: JsonValue) -> None:
        """Add the failures an xdist worker sent (``export``'s form; an entry of another
        form is left out)."""
        for entry in failures if isinstance(failures, list) else ():
            if not isinstance(entry, dict) or not isinstance(calls := entry.get("calls"), int):
                continue
            key = (str(entry.get("plugin")), str(entry.get("hook")))
            with self._lock:
                seen = self.failures.get(key)
                if seen is None:
                    self.failures[key] = {"error": str(entry.get("error")), "calls": calls}
                else:
                    seen["calls"] += calls

    def export(self) -> list[JsonObject]:
        """The failures as plain data (they travel from a worker to the controller)."""
        return [
            {"plugin": plugin, "hook": hook, "error": seen["error"], "calls": seen["calls"]}
            for (plugin, hook), seen in sorted(self.failures.items())
        ]

    def lines(self) -> list[str]:
        """One line per plugin and hook that raised: what, the first error, how often."""
        return [
            f"plugin {plugin!r} raised in {hook}: {seen['error']} "
            f"({seen['calls']} call(s) failed; results were kept)"
            for (plugin, hook), seen in sorted(self.failures.items())
        ]
