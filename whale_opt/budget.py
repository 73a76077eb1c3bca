"""The round cost model: what fits the time limit.

A round returns within its time limit. Its fixed work is the list schedule
every solver starts from and the analytic lower bound; :func:`round_cost`
predicts both from the queue and the nodes each job could use (``pairs``),
with constants measured on the development machine. :mod:`whale_opt.solve`
reads it to split a round into pools, cut a queue to its head
(:func:`solve_head`), or report the trivial bound instead of the analytic one.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from whale_opt.bounds import CHEAP_ABOVE, trivial_bound
from whale_opt.decision import Action, Decision, JobDecision, Status
from whale_opt.placement.eligibility import eligible_counts
from whale_opt.placement.serial import assemble
from whale_opt.policies.wspt import wspt_order
from whale_opt.problem_data import Instance
from whale_opt.topology import rack_groups

# The cost model, measured on the development machine (2 cores, shared): the
# list schedule spends MICROS_PER_JOB per queued job and MICROS_PER_PAIR per
# (job, eligible node) pair (the search scans node arrays, not nodes one by one),
# and each grows with the queue's depth, its jobs per node (the profiles its
# placements deepen): MICROS_PER_JOB_DEPTH and MICROS_PER_PAIR_DEPTH per job per
# node. Fitted (least squares on the relative error) to 186 list schedules:
# hetero, dgx1, fragmented and mixed rounds of 128-10,000 GPUs with 100-5,000
# queued, and pools of 64 and 128 GPUs cut from them; the median
# measured/predicted is 1.1, 80% within 0.8-1.7x, the rounds of 1,000 jobs or
# more within 0.64-1.9x. The model before (no depth) predicted a third to a half
# of 2,000 jobs on 16-77 nodes. The analytic bound (its min-cost flow over
# time buckets, and, up to CHEAP_ABOVE queued jobs x nodes, each job's earliest
# placements) takes BOUND_MICROS_PER_JOB per queued job,
# BOUND_MICROS_PER_JOB_TYPE_DEPTH per job, GPU type and ln(1 + depth), and up to
# CHEAP_ABOVE BOUND_MICROS_PER_PAIR per pair: fitted to 64 bounds (the four
# families, 128-10,000 GPUs, 100-5,000 queued), within 0.62-1.97x (median 1.09),
# where the model before (per job and type, per pair, per shape search and node)
# was within 0.34-6.7x (median 2.5x under: a 3,000-job dgx1 bound of 2.7 s was
# expected to take 0.45 s).
MICROS_PER_JOB = 170.0
MICROS_PER_JOB_DEPTH = 0.53
MICROS_PER_PAIR = 0.37
MICROS_PER_PAIR_DEPTH = 0.144
BOUND_MICROS_PER_JOB = 424.0
BOUND_MICROS_PER_JOB_TYPE_DEPTH = 104.0
BOUND_MICROS_PER_PAIR = 1.375
GREEDY_SHARE = 0.25  # of the time limit the list schedule may take
MIN_POOL_WEIGHT = 0.25  # of the mean pool's expected work, the least a pool's time share counts
POOL_OVERHEAD_S = 0.05  # a pool's wall time past its limit in a worker (0.03-0.11 s measured)
# Merging a split round's pools (the whole cluster's occupancy, its rules checked
# again, the decision assembled), per queued and running job: 12-42 us measured
# on rounds of 2,000-5,600 jobs on 8-636 nodes (bench/COST_MODEL.md).
MERGE_MICROS_PER_JOB = 40.0
BOUND_SHARE = 0.25  # of the time limit the analytic bound may take
TAIL_REASON = (
    "not planned this round: the queue is longer than one round can plan within its"
    " time limit (considered again next round)"
)


@dataclass(frozen=True)
class RoundCost:
    """What a round's fixed work is expected to take: ``pairs`` (queued job,
    eligible node) pairs, the list schedule and the analytic bound, in seconds."""

    pairs: int
    greedy_s: float
    bound_s: float


def merge_seconds(instance: Instance) -> float:
    """The expected time to merge the pools of a split round of ``instance``
    (the bound aside: it is reported only where it fits the time left)."""
    return MERGE_MICROS_PER_JOB * (len(instance.queue) + len(instance.running)) * 1e-6


def greedy_seconds(jobs: int, pairs: int, nodes: int) -> float:
    """The list schedule's expected time for ``jobs`` queued jobs with ``pairs``
    (job, eligible node) pairs between them on ``nodes`` nodes."""
    depth = jobs / max(nodes, 1)
    per_job = MICROS_PER_JOB + MICROS_PER_JOB_DEPTH * depth
    per_pair = MICROS_PER_PAIR + MICROS_PER_PAIR_DEPTH * depth
    return (jobs * per_job + pairs * per_pair) * 1e-6


def round_cost(instance: Instance) -> RoundCost:
    """The expected cost of the round's list schedule and analytic bound."""
    pairs = sum(eligible_counts(instance))
    jobs, nodes = len(instance.queue), len(instance.nodes)
    greedy = greedy_seconds(jobs, pairs, nodes)
    types = len({node.gpu_type for node in instance.nodes})
    bound = BOUND_MICROS_PER_JOB * jobs
    bound += BOUND_MICROS_PER_JOB_TYPE_DEPTH * jobs * types * math.log1p(jobs / max(nodes, 1))
    if jobs * nodes <= CHEAP_ABOVE:
        bound += BOUND_MICROS_PER_PAIR * pairs
    return RoundCost(pairs, greedy, bound * 1e-6)


