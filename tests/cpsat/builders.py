"""Tiny hand-built rounds for the CP-SAT tests, and the checks every solve must pass."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from whale_opt.check import check
from whale_opt.cpsat import CpSatPolicy
from whale_opt.cpsat.model import SolveStats
from whale_opt.decision import Decision
from whale_opt.policies import get_policy
from whale_opt.problem_data import GpuType, Instance, Node, Policy, QueuedJob, RunningJob, Tenant

A100 = GpuType("A100-80G", 80, 1.0)
H100 = GpuType("H100-80G", 80, 2.0)
TIME_LIMIT_S = 1.0
TOLERANCE = 1e-6


def node(node_id: str, gpus: int = 8, nvlink: str = "nvswitch", **fields: Any) -> Node:
    """An A100 node (override ``gpu_type`` for another), big in CPU and memory."""
    fields.setdefault("gpu_type", A100.name)
    fields.setdefault("cpu", 256)
    fields.setdefault("memory_gb", 2048)
    return Node(node_id, gpus=gpus, nvlink=nvlink, **fields)


def holding(
    job_id: str, node_id: str, indices: Iterable[int], remaining_s: int, **fields: Any
) -> RunningJob:
    """A running job holding GPUs ``indices`` of ``node_id`` for ``remaining_s`` more."""
    gpus = tuple(f"{node_id}/{i}" for i in indices)
    return RunningJob(job_id, gpus, remaining_s, **fields)


def job(job_id: str, gpus: int, duration_s: int = 1000, **fields: Any) -> QueuedJob:
    """A queued job (default topology ``nvlink``, weight 1)."""
    return QueuedJob(job_id, gpus, duration_s, **fields)


def round_of(
    nodes: Sequence[Node],
    queue: Sequence[QueuedJob],
    running: Sequence[RunningJob] = (),
    *,
    quotas: dict[str, int] | None = None,
    **policy: Any,
) -> Instance:
    """An instance of the GPU types its nodes carry, with a short time limit.

    ``policy`` overrides :class:`Policy` fields.
    """
    policy.setdefault("time_limit_s", TIME_LIMIT_S)
    present = {n.gpu_type for n in nodes}
    return Instance(
        name="tiny",
        gpu_types={t.name: t for t in (A100, H100) if t.name in present},
        nodes=tuple(nodes),
        running=tuple(running),
        queue=tuple(queue),
        tenants={name: Tenant(name, quota) for name, quota in (quotas or {}).items()},
        policy=Policy(**policy),
    )


def solve(instance: Instance) -> tuple[Decision, SolveStats]:
    """CP-SAT's decision and what its model found.

    The decision passes the checker, is never worse than the greedy's, and
    its bound is below its objective.
    """
    policy = CpSatPolicy()
    decision = policy.decide(instance)
    greedy = get_policy("wspt").decide(instance)
    assert check(instance, decision) == []
    assert decision.objective <= greedy.objective + TOLERANCE
    assert decision.bound <= decision.objective + TOLERANCE
    return decision, policy.stats


def gpu_ids(node_id: str, indices: Iterable[int]) -> set[str]:
    """GPU ids ``node/index`` as a set."""
    return {f"{node_id}/{i}" for i in indices}
