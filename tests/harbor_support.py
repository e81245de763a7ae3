"""Harbor task folders written for tests: ``write_task`` makes one under a dataset
folder, each part given or a small default (a task whose oracle writes the file its
test checks)."""

from __future__ import annotations

from pathlib import Path

#: The local base image task Dockerfiles build FROM (no registry is reachable here).
BASE_IMAGE = "localhost/agentbench-base:bookworm"

TASK_TOML = """\
schema_version = "1.1"

[metadata]
difficulty = "easy"

[agent]
timeout_sec = 120

[verifier]
timeout_sec = 60

[environment]
build_timeout_sec = 300
"""
DOCKERFILE = f"FROM {BASE_IMAGE}\nWORKDIR /app\n"
TEST_SH = """\
#!/bin/bash
if [ "$(cat /app/answer.txt 2>/dev/null)" = "42" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo "answer.txt does not hold 42"
  echo 0 > /logs/verifier/reward.txt
fi
"""
SOLVE_SH = "#!/bin/bash\necho 42 > /app/answer.txt\n"
INSTRUCTION = "Write the number 42 to /app/answer.txt.\n"


def write_task(
    dataset: Path,
    name: str,
    *,
    toml: str = TASK_TOML,
    instruction: str | None = INSTRUCTION,
    dockerfile: str | None = DOCKERFILE,
    test_sh: str | None = TEST_SH,
    solve_sh: str | None = SOLVE_SH,
    extra: dict[str, str] | None = None,
) -> Path:
    """The folder ``dataset/name`` holding a Harbor task; a part given as None is left
    out. ``extra`` adds files (relative path → text)."""
    folder = dataset / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "task.toml").write_text(toml, encoding="utf-8")
    parts = {
        "instruction.md": instruction,
        "environment/Dockerfile": dockerfile,
        "tests/test.sh": test_sh,
        "solution/solve.sh": solve_sh,
        **(extra or {}),
    }
    for relative, text in parts.items():
        if text is None:
            continue
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        if path.suffix == ".sh":
            path.chmod(0o755)
    return folder
