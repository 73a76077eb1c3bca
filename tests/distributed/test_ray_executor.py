"""The Ray executor on a local three-node Ray cluster: the same decisions as local processes."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor

import pytest

from whale_opt.check import check
from whale_opt.executors import RayExecutor, make_executor
from whale_opt.generate import generate
from whale_opt.options import SolveOptions
from whale_opt.solve import solve

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


def test_unknown_executor_names_the_choices() -> None:
    assert make_executor("local") is None
    with pytest.raises(ValueError, match="local, ray"):
        make_executor("spark")
