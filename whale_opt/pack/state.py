"""The packing state: what is left on every node, as numpy arrays.

Per node: CPU milli and memory MiB left, the free milli of each GPU (a row
of ``max_gpus`` cells; cells past a node's own GPUs stay 0 and never fit),
its GPU model, and how many pods of each GPU "class" it holds (the classes
the Clustering policy groups by). A :class:`Pod` is one request; a
:class:`Placement` is a node and the GPU indices on it. :meth:`PackState.place`
refuses anything that does not fit, so no GPU ever goes past 1000 milli and
no node past its CPU or memory.

Every change stamps the node with a new epoch, so a policy that caches
per-node values (FGD) recomputes only the nodes changed since it last looked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from whale_opt.pack.trace import MILLI, PackCluster, PodList, spec_allows

BoolArray = npt.NDArray[np.bool_]
SHARE_CLASS = 0  # the class of fractional pods; k whole GPUs is class k


@dataclass(frozen=True, eq=False)
class Pod:
    """One pod's request. ``milli`` is per GPU; ``allowed`` is over the cluster's models.

    ``shape`` numbers the distinct (cpu, milli, num_gpu) requests of a pod
    list, for caches keyed by what a placement does to a node.
    """

    index: int
    cpu: int
    memory: int
    num_gpu: int
    milli: int
    allowed: BoolArray
    shape: int

    @property
    def fractional(self) -> bool:
        """A share of one GPU (``milli`` < 1000)."""
        return self.num_gpu == 1 and self.milli < MILLI

    @property
    def gpu_request(self) -> int:
        """GPU milli asked in all: num_gpu x milli."""
        return self.num_gpu * self.milli

    @property
    def affinity(self) -> int:
        """The pod's class: :data:`SHARE_CLASS` for a share, else its GPU count (0: CPU only)."""
        return SHARE_CLASS if self.fractional else self.num_gpu


class Placement(NamedTuple):
    """Where a pod goes: a node index and the GPU indices on it (empty for CPU-only pods)."""

    node: int
    gpus: tuple[int, ...]


def pods_of(trace: PodList, cluster: PackCluster) -> tuple[Pod, ...]:
    """The :class:`Pod` of every row of ``trace``, for ``cluster``'s models."""
    allowed: dict[str, BoolArray] = {}
    shapes: dict[tuple[int, int, int], int] = {}
    pods = []
    for i in range(len(trace)):
        spec = trace.spec[i]
        if spec not in allowed:
            allowed[spec] = spec_allows(spec, cluster.models)
            allowed[spec].flags.writeable = False
        key = (int(trace.cpu_milli[i]), int(trace.milli[i]), int(trace.num_gpu[i]))
        pods.append(
            Pod(
                index=i,
                cpu=key[0],
                memory=int(trace.memory_mib[i]),
                num_gpu=key[2],
                milli=key[1],
                allowed=allowed[spec],
                shape=shapes.setdefault(key, len(shapes)),
            )
        )
    return tuple(pods)


