"""Strategies for the cluster side of an instance: GPU types, NVLink layouts,
priority classes and nodes (drawn from a few server models).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import replace
from typing import NamedTuple

from hypothesis import strategies as st

from whale_opt.problem_data import DEFAULT_PRIORITY_CLASSES, GpuType, Node, PriorityClass

GPU_CATALOGUE: tuple[GpuType, ...] = (
    GpuType("A100-80G", 80, 1.0),
    GpuType("H100-80G", 80, 2.0),
    GpuType("V100-32G", 32, 0.45),
    GpuType("A100-40G", 40, 1.0),
    GpuType("L4-24G", 24, 0.6),
    GpuType("T4-16G", 16, 0.25),
)
"""GPU models the strategies draw from (name, memory GB, speed)."""

ZONE_NAMES = ("east", "west")
NODE_SIZES = (8, 4, 2, 1, 3, 6, 16)
NODE_CPUS = (128, 64, 32, 16)
NODE_MEMORIES_GB = (1024, 512, 256, 64)
CUSTOM_CLASS_NAMES = ("urgent", "batch", "spot")
CLASS_WEIGHTS = (1.0, 0.5, 2.0, 5.0, 0.1)


def _rarely(draw: st.DrawFn, one_in: int) -> bool:
    """True about once in ``one_in`` draws; shrinks towards False."""
    return draw(st.integers(0, one_in - 1)) == one_in - 1


def gpu_types(min_types: int = 1, max_types: int = 3) -> st.SearchStrategy[dict[str, GpuType]]:
    """GPU types keyed by name, drawn from :data:`GPU_CATALOGUE`.

    Parameters
    ----------
    min_types, max_types
        How many distinct types to draw (at most ``len(GPU_CATALOGUE)``).

    Returns
    -------
    SearchStrategy[dict[str, GpuType]]
        Mappings fit for ``Instance(gpu_types=...)``.
    """
    return st.lists(
        st.sampled_from(GPU_CATALOGUE),
        min_size=min_types,
        max_size=min(max_types, len(GPU_CATALOGUE)),
        unique_by=lambda t: t.name,
    ).map(lambda types: {t.name: t for t in types})


def nvlink_layouts(gpus: int) -> st.SearchStrategy[str | tuple[tuple[int, int], ...]]:
    """Every NVLink layout a node of ``gpus`` GPUs may declare.

    Named layouts (``nvswitch``, ``pairs``, ``pcie`` and, for 8 GPUs,
    ``hybrid-cube-mesh``) and explicit edge lists: a ring, a chain, or any
    set of links (possibly empty, possibly disconnected, pairs in either
    order).

    Parameters
    ----------
    gpus
        GPUs on the node (>= 1).

    Returns
    -------
    SearchStrategy[str | tuple[tuple[int, int], ...]]
        Values fit for ``Node(nvlink=...)``.
    """
    named = ["nvswitch", "pcie", "pairs"] + (["hybrid-cube-mesh"] if gpus == 8 else [])
    options: list[st.SearchStrategy[str | tuple[tuple[int, int], ...]]] = [st.sampled_from(named)]
    if gpus >= 2:
        chain = tuple((i, i + 1) for i in range(gpus - 1))
        ring = (*chain, (gpus - 1, 0)) if gpus >= 3 else chain
        pairs = list(itertools.combinations(range(gpus), 2))
        options.append(st.sampled_from([chain, ring]))
        options.append(
            st.lists(
                st.tuples(st.sampled_from(pairs), st.booleans()),
                unique_by=lambda edge: edge[0],
                max_size=len(pairs),
            ).map(lambda edges: tuple((b, a) if flip else (a, b) for (a, b), flip in edges))
        )
    return st.one_of(options)


@st.composite
def priority_classes(
    draw: st.DrawFn, *, min_custom: int = 0, max_custom: int = 2
) -> dict[str, PriorityClass]:
    """Priority classes keyed by name: the defaults, now and then one redefined,
    and custom ones.

    Custom classes (``urgent``, ``batch``, ``spot``) take any weight factor
    (0.1 to 5), rank (-1 to 3, so ties with the defaults happen) and
    preemptibility; a redefined default (``online``, ``training``,
    ``best-effort``) keeps its name with new values, as an instance file
    may redefine it.

    Parameters
    ----------
    min_custom, max_custom
        How many custom classes (at most ``len(CUSTOM_CLASS_NAMES)``).

    Returns
    -------
    SearchStrategy[dict[str, PriorityClass]]
        Mappings fit for ``Instance(priority_classes=...)``.
    """
    names = draw(
        st.lists(
            st.sampled_from(CUSTOM_CLASS_NAMES),
            unique=True,
            min_size=min_custom,
            max_size=min(max_custom, len(CUSTOM_CLASS_NAMES)),
        )
    )
    if _rarely(draw, 4):
        names.append(draw(st.sampled_from(sorted(DEFAULT_PRIORITY_CLASSES))))
    classes = dict(DEFAULT_PRIORITY_CLASSES)
    for name in names:
        classes[name] = PriorityClass(
            name,
            weight=draw(st.sampled_from(CLASS_WEIGHTS)),
            rank=draw(st.integers(-1, 3)),
            preemptible=draw(st.booleans()),
        )
    return classes


class _NodeKind(NamedTuple):
    """A server model: what identical nodes share."""

    gpu_type: str
    gpu_count: int
    nvlink: str | tuple[tuple[int, int], ...]
    cpu: float
    memory_gb: float


@st.composite
def _node_kind(draw: st.DrawFn, type_names: Sequence[str]) -> _NodeKind:
    """A server model: GPU type, size, NVLink layout, CPU and host memory."""
    gpus = draw(st.sampled_from(NODE_SIZES))
    return _NodeKind(
        gpu_type=draw(st.sampled_from(type_names)),
        gpu_count=gpus,
        nvlink=draw(nvlink_layouts(gpus)),
        cpu=draw(st.sampled_from(NODE_CPUS)),
        memory_gb=draw(st.sampled_from(NODE_MEMORIES_GB)),
    )


@st.composite
def nodes(
    draw: st.DrawFn,
    type_names: Sequence[str] = ("A100-80G",),
    *,
    min_nodes: int = 1,
    max_nodes: int = 6,
    max_racks: int = 3,
    zones: Sequence[str] = ZONE_NAMES,
    with_failures: bool = True,
    draining: bool = False,
) -> tuple[Node, ...]:
    """Servers of a few models, spread over racks, some broken, some draining.

    Nodes are drawn from one to three server models, as in a real cluster,
    so identical nodes (interchangeable for a multi-node gang) are common,
    yet one GPU type may come in nodes of different sizes. Each rack sits in
    one zone.

    Parameters
    ----------
    type_names
        GPU type names the nodes may carry.
    min_nodes, max_nodes
        How many nodes.
    max_racks
        Racks ``r0`` .. ``r{max_racks - 1}`` the nodes are spread over.
    zones
        Zone names; empty for nodes without a zone.
    with_failures
        Whether some nodes are down and some GPUs failed.
    draining
        Whether some nodes drain (about one in three, at least one; a
        draining node may also be down or have failed GPUs).

    Returns
    -------
    SearchStrategy[tuple[Node, ...]]
        Nodes with ids ``n0``, ``n1``, ...
    """
    kinds = draw(st.lists(_node_kind(type_names), min_size=1, max_size=3))
    count = draw(st.integers(min_nodes, max_nodes))
    racks = draw(st.integers(1, max_racks))
    rack_zone = {
        f"r{k}": (draw(st.sampled_from(list(zones))) if zones else None) for k in range(racks)
    }
    result = []
    for k in range(count):
        kind = draw(st.sampled_from(kinds))
        gpus = kind.gpu_count
        rack = f"r{draw(st.integers(0, racks - 1))}"
        down = with_failures and _rarely(draw, 8)
        failed: tuple[int, ...] = ()
        if with_failures and _rarely(draw, 4):
            failed = tuple(
                draw(st.lists(st.integers(0, gpus - 1), unique=True, min_size=1, max_size=2))
            )
        result.append(
            Node(
                id=f"n{k}",
                rack=rack,
                zone=rack_zone[rack],
                down=down,
                failed_gpus=failed,
                draining=draining and _rarely(draw, 3),
                **kind._asdict(),
            )
        )
    if draining and not any(node.draining for node in result):
        k = draw(st.integers(0, count - 1))
        result[k] = replace(result[k], draining=True)
    return tuple(result)
