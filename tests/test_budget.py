"""The round cost model: the list schedule's and the bound's expected time, and pool shares."""

from __future__ import annotations

import heapq

import pytest

from whale_opt.bounds import CHEAP_ABOVE, shape_key
from whale_opt.budget import (
    BOUND_MICROS_PER_JOB_TYPE,
    BOUND_MICROS_PER_SHAPE_NODE,
    MIN_POOL_WEIGHT,
    POOL_OVERHEAD_S,
    _pairs,
    greedy_seconds,
    head_size,
    pool_limits,
    round_cost,
)
from whale_opt.generate import generate
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
    pairs = _pairs(instance)
    nodes = len(instance.nodes)
    assert greedy_seconds(head, sum(pairs[k] for k in order[:head]), nodes) <= budget
    assert greedy_seconds(head + 1, sum(pairs[k] for k in order[: head + 1]), nodes) > budget
    assert head_size(instance, order, 1e9) == len(order)
    assert head_size(instance, order, 0.0) == 1


def test_the_bound_searches_once_per_shape_past_the_cheap_threshold() -> None:
    instance = generate("hetero", gpus=10_000, queued=400, seed=1)
    assert len(instance.queue) * len(instance.nodes) > CHEAP_ABOVE
    types = len({node.gpu_type for node in instance.nodes})
    searches = len(
        {
            (shape_key(job), gpu_type)
            for k, job in enumerate(instance.queue)
            for gpu_type in instance.durations[k]
        }
    )
    pairs = sum(len(instance.durations[k]) for k in range(len(instance.queue)))
    assert searches < pairs  # jobs alike share a search
    expected = (
        BOUND_MICROS_PER_JOB_TYPE * len(instance.queue) * types
        + BOUND_MICROS_PER_SHAPE_NODE * searches * len(instance.nodes)
    ) * 1e-6
    assert round_cost(instance).bound_s == pytest.approx(expected)


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
