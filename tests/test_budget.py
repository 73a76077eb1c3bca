"""The round cost model: the list schedule's and the bound's expected time, and pool shares."""

from __future__ import annotations

import heapq
import math

import pytest

from whale_opt.bounds import CHEAP_ABOVE
from whale_opt.budget import (
    BOUND_MICROS_PER_JOB,
    BOUND_MICROS_PER_JOB_TYPE_DEPTH,
    BOUND_MICROS_PER_PAIR,
    MIN_POOL_WEIGHT,
    POOL_OVERHEAD_S,
    greedy_seconds,
    head_size,
    pool_limits,
    round_cost,
)
from whale_opt.generate import generate
from whale_opt.placement.eligibility import eligible_counts
from whale_opt.policies.wspt import wspt_order


def test_the_greedy_costs_more_per_job_as_the_queue_deepens() -> None:
    assert greedy_seconds(0, 0, 10) == 0
    assert greedy_seconds(1000, 0, 10) > 10 * greedy_seconds(100, 0, 10)
    assert greedy_seconds(100, 10_000, 10) > greedy_seconds(100, 0, 10)
    # The same queue on more nodes: shallower profiles, less per pair.
    assert greedy_seconds(1000, 100_000, 1000) < greedy_seconds(1000, 100_000, 100)


def test_the_head_is_the_longest_prefix_whose_list_schedule_fits() -> None:
    instance = generate("hetero", gpus=128, queued=400, seed=2)
    order = wspt_order(instance)
    budget = round_cost(instance).greedy_s / 4
    head = head_size(instance, order, budget)
    assert 1 < head < len(order)
    pairs = eligible_counts(instance)
    nodes = len(instance.nodes)
    assert greedy_seconds(head, sum(pairs[k] for k in order[:head]), nodes) <= budget
    assert greedy_seconds(head + 1, sum(pairs[k] for k in order[: head + 1]), nodes) > budget
    assert head_size(instance, order, 1e9) == len(order)
    assert head_size(instance, order, 0.0) == 1


@pytest.mark.parametrize(("gpus", "cheap"), [(10_000, False), (128, True)])
def test_the_bound_costs_per_job_more_on_deep_queues_and_per_pair_when_cheap(
    gpus: int, cheap: bool
) -> None:
    instance = generate("hetero", gpus=gpus, queued=400, seed=1)
    jobs, nodes = len(instance.queue), len(instance.nodes)
    assert (jobs * nodes <= CHEAP_ABOVE) is cheap
    types = len({node.gpu_type for node in instance.nodes})
    cost = round_cost(instance)
    expected = (
        BOUND_MICROS_PER_JOB * jobs
        + BOUND_MICROS_PER_JOB_TYPE_DEPTH * jobs * types * math.log1p(jobs / nodes)
        + (BOUND_MICROS_PER_PAIR * cost.pairs if cheap else 0.0)
    ) * 1e-6
    assert cost.bound_s == pytest.approx(expected)


def dispatch(limits: list[float], workers: int) -> float:
    """When the last pool ends, pools taken heaviest first by whichever worker is free."""
    free = [0.0] * workers
    for limit in sorted(limits, reverse=True):
        heapq.heappush(free, heapq.heappop(free) + limit)
    return max(free)


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_pool_limits_share_the_wall_in_proportion_to_the_work(workers: int) -> None:
    costs = [0.9, 0.05, 0.3, 0.3, 0.2, 0.001, 0.6]
    limits = pool_limits(costs, 12.0, workers)
    # Each pool takes its limit and the overhead; the last ends at the wall.
    assert dispatch([limit + POOL_OVERHEAD_S for limit in limits], workers) <= 12.0 + 1e-9
    assert dispatch([limit + POOL_OVERHEAD_S for limit in limits], workers) >= 11.5
    floor = MIN_POOL_WEIGHT * sum(costs) / len(costs)
    weights = [max(cost, floor) for cost in costs]
    ratios = [limit / weight for limit, weight in zip(limits, weights, strict=True)]
    assert max(ratios) == pytest.approx(min(ratios))  # proportional to the (floored) work
    assert floor > costs[1] > costs[5]
    assert limits[5] == pytest.approx(limits[1])  # the smallest get the floor
    assert limits[1] < limits[4] < limits[2]


def test_pool_limits_of_no_pools_and_of_equal_pools() -> None:
    assert pool_limits([], 5.0, 2) == []
    assert pool_limits([0.1] * 4, 4.0, 2) == pytest.approx([2.0 - POOL_OVERHEAD_S] * 4)
    assert pool_limits([0.0, 0.0], 1.0, 2) == pytest.approx([1.0 - POOL_OVERHEAD_S] * 2)
    assert pool_limits([0.1] * 40, 0.5, 2) == [0.0] * 40  # no time left past the overheads