class PackState:
    """What is left on each node of ``cluster`` after the pods placed so far."""

    def __init__(self, cluster: PackCluster) -> None:
        self.cluster = cluster
        size, width = len(cluster.names), max(cluster.max_gpus, 1)
        self.cpu_left = cluster.cpu_milli.astype(np.int64)
        self.memory_left = cluster.memory_mib.astype(np.int64)
        self.gpu_count = cluster.gpus.astype(np.int64)
        self.model = cluster.model
        columns = np.arange(width)
        self.free = np.where(columns[None, :] < self.gpu_count[:, None], MILLI, 0).astype(np.int64)
        self.total_free = self.free.sum(axis=1)
        self.max_free = self.free.max(axis=1)
        self.full_count = self.gpu_count.copy()
        self.classes = np.zeros((size, width + 1), dtype=np.int64)  # pods by affinity class
        self.class_kinds = np.zeros(size, dtype=np.int64)  # how many classes a node holds
        self.epoch = 0
        self.node_epoch = np.zeros(size, dtype=np.int64)
        self.used_milli = 0
        self.placed = 0
        self.rank = np.arange(size, dtype=np.int64)  # tie order: lower rank wins

    def shuffle_ties(self, rng: np.random.Generator) -> None:
        """Give the nodes a random tie order (the reference's per-seed random node names)."""
        self.rank = rng.permutation(self.size).astype(np.int64)

    def best(self, scores: npt.NDArray[np.int64], ok: BoolArray) -> int:
        """The ``ok`` node of highest score, ties to the lowest rank; -1 if none is ok."""
        if not ok.any():
            return -1
        key = np.where(ok, scores * self.size + (self.size - 1 - self.rank), -1)
        return int(key.argmax())

    @property
    def size(self) -> int:
        """The number of nodes."""
        return len(self.cpu_left)

    def feasible(self, pod: Pod) -> BoolArray:
        """Nodes with the CPU, the memory, an allowed model and the GPUs ``pod`` needs."""
        ok = (self.cpu_left >= pod.cpu) & (self.memory_left >= pod.memory)
        if pod.num_gpu == 0:
            return ok
        ok &= pod.allowed[self.model]
        if pod.fractional:
            return ok & (self.max_free >= pod.milli)
        return ok & (self.full_count >= pod.num_gpu)

    def fits(self, pod: Pod, placement: Placement) -> bool:
        """Whether ``placement`` is a valid spot for ``pod`` now."""
        node, gpus = placement
        if not 0 <= node < self.size:
            return False
        if self.cpu_left[node] < pod.cpu or self.memory_left[node] < pod.memory:
            return False
        if pod.num_gpu == 0:
            return gpus == ()
        if not pod.allowed[self.model[node]] or len(set(gpus)) != pod.num_gpu:
            return False
        count = int(self.gpu_count[node])
        return all(0 <= g < count and self.free[node, g] >= pod.milli for g in gpus)

    def place(self, pod: Pod, placement: Placement) -> None:
        """Take ``pod``'s CPU, memory and GPU milli on ``placement``; ValueError if it cannot."""
        if not self.fits(pod, placement):
            raise ValueError(f"pod {pod.index} does not fit on {placement}")
        node, gpus = placement
        self.cpu_left[node] -= pod.cpu
        self.memory_left[node] -= pod.memory
        if gpus:
            row = self.free[node]
            row[list(gpus)] -= pod.milli
            self.total_free[node] = row.sum()
            self.max_free[node] = row.max()
            self.full_count[node] = int((row[: self.gpu_count[node]] == MILLI).sum())
            kind = pod.affinity
            if self.classes[node, kind] == 0:
                self.class_kinds[node] += 1
            self.classes[node, kind] += 1
            self.used_milli += pod.gpu_request
        self._touch(node)
        self.placed += 1

    def unplace(self, pod: Pod, placement: Placement) -> None:
        """Give back what :meth:`place` took for ``pod`` on ``placement`` (a batch's trial)."""
        node, gpus = placement
        self.cpu_left[node] += pod.cpu
        self.memory_left[node] += pod.memory
        if gpus:
            row = self.free[node]
            row[list(gpus)] += pod.milli
            if (row > MILLI).any():
                row[list(gpus)] -= pod.milli
                raise ValueError(f"pod {pod.index} was not on {placement}")
            self.total_free[node] = row.sum()
            self.max_free[node] = row.max()
            self.full_count[node] = int((row[: self.gpu_count[node]] == MILLI).sum())
            kind = pod.affinity
            self.classes[node, kind] -= 1
            if self.classes[node, kind] == 0:
                self.class_kinds[node] -= 1
            self.used_milli -= pod.gpu_request
        self._touch(node)
        self.placed -= 1

    def _touch(self, node: int) -> None:
        """Stamp ``node`` with a new epoch: caches of its values are stale."""
        self.epoch += 1
        self.node_epoch[node] = self.epoch


def best_fit_gpus(state: PackState, pod: Pod, node: int) -> tuple[int, ...]:
    """The reference's GPU choice: a share on the fitting GPU with the least free milli
    (lowest index on ties); whole GPUs on the lowest-index free ones."""
    if pod.num_gpu == 0:
        return ()
    row = state.free[node]
    if pod.fractional:
        fitting = np.where(row >= pod.milli, row, MILLI + 1)
        return (int(np.argmin(fitting)),)
    return lowest_free_gpus(row, pod.num_gpu)


def lowest_free_gpus(row: npt.NDArray[np.int64], count: int) -> tuple[int, ...]:
    """The ``count`` lowest indices of whole free GPUs in ``row``."""
    return tuple(int(g) for g in np.flatnonzero(row == MILLI)[:count])
