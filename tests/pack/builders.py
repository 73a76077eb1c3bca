"""Builders for the packing-study tests: the excerpt's folder, hand-made clusters and pods."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from whale_opt.pack import PackCluster
from whale_opt.pack.state import Pod

PACK_DATA = Path(__file__).resolve().parents[1] / "data" / "pack"
OPENB = PACK_DATA / "alibaba-gpu-v2023"


def cluster_of(*nodes: tuple[int, int, str], memory: int = 100_000) -> PackCluster:
    """A cluster of (CPU milli, GPUs, model) nodes."""
    models = tuple(sorted({m for _, _, m in nodes}))
    return PackCluster(
        names=tuple(f"n{i}" for i in range(len(nodes))),
        cpu_milli=np.array([c for c, _, _ in nodes], dtype=np.int64),
        memory_mib=np.full(len(nodes), memory, dtype=np.int64),
        gpus=np.array([g for _, g, _ in nodes], dtype=np.int64),
        model=np.array([models.index(m) for _, _, m in nodes], dtype=np.int64),
        models=models,
    )


def pod(
    cluster: PackCluster,
    cpu: int = 1000,
    num_gpu: int = 1,
    milli: int = 1000,
    memory: int = 1000,
    models: tuple[str, ...] = (),
    shape: int = 0,
) -> Pod:
    """A pod request for ``cluster`` (``models``: the gpu_spec; empty: any)."""
    allowed = np.array([not models or m in models for m in cluster.models], dtype=bool)
    return Pod(
        index=0,
        cpu=cpu,
        memory=memory,
        num_gpu=num_gpu,
        milli=milli if num_gpu else 0,
        allowed=allowed,
        shape=shape,
    )
