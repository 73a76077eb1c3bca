"""One round, one call: ``solve(instance, solver=...)`` -> :class:`Decision`.

A round returns within its time limit. Its fixed work is the list schedule
every solver starts from and the analytic lower bound; :func:`round_cost`
predicts both from the queue and the nodes each job could use (``pairs``),
with constants measured on the development machine, and the round adapts:

- a cluster past ``split_above_gpus`` GPUs, or one whose list schedule
  would not fit :data:`GREEDY_SHARE` of the limit and that has racks to
  split on, is cut into pools solved in parallel (:mod:`whale_opt.decompose`;
  a pool of a P-th of the nodes and of the queue costs about a P-squared-th);
- a queue still too long (one rack of one type, or within a pool) is cut:
  its head, by class rank then Smith's ratio, is decided, and the rest is
  deferred to a later round (:func:`solve_head`);
- an analytic bound that would not fit :data:`BOUND_SHARE` of the limit is
  replaced by the trivial one (``policy.report_bound`` off): weaker, as honest.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from whale_opt.bounds import trivial_bound
from whale_opt.decision import Action, Decision, JobDecision, Status
from whale_opt.policies import REGISTRY, get_policy
from whale_opt.policies.base import SchedulingPolicy, assemble
from whale_opt.policies.wspt import wspt_order
from whale_opt.problem_data import Instance
from whale_opt.topology import eligible_nodes, node_topologies

SOLVERS = tuple(REGISTRY)
SPLIT_ABOVE_GPUS = 2048
# The cost model, measured on the development machine (2 cores, shared): the
# list schedule spends MICROS_PER_PAIR + MICROS_PER_DEPTH x (queued jobs per
# node) microseconds per (job, eligible node) pair (3 to 25 us seen, from
# 1,024 GPUs / 500 queued to 64 GPUs / 800 queued), and the analytic bound
# about BOUND_MICROS_PER_JOB_TYPE per queued job and GPU type (its flow) plus
# BOUND_MICROS_PER_PAIR per pair (its earliest placements).
MICROS_PER_PAIR = 3.0
MICROS_PER_DEPTH = 0.6
BOUND_MICROS_PER_JOB_TYPE = 150.0  # measured 106-148 on hetero 512-2048 GPUs (idle machine)
BOUND_MICROS_PER_PAIR = 8.0
GREEDY_SHARE = 0.25  # of the time limit the list schedule may take
BOUND_SHARE = 0.25  # of the time limit the analytic bound may take
TAIL_REASON = (
    "not planned this round: the queue is longer than one round can plan within its"
    " time limit (considered again next round)"
)


def solve(
    instance: Instance,
    solver: str = "wspt",
    *,
    preset: str | None = None,
    time_limit_s: float | None = None,
    split_above_gpus: int | None = SPLIT_ABOVE_GPUS,
    split: bool = True,
    policy: SchedulingPolicy | None = None,
) -> Decision:
    """Decide one round of ``instance`` with the named policy or solver.

    ``time_limit_s`` overrides the instance's policy; ``preset`` names a
    CP-SAT parameter preset (ignored by the heuristics). Clusters with more
    than ``split_above_gpus`` GPUs (None: no such threshold), and rounds
    whose queue is too long for the time limit, are cut into pools solved in
    parallel (:mod:`whale_opt.decompose`) unless ``split`` is off; a queue
    still too long is cut to its head (see the module docstring).
    ``policy`` is an already built ``solver`` to reuse across rounds (pools
    solved in worker processes build their own from the name).
    """
    if time_limit_s is not None:
        instance = instance.replace(policy=replace(instance.policy, time_limit_s=time_limit_s))
    if policy is None:
        policy = get_policy(solver, preset=preset)  # fail early on a bad name or preset
    cost = round_cost(instance)
    if split:
        from whale_opt.decompose import DEFAULT_MAX_GPUS, solve_split

        gpus = sum(node.gpus for node in instance.nodes)
        max_gpus = split_size(instance, cost)
        large = split_above_gpus is not None and gpus > split_above_gpus
        if large and (max_gpus is None or max_gpus >= DEFAULT_MAX_GPUS):
            return solve_split(instance, solver, preset)
        if max_gpus is not None:
            return solve_split(instance, solver, preset, max_gpus=max_gpus)
    if instance.policy.report_bound and not bound_fits(instance, cost):
        instance = instance.replace(policy=replace(instance.policy, report_bound=False))
    budget = GREEDY_SHARE * instance.policy.time_limit_s
    if cost.greedy_s > budget:
        head = head_size(instance, wspt_order(instance), budget)
        if head < len(instance.queue):
            return solve_head(instance, head, policy.decide, solver)
    return policy.decide(instance)


@dataclass(frozen=True)
class RoundCost:
    """What a round's fixed work is expected to take: ``pairs`` (queued job,
    eligible node) pairs, the list schedule and the analytic bound, in seconds."""

    pairs: int
    greedy_s: float
    bound_s: float


def _pairs(instance: Instance) -> list[int]:
    """Per queued job, the number of nodes it could use (alike jobs share the count)."""
    topologies = node_topologies(instance)
    memo: dict[tuple[object, ...], int] = {}
    out = []
    for k, job in enumerate(instance.queue):
        shape = (instance.eligible_types[k], job.gpus, job.topology)
        if shape not in memo:
            memo[shape] = len(eligible_nodes(instance, k, topologies))
        out.append(memo[shape])
    return out


def _micros_per_pair(queued: int, nodes: int) -> float:
    return MICROS_PER_PAIR + MICROS_PER_DEPTH * queued / max(1, nodes)


def round_cost(instance: Instance) -> RoundCost:
    """The expected cost of the round's list schedule and analytic bound."""
    pairs = sum(_pairs(instance))
    greedy = pairs * _micros_per_pair(len(instance.queue), len(instance.nodes)) * 1e-6
    types = len({node.gpu_type for node in instance.nodes})
    bound = BOUND_MICROS_PER_JOB_TYPE * len(instance.queue) * types
    bound += BOUND_MICROS_PER_PAIR * pairs
    return RoundCost(pairs, greedy, bound * 1e-6)


