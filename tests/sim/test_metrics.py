"""Metrics on a hand-made 3-job case whose schedule is known, and Jain's index."""

from __future__ import annotations

import pytest

from whale_opt.problem_data import GpuType, Instance, Node, Policy, Tenant
from whale_opt.sim import SimConfig, TraceJob, jain_index, simulate
from whale_opt.sim.metrics import summary_table


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


def test_a_preemption_costs_the_work_since_the_checkpoint_and_a_restore() -> None:
    # Best-effort b runs from 0; training t arrives at 1000 and the greedy preempts b:
    # b checkpointed at 300, 600 and 900, so 100 s are lost; t runs 1000-1600; b restarts
    # at 1600, restores for 100 s and does its 3600 - 900 s left: it ends at 4400.
    trace = (
        TraceJob("b", 0, 8, duration_s=3600, priority_class="best-effort", checkpoint_s=100),
        TraceJob("t", 1000, 8, duration_s=600, tenant="y"),
    )
    cluster = one_node().replace(policy=Policy(allow_preemption=True))
    config = SimConfig(checkpoint_interval_s=300, check_decisions=True)
    result = simulate(trace, cluster, config)
    jobs = result.jobs.set_index("id")
    assert jobs["first_start_s"].to_dict() == {"b": 0, "t": 1000}
    assert jobs["end_s"].to_dict() == {"b": 4400, "t": 1600}
    segments = result.segments.set_index(["job", "outcome"])
    assert segments.loc[("b", "preempted"), ["useful_s", "lost_s", "overhead_s"]].tolist() == [
        900,
        100,
        0,
    ]
    restarted = segments.loc[("b", "completed")]
    assert (restarted["restore_s"], restarted["overhead_s"], restarted["useful_s"]) == (
        100,
        100,
        2700,
    )
    assert restarted["restored_after"] == "preempted"
    s = result.summary
    assert s["preemptions"] == 1 and s["lost_jobs"] == 0
    assert s["lost_gpu_hours_preemption"] == pytest.approx(8 * (100 + 100) / 3600)
    assert s["lost_gpu_hours_failure"] == 0
    assert jobs.loc["b", "lost_preempted_s"] == 200


def test_figures_per_class_and_tenant() -> None:
    trace = (
        TraceJob("a", 0, 8, duration_s=100, tenant="x"),
        TraceJob("b", 0, 8, duration_s=50, weight=2, tenant="x", priority_class="online"),
        TraceJob("c", 10, 4, duration_s=30, tenant="y", priority_class="best-effort"),
        TraceJob("late", 10_000, 1, duration_s=30, tenant="y"),
    )
    cluster = one_node().replace(tenants={"x": Tenant("x", guaranteed_gpus=4)})
    result = simulate(trace, cluster, SimConfig(check_decisions=True, end_s=200))
    groups = result.groups
    # Classes by rank: online b runs 0-50, training a 50-150 on all 8 GPUs, best-effort c
    # (arrived at 10) 150-180; "late" arrives after the run's end (200): pending.
    assert groups.loc["class:online", "jct_mean_s"] == 50
    assert groups.loc["class:training", "jct_mean_s"] == 150
    assert groups.loc["class:best-effort", "max_queue_delay_s"] == 140  # c starts at 150
    assert groups.loc["tenant:x", "gpu_hours"] == pytest.approx(8 * 150 / 3600)
    assert groups.loc["tenant:x", "share_vs_guarantee"] == pytest.approx(8 * 150 / 180 / 4)
    assert groups.loc["tenant:x", "guarantee_shortfall_gpu_h"] == 0
    s = result.summary
    assert (s["completed"], s["running_at_end"], s["pending_at_end"], s["lost_jobs"]) == (
        3,
        0,
        1,
        0,
    )
    assert s["jct_mean_s[class:online]"] == 50
    table = summary_table([result])
    assert "by priority class and tenant" in table and "tenant:y" in table
