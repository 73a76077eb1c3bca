"""What every simulated run must satisfy, checked on its tables (shared by the tests).

No job lost or run twice; no GPU held by two jobs at once; every completed
job ran its full actual duration, interruptions losing only the computing
since the last checkpoint and every restart paying its restore; what was
lost adds up by cause.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from whale_opt.problem_data import Instance
from whale_opt.sim import SimResult, TraceJob

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
    if job.gpus == 0:
        return job.actual_duration_s  # CPU-only: as long on any node
    return job.actual_duration_s / cluster.gpu_types[gpu_type].speed


def kept_s(computing: int) -> int:
    """Computing an interrupted attempt keeps: up to its last checkpoint."""
    return computing // CHECKPOINT * CHECKPOINT if computing >= CHECKPOINT else 0


def assert_invariants(result: SimResult, trace: tuple[TraceJob, ...], cluster: Instance) -> None:
    jobs, segments = result.jobs, result.segments
    # No job lost: every trace job once, completed; none run twice.
    assert sorted(jobs["id"]) == sorted(job.id for job in trace)
    assert (jobs["status"] == "completed").all(), jobs[jobs["status"] != "completed"]
    assert result.summary["lost_jobs"] == 0
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
    # Every completed job did all of its actual work; interruptions lost only the
    # computing since the last checkpoint, and every restart paid its restore.
    spec = {job.id: job for job in trace}
    for job_id, attempts in by_job:
        done = 0.0
        for number, row in enumerate(attempts.itertuples()):
            span = row.end_s - row.start_s
            full = full_run_s(spec[job_id], cluster, row.gpu_type)
            assert row.full_s == pytest.approx(full)
            restore = 0 if number == 0 else spec[job_id].checkpoint_s
            assert row.restore_s == min(restore, span)
            if restore:  # charged to the interruption that ended the attempt before
                assert row.restored_after == attempts["outcome"].iloc[number - 1]
            if row.outcome in ("failed", "preempted"):
                assert row.useful_s == kept_s(span - restore)
            else:
                assert row.useful_s == span - restore
            assert row.useful_s + row.overhead_s + row.lost_s == span
            done += row.useful_s / full
        slack = len(attempts) / min(full_run_s(spec[job_id], cluster, t) for t in cluster.gpu_types)
        assert 1 - 1e-9 <= done <= 1 + slack + 1e-9, job_id
    # What was lost, by cause, adds up over jobs and over attempts.
    lost = (segments["lost_s"] + segments["overhead_s"]) * segments["gpus"].map(len)
    assert result.summary["lost_gpu_hours"] == pytest.approx(lost.sum() / 3600)
    assert result.summary["lost_gpu_hours"] == pytest.approx(
        result.summary["lost_gpu_hours_preemption"] + result.summary["lost_gpu_hours_failure"]
    )
