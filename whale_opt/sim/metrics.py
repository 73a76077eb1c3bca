"""What a run measured: per-job records (a DataFrame) and one summary dict.

Definitions (all times in simulated seconds unless named ``wall``):

- JCT = end - submit; weighted JCT = sum(weight x JCT) / sum(weight), over
  completed jobs. Queueing delay = first start - submit.
- Makespan = last completion - first submission.
- GPU utilisation = GPU-seconds allocated to jobs / (cluster GPUs x the run's
  span, first submission to last event); a share of a GPU (``gpu_milli``)
  counts its fraction, so this is the allocated share of the cluster.
  ``*_over_time`` series come from the rounds table, sampled after each
  round's decision.
- Fragmentation: a free GPU is *fragmented* when its node has fewer free GPUs
  than the smallest queued job that may use that GPU type needs there
  (whole node for gangs larger than a node). Reported as the time-weighted
  mean count and share of free GPUs, while jobs wait.
- Slowdown = JCT / the job's actual run time on the GPU type it finished on
  (alone, from scratch). Finish-time fairness (as in Themis) is the worst
  per-tenant mean slowdown; Jain's index is taken over per-tenant mean
  slowdowns (1.0 = every tenant slowed equally).
  Tenants with no completed job are left out of both.
- Lost GPU-hours: GPUs x time held that kept no work, by cause: the
  computing since the last checkpoint an interruption threw away, and the
  restore (``checkpoint_s``) its restart then paid (``lost_gpu_hours_preemption``,
  ``lost_gpu_hours_failure``; ``lost_gpu_hours`` both).
- No job lost: every trace job ends the run ``completed``, ``running``,
  ``queued`` (waiting in the scheduler) or ``pending`` (not yet arrived);
  ``lost`` marks one the simulator and the scheduler disagree about, and
  ``lost_jobs`` counts them (0 on every correct run).
- ``max_queue_delay_s``: the longest wait from submission to first start,
  a job still waiting at the end counting its wait so far.
- Per priority class and per tenant (``SimResult.groups``, and in the
  summary as ``<figure>[class:<name>]`` / ``<figure>[tenant:<name>]``): see
  :mod:`whale_opt.sim.groups`.
- Round wall time is measured around the scheduler's snapshot, policy and
  apply; solver wall time is the decision's own ``wall_s``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from whale_opt.problem_data import MILLI
from whale_opt.sim.config import SimConfig
from whale_opt.sim.groups import SUMMARY_FIGURES, flatten, group_table, integral
from whale_opt.sim.jobs import full_run_s
from whale_opt.sim.record import RunRecord

JOB_COLUMNS = [
    "id",
    "tenant",
    "priority_class",
    "gpus",
    "gpu_milli",
    "weight",
    "status",
    "submit_s",
    "first_start_s",
    "end_s",
    "jct_s",
    "queue_delay_s",
    "waited_s",
    "estimated_s",
    "isolated_s",
    "slowdown",
    "gpu_type",
    "run_s",
    "lost_s",
    "lost_preempted_s",
    "lost_failed_s",
    "preemptions",
    "failures",
]


@dataclass(frozen=True)
class SimResult:
    """A finished run: per-job, per-round and per-attempt tables, the per-class and
    per-tenant figures (``groups``) and the summary."""

    policy: str
    cluster: str
    config: SimConfig
    total_gpus: int
    jobs: pd.DataFrame
    rounds: pd.DataFrame
    segments: pd.DataFrame
    groups: pd.DataFrame
    summary: dict[str, Any]
    wall_s: float

    def write(self, directory: str | Path, *, suffix: str = ".csv") -> list[Path]:
        """Write the jobs, rounds, segments and groups tables as ``<policy>-<table><suffix>``.

        ``.csv`` always works; ``.parquet`` needs the optional ``pyarrow``.
        """
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for name, frame in (
            ("jobs", self.jobs),
            ("rounds", self.rounds),
            ("segments", self.segments),
            ("groups", self.groups.rename_axis("group").reset_index()),
        ):
            path = out / f"{self.policy}-{name}{suffix}"
            write_frame(frame, path)
            written.append(path)
        return written


def write_frame(frame: pd.DataFrame, path: Path) -> None:
    """CSV or Parquet, by suffix (tuples of GPU ids become ``a01/0|a01/1``)."""
    flat = frame.copy()
    if "gpus" in flat.columns and flat["gpus"].map(lambda v: isinstance(v, tuple)).any():
        flat["gpus"] = flat["gpus"].map("|".join)
    if path.suffix == ".parquet":
        flat.to_parquet(path, index=False)
    else:
        flat.to_csv(path, index=False)


def _status(record: RunRecord, job_id: str) -> str:
    """Where a job is at the end, by the simulator and the scheduler together."""
    run = record.jobs[job_id]
    running, queued = record.running_at_end, record.queued_at_end
    known = job_id in running or job_id in queued
    if run.end is not None:
        return "lost" if known else "completed"
    if run.started_at is not None:
        return "running" if job_id in running else "lost"
    if job_id in queued:
        return "queued"
    return "lost" if run.arrived or known else "pending"


def _job_rows(record: RunRecord) -> pd.DataFrame:
    rows = []
    for run in record.jobs.values():
        job = run.trace
        status = _status(record, job.id)
        isolated = full_run_s(run, record.cluster, run.gpu_type) if run.gpu_type else np.nan
        jct = run.end - job.submit_s if run.end is not None else np.nan
        start = run.first_start
        if start is not None:
            waited: float = start - job.submit_s
        else:
            waited = record.end_s - job.submit_s if run.arrived else np.nan
        rows.append(
            {
                "id": job.id,
                "tenant": job.tenant,
                "priority_class": job.priority_class,
                "gpus": job.gpus,
                "gpu_milli": job.gpu_milli,
                "weight": job.weight,
                "status": status,
                "submit_s": job.submit_s,
                "first_start_s": np.nan if start is None else start,
                "end_s": np.nan if run.end is None else run.end,
                "jct_s": jct,
                "queue_delay_s": np.nan if start is None else start - job.submit_s,
                "waited_s": waited,
                "estimated_s": np.nan if run.estimate_s is None else run.estimate_s,
                "isolated_s": isolated,
                "slowdown": jct / isolated if run.end is not None else np.nan,
                "gpu_type": run.gpu_type or None,
                "run_s": 0,
                "lost_s": run.lost_total_s,
                "lost_preempted_s": run.lost_s.get("preempted", 0),
                "lost_failed_s": run.lost_s.get("failed", 0),
                "preemptions": run.preemptions,
                "failures": run.failures,
            }
        )
    frame = pd.DataFrame(rows, columns=JOB_COLUMNS)
    segments = pd.DataFrame(record.segments)
    if not segments.empty:
        held = (segments["end_s"] - segments["start_s"]).groupby(segments["job"]).sum()
        frame["run_s"] = frame["id"].map(held).fillna(0).astype(int)
    return frame


def _percentiles(values: pd.Series, prefix: str) -> dict[str, float]:
    clean = values.dropna()
    if clean.empty:
        return {f"{prefix}_p50": np.nan, f"{prefix}_p95": np.nan, f"{prefix}_p99": np.nan}
    p50, p95, p99 = np.percentile(clean, [50, 95, 99])
    return {f"{prefix}_p50": float(p50), f"{prefix}_p95": float(p95), f"{prefix}_p99": float(p99)}


def _time_weighted(rounds: pd.DataFrame, values: pd.Series, until: float) -> float:
    """Mean of a series sampled at rounds, each value holding until the next round."""
    if rounds.empty:
        return 0.0
    times = rounds["time_s"].to_numpy(dtype=float)
    spans = np.diff(np.append(times, max(until, times[-1])))
    total = spans.sum()
    return float((values.to_numpy(dtype=float) * spans).sum() / total) if total > 0 else 0.0


def jain_index(values: list[float] | np.ndarray) -> float:
    """Jain's fairness index of ``values``: 1.0 when all equal, 1/n at worst."""
    array = np.asarray(values, dtype=float)
    if array.size == 0 or not np.any(array):
        return 1.0
    return float(array.sum() ** 2 / (array.size * (array**2).sum()))


