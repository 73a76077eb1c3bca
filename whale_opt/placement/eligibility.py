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

from dataclasses import dataclass

import numpy as np

from whale_opt.problem_data import Instance, QueuedJob
from whale_opt.topology import NodeTopology, eligible_nodes, node_can_host


@dataclass(frozen=True, eq=False)
class NodeGroup:
    """Alike nodes a job could use: one GPU type, one size for an NVLink job (else 0)."""

    gpu_type: str
    size: int
    nodes: tuple[int, ...]  # node positions, in node order
    array: np.ndarray  # the same, as an array
    clique: np.ndarray  # per node: every pair of its healthy GPUs NVLink-linked
    racks: tuple[tuple[int, ...], ...]  # the nodes by rack, racks in order of first node
    rack_arrays: tuple[np.ndarray, ...]  # the same, as arrays
    rack_places: tuple[np.ndarray, ...]  # where each rack's nodes are in ``nodes``


def node_group(
    gpu_type: str, size: int, nodes: list[int], topologies: tuple[NodeTopology, ...]
) -> NodeGroup:
    """The :class:`NodeGroup` of ``nodes``."""
    racks: dict[str, list[int]] = {}
    place = {node: k for k, node in enumerate(nodes)}
    for node in nodes:
        racks.setdefault(topologies[node].node.rack, []).append(node)
    return NodeGroup(
        gpu_type,
        size,
        tuple(nodes),
        np.array(nodes, dtype=np.int64),
        np.array([topologies[n].clique for n in nodes], dtype=bool),
        tuple(tuple(members) for members in racks.values()),
        tuple(np.array(members, dtype=np.int64) for members in racks.values()),
        tuple(np.array([place[n] for n in members]) for members in racks.values()),
    )


class Eligibility:
    """The nodes each queued job could ever use, remembered per job shape."""

    def __init__(self, instance: Instance, topologies: tuple[NodeTopology, ...]) -> None:
        self.instance = instance
        self.topologies = topologies
        self._nodes: dict[tuple[tuple[str, ...], int, str], tuple[int, ...]] = {}
        self._groups: dict[tuple[object, ...], list[NodeGroup]] = {}

    def eligible(self, position: int, shaped: QueuedJob | None = None) -> tuple[int, ...]:
        """Nodes that could ever hold (part of) queued job ``position``, or of
        ``shaped``, the job with another topology (an NVLink-shaped try)."""
        job = self.instance.queue[position] if shaped is None else shaped
        # Eligibility depends only on the job's shape: share it between alike jobs.
        shape = (self.instance.eligible_types[position], job.gpu_count, job.topology)
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
        key = (types, job.gpu_count, job.topology, gpu_type, within)
        if key not in self._groups:
            members: dict[tuple[str, int], list[int]] = {}
            for node in self.eligible(position, shaped):
                if within is not None and node not in within:
                    continue
                topo = self.topologies[node]
                size = topo.size if job.topology == "nvlink" else 0
                if gpu_type is None or topo.node.gpu_type == gpu_type:
                    members.setdefault((topo.node.gpu_type, size), []).append(node)
            self._groups[key] = [
                node_group(name, size, nodes, self.topologies)
                for (name, size), nodes in members.items()
            ]
        return self._groups[key]
