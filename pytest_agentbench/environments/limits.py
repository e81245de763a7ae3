"""What a container's limits came to: the engine's warnings and the cgroup's own word.

An engine may accept ``--cpus`` or ``--memory`` and not enforce it (rootless Podman on
cgroup v1 ignores both, with a warning). After a start, the limits asked for are read
back from the container's cgroup (v1 or v2); each one that is not in force becomes a note
for the record, so a score never rests on a limit that was not there.
"""

from __future__ import annotations

from pytest_agentbench.environments.engine import Engine, last_lines
from pytest_agentbench.environments.spec import ContainerSpec

#: Prints the memory limit and the CPU quota/period the container's cgroup holds.
_READ_CGROUP = r"""
for f in /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory/memory.limit_in_bytes; do
  [ -r "$f" ] && { echo "memory $(cat "$f")"; break; }
done
if [ -r /sys/fs/cgroup/cpu.max ]; then
  echo "cpu $(cat /sys/fs/cgroup/cpu.max)"
else
  for d in /sys/fs/cgroup/cpu /sys/fs/cgroup/cpu,cpuacct; do
    if [ -r "$d/cpu.cfs_quota_us" ]; then
      echo "cpu $(cat "$d/cpu.cfs_quota_us") $(cat "$d/cpu.cfs_period_us")"; break
    fi
  done
fi
"""


def settle_script(spec: ContainerSpec) -> str | None:
    """The one ``sh`` script run right after a start, when anything needs settling: it
    makes the workdir (``$1``; Podman refuses to start in a missing one, so it cannot be
    given to ``run``) and prints the limits the cgroup holds. None when nothing does."""
    parts = []
    if spec.workdir is not None:
        parts.append('mkdir -p -- "$1" || exit 90')
    if spec.cpus is not None or spec.memory_mb is not None:
        parts.append(_READ_CGROUP)
    return "\n".join(parts) or None


def enforcement_notes(
    engine: Engine, spec: ContainerSpec, run_stderr: bytes, cgroup: bytes, cgroup_err: bytes
) -> tuple[str, ...]:
    """Notes on what of ``spec``'s limits (``cpus``, ``memory_mb``) is not in force, from
    what :func:`settle_script` printed (``cgroup``, ``cgroup_err``), and the engine's
    warnings from ``run``. Empty when all holds."""
    notes = [
        f"{engine.name} warned: {line.strip()}"
        for line in run_stderr.decode("utf-8", errors="replace").splitlines()
        if "warn" in line.lower()
    ]
    seen: dict[str, list[str]] = {}
    for line in cgroup.decode("utf-8", errors="replace").splitlines():
        key, _, value = line.partition(" ")
        seen[key] = value.split()
    why = last_lines(cgroup_err)
    if spec.memory_mb is not None:
        notes += _memory_note(spec.memory_mb, seen.get("memory"), why)
    if spec.cpus is not None:
        notes += _cpu_note(spec.cpus, seen.get("cpu"), why)
    return tuple(notes)


def _memory_note(memory_mb: int, found: list[str] | None, why: str) -> list[str]:
    if not found:
        return [
            f"memory limit of {memory_mb} MB not confirmed: the container's cgroup cannot "
            f"be read ({why or 'no cgroup file'})"
        ]
    wanted = memory_mb * 1024 * 1024
    if found[0].isdigit() and int(found[0]) <= wanted:
        return []
    return [f"memory limit of {memory_mb} MB not enforced: the container's cgroup says {found[0]}"]


def _cpu_note(cpus: float, found: list[str] | None, why: str) -> list[str]:
    if not found or len(found) < 2:
        return [
            f"cpu limit of {cpus:g} not confirmed: the container's cgroup cannot "
            f"be read ({why or 'no cgroup file'})"
        ]
    quota, period = found[0], found[1]
    if (
        quota.lstrip("-").isdigit()
        and period.isdigit()
        and int(quota) > 0
        and abs(int(quota) / int(period) - cpus) < 0.01 + 0.01 * cpus
    ):
        return []
    return [
        f"cpu limit of {cpus:g} not enforced: the container's cgroup says "
        f"quota {quota} period {period}"
    ]
