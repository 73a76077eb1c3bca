"""Placement rules that the checker enforces and the solvers must respect.

Only rules that need more than the data model live here; the checker
(:mod:`whale_opt.check`) is their judge, the policies their users.

**Release rule.** GPU ids are not reserved for the future, so which GPUs a
node will have free, and whether they will be NVLink-linked, is unknown
until something on it ends. A planned NVLink job (2+ GPUs, one node) on a
node whose healthy GPUs are not all linked therefore starts no earlier than
the first end of a job on that node (running, started or planned).
"""

from __future__ import annotations

from collections.abc import Iterable

from whale_opt.decision import Action, JobDecision
from whale_opt.problem_data import FieldError, Instance, QueuedJob
from whale_opt.topology import node_topologies


def partly_linked(instance: Instance, node_pos: int) -> bool:
    """Whether some pair of the node's healthy GPUs has no NVLink."""
    return not node_topologies(instance)[node_pos].clique


def waits_for_release(instance: Instance, job: QueuedJob, nodes: tuple[int, ...]) -> bool:
    """Whether ``job`` planned on ``nodes`` falls under the release rule."""
    return (
        job.topology == "nvlink"
        and job.gpus >= 2
        and len(nodes) == 1
        and partly_linked(instance, nodes[0])
    )


def _nodes_of(instance: Instance, item: JobDecision) -> tuple[int, ...] | None:
    try:
        if item.action is Action.START:
            return tuple(dict.fromkeys(instance.parse_gpu(g).node for g in item.gpus))
    except FieldError:
        return None
    if item.action is Action.PLANNED and all(n in instance.node_index for n in item.nodes):
        return tuple(instance.node_index[n] for n in item.nodes)
    return None


def unreleased_plans(instance: Instance, items: Iterable[JobDecision]) -> dict[str, int | None]:
    """Planned jobs that break the release rule, with their node's first end (None: never).

    Items naming unknown jobs, nodes or GPUs are skipped (the checker reports them).
    """
    items = list(items)
    preempted = {item.id for item in items if item.action is Action.PREEMPT}
    first_end: dict[int, int] = {}

    def ends(nodes: Iterable[int], end: int) -> None:
        for node in nodes:
            if end > 0:
                first_end[node] = min(first_end.get(node, end), end)

    for held in instance.running:
        if held.id not in preempted:
            ends((instance.parse_gpu(g).node for g in held.gpus), held.remaining_s)
    placed = []
    for item in items:
        nodes = _nodes_of(instance, item)
        if nodes is not None and item.end_s is not None:
            ends(nodes, item.end_s)
            placed.append((item, nodes))
    queued = {job.id: job for job in instance.queue}
    broken: dict[str, int | None] = {}
    for item, nodes in placed:
        job = queued.get(item.id)
        if job is None or item.action is not Action.PLANNED:
            continue
        if waits_for_release(instance, job, nodes):
            release = first_end.get(nodes[0])
            if release is None or (item.start_s or 0) < release:
                broken[item.id] = release
    return broken
