"""The topology graph: NVLink layouts, blocks, GPU choice and eligibility."""

from __future__ import annotations

import itertools

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from whale_opt.problem_data import GpuType, Instance, Node, QueuedJob, RunningJob
from whale_opt.topology import (
    NVLINK_GBPS,
    NodeTopology,
    bits,
    build_graph,
    choose_gpus,
    eligible_nodes,
    gpu_key,
    node_topologies,
    nvlink_edges,
    popcount,
)

TYPES = {
    "A100-80G": GpuType("A100-80G", 80, 1.0),
    "V100-32G": GpuType("V100-32G", 32, 0.45),
}

CUBE_MESH = [
    (0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3),
    (4, 5), (4, 6), (4, 7), (5, 6), (5, 7), (6, 7),
    (0, 4), (1, 5), (2, 6), (3, 7),
]  # fmt: skip


def mask(*indices: int) -> int:
    return sum(1 << i for i in indices)


def topology_of(node: Node) -> NodeTopology:
    (topo,) = node_topologies(Instance("t", TYPES, (node,)))
    return topo


def cube(**changes: object) -> NodeTopology:
    return topology_of(Node("v", "V100-32G", 8, "hybrid-cube-mesh", **changes))  # type: ignore[arg-type]


def pairs(gpus: int = 8, **changes: object) -> NodeTopology:
    return topology_of(Node("p", "A100-80G", gpus, "pairs", **changes))  # type: ignore[arg-type]


# -- nvlink_edges: FORMAT.md's layouts ---------------------------------------


def test_cube_mesh_edges_are_two_quads_and_four_cross_links() -> None:
    assert sorted(nvlink_edges("hybrid-cube-mesh", 8)) == sorted(CUBE_MESH)


def test_nvswitch_links_every_pair() -> None:
    assert nvlink_edges("nvswitch", 4) == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    assert len(nvlink_edges("nvswitch", 8)) == 28
    assert nvlink_edges("nvswitch", 1) == []


@pytest.mark.parametrize(
    ("gpus", "expected"),
    [(8, [(0, 1), (2, 3), (4, 5), (6, 7)]), (4, [(0, 1), (2, 3)]), (3, [(0, 1)]), (1, [])],
)
def test_pairs_link_zero_one_two_three(gpus: int, expected: list[tuple[int, int]]) -> None:
    assert nvlink_edges("pairs", gpus) == expected


def test_pcie_has_no_nvlink() -> None:
    assert nvlink_edges("pcie", 8) == []


def test_explicit_edges_are_normalised_and_deduplicated() -> None:
    assert nvlink_edges(((1, 0), (0, 1), (2, 1)), 3) == [(0, 1), (1, 2)]
    assert nvlink_edges((), 4) == []


# -- build_graph -------------------------------------------------------------


@pytest.fixture
def two_racks() -> Instance:
    return Instance(
        "graph",
        TYPES,
        (
            Node("a", "A100-80G", 4, "nvswitch", rack="r1"),
            Node("v", "V100-32G", 8, "hybrid-cube-mesh", rack="r2", failed_gpus=(3,)),
            Node("p", "A100-80G", 4, "pairs", rack="r2", down=True),
            Node("e", "A100-80G", 3, ((0, 1), (2, 1)), rack="r1"),
        ),
    )


def test_graph_has_gpu_node_rack_and_spine_vertices(two_racks: Instance) -> None:
    graph = build_graph(two_racks)
    kinds = nx.get_node_attributes(graph, "kind")
    assert sum(1 for k in kinds.values() if k == "gpu") == 4 + 8 + 4 + 3
    assert {v for v, k in kinds.items() if k == "node"} == {("node", n) for n in "avpe"}
    assert {v for v, k in kinds.items() if k == "rack"} == {("rack", "r1"), ("rack", "r2")}
    assert kinds[("spine",)] == "spine"
    assert graph.has_edge(("node", "v"), ("rack", "r2"))
    assert graph.has_edge(("rack", "r1"), ("spine",))
    assert graph.has_edge(gpu_key("v", 7), ("node", "v"))
    assert nx.is_connected(graph)


