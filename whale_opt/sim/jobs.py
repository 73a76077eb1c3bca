"""What the simulator knows of each job that the scheduler does not: actual durations.

A job's *ratio* is actual / estimated duration: from the trace when it gives
both, else a seeded log-normal draw (``SimConfig.duration_noise_sigma``) that
derives the missing one. On a GPU type of speed *s* a job runs
``actual / s`` seconds from scratch (``ratio x duration_by_type_s`` where the
trace gives per-type estimates).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from whale_opt.problem_data import Instance
from whale_opt.sim.config import SimConfig
from whale_opt.sim.trace import TraceJob


@dataclass
class JobRun:
    """What the simulator knows of one trace job (the scheduler knows less)."""

    trace: TraceJob
    estimate_s: int | None  # seconds at speed 1.0, as the scheduler sees them
    ratio: float  # actual / estimated duration
    remaining: float = 1.0  # fraction of the job's work still to do
    attempt: int = 0
    started_at: int | None = None
    run_s: int = 0  # actual run time of the current attempt
    gpus: tuple[str, ...] = ()
    gpu_type: str = ""
    first_start: int | None = None
    end: int | None = None
    preemptions: int = 0
    failures: int = 0
    lost_s: int = 0


def job_runs(
    trace: tuple[TraceJob, ...], cluster: Instance, config: SimConfig
) -> dict[str, JobRun]:
    """Per trace job: its estimate and its actual/estimate ratio (seeded noise)."""
    noise = np.random.default_rng([config.seed, 0])
    sigma = config.duration_noise_sigma
    runs: dict[str, JobRun] = {}
    for job in trace:
        if job.id in runs:
            raise ValueError(f"job id {job.id!r} appears twice in the trace")
        unknown = set(job.gpu_types) | {name for name, _ in job.duration_by_type_s}
        unknown -= set(cluster.gpu_types)
        if unknown:
            lacking = ", ".join(sorted(unknown))
            raise ValueError(f"job {job.id!r} names GPU types the cluster lacks: {lacking}")
        drawn = float(noise.lognormal(0.0, sigma)) if sigma > 0 else 1.0
        estimate, actual = job.duration_s, job.actual_duration_s
        if estimate is not None and actual is not None:
            ratio = actual / estimate
        elif actual is not None:  # the trace knows the truth: the estimate is off
            estimate = max(1, round(actual / drawn))
            ratio = actual / estimate
        else:
            ratio = drawn
        runs[job.id] = JobRun(job, estimate, ratio)
    return runs


def eligible_types(run: JobRun, cluster: Instance) -> frozenset[str]:
    """The GPU types the job may run on (type list, memory, a known duration)."""
    job = run.trace
    by_type = dict(job.duration_by_type_s)
    return frozenset(
        name
        for name in job.gpu_types or tuple(cluster.gpu_types)
        if cluster.gpu_types[name].memory_gb >= job.min_gpu_memory_gb
        and (run.estimate_s is not None or name in by_type)
    )


def full_run_s(run: JobRun, cluster: Instance, gpu_type: str) -> float:
    """Actual seconds the whole job takes on ``gpu_type``, from scratch."""
    by_type = dict(run.trace.duration_by_type_s)
    if gpu_type in by_type:
        return run.ratio * by_type[gpu_type]
    base = run.trace.actual_duration_s or run.ratio * (run.estimate_s or 0)
    return base / cluster.gpu_types[gpu_type].speed
