"""Large rounds split into pools: the merged decision is valid for the whole cluster."""

from __future__ import annotations

from dataclasses import replace

import pytest

from whale_opt.check import check
from whale_opt.decompose import pools, solve_split
from whale_opt.generate import generate
from whale_opt.problem_data import Tenant
from whale_opt.solve import solve


@pytest.mark.parametrize("family", ["hetero", "dgx1", "fragmented"])
def test_split_decision_passes_the_checker(family: str) -> None:
    instance = generate(family, gpus=256, queued=80, seed=4, time_limit_s=2.0)
    decision = solve_split(instance, "wspt", max_gpus=64, workers=1)
    assert check(instance, decision) == []
    assert {item.id for item in decision.jobs} == {
        job.id for job in (*instance.queue, *instance.running)
    }


def test_pools_hold_whole_racks_of_one_type_and_each_job_once() -> None:
    instance = generate("hetero", gpus=512, queued=120, seed=1)
    parts = pools(instance, max_gpus=64)
    seen_nodes = [k for pool in parts for k in pool.nodes]
    assert sorted(seen_nodes) == list(range(len(instance.nodes)))
    for pool in parts:
        assert len({instance.nodes[k].gpu_type for k in pool.nodes}) == 1
        racks = {instance.nodes[k].rack for k in pool.nodes}
        gpu_type = instance.nodes[pool.nodes[0]].gpu_type
        members = [
            k
            for k, node in enumerate(instance.nodes)
            if node.rack in racks and node.gpu_type == gpu_type
        ]
        assert sorted(members) == sorted(pool.nodes)  # racks are never cut
    jobs = [k for pool in parts for k in pool.jobs]
    assert len(jobs) == len(set(jobs))


def test_a_tight_quota_spanning_pools_holds_after_the_merge() -> None:
    instance = generate("hetero", gpus=256, queued=80, seed=2, time_limit_s=2.0)
    tenants = dict(instance.tenants)
    tenants["nlp"] = Tenant("nlp", gpu_quota=12)
    instance = instance.replace(tenants=tenants)
    decision = solve_split(instance, "wspt", max_gpus=64, workers=1)
    assert check(instance, decision) == []


def test_solve_splits_past_the_threshold_with_worker_processes() -> None:
    instance = generate("hetero", gpus=256, queued=60, seed=3, time_limit_s=4.0)
    instance = instance.replace(policy=replace(instance.policy, time_limit_s=4.0))
    decision = solve(instance, "cpsat", split_above_gpus=128)
    assert check(instance, decision) == []
