"""The topology graph and what it yields: NVLink blocks, eligible nodes, GPU sets.

One ``networkx.Graph`` holds GPUs, servers, racks and the spine; NVLink edges
carry a bandwidth. Solvers never see the graph: they get, per node, a
:class:`NodeTopology` (bit masks derived from the graph) and the eligibility
and GPU-set choices computed here. GPU sets are ints used as bit masks over
a node's GPU indices.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import cache, lru_cache

import networkx as nx

from whale_opt.memo import MEMO_SIZE, IdentityMemo
from whale_opt.problem_data import Instance, Node, QueuedJob

NVLINK_GBPS = {"nvswitch": 900.0, "hybrid-cube-mesh": 300.0, "pairs": 600.0, "edges": 300.0}
PCIE_GBPS = 64.0

_CUBE_MESH = (
    [(a, b) for a, b in itertools.combinations(range(4), 2)]
    + [(a, b) for a, b in itertools.combinations(range(4, 8), 2)]
    + [(i, i + 4) for i in range(4)]
)


def nvlink_edges(nvlink: str | tuple[tuple[int, int], ...], gpus: int) -> list[tuple[int, int]]:
    """NVLink-linked GPU index pairs of a node layout (FORMAT.md)."""
    if not isinstance(nvlink, str):
        return sorted({(min(a, b), max(a, b)) for a, b in nvlink})
    if nvlink == "nvswitch":
        return list(itertools.combinations(range(gpus), 2))
    if nvlink == "hybrid-cube-mesh":
        return list(_CUBE_MESH)
    if nvlink == "pairs":
        return [(i, i + 1) for i in range(0, gpus - 1, 2)]
    return []


def gpu_key(node_id: str, index: int) -> tuple[str, str]:
    """Graph key of a GPU."""
    return ("gpu", f"{node_id}/{index}")


def build_graph(cluster: Instance | tuple[Node, ...]) -> nx.Graph:
    """The cluster (an instance or its nodes) as a graph: GPU - server - rack - spine,
    plus NVLink edges.

    GPU vertices carry ``node``, ``index``, ``gpu_type`` and ``healthy``;
    NVLink edges carry ``kind="nvlink"`` and ``bandwidth_gbps``.
    """
    nodes = cluster if isinstance(cluster, tuple) else cluster.nodes
    graph = nx.Graph()
    graph.add_node(("spine",), kind="spine")
    for node in nodes:
        server = ("node", node.id)
        rack = ("rack", node.rack)
        graph.add_node(rack, kind="rack")
        graph.add_edge(rack, ("spine",), kind="network")
        graph.add_node(server, kind="node", healthy=not node.down, gpu_type=node.gpu_type)
        graph.add_edge(server, rack, kind="network")
        healthy = set(node.healthy_indices)
        for index in range(node.gpu_count):
            key = gpu_key(node.id, index)
            graph.add_node(
                key,
                kind="gpu",
                node=node.id,
                index=index,
                gpu_type=node.gpu_type,
                healthy=index in healthy,
            )
            graph.add_edge(key, server, kind="pcie", bandwidth_gbps=PCIE_GBPS)
        layout = node.nvlink if isinstance(node.nvlink, str) else "edges"
        for a, b in nvlink_edges(node.nvlink, node.gpu_count):
            graph.add_edge(
                gpu_key(node.id, a),
                gpu_key(node.id, b),
                kind="nvlink",
                bandwidth_gbps=NVLINK_GBPS.get(layout, 300.0),
            )
    return graph


def bits(mask: int) -> Iterator[int]:
    """Indices of the set bits of ``mask``, ascending."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def popcount(mask: int) -> int:
    """Number of set bits."""
    return mask.bit_count()


def _reach(adjacency: tuple[int, ...], mask: int, start: int) -> int:
    """The GPUs of ``mask`` NVLink-reachable from ``start`` (a one-GPU mask) within it."""
    seen = frontier = start
    while frontier:
        low = frontier & -frontier
        frontier ^= low
        step = adjacency[low.bit_length() - 1] & mask & ~seen
        seen |= step
        frontier |= step
    return seen


