"""Where a run and its rollouts live on disk; names made safe for any file system."""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import time
from pathlib import Path

_UNSAFE = re.compile(r"[^A-Za-z0-9._+=@-]")
_MAX_NAME = 120


def safe_name(text: str) -> str:
    """A file-name-safe form of ``text`` that can never climb out of its folder.

    Characters outside ``[A-Za-z0-9._+=@-]`` become ``_``; when anything had to change
    (or the name is empty, all dots, or long), a short hash of the original is appended so
    two different ids never share a folder.
    """
    cleaned = _UNSAFE.sub("_", text).strip(".") or "_"
    if cleaned == text and len(text) <= _MAX_NAME:
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{cleaned[:_MAX_NAME]}-{digest}"


def new_run_id() -> str:
    """A sortable, unique run id: UTC time plus a few random hex digits."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


def task_dir(run_dir: Path, suite: str, task_id: str, model_label: str, epoch: int = 0) -> Path:
    """The rollout folder of one task: ``tasks/<suite>/<task-id>[<model>]``, with
    ``-epoch<K>`` appended for the K-th run of a task run more than once."""
    model = safe_name(model_label.replace("/", "_"))
    suffix = f"-epoch{epoch}" if epoch else ""
    return run_dir / "tasks" / safe_name(suite) / f"{safe_name(task_id)}[{model}]{suffix}"


def control_dir(run_dir: Path, suite: str, task_id: str, control: str) -> Path:
    """The rollout folder of one control of a task: ``controls/<suite>/<task-id>/<control>``
    (controls are played by the scripted provider, whatever the run's model)."""
    return run_dir / "controls" / safe_name(suite) / safe_name(task_id) / safe_name(control)


#: The file that marks a run folder. pytest never collects a folder holding it (plugin.py
#: ``pytest_ignore_collect``): a run's rollout workspaces hold the model's ``test_*.py``.
RUN_MARKER = ".agentbench-run"
_MARKER_TEXT = (
    "This folder is a pytest-agentbench run: its rollouts' files (test_*.py among them)\n"
    "are the model's work, and pytest does not collect anything below this folder.\n"
)


def mark_run_folder(run_dir: Path) -> None:
    """Write the run marker into ``run_dir`` (kept when it is there already)."""
    try:
        with open(run_dir / RUN_MARKER, "x", encoding="utf-8") as marker:
            marker.write(_MARKER_TEXT)
    except FileExistsError:
        return


def point_latest(out_dir: Path, run_dir: Path) -> None:
    """Make ``<out>/latest`` point at ``run_dir`` (replaced atomically; skipped quietly
    where the file system has no symlinks — the run dir itself is what matters)."""
    link = out_dir / "latest"
    tmp = out_dir / f".latest.{os.getpid()}.tmp"
    try:
        if tmp.is_symlink() or tmp.exists():
            tmp.unlink()
        tmp.symlink_to(run_dir.name, target_is_directory=True)
        os.replace(tmp, link)
    except OSError:
        return
