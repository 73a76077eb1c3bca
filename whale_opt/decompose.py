"""Large rounds split into pools solved apart (in parallel), then merged.

A cluster past ``max_gpus`` is cut into pools of whole racks of one GPU
type, each at most ``max_gpus`` GPUs. Every queued job goes to one pool it
can run in (highest priority first, to the least loaded pool relative to its
speed-weighted capacity); running jobs stay where they run. Each pool is an
ordinary instance, solved by any policy; the merged decision is valid for
the whole cluster because pools share no GPU. A tenant's quota is split
over the pools in proportion to what its jobs ask in each; at merge time the
tenant's jobs are checked against the whole quota in start order, and those
that would break it are list-scheduled again on the whole cluster.

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

from whale_opt.bounds import reported_bound
from whale_opt.decision import Action, Decision, JobDecision, Status
from whale_opt.io import decision_from_dict, decision_to_dict, instance_from_dict, instance_to_dict
from whale_opt.policies.base import (
    assemble,
    complete,
    deferral_reason,
    to_job_decision,
    to_placement,
    unjustified_plans,
)
from whale_opt.policies.wspt import wspt_order
from whale_opt.problem_data import Instance, Tenant
from whale_opt.profile import Profile
from whale_opt.timeline import ClusterTimeline

DEFAULT_MAX_GPUS = 512


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
    """Each job, highest priority first, to the pool where it would end first if the
    pool's GPUs were one fluid machine (its backlog plus the job's duration there)."""
    timeline = ClusterTimeline(instance)
    where = {k: p for p, nodes in enumerate(node_sets) for k in nodes}
    gpus = [sum(len(instance.nodes[k].healthy_indices) for k in nodes) or 1 for nodes in node_sets]
    backlog = [0.0] * len(node_sets)  # seconds of work per GPU already there
    for held in instance.running:
        pool = where[instance.parse_gpu(held.gpus[0]).node]
        backlog[pool] += len(held.gpus) * held.remaining_s / gpus[pool]
    assigned: list[list[int]] = [[] for _ in node_sets]
    for position in wspt_order(instance):
        job = instance.queue[position]
        options = {where[n] for n in timeline.eligible(position)}
        if not options:
            continue

        duration = {
            p: instance.durations[position][instance.nodes[node_sets[p][0]].gpu_type]
            for p in options
        }
        best = min(options, key=lambda p: (backlog[p] + duration[p], p))
        backlog[best] += job.gpus * duration[best] / gpus[best]
        assigned[best].append(position)
    return [
        Pool(tuple(nodes), tuple(sorted(jobs)))
        for nodes, jobs in zip(node_sets, assigned, strict=True)
    ]


def quota_shares(instance: Instance, parts: list[Pool]) -> dict[str, list[int]]:
    """Per tenant with a quota, each pool's part of it, in proportion to the GPUs its
    jobs ask there (parts add up to the quota)."""
    shares: dict[str, list[int]] = {}
    for name, tenant in instance.tenants.items():
        if tenant.gpu_quota is None:
            continue
        asks = [
            sum(instance.queue[k].gpus for k in p.jobs if instance.queue[k].tenant == name)
            for p in parts
        ]
        total = sum(asks)
        split = [tenant.gpu_quota * a // total if total else 0 for a in asks]
        if total:
            split[max(range(len(parts)), key=lambda p: asks[p])] += tenant.gpu_quota - sum(split)
        shares[name] = split
    return shares


def sub_instance(
    instance: Instance, pool: Pool, quotas: dict[str, int], time_limit_s: float
) -> Instance:
    """``pool`` as an instance of its own (running jobs cut to its GPUs, quota parts)."""
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
        tenants={**instance.tenants, **{n: Tenant(n, q) for n, q in quotas.items()}},
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
    shares = quota_shares(instance, parts)
    busy = [k for k, pool in enumerate(parts) if pool.jobs]
    # Pools run ``workers`` at a time; keep half the limit to split, merge and bound.
    waves = max(1, -(-len(busy) // max(workers, 1)))
    spare = 0.5 * instance.policy.time_limit_s - (time.perf_counter() - started)
    subs = [
        sub_instance(
            instance,
            parts[k],
            {n: split[k] for n, split in shares.items()},
            max(0.2, spare / waves),
        )
        for k in busy
    ]
    if solve_one is not None or workers <= 1:
        from whale_opt.solve import solve

        run = solve_one or (lambda sub: solve(sub, solver, preset=preset))
        decisions = [run(sub) for sub in subs]
    else:
        with ProcessPoolExecutor(max_workers=workers) as executor:
            payloads = [(instance_to_dict(sub), solver, preset) for sub in subs]
            decisions = [decision_from_dict(d) for d in executor.map(_solve_remote, payloads)]
    return merge(instance, parts, decisions, solver, started)


def _has_quota(instance: Instance, position: int) -> bool:
    tenant = instance.tenants.get(instance.queue[position].tenant)
    return tenant is not None and tenant.gpu_quota is not None


def merge(
    instance: Instance, parts: list[Pool], decisions: list[Decision], solver: str, started: float
) -> Decision:
    """One decision for the whole instance from the pools' decisions.

    Pools cannot see each other's share of a tenant's running GPUs, so jobs
    of tenants with a quota are re-checked against the whole quota, in start
    order; the few that would break it are list-scheduled again on the
    whole cluster.
    """
    position = {job.id: k for k, job in enumerate(instance.queue)}
    decided: dict[int, JobDecision] = {}
    for decision in decisions:
        for item in decision.jobs:
            if item.id in position:
                decided[position[item.id]] = item
    placements = {k: to_placement(instance, k, item) for k, item in decided.items()}
    # Quota jobs a pool deferred may fit elsewhere: try them again too.
    again = {
        k for k, placement in placements.items() if placement is None and _has_quota(instance, k)
    }
    quota_use: dict[str, Profile] = defaultdict(Profile)  # GPUs held per tenant over time
    for held in instance.running:
        quota_use[held.tenant].add(0, held.remaining_s, len(held.gpus))
    placed = {k: p for k, p in placements.items() if p is not None}
    for k in sorted(placed, key=lambda k: (placed[k].start, k)):
        job = instance.queue[k]
        if _has_quota(instance, k):
            quota = instance.tenants[job.tenant].gpu_quota or 0
            use = quota_use[job.tenant]
            if use.peak(placed[k].start, placed[k].end) + job.gpus > quota:
                again.add(k)
                continue
            use.add(placed[k].start, placed[k].end, job.gpus)
    # Taking jobs out may leave planned NVLink jobs without the end they waited for.
    while True:
        kept = {k: item for k, item in decided.items() if k not in again}
        lost = unjustified_plans(instance, kept)
        if not lost:
            break
        again |= lost
    timeline = ClusterTimeline(instance)
    for k, fixed in placed.items():
        if k not in again:
            timeline.commit(k, fixed)
    # Re-place within the job's own pool: its nodes are where it was meant to go,
    # and searching the whole cluster costs more than the round has.
    home = {k: frozenset(pool.nodes) for pool in parts for k in pool.jobs}
    for k in wspt_order(instance):
        if k not in again:
            continue
        placement = timeline.best_placement(k, within=home.get(k))
        if placement is None:
            decided[k] = JobDecision(
                instance.queue[k].id,
                Action.DEFERRED,
                reason=deferral_reason(instance, k, timeline),
            )
            continue
        timeline.commit(k, placement)
        decided[k] = to_job_decision(instance, k, placement)
    for k, job in enumerate(instance.queue):
        if k not in decided:
            decided[k] = JobDecision(
                job.id, Action.DEFERRED, reason=deferral_reason(instance, k, timeline)
            )
    jobs = complete(instance, decided)
    statuses = {d.status for d in decisions}
    status = (
        Status.FEASIBLE
        if statuses & {Status.FEASIBLE, Status.OPTIMAL}
        else (Status.GREEDY_FALLBACK)
    )
    return assemble(instance, solver, jobs, status, reported_bound(instance), started)
