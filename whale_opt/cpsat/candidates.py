"""What one neighbourhood model chooses among, computed from the topology.

A neighbourhood frees a few queued jobs of the incumbent decision; every
other job keeps its placement and becomes fixed usage on the timeline. For
each freed job this module lists its GPU types with durations, the nodes it
may use (the best few by earliest fit on the fixed timeline, plus its
incumbent nodes), how it uses them (one node, whole nodes of one rack, or
GPU counts spread over nodes) and, on nodes whose NVLink layout is not all
to all, the exact GPU sets it may take if it starts now. The graph never
enters the model: only these lists do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from whale_opt.decision import JobDecision
from whale_opt.problem_data import Instance
from whale_opt.profile import INF
from whale_opt.timeline import ClusterTimeline, Placement
from whale_opt.topology import connected_sets, needs_nvlink, popcount, single_node


class Mode(Enum):
    """How a job uses its nodes."""

    SINGLE = "single"  # all GPUs on one node
    GANG = "gang"  # whole nodes of one rack (multi-node nvlink)
    SPREAD = "spread"  # any GPU counts over nodes (rack or any topology)


@dataclass
class FreeJob:
    """One freed job: its types, candidate nodes and start-now GPU sets."""

    position: int
    mode: Mode
    durations: dict[str, int]
    nodes: list[int]
    node_size: int = 0  # GANG: GPUs per node
    now_masks: dict[int, list[int]] = field(default_factory=dict)


@dataclass
class Neighbourhood:
    """The fixed part (a timeline with every other job on it) and the freed jobs."""

    instance: Instance
    timeline: ClusterTimeline
    jobs: list[FreeJob]
    incumbent: dict[int, JobDecision]
    # (node, start) of fixed planned NVLink jobs on partially linked nodes that only
    # a freed job ending there by that start can justify (the checker's release rule).
    needs_release: list[tuple[int, int]] = field(default_factory=list)


def free_job(
    instance: Instance,
    timeline: ClusterTimeline,
    position: int,
    incumbent: Placement | None,
    nodes_per_job: int,
    masks_per_node: int = 6,
) -> FreeJob | None:
    """The choices of job ``position`` on ``timeline`` (None: no node could ever host it)."""
    job = instance.queue[position]
    eligible = timeline.eligible(position)
    if not eligible:
        return None
    size = {n: timeline.topologies[n].size for n in eligible}
    if job.topology == "nvlink" and job.gpus > 1:
        # One node where a node is big enough; else whole nodes of one size.
        if any(single_node(job, timeline.topologies[n]) for n in eligible):
            mode = Mode.SINGLE
            eligible = tuple(n for n in eligible if size[n] >= job.gpus)
        else:
            mode = Mode.GANG
            sizes = {size[n] for n in eligible if job.gpus % size[n] == 0}
            if incumbent is not None:
                sizes &= {size[n] for n in incumbent.nodes}
            if not sizes:
                return None
            chosen_size = max(sizes)
            eligible = tuple(n for n in eligible if size[n] == chosen_size)
    elif single_node(job, timeline.topologies[eligible[0]]):
        mode = Mode.SINGLE
    else:
        mode = Mode.SPREAD
    durations = {
        instance.nodes[n].gpu_type: instance.durations[position][instance.nodes[n].gpu_type]
        for n in eligible
    }
    allowed = set(eligible)
    kept = {n for n in (incumbent.nodes if incumbent is not None else ()) if n in allowed}
    if mode is Mode.SINGLE:
        scored = []
        for n in eligible:
            duration = durations[instance.nodes[n].gpu_type]
            start = timeline.node_fit(n, 0, duration, job)
            if start < INF:
                scored.append((start + duration, popcount(timeline.free_now[n]), n))
        scored.sort()
        kept.update(n for _, _, n in scored[:nodes_per_job])
    else:
        best = timeline.best_placement(position)
        if best is not None:
            kept.update(n for n in best.nodes if n in allowed)
        if mode is Mode.GANG:
            # Whole nodes of the incumbent's and the best placement's racks.
            racks = {instance.nodes[n].rack for n in kept}
            kept.update(n for n in eligible if instance.nodes[n].rack in racks)
    nodes = sorted(kept)
    if not nodes:
        return None
    item = FreeJob(position, mode, durations, nodes)
    if mode is Mode.GANG:
        item.node_size = timeline.topologies[nodes[0]].size
    if mode is Mode.SINGLE and needs_nvlink(job):
        for n in nodes:
            if not timeline.topologies[n].clique and popcount(timeline.free_now[n]) >= job.gpus:
                item.now_masks[n] = connected_sets(
                    timeline.topologies[n], timeline.free_now[n], job.gpus, masks_per_node
                )
        if incumbent is not None and incumbent.start == 0:
            # Keep the incumbent's own GPU set on offer, so the hint is complete.
            for n, mask in zip(incumbent.nodes, incumbent.masks, strict=True):
                if n in item.now_masks and mask not in item.now_masks[n]:
                    item.now_masks[n].append(mask)
    return item
