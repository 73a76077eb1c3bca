"""The round cost model: what fits the time limit.

A round returns within its time limit. Its fixed work is the list schedule
every solver starts from and the analytic lower bound; :func:`round_cost`
predicts both from the queue and the nodes each job could use (``pairs``),
with constants measured on the development machine. :mod:`whale_opt.solve`
reads it to split a round into pools, cut a queue to its head, or report the
trivial bound instead of the analytic one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from whale_opt.problem_data import Instance
from whale_opt.topology import eligible_nodes, node_topologies, rack_groups

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
        shape = (instance.eligible_types[k], job.gpu_count, job.topology)
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
    # P pools of a P-th of the nodes and queue each cost about 1/P^2 and run about P/2
    # at a time on two workers, each with a P/2-th of the pools' share of the limit.
    parts = math.ceil(cost.greedy_s / budget)
    gpus = sum(node.gpu_count for node in instance.nodes)
    largest = max(sum(instance.nodes[k].gpu_count for k in members) for members in groups.values())
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
