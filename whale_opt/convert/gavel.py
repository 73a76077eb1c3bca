"""Gavel (OSDI '20) measured throughputs -> per-job-class durations by GPU type.

``simulation_throughputs.json``: ``{worker: {"('<model>', <gpus>)": {"null":
steps/s alone, ...}}}`` for workers ``k80``, ``p100``, ``v100`` (the
``*_unconsolidated`` variants are ignored, as Gavel's own scheduler does).

A job's duration on a GPU type is its reference duration (seconds on a GPU
of speed 1.0) scaled by throughput: the speed-1.0 reference throughput of a
class is its V100 throughput / the V100 speed of the assumptions, so

    duration(type) = reference_s x (thr_v100 / speed_v100) / thr(type).

A type the assumptions map to a Gavel worker (``gavel = "k80"``) uses the
measured throughput; any other type (A100, H100, T4...) has
``thr = thr_v100 x speed(type) / speed_v100``, i.e. ``reference_s / speed``:
the class's measured K80/P100/V100 heterogeneity, our relative speed beyond.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType

import numpy as np

from whale_opt.convert.assumptions import DEFAULT_ASSUMPTIONS, GAVEL_WORKERS, Assumptions
from whale_opt.io import InputError, load_json
from whale_opt.problem_data import GpuType
from whale_opt.sim.trace import TraceJob

SCALE_FACTORS = (1, 2, 4, 8)


@dataclass(frozen=True)
class GavelThroughputs:
    """Isolated throughput (steps/s) per (job class, GPUs) and Gavel worker type."""

    table: Mapping[tuple[str, int], Mapping[str, float]]

    def __post_init__(self) -> None:
        frozen = {key: MappingProxyType(dict(row)) for key, row in self.table.items()}
        object.__setattr__(self, "table", MappingProxyType(frozen))

    def classes(self, gpus: int = 1) -> tuple[str, ...]:
        """Job classes measured on V100 at ``gpus`` workers, sorted."""
        return tuple(
            sorted(name for (name, n), row in self.table.items() if n == gpus and row.get("v100"))
        )


def read_gavel(path: str | Path) -> GavelThroughputs:
    """The isolated throughputs of a Gavel ``simulation_throughputs.json``.

    At least one job class must be measured on V100 at 1 worker: jobs draw
    their class among those measured at their scale factor, else at 1.
    """
    source = str(path)
    raw = load_json(path)
    if not isinstance(raw, dict):
        raise InputError(source, "(top level)", "must be an object of worker types")
    table: dict[tuple[str, int], dict[str, float]] = {}
    for worker in GAVEL_WORKERS:
        jobs = raw.get(worker)
        if not isinstance(jobs, dict):
            raise InputError(source, worker, "is required: an object of job keys")
        for key, entry in jobs.items():
            where = f"{worker}.{key}"
            name, gpus = _job_key(source, where, key)
            alone = entry.get("null") if isinstance(entry, dict) else None
            if isinstance(alone, bool) or not isinstance(alone, int | float) or alone < 0:
                raise InputError(
                    source, f"{where}.null", f"must be a throughput >= 0 (got {alone!r})"
                )
            table.setdefault((name, gpus), {})[worker] = float(alone)
    throughputs = GavelThroughputs(table)
    if not throughputs.classes(1):
        # Jobs draw their class among these (the fallback at every scale factor).
        raise InputError(
            source, "v100", 'has no job class measured at 1 worker (a "null" throughput > 0)'
        )
    return throughputs


def _job_key(source: str, where: str, key: str) -> tuple[str, int]:
    try:
        name, gpus = ast.literal_eval(key)
    except (ValueError, SyntaxError, TypeError):
        name, gpus = None, None
    if not isinstance(name, str) or not isinstance(gpus, int) or gpus < 1:
        raise InputError(source, where, f"must be a key \"('<model>', <gpus>)\" (got {key!r})")
    return name, gpus


def gavel_durations(
    throughputs: GavelThroughputs,
    job_class: str,
    reference_s: int,
    gpu_types: Mapping[str, GpuType],
    gpus: int = 1,
    assumptions: Assumptions = DEFAULT_ASSUMPTIONS,
) -> dict[str, int]:
    """Seconds on each of ``gpu_types`` of a ``job_class`` job of ``gpus`` workers.

    ``reference_s`` is its duration on a GPU of speed 1.0. The measurement at
    the nearest Gavel scale factor <= ``gpus`` (1, 2, 4, 8) is used; an
    unmeasured or zero throughput falls back to our relative speed.
    """
    scale = max(s for s in SCALE_FACTORS if s <= max(1, gpus))
    row = throughputs.table.get((job_class, scale)) or throughputs.table.get((job_class, 1))
    if not row or not row.get("v100"):
        raise KeyError(f"no V100 throughput for Gavel job class {job_class!r}")
    workers = assumptions.gavel_workers()
    v100_speed = next((m.speed for m in assumptions.gpu_models.values() if m.gavel == "v100"), 0.45)
    reference_thr = row["v100"] / v100_speed
    out = {}
    for name, gpu_type in gpu_types.items():
        measured = row.get(workers.get(name, ""), 0.0)
        thr = measured if measured > 0 else reference_thr * gpu_type.speed
        out[name] = max(1, math.ceil(reference_s * reference_thr / thr - 1e-6))
    return out


def with_gavel_speeds(
    trace: Sequence[TraceJob],
    throughputs: GavelThroughputs,
    seed: int,
    gpu_types: Mapping[str, GpuType],
    assumptions: Assumptions = DEFAULT_ASSUMPTIONS,
) -> tuple[tuple[TraceJob, ...], dict[str, str]]:
    """``trace`` with ``duration_by_type_s`` from a random Gavel class per job.

    Each job draws (seeded) one class measured at its scale factor, which
    scales its estimate ``duration_s`` (else its ``actual_duration_s``) into
    per-type estimates (TRACES.md). The simulator runs each entry x the job's
    actual/estimate ratio, so the ratio counts once: a job of both durations
    runs its actual duration scaled by the class. (A job of only an actual
    duration runs that, scaled, times the simulator's ``--noise`` factor.)
    Per-type durations the trace gives win over the class's, as they win over
    ``duration_s``; a job that gives only those is kept as it is and draws no
    class. Returns the jobs and job id -> class.
    """
    rng = np.random.default_rng(seed)
    jobs, chosen = [], {}
    for job in trace:
        estimate = job.duration_s if job.duration_s is not None else job.actual_duration_s
        if estimate is None:  # only duration_by_type_s: nothing to scale
            jobs.append(job)
            continue
        scale = max(s for s in SCALE_FACTORS if s <= max(1, job.gpus))
        classes = throughputs.classes(scale) or throughputs.classes(1)
        job_class = classes[int(rng.integers(len(classes)))]
        by_type = gavel_durations(
            throughputs, job_class, estimate, gpu_types, job.gpus, assumptions
        )
        by_type.update(job.duration_by_type_s)
        allowed = set(job.gpu_types) or set(by_type)
        pairs = tuple(sorted((k, v) for k, v in by_type.items() if k in allowed))
        jobs.append(replace(job, duration_by_type_s=pairs))
        chosen[job.id] = job_class
    return tuple(jobs), chosen
