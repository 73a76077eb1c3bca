"""The simulator's invariants, on runs with failures, noise and every decision checked.

No job lost or run twice; no GPU held by two jobs at once; no job on failed
hardware; every completed job ran its full actual duration (net of what
preemptions and failures lost since the last checkpoint, after the restore
each restart pays); the same seed gives the same run.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

from whale_opt.decision import Action, Decision
from whale_opt.problem_data import Instance
from whale_opt.scheduler import Scheduler
from whale_opt.sim import Outage, SimConfig, SimResult, TraceJob, simulate, synthetic_trace

from .invariants import CHECKPOINT, assert_invariants, with_actuals


@pytest.fixture(scope="module")
def trace(cluster: Instance) -> tuple[TraceJob, ...]:
    return with_actuals(synthetic_trace(150, cluster, load=0.9, seed=3), seed=3)


@pytest.fixture(scope="module")
def failing_run(cluster: Instance, trace: tuple[TraceJob, ...]) -> SimResult:
    config = SimConfig(
        seed=5,
        mtbf_node_s=4 * 86_400,
        repair_s=7200,
        checkpoint_interval_s=CHECKPOINT,
        check_decisions=True,
    )
    return simulate(trace, cluster, config)


def test_invariants_hold_with_failures(
    failing_run: SimResult, trace: tuple[TraceJob, ...], cluster: Instance
) -> None:
    assert failing_run.summary["failure_requeues"] > 0  # the failure path was exercised
    assert (failing_run.segments["outcome"] == "failed").any()
    assert_invariants(failing_run, trace, cluster)


def test_no_job_runs_on_failed_hardware(cluster: Instance, trace: tuple[TraceJob, ...]) -> None:
    outages = (Outage("a01", 20_000, 30_000), Outage("v01", 40_000, 5_000, gpu=3))
    config = SimConfig(outages=outages, checkpoint_interval_s=CHECKPOINT, check_decisions=True)
    result = simulate(trace[:60], cluster, config)
    assert_invariants(result, trace[:60], cluster)
    for outage in outages:
        down, up = outage.at_s, outage.at_s + outage.repair_s
        prefix = f"{outage.node}/" if outage.gpu is None else f"{outage.node}/{outage.gpu}"
        on = result.segments[
            result.segments["gpus"].map(lambda gpus, p=prefix: any(g.startswith(p) for g in gpus))
        ]
        overlapping = on[(on["start_s"] < up) & (on["end_s"] > down)]
        # Only attempts cut at the failure itself touch the outage window.
        assert (overlapping["start_s"] < down).all()
        assert (overlapping["end_s"] == down).all()
        assert (overlapping["outcome"] == "failed").all()


def test_same_seed_same_run(cluster: Instance) -> None:
    trace = synthetic_trace(80, cluster, load=0.9, seed=11)
    config = SimConfig(seed=2, duration_noise_sigma=0.5, mtbf_node_s=3 * 86_400)
    first, second = simulate(trace, cluster, config), simulate(trace, cluster, config)
    pd.testing.assert_frame_equal(first.jobs, second.jobs)
    pd.testing.assert_frame_equal(first.segments, second.segments)
    other = simulate(trace, cluster, replace(config, seed=3))
    assert not first.jobs["end_s"].equals(other.jobs["end_s"])


def best_effort_cv(trace: tuple[TraceJob, ...]) -> tuple[TraceJob, ...]:
    """The trace with tenant cv's jobs best-effort (120 s restores), the rest training."""
    return tuple(
        replace(job, priority_class="best-effort", checkpoint_s=120) if job.tenant == "cv" else job
        for job in trace
    )


def test_wspt_preempts_best_effort_for_training_and_jobs_resume(
    monkeypatch: pytest.MonkeyPatch, cluster: Instance, trace: tuple[TraceJob, ...]
) -> None:
    """The real greedy under ``allow_preemption``: best-effort jobs hold GPUs when
    training jobs arrive; every preemption passes the checker's rules, costs what
    the round priced it at, and the preempted jobs resume from their last
    checkpoint after a restore."""
    priced: dict[tuple[str, int], int] = {}  # (victim, round time) -> priced lost seconds
    propose = Scheduler.propose

    def recording(self: Scheduler, now: int, instance: Instance | None = None) -> Decision:
        decision = propose(self, now, instance)
        assert instance is not None
        for item in decision.by_action(Action.PREEMPT):
            held = next(job for job in instance.running if job.id == item.id)
            priced[(item.id, now)] = held.lost_on_preempt_s
        return decision

    monkeypatch.setattr(Scheduler, "propose", recording)
    jobs = best_effort_cv(trace[:50])
    preemptive = cluster.replace(policy=replace(cluster.policy, allow_preemption=True))
    config = SimConfig(
        policy="wspt", round_period_s=600, checkpoint_interval_s=CHECKPOINT, check_decisions=True
    )
    result = simulate(jobs, preemptive, config)
    assert result.summary["preemptions"] > 0
    preempted = result.segments[result.segments["outcome"] == "preempted"]
    classes = {job.id: job.priority_class for job in jobs}
    assert {classes[job_id] for job_id in preempted["job"]} == {"best-effort"}
    assert result.summary["lost_gpu_hours_preemption"] > 0
    # The simulator loses exactly the work since the last checkpoint the round priced.
    lost = {(row.job, row.end_s): row.lost_s for row in preempted.itertuples()}
    assert lost == priced
    assert_invariants(result, jobs, preemptive)


@pytest.mark.parametrize("carry_plan", [False, True])  # rounds made fresh, or from the last plan
def test_cpsat_rounds_are_valid(cluster: Instance, carry_plan: bool) -> None:
    trace = with_actuals(synthetic_trace(8, cluster, load=1.0, seed=4), seed=4)
    config = SimConfig(
        policy="cpsat",
        time_limit_s=0.2,
        round_period_s=None,
        round_batch_s=1800,
        checkpoint_interval_s=CHECKPOINT,
        check_decisions=True,
        carry_plan=carry_plan,
    )
    result = simulate(trace, cluster, config)
    assert_invariants(result, trace, cluster)
    assert result.summary["solver_wall_s_max"] < 1.5
