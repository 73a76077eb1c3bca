"""What the CP-SAT model chooses among: per job, GPU types and start-now options.

The model is exact about *now* (which job starts on which node's free GPUs,
NVLink-connected where asked, within CPU and host memory) and aggregates the
*future* per GPU-type pool (a cumulative over GPU counts), which the decoder
turns into concrete planned nodes by list scheduling. This module computes
the options from the topology and the timeline; the graph never enters the
model.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from whale_opt.decision import JobDecision
from whale_opt.problem_data import Instance
from whale_opt.timeline import EPS, ClusterTimeline
from whale_opt.topology import bits, needs_nvlink, popcount, single_node


@dataclass(frozen=True)
class NowOption:
    """One way to start a job now.

    ``nodes`` with per-node ``counts``; ``masks`` fixes exact GPUs on nodes
    whose NVLink layout matters (empty: any free GPUs of the node will do).
    """

    gpu_type: str
    nodes: tuple[int, ...]
    counts: tuple[int, ...]
    masks: tuple[int, ...] = ()
    penalty: float = 0.0


@dataclass
class JobData:
    """Per job: eligible types with durations, and its start-now choices.

    ``options``: single-node placements; ``gangs``: (type, whole free nodes of
    one rack, GPUs per node) to pick ``gpus / size`` nodes from; ``spread``:
    (type, nodes) to take any GPU counts from (``rack`` / ``any`` jobs).
    """

    position: int
    durations: dict[str, int]
    options: list[NowOption] = field(default_factory=list)
    gangs: list[tuple[str, tuple[int, ...], int]] = field(default_factory=list)
    spread: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)


@dataclass
class RoundData:
    """Everything the model needs, computed once."""

    instance: Instance
    timeline: ClusterTimeline
    jobs: list[JobData]
    pools: dict[str, int]  # GPU type -> healthy GPUs
    exact: bool = True  # False when options were pruned: the model is then no relaxation


def _room_now(timeline: ClusterTimeline, node: int) -> tuple[int, float, float]:
    """Free GPUs, CPU and memory on ``node`` at t=0 (running jobs only shrink later)."""
    rec = timeline.instance.nodes[node]
    return (
        popcount(timeline.free_now[node]),
        rec.cpu - timeline.cpu_use[node].level_at(0),
        rec.memory_gb - timeline.mem_use[node].level_at(0),
    )


def _fits_now(timeline: ClusterTimeline, node: int, gpus: int, total: int, position: int) -> bool:
    job = timeline.instance.queue[position]
    free, cpu, memory = _room_now(timeline, node)
    share = gpus / total
    return free >= gpus and job.cpu * share <= cpu + EPS and job.memory_gb * share <= memory + EPS


def _connected_masks(timeline: ClusterTimeline, node: int, size: int, limit: int) -> list[int]:
    """Up to ``limit`` NVLink-connected sets of ``size`` free GPUs, least fragmenting first."""
    topo = timeline.topologies[node]
    free = timeline.free_now[node]
    found = []
    for combo in itertools.combinations(tuple(bits(free)), size):
        mask = sum(1 << i for i in combo)
        if topo.connected(mask):
            rest = topo.components(free & ~mask)
            score = (-max((popcount(p) for p in rest), default=0), len(rest), mask)
            found.append((score, mask))
    found.sort()
    return [mask for _, mask in found[:limit]]


def build_round(
    instance: Instance,
    greedy: dict[str, JobDecision],
    *,
    nodes_per_type: int = 8,
    masks_per_node: int = 4,
) -> RoundData:
    """Types, durations and start-now options for every servable queued job.

    Per job and GPU type, at most ``nodes_per_type`` nodes (tightest fit
    first, plus the node the greedy chose) and ``masks_per_node`` GPU sets
    per node are kept; pruning clears :attr:`RoundData.exact`.
    """
    timeline = ClusterTimeline(instance)
    pools: dict[str, int] = {}
    for topo in timeline.topologies:
        pools[topo.node.gpu_type] = pools.get(topo.node.gpu_type, 0) + popcount(topo.healthy)
    data = RoundData(instance, timeline, [], pools)
    for position, job in enumerate(instance.queue):
        eligible = timeline.eligible(position)
        if not eligible:
            continue
        types = {instance.nodes[n].gpu_type for n in eligible}
        durations = {p: instance.durations[position][p] for p in sorted(types)}
        item = JobData(position, durations)
        greedy_nodes = {gpu.rpartition("/")[0] for gpu in greedy[job.id].gpus}
        for gpu_type in durations:
            nodes = [n for n in eligible if instance.nodes[n].gpu_type == gpu_type]
            if single_node(job, timeline.topologies[nodes[0]]):
                _single_options(
                    data, item, gpu_type, nodes, greedy_nodes, nodes_per_type, masks_per_node
                )
            elif job.topology == "nvlink":
                _gang_options(data, item, gpu_type, nodes)
            else:
                groups: dict[str, list[int]] = {}
                for n in nodes:
                    if _room_now(timeline, n)[0] > 0:
                        key = instance.nodes[n].rack if job.topology == "rack" else "*"
                        groups.setdefault(key, []).append(n)
                item.spread.extend((gpu_type, tuple(g)) for g in groups.values())
        data.jobs.append(item)
    return data


def _penalty(instance: Instance, position: int, nodes: tuple[int, ...]) -> float:
    job = instance.queue[position]
    if job.zone is None:
        return 0.0
    outside = any(instance.nodes[n].zone != job.zone for n in nodes)
    return job.weight * instance.policy.zone_penalty_s if outside else 0.0


def _single_options(
    data: RoundData,
    item: JobData,
    gpu_type: str,
    nodes: list[int],
    greedy_nodes: set[str],
    nodes_per_type: int,
    masks_per_node: int,
) -> None:
    instance, timeline = data.instance, data.timeline
    job = instance.queue[item.position]
    fitting = [n for n in nodes if _fits_now(timeline, n, job.gpus, job.gpus, item.position)]
    fitting.sort(key=lambda n: (popcount(timeline.free_now[n]), n))
    kept = fitting[:nodes_per_type]
    kept += [n for n in fitting[nodes_per_type:] if instance.nodes[n].id in greedy_nodes]
    if len(kept) < len(fitting):
        data.exact = False
    for n in kept:
        topo = timeline.topologies[n]
        penalty = _penalty(instance, item.position, (n,))
        if needs_nvlink(job) and not topo.clique:
            masks = _connected_masks(timeline, n, job.gpus, masks_per_node + 1)
            if len(masks) > masks_per_node:
                data.exact = False
                masks = masks[:masks_per_node]
            for mask in masks:
                item.options.append(NowOption(gpu_type, (n,), (job.gpus,), (mask,), penalty))
        else:
            item.options.append(NowOption(gpu_type, (n,), (job.gpus,), (), penalty))


def _gang_options(data: RoundData, item: JobData, gpu_type: str, nodes: list[int]) -> None:
    """Whole free nodes of one rack, per rack: the model picks k of them."""
    instance, timeline = data.instance, data.timeline
    job = instance.queue[item.position]
    size = timeline.topologies[nodes[0]].size
    if job.gpus % size:
        return
    k = job.gpus // size
    by_rack: dict[str, list[int]] = {}
    for n in nodes:
        topo = timeline.topologies[n]
        if (
            topo.size == size
            and timeline.free_now[n] == topo.whole
            and _fits_now(timeline, n, size, job.gpus, item.position)
        ):
            by_rack.setdefault(instance.nodes[n].rack, []).append(n)
    item.gangs.extend((gpu_type, tuple(v), size) for v in by_rack.values() if len(v) >= k)
