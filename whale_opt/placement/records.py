"""Placements, and the one translation between them and decision records."""

from __future__ import annotations

from dataclasses import dataclass

from whale_opt.decision import Action, JobDecision, placement_of
from whale_opt.problem_data import Instance
from whale_opt.topology import mask_to_ids


@dataclass(frozen=True)
class Placement:
    """Where and when a job goes: per node (position, GPU count, GPU mask now)."""

    start: int
    end: int
    gpu_type: str
    nodes: tuple[int, ...]
    counts: tuple[int, ...]
    masks: tuple[int, ...] = ()  # exact GPUs, only when start == 0


def to_job_decision(instance: Instance, position: int, placement: Placement) -> JobDecision:
    """A start (with GPU ids) or planned (with nodes and counts) job decision."""
    job = instance.queue[position]
    if placement.start == 0:
        gpus: tuple[str, ...] = ()
        for node, mask in zip(placement.nodes, placement.masks, strict=True):
            gpus += mask_to_ids(instance.nodes[node], mask)
        # A CPU-only job holds no GPU: its decision names its node.
        nodes = () if gpus else (instance.nodes[placement.nodes[0]].id,)
        return JobDecision(
            job.id, Action.START, gpu_ids=gpus, start_s=0, end_s=placement.end, nodes=nodes
        )
    return JobDecision(
        job.id,
        Action.PLANNED,
        start_s=placement.start,
        end_s=placement.end,
        nodes=tuple(instance.nodes[n].id for n in placement.nodes),
        node_gpus=placement.counts,
    )


def to_placement(instance: Instance, position: int, item: JobDecision) -> Placement | None:
    """The placement a start or planned decision describes (None when deferred)."""
    if item.action is Action.START:
        per_node, masks = placement_of(instance, item, len(item.gpu_ids))
        if not masks:
            raise ValueError(f"start of {item.id} names no known GPU or node")
        nodes = tuple(masks)
        gpu_type = instance.nodes[nodes[0]].gpu_type
        counts = tuple(per_node[n] for n in nodes)
        return Placement(0, item.end_s or 0, gpu_type, nodes, counts, tuple(masks.values()))
    if item.action is Action.PLANNED:
        nodes = tuple(instance.node_index[n] for n in item.nodes)
        gpu_type = instance.nodes[nodes[0]].gpu_type
        return Placement(item.start_s or 0, item.end_s or 0, gpu_type, nodes, item.node_gpus)
    return None
