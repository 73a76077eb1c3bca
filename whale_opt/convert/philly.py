"""Microsoft Philly (ATC '19): machine list -> cluster, >=4-GPU job subset -> trace.

``cluster_machine_list.csv``: ``machineId, number of GPUs, single GPU mem``
(``m0,2, 12GB``); the GPU model is not given, so the memory picks one of the
``philly-<mem>`` models of the assumptions. ``jobs_ge4gpu_pass.json``: a JSON
list of ``{id, num_gpus, runtime (min), attempts: [{start_time, end_time}],
submitted_time}``, times ``YYYY-MM-DD HH:MM:SS``. See ``docs/IMPORT.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from whale_opt.convert._common import FirstSeen, cluster, csv_rows, model_of, node_gpus, node_id
from whale_opt.convert.assumptions import DEFAULT_ASSUMPTIONS, Assumptions, GpuModel
from whale_opt.io import InputError, load_json
from whale_opt.problem_data import FieldError, Instance
from whale_opt.sim.trace import TraceJob

MACHINE_COLUMNS = ("machineId", "number of GPUs", "single GPU mem")
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


@dataclass(frozen=True)
class PhillyClusterReport:
    """Machines kept, GPUs, and machines skipped for having no GPU."""

    nodes: int = 0
    gpus: int = 0
    no_gpu_skipped: int = 0


@dataclass(frozen=True)
class PhillyTraceReport:
    """Jobs converted; ``retried`` had more than one attempt."""

    jobs: int = 0
    retried: int = 0
    multi_node: int = 0


def read_philly_cluster(
    path: str | Path, assumptions: Assumptions = DEFAULT_ASSUMPTIONS, name: str = ""
) -> tuple[Instance, PhillyClusterReport]:
    """The cluster of a Philly machine list (no CPU or host memory given: 0)."""
    machines: list[tuple[str, GpuModel, int, float, float]] = []
    skipped = 0
    seen = FirstSeen(str(path), "machine id")
    for row in csv_rows(path, MACHINE_COLUMNS):
        gpus = node_gpus(row, "number of GPUs")
        if gpus == 0:
            skipped += 1
            continue
        memory = row.text("single GPU mem")
        model = model_of(row, "single GPU mem", f"philly-{memory}", assumptions)
        machines.append((node_id(row, "machineId", seen), model, gpus, 0.0, 0.0))
    if not machines:
        raise InputError(str(path), "(file)", "has no machines with GPUs")
    instance = cluster(name or f"philly-{Path(path).stem}", machines, assumptions)
    report = PhillyClusterReport(len(machines), sum(m[2] for m in machines), skipped)
    return instance, report


def read_philly_trace(
    path: str | Path,
    assumptions: Assumptions = DEFAULT_ASSUMPTIONS,
    node_gpus: int = 8,
    measured_on: str = "philly-24GB",
) -> tuple[tuple[TraceJob, ...], PhillyTraceReport]:
    """The trace of a Philly job list (``jobs_ge4gpu_pass.json``).

    ``submit_s`` is relative to the first submission; the actual duration is
    the sum of the attempts' run times (GPU-holding time: the gaps between
    attempts are waits a simulator reproduces itself). Jobs of up to
    ``node_gpus`` GPUs want one node, larger ones one rack. Run times count
    as measured on source model ``measured_on`` (the 8-GPU machines such
    jobs ran on): ``actual_duration_s`` is run time x its speed.
    """
    speed = assumptions.model(measured_on).speed
    source = str(path)
    raw = load_json(path)
    if not isinstance(raw, list) or not raw:
        raise InputError(source, "(top level)", "must be a non-empty JSON list of jobs")
    parsed = [_parse(source, k, item) for k, item in enumerate(raw)]
    seen = FirstSeen(source, "job id")
    for k, (job_id, _, _, _) in enumerate(parsed):
        seen.add(job_id, f"[{k}]", f"[{k}].id")
    first = min(submitted for _, submitted, _, _ in parsed)
    jobs = []
    for k, (job_id, submitted, gpus, run_s) in enumerate(parsed):
        try:
            jobs.append(
                TraceJob(
                    id=job_id,
                    submit_s=round((submitted - first).total_seconds()),
                    gpus=gpus,
                    actual_duration_s=max(1, math.ceil(run_s * speed)),
                    topology="node" if gpus <= node_gpus else "rack",
                )
            )
        except FieldError as exc:
            raise InputError(
                source, f"[{k}].{exc.path}", f"{exc.message} (got {exc.value!r})"
            ) from exc
    report = PhillyTraceReport(
        jobs=len(jobs),
        retried=sum(1 for item in raw if len(item["attempts"]) > 1),
        multi_node=sum(1 for job in jobs if job.gpus > node_gpus),
    )
    return tuple(jobs), report


def _parse(source: str, k: int, item: Any) -> tuple[str, datetime, int, int]:
    """(id, submitted, GPUs, run seconds) of job ``k``, or an error naming the field."""
    if not isinstance(item, dict):
        raise InputError(source, f"[{k}]", f"must be a job object (got {item!r})")

    def field(name: str) -> Any:
        if name not in item:
            raise InputError(source, f"[{k}].{name}", "is required but missing")
        return item[name]

    def when(name: str, value: Any, where: str) -> datetime:
        try:
            return datetime.strptime(str(value), TIME_FORMAT)
        except ValueError:
            raise InputError(
                source, f"{where}.{name}", f"must be a time YYYY-MM-DD HH:MM:SS (got {value!r})"
            ) from None

    job_id = field("id")
    if not isinstance(job_id, str) or not job_id or "/" in job_id:
        raise InputError(source, f"[{k}].id", f"must be a non-empty string (got {job_id!r})")
    gpus = field("num_gpus")
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise InputError(source, f"[{k}].num_gpus", f"must be an integer >= 1 (got {gpus!r})")
    submitted = when("submitted_time", field("submitted_time"), f"[{k}]")
    attempts = field("attempts")
    if not isinstance(attempts, list) or not attempts:
        raise InputError(source, f"[{k}].attempts", f"must be a non-empty list (got {attempts!r})")
    run_s = 0
    for a, attempt in enumerate(attempts):
        where = f"[{k}].attempts[{a}]"
        if not isinstance(attempt, dict):
            raise InputError(source, where, f"must be an object (got {attempt!r})")
        start = when("start_time", attempt.get("start_time"), where)
        end = when("end_time", attempt.get("end_time"), where)
        if end < start:
            raise InputError(source, f"{where}.end_time", f"is before start_time (got {end})")
        run_s += round((end - start).total_seconds())
    return job_id, submitted, gpus, run_s
