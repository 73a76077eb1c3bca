"""Offered load of a trace on a cluster, and arrival compression to reach a load.

The offered load is the work a trace brings per second of its arrival window
over what the cluster can serve per second::

    load = sum(GPUs x duration at speed 1.0) / mean GPU speed
           / (healthy GPUs x (last submit - first submit))

where a share of a GPU (``gpu_milli``) counts as its fraction of one.

1.0 would keep the cluster exactly busy if packing were perfect. Public
traces often run far below that (a node list next to a pod list of a few
busy days), so benchmarks compress the arrival times by a constant factor:
the jobs, their sizes and durations and their arrival *order* and relative
spacing stay those of the trace; only the clock between arrivals runs
faster. This is how schedulers are compared at a chosen load on replayed
traces. Where compressing alone would squeeze months of arrivals into
minutes, the cluster is scaled down first: :func:`sample_nodes` keeps a
uniform sample of each GPU type's nodes, so the type mix stays.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace

from whale_opt.problem_data import MILLI, Instance
from whale_opt.sim.trace import TraceJob


def capacity(cluster: Instance) -> tuple[int, float]:
    """Healthy GPUs of ``cluster`` and their mean speed."""
    healthy = [n for n in cluster.nodes if n.healthy_indices]
    gpus = sum(len(n.healthy_indices) for n in healthy)
    if gpus == 0:
        raise ValueError(f"cluster {cluster.name} has no healthy GPU")
    speed = sum(len(n.healthy_indices) * cluster.gpu_types[n.gpu_type].speed for n in healthy)
    return gpus, speed / gpus


def work_s(job: TraceJob) -> float:
    """GPU-seconds of ``job`` at speed 1.0: its actual duration, else its estimate,
    else its shortest measured duration per type."""
    seconds = job.actual_duration_s or job.duration_s
    if seconds is None:
        seconds = min(s for _, s in job.duration_by_type_s)
    return job.gpus * job.gpu_milli / MILLI * seconds


def sample_nodes(
    cluster: Instance, share: float, seed: int = 0, rack_size: int | None = None
) -> Instance:
    """``cluster`` with ``share`` of each GPU type's nodes (rounded, at least one),
    drawn uniformly with ``seed``; the type's largest node always stays, so every
    job that fitted a node of the type still fits one.

    ``rack_size``: the kept nodes are racked anew, that many nodes of one type a
    rack in their order (``<type>-rNNN``), as the converters rack a whole
    cluster; otherwise a sample keeps its nodes' racks, a few nodes each."""
    if not 0 < share <= 1:
        raise ValueError(f"share must be in (0, 1] (got {share!r})")
    rng = random.Random(seed)
    by_type: dict[str, list[int]] = {}
    for k, node in enumerate(cluster.nodes):
        by_type.setdefault(node.gpu_type, []).append(k)
    kept: list[int] = []
    for members in by_type.values():
        largest = max(members, key=lambda k: (cluster.nodes[k].gpu_count, -k))
        rest = [k for k in members if k != largest]
        kept += [largest, *rng.sample(rest, max(0, round(share * len(members)) - 1))]
    nodes = tuple(cluster.nodes[k] for k in sorted(kept))
    if rack_size is not None:
        seen: dict[str, int] = {}
        racked = []
        for node in nodes:
            k = seen.get(node.gpu_type, 0)
            seen[node.gpu_type] = k + 1
            racked.append(replace(node, rack=f"{node.gpu_type}-r{k // rack_size:03d}"))
        nodes = tuple(racked)
    return replace(cluster, name=f"{cluster.name}-{share:g}", nodes=nodes)


def offered_load(trace: Sequence[TraceJob], cluster: Instance) -> float:
    """The offered load of ``trace`` on ``cluster`` (module docstring)."""
    if len(trace) < 2:
        raise ValueError("an offered load needs at least two arrivals")
    first = min(job.submit_s for job in trace)
    last = max(job.submit_s for job in trace)
    if last == first:
        raise ValueError("all jobs arrive at once: the offered load is unbounded")
    gpus, speed = capacity(cluster)
    return sum(work_s(job) for job in trace) / speed / (gpus * (last - first))


def compress_arrivals(trace: Sequence[TraceJob], factor: float) -> tuple[TraceJob, ...]:
    """``trace`` with the time between arrivals divided by ``factor`` (> 0),
    measured from the first arrival, which stays at 0."""
    if not factor > 0:
        raise ValueError(f"factor must be > 0 (got {factor!r})")
    first = min((job.submit_s for job in trace), default=0)
    return tuple(replace(job, submit_s=round((job.submit_s - first) / factor)) for job in trace)


def at_load(
    trace: Sequence[TraceJob], cluster: Instance, load: float
) -> tuple[tuple[TraceJob, ...], float]:
    """``trace`` compressed (or stretched) to offered ``load`` on ``cluster``,
    and the factor used. Rounding arrivals to whole seconds moves the load a
    little; the returned trace's :func:`offered_load` says by how much."""
    if not load > 0:
        raise ValueError(f"load must be > 0 (got {load!r})")
    factor = load / offered_load(trace, cluster)
    return compress_arrivals(trace, factor), factor
