"""Alibaba PAI trace v2020: the machine spec table -> a cluster shape.

``pai_machine_spec.csv`` has no header line; its columns are
``machine, gpu_type, cap_cpu, cap_mem, cap_gpu`` (cores, GB, GPUs).
Machines without GPUs (``CPU``) are skipped. See ``docs/IMPORT.md``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from whale_opt.convert._common import FirstSeen, cluster, csv_rows, model_of, node_gpus, node_id
from whale_opt.convert.assumptions import DEFAULT_ASSUMPTIONS, Assumptions, GpuModel
from whale_opt.io import InputError
from whale_opt.problem_data import Instance

PAI_COLUMNS = ("machine", "gpu_type", "cap_cpu", "cap_mem", "cap_gpu")


@dataclass(frozen=True)
class PaiClusterReport:
    """Machines kept and skipped (no GPU), GPUs, machines per GPU model."""

    nodes: int = 0
    gpus: int = 0
    cpu_only_skipped: int = 0
    by_model: dict[str, int] = field(default_factory=dict)


def read_pai_cluster(
    path: str | Path, assumptions: Assumptions = DEFAULT_ASSUMPTIONS, name: str = ""
) -> tuple[Instance, PaiClusterReport]:
    """The cluster of a PAI machine spec; machine hashes become node ids."""
    machines: list[tuple[str, GpuModel, int, float, float]] = []
    skipped = 0
    by_model: Counter[str] = Counter()
    seen = FirstSeen(str(path), "machine id")
    for row in csv_rows(path, PAI_COLUMNS, header=PAI_COLUMNS):
        gpus = node_gpus(row, "cap_gpu")
        if gpus == 0:
            skipped += 1
            continue
        model_name = row.text("gpu_type")
        model = model_of(row, "gpu_type", model_name, assumptions)
        machine = node_id(row, "machine", seen)
        machines.append((machine, model, gpus, row.number("cap_cpu"), row.number("cap_mem")))
        by_model[model_name] += 1
    if not machines:
        raise InputError(str(path), "(file)", "has no machines with GPUs")
    instance = cluster(name or f"pai-{Path(path).stem}", machines, assumptions)
    report = PaiClusterReport(len(machines), sum(m[2] for m in machines), skipped, dict(by_model))
    return instance, report