def _components(adjacency: tuple[int, ...], mask: int) -> list[int]:
    """Connected NVLink components of ``mask`` under ``adjacency``."""
    parts = []
    rest = mask
    while rest:
        seen = _reach(adjacency, mask, rest & -rest)
        parts.append(seen)
        rest &= ~seen
    return parts


@dataclass(frozen=True)
class NodeTopology:
    """A node's NVLink structure as bit masks (derived from the graph).

    ``adjacency[i]`` is the mask of GPUs NVLink-linked to GPU ``i``;
    ``healthy`` the mask of usable GPUs; ``clique`` whether every pair of
    healthy GPUs is linked (so any subset is NVLink-connected).
    """

    node: Node
    adjacency: tuple[int, ...]
    healthy: int
    clique: bool

    @property
    def size(self) -> int:
        """GPUs on the node, healthy or not."""
        return self.node.gpu_count

    @property
    def whole(self) -> int:
        """Mask of all the node's GPUs."""
        return (1 << self.node.gpu_count) - 1

    def connected(self, mask: int) -> bool:
        """Whether ``mask`` induces a connected NVLink subgraph (one GPU is)."""
        if mask == 0:
            return False
        if self.clique and mask & ~self.healthy == 0:
            return True
        return _reach(self.adjacency, mask, mask & -mask) == mask

    def components(self, mask: int) -> list[int]:
        """Connected NVLink components of ``mask``."""
        return _components(self.adjacency, mask)

    def largest_block(self, mask: int) -> int:
        """Size of the largest NVLink-connected part of ``mask``."""
        if self.clique:
            return popcount(mask & self.healthy)
        return max((popcount(part) for part in self.components(mask)), default=0)


def node_topologies(instance: Instance, graph: nx.Graph | None = None) -> tuple[NodeTopology, ...]:
    """One :class:`NodeTopology` per node, read off the topology graph.

    Without ``graph``, the result is memoised on the (immutable) node list:
    rounds on an unchanged cluster do not rebuild the graph.
    """
    if graph is None:
        # The same node tuple (an unchanged cluster's rounds) is found by identity
        # first; an equal one built anew, by value.
        return _BY_IDENTITY.get(instance.nodes, lambda: _topologies_of(instance.nodes))
    return _read_topologies(instance.nodes, graph)


_BY_IDENTITY: IdentityMemo[tuple[NodeTopology, ...]] = IdentityMemo(MEMO_SIZE)


@lru_cache(maxsize=16)
def _topologies_of(nodes: tuple[Node, ...]) -> tuple[NodeTopology, ...]:
    return _read_topologies(nodes, build_graph(nodes))


def _read_topologies(nodes: tuple[Node, ...], graph: nx.Graph) -> tuple[NodeTopology, ...]:
    result = []
    for node in nodes:
        adjacency = [0] * node.gpu_count
        healthy = 0
        for index in range(node.gpu_count):
            key = gpu_key(node.id, index)
            if graph.nodes[key]["healthy"]:
                healthy |= 1 << index
            for other in graph.neighbors(key):
                data = graph.edges[key, other]
                if data["kind"] == "nvlink":
                    adjacency[index] |= 1 << graph.nodes[other]["index"]
        clique = all((adjacency[i] | (1 << i)) & healthy == healthy for i in bits(healthy))
        result.append(NodeTopology(node, tuple(adjacency), healthy, clique))
    return tuple(result)


def needs_nvlink(job: QueuedJob) -> bool:
    """Whether the job's GPUs on each node must be NVLink-connected."""
    return job.topology == "nvlink" and job.gpu_count > 1


def single_node(job: QueuedJob, topo: NodeTopology) -> bool:
    """Whether ``job`` must sit on one node when placed on ``topo``'s GPU type.

    ``nvlink`` jobs no larger than a node and ``node`` jobs take one node;
    larger ``nvlink`` jobs take whole nodes of one rack; ``rack`` and ``any``
    jobs may spread.
    """
    if job.topology == "node":
        return True
    return job.topology == "nvlink" and job.gpu_count <= topo.size


