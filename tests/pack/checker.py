"""An independent check of packing placements: every capacity rule, replayed from scratch.

It reads only the cluster's arrays and the pods' requests, never
:class:`~whale_opt.pack.PackState`, so a bug in the state's own ``fits`` cannot
hide a bad placement.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from whale_opt.pack import PackCluster, Placement, Pod
from whale_opt.pack.trace import MILLI


def violations(cluster: PackCluster, offers: Sequence[tuple[Pod, Placement | None]]) -> list[str]:
    """Every rule broken by placing ``offers`` in order (an empty list: all valid)."""
    cpu = cluster.cpu_milli.astype(np.int64).copy()
    memory = cluster.memory_mib.astype(np.int64).copy()
    used = np.zeros((len(cluster.names), max(cluster.max_gpus, 1)), dtype=np.int64)
    whole = np.zeros_like(used, dtype=bool)  # taken by a whole-GPU pod
    found = []
    for step, (pod, placement) in enumerate(offers):
        if placement is None:
            continue
        node, gpus = placement
        where = f"offer {step} (pod {pod.index}) on node {node} GPUs {gpus}"
        if not 0 <= node < len(cluster.names):
            found.append(f"{where}: no such node")
            continue
        cpu[node] -= pod.cpu
        memory[node] -= pod.memory
        if cpu[node] < 0 or memory[node] < 0:
            found.append(f"{where}: node CPU or memory overcommitted")
        if len(gpus) != pod.num_gpu or len(set(gpus)) != len(gpus):
            found.append(f"{where}: asks {pod.num_gpu} distinct GPUs")
        if pod.num_gpu and not pod.allowed[cluster.model[node]]:
            found.append(f"{where}: GPU model {cluster.models[cluster.model[node]]} not allowed")
        for g in gpus:
            if not 0 <= g < cluster.gpus[node]:
                found.append(f"{where}: node has no GPU {g}")
                continue
            if whole[node, g] or (not pod.fractional and used[node, g] > 0):
                found.append(f"{where}: GPU {g} shared with a whole-GPU pod")
            used[node, g] += pod.milli
            whole[node, g] |= not pod.fractional
            if used[node, g] > MILLI:
                found.append(f"{where}: GPU {g} past {MILLI} milli")
    return found