def gpu_seconds(segments: pd.DataFrame) -> pd.Series:
    """GPU-seconds each segment held its GPUs (fractions of a GPU counted as such)."""
    return (segments["end_s"] - segments["start_s"]) * segments["gpu_amount"]


def summarize(
    jobs: pd.DataFrame, rounds: pd.DataFrame, segments: pd.DataFrame, total_gpus: int
) -> dict[str, Any]:
    """The run's figures (see the module docstring for each definition)."""
    done = jobs[jobs["status"] == "completed"]
    first, last_end = run_span(jobs, segments)
    span = max(last_end - first, 1.0)
    held = float(gpu_seconds(segments).sum()) if not segments.empty else 0.0
    status = jobs["status"].value_counts()
    summary: dict[str, Any] = {
        "jobs": len(jobs),
        "submitted": int(len(jobs) - status.get("pending", 0)),
        "completed": len(done),
        "unfinished": len(jobs) - len(done),
        "running_at_end": int(status.get("running", 0)),
        "queued_at_end": int(status.get("queued", 0)),
        "pending_at_end": int(status.get("pending", 0)),
        "lost_jobs": int(status.get("lost", 0)),
        "avg_jct_s": float(done["jct_s"].mean()) if len(done) else np.nan,
        "weighted_jct_s": float((done["jct_s"] * done["weight"]).sum() / done["weight"].sum())
        if len(done)
        else np.nan,
        **_percentiles(jobs["queue_delay_s"], "queue_delay_s"),
        "max_queue_delay_s": float(jobs["waited_s"].max()),
        "makespan_s": float(done["end_s"].max() - first) if len(done) else np.nan,
        "gpu_utilisation": held / (total_gpus * span),
    }
    waiting = rounds[(rounds["queued"] > 0) & (rounds["free_gpus"] > 0)] if len(rounds) else rounds
    summary["fragmented_gpus_avg"] = (
        _time_weighted(rounds, rounds["fragmented_gpus"], last_end) if len(rounds) else 0.0
    )
    summary["fragmented_share"] = (
        float((waiting["fragmented_gpus"] / waiting["free_gpus"]).mean()) if len(waiting) else 0.0
    )
    per_tenant = done.groupby("tenant")["slowdown"].mean()
    summary["jain_tenants"] = jain_index(per_tenant.to_numpy())
    summary["finish_time_fairness"] = float(per_tenant.max()) if len(per_tenant) else np.nan
    summary["preemptions"] = int(jobs["preemptions"].sum())
    summary["failure_requeues"] = int(jobs["failures"].sum())
    amount = jobs["gpus"] * jobs["gpu_milli"] / MILLI
    summary["lost_gpu_hours"] = float((jobs["lost_s"] * amount).sum() / 3600)
    summary["lost_gpu_hours_preemption"] = float((jobs["lost_preempted_s"] * amount).sum() / 3600)
    summary["lost_gpu_hours_failure"] = float((jobs["lost_failed_s"] * amount).sum() / 3600)
    owed = [column for column in rounds.columns if column.startswith("owed[")]
    summary["guarantee_shortfall_gpu_h"] = (
        sum(integral(rounds, column, last_end) for column in owed) / 3600 if owed else np.nan
    )
    summary["rounds"] = len(rounds)
    for column, prefix in (("round_wall_s", "round_wall_s"), ("solver_wall_s", "solver_wall_s")):
        values = rounds[column] if len(rounds) else pd.Series(dtype=float)
        summary[f"{prefix}_p50"] = float(values.quantile(0.5)) if len(values) else np.nan
        summary[f"{prefix}_p95"] = float(values.quantile(0.95)) if len(values) else np.nan
        summary[f"{prefix}_max"] = float(values.max()) if len(values) else np.nan
    return summary