def node_can_host(job: QueuedJob, topo: NodeTopology) -> bool:
    """Whether ``topo``'s node, when empty, could hold its share of ``job``."""
    if job.cpu_only:
        return not topo.node.down
    if topo.healthy == 0:
        return False
    if job.topology == "nvlink" and job.gpu_count > topo.size:
        # Whole-node member of a multi-node gang: every GPU healthy and linked.
        return topo.healthy == topo.whole and topo.connected(topo.whole)
    if job.topology == "node" or job.topology == "nvlink":
        if job.gpu_count > popcount(topo.healthy):
            return False
        return not needs_nvlink(job) or topo.largest_block(topo.healthy) >= job.gpu_count
    return True


def eligible_nodes(
    instance: Instance, position: int, topologies: tuple[NodeTopology, ...]
) -> tuple[int, ...]:
    """Positions of nodes that could hold (part of) queued job ``position``.

    Type, memory, health, draining and the node's NVLink structure are
    honoured; what is busy is not (see the solvers).
    """
    job = instance.queue[position]
    types = set(instance.eligible_types[position])
    hosts = [
        k
        for k, topo in enumerate(topologies)
        if topo.node.gpu_type in types and not topo.node.draining and node_can_host(job, topo)
    ]
    return gang_hosts(job, topologies, hosts)


def gang_hosts(
    job: QueuedJob, topologies: tuple[NodeTopology, ...], hosts: list[int]
) -> tuple[int, ...]:
    """Of nodes ``hosts`` (each able to hold its share of ``job`` when empty), those
    among which the whole gang fits, all of one GPU type: an NVLink job larger
    than a node on whole nodes of one size in one rack (so a multiple of that
    size), a ``rack`` job in one rack, an ``any`` job anywhere. (A gang asking
    more than its nodes could ever hold together never runs, whatever waits.)"""
    if job.cpu_only or job.topology == "node":
        return tuple(hosts)  # one node: node_can_host has said
    groups: dict[tuple[str, str, int], list[int]] = defaultdict(list)
    held: dict[tuple[str, str, int], int] = defaultdict(int)
    for k in hosts:
        topo = topologies[k]
        if job.topology == "nvlink":
            if topo.size >= job.gpu_count:
                key = ("", "", k)  # it holds the job alone
            elif job.gpu_count % topo.size:
                continue  # whole nodes of this size never add up to the gang
            else:
                key = (topo.node.gpu_type, topo.node.rack, topo.size)
        else:
            key = (topo.node.gpu_type, topo.node.rack if job.topology == "rack" else "", 0)
        groups[key].append(k)
        held[key] += popcount(topo.healthy)
    return tuple(sorted(k for key, ks in groups.items() if held[key] >= job.gpu_count for k in ks))


def nvlink_breaches(
    instance: Instance,
    topologies: tuple[NodeTopology, ...],
    job: QueuedJob,
    per_node: dict[int, int],
    masks: dict[int, int] | None,
) -> list[tuple[str, str]]:
    """How a placement of ``job`` (GPUs per node, and GPU masks when started)
    falls short of the NVLink rule, as (kind, message) pairs; empty when it holds.

    The rule: one node with NVLink-connected GPUs, or, for a job larger than
    a node, whole NVLink-connected nodes of one size in one rack. It is a
    requirement for ``topology: nvlink`` jobs and a priced preference for
    ``prefer_nvlink`` ones.
    """
    if job.gpu_count == 1 or not per_node:
        return []
    out: list[tuple[str, str]] = []
    racks = {instance.nodes[n].rack for n in per_node}
    if len(racks) > 1:
        out.append(("topology", f"nvlink job spans racks {sorted(racks)}"))
    nvlink_job = job if job.topology == "nvlink" else nvlink_shaped(job)
    topos = [topologies[n] for n in per_node]
    if len(per_node) > 1:
        for topo in topos:
            whole = per_node[instance.node_index[topo.node.id]] == topo.size
            if not whole or not node_can_host(nvlink_job, topo):
                out.append(
                    (
                        "topology",
                        f"multi-node nvlink job must take whole NVLink-connected nodes;"
                        f" {topo.node.id} does not qualify",
                    )
                )
        if job.gpu_count <= max(t.size for t in topos):
            out.append(("topology", "nvlink job that fits one node is split"))
        elif len({t.size for t in topos}) > 1:
            out.append(("topology", "multi-node nvlink job mixes node sizes"))
        return out
    (topo,) = topos
    if masks is not None:
        if not topo.connected(masks[instance.node_index[topo.node.id]]):
            out.append(("nvlink", f"GPUs on {topo.node.id} are not NVLink-connected"))
    elif not node_can_host(nvlink_job, topo):
        out.append(
            ("nvlink", f"{topo.node.id} has no NVLink-connected block of {job.gpu_count} GPUs")
        )
    return out


