"""Tiny hand-built rounds for the CP-SAT tests, and the checks every solve must pass."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

import pytest

from whale_opt.check import check
from whale_opt.cpsat import CpSatPolicy
from whale_opt.cpsat.cpmodel import HoodResult, freed_share, solve_neighbourhood
from whale_opt.cpsat.neighbourhood import make_neighbourhood
from whale_opt.cpsat.presets import load_preset
from whale_opt.decision import Action, Decision, JobDecision, Status, objective
from whale_opt.options import SolveOptions
from whale_opt.placement.serial import assemble, complete, list_schedule
from whale_opt.policies.wspt import wspt_order
from whale_opt.problem_data import GpuType, Instance, Node, Policy, QueuedJob, RunningJob, Tenant
from whale_opt.registry import get_policy
from whale_opt.topology import node_topologies

A100 = GpuType("A100-80G", 80, 1.0)
H100 = GpuType("H100-80G", 80, 2.0)
TIME_LIMIT_S = 1.0
OPTIONS = SolveOptions(time_limit_s=TIME_LIMIT_S)
TOLERANCE = 1e-6


def node(node_id: str, gpus: int = 8, nvlink: str = "nvswitch", **fields: Any) -> Node:
    """An A100 node (override ``gpu_type`` for another), big in CPU and memory."""
    fields.setdefault("gpu_type", A100.name)
    fields.setdefault("cpu", 256)
    fields.setdefault("memory_gb", 2048)
    return Node(node_id, gpu_count=gpus, nvlink=nvlink, **fields)


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
    """An instance of the GPU types its nodes carry (solve it with :data:`OPTIONS`).

    ``policy`` overrides :class:`Policy` fields.
    """
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


def solve_round(
    instance: Instance, policy: CpSatPolicy | None = None, options: SolveOptions = OPTIONS
) -> Decision:
    """The CP-SAT round's decision: valid, never worse than the greedy, bound below it,
    and every neighbourhood decoded at no more than the model priced it."""
    policy = policy or CpSatPolicy()
    decision = policy.decide(instance, options)
    greedy = get_policy("wspt").decide(instance, options)
    assert check(instance, decision) == []
    assert decision.objective <= greedy.objective + TOLERANCE
    assert decision.bound <= decision.objective + TOLERANCE
    assert_priced_exactly(decision)
    return decision


def assert_priced_exactly(decision: Decision) -> None:
    """The round kept its own decision (no checker fallback) and decoded every
    neighbourhood at no more than the model priced it."""
    assert not decision.stats["fallback"]
    gap = decision.stats.get("pricing_gap", float("-inf"))  # absent: nothing solved
    assert gap <= TOLERANCE * max(1.0, decision.objective)


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
        decided = result.decided
        assert result.proved
    jobs = complete(instance, {**incumbent, **decided})
    decision = assemble(instance, "cpsat-model", jobs, Status.FEASIBLE, 0.0, started)
    assert check(instance, decision) == []
    assert decision.objective <= objective(instance, greedy) + TOLERANCE
    return decision


def model_from(
    instance: Instance, jobs: Sequence[JobDecision], time_limit_s: float = TIME_LIMIT_S
) -> tuple[Decision, HoodResult | None]:
    """The model alone, every queued job freed, from the decision ``jobs`` (which may
    preempt: its victims are decided again).

    The result must be valid, never worse than ``jobs`` when proven optimal,
    and decode at exactly the share of the objective the model optimised
    (re-priced by :func:`whale_opt.decision.objective`; the decoder may only
    do better, by finding linked GPUs for a placement the model priced as
    unlinked). No result when no queued job could ever be placed.
    """
    started = time.perf_counter()
    preset = load_preset(None)
    running = {held.id: r for r, held in enumerate(instance.running)}
    preempted = frozenset(running[item.id] for item in jobs if item.action is Action.PREEMPT)
    incumbent = {instance.queue_position(item.id): item for item in jobs if item.id not in running}
    hood = make_neighbourhood(
        instance,
        incumbent,
        set(incumbent),
        node_topologies(instance),
        preset.nodes_per_job,
        preempted,
    )
    if not hood.jobs:
        return assemble(instance, "cpsat-model", list(jobs), Status.FEASIBLE, 0.0, started), None
    deadline = time.perf_counter() + time_limit_s
    result = solve_neighbourhood(hood, preset.parameters, deadline, preset, 0)
    assert result is not None, "the model found no solution (the incumbent hint is one)"
    kept = (preempted - {victim.position for victim in hood.victims}) | result.preempted
    merged = complete(instance, {**incumbent, **result.decided}, kept)
    decision = assemble(instance, "cpsat-model", merged, Status.FEASIBLE, 0.0, started)
    assert check(instance, decision) == []
    share = freed_share(hood, result.decided, result.preempted)
    assert share <= result.value + TOLERANCE * max(1.0, abs(result.value))
    if result.proved:
        assert share == pytest.approx(result.value, rel=1e-9, abs=1e-6)
        assert decision.objective <= objective(instance, list(jobs)) + TOLERANCE
    return decision, result


def solve_model_from(
    instance: Instance, jobs: Sequence[JobDecision], time_limit_s: float = TIME_LIMIT_S
) -> tuple[Decision, HoodResult]:
    """:func:`model_from` on a round where some queued job can be placed."""
    decision, result = model_from(instance, jobs, time_limit_s)
    assert result is not None, "no queued job can be placed anywhere"
    return decision, result


def solve(instance: Instance) -> tuple[Decision, Decision]:
    """The round's decision and the model's (see :func:`solve_round`, :func:`solve_model`)."""
    return solve_round(instance), solve_model(instance)


def gpu_ids(node_id: str, indices: Iterable[int]) -> set[str]:
    """GPU ids ``node/index`` as a set."""
    return {f"{node_id}/{i}" for i in indices}
