"""What marks a Harbor task folder, and an older Terminal-Bench one, on disk: the checks
collection makes for every path, kept apart from the reader (suites/harbor.py) so a run
without such folders never imports it (nor the schema validator behind it)."""

from __future__ import annotations

from pathlib import Path

TASK_FILE = "task.toml"
INSTRUCTION = "instruction.md"
#: The file whose presence beside ``run-tests.sh`` marks an older Terminal-Bench task.
OLD_TASK_FILE = "task.yaml"


def is_task_folder(folder: Path) -> bool:
    """True for a Harbor task folder: it holds ``task.toml`` and ``instruction.md``."""
    return (folder / TASK_FILE).is_file() and (folder / INSTRUCTION).is_file()


def is_old_task_folder(folder: Path) -> bool:
    """True for an older Terminal-Bench task folder (``task.yaml`` + ``run-tests.sh``)."""
    return (folder / OLD_TASK_FILE).is_file() and (folder / "run-tests.sh").is_file()
