"""Analytic lower bounds on the decision@1 objective.

Two bounds, and the round reports the larger:

- **Earliest end.** A job can end no earlier than its earliest possible
  placement with only the running jobs present (the checker's rules, with
  the t = 1 start allowed on NVLink-fragmented nodes), and never costs more
  than being deferred: ``sum w_j * min(e_j, horizon + d_j)``.
- **Time-indexed transportation (mean busy time).** A GPU of speed s does
  s units of work per second. Job j needs at least
  ``a_j = min_p gpus_j * d_jp * speed_p`` units, at most ``gpus_j * speed_p``
  per second on type p, never before its earliest start ``r_j``. Its
  completion on type p is its mean busy time plus ``d_jp / 2``, and a unit
  processed in time bucket [b, b') happened no earlier than ``max(b, r_j)``.
  So pricing each unit of j in bucket b of type p at
  ``w_j / a_j * (max(b, r_j) + d_jp / 2)``, and a deferred unit at
  ``w_j / a_j * (horizon + d_j)``, then shipping all work at least cost
  within each type's free capacity per bucket (a min-cost flow) bounds every
  valid decision from below: gangs, NVLink, CPU, quotas and exact placement
  are relaxed, and work is divisible. Rounding goes the safe way throughout
  (work down, capacity up, prices down).

Weights are effective weights (:attr:`Instance.weights`: class factor and
aging included). Soft-preference penalties are >= 0 and left out, and
draining nodes, which take no new work, offer no capacity. Both need the
capacity held by running jobs fixed, so the running jobs that a queued job
may preempt this round (:mod:`whale_opt.rules`) are dropped
first (:func:`without_preemptible`): their capacity counts as free. The
bound is never 0 while a queued job exists.
"""

from __future__ import annotations

import math
import threading
from dataclasses import replace

import numpy as np
from ortools.graph.python import min_cost_flow

from whale_opt.bounds.capacity import Capacity
from whale_opt.decision import least_usage
from whale_opt.memo import IdentityMemo
from whale_opt.placement.profile import Profile
from whale_opt.placement.search import PlacementSearch
from whale_opt.placement.state import ClusterState
from whale_opt.problem_data import MILLI, Instance, QueuedJob, class_rank, tenant_guarantee
from whale_opt.rules import held_by_tenant, preemptible_now

_FOREVER = 2**62
CHEAP_ABOVE = 500_000  # queued jobs x nodes past which lower_bound skips earliest placements
MAX_ARCS = 1_500_000  # time buckets are coarsened to keep the flow about this size


def earliest_times(instance: Instance) -> tuple[list[float], list[float]]:
    """Per queued job, its earliest possible (start, end) with only running jobs present."""
    relaxed = PlacementSearch(priced=False, wait_for_release=False)
    timeline = ClusterState(instance, search=relaxed)
    starts, ends = [], []
    for position in range(len(instance.queue)):
        by_end = timeline.best_placement(position)
        if by_end is None:
            starts.append(math.inf)
            ends.append(math.inf)
            continue
        job = instance.queue[position]
        if by_end.start > 0 and (job.shares or job.cpu_only):
            # Planned by count, a share or CPU-only job may start later than it could:
            # its earliest later start (1) keeps the bound valid.
            shortest = instance.min_duration(position) or 0
            starts.append(1.0)
            ends.append(float(1 + shortest))
            continue
        by_start = by_end if by_end.start == 0 else timeline.best_placement(position, by_start=True)
        ends.append(float(by_end.end))
        starts.append(math.inf if by_start is None else float(by_start.start))
    return starts, ends


def shape_key(job: QueuedJob) -> tuple[object, ...]:
    """What a placement search with only running jobs present reads of a job, but
    for its GPU types and durations: jobs alike in it start alike."""
    return (
        job.gpu_count,
        job.gpu_milli,
        job.cpu,
        job.memory_gb,
        job.tenant,
        job.zone,
        job.topology,
    )