def run_span(jobs: pd.DataFrame, segments: pd.DataFrame) -> tuple[float, float]:
    """First submission and last segment end of a run (the span metrics divide by)."""
    first = float(jobs["submit_s"].min()) if not jobs.empty else 0.0
    last_end = float(segments["end_s"].max()) if not segments.empty else first
    return first, last_end


def build_result(record: RunRecord, wall_s: float) -> SimResult:
    """The :class:`SimResult` of a finished run's record."""
    jobs = _job_rows(record)
    extra = [
        c for c in dict.fromkeys(k for row in record.rounds for k in row) if c not in ROUND_COLUMNS
    ]
    rounds = pd.DataFrame(record.rounds, columns=[*ROUND_COLUMNS, *extra])
    segments = pd.DataFrame(record.segments, columns=list(SEGMENT_COLUMNS))
    total = sum(node.gpu_count for node in record.cluster.nodes)
    first, last_end = run_span(jobs, segments)
    groups = group_table(jobs, rounds, record.guarantees, max(last_end - first, 1.0), last_end)
    summary = {"policy": record.policy, **summarize(jobs, rounds, segments, total)}
    summary.update(flatten(groups))
    summary["sim_wall_s"] = wall_s
    return SimResult(
        policy=record.policy,
        cluster=record.cluster.name,
        config=record.config,
        total_gpus=total,
        jobs=jobs,
        rounds=rounds,
        segments=segments,
        groups=groups,
        summary=summary,
        wall_s=wall_s,
    )


