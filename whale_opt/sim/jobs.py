"""What the simulator knows of each job that the scheduler does not: actual durations.

A job's *ratio* is actual / estimated duration: from the trace when it gives
both, else a seeded log-normal draw (``SimConfig.duration_noise_sigma``) that
derives the missing one. On a GPU type of speed *s* a job runs
``actual / s`` seconds from scratch (``ratio x duration_by_type_s`` where the
trace gives per-type estimates).

An attempt that follows an interruption first spends the job's
``checkpoint_s`` restoring (``restore_s``), then computes. Time a job holds
GPUs without keeping the work is charged to a cause: the computing since its
last checkpoint to the interruption that threw it away, and a restore to the
interruption that made it necessary (``lost_s``, by cause).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from whale_opt.problem_data import FieldError, Instance
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
    arrived: bool = False
    restore_s: int = 0  # restore time the current attempt began with
    restore_due: int = 0  # restore time the next attempt begins with
    restored_after: str = ""  # the interruption the current (or next) restore follows
    lost_s: dict[str, int] = field(default_factory=dict)  # cause -> GPU-holding seconds

    @property
    def lost_total_s(self) -> int:
        """Seconds of GPU holding that kept no work, whatever the cause."""
        return sum(self.lost_s.values())

    def charge(self, cause: str, seconds: int) -> None:
        """Count ``seconds`` of holding without kept work against ``cause``."""
        if seconds > 0 and cause:
            self.lost_s[cause] = self.lost_s.get(cause, 0) + seconds

    def interrupt(self, now: int, interval: int | None, outcome: str) -> Stop:
        """Stop the current attempt at ``now`` (a failure or a preemption).

        The attempt keeps its computing up to its last checkpoint (one every
        ``interval`` seconds of computing after its restore; None: none). The
        time since that checkpoint (since the attempt's start, when it kept
        nothing) is charged to ``outcome``; a restore that led to kept work
        to the interruption before it. The restart will owe a restore.
        """
        assert self.started_at is not None
        elapsed = now - self.started_at
        computing = elapsed - self.restore_s
        work_s = max(1, self.run_s - self.restore_s)  # this attempt's computing, in full
        saved = 0 if interval is None or computing < interval else computing // interval * interval
        saved = min(saved, work_s)
        if saved > 0:
            stop = Stop(saved, self.restore_s, elapsed - self.restore_s - saved, 1 - saved / work_s)
        else:
            stop = Stop(0, 0, elapsed, 1.0)
        self.charge(self.restored_after, stop.overhead_s)
        self.charge(outcome, stop.lost_s)
        self.remaining *= stop.left
        self.restore_due = self.trace.checkpoint_s
        self.restored_after = outcome
        return stop

    def close(self, now: int) -> int:
        """The attempt completes (or the run ends) at ``now``: its restore, paid,
        is charged to the interruption before it; returns that restore time."""
        assert self.started_at is not None
        overhead = min(self.restore_s, now - self.started_at)
        self.charge(self.restored_after, overhead)
        return overhead


@dataclass(frozen=True)
class Stop:
    """How an interrupted attempt's time splits: computing kept (``saved_s``),
    restore charged to the interruption before (``overhead_s``), time lost to
    this one (``lost_s``); ``left`` is the share of the attempt's work still to do."""

    saved_s: int
    overhead_s: int
    lost_s: int
    left: float


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
        try:
            job.check_on(cluster)
        except FieldError as exc:
            raise ValueError(f"job {job.id!r}: {exc}") from None
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
    if run.trace.gpus == 0:
        return base  # a CPU-only job runs as long on any node (as Instance.durations)
    return base / cluster.gpu_types[gpu_type].speed