def bound_fits(instance: Instance, cost: RoundCost | None = None) -> bool:
    """Whether the analytic bound is expected to fit its share of the time limit."""
    cost = round_cost(instance) if cost is None else cost
    return cost.bound_s <= BOUND_SHARE * instance.policy.time_limit_s


def split_size(instance: Instance, cost: RoundCost | None = None) -> int | None:
    """``max_gpus`` for pools when the list schedule would not fit its share of the
    time limit and the cluster has more than one rack of one type to split on;
    None when the round needs no split or none would help."""
    from whale_opt.decompose import rack_groups

    cost = round_cost(instance) if cost is None else cost
    budget = GREEDY_SHARE * instance.policy.time_limit_s
    if cost.greedy_s <= budget:
        return None
    groups = rack_groups(instance)
    if len(groups) < 2:
        return None
    # P pools of a P-th of the nodes and queue each cost about 1/P^2 and run about P/2
    # at a time on two workers, each with a P/2-th of the pools' share of the limit.
    parts = math.ceil(cost.greedy_s / budget)
    gpus = sum(node.gpus for node in instance.nodes)
    largest = max(sum(instance.nodes[k].gpus for k in members) for members in groups.values())
    return max(largest, math.ceil(gpus / parts))


def head_size(instance: Instance, order: list[int], budget_s: float) -> int:
    """How many jobs of ``order`` the list schedule plans within ``budget_s`` (at least one)."""
    pairs = _pairs(instance)
    nodes = len(instance.nodes)
    total = 0
    for count, k in enumerate(order, start=1):
        total += pairs[k]
        if total * _micros_per_pair(count, nodes) * 1e-6 > budget_s:
            return max(1, count - 1)
    return len(order)


def solve_head(
    instance: Instance, head: int, decide: Callable[[Instance], Decision], solver: str
) -> Decision:
    """Decide the first ``head`` jobs of the greedy's order with ``decide``; defer the rest.

    The bound is the head's plus, per deferred job, its weighted shortest
    duration (no valid decision makes it end sooner).
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
    return assemble(instance, solver, jobs, status, bound, started)
