"""Metrics on a hand-made 3-job case whose schedule is known, and Jain's index."""

from __future__ import annotations

import pytest

from whale_opt.problem_data import GpuType, Instance, Node
from whale_opt.sim import SimConfig, TraceJob, jain_index, simulate


def one_node() -> Instance:
    return Instance(
        name="one-node",
        gpu_types={"A100": GpuType("A100", 80, 1.0)},
        nodes=(Node("n1", "A100", 8, "nvswitch"),),
    )


def test_three_jobs_known_schedule() -> None:
    # WSPT: b (ratio 2/400) runs 0-50; c arrives at 10 and outranks a, runs 50-80;
    # a (8 GPUs) waits for the whole node: 80-180.
    trace = (
        TraceJob("a", 0, 8, duration_s=100, tenant="x"),
        TraceJob("b", 0, 8, duration_s=50, weight=2, tenant="x"),
        TraceJob("c", 10, 4, duration_s=30, tenant="y"),
    )
    result = simulate(trace, one_node(), SimConfig(check_decisions=True))
    jobs = result.jobs.set_index("id")
    assert jobs["first_start_s"].to_dict() == {"a": 80, "b": 0, "c": 50}
    assert jobs["jct_s"].to_dict() == {"a": 180, "b": 50, "c": 70}
    s = result.summary
    assert s["completed"] == 3
    assert s["avg_jct_s"] == pytest.approx(100)
    assert s["weighted_jct_s"] == pytest.approx((180 + 2 * 50 + 70) / 4)
    assert s["queue_delay_s_p50"] == pytest.approx(40)
    assert s["makespan_s"] == 180
    assert s["gpu_utilisation"] == pytest.approx((8 * 50 + 4 * 30 + 8 * 100) / (8 * 180))
    x, y = (1.0 + 1.8) / 2, 70 / 30  # mean slowdown per tenant
    assert s["jain_tenants"] == pytest.approx((x + y) ** 2 / (2 * (x * x + y * y)))
    assert s["finish_time_fairness"] == pytest.approx(y)
    assert s["preemptions"] == 0 and s["failure_requeues"] == 0
    # While c runs (50-80), 4 GPUs are free but a needs 8: fragmented.
    during = result.rounds.set_index("time_s").loc[50]
    assert (during["free_gpus"], during["fragmented_gpus"]) == (4, 4)


def test_jain_index() -> None:
    assert jain_index([2.0, 2.0, 2.0]) == pytest.approx(1.0)
    assert jain_index([1.0, 0.0, 0.0]) == pytest.approx(1 / 3)
    assert jain_index([]) == 1.0