def bound_fits(instance: Instance, time_limit_s: float, cost: RoundCost | None = None) -> bool:
    """Whether the analytic bound is expected to fit its share of the time limit."""
    cost = round_cost(instance) if cost is None else cost
    return cost.bound_s <= BOUND_SHARE * time_limit_s


def split_size(
    instance: Instance, time_limit_s: float, cost: RoundCost | None = None
) -> int | None:
    """``max_gpus`` for pools when the list schedule would not fit its share of the
    time limit and the cluster has more than one rack of one type to split on;
    None when the round needs no split or none would help."""
    cost = round_cost(instance) if cost is None else cost
    budget = GREEDY_SHARE * time_limit_s
    if cost.greedy_s <= budget:
        return None
    groups = rack_groups(instance)
    if len(groups) < 2:
        return None
    # P pools of a P-th of the nodes and queue each cost under a P-th (shallower
    # profiles, a P-squared-th of the pairs) and share the pools' part of the limit
    # in proportion to that (pool_limits): the smaller, the more of each queue fits.
    parts = math.ceil(cost.greedy_s / budget)
    gpus = sum(node.gpu_count for node in instance.nodes)
    largest = max(sum(instance.nodes[k].gpu_count for k in members) for members in groups.values())
    return max(largest, math.ceil(gpus / parts))


def head_size(instance: Instance, order: list[int], budget_s: float) -> int:
    """How many jobs of ``order`` the list schedule plans within ``budget_s`` (at least one)."""
    pairs = eligible_counts(instance)
    total = 0
    for count, k in enumerate(order, start=1):
        total += pairs[k]
        if greedy_seconds(count, total, len(instance.nodes)) > budget_s:
            return max(1, count - 1)
    return len(order)


def pool_limits(costs: list[float], wall_s: float, workers: int) -> list[float]:
    """Time limits of pools expected to cost ``costs`` (their list schedules, in
    seconds) that run ``workers`` at a time within ``wall_s`` of wall time.

    Each pool's share is in proportion to its expected work (at least
    :data:`MIN_POOL_WEIGHT` of the mean pool's), so a pool with many jobs is not
    cut to its head while small ones idle. Scaled so that the pools, taken
    heaviest first by whichever worker is free, end within ``wall_s``, each
    taking :data:`POOL_OVERHEAD_S` past its limit.
    """
    if not costs:
        return []
    floor = MIN_POOL_WEIGHT * sum(costs) / len(costs)
    weights = [max(cost, floor, 1e-9) for cost in costs]
    # The largest scale whose schedule ends in time, by bisection (no more than all
    # the workers' time, spread evenly).
    low, high = 0.0, wall_s * max(1, workers) / sum(weights)
    for _ in range(40):
        scale = (low + high) / 2
        ends = _dispatch([scale * weight + POOL_OVERHEAD_S for weight in weights], workers)
        low, high = (scale, high) if ends <= wall_s else (low, scale)
    return [low * weight for weight in weights]


def _dispatch(durations: list[float], workers: int) -> float:
    """When the last of ``durations`` ends, taken longest first by whichever of
    ``workers`` is free."""
    return max(dispatch_ends(durations, workers), default=0.0)


def dispatch_ends(durations: list[float], workers: int) -> list[float]:
    """When each of ``durations`` ends (from 0), taken longest first by whichever
    of ``workers`` is free."""
    free = [0.0] * max(1, workers)
    ends = [0.0] * len(durations)
    for k in sorted(range(len(durations)), key=lambda k: -durations[k]):
        worker = free.index(min(free))
        free[worker] += durations[k]
        ends[k] = free[worker]
    return ends


def solve_head(
    instance: Instance, head: int, decide: Callable[[Instance], Decision], solver: str
) -> Decision:
    """Decide the first ``head`` jobs of the greedy's order with ``decide``; defer the rest.

    The decision's stats are the head's, and ``head``, its size. The bound is
    the head's plus, per deferred job, its weighted shortest duration (no
    valid decision makes it end sooner).
    """
    started = time.perf_counter()
    order = wspt_order(instance)
    kept = sorted(order[:head])
    tail = sorted(order[head:])
    sub = instance.replace(queue=tuple(instance.queue[k] for k in kept))
    decision = decide(sub)
    ids = {instance.queue[k].id for k in tail}
    jobs = [item for item in decision.jobs if item.id not in ids]
    jobs += [JobDecision(instance.queue[k].id, Action.DEFERRED, reason=TAIL_REASON) for k in tail]
    rest = instance.replace(queue=tuple(instance.queue[k] for k in tail))
    bound = decision.bound + trivial_bound(rest)
    status = Status.FEASIBLE if decision.status is Status.OPTIMAL else decision.status
    stats = {**decision.stats, "head": head}  # what deciding the head did, and its size
    return assemble(instance, solver, jobs, status, bound, started).with_changes(stats=stats)
