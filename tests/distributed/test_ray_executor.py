"""The Ray executor on a local three-node Ray cluster: the same decisions as local
processes, a worker killed mid-round costs only its own pool, and a pool given up at
the deadline is cancelled with its task."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from concurrent.futures import Executor, ProcessPoolExecutor
from functools import partial

import pytest

from whale_opt.check import check
from whale_opt.decision import Decision, Status
from whale_opt.decompose import pools, solve_split
from whale_opt.executors import LocalExecutor, RayExecutor, make_executor
from whale_opt.generate import generate
from whale_opt.options import SolveOptions
from whale_opt.problem_data import Instance, Tenant
from whale_opt.solve import solve, solve_one_pool

ray = pytest.importorskip("ray")
cluster_utils = pytest.importorskip("ray.cluster_utils")

# A deterministic preset and room enough that no wall-clock limit cuts a pool short.
OPTIONS = SolveOptions(time_limit_s=60.0, preset="deterministic")


@pytest.fixture(scope="module")
def executor() -> Iterator[RayExecutor]:
    cluster = cluster_utils.Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    for _ in range(2):
        cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    pool = RayExecutor(address=cluster.address)
    try:
        yield pool
    finally:
        ray.shutdown()
        cluster.shutdown()


def test_the_cluster_has_three_workers(executor: RayExecutor) -> None:
    assert executor.workers == 3
    assert len([n for n in ray.nodes() if n["Alive"]]) == 3


def test_pools_solved_on_ray_decide_as_local_processes(executor: RayExecutor) -> None:
    instance = generate("hetero", gpus=512, queued=60, seed=3)
    on_ray = solve(instance, "cpsat", OPTIONS, split_above_gpus=128, executor=executor)
    with ProcessPoolExecutor(executor.workers) as local:
        here = solve(instance, "cpsat", OPTIONS, split_above_gpus=128, executor=local)
    assert check(instance, on_ray) == []
    assert on_ray.jobs == here.jobs
    assert on_ray.objective == here.objective


def test_a_sweep_fans_out_over_the_same_executor(executor: RayExecutor) -> None:
    seeds = [1, 2, 3, 4]
    instances = [generate("mixed", gpus=32, queued=8, seed=s) for s in seeds]
    decided = list(executor.map(solve, instances, ["wspt"] * len(instances)))
    for instance, decision in zip(instances, decided, strict=True):
        assert check(instance, decision) == []
        assert decision.jobs == solve(instance, "wspt").jobs


DOOMED = "h100-0000"  # the first node of the busiest pool at 128 GPUs a pool


def doomed_pool(fate: str, instance: Instance, options: SolveOptions) -> Decision:
    """A pool solve (fifo) that, when it holds DOOMED, kills its own worker process
    (``fate`` "die") or never answers in time ("hang")."""
    if any(node.id == DOOMED for node in instance.nodes):
        if fate == "die":
            os._exit(1)
        time.sleep(600)
    return solve_one_pool(instance, options, solver="fifo")


def _split(fate: str, options: SolveOptions, executor: Executor) -> tuple[Instance, Decision]:
    """A 512-GPU round split into 128-GPU pools on ``executor``, DOOMED's pool doomed."""
    # Ray workers cannot import this test module: ship the pool solve by value.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    instance = generate("hetero", gpus=512, queued=60, seed=3)
    instance = instance.replace(tenants={name: Tenant(name) for name in instance.tenants})
    solve_pool = partial(doomed_pool, fate)
    decision = solve_split(
        instance, solve_pool, "fifo", options, max_gpus=128, executor=executor, workers=3
    )
    return instance, decision


def test_a_ray_worker_killed_mid_round_costs_only_its_pool(executor: RayExecutor) -> None:
    options = SolveOptions(time_limit_s=30.0)
    instance, on_ray = _split("die", options, executor)
    with LocalExecutor(3) as local:
        _, here = _split("die", options, local)
    (doomed,) = [
        k for k, p in enumerate(pools(instance, 128)) if instance.nodes[p.nodes[0]].id == DOOMED
    ]
    assert check(instance, on_ray) == []
    assert on_ray.wall_s < options.time_limit_s
    assert on_ray.status is Status.GREEDY_FALLBACK
    assert on_ray.stats["pools_fallback"] == 1 and f"fallback_pool_{doomed}" in on_ray.stats
    assert on_ray.jobs == here.jobs


def test_a_pool_given_up_at_the_deadline_stops_taking_a_cpu(executor: RayExecutor) -> None:
    instance, decision = _split("hang", SolveOptions(time_limit_s=3.0), executor)
    assert check(instance, decision) == []
    assert decision.stats["pools_fallback"] == 1
    # The hung task was cancelled with its worker: all three CPUs are free again.
    deadline = time.monotonic() + 30
    while ray.available_resources().get("CPU", 0) < 3 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert ray.available_resources().get("CPU", 0) == 3


def test_unknown_executor_names_the_choices() -> None:
    assert make_executor("local") is None
    with pytest.raises(ValueError, match="local, ray"):
        make_executor("spark")
