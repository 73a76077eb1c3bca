"""Alibaba GPU trace v2023 ("openb", FGD, ATC '23): node list -> cluster, pods -> trace.

Node list columns: ``sn, cpu_milli, memory_mib, gpu, model``. Pod list
columns: ``name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, qos,
pod_phase, creation_time, deletion_time, scheduled_time`` (seconds).
What is assumed and why: ``docs/IMPORT.md``.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from whale_opt.convert._common import (
    FirstSeen,
    Row,
    cluster,
    csv_rows,
    model_of,
    node_gpus,
    node_id,
)
from whale_opt.convert.assumptions import DEFAULT_ASSUMPTIONS, Assumptions, GpuModel
from whale_opt.io import InputError
from whale_opt.problem_data import FieldError, Instance
from whale_opt.sim.trace import TraceJob

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = (
    "name",
    "cpu_milli",
    "memory_mib",
    "num_gpu",
    "gpu_milli",
    "gpu_spec",
    "qos",
    "pod_phase",
    "creation_time",
    "deletion_time",
    "scheduled_time",
)
PENDING_CHOICES = ("skip", "creation")


@dataclass(frozen=True)
class OpenbNodeReport:
    """What became of the node list: GPU nodes kept, CPU-only nodes skipped."""

    nodes: int = 0
    gpus: int = 0
    cpu_only_skipped: int = 0
    by_model: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class OpenbPodReport:
    """What became of the pod list (counts of rows).

    ``jobs`` made it into the trace; ``fractional`` of them ask for part of
    one GPU (``gpu_milli``; a whole one with ``whole_gpus``); ``cpu_only``
    pods have no GPU and are kept (``cpu_only_skipped``: dropped with
    ``whole_gpus``);
    ``pending`` had no scheduled time (skipped, or timed from creation);
    ``censored`` were still running when the trace ends (their deletion time
    is the trace's end, so their duration is a lower bound); ``clamped``
    ran less than a second and count as one.
    """

    rows: int = 0
    jobs: int = 0
    fractional: int = 0
    cpu_only: int = 0
    cpu_only_skipped: int = 0
    pending: int = 0
    pending_skipped: int = 0
    censored: int = 0
    clamped: int = 0
    by_phase: dict[str, int] = field(default_factory=dict)
    by_qos: dict[str, int] = field(default_factory=dict)


def read_openb_cluster(
    path: str | Path, assumptions: Assumptions = DEFAULT_ASSUMPTIONS, name: str = ""
) -> tuple[Instance, OpenbNodeReport]:
    """The cluster of an openb node list, and what was kept or skipped.

    CPU-only nodes (``gpu`` 0) are skipped: a node of ours has GPUs. CPU
    milli-cores become cores, MiB become GB (/1024).
    """
    machines: list[tuple[str, GpuModel, int, float, float]] = []
    skipped = 0
    by_model: Counter[str] = Counter()
    seen = FirstSeen(str(path), "node id")
    for row in csv_rows(path, NODE_COLUMNS):
        gpus = node_gpus(row, "gpu")
        if gpus == 0:
            skipped += 1
            continue
        model_name = row.text("model")
        if not model_name:
            raise row.error("model", "is empty on a node with GPUs")
        model = model_of(row, "model", model_name, assumptions)
        cpu = row.number("cpu_milli") / 1000
        memory_gb = row.number("memory_mib") / 1024
        machines.append((node_id(row, "sn", seen), model, gpus, cpu, memory_gb))
        by_model[model_name] += 1
    if not machines:
        raise InputError(str(path), "(file)", "has no GPU nodes")
    instance = cluster(name or f"openb-{Path(path).stem}", machines, assumptions)
    report = OpenbNodeReport(
        nodes=len(machines),
        gpus=sum(m[2] for m in machines),
        cpu_only_skipped=skipped,
        by_model=dict(by_model),
    )
    return instance, report


def read_openb_trace(
    path: str | Path,
    assumptions: Assumptions = DEFAULT_ASSUMPTIONS,
    pending: str = "skip",
    measured_on: str = "G2",
    whole_gpus: bool = False,
) -> tuple[tuple[TraceJob, ...], OpenbPodReport]:
    """The job trace of an openb pod list, and counts of what was done to it.

    ``submit_s`` is the creation time relative to the first kept pod; the
    actual duration is deletion - scheduled (no estimate: the simulator
    derives it with its noise). A pod lives on one node: topology ``node``.
    ``pending`` pods (no scheduled time) are skipped, or with ``"creation"``
    run for deletion - creation. Durations are measured on the trace's GPUs
    and the trace says which: they count as run on source model
    ``measured_on`` (the most common GPU), so ``actual_duration_s`` (at
    speed 1.0) is the measured time x that model's speed.

    A pod asking part of one GPU keeps its share (``gpu_milli``) and a
    CPU-only pod (``num_gpu`` 0) is kept with ``gpus`` 0; ``whole_gpus``
    rounds shares up to a whole GPU and drops CPU-only pods instead (as
    engines without GPU sharing must).
    """
    if pending not in PENDING_CHOICES:
        raise ValueError(f"pending must be one of {', '.join(PENDING_CHOICES)} (got {pending!r})")
    speed = assumptions.model(measured_on).speed
    counts: Counter[str] = Counter()
    phases: Counter[str] = Counter()
    qos_seen: Counter[str] = Counter()
    rows: list[tuple[int, dict[str, object]]] = []
    seen = FirstSeen(str(path), "pod name")
    for row in csv_rows(path, POD_COLUMNS):
        counts["rows"] += 1
        name = seen.add(row.text("name"), f"line {row.line}", f"line {row.line}: name")
        phase = row.text("pod_phase")
        phases[phase] += 1
        gpus = row.integer("num_gpu")
        if gpus == 0:
            counts["cpu_only"] += 1
            if whole_gpus:
                counts["cpu_only_skipped"] += 1
                continue
        milli = 1000
        if gpus == 1 and row.integer("gpu_milli") < 1000:
            counts["fractional"] += 1
            milli = 1000 if whole_gpus else row.integer("gpu_milli")
        created = row.integer("creation_time")
        start = created
        if not row.text("scheduled_time"):
            counts["pending"] += 1
            if pending == "skip":
                counts["pending_skipped"] += 1
                continue
        else:
            start = row.integer("scheduled_time")
        duration = row.integer("deletion_time") - start
        if duration < 1:
            counts["clamped"] += 1
            duration = 1
        if phase == "Running":
            counts["censored"] += 1
        qos = row.text("qos")
        qos_seen[qos] += 1
        fields = {
            "id": name,
            "gpus": gpus,
            "actual_duration_s": max(1, math.ceil(duration * speed)),
            "gpu_types": _gpu_types(row, assumptions),
            "cpu": row.number("cpu_milli") / 1000,
            "memory_gb": row.number("memory_mib") / 1024,
            "weight": _weight(row, qos, assumptions),
            "topology": "node",
            "gpu_milli": milli,
        }
        rows.append((created, {**fields, "line": row.line}))
    if not rows:
        raise InputError(str(path), "(file)", "has no pods to convert")
    first = min(created for created, _ in rows)
    jobs = tuple(_job(str(path), created - first, spec) for created, spec in rows)
    report = OpenbPodReport(
        rows=counts["rows"],
        jobs=len(jobs),
        fractional=counts["fractional"],
        cpu_only=counts["cpu_only"],
        cpu_only_skipped=counts["cpu_only_skipped"],
        pending=counts["pending"],
        pending_skipped=counts["pending_skipped"],
        censored=counts["censored"],
        clamped=counts["clamped"],
        by_phase=dict(phases),
        by_qos=dict(qos_seen),
    )
    return jobs, report


def _gpu_types(row: Row, assumptions: Assumptions) -> tuple[str, ...]:
    """``gpu_spec`` (``V100M16|V100M32``, a set, may repeat) as our type names."""
    spec = row.text("gpu_spec")
    if not spec:
        return ()
    names = (model_of(row, "gpu_spec", m.strip(), assumptions).type for m in spec.split("|"))
    return tuple(dict.fromkeys(names))


def _weight(row: Row, qos: str, assumptions: Assumptions) -> float:
    try:
        return float(assumptions.qos_weights[qos])
    except KeyError:
        known = ", ".join(assumptions.qos_weights)
        raise row.error("qos", f"unknown QoS class (known: {known}; add it under [qos])") from None


def _job(source: str, submit_s: int, spec: dict[str, object]) -> TraceJob:
    line = spec.pop("line")
    try:
        return TraceJob(submit_s=submit_s, **spec)  # type: ignore[arg-type]
    except FieldError as exc:
        raise InputError(
            source, f"line {line}: {exc.path}", f"{exc.message} (got {exc.value!r})"
        ) from exc