class EarliestStarts:
    """Per queued job and GPU type, a start no valid decision beats: the relaxed
    search with only the running jobs that no queued job may preempt present
    (as :func:`earliest_times`). Found when first asked, then remembered."""

    def __init__(self, instance: Instance) -> None:
        relaxed = PlacementSearch(priced=False, wait_for_release=False)
        self._state = ClusterState(without_preemptible(instance), search=relaxed)
        self._found: dict[tuple[object, ...], float] = {}
        self._lock = threading.Lock()

    @property
    def state(self) -> ClusterState:
        """The cluster with only the running jobs that no queued job may preempt
        (:func:`without_preemptible`): what every valid decision leaves busy."""
        return self._state

    def start(self, position: int, gpu_type: str) -> float:
        """Job ``position``'s earliest start on ``gpu_type`` (inf: none there).

        With only running jobs present the free capacity only grows, so the
        start does not depend on the job's duration: jobs of one shape (GPUs,
        share, CPU, memory, tenant, zone, topology) share it.
        """
        key = (shape_key(self._state.instance.queue[position]), gpu_type)
        with self._lock:
            found = self._found.get(key)
            if found is None:
                placement = self._state.best_placement(position, by_start=True, gpu_type=gpu_type)
                found = math.inf if placement is None else float(placement.start)
                self._found[key] = found
        return found

    def times(self) -> tuple[list[float], list[float]]:
        """Per queued job, its earliest start and end over its types (inf: none).
        A share or CPU-only job, planned by count, gets 0 and its shortest
        duration (always valid)."""
        instance = self._state.instance
        starts, ends = [], []
        for k, job in enumerate(instance.queue):
            if job.shares or job.cpu_only:
                starts.append(0.0)
                ends.append(float(instance.min_duration(k) or math.inf))
                continue
            by_type = {p: self.start(k, p) for p in instance.durations[k]}
            starts.append(min(by_type.values(), default=math.inf))
            ends.append(
                min((t + instance.durations[k][p] for p, t in by_type.items()), default=math.inf)
            )
        return starts, ends


_EARLIEST: IdentityMemo[EarliestStarts] = IdentityMemo(4)


def earliest_starts(instance: Instance) -> EarliestStarts:
    """The :class:`EarliestStarts` of ``instance`` (one per instance, shared by its
    neighbourhoods)."""
    return _EARLIEST.get(instance, lambda: EarliestStarts(instance))


def earliest_end_bound(instance: Instance, ends: list[float] | None = None) -> float:
    """``sum w_j * min(e_j, horizon + d_j)`` (see module docstring)."""
    ends = earliest_times(instance)[1] if ends is None else ends
    return sum(
        weight * min(ends[k], instance.deferred_cost_end(k))
        for k, weight in enumerate(instance.weights)
    )


def _type_capacity(instance: Instance) -> dict[str, Profile]:
    """Per GPU type, free speed-weighted capacity over time (healthy minus running,
    none on draining nodes)."""
    capacity: dict[str, Profile] = {}
    for node in instance.nodes:
        if node.draining:
            continue
        speed = instance.gpu_types[node.gpu_type].speed
        profile = capacity.setdefault(node.gpu_type, Profile())
        profile.add(0, _FOREVER, len(node.healthy_indices) * speed)
    # A running share takes its fraction of a GPU: the rest of it is capacity too.
    for job in instance.running:
        for gpu in job.gpu_ids:
            node = instance.nodes[instance.parse_gpu(gpu).node]
            if not node.draining:
                speed = instance.gpu_types[node.gpu_type].speed
                capacity[node.gpu_type].add(0, job.remaining_s, -job.gpu_milli / MILLI * speed)
    return capacity


def time_buckets(horizon: float, step: float = 300.0, ratio: float = 0.02) -> list[float]:
    """Time-bucket boundaries: ``step`` long at first, then growing by ``ratio``."""
    bounds = [0.0]
    while bounds[-1] < horizon:
        bounds.append(bounds[-1] + max(step, ratio * bounds[-1]))
    return bounds


