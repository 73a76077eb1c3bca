"""Interchangeable nodes in a whole round's model, and the choices they make redundant.

Two nodes nothing uses (no running job, no share, nothing on the timeline,
no job there to end), alike in every field a placement's validity or price reads (GPU type and
count, NVLink layout, CPU, host memory, zone, failed GPUs, draining, and the
rack when some job of the round keeps to one rack or prices racks), are
interchangeable: swapping them in a decision gives one just as valid, of the
same cost. On a cluster with many idle nodes of a kind, a whole round's model
that offers every job each of them is mostly symmetric copies of itself, and
CP-SAT spends its time on them instead of on the proof.

So a class of such nodes is offered as a prefix. Its jobs are ranked (those
taking fewest nodes first, then by queue position); ``most[j]`` is the most
nodes of one class job ``j`` can take (one node, its gang's nodes, or one per
GPU). The job of rank ``r`` is offered the class's first ``most[0] + ... +
most[r]`` nodes. Any decision maps onto one that keeps to those prefixes: sort
the class nodes it uses by the lowest rank among their jobs, and move them, in
that order, to the front of the class; a node holding the rank-``r`` job has at
most ``most[0] + ... + most[r]`` nodes before it (each holds some job of rank
at most ``r``). :meth:`Interchangeable.canonical` is that map, for the incumbent (the model's
hint). The reduced model's optimum is therefore the whole round's.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace

from whale_opt.cpsat.candidates import Mode, job_mode, prices_nvlink
from whale_opt.decision import Action, JobDecision
from whale_opt.placement.eligibility import Eligibility
from whale_opt.placement.records import Placement
from whale_opt.placement.state import ClusterState
from whale_opt.problem_data import Instance
from whale_opt.topology import NodeTopology, node_topologies


@dataclass(frozen=True)
class Shape:
    """What the symmetry needs of one freed job: the nodes it may use (for its mode),
    the most of them it takes in one class, whether it cares which rack a
    node is in, and whether those nodes are all its choices
    (:func:`~whale_opt.cpsat.candidates.job_mode`)."""

    eligible: tuple[int, ...]
    most: int
    racks: bool
    complete: bool = True


@dataclass
class Interchangeable:
    """The classes of interchangeable nodes of a round and each job's offered prefix.

    ``classes``: each class's nodes in index order (classes of two or more);
    ``limit[c][position]``: how many of class ``c``'s first nodes job
    ``position`` is offered.
    """

    classes: list[tuple[int, ...]]
    limit: list[dict[int, int]]

    def offered(self, position: int, eligible: tuple[int, ...]) -> set[int]:
        """The nodes of ``eligible`` job ``position`` is offered: every node outside the
        classes, and its prefix of each class."""
        dropped: set[int] = set()
        for members, limit in zip(self.classes, self.limit, strict=True):
            if position in limit:
                dropped.update(members[limit[position] :])
        return {n for n in eligible if n not in dropped}

    def canonical(
        self,
        instance: Instance,
        incumbent: dict[int, JobDecision],
        placements: dict[int, Placement | None],
    ) -> dict[int, JobDecision]:
        """``incumbent`` (its jobs' ``placements`` by queue position) with each class's
        used nodes moved to the class's front, in the order of the lowest rank
        among their jobs: the same decision up to interchangeable nodes, within
        every job's offered prefix."""
        rename: dict[int, int] = {}
        nodes_of = {p: at.nodes for p, at in placements.items() if at is not None}
        for members, limit in zip(self.classes, self.limit, strict=True):
            rank = {p: k for k, p in enumerate(limit)}  # limits are listed in rank order
            inside = set(members)
            lowest: dict[int, int] = {}
            for position, nodes in nodes_of.items():
                if position not in rank:
                    continue
                for n in nodes:
                    if n in inside:
                        lowest[n] = min(lowest.get(n, len(rank)), rank[position])
            used = sorted(lowest, key=lambda n: (lowest[n], n))
            order = used + [n for n in members if n not in lowest]
            rename.update(
                (n, target) for n, target in zip(order, members, strict=True) if n != target
            )
        if not rename:
            return incumbent
        ids = {n: instance.nodes[target].id for n, target in rename.items()}
        return {p: _renamed(instance, item, ids) for p, item in incumbent.items()}


def job_shapes(
    instance: Instance,
    topologies: tuple[NodeTopology, ...],
    eligible: Callable[[int], tuple[int, ...]],
    placements: dict[int, Placement | None],
) -> dict[int, Shape]:
    """The :class:`Shape` of each job of ``placements`` (queue position -> its
    incumbent placement, or None) that some node could host; ``eligible(k)``:
    the nodes that could ever hold part of job ``k``."""
    shapes = {}
    alike: dict[tuple[object, ...], Shape | None] = {}  # jobs without a placement, by shape
    for position, placement in placements.items():
        job = instance.queue[position]
        nodes = eligible(position)
        nvlink = prices_nvlink(instance, position)
        types = instance.eligible_types[position]
        key = (types, job.gpu_count, job.topology, job.shares, job.cpu_only, nvlink)
        if placement is not None or key not in alike:
            found = job_mode(instance, topologies, nodes, position, placement)
            shape = None if found is None else _shape(instance, topologies, position, *found)
            if placement is not None:
                if shape is not None:
                    shapes[position] = shape
                continue
            alike[key] = shape
        if (shape := alike[key]) is not None:
            shapes[position] = shape
    return shapes


def _shape(
    instance: Instance,
    topologies: tuple[NodeTopology, ...],
    position: int,
    mode: Mode,
    nodes: tuple[int, ...],
    complete: bool,
) -> Shape:
    job = instance.queue[position]
    if mode is Mode.SINGLE:
        most = 1
    elif mode is Mode.GANG:
        most = job.gpu_count // topologies[nodes[0]].size
    else:
        most = job.gpu_count
    racks = mode is Mode.GANG or (
        mode is Mode.SPREAD and (job.topology == "rack" or prices_nvlink(instance, position))
    )
    return Shape(nodes, most, racks, complete)


def interchangeable(
    instance: Instance, shapes: dict[int, Shape], free: Callable[[int], bool]
) -> Interchangeable:
    """The classes of interchangeable nodes among the jobs' eligible ones that
    ``free(n)`` says nothing uses (and the model decides nothing else on), and
    each job's prefix of every class it may use."""
    racks = any(shape.racks for shape in shapes.values())
    groups: dict[tuple[object, ...], list[int]] = defaultdict(list)
    for n in sorted({n for shape in shapes.values() for n in shape.eligible}):
        if not free(n):
            continue
        node = instance.nodes[n]
        key = (
            node.gpu_type,
            node.gpu_count,
            node.nvlink,
            node.cpu,
            node.memory_gb,
            node.zone,
            node.failed_gpus,
            node.draining,
            node.down,
            node.rack if racks else None,
        )
        groups[key].append(n)
    classes = [tuple(members) for members in groups.values() if len(members) > 1]
    limits = []
    for members in classes:
        inside = set(members)
        users = sorted(
            (shape.most, position)
            for position, shape in shapes.items()
            if inside.intersection(shape.eligible)
        )
        limit, total = {}, 0
        for most, position in users:
            total += most
            limit[position] = min(total, len(members))
        limits.append(limit)
    return Interchangeable(classes, limits)


def whole_pairs(instance: Instance) -> tuple[int, int]:
    """How many queued jobs a whole round's model would hold and at most how many
    (job, node) choices it would offer them, known before its timeline: the
    nodes no running job uses stand for the idle ones (victims run somewhere,
    so the model finds at most as many). A gang that whole nodes of several
    sizes could hold counts every eligible node: the model takes its
    incumbent's size, unknown here."""
    topologies = node_topologies(instance)
    eligibility = Eligibility(instance, topologies)
    used = {instance.parse_gpu(gpu).node for job in instance.running for gpu in job.gpu_ids}
    used |= {instance.node_index[job.node] for job in instance.running if job.node is not None}
    shapes = job_shapes(
        instance,
        topologies,
        eligibility.eligible,
        dict.fromkeys(range(len(instance.queue))),
    )
    symmetry = interchangeable(instance, shapes, lambda n: n not in used)
    pairs = 0
    for position, shape in shapes.items():
        if not shape.complete:
            pairs += len(eligibility.eligible(position))
        else:
            pairs += len(symmetry.offered(position, shape.eligible))
    return len(shapes), pairs


def idle(timeline: ClusterState, n: int) -> bool:
    """Nothing on node ``n`` over the whole timeline, no share on its GPUs, and no job
    there to end (a running CPU-only job that asks for no CPU or memory uses nothing,
    but its end releases the node for a planned NVLink job: the release rule)."""
    return (
        math.isinf(timeline.first_end_at(n))
        and timeline.free_count(n) == timeline.healthy_count(n)
        and not any(timeline.gpu_profile(n).levels)
        and not any(timeline.cpu_profile(n).levels)
        and not any(timeline.mem_profile(n).levels)
        and not timeline.shares_now(n)
    )


def _renamed(instance: Instance, item: JobDecision, ids: dict[int, str]) -> JobDecision:
    """``item`` with its nodes renamed (``ids``: node position -> new node id)."""
    index = instance.node_index
    if item.action is Action.START:
        gpus = []
        for gpu in item.gpu_ids:
            ref = instance.parse_gpu(gpu)
            new = ids.get(ref.node)
            gpus.append(gpu if new is None else f"{new}/{ref.index}")
        nodes = tuple(ids.get(index[n], n) for n in item.nodes)
        return replace(item, gpu_ids=tuple(gpus), nodes=nodes)
    if item.action is Action.PLANNED:
        return replace(item, nodes=tuple(ids.get(index[n], n) for n in item.nodes))
    return item
