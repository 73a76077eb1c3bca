"""Tiny hand-built rounds for the CP-SAT tests, and the checks every solve must pass."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

from whale_opt.check import check
from whale_opt.cpsat import CpSatPolicy
from whale_opt.cpsat.model import load_preset, make_neighbourhood, solve_neighbourhood
from whale_opt.decision import Decision, JobDecision, Status, objective
from whale_opt.policies import get_policy
from whale_opt.policies.base import assemble, complete, list_schedule
from whale_opt.policies.wspt import wspt_order
from whale_opt.problem_data import GpuType, Instance, Node, Policy, QueuedJob, RunningJob, Tenant
from whale_opt.topology import node_topologies

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


def solve_round(instance: Instance) -> Decision:
    """The CP-SAT round's decision: valid, never worse than the greedy, bound below it."""
    decision = CpSatPolicy().decide(instance)
    greedy = get_policy("wspt").decide(instance)
    assert check(instance, decision) == []
    assert decision.objective <= greedy.objective + TOLERANCE
    assert decision.bound <= decision.objective + TOLERANCE
    return decision


def solve_model(instance: Instance) -> Decision:
    """The CP-SAT neighbourhood model alone, every queued job freed, from the greedy.

    The round runs CP-SAT only when the greedy is not proven optimal, so on
    tiny rounds its decision often is the greedy's; this solves the model
    itself. The result must be proven optimal, valid and never worse than
    the greedy (its hint).
    """
    started = time.perf_counter()
    preset = load_preset(None)
    greedy = list_schedule(instance, wspt_order(instance))
    incumbent = dict(enumerate(greedy[: len(instance.queue)]))
    hood = make_neighbourhood(
        instance, incumbent, set(incumbent), node_topologies(instance), preset.nodes_per_job
    )
    decided: dict[int, JobDecision] = {}
    if hood.jobs:  # else no job could ever be placed: all stay deferred
        deadline = time.perf_counter() + TIME_LIMIT_S
        result = solve_neighbourhood(hood, preset.parameters, deadline, preset, 0)
        assert result is not None, "the model found no solution (the greedy hint is one)"
        decided, proved = result
        assert proved
    jobs = complete(instance, {**incumbent, **decided})
    decision = assemble(instance, "cpsat-model", jobs, Status.FEASIBLE, 0.0, started)
    assert check(instance, decision) == []
    assert decision.objective <= objective(instance, greedy) + TOLERANCE
    return decision


def solve(instance: Instance) -> tuple[Decision, Decision]:
    """The round's decision and the model's (see :func:`solve_round`, :func:`solve_model`)."""
    return solve_round(instance), solve_model(instance)


def gpu_ids(node_id: str, indices: Iterable[int]) -> set[str]:
    """GPU ids ``node/index`` as a set."""
    return {f"{node_id}/{i}" for i in indices}