def test_graph_gpu_attributes_mark_failed_and_down_hardware(two_racks: Instance) -> None:
    graph = build_graph(two_racks)
    gpu = graph.nodes[gpu_key("v", 2)]
    fields = (gpu["node"], gpu["index"], gpu["gpu_type"], gpu["healthy"])
    assert fields == ("v", 2, "V100-32G", True)
    assert graph.nodes[gpu_key("v", 3)]["healthy"] is False
    assert not any(graph.nodes[gpu_key("p", i)]["healthy"] for i in range(4))
    assert graph.nodes[("node", "p")]["healthy"] is False


def test_graph_nvlink_edges_follow_layouts_and_carry_bandwidth(two_racks: Instance) -> None:
    graph = build_graph(two_racks)
    nvlink = {(a, b): data for a, b, data in graph.edges(data=True) if data["kind"] == "nvlink"}

    def on(node: str) -> set[tuple[int, int]]:
        found = set()
        for a, b in nvlink:
            if graph.nodes[a]["node"] == node:
                i, j = graph.nodes[a]["index"], graph.nodes[b]["index"]
                found.add((min(i, j), max(i, j)))
        return found

    assert on("a") == set(itertools.combinations(range(4), 2))
    assert on("v") == set(CUBE_MESH)  # a failed GPU keeps its links; health is separate
    assert on("p") == {(0, 1), (2, 3)}
    assert on("e") == {(0, 1), (1, 2)}
    for (a, _), data in nvlink.items():
        layout = {"a": "nvswitch", "v": "hybrid-cube-mesh", "p": "pairs", "e": "edges"}[
            graph.nodes[a]["node"]
        ]
        assert data["bandwidth_gbps"] == NVLINK_GBPS[layout] > 0


# -- NodeTopology --------------------------------------------------------------


def test_cube_mesh_connectivity() -> None:
    topo = cube()
    assert not topo.clique
    assert topo.connected(mask(0))
    assert topo.connected(mask(0, 4))  # cross link
    assert not topo.connected(mask(0, 5))
    assert topo.connected(mask(0, 1, 2, 3)) and topo.connected(mask(4, 5, 6, 7))
    assert topo.connected(mask(0, 1, 4, 5))  # a face of the cube
    assert not topo.connected(mask(0, 1, 6, 7))
    assert topo.connected(topo.whole)
    assert not topo.connected(0)


def test_cube_mesh_components_and_largest_block() -> None:
    topo = cube()
    assert sorted(topo.components(mask(0, 1, 6, 7))) == [mask(0, 1), mask(6, 7)]
    assert topo.components(0) == []
    assert topo.largest_block(topo.whole) == 8
    assert topo.largest_block(mask(0, 1, 6, 7)) == 2
    assert topo.largest_block(mask(0, 6)) == 1  # one GPU per quad, not cross-linked
    assert topo.largest_block(0) == 0


def test_pairs_connectivity() -> None:
    topo = pairs()
    assert topo.connected(mask(0, 1)) and topo.connected(mask(6, 7))
    assert not topo.connected(mask(1, 2))
    assert not topo.connected(mask(0, 1, 2, 3))
    assert sorted(topo.components(topo.whole)) == [mask(0, 1), mask(2, 3), mask(4, 5), mask(6, 7)]
    assert topo.largest_block(topo.whole) == 2


def test_nvswitch_is_a_clique_even_with_a_failed_gpu() -> None:
    topo = topology_of(Node("a", "A100-80G", 8, "nvswitch", failed_gpus=(5,)))
    assert topo.clique
    assert topo.healthy == topo.whole & ~mask(5)
    assert topo.connected(mask(0, 7))
    assert topo.largest_block(topo.whole) == 7


def test_pcie_blocks_are_single_gpus() -> None:
    topo = topology_of(Node("c", "A100-80G", 4, "pcie"))
    assert topo.connected(mask(2)) and not topo.connected(mask(0, 1))
    assert topo.largest_block(topo.whole) == 1


# -- choose_gpus ----------------------------------------------------------------


