"""Preemption in the heuristics: running work displaced where that pays.

After a policy's list schedule, the jobs that did not start now are visited
in the policy's order. For each, running jobs that may be preempted now
(:func:`whale_opt.rules.preemptible_now`) and that it may displace
(:func:`whale_opt.rules.may_displace`: a higher class rank, or a tenant
below its guarantee reclaiming borrowed GPUs) are candidate victims, and a
victim set must free a placement the job can use now:

- on one node, the job's GPUs out of the free ones and the victims' (each
  victim giving at least one, as the checker's rules ask), NVLink-connected
  when the job needs them (or, priced, prefers them); sets of up to
  :data:`MAX_SET_SIZE` among the :data:`MAX_PER_NODE` cheapest victims there;
- for a multi-node NVLink gang, whole nodes of one size in one rack, each
  free or cleared of victims (the cheapest nodes to clear).

Each candidate is priced by its net gain: the job's effective weight x (its
end as scheduled - its end if it starts now), plus the change in its
dropped-preference penalty, minus the victims' preemption cost
(:func:`whale_opt.decision.preemption_cost`). The one of largest positive
net gain that CPU, host memory and the tenant's quota allow is tried: the
schedule is rebuilt with the victims preempted, the jobs already starting
pinned where they are, the beneficiary on its chosen GPUs, and the rest
list-scheduled in the policy's order. The rebuild is kept only when the
objective drops, so the result is never worse than the list schedule (it
may be, after all: starting one job early can push planned ones back).
``policy.max_preemptions`` caps the victims of the round, :data:`MAX_TRIALS`
the rebuilds (each a list schedule).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from whale_opt.decision import (
    Action,
    JobDecision,
    deferred_cost,
    objective,
    placement_penalty,
    placement_price,
    preemption_cost,
)
from whale_opt.placement.records import Placement, to_job_decision, to_placement
from whale_opt.placement.search import PlacementSearch
from whale_opt.placement.serial import complete, place_in_order
from whale_opt.placement.state import ClusterState
from whale_opt.problem_data import Instance
from whale_opt.rules import held_by_tenant, may_displace, preemptible_now, preemption_problems
from whale_opt.topology import (
    NodeTopology,
    bits,
    choose_gpus,
    connected_sets,
    needs_nvlink,
    popcount,
    single_node,
)

MAX_PER_NODE = 6  # cheapest victims per node that victim sets are drawn from
MAX_SET_SIZE = 3  # victims per node in one set
MAX_TRIALS = 8  # schedule rebuilds per round (each a list schedule)
MAX_MASKS = 5_000  # GPU subsets scanned for one NVLink-connected set touching every victim
TOLERANCE = 1e-9


@dataclass(frozen=True)
class _Victims:
    """Running jobs a waiting job may displace: positions, preemption costs, and GPU
    masks per node position."""

    usable: list[int]
    costs: dict[int, float]
    masks: dict[int, dict[int, int]]


@dataclass(frozen=True)
class Option:
    """A way to start a waiting job now: its victims (running positions) and GPUs."""

    net_gain: float
    victims: frozenset[int]
    placement: Placement


def improve_by_preemption(
    instance: Instance,
    order: Sequence[int],
    jobs: Sequence[JobDecision],
    *,
    prefer: str = "end",
) -> list[JobDecision]:
    """``jobs`` (a list schedule of ``order``) improved by preemptions that pay.

    Returns ``jobs`` unchanged when nothing may or should be preempted.
    """
    cap = instance.policy.max_preemptions
    open_victims = [r for r in range(len(instance.running)) if preemptible_now(instance, r)]
    if not open_victims or not instance.queue or cap == 0:
        return list(jobs)
    held = held_by_tenant(instance)
    costs = {r: preemption_cost(instance, r) for r in open_victims}
    masks = {r: _masks_of(instance, r) for r in open_victims}
    current = list(jobs)
    value = objective(instance, current)
    victims: frozenset[int] = frozenset()
    timeline: ClusterState | None = None  # of ``current``: built when first needed
    by_id = {item.id: item for item in current}
    trials = 0
    for position in order:
        budget = len(open_victims) if cap is None else cap - len(victims)
        if trials >= MAX_TRIALS or budget <= 0:
            break
        job = instance.queue[position]
        item = by_id[job.id]
        if item.action is Action.START:
            continue
        usable = [
            r
            for r in open_victims
            if r not in victims and may_displace(instance, instance.running[r], job, held)
        ]
        if not usable:
            continue
        if timeline is None:
            timeline, _ = _pinned(instance, current, victims, prefer)
        victims_now = _Victims(usable, costs, masks)
        for option in _options(instance, timeline, position, item, victims_now, budget):
            placement = option.placement
            per_node = dict(zip(placement.nodes, placement.counts, strict=True))
            released = [instance.running[r] for r in option.victims]
            if not timeline.fits_now(job, placement.end, per_node, released):
                continue  # CPU, memory or its tenant's quota does not allow it
            trials += 1
            chosen = victims | option.victims
            rebuilt = _rebuild(instance, order, current, chosen, position, placement, prefer)
            if rebuilt is not None:
                rebuilt_value = objective(instance, rebuilt)
                better = rebuilt_value < value - TOLERANCE * max(1.0, abs(value))
                if better and not preemption_problems(instance, rebuilt):
                    current, value, victims, timeline = rebuilt, rebuilt_value, chosen, None
                    by_id = {item.id: item for item in current}
            break  # the best option that fits was tried: on to the next job
    return current


def _pinned(
    instance: Instance, jobs: Sequence[JobDecision], victims: frozenset[int], prefer: str
) -> tuple[ClusterState, dict[int, JobDecision]]:
    """The timeline with ``victims`` preempted and the jobs ``jobs`` starts now placed."""
    preempted = frozenset(instance.running[r].id for r in victims)
    timeline = ClusterState(instance, preempted=preempted, search=PlacementSearch(prefer))
    position = instance.queue_index
    pinned: dict[int, JobDecision] = {}
    for item in jobs:
        k = position.get(item.id)
        if k is not None and item.action is Action.START:
            placement = to_placement(instance, k, item)
            if placement is not None:
                timeline.commit(k, placement)
                pinned[k] = item
    return timeline, pinned


def _rebuild(
    instance: Instance,
    order: Sequence[int],
    jobs: Sequence[JobDecision],
    victims: frozenset[int],
    position: int,
    placement: Placement,
    prefer: str,
) -> list[JobDecision] | None:
    """The schedule with ``victims`` preempted, the jobs starting in ``jobs`` pinned,
    job ``position`` started at ``placement`` and the rest list-scheduled in
    ``order`` (queue jobs in queue order, then running ones); None when the
    start does not fit after all."""
    timeline, decided = _pinned(instance, jobs, victims, prefer)
    per_node = dict(zip(placement.nodes, placement.counts, strict=True))
    taken = any(
        mask & ~timeline.free_mask(n)
        for n, mask in zip(placement.nodes, placement.masks, strict=True)
    )
    if taken or not timeline.fits_now(instance.queue[position], placement.end, per_node):
        return None
    timeline.commit(position, placement)
    decided[position] = to_job_decision(instance, position, placement)
    place_in_order(instance, [k for k in order if k not in decided], timeline, decided)
    return complete(instance, decided, victims)


def _options(
    instance: Instance,
    timeline: ClusterState,
    position: int,
    item: JobDecision,
    victims: _Victims,
    budget: int,
) -> list[Option]:
    """Ways to start job ``position`` now by preempting some of ``victims``, best first."""
    job = instance.queue[position]
    weight = instance.weights[position]
    # What starting now at duration d would gain before victims and preferences.
    if item.end_s is None:
        base_gain = deferred_cost(instance, position)
    else:
        base_gain = weight * item.end_s + placement_penalty(instance, position, item)
    costs, held = victims.costs, victims.masks
    options: list[Option] = []
    gangs: dict[tuple[str, int, str], list[int]] = {}
    for n in timeline.eligible(position):
        topo = timeline.topology(n)
        gpu_type = topo.node.gpu_type
        duration = instance.durations[position][gpu_type]
        gain = base_gain - weight * duration
        if gain <= 0:
            continue
        if job.topology == "nvlink" and not single_node(job, topo):
            gangs.setdefault((topo.node.rack, topo.size, gpu_type), []).append(n)
            continue
        if job.gpu_count > timeline.healthy_count(n):
            continue  # a rack or any job larger than the node: not started by preemption
        here = sorted((r for r in victims.usable if n in held[r]), key=lambda r: (costs[r], r))
        for size in range(1, min(MAX_SET_SIZE, budget, len(here)) + 1):
            for chosen in itertools.combinations(here[:MAX_PER_NODE], size):
                cost = sum(costs[r] for r in chosen)
                if cost >= gain:
                    continue
                parts = [held[r][n] for r in chosen]
                pool = timeline.free_mask(n) | _union(parts)
                option = _single(instance, position, topo, n, pool, parts, duration)
                if option is not None:
                    placement, penalty = option
                    net = gain - penalty - cost
                    if net > 0:
                        options.append(Option(net, frozenset(chosen), placement))
    for nodes in gangs.values():
        cleared = _gang(instance, timeline, position, nodes, victims, budget)
        if cleared is not None:
            placement, penalty, gone = cleared
            net = base_gain - weight * placement.end - penalty - sum(costs[r] for r in gone)
            if net > 0:
                options.append(Option(net, gone, placement))
    options.sort(key=lambda o: (-o.net_gain, len(o.victims), o.placement.nodes))
    return options


def _masks_of(instance: Instance, running_position: int) -> dict[int, int]:
    """GPU bit masks per node position of running job ``running_position``."""
    masks: dict[int, int] = {}
    for gpu in instance.running[running_position].gpu_ids:
        ref = instance.parse_gpu(gpu)
        masks[ref.node] = masks.get(ref.node, 0) | (1 << ref.index)
    return masks


def _union(masks: Sequence[int]) -> int:
    out = 0
    for mask in masks:
        out |= mask
    return out


def _single(
    instance: Instance,
    position: int,
    topo: NodeTopology,
    node: int,
    pool: int,
    parts: list[int],
    duration: int,
) -> tuple[Placement, float] | None:
    """The job's GPUs on ``node`` out of ``pool``, touching every victim's ``parts``,
    with the penalty of the preferences the placement drops and its GPU-second
    price; None if none fit."""
    job = instance.queue[position]
    shapes = [needs_nvlink(job)]
    if not shapes[0] and job.prefer_nvlink and job.gpu_count > 1:
        shapes = [True, False]  # NVLink-connected first: it may drop no preference
    for nvlink in shapes:
        mask = _touching_mask(topo, pool, job.gpu_count, nvlink, parts)
        if mask is None:
            continue
        penalty = placement_price(instance, position, {node: job.gpu_count}, {node: mask})
        placement = Placement(0, duration, topo.node.gpu_type, (node,), (job.gpu_count,), (mask,))
        return placement, penalty
    return None


def _touching_mask(
    topo: NodeTopology, pool: int, size: int, nvlink: bool, parts: list[int]
) -> int | None:
    """``size`` GPUs of ``pool`` with at least one of each of ``parts`` (NVLink-connected
    when asked), victims' GPUs before free ones; None if there is no such set."""
    pool &= topo.healthy
    if popcount(pool) < size or len(parts) > size or any(not part & pool for part in parts):
        return None
    if not nvlink or topo.clique:
        chosen = 0
        for part in parts:
            chosen |= (part & pool) & -(part & pool)  # its lowest GPU in the pool
        victim_gpus = _union(parts) & pool
        for source in (victim_gpus & ~chosen, pool & ~victim_gpus & ~chosen):
            for index in bits(source):
                if popcount(chosen) == size:
                    break
                chosen |= 1 << index
        return chosen if popcount(chosen) == size else None
    if math.comb(popcount(pool), size) > MAX_MASKS:
        mask = choose_gpus(topo, pool, size, True)
        return mask if mask is not None and all(mask & part for part in parts) else None
    for mask in connected_sets(topo, pool, size, MAX_MASKS):
        if all(mask & part for part in parts):
            return mask
    return None


