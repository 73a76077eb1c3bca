"""The simulator's invariants, on runs with failures, noise and every decision checked.

No job lost or run twice; no GPU held by two jobs at once; no job on failed
hardware; every completed job ran its full actual duration (net of what
preemptions saved and failures lost); the same seed gives the same run.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from whale_opt.decision import Action, JobDecision, objective
from whale_opt.policies import REGISTRY, get_policy
from whale_opt.problem_data import Instance
from whale_opt.sim import Outage, SimConfig, SimResult, TraceJob, simulate, synthetic_trace

CHECKPOINT = 1800


def with_actuals(trace: tuple[TraceJob, ...], seed: int) -> tuple[TraceJob, ...]:
    """The trace with explicit actual durations, so tests know the truth independently."""
    rng = np.random.default_rng(seed)
    return tuple(
        replace(job, actual_duration_s=max(1, int((job.duration_s or 1) * rng.lognormal(0, 0.4))))
        for job in trace
    )


def full_run_s(job: TraceJob, cluster: Instance, gpu_type: str) -> float:
    assert job.actual_duration_s is not None
    return job.actual_duration_s / cluster.gpu_types[gpu_type].speed


def assert_invariants(result: SimResult, trace: tuple[TraceJob, ...], cluster: Instance) -> None:
    jobs, segments = result.jobs, result.segments
    # No job lost: every trace job once, completed; none run twice.
    assert sorted(jobs["id"]) == sorted(job.id for job in trace)
    assert (jobs["status"] == "completed").all(), jobs[jobs["status"] != "completed"]
    by_job = segments.sort_values(["job", "start_s"]).groupby("job")
    for job_id, attempts in by_job:
        assert (attempts["outcome"] == "completed").sum() == 1, job_id
        assert attempts["outcome"].iloc[-1] == "completed", job_id
        assert (attempts["start_s"].to_numpy()[1:] >= attempts["end_s"].to_numpy()[:-1]).all()
    # Every GPU held by at most one job at any time.
    held = segments.explode("gpus").sort_values(["gpus", "start_s", "end_s"])
    for gpu, uses in held.groupby("gpus"):
        starts, ends = uses["start_s"].to_numpy(), uses["end_s"].to_numpy()
        assert (starts[1:] >= ends[:-1]).all(), f"GPU {gpu} held twice"
    # Every completed job did all of its actual work.
    spec = {job.id: job for job in trace}
    for job_id, attempts in by_job:
        done = 0.0
        for row in attempts.itertuples():
            span = row.end_s - row.start_s
            full = full_run_s(spec[job_id], cluster, row.gpu_type)
            assert row.full_s == pytest.approx(full)
            if row.outcome == "failed":  # work since the last checkpoint is lost
                assert row.useful_s == span // CHECKPOINT * CHECKPOINT
            else:
                assert row.useful_s == span
            done += row.useful_s / full
        slack = len(attempts) / min(full_run_s(spec[job_id], cluster, t) for t in cluster.gpu_types)
        assert 1 - 1e-9 <= done <= 1 + slack + 1e-9, job_id


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


class PreemptLongRunners:
    """Test policy: WSPT, and preempt every cv job that ran an hour this attempt."""

    name = "preempt-test"

    def decide(self, instance: Instance):  # type: ignore[no-untyped-def]
        decision = get_policy("wspt").decide(instance)
        victims = {
            job.id for job in instance.running if job.tenant == "cv" and job.started_at <= -3600
        }
        jobs = tuple(
            JobDecision(item.id, Action.PREEMPT) if item.id in victims else item
            for item in decision.jobs
        )
        return decision.with_changes(jobs=jobs, objective=objective(instance, jobs))


def test_preempted_jobs_resume_where_they_stopped(
    monkeypatch: pytest.MonkeyPatch, cluster: Instance, trace: tuple[TraceJob, ...]
) -> None:
    monkeypatch.setitem(REGISTRY, "preempt-test", PreemptLongRunners)
    preemptive = cluster.replace(policy=replace(cluster.policy, allow_preemption=True))
    config = SimConfig(
        policy="preempt-test",
        round_period_s=600,
        checkpoint_interval_s=CHECKPOINT,
        # This stub preempts with no job to start in the victim's place, which the
        # checker's preemption rules refuse; it exists to exercise resumption only.
        check_decisions=False,
    )
    result = simulate(trace[:50], preemptive, config)
    assert result.summary["preemptions"] > 0
    assert_invariants(result, trace[:50], preemptive)


def test_cpsat_rounds_are_valid(cluster: Instance) -> None:
    trace = with_actuals(synthetic_trace(8, cluster, load=1.0, seed=4), seed=4)
    config = SimConfig(
        policy="cpsat",
        time_limit_s=0.2,
        round_period_s=None,
        round_batch_s=1800,
        checkpoint_interval_s=CHECKPOINT,
        check_decisions=True,
    )
    result = simulate(trace, cluster, config)
    assert_invariants(result, trace, cluster)
    assert result.summary["solver_wall_s_max"] < 1.5