@lru_cache(maxsize=4096)  # bounded: a long-running scheduler sees jobs without end
def nvlink_shaped(job: QueuedJob) -> QueuedJob:
    """``job`` as if it required NVLink-connected GPUs (for ``prefer_nvlink``)."""
    return replace(job, topology="nvlink")


@cache
def _subsets(free: int, size: int) -> tuple[int, ...]:
    return tuple(
        sum(1 << i for i in combo) for combo in itertools.combinations(tuple(bits(free)), size)
    )


MAX_SUBSETS = 2_000


def choose_gpus(topo: NodeTopology, free: int, size: int, nvlink: bool) -> int | None:
    """The best ``size`` GPUs among ``free`` on one node, or None if none fit.

    With ``nvlink`` the set must be NVLink-connected. Among the sets that fit,
    take the one that leaves the largest NVLink block free (then the fewest
    free fragments, then the lowest indices), so large jobs still find room.
    """
    free &= topo.healthy
    if popcount(free) < size:
        return None
    if topo.clique or popcount(free) == size:
        chosen = 0
        for index in itertools.islice(bits(free), size):
            chosen |= 1 << index
        if nvlink and not topo.connected(chosen):
            return None
        return chosen
    return _best_set(topo.adjacency, free, size, nvlink)


# Keyed by the NVLink structure, not the node: identical nodes share answers, and a
# round's list schedules, bounds and replays ask the same few (free, size) again
# (a 16-GPU node with sparse links scans up to MAX_SUBSETS sets, ~20 ms, per ask).
@lru_cache(maxsize=1 << 16)
def _best_set(adjacency: tuple[int, ...], free: int, size: int, nvlink: bool) -> int | None:
    """:func:`choose_gpus` past its shortcuts: the scan of ``free``'s ``size``-subsets."""
    best: tuple[int, int, int] | None = None
    best_mask = None
    for count, mask in enumerate(_subsets(free, size)):
        if count >= MAX_SUBSETS and best_mask is not None:
            break
        if nvlink and (not mask or _reach(adjacency, mask, mask & -mask) != mask):
            continue
        score = _leftover_score(adjacency, free, mask)
        if best is None or score < best:
            best, best_mask = score, mask
    return best_mask


def _leftover_score(adjacency: tuple[int, ...], free: int, mask: int) -> tuple[int, int, int]:
    """Lower is better: the largest free NVLink block left (negated), the number of
    free fragments left, then the mask itself (lowest indices)."""
    parts = _components(adjacency, free & ~mask)
    return (-max((popcount(p) for p in parts), default=0), len(parts), mask)


def connected_sets(topo: NodeTopology, free: int, size: int, limit: int) -> list[int]:
    """Up to ``limit`` NVLink-connected sets of ``size`` of the ``free`` GPUs, in
    :func:`choose_gpus`'s order of preference (best first)."""
    free &= topo.healthy
    found = [m for m in _subsets(free, size) if topo.connected(m)]
    found.sort(key=lambda m: _leftover_score(topo.adjacency, free, m))
    return found[:limit]


def mask_to_ids(node: Node, mask: int) -> tuple[str, ...]:
    """Public GPU ids of the GPUs in ``mask``."""
    return tuple(node.gpu_id(i) for i in bits(mask))


def rack_groups(instance: Instance) -> dict[tuple[str, str], list[int]]:
    """Node positions by (GPU type, rack): the units pools are made of."""
    racks: dict[tuple[str, str], list[int]] = defaultdict(list)
    for k, node in enumerate(instance.nodes):
        racks[(node.gpu_type, node.rack)].append(k)
    return racks