def _gang(
    instance: Instance,
    timeline: ClusterState,
    position: int,
    nodes: list[int],
    victims: _Victims,
    budget: int,
) -> tuple[Placement, float, frozenset[int]] | None:
    """Whole nodes among ``nodes`` (one rack, size and type) for a multi-node NVLink
    gang, free or cleared of victims, the cheapest to clear first."""
    job = instance.queue[position]
    topo0 = timeline.topology(nodes[0])
    if job.gpu_count % topo0.size:
        return None
    need = job.gpu_count // topo0.size
    held = victims.masks
    clearable: list[tuple[float, int, frozenset[int]]] = []
    for n in nodes:
        busy = timeline.topology(n).whole & ~timeline.free_mask(n)
        on_node = frozenset(r for r in victims.usable if n in held[r])
        if busy & ~_union([held[r][n] for r in on_node]):
            continue  # held by work that may not be displaced, or started now
        on_node = frozenset(r for r in on_node if held[r][n] & busy)
        clearable.append((sum(victims.costs[r] for r in on_node), n, on_node))
    if len(clearable) < need:
        return None
    clearable.sort(key=lambda c: (c[0], c[1]))
    chosen = clearable[:need]
    gone = frozenset().union(*(c[2] for c in chosen))
    if not gone or len(gone) > budget:
        return None
    picked = tuple(sorted(n for _, n, _ in chosen))
    duration = instance.durations[position][topo0.node.gpu_type]
    counts = (topo0.size,) * need
    masks = tuple(timeline.topology(n).whole for n in picked)
    per_node = dict(zip(picked, counts, strict=True))
    penalty = placement_price(instance, position, per_node, dict(zip(picked, masks, strict=True)))
    placement = Placement(0, duration, topo0.node.gpu_type, picked, counts, masks)
    return placement, penalty, gone