def test_choose_gpus_on_idle_cube_mesh_keeps_a_whole_quad_free() -> None:
    topo = cube()
    first = choose_gpus(topo, topo.whole, 2, nvlink=True)
    assert first is not None and popcount(first) == 2 and topo.connected(first)
    rest = topo.whole & ~first
    # The pair sits inside one quad: the other quad is still whole.
    assert any(quad & rest == quad for quad in (mask(0, 1, 2, 3), mask(4, 5, 6, 7)))
    second = choose_gpus(topo, rest, 2, nvlink=True)
    assert second is not None and topo.connected(second)
    rest &= ~second
    # Two 2-GPU jobs later, a 4-GPU NVLink job still fits.
    four = choose_gpus(topo, rest, 4, nvlink=True)
    assert four is not None and topo.connected(four)
    assert four in (mask(0, 1, 2, 3), mask(4, 5, 6, 7))


def test_choose_gpus_fills_a_broken_pair_first() -> None:
    topo = pairs(4)
    first = choose_gpus(topo, topo.whole, 1, nvlink=False)
    assert first is not None
    second = choose_gpus(topo, topo.whole & ~first, 1, nvlink=False)
    assert second is not None
    taken = first | second
    assert taken in (mask(0, 1), mask(2, 3))  # one bridged pair left whole


def test_choose_gpus_needs_a_connected_set_for_nvlink() -> None:
    topo = cube()
    assert choose_gpus(topo, mask(0, 1, 6, 7), 4, nvlink=True) is None
    assert choose_gpus(topo, mask(0, 1, 6, 7), 4, nvlink=False) == mask(0, 1, 6, 7)
    assert choose_gpus(topo, mask(0, 5), 2, nvlink=True) is None
    assert choose_gpus(topo, mask(0, 1, 5), 2, nvlink=True) in (mask(0, 1), mask(1, 5))
    assert choose_gpus(pairs(), mask(1, 2), 2, nvlink=True) is None
    assert choose_gpus(topo, mask(0, 1), 3, nvlink=False) is None


def test_choose_gpus_never_takes_failed_gpus() -> None:
    for topo in (
        cube(failed_gpus=(0, 6)),
        topology_of(Node("a", "A100-80G", 8, "nvswitch", failed_gpus=(0, 1))),
        pairs(failed_gpus=(3,)),
    ):
        for size in range(1, 7):
            chosen = choose_gpus(topo, topo.whole, size, nvlink=False)
            if chosen is not None:
                assert chosen & ~topo.healthy == 0
                assert popcount(chosen) == size
        assert choose_gpus(topo, topo.whole, 8, nvlink=False) is None


def test_choose_gpus_never_takes_a_down_node() -> None:
    topo = cube(down=True)
    assert topo.healthy == 0
    assert choose_gpus(topo, topo.whole, 1, nvlink=False) is None


def test_bits_and_popcount() -> None:
    assert list(bits(mask(0, 3, 7))) == [0, 3, 7]
    assert popcount(mask(0, 3, 7)) == 3


# -- eligible_nodes ----------------------------------------------------------------


@pytest.fixture
def mixed() -> Instance:
    return Instance(
        "eligible",
        TYPES,
        (
            Node("a0", "A100-80G", 8, "nvswitch"),
            Node("a1", "A100-80G", 8, "pairs"),
            Node("a2", "A100-80G", 8, "pcie"),
            Node("a3", "A100-80G", 8, "nvswitch", failed_gpus=(2,)),
            Node("a4", "A100-80G", 8, "nvswitch", down=True),
            Node("v0", "V100-32G", 8, "hybrid-cube-mesh"),
        ),
        running=(RunningJob("r", ("a0/0", "a0/1"), 100),),  # busy does not matter
    )


def eligible(instance: Instance, job: QueuedJob) -> set[str]:
    inst = instance.replace(queue=(job,))
    found = eligible_nodes(inst, 0, node_topologies(inst))
    return {inst.nodes[k].id for k in found}


def test_eligible_nodes_honour_gpu_type_and_memory(mixed: Instance) -> None:
    assert eligible(mixed, QueuedJob("j", 1, 60, gpu_types=("V100-32G",))) == {"v0"}
    assert eligible(mixed, QueuedJob("j", 1, 60, min_gpu_memory_gb=40)) == {"a0", "a1", "a2", "a3"}
    assert eligible(mixed, QueuedJob("j", 1, 60, min_gpu_memory_gb=100)) == set()
    only_v100 = QueuedJob("j", 1, duration_by_type_s=(("V100-32G", 60),))
    assert eligible(mixed, only_v100) == {"v0"}


