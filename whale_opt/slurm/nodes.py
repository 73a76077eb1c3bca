"""``sinfo`` nodes -> whale_opt :class:`Node` records (pure).

A node's GPU type is its GRES type (``gpu:a100:8`` -> ``a100``) or, in the
indexed layout where the GRES types are ``g0``..``g7``, the first node
feature that names a type of ``BridgeOptions.gpu_types`` (``gpu`` if none).
Down or not responding -> ``down``; drain, fail, maintenance -> ``draining``.
"""

from __future__ import annotations

import logging

from whale_opt.problem_data import GpuType, Node
from whale_opt.slurm import gres
from whale_opt.slurm.options import BridgeOptions
from whale_opt.slurm.records import SlurmNode

log = logging.getLogger("whale_opt")

DEFAULT_GPU_TYPE = "gpu"
DOWN_STATES = frozenset({"down", "future", "unknown"})
DOWN_FLAGS = frozenset({"NOT_RESPONDING", "POWERED_DOWN", "POWER_DOWN", "POWERING_DOWN"})
DRAIN_FLAGS = frozenset({"DRAIN", "DRAINING", "DRAINED", "FAIL", "MAINTENANCE", "REBOOT_REQUESTED"})


def _node_shape(node: SlurmNode, options: BridgeOptions) -> tuple[str, int] | str:
    """(GPU type, GPU count) of ``node``, or why it cannot be used."""
    entries = gres.gpus(node.gres)
    if not entries:
        return "no GPUs"
    indices = [gres.type_index(entry.type) for entry in entries]
    numbered = [index for index in indices if index is not None]
    if len(numbered) == len(indices):
        if sorted(numbered) != list(range(len(numbered))) or any(e.count != 1 for e in entries):
            return f"indexed GRES types are not g0..g{len(indices) - 1}, one GPU each"
        names = [f for f in node.features if f in options.gpu_types]
        return (names[0] if names else DEFAULT_GPU_TYPE), len(entries)
    if options.gres_mode == "indexed":
        return "plain GPU GRES: --gres-mode indexed needs gpu:g0:1,...,gpu:gN:1"
    types = {entry.type or DEFAULT_GPU_TYPE for entry in entries}
    if len(types) > 1:
        return f"mixes GPU types {sorted(types)} (whale_opt nodes have one)"
    return types.pop(), sum(entry.count for entry in entries)


def build_nodes(
    nodes: tuple[SlurmNode, ...], options: BridgeOptions
) -> tuple[dict[str, Node], dict[str, SlurmNode]]:
    """The whale_opt nodes (by name) and their Slurm records, for the nodes with
    GPUs this bridge manages; a node it cannot use is logged and left out."""
    built: dict[str, Node] = {}
    kept: dict[str, SlurmNode] = {}
    for node in nodes:
        if not options.manages(node.partitions):
            continue
        shape = _node_shape(node, options)
        if isinstance(shape, str):
            if shape != "no GPUs":
                log.warning("slurm: node %s left out: %s", node.name, shape)
            continue
        gpu_type, count = shape
        down = node.state in DOWN_STATES or bool(DOWN_FLAGS.intersection(node.flags))
        draining = node.state in ("drained", "draining") or bool(
            DRAIN_FLAGS.intersection(node.flags)
        )
        built[node.name] = Node(
            id=node.name,
            gpu_type=gpu_type,
            gpu_count=count,
            nvlink=options.nvlink,
            cpu=float(node.cpus),
            down=down,
            draining=draining and not down,
        )
        kept[node.name] = node
    return built, kept


def gpu_types(nodes: dict[str, Node], options: BridgeOptions) -> dict[str, GpuType]:
    """The GPU types of ``nodes``: from ``options.gpu_types``, else a default."""
    names = sorted({node.gpu_type for node in nodes.values()})
    return {
        name: options.gpu_types.get(name) or GpuType(name, options.default_gpu_memory_gb, 1.0)
        for name in names
    }
