"""The cut: pools of whole racks of one GPU type, each queued job assigned to one."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from whale_opt.decompose.limits import DEFAULT_MAX_GPUS
from whale_opt.memo import IdentityMemo
from whale_opt.placement.eligibility import Eligibility
from whale_opt.policies.wspt import wspt_order
from whale_opt.problem_data import Instance
from whale_opt.topology import gang_hosts, node_topologies, rack_groups


@dataclass(frozen=True)
class Pool:
    """Node positions of one pool and the queued jobs assigned to it."""

    nodes: tuple[int, ...]
    jobs: tuple[int, ...]


def pools(instance: Instance, max_gpus: int = DEFAULT_MAX_GPUS) -> list[Pool]:
    """Cut the cluster into pools and assign every servable queued job to one."""
    return _assign(instance, _node_view(instance, max_gpus))


def pool_count(instance: Instance, max_gpus: int = DEFAULT_MAX_GPUS) -> int:
    """How many of the node sets :func:`pools` cuts the cluster into some queued
    job could run in (at least as many as :func:`pools` assigns jobs to)."""
    view = _node_view(instance, max_gpus)
    reached: set[int] = set()
    for position in range(len(instance.queue)):
        reached |= view.pools_of(instance, position)
        if len(reached) == len(view.node_sets):
            break
    return len(reached)


class _NodeView:
    """What the cut depends on and that changes only with the node records: the
    pools' node sets, their healthy GPUs, and the nodes each job shape may use.

    Node records are replaced, never changed, so a view stays right while a
    round's node tuple is the very one it was made from (a replay's rounds
    share it until hardware fails or is repaired; see :mod:`whale_opt.memo`).
    """

    def __init__(self, instance: Instance, max_gpus: int) -> None:
        self.node_sets = _node_sets(instance, max_gpus)
        self.where = {k: p for p, nodes in enumerate(self.node_sets) for k in nodes}
        self.healthy = [
            sum(len(instance.nodes[k].healthy_indices) for k in nodes) or 1
            for nodes in self.node_sets
        ]
        self.topologies = node_topologies(instance)
        # The pools a job could run in depend only on its shape: its eligible types,
        # GPUs, topology need and whether it needs a GPU at all (see node_can_host).
        self.reach: dict[tuple[tuple[str, ...], int, str, bool], set[int]] = {}

    def pools_of(self, instance: Instance, position: int) -> set[int]:
        """The pools queued job ``position`` could run in: whose own nodes could hold
        its whole gang (an ``any`` gang larger than every pool's share of its type
        has none, and is placed on the whole cluster after the pools: the merge)."""
        job = instance.queue[position]
        shape = (instance.eligible_types[position], job.gpu_count, job.topology, job.cpu_only)
        if shape not in self.reach:
            inside: dict[int, list[int]] = defaultdict(list)
            for n in Eligibility(instance, self.topologies).eligible(position):
                inside[self.where[n]].append(n)
            self.reach[shape] = {
                p for p, nodes in inside.items() if gang_hosts(job, self.topologies, nodes)
            }
        return self.reach[shape]


# Views by node tuple (rounds of an unchanged cluster share it), then by max_gpus.
_VIEWS: IdentityMemo[dict[int, _NodeView]] = IdentityMemo(4)


def _node_view(instance: Instance, max_gpus: int) -> _NodeView:
    """The view of ``instance``'s nodes: the last rounds' while their nodes are unchanged."""
    views = _VIEWS.get(instance.nodes, dict)
    if max_gpus not in views:
        views[max_gpus] = _NodeView(instance, max_gpus)
    return views[max_gpus]


def _node_sets(instance: Instance, max_gpus: int) -> list[list[int]]:
    """Whole racks of one GPU type, in order, gathered up to ``max_gpus`` GPUs a set."""
    node_sets: list[list[int]] = []
    by_type: dict[str, list[list[int]]] = defaultdict(list)
    for (gpu_type, _), members in sorted(rack_groups(instance).items()):
        by_type[gpu_type].append(members)
    for rack_lists in by_type.values():
        current: list[int] = []
        held = 0
        for members in rack_lists:
            size = sum(instance.nodes[k].gpu_count for k in members)
            if current and held + size > max_gpus:
                node_sets.append(current)
                current, held = [], 0
            current = current + members
            held += size
        if current:
            node_sets.append(current)
    return node_sets


def _assign(instance: Instance, view: _NodeView) -> list[Pool]:
    """Each job, highest priority first, to the pool where it would end first if the
    pool's GPUs were one fluid machine (its backlog plus the job's duration there)."""
    node_sets, where, gpus = view.node_sets, view.where, view.healthy
    backlog = [0.0] * len(node_sets)  # seconds of work per GPU already there
    for held in instance.running:
        pool = where[instance.held_nodes(held)[0]]
        backlog[pool] += len(held.gpu_ids) * held.remaining_s / gpus[pool]
    assigned: list[list[int]] = [[] for _ in node_sets]
    for position in wspt_order(instance):
        job = instance.queue[position]
        options = view.pools_of(instance, position)
        if not options:
            continue
        duration = {
            p: instance.durations[position][instance.nodes[node_sets[p][0]].gpu_type]
            for p in options
        }
        best = min(options, key=lambda p: (backlog[p] + duration[p], p))
        backlog[best] += job.gpu_count * duration[best] / gpus[best]
        assigned[best].append(position)
    return [
        Pool(tuple(nodes), tuple(sorted(jobs)))
        for nodes, jobs in zip(node_sets, assigned, strict=True)
    ]
