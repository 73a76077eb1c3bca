"""Analytic lower bounds on the decision@1 objective.

Two bounds, and the round reports the larger:

- **Earliest end.** A job can end no earlier than its earliest possible
  placement with only the running jobs present (the rules of the checker,
  with the t = 1 start allowed on NVLink-fragmented nodes), and never costs
  more than being deferred: ``sum w_j * min(e_j, horizon + d_j)``.
- **Fluid (mean busy time).** Every GPU of speed s delivers s units of work
  per second. Job j needs at least ``a_j = min_p gpus_j * d_jp * speed_p``
  units; its completion is at least its mean busy time plus half its
  shortest duration. Relaxing the gang to a fluid that may use any capacity
  at any rate, ``sum w_j * MBT_j`` is minimised by processing, at every
  moment, the released job of highest density ``w_j / a_j`` (Goemans'
  preemptive-WSPT LP schedule, which stays optimal on a capacity profile
  that changes over time). A unit of j processed at t costs
  ``w_j/a_j * (t + d_j/2)``; deferring it costs ``w_j/a_j * (H + d_j)``,
  so work past ``H + d_j/2`` is deferred in the relaxation.

Both are computed per group of GPU types that share no job (independent
sub-problems), and need ``policy.allow_preemption`` off (capacity held by
running jobs is then fixed).
"""

from __future__ import annotations

import heapq
import math

from whale_opt.problem_data import Instance
from whale_opt.timeline import ClusterTimeline
from whale_opt.topology import independent_pools, popcount


def earliest_times(instance: Instance) -> tuple[list[float], list[float]]:
    """Per queued job, its earliest possible (start, end) with only running jobs present."""
    timeline = ClusterTimeline(instance, wait_for_release=False)
    starts, ends = [], []
    for position in range(len(instance.queue)):
        by_end = timeline.best_placement(position)
        if by_end is None:
            starts.append(math.inf)
            ends.append(math.inf)
            continue
        by_start = by_end if by_end.start == 0 else timeline.best_placement(position, by_start=True)
        ends.append(float(by_end.end))
        starts.append(math.inf if by_start is None else float(by_start.start))
    return starts, ends


def earliest_end_bound(instance: Instance, ends: list[float] | None = None) -> float:
    """``sum w_j * min(e_j, horizon + d_j)`` (see module docstring)."""
    ends = earliest_times(instance)[1] if ends is None else ends
    return sum(
        job.weight * min(ends[k], instance.deferred_cost_end(k))
        for k, job in enumerate(instance.queue)
    )


def _capacity_profile(instance: Instance, types: set[str]) -> list[tuple[float, float]]:
    """(time, capacity in speed-units) breakpoints for the nodes of ``types``."""
    timeline = ClusterTimeline(instance)
    total = 0.0
    deltas: dict[int, float] = {}
    for node_pos, node in enumerate(instance.nodes):
        if node.gpu_type not in types:
            continue
        speed = instance.gpu_types[node.gpu_type].speed
        total += popcount(timeline.topologies[node_pos].healthy) * speed
        profile = timeline.gpu_use[node_pos]
        for k, t in enumerate(profile.times):
            before = profile.levels[k - 1] if k else 0.0
            deltas[t] = deltas.get(t, 0.0) - (profile.levels[k] - before) * speed
    points = []
    level = total
    for t in sorted(deltas):
        level += deltas[t]
        points.append((float(t), max(level, 0.0)))
    if not points or points[0][0] > 0:
        points.insert(0, (0.0, total))
    return points


def fluid_bound(instance: Instance, releases: list[float] | None = None) -> float:
    """The fluid mean-busy-time bound with release dates (see module docstring)."""
    total = 0.0
    horizon = instance.policy.horizon_s
    for types, jobs in independent_pools(instance):
        if not jobs:
            continue
        eligible = [k for k in jobs if instance.eligible_types[k]]
        for k in jobs:
            if not instance.eligible_types[k]:
                total += instance.queue[k].weight * instance.deferred_cost_end(k)
        if not eligible:
            continue
        total += _fluid_group(instance, types, eligible, releases, horizon)
    return total


def _fluid_group(
    instance: Instance, types: set[str], jobs: list[int], releases: list[float] | None, horizon: int
) -> float:
    profile = _capacity_profile(instance, types)
    work, density, cutoff, shortest = {}, {}, {}, {}
    for k in jobs:
        job = instance.queue[k]
        durations = instance.durations[k]
        work[k] = min(job.gpus * d * instance.gpu_types[p].speed for p, d in durations.items())
        shortest[k] = min(durations.values())
        density[k] = job.weight / work[k]
        cutoff[k] = horizon + shortest[k] / 2
    release = {k: (0.0 if releases is None else max(0.0, releases[k])) for k in jobs}
    pending = sorted(jobs, key=lambda k: release[k])
    active: list[tuple[float, int]] = []
    cost = 0.0
    t = 0.0
    seg = 0
    nxt = 0
    while nxt < len(pending) or active:
        while nxt < len(pending) and release[pending[nxt]] <= t:
            heapq.heappush(active, (-density[pending[nxt]], pending[nxt]))
            nxt += 1
        next_release = release[pending[nxt]] if nxt < len(pending) else math.inf
        if not active:
            t = next_release
            continue
        _, k = active[0]
        if t >= cutoff[k]:
            heapq.heappop(active)
            cost += density[k] * work[k] * (horizon + shortest[k])
            continue
        while seg + 1 < len(profile) and profile[seg + 1][0] <= t:
            seg += 1
        capacity = profile[seg][1]
        next_change = profile[seg + 1][0] if seg + 1 < len(profile) else math.inf
        stop = min(next_change, next_release, cutoff[k])
        if capacity <= 0:
            if stop == math.inf:
                break
            t = stop
            continue
        finish = t + work[k] / capacity
        end = min(finish, stop)
        done = work[k] if finish <= stop else capacity * (end - t)
        cost += density[k] * (capacity * (end * end - t * t) / 2 + done * shortest[k] / 2)
        work[k] -= done
        t = end
        if finish <= stop:
            heapq.heappop(active)
    # Whatever is left (no capacity ever again) is deferred.
    for _, k in active:
        cost += density[k] * work[k] * (horizon + shortest[k])
    for k in pending[nxt:]:
        cost += density[k] * work[k] * (horizon + shortest[k])
    return cost


def lower_bound(instance: Instance) -> float:
    """The best analytic lower bound on the objective of any valid decision."""
    if instance.policy.allow_preemption and instance.running:
        return 0.0  # preemption frees capacity at a price these bounds do not model
    starts, ends = earliest_times(instance)
    # A release date must not exceed the deferral cut-off, or the fluid would
    # skip the job; capping it keeps the bound valid (it only relaxes).
    capped = [min(s, instance.policy.horizon_s) for s in starts]
    return max(earliest_end_bound(instance, ends), fluid_bound(instance, capped))
