"""The ``python_tests`` run: pytest, in a fork server's child or a fresh sandboxed Python.

The fork server loads this file by its path once, before any task, so ``import pytest``
(most of a fresh run's start-up) is paid once per server; a fresh run loads it through
``stamped.BOOTSTRAP``. Either way :func:`main` then loads our CTRF plugin
(``inner_ctrf.py``) by path, arms it with the run's nonce and the report descriptor, and
calls ``pytest.main`` with the harness's arguments, its own workspace as ``--rootdir``,
before any test or solution code is imported. Standard library and pytest only; never
imported as part of the package.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Mapping

import pytest


def _text(orders: Mapping[str, object], key: str) -> str:
    value = orders[key]
    if not isinstance(value, str):
        raise SystemExit(f"orders: {key} must be a string, not {type(value).__name__}")
    return value


def main(orders: Mapping[str, object], nonce: str, fd: int) -> None:
    """Run the task's tests as ``orders`` say; report through ``fd``, stamped ``nonce``."""
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    module, path = _text(orders, "plugin_module"), _text(orders, "plugin")
    spec = importlib.util.spec_from_file_location(module, path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    plugin = importlib.util.module_from_spec(spec)
    sys.modules[module] = plugin
    spec.loader.exec_module(plugin)
    module_name = orders.get("module")
    plugin.arm(nonce, fd, module_name if isinstance(module_name, str) else "")
    given = orders["args"]
    if not isinstance(given, list):
        raise SystemExit(f"orders: args must be a list, not {type(given).__name__}")
    args = [*map(str, given), "--rootdir", _text(orders, "workspace"), _text(orders, "test_file")]
    del orders, spec, given
    raise SystemExit(pytest.main(args, plugins=[plugin]))
