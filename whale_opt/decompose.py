"""Large rounds split into pools solved apart (in parallel), then merged.

A cluster past ``max_gpus`` is cut into pools of whole racks of one GPU
type, each at most ``max_gpus`` GPUs. Every queued job goes to one pool it
can run in (highest priority first, to the least loaded pool relative to its
speed-weighted capacity); running jobs stay where they run. Each pool is an
ordinary instance, solved by any policy; the merged decision is valid for
the whole cluster because pools share no GPU. Jobs of tenants with a quota
(which spans pools) stay out of the pools and are list-scheduled last on the
whole cluster, around the pools' decisions.

The merged decision's bound is the analytic bound of the whole instance, so
the gap stays honest about what the split may cost.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from whale_opt.bounds import lower_bound
from whale_opt.decision import Action, Decision, JobDecision, Status
from whale_opt.io import decision_from_dict, decision_to_dict, instance_from_dict, instance_to_dict
from whale_opt.policies.base import (
    assemble,
    complete,
    deferral_reason,
    place_in_order,
    to_placement,
)
from whale_opt.policies.wspt import wspt_order
from whale_opt.problem_data import Instance
from whale_opt.timeline import ClusterTimeline

DEFAULT_MAX_GPUS = 1024


@dataclass(frozen=True)
class Pool:
    """Node positions of one pool and the queued jobs assigned to it."""

    nodes: tuple[int, ...]
    jobs: tuple[int, ...]


def pools(instance: Instance, max_gpus: int = DEFAULT_MAX_GPUS) -> list[Pool]:
    """Cut the cluster into pools and assign every servable queued job to one."""
    racks: dict[tuple[str, str], list[int]] = defaultdict(list)
    for k, node in enumerate(instance.nodes):
        racks[(node.gpu_type, node.rack)].append(k)
    node_sets: list[list[int]] = []
    by_type: dict[str, list[list[int]]] = defaultdict(list)
    for (gpu_type, _), members in sorted(racks.items()):
        by_type[gpu_type].append(members)
    for rack_lists in by_type.values():
        current: list[int] = []
        for members in rack_lists:
            size = sum(instance.nodes[k].gpus for k in members)
            if current and sum(instance.nodes[k].gpus for k in current) + size > max_gpus:
                node_sets.append(current)
                current = []
            current = current + members
        if current:
            node_sets.append(current)
    return _assign(instance, node_sets)


def _assign(instance: Instance, node_sets: list[list[int]]) -> list[Pool]:
    timeline = ClusterTimeline(instance)
    capacity = [
        sum(
            len(instance.nodes[k].healthy_indices)
            * instance.gpu_types[instance.nodes[k].gpu_type].speed
            for k in nodes
        )
        for nodes in node_sets
    ]
    load = [0.0] * len(node_sets)
    where = {k: p for p, nodes in enumerate(node_sets) for k in nodes}
    assigned: list[list[int]] = [[] for _ in node_sets]
    order = sorted(
        range(len(instance.queue)),
        key=lambda k: -instance.queue[k].weight / (instance.min_duration(k) or 1),
    )
    for position in order:
        job = instance.queue[position]
        if _quota_tenant(instance, position):
            continue  # placed across pools at merge time
        options = {where[n] for n in timeline.eligible(position)}
        if not options:
            continue
        best = min(
            options,
            key=lambda p: (
                load[p]
                + job.gpus
                * instance.durations[position][instance.nodes[node_sets[p][0]].gpu_type]
                / max(capacity[p], 1e-9),
                p,
            ),
        )
        gpu_type = instance.nodes[node_sets[best][0]].gpu_type
        load[best] += job.gpus * instance.durations[position][gpu_type] / max(capacity[best], 1e-9)
        assigned[best].append(position)
    return [
        Pool(tuple(nodes), tuple(sorted(jobs)))
        for nodes, jobs in zip(node_sets, assigned, strict=True)
    ]


def _quota_tenant(instance: Instance, position: int) -> bool:
    tenant = instance.tenants.get(instance.queue[position].tenant)
    return tenant is not None and tenant.gpu_quota is not None


def sub_instance(instance: Instance, pool: Pool, time_limit_s: float) -> Instance:
    """``pool`` as an instance of its own (running jobs cut to its GPUs, no quotas)."""
    names = {instance.nodes[k].id for k in pool.nodes}
    running = []
    for job in instance.running:
        mine = tuple(g for g in job.gpus if g.rpartition("/")[0] in names)
        if mine:
            share = len(mine) / len(job.gpus)
            running.append(
                replace(job, gpus=mine, cpu=job.cpu * share, memory_gb=job.memory_gb * share)
            )
    queue = tuple(instance.queue[k] for k in pool.jobs)
    return Instance(
        name=instance.name,
        gpu_types={
            t: instance.gpu_types[t] for t in {instance.nodes[k].gpu_type for k in pool.nodes}
        }
        | {t: instance.gpu_types[t] for job in queue for t in job.gpu_types}
        | {t: instance.gpu_types[t] for job in queue for t, _ in job.duration_by_type_s},
        nodes=tuple(instance.nodes[k] for k in pool.nodes),
        running=tuple(running),
        queue=queue,
        policy=replace(instance.policy, time_limit_s=time_limit_s),
        now=instance.now,
    )


def _solve_remote(payload: tuple[dict[str, Any], str, str | None]) -> dict[str, Any]:
    from whale_opt.solve import solve

    raw, solver, preset = payload
    return decision_to_dict(solve(instance_from_dict(raw), solver, preset=preset))


def solve_split(
    instance: Instance,
    solver: str,
    preset: str | None = None,
    *,
    max_gpus: int = DEFAULT_MAX_GPUS,
    workers: int = 2,
    solve_one: Callable[[Instance], Decision] | None = None,
) -> Decision:
    """Solve ``instance`` pool by pool (``workers`` processes) and merge."""
    started = time.perf_counter()
    parts = pools(instance, max_gpus)
    busy = [pool for pool in parts if pool.jobs]
    # Pools run ``workers`` at a time; keep a third of the limit to merge and bound.
    waves = max(1, -(-len(busy) // max(workers, 1)))
    spare = 0.66 * instance.policy.time_limit_s - (time.perf_counter() - started)
    subs = [sub_instance(instance, pool, max(0.2, spare / waves)) for pool in busy]
    if solve_one is not None or workers <= 1:
        from whale_opt.solve import solve

        run = solve_one or (lambda sub: solve(sub, solver, preset=preset))
        decisions = [run(sub) for sub in subs]
    else:
        with ProcessPoolExecutor(max_workers=workers) as executor:
            payloads = [(instance_to_dict(sub), solver, preset) for sub in subs]
            decisions = [decision_from_dict(d) for d in executor.map(_solve_remote, payloads)]
    return merge(instance, decisions, solver, started)


def merge(instance: Instance, decisions: list[Decision], solver: str, started: float) -> Decision:
    """One decision for the whole instance from the pools' decisions.

    Jobs of tenants with a quota were kept out of the pools (a quota spans
    them): they are list-scheduled last, on the whole cluster, around what
    the pools decided.
    """
    position = {job.id: k for k, job in enumerate(instance.queue)}
    timeline = ClusterTimeline(instance)
    decided: dict[int, JobDecision] = {}
    for decision in decisions:
        for item in decision.jobs:
            if item.id in position:
                k = position[item.id]
                decided[k] = item
                placement = to_placement(instance, k, item)
                if placement is not None:
                    timeline.commit(k, placement)
    rest = [k for k in wspt_order(instance) if k not in decided and _quota_tenant(instance, k)]
    place_in_order(instance, rest, timeline, decided)
    for k, job in enumerate(instance.queue):
        if k not in decided:
            decided[k] = JobDecision(
                job.id, Action.DEFERRED, reason=deferral_reason(instance, k, timeline)
            )
    jobs = complete(instance, decided)
    statuses = {d.status for d in decisions}
    status = (
        Status.FEASIBLE
        if Status.FEASIBLE in statuses or Status.OPTIMAL in statuses
        else (Status.GREEDY_FALLBACK)
    )
    return assemble(instance, solver, jobs, status, lower_bound(instance), started)
