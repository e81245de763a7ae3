"""The run's verifiers by kind (session/services.py makes the table): the registered ones,
and a kind written ``module:function`` imported on first use."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_agentbench.verifiers.base import Verifier


class VerifierTable(dict[str, "Verifier"]):
    """The verifiers by kind, where a kind written ``module:function`` (``mychecks:
    palindrome``) is also found: the function, imported on first use, is the verifier
    (``(Check) -> Verdict``), its ``options_schema`` attribute (if any) checks the options.
    ``why_missing(kind)`` says why such a kind could not be imported."""

    def __init__(
        self, found: dict[str, Verifier], wrap: Callable[[Verifier], Verifier] | None = None
    ) -> None:
        super().__init__(found)
        self._wrap = wrap
        self._lock = threading.Lock()
        self._missing: dict[str, str] = {}

    def __contains__(self, kind: object) -> bool:
        if dict.__contains__(self, kind):
            return True
        return isinstance(kind, str) and self._imported(kind) is not None

    def __missing__(self, kind: str) -> Verifier:
        verifier = self._imported(kind)
        if verifier is None:
            raise KeyError(kind)
        return verifier

    def why_missing(self, kind: str) -> str | None:
        return self._missing.get(kind)

    def _imported(self, kind: str) -> Verifier | None:
        module_name, sep, name = kind.partition(":")
        if not sep or not module_name or not name:
            return None
        with self._lock:
            if dict.__contains__(self, kind):
                found: Verifier = dict.__getitem__(self, kind)
                return found
            if kind in self._missing:
                return None
            import pkgutil

            from pytest_agentbench.verifiers.base import FunctionVerifier

            try:  # the user's module, by the name the suite gives (never one of ours)
                function = pkgutil.resolve_name(kind)
            except Exception as exc:  # an ImportError, or the module failing as it loads
                self._missing[kind] = f"cannot import {kind!r}: {type(exc).__name__}: {exc}"
                return None
            if not callable(function):
                self._missing[kind] = f"{kind!r} is not a function (got {type(function).__name__})"
                return None
            schema = getattr(function, "options_schema", None) or {"type": "object"}
            verifier: Verifier = FunctionVerifier(kind, function, schema)
            if self._wrap is not None:
                verifier = self._wrap(verifier)
            self[kind] = verifier
            return verifier