def test_eligible_nodes_honour_nvlink_block_size(mixed: Instance) -> None:
    assert eligible(mixed, QueuedJob("j", 2, 60)) == {"a0", "a1", "a3", "v0"}
    assert eligible(mixed, QueuedJob("j", 4, 60)) == {"a0", "a3", "v0"}
    assert eligible(mixed, QueuedJob("j", 8, 60)) == {"a0", "v0"}  # a3 has 7 healthy
    assert eligible(mixed, QueuedJob("j", 4, 60, topology="node")) == {"a0", "a1", "a2", "a3", "v0"}
    assert eligible(mixed, QueuedJob("j", 2, 60, topology="any")) == {"a0", "a1", "a2", "a3", "v0"}


def test_eligible_nodes_for_multi_node_gangs_need_whole_connected_nodes(mixed: Instance) -> None:
    # One whole linked A100 node (a0) and one V100 node: no 16-GPU gang of one type.
    assert eligible(mixed, QueuedJob("j", 16, 60)) == set()
    two = mixed.replace(nodes=(*mixed.nodes, Node("a5", "A100-80G", 8, "nvswitch")))
    assert eligible(two, QueuedJob("j", 16, 60)) == {"a0", "a5"}
    # Rack: the A100s hold 31 healthy GPUs in the rack, the V100 node alone 8.
    assert eligible(mixed, QueuedJob("j", 16, 60, topology="rack")) == {"a0", "a1", "a2", "a3"}


def test_a_gang_its_nodes_could_never_hold_together_has_none() -> None:
    """Whole linked nodes of one size in one rack, one rack, or the cluster: a gang
    larger than that is eligible nowhere (every solver defers it as unservable)."""
    nodes = (
        Node("a0", "A100-80G", 8, "nvswitch", rack="r1"),
        Node("a1", "A100-80G", 8, "nvswitch", rack="r1"),
        Node("a2", "A100-80G", 8, "nvswitch", rack="r2"),
        Node("b0", "A100-80G", 4, "nvswitch", rack="r2"),
    )
    inst = Instance("gangs", TYPES, nodes)
    assert eligible(inst, QueuedJob("j", 16, 60)) == {"a0", "a1"}
    assert eligible(inst, QueuedJob("j", 24, 60)) == set()  # r2's 8 + 4 are not one size
    assert eligible(inst, QueuedJob("j", 8, 60)) == {"a0", "a1", "a2"}  # alone each
    assert eligible(inst, QueuedJob("j", 12, 60)) == set()  # 8 + 4 of a node: not whole
    assert eligible(inst, QueuedJob("j", 12, 60, topology="rack")) == {"a2", "b0"} | {"a0", "a1"}
    assert eligible(inst, QueuedJob("j", 17, 60, topology="rack")) == set()
    assert eligible(inst, QueuedJob("j", 28, 60, topology="any")) == {"a0", "a1", "a2", "b0"}
    assert eligible(inst, QueuedJob("j", 29, 60, topology="any")) == set()
    assert eligible(inst, QueuedJob("j", 2**62, 60, topology="any")) == set()


def test_eligible_nodes_never_include_down_nodes(mixed: Instance) -> None:
    for job in (QueuedJob("j", 1, 60), QueuedJob("j", 3, 60, topology="any")):
        assert "a4" not in eligible(mixed, job)


@settings(max_examples=60, deadline=None)
@given(
    layout=st.sampled_from(["hybrid-cube-mesh", "pairs", ((0, 1), (1, 2), (2, 3), (3, 0), (4, 5))]),
    free=st.integers(0, 255),
    failed=st.lists(st.integers(0, 7), unique=True, max_size=2),
    size=st.integers(1, 5),
)
def test_choose_gpus_is_the_best_connected_choice(
    layout: str | tuple[tuple[int, int], ...], free: int, failed: list[int], size: int
) -> None:
    topo = topology_of(Node("n", "V100-32G", 8, layout, failed_gpus=tuple(failed)))
    usable = free & topo.healthy
    options = [
        m
        for m in (mask(*c) for c in itertools.combinations(bits(usable), size))
        if topo.connected(m)
    ]
    chosen = choose_gpus(topo, free, size, nvlink=True)
    if not options:
        assert chosen is None
        return
    assert chosen in options
    best = max(topo.largest_block(usable & ~m) for m in options)
    assert topo.largest_block(usable & ~chosen) == best
