"""Seeded generators of realistic instances, by family (examples and benchmarks).

Families:

- ``mixed``: a small cluster of H100 / A100 / V100 nodes in two racks.
- ``dgx1``: DGX-1 style V100 nodes (hybrid cube-mesh), busy, with 1-8 GPU jobs.
- ``hetero``: H100 / A100 (NVSwitch), V100 (cube-mesh), RTX (PCIe, bridged
  pairs) and A10 nodes, sized by ``gpus``, mostly busy, long queue.
- ``fragmented``: every node has a few free GPUs, scattered, while the queue
  asks for 4- and 8-GPU NVLink blocks.

Sizes, durations and weights follow shapes seen in public traces (many
1-GPU jobs, a long tail of 8-64 GPU gangs, log-normal durations of minutes
to days), not any one trace.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from whale_opt.problem_data import (
    GpuType,
    Instance,
    Node,
    Policy,
    QueuedJob,
    RunningJob,
    Tenant,
)
from whale_opt.topology import choose_gpus, node_topologies, popcount

GPU_TYPES = {
    "H100-80G": GpuType("H100-80G", 80, 2.0),
    "A100-80G": GpuType("A100-80G", 80, 1.0),
    "A100-40G": GpuType("A100-40G", 40, 1.0),
    "V100-32G": GpuType("V100-32G", 32, 0.45),
    "RTX-4090": GpuType("RTX-4090", 24, 0.6),
    "A10-24G": GpuType("A10-24G", 24, 0.35),
}


@dataclass(frozen=True)
class NodeShape:
    """A kind of server: GPU type, count, NVLink layout, CPU and memory."""

    gpu_type: str
    gpus: int
    nvlink: str
    cpu: int
    memory_gb: int


SHAPES = {
    "H100-80G": NodeShape("H100-80G", 8, "nvswitch", 192, 2048),
    "A100-80G": NodeShape("A100-80G", 8, "nvswitch", 128, 1024),
    "A100-40G": NodeShape("A100-40G", 8, "nvswitch", 128, 1024),
    "V100-32G": NodeShape("V100-32G", 8, "hybrid-cube-mesh", 80, 512),
    "RTX-4090": NodeShape("RTX-4090", 4, "pairs", 64, 256),
    "A10-24G": NodeShape("A10-24G", 4, "pcie", 48, 256),
}

TENANTS = ("nlp", "cv", "speech", "recsys", "research")


def _nodes(rng: np.random.Generator, mix: dict[str, int], rack_size: int) -> list[Node]:
    nodes = []
    for gpu_type, count in mix.items():
        shape = SHAPES[gpu_type]
        prefix = gpu_type.split("-")[0].lower()
        for k in range(count):
            rack = f"{prefix}-r{k // rack_size:02d}"
            failed: tuple[int, ...] = ()
            if rng.random() < 0.02:
                failed = (int(rng.integers(shape.gpus)),)
            nodes.append(
                Node(
                    id=f"{prefix}-{k:04d}",
                    gpu_type=gpu_type,
                    gpu_count=shape.gpus,
                    nvlink=shape.nvlink,
                    cpu=shape.cpu,
                    memory_gb=shape.memory_gb,
                    rack=rack,
                    zone="east" if k % 2 == 0 else "west",
                    down=bool(rng.random() < 0.01),
                    failed_gpus=failed,
                )
            )
    return nodes


def job_size(rng: np.random.Generator, large: float = 0.06) -> int:
    """A gang size: many 1-GPU jobs, a long tail of 8-64 GPU gangs (``large`` of them)."""
    roll = rng.random()
    if roll < 0.45:
        return 1
    if roll < 0.62:
        return 2
    if roll < 0.78:
        return 4
    if roll < 1 - large:
        return 8
    return int(rng.choice([16, 16, 32, 64]))


def _duration(rng: np.random.Generator, median_s: float) -> int:
    return max(60, int(rng.lognormal(math.log(median_s), 1.1)))


def _running(
    rng: np.random.Generator, types: dict[str, GpuType], nodes: list[Node], load: float
) -> list[RunningJob]:
    """Fill each node to about ``load`` with NVLink-connected jobs of 1-8 GPUs."""
    probe = Instance("probe", types, tuple(nodes))
    topologies = node_topologies(probe)
    jobs: list[RunningJob] = []
    for topo in topologies:
        free = topo.healthy
        target = round(popcount(free) * min(1.0, rng.normal(load, 0.2)))
        used = 0
        while used < target:
            size = int(rng.choice([1, 1, 2, 4, 8]))
            size = min(size, target - used)
            mask = choose_gpus(topo, free, size, nvlink=topo.node.nvlink != "pcie")
            if mask is None:
                mask = choose_gpus(topo, free, 1, nvlink=False)
                if mask is None:
                    break
                size = 1
            free &= ~mask
            used += size
            gpus = tuple(topo.node.gpu_id(i) for i in range(topo.size) if mask >> i & 1)
            jobs.append(
                RunningJob(
                    id=f"run-{len(jobs):05d}",
                    tenant=str(rng.choice(TENANTS)),
                    gpu_ids=gpus,
                    cpu=float(8 * size),
                    memory_gb=float(32 * size),
                    started_at=-int(rng.integers(60, 86_400)),
                    remaining_s=_duration(rng, 3 * 3600),
                    weight=float(rng.choice([1, 1, 2, 4])),
                    checkpoint_s=int(rng.integers(30, 600)),
                )
            )
    return jobs


def _queue(
    rng: np.random.Generator, mix: dict[str, int], count: int, large: float, median_s: float
) -> list[QueuedJob]:
    present = list(mix)
    top_memory = max(GPU_TYPES[name].memory_gb for name in present)
    memories = [m for m in (0, 0, 16, 24, 40, 80) if m <= top_memory]
    jobs = []
    for k in range(count):
        size = job_size(rng, large)
        topology = "nvlink"
        types: tuple[str, ...] = ()
        memory = float(rng.choice(memories))
        roll = rng.random()
        if roll < 0.25:
            types = (str(rng.choice(present)),)
            if SHAPES[types[0]].nvlink == "pcie" and size > 1:
                topology = "node"
            memory = 0.0
        elif roll < 0.35 and size <= 4:
            topology = "node"
        elif roll < 0.4:
            topology = "any"
        shape_gpus = max(SHAPES[t].gpus for t in (types or present))
        if topology == "nvlink" and size > shape_gpus:
            size = shape_gpus * max(1, size // shape_gpus)
        if topology == "node":
            size = min(size, shape_gpus)
        jobs.append(
            QueuedJob(
                id=f"job-{k:05d}",
                tenant=str(rng.choice(TENANTS)),
                gpu_count=size,
                gpu_types=types,
                min_gpu_memory_gb=memory,
                cpu=float(6 * size),
                memory_gb=float(24 * size),
                duration_s=_duration(rng, median_s),
                weight=float(rng.choice([1, 1, 1, 2, 4])),
                submitted_at=-int(rng.integers(0, 7200)),
                topology=topology,
                zone=str(rng.choice(["east", "west"])) if rng.random() < 0.1 else None,
            )
        )
    return jobs


def generate(
    family: str,
    *,
    gpus: int = 1024,
    queued: int = 500,
    load: float = 0.8,
    seed: int = 0,
) -> Instance:
    """A seeded instance of ``family`` with about ``gpus`` GPUs and ``queued`` jobs."""
    rng = np.random.default_rng(seed)
    large = 0.06
    median = 2 * 3600.0
    if family == "mixed":
        mix = {"H100-80G": 2, "A100-80G": 4, "V100-32G": 2}
    elif family == "dgx1":
        mix = {"V100-32G": max(1, gpus // 8)}
    elif family == "hetero":
        per = gpus / 8
        mix = {
            "H100-80G": max(1, int(per * 0.15)),
            "A100-80G": max(1, int(per * 0.3)),
            "V100-32G": max(1, int(per * 0.3)),
            "RTX-4090": max(1, int(per * 0.15) * 2),
            "A10-24G": max(1, int(per * 0.1) * 2),
        }
    elif family == "fragmented":
        mix = {"A100-80G": max(1, gpus // 16), "V100-32G": max(1, gpus // 16)}
        load = 0.7
        large = 0.0
    else:
        raise ValueError(f"unknown family {family!r}; choose mixed, dgx1, hetero, fragmented")
    types = {name: GPU_TYPES[name] for name in mix}
    nodes = _nodes(rng, mix, rack_size=16)
    running = _running(rng, types, nodes, load)
    queue = _queue(rng, mix, queued, large, median)
    if family == "fragmented":
        queue = [
            replace(job, gpu_count=int(rng.choice([2, 4, 4, 8])), topology="nvlink")
            for job in queue
        ]
    tenants = {name: Tenant(name, gpu_quota=None) for name in TENANTS}
    tenants["research"] = Tenant("research", gpu_quota=max(8, gpus // 8))
    return Instance(
        name=f"{family}-{gpus}g-{queued}q-s{seed}",
        gpu_types=types,
        nodes=tuple(nodes),
        running=tuple(running),
        queue=tuple(queue),
        tenants=tenants,
        policy=Policy(),
    )
