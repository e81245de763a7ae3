"""Deterministic sharding: which of N shards a task belongs to, the same on every machine."""

from __future__ import annotations

import hashlib

from pytest_agentbench.suites.task import Task


def shard_of(task: Task, total: int) -> int:
    """The 1-based shard of ``task`` among ``total``: a hash of its suite name and id, so
    neither paths nor collection order change the partition."""
    digest = hashlib.sha256(f"{task.suite}\x00{task.id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % total + 1


def in_shard(task: Task, shard: int, total: int) -> bool:
    return shard_of(task, total) == shard
