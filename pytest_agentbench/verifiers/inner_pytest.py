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
from typing import Any

import pytest


def main(orders: dict[str, Any], nonce: str, fd: int) -> None:
    """Run the task's tests as ``orders`` say; report through ``fd``, stamped ``nonce``."""
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    spec = importlib.util.spec_from_file_location(orders["plugin_module"], orders["plugin"])
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {orders['plugin']}")
    plugin = importlib.util.module_from_spec(spec)
    sys.modules[orders["plugin_module"]] = plugin
    spec.loader.exec_module(plugin)
    plugin.arm(nonce, fd)
    args = [*orders["args"], "--rootdir", orders["workspace"], orders["test_file"]]
    del orders, spec
    raise SystemExit(pytest.main(args, plugins=[plugin]))