def flow_bound(
    instance: Instance,
    starts: list[float],
    ends: list[float],
    *,
    weights: tuple[float, ...] | None = None,
    step: float | None = None,
) -> float:
    """The time-indexed transportation bound (see module docstring), as a min-cost flow.

    ``weights`` replace the instance's effective ones; ``step`` gives buckets
    of that many seconds throughout (else they grow with time, see
    :func:`time_buckets`, and coarsen to keep the flow about ``MAX_ARCS``).
    """
    horizon = instance.policy.horizon_s
    capacity = _type_capacity(instance)
    jobs = [k for k in range(len(instance.queue)) if math.isfinite(starts[k])]
    weights = instance.weights if weights is None else weights
    outside = sum(
        weights[k] * min(ends[k], instance.deferred_cost_end(k))
        for k in range(len(instance.queue))
        if not math.isfinite(starts[k])
    )
    if not jobs:
        return outside
    work = {
        k: min(
            instance.queue[k].gpu_amount * d * instance.gpu_types[p].speed
            for p, d in instance.durations[k].items()
        )
        for k in jobs
    }
    unit = max(1.0, max(work.values()) / 100_000)
    supply = {k: int(work[k] // unit) for k in jobs}
    small = [k for k in jobs if supply[k] == 0]
    outside += sum(weights[k] * min(ends[k], instance.deferred_cost_end(k)) for k in small)
    jobs = [k for k in jobs if supply[k] > 0]
    if not jobs:
        return outside
    span = horizon + max(max(instance.durations[k].values()) for k in jobs)
    pairs = sum(len(instance.durations[k]) for k in jobs)
    if step is not None:
        grid = np.array(time_buckets(span, step=step, ratio=0.0))
    else:
        ratio = 0.02
        while len(time_buckets(span, ratio=ratio)) * pairs > MAX_ARCS and ratio < 1.0:
            ratio *= 1.5
        grid = np.array(time_buckets(span, ratio=ratio))
    types = sorted(capacity)
    n_buckets = len(grid) - 1
    # Node ids: jobs, then (type, bucket), then defer, then sink.
    first_bucket = {p: len(jobs) + i * n_buckets for i, p in enumerate(types)}
    defer = len(jobs) + len(types) * n_buckets
    sink = defer + 1
    total_weighted = sum(weights[k] * instance.deferred_cost_end(k) for k in jobs)
    # Costs are int64: scaled so that their sum stays below 2**62 (below 1 for
    # huge weights; flooring then only lowers the bound, which stays valid).
    scale = 2.0**62 / (4.0 * (sink + 2) * max(total_weighted, 1.0))
    if not scale > 0:  # weights past a float's range (the records allow any finite one)
        return outside
    tails, heads, caps, costs = [], [], [], []
    for j, k in enumerate(jobs):
        job = instance.queue[k]
        per_unit = scale * weights[k] / supply[k]
        cutoff = horizon + min(instance.durations[k].values())
        tails.append(np.array([j]))
        heads.append(np.array([defer]))
        caps.append(np.array([supply[k]]))
        costs.append(np.array([math.floor(per_unit * cutoff)]))
        lo = np.maximum(grid[:-1], starts[k])
        for p, duration in instance.durations[k].items():
            if p not in capacity:
                continue  # no node of this type
            rate = job.gpu_amount * instance.gpu_types[p].speed / unit
            t_eff = lo + duration / 2
            # Buckets before the release are empty; past the cut-off deferring is never dearer.
            keep = np.nonzero((grid[1:] > lo) & (t_eff < cutoff))[0]
            tails.append(np.full(len(keep), j))
            heads.append(first_bucket[p] + keep)
            caps.append(np.minimum(supply[k], np.ceil(rate * (grid[1:][keep] - lo[keep]))))
            costs.append(np.floor(per_unit * t_eff[keep]))
    for p in types:
        room = Capacity.of(capacity[p]).areas(grid) / unit
        keep = np.nonzero(room > 0)[0]
        tails.append(first_bucket[p] + keep)
        heads.append(np.full(len(keep), sink))
        caps.append(np.ceil(room[keep]))
        costs.append(np.zeros(len(keep)))
    tails.append(np.array([defer]))
    heads.append(np.array([sink]))
    caps.append(np.array([sum(supply.values())]))
    costs.append(np.array([0]))
    flow = min_cost_flow.SimpleMinCostFlow()
    flow.add_arcs_with_capacity_and_unit_cost(
        *(np.concatenate(column).astype(np.int64) for column in (tails, heads, caps, costs))
    )
    for j, k in enumerate(jobs):
        flow.set_node_supply(j, supply[k])
    flow.set_node_supply(sink, -sum(supply.values()))
    if flow.solve() != flow.OPTIMAL:
        return outside  # cannot happen (deferral always has room); stay valid
    return outside + flow.optimal_cost() / scale


def without_preemptible(instance: Instance) -> Instance:
    """``instance`` without the running jobs some queued job may preempt this round.

    A relaxation: every valid decision of ``instance`` keeps or preempts each
    of them, and preemption prices are >= 0, so a bound on the relaxed round
    (their GPUs, CPU, memory and quota free from now) bounds ``instance`` too.
    """
    held = held_by_tenant(instance)
    # rules.may_displace over the whole queue at once: the best class rank
    # waiting, and the tenants a job of which would stay within its guarantee.
    top_rank = max((class_rank(instance, job) for job in instance.queue), default=-1)
    smallest: dict[str, int] = {}
    for job in instance.queue:
        smallest[job.tenant] = min(smallest.get(job.tenant, job.gpu_count), job.gpu_count)
    reclaiming = {
        tenant
        for tenant, size in smallest.items()
        if held.get(tenant, 0) + size <= tenant_guarantee(instance, tenant)
    }

    def displaceable(r: int) -> bool:
        victim = instance.running[r]
        if not preemptible_now(instance, r):
            return False
        if class_rank(instance, victim) < top_rank:
            return True
        over = held.get(victim.tenant, 0) > tenant_guarantee(instance, victim.tenant)
        return over and bool(reclaiming - {victim.tenant})

    kept = tuple(job for r, job in enumerate(instance.running) if not displaceable(r))
    return instance if len(kept) == len(instance.running) else replace(instance, running=kept)


def lower_bound(instance: Instance) -> float:
    """The best analytic lower bound on the objective of any valid decision."""
    relaxed = without_preemptible(instance)
    if len(instance.queue) * len(instance.nodes) > CHEAP_ABOVE:
        # A placement search per job costs a list-scheduling pass: past this size,
        # one per job shape and type (weaker for shares, still valid, much faster).
        starts, ends = earliest_starts(instance).times()
    else:
        starts, ends = earliest_times(relaxed)
    bound = max(earliest_end_bound(relaxed, ends), flow_bound(relaxed, starts, ends))
    return bound + usage_floor(instance)


def trivial_bound(instance: Instance) -> float:
    """``sum w_j * d_j``: no job ends before its shortest duration (free to compute);
    plus :func:`usage_floor`."""
    return usage_floor(instance) + sum(
        weight * (instance.min_duration(k) or instance.deferred_cost_end(k))
        for k, weight in enumerate(instance.weights)
    )


def usage_floor(instance: Instance) -> float:
    """The GPU-second prices every decision pays at least (0 without prices): each
    queued job's on its cheapest type (:func:`whale_opt.decision.least_usage`).
    The other bounds leave prices out, so each adds this."""
    if not instance.policy.priced:
        return 0.0
    return sum(least_usage(instance, k) for k in range(len(instance.queue)))


def reported_bound(instance: Instance, report_bound: bool = True) -> float:
    """The bound a decision reports: :func:`lower_bound`, or only the free
    :func:`trivial_bound` when ``report_bound`` (a run setting) is off."""
    return lower_bound(instance) if report_bound else trivial_bound(instance)
