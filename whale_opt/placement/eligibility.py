"""Which nodes a queued job could ever use, by the job's shape, in groups a search scans.

Eligibility depends on the instance and the nodes' NVLink structure only,
never on what is busy: an :class:`Eligibility` remembers it per job shape
(eligible GPU types, GPU count, topology) and is shared by every copy of a
cluster state. A :class:`NodeGroup` is the unit a search scans: a job's
eligible nodes of one GPU type (and, for an NVLink job, one node size), with
the arrays the vectorised queries (:class:`~whale_opt.placement.index.FreeIndex`)
take.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from whale_opt.memo import MEMO_SIZE, IdentityMemo
from whale_opt.problem_data import Instance, QueuedJob
from whale_opt.topology import NodeTopology, eligible_nodes, node_can_host, node_topologies


class NodeGroup:
    """Alike nodes a job could use: one GPU type, one size for an NVLink job (else 0).

    ``nodes`` are node positions in node order; the arrays and rack groupings
    are made when first read.
    """

    def __init__(
        self, gpu_type: str, size: int, nodes: list[int], topologies: tuple[NodeTopology, ...]
    ) -> None:
        self.gpu_type = gpu_type
        self.size = size
        self.nodes = tuple(nodes)
        self._topologies = topologies

    @cached_property
    def array(self) -> np.ndarray:
        """:attr:`nodes` as an array."""
        return np.array(self.nodes, dtype=np.int64)

    @cached_property
    def clique(self) -> np.ndarray:
        """Per node: whether every pair of its healthy GPUs is NVLink-linked."""
        return np.array([self._topologies[n].clique for n in self.nodes], dtype=bool)

    @cached_property
    def racks(self) -> tuple[tuple[int, ...], ...]:
        """The nodes by rack, racks in the order of their first node."""
        by_rack: dict[str, list[int]] = {}
        for node in self.nodes:
            by_rack.setdefault(self._topologies[node].node.rack, []).append(node)
        return tuple(tuple(members) for members in by_rack.values())

    @cached_property
    def rack_arrays(self) -> tuple[np.ndarray, ...]:
        """:attr:`racks` as arrays."""
        return tuple(np.array(members, dtype=np.int64) for members in self.racks)

    @cached_property
    def rack_places(self) -> tuple[np.ndarray, ...]:
        """Where each rack's nodes are in :attr:`nodes`."""
        place = {node: k for k, node in enumerate(self.nodes)}
        return tuple(np.array([place[n] for n in members]) for members in self.racks)


class _Shapes:
    """What :class:`Eligibility` found per job shape on one tuple of topologies."""

    def __init__(self) -> None:
        self.nodes: dict[tuple[tuple[str, ...], int, str, str | None], tuple[int, ...]] = {}
        self.groups: dict[tuple[object, ...], list[NodeGroup]] = {}


# Eligibility depends on the nodes' records and topologies only: rounds on an
# unchanged cluster (the same topologies tuple) share what was found.
_SHAPES: IdentityMemo[_Shapes] = IdentityMemo(MEMO_SIZE)


class Eligibility:
    """The nodes each queued job could ever use, remembered per job shape (and
    shared by the rounds of one unchanged cluster)."""

    def __init__(self, instance: Instance, topologies: tuple[NodeTopology, ...]) -> None:
        self.instance = instance
        self.topologies = topologies
        shapes = _SHAPES.get(topologies, _Shapes)
        self._nodes = shapes.nodes
        self._groups = shapes.groups
        self._within: dict[tuple[object, ...], list[NodeGroup]] = {}  # this round's only

    def eligible(self, position: int, shaped: QueuedJob | None = None) -> tuple[int, ...]:
        """Nodes that could ever hold (part of) queued job ``position``, or of
        ``shaped``, the job with another topology (an NVLink-shaped try)."""
        job = self.instance.queue[position] if shaped is None else shaped
        # Eligibility depends only on the job's shape: share it between alike jobs. A
        # shaped try is the job's own nodes that could host the shape, so it is keyed
        # by the job's own topology too (never taken for a job of the shape's).
        origin = None if shaped is None else self.instance.queue[position].topology
        shape = (self.instance.eligible_types[position], job.gpu_count, job.topology, origin)
        if shape not in self._nodes:
            if shaped is None:
                found = eligible_nodes(self.instance, position, self.topologies)
            else:
                found = tuple(
                    n for n in self.eligible(position) if node_can_host(job, self.topologies[n])
                )
            self._nodes[shape] = found
        return self._nodes[shape]

    def node_groups(
        self,
        position: int,
        shaped: QueuedJob | None = None,
        gpu_type: str | None = None,
        within: frozenset[int] | None = None,
    ) -> list[NodeGroup]:
        """:meth:`eligible` nodes (only of ``gpu_type``, only ``within``) by GPU type,
        and for an NVLink job by node size too (whether it fits one node or takes
        whole ones depends on it), in node order; remembered per job shape."""
        job = self.instance.queue[position] if shaped is None else shaped
        types = self.instance.eligible_types[position]
        origin = None if shaped is None else self.instance.queue[position].topology
        key = (types, job.gpu_count, job.topology, origin, gpu_type, within)  # as in eligible()
        # Groups within some nodes (a pool, a counterfactual) are this round's alone.
        memo = self._groups if within is None else self._within
        if key not in memo:
            members: dict[tuple[str, int], list[int]] = {}
            for node in self.eligible(position, shaped):
                if within is not None and node not in within:
                    continue
                topo = self.topologies[node]
                size = topo.size if job.topology == "nvlink" else 0
                if gpu_type is None or topo.node.gpu_type == gpu_type:
                    members.setdefault((topo.node.gpu_type, size), []).append(node)
            memo[key] = [
                NodeGroup(name, size, nodes, self.topologies)
                for (name, size), nodes in members.items()
            ]
        return memo[key]


def eligible_counts(instance: Instance) -> list[int]:
    """Per queued job, the number of nodes it could ever use (alike jobs share the
    count): the (job, eligible node) pairs the cost models count."""
    eligibility = Eligibility(instance, node_topologies(instance))
    return [len(eligibility.eligible(k)) for k in range(len(instance.queue))]