ROUND_COLUMNS = (
    "time_s",
    "queued",
    "running",
    "busy_gpus",
    "healthy_gpus",
    "free_gpus",
    "fragmented_gpus",
    "started",
    "preempted",
    "round_wall_s",
    "solver_wall_s",
    "status",
)
SEGMENT_COLUMNS = (
    "job",
    "start_s",
    "end_s",
    "gpus",
    "gpu_amount",
    "gpu_type",
    "outcome",
    "useful_s",
    "full_s",
    "restore_s",
    "overhead_s",
    "lost_s",
    "restored_after",
)


def compare(results: list[SimResult]) -> pd.DataFrame:
    """The summaries side by side: one row per figure, one column per policy."""
    table = pd.DataFrame({result.policy: result.summary for result in results})
    return table.drop(index="policy", errors="ignore")


def _cell(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "-"
    if isinstance(value, int | np.integer) or abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def group_comparison(results: list[SimResult]) -> pd.DataFrame:
    """The per-class and per-tenant figures of every run: rows (group, policy)."""
    columns = ["jobs", "completed", *SUMMARY_FIGURES]
    frames = {
        result.policy: result.groups.reindex(columns=columns)
        for result in results
        if not result.groups.empty
    }
    if not frames:
        return pd.DataFrame(columns=columns)
    table = pd.concat(frames, names=["policy", "group"]).swaplevel().sort_index(level=0)
    return table.dropna(axis=1, how="all")


def summary_table(results: list[SimResult]) -> str:
    """:func:`compare` as aligned text, numbers rounded for reading: the run's
    figures, then the per-class and per-tenant ones (:func:`group_comparison`)."""
    table = compare(results)
    core = table[[not str(name).endswith("]") for name in table.index]]
    text = core.apply(lambda column: column.map(_cell)).to_string()
    groups = group_comparison(results)
    if groups.empty:
        return text
    cells = groups.apply(lambda column: column.map(_cell)).to_string()
    return f"{text}\n\nby priority class and tenant\n{cells}"
