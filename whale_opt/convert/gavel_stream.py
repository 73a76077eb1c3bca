"""A Gavel-style stream: single-GPU jobs on 36 V100 + 36 P100 + 36 K80, as Gavel
(OSDI '20) evaluates heterogeneity-aware schedulers.

The cluster (:func:`gavel_cluster`) is ``per_type`` GPUs of each of the
converters' V100-16G, P100-16G and K80-12G types, in 4-GPU PCIe nodes, one
rack a type. The stream (:func:`stream`) is Gavel's single-GPU workload:
Poisson arrivals, each job a random Gavel job class and a V100 run time drawn
as Gavel draws it (80%: 10^U(1.5, 3) minutes, 20%: 10^U(3, 4) minutes); the
durations on P100 and K80 follow the measured throughputs
(:func:`~whale_opt.convert.gavel.with_gavel_speeds`). The fluid capacity
(:func:`fluid_capacity_per_h`) is the largest arrival rate a fractional,
throughput-optimal assignment of the classes to GPU types could serve.
"""

from __future__ import annotations

import math

import numpy as np
from ortools.linear_solver import pywraplp

from whale_opt.convert.assumptions import DEFAULT_ASSUMPTIONS
from whale_opt.convert.gavel import GavelThroughputs, gavel_durations, with_gavel_speeds
from whale_opt.problem_data import GpuType, Instance, Node
from whale_opt.sim.trace import TraceJob

SOURCE_MODELS = ("V100", "P100", "philly-12GB")  # the converters' V100-16G, P100-16G, K80-12G
GPUS_PER_NODE = 4
HOUR = 3600.0


def gavel_cluster(per_type: int) -> Instance:
    """``per_type`` GPUs of each of V100, P100 and K80, in 4-GPU PCIe nodes, one rack a type."""
    types: dict[str, GpuType] = {}
    nodes: list[Node] = []
    for source in SOURCE_MODELS:
        gpu_type = DEFAULT_ASSUMPTIONS.model(source).gpu_type
        types[gpu_type.name] = gpu_type
        prefix = gpu_type.name.split("-")[0].lower()
        count = math.ceil(per_type / GPUS_PER_NODE)
        for k in range(count):
            gpus = min(GPUS_PER_NODE, per_type - k * GPUS_PER_NODE)
            nodes.append(Node(f"{prefix}-{k:02d}", gpu_type.name, gpus, "pcie", rack=prefix))
    return Instance(name=f"gavel-{per_type}x3", gpu_types=types, nodes=tuple(nodes))


def v100_run_time_s(rng: np.random.Generator) -> float:
    """Gavel's duration draw (``scheduler/utils.py``, ``_generate_duration``): V100 seconds."""
    if rng.random() >= 0.8:
        return 60 * 10 ** rng.uniform(3, 4)
    return 60 * 10 ** rng.uniform(1.5, 3)


def mean_v100_run_time_s() -> float:
    """The mean of :func:`v100_run_time_s`: 10^U(a, b) has mean (10^b - 10^a) / ((b - a) ln 10)."""

    def log_uniform_mean(a: float, b: float) -> float:
        return (10**b - 10**a) / ((b - a) * math.log(10))

    return 60 * (0.8 * log_uniform_mean(1.5, 3) + 0.2 * log_uniform_mean(3, 4))


def v100_speed() -> float:
    return DEFAULT_ASSUMPTIONS.model("V100").speed


def stream(
    cluster: Instance, table: GavelThroughputs, jobs: int, rate_per_h: float, seed: int
) -> tuple[TraceJob, ...]:
    """``jobs`` single-GPU jobs, Poisson at ``rate_per_h``, Gavel classes and durations."""
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(HOUR / rate_per_h, jobs))
    # A job's reference duration is its run time on a speed-1.0 GPU: V100 time x V100 speed.
    plain = tuple(
        TraceJob(
            f"job-{k:05d}",
            int(arrivals[k]),
            1,
            duration_s=max(1, round(v100_run_time_s(rng) * v100_speed())),
            topology="any",
        )
        for k in range(jobs)
    )
    typed, _ = with_gavel_speeds(plain, table, seed, cluster.gpu_types)
    return typed


def fluid_capacity_per_h(cluster: Instance, table: GavelThroughputs) -> float:
    """Largest arrival rate (jobs an hour) a fractional assignment of the classes
    (drawn uniformly) to GPU types could serve: max lambda subject to, per type,
    sum over classes of (rate sent there x mean duration there) <= its GPUs."""
    classes = table.classes(1)
    reference = 10**6  # seconds; large, so the integer rounding of durations vanishes
    mean_s = mean_v100_run_time_s() * v100_speed() / reference
    gpus = {name: 0 for name in cluster.gpu_types}
    for node in cluster.nodes:
        gpus[node.gpu_type] += len(node.healthy_indices)
    solver = pywraplp.Solver.CreateSolver("GLOP")
    rate = solver.NumVar(0, solver.infinity(), "rate")
    load: dict[str, list[object]] = {name: [] for name in gpus}
    for c in classes:
        durations = gavel_durations(table, c, reference, cluster.gpu_types)
        sent = {t: solver.NumVar(0, solver.infinity(), f"{c}@{t}") for t in gpus}
        solver.Add(sum(sent.values()) == rate * (1 / len(classes)))
        for t, variable in sent.items():
            load[t].append(variable * (durations[t] * mean_s))
    for t, terms in load.items():
        solver.Add(sum(terms) <= gpus[t])  # type: ignore[arg-type]
    solver.Maximize(rate)
    if solver.Solve() != pywraplp.Solver.OPTIMAL:
        raise RuntimeError("the fluid capacity LP has no optimum")
    return rate.solution_value() * HOUR
