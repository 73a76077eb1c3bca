"""What every policy shares: the Protocol, list scheduling, reasons, assembly."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Protocol

from whale_opt.decision import Action, Decision, JobDecision, Status, objective, with_dropped
from whale_opt.problem_data import Instance
from whale_opt.rules import unreleased_plans
from whale_opt.timeline import ClusterTimeline, Placement
from whale_opt.topology import mask_to_ids, node_can_host, popcount


class SchedulingPolicy(Protocol):
    """One round in, one decision out. Every policy and solver has this shape."""

    name: str

    def decide(self, instance: Instance) -> Decision:
        """The decision for ``instance``."""
        ...


def to_job_decision(instance: Instance, position: int, placement: Placement) -> JobDecision:
    """A start (with GPU ids) or planned (with nodes and counts) job decision."""
    job = instance.queue[position]
    if placement.start == 0:
        gpus: tuple[str, ...] = ()
        for node, mask in zip(placement.nodes, placement.masks, strict=True):
            gpus += mask_to_ids(instance.nodes[node], mask)
        return JobDecision(job.id, Action.START, gpus=gpus, start_s=0, end_s=placement.end)
    return JobDecision(
        job.id,
        Action.PLANNED,
        start_s=placement.start,
        end_s=placement.end,
        nodes=tuple(instance.nodes[n].id for n in placement.nodes),
        node_gpus=placement.counts,
    )


def to_placement(instance: Instance, position: int, item: JobDecision) -> Placement | None:
    """The placement a start or planned decision describes (None when deferred)."""
    if item.action is Action.START:
        masks: dict[int, int] = {}
        for gpu in item.gpus:
            ref = instance.parse_gpu(gpu)
            masks[ref.node] = masks.get(ref.node, 0) | (1 << ref.index)
        nodes = tuple(masks)
        gpu_type = instance.nodes[nodes[0]].gpu_type
        counts = tuple(m.bit_count() for m in masks.values())
        return Placement(0, item.end_s or 0, gpu_type, nodes, counts, tuple(masks.values()))
    if item.action is Action.PLANNED:
        nodes = tuple(instance.node_index[n] for n in item.nodes)
        gpu_type = instance.nodes[nodes[0]].gpu_type
        return Placement(item.start_s or 0, item.end_s or 0, gpu_type, nodes, item.node_gpus)
    return None


def unjustified_plans(instance: Instance, decided: dict[int, JobDecision]) -> set[int]:
    """Queue positions of planned jobs that break the release rule (:mod:`whale_opt.rules`)."""
    position = {instance.queue[k].id: k for k in decided}
    return {position[job_id] for job_id in unreleased_plans(instance, decided.values())}


def deferral_reason(instance: Instance, position: int, timeline: ClusterTimeline) -> str:
    """Why queued job ``position`` got no place, in words a user acts on."""
    job = instance.queue[position]
    present = {node.gpu_type for node in instance.nodes}
    asked = set(job.gpu_types or instance.gpu_types)
    types = instance.eligible_types[position]
    if not types:
        if not asked & present:
            return f"no node has GPU type {', '.join(sorted(asked))}"
        return (
            f"no GPU type meets the request (needs >= {job.min_gpu_memory_gb:g} GB GPU memory"
            f" among {', '.join(sorted(asked))})"
        )
    if not timeline.eligible(position):
        if not set(types) & present:
            return f"no node has GPU type {', '.join(types)}"
        draining = [
            topo.node.id
            for topo in timeline.topologies
            if topo.node.draining and topo.node.gpu_type in types and node_can_host(job, topo)
        ]
        if draining:
            return f"every node that could hold it is draining: {', '.join(draining)}"
        need = "NVLink-connected " if job.topology == "nvlink" and job.gpus > 1 else ""
        return f"no healthy node of type {', '.join(types)} can hold {job.gpus} {need}GPUs"
    tenant = instance.tenants.get(job.tenant)
    if tenant is not None and tenant.gpu_quota is not None and tenant.gpu_quota < job.gpus:
        return f"tenant {job.tenant} quota {tenant.gpu_quota} GPUs is below the job's {job.gpus}"
    free = sum(popcount(m) for m in timeline.free_now)
    return (
        f"no room for {job.gpus} GPUs before the horizon ({instance.policy.horizon_s} s);"
        f" {free} GPUs free now"
    )


def place_in_order(
    instance: Instance,
    order: Sequence[int],
    timeline: ClusterTimeline,
    decided: dict[int, JobDecision],
    after_each: Callable[[int], None] | None = None,
) -> None:
    """Serial schedule generation: each job of ``order`` at its earliest-ending place.

    Updates ``timeline`` and ``decided`` (queue position -> decision) in
    place; ``after_each(k)`` runs after the k-th job (1-based) is placed.
    """
    for k, position in enumerate(order, start=1):
        placement = timeline.best_placement(position)
        if placement is None:
            decided[position] = JobDecision(
                instance.queue[position].id,
                Action.DEFERRED,
                reason=deferral_reason(instance, position, timeline),
            )
        else:
            timeline.commit(position, placement)
            decided[position] = to_job_decision(instance, position, placement)
        if after_each is not None:
            after_each(k)


def complete(
    instance: Instance,
    decided: dict[int, JobDecision],
    preempted: frozenset[int] = frozenset(),
) -> list[JobDecision]:
    """Every job's decision: queued ones from ``decided`` (else deferred), running
    ones preempted when their position is in ``preempted``, else kept."""
    jobs = [
        decided.get(k) or JobDecision(job.id, Action.DEFERRED, reason="not considered")
        for k, job in enumerate(instance.queue)
    ]
    jobs += [
        JobDecision(job.id, Action.PREEMPT if r in preempted else Action.KEEP)
        for r, job in enumerate(instance.running)
    ]
    return jobs


def list_schedule(
    instance: Instance,
    order: Sequence[int],
    timeline: ClusterTimeline | None = None,
    *,
    prefer: str = "end",
) -> list[JobDecision]:
    """Serial schedule generation over ``order``; jobs not in it are deferred.

    ``prefer`` is the placement preference (see :data:`whale_opt.timeline.PREFERENCES`).
    """
    timeline = ClusterTimeline(instance, prefer=prefer) if timeline is None else timeline
    decided: dict[int, JobDecision] = {}
    place_in_order(instance, order, timeline, decided)
    return complete(instance, decided)


def assemble(
    instance: Instance,
    solver: str,
    jobs: Sequence[JobDecision],
    status: Status,
    bound: float,
    started: float,
) -> Decision:
    """A :class:`Decision` with its objective recomputed, dropped preferences
    named with their reasons, and the wall time since ``started``."""
    final = with_dropped(instance, tuple(jobs))
    return Decision(
        instance=instance.name,
        solver=solver,
        status=status,
        objective=objective(instance, final),
        bound=bound,
        horizon_s=instance.policy.horizon_s,
        jobs=final,
        wall_s=time.perf_counter() - started,
    )
