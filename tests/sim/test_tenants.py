"""Tenants, guarantees, classes, drains: the multi-tenant trace, no job lost under
failures and preemption, guarantees reclaimed from borrowers, drains honoured."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from whale_opt.problem_data import GpuType, Instance, Node, Policy, Tenant
from whale_opt.sim import Outage, SimConfig, SimResult, TraceJob, simulate
from whale_opt.sim.synthetic import tenant_cluster, tenant_trace

from .invariants import CHECKPOINT, assert_invariants, with_actuals


@pytest.fixture(scope="module")
def shared() -> Instance:
    """~52 healthy GPUs of five types, three tenants guaranteed 13 GPUs each."""
    return tenant_cluster(64, seed=1)


def test_tenant_trace_is_seeded_and_mixes_tenants_classes_and_preferences(
    shared: Instance,
) -> None:
    trace = tenant_trace(120, shared, seed=4, burst_s=4 * 3600)
    assert trace == tenant_trace(120, shared, seed=4, burst_s=4 * 3600)
    assert trace != tenant_trace(120, shared, seed=5, burst_s=4 * 3600)
    assert [job.submit_s for job in trace] == sorted(job.submit_s for job in trace)
    assert set(Counter(job.tenant for job in trace)) == set(shared.tenants)
    assert set(Counter(job.priority_class for job in trace)) == {
        "online",
        "training",
        "best-effort",
    }
    for job in trace:  # restores only where a preemption can happen
        preemptible = shared.priority_classes[job.priority_class].preemptible
        assert job.checkpoint_s == (120 if preemptible else 0)
    assert any(job.preferred_gpu_types for job in trace)
    skewed = tenant_trace(120, shared, seed=4, tenant_load={"nlp": 3, "cv": 1})
    counts = Counter(job.tenant for job in skewed)
    assert set(counts) == {"nlp", "cv"} and counts["nlp"] > 2 * counts["cv"]


def test_no_job_lost_under_failures_drains_and_preemption(shared: Instance) -> None:
    trace = with_actuals(tenant_trace(60, shared, load=1.2, seed=2, burst_s=4 * 3600), seed=2)
    drains = (Outage("h100-0000", 3_000, 20_000, kind="drain"), Outage("a100-0001", 0, 9_000))
    config = SimConfig(
        seed=3,
        mtbf_node_s=2 * 86_400,
        repair_s=3_600,
        outages=drains,
        checkpoint_interval_s=CHECKPOINT,
        check_decisions=True,
    )
    result = simulate(trace, shared, config)
    summary = result.summary
    assert summary["preemptions"] > 0 and summary["failure_requeues"] > 0
    assert summary["lost_jobs"] == 0 and summary["completed"] == len(trace)
    assert summary["lost_gpu_hours_preemption"] > 0 and summary["lost_gpu_hours_failure"] > 0
    assert_invariants(result, trace, shared)
    # Nothing new started on the draining node while it drained.
    segments = result.segments
    on_node = segments["gpus"].map(lambda gpus: gpus[0].startswith("h100-0000/"))
    during = (segments["start_s"] >= 3_000) & (segments["start_s"] < 23_000)
    assert not (on_node & during).any()
    # The per-tenant and per-class figures cover every job once.
    groups = result.groups
    tenants = groups[groups.index.str.startswith("tenant:")]
    classes = groups[groups.index.str.startswith("class:")]
    assert tenants["jobs"].sum() == classes["jobs"].sum() == len(trace)
    assert tenants["gpu_hours"].sum() == pytest.approx(classes["gpu_hours"].sum())
    assert (tenants["guaranteed_gpus"] == 13).all()
    assert "share_vs_guarantee[tenant:nlp]" in summary


def two_nodes(allow_preemption: bool) -> Instance:
    """16 GPUs; tenants a and b are each guaranteed 8."""
    return Instance(
        name="two-nodes",
        gpu_types={"A100": GpuType("A100", 80, 1.0)},
        nodes=(Node("n1", "A100", 8, "nvswitch"), Node("n2", "A100", 8, "nvswitch")),
        tenants={"a": Tenant("a", guaranteed_gpus=8), "b": Tenant("b", guaranteed_gpus=8)},
        policy=Policy(allow_preemption=allow_preemption),
    )


def reclaim_run(allow_preemption: bool) -> SimResult:
    # b borrows a's share with two long jobs; a, of the same class, claims it at 1000.
    trace = (
        TraceJob("b1", 0, 8, duration_s=10_000, tenant="b", checkpoint_s=120),
        TraceJob("b2", 0, 8, duration_s=10_000, tenant="b", checkpoint_s=120),
        TraceJob("a1", 1_000, 8, duration_s=3_600, tenant="a"),
    )
    config = SimConfig(checkpoint_interval_s=CHECKPOINT, check_decisions=True)
    return simulate(trace, two_nodes(allow_preemption), config)


def test_a_tenant_below_its_guarantee_reclaims_gpus_from_a_borrower() -> None:
    result = reclaim_run(allow_preemption=True)
    jobs = result.jobs.set_index("id")
    assert jobs.loc["a1", "first_start_s"] == 1_000  # at once, on b's borrowed GPUs
    assert result.summary["preemptions"] == 1
    (victim,) = jobs.index[jobs["preemptions"] == 1]
    assert victim in ("b1", "b2")
    # b's job lost its 1000 s since the start (no checkpoint yet) and paid a 120 s restore.
    assert jobs.loc[victim, "lost_preempted_s"] == 1_000 + 120
    assert jobs.loc[victim, "end_s"] == 1_000 + 3_600 + 120 + 10_000
    assert result.summary["lost_gpu_hours_preemption"] == pytest.approx(8 * 1_120 / 3_600)
    assert result.summary["guarantee_shortfall_gpu_h[tenant:a]"] == 0
    assert result.summary["lost_jobs"] == 0
    # Without preemption a waits for b's first job to end, owed its 8 GPUs all along.
    waiting = reclaim_run(allow_preemption=False)
    assert waiting.jobs.set_index("id").loc["a1", "first_start_s"] == 10_000
    assert waiting.summary["guarantee_shortfall_gpu_h[tenant:a]"] == pytest.approx(
        8 * 9_000 / 3_600
    )


def test_a_draining_node_keeps_its_jobs_and_takes_new_work_only_after() -> None:
    cluster = replace(two_nodes(False), tenants={})
    trace = (
        TraceJob("first", 0, 8, duration_s=500),
        TraceJob("second", 200, 8, duration_s=5_000),
        TraceJob("third", 300, 8, duration_s=100),
    )
    # first holds a node (n1 or n2); drain that one from 100 to 1100.
    probe = simulate(trace[:1], cluster, SimConfig(check_decisions=True))
    node = probe.segments["gpus"].iloc[0][0].rpartition("/")[0]
    config = SimConfig(outages=(Outage(node, 100, 1_000, kind="drain"),), check_decisions=True)
    result = simulate(trace, cluster, config)
    jobs = result.jobs.set_index("id")
    assert (jobs.loc["first", "end_s"], jobs.loc["first", "failures"]) == (500, 0)  # kept running
    assert jobs.loc["second", "first_start_s"] == 200  # on the other node
    assert jobs.loc["third", "first_start_s"] == 1_100  # the drained node, once the drain ends
    assert result.summary["lost_jobs"] == 0
