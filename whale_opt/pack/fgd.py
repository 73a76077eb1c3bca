"""FGD: Fragmentation Gradient Descent (Weng et al., ATC '23), and its measure.

**The target workload** M is the pod shapes of the original pod list, most
frequent first (key: CPU, GPU milli, GPU count, ``gpu_spec``), enough of
them to cover 95% of the pods, with their frequencies p_m renormalised to
sum to 1 (the reference's ``GetTypicalPods`` with threshold 95, step 1, CPU
pods included).

**Expected fragmentation** of a node n: F_n = sum_m p_m F_n(m), where
F_n(m) is the GPU milli on n that a pod of shape m cannot use. If m asks no
GPU, may not use n's model, or does not fit n (CPU, or fewer than its
GPU count of GPUs with at least its milli free), every free GPU milli on n
is fragment; otherwise the fragment is the free milli of the GPUs with less
free than m's per-GPU milli. Memory plays no part, as in the reference.

**FGD** places each pod on the node (and, for a share, the GPU) whose F
grows least, scoring ``int(100 * sigmoid(-dF / 1000))`` like the reference
(so small differences tie; ties go to the first node of the run's order,
and inside a node to the lowest GPU index).

Speed: with thresholds t_k (the distinct milli of M), a node's state
enters F only through its CPU left, its model, and per k the count and the
sum of free milli of its GPUs with at least t_k free. Those are cached per
node; F after a candidate placement is computed from them, vectorised over
nodes and GPUs. Candidate values are cached per pod shape and recomputed
only for nodes changed since (the state's per-node epochs).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from whale_opt.pack.policies import truncate
from whale_opt.pack.state import MILLI, BoolArray, PackState, Placement, Pod, lowest_free_gpus
from whale_opt.pack.trace import PackCluster, PodList, spec_allows

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class AfterPlacing:
    """Per pod shape, each node's value after placing a pod of that shape there
    ([node, GPU] for a share), recomputed by ``compute`` only for the nodes
    changed since (by the state's ``node_epoch``)."""

    def __init__(
        self, size: int, compute: Callable[[PackState, Pod, IntArray], FloatArray]
    ) -> None:
        self._size = size
        self._compute = compute
        self._after: dict[int, FloatArray] = {}
        self._seen: dict[int, IntArray] = {}

    def at(self, state: PackState, pod: Pod, nodes: IntArray) -> FloatArray:
        """The values of ``nodes`` for ``pod``'s shape, stale ones recomputed."""
        shape = pod.shape
        if shape not in self._after:
            cells = state.free.shape[1] if pod.fractional else 1
            self._after[shape] = np.zeros((self._size, cells))
            self._seen[shape] = np.full(self._size, -1, dtype=np.int64)
        after, seen = self._after[shape], self._seen[shape]
        stale = nodes[state.node_epoch[nodes] > seen[nodes]]
        if len(stale):
            after[stale] = self._compute(state, pod, stale)
            seen[stale] = state.node_epoch[stale]
        return after[nodes]


POPULARITY = 0.95  # share of the pods the target workload covers


@dataclass(frozen=True)
class TargetWorkload:
    """The pod shapes of M, their frequencies, and per model whether each may use it.

    Arrays run over the shapes, most frequent first; ``allowed[m, j]``: shape
    m may use model j of the cluster.
    """

    cpu: IntArray
    milli: IntArray
    num_gpu: IntArray
    spec: tuple[str, ...]
    frequency: FloatArray
    allowed: BoolArray

    @classmethod
    def of(
        cls, pods: PodList, cluster: PackCluster, popularity: float = POPULARITY
    ) -> TargetWorkload:
        """The target workload of the (original, un-resized) pod list ``pods``."""
        counts = Counter(
            (int(c), int(m), int(k), s)
            for c, m, k, s in zip(pods.cpu_milli, pods.milli, pods.num_gpu, pods.spec, strict=True)
        )
        # most frequent first; equal counts: larger (cpu, milli, count, spec) first, as in Go
        ranked = sorted(counts.items(), key=lambda item: (item[1], item[0]), reverse=True)
        total = float(len(pods))
        expected = popularity * total
        chosen: list[tuple[tuple[int, int, int, str], int]] = []
        covered = 0.0
        for key, count in ranked:
            if covered >= expected:
                break
            chosen.append((key, count))
            covered += count
        frequency = np.array([count / total for _, count in chosen]) / (covered / total)
        return cls(
            cpu=np.array([k[0] for k, _ in chosen], dtype=np.int64),
            milli=np.array([k[1] for k, _ in chosen], dtype=np.int64),
            num_gpu=np.array([k[2] for k, _ in chosen], dtype=np.int64),
            spec=tuple(k[3] for k, _ in chosen),
            frequency=frequency,
            allowed=np.array([spec_allows(k[3], cluster.models) for k, _ in chosen], dtype=bool),
        )

    def __len__(self) -> int:
        return len(self.cpu)


class Fragmentation:
    """F of node states for one target workload, from per-threshold counts and sums."""

    def __init__(self, workload: TargetWorkload) -> None:
        gpu = workload.milli > 0
        self.total_weight = float(workload.frequency.sum())
        self.thresholds = np.unique(workload.milli[gpu])  # the distinct per-GPU milli of M
        self.level = np.searchsorted(self.thresholds, workload.milli[gpu])
        self.cpu = workload.cpu[gpu]
        self.count = workload.num_gpu[gpu]
        self.weight = workload.frequency[gpu]
        self.allowed_by_model = workload.allowed[gpu].T.copy()  # [model, shape]

    def levels(self, free: IntArray) -> tuple[IntArray, IntArray]:
        """Per state (rows of ``free``) and threshold: GPUs with >= t_k free, and their milli."""
        enough = free[..., None] >= self.thresholds
        return enough.sum(axis=-2), (free[..., None] * enough).sum(axis=-2)

    def value(
        self, cpu: IntArray, model: IntArray, total: IntArray, count: IntArray, usable: IntArray
    ) -> FloatArray:
        """F of states given CPU left, model, free milli in all, and :meth:`levels`."""
        fits = (
            self.allowed_by_model[model]
            & (cpu[..., None] >= self.cpu)
            & (count[..., self.level] >= self.count)
        )
        kept = (fits * usable[..., self.level]) @ self.weight
        return total * self.total_weight - kept


def score(before: FloatArray, after: FloatArray) -> IntArray:
    """The reference's ``int(100 * sigmoid((F_before - F_after) / 1000))``."""
    return truncate(1.0 / (1.0 + np.exp(-((before - after) / 1000.0))) * 100.0)


class FgdPolicy:
    """Fragmentation Gradient Descent over a :class:`TargetWorkload`."""

    name = "FGD"

    def __init__(self, workload: TargetWorkload) -> None:
        self.workload = workload
        self.frag = Fragmentation(workload)
        self._state: PackState | None = None

    def _bind(self, state: PackState) -> None:
        """Start the caches afresh for a new state."""
        self._state = state
        self._seen = np.full(state.size, -1, dtype=np.int64)
        width = len(self.frag.thresholds)
        self._count = np.zeros((state.size, width), dtype=np.int64)
        self._usable = np.zeros((state.size, width), dtype=np.int64)
        self._now = np.zeros(state.size)
        self._after = AfterPlacing(state.size, self._after_placing)

    def _refresh(self, state: PackState) -> None:
        """Recompute the cached levels and F of the nodes changed since last time."""
        stale = np.flatnonzero(state.node_epoch > self._seen)
        if len(stale) == 0:
            return
        count, usable = self.frag.levels(state.free[stale])
        self._count[stale], self._usable[stale] = count, usable
        self._now[stale] = self.frag.value(
            state.cpu_left[stale], state.model[stale], state.total_free[stale], count, usable
        )
        self._seen[stale] = state.node_epoch[stale]

    def _candidates(self, state: PackState, pod: Pod, nodes: IntArray) -> FloatArray:
        """F after placing ``pod`` on each of ``nodes`` ([node, GPU] for a share), by shape."""
        return self._after.at(state, pod, nodes)

    def _after_placing(self, state: PackState, pod: Pod, nodes: IntArray) -> FloatArray:
        cpu = state.cpu_left[nodes] - pod.cpu
        model, count, usable = state.model[nodes], self._count[nodes], self._usable[nodes]
        total = state.total_free[nodes] - pod.gpu_request
        if not pod.fractional:  # CPU only, or whole free GPUs: each drops out of every level
            taken = pod.num_gpu * MILLI
            value = self.frag.value(cpu, model, total, count - pod.num_gpu, usable - taken)
            return value[:, None]
        free = state.free[nodes]  # [node, GPU]: the share on each GPU in turn
        left = free - pod.milli
        t = self.frag.thresholds
        was, now = free[..., None] >= t, left[..., None] >= t
        count2 = count[:, None, :] - was + now
        usable2 = usable[:, None, :] - free[..., None] * was + left[..., None] * now
        return self.frag.value(cpu[:, None], model[:, None], total[:, None], count2, usable2)

    def growth(self, state: PackState, pod: Pod) -> tuple[IntArray, FloatArray]:
        """The feasible nodes for ``pod`` and F's growth on each if placed there.

        The growth is [node, GPU] for a share (``inf`` where the GPU lacks the
        milli) and [node, 1] otherwise.
        """
        if state is not self._state:
            self._bind(state)
        nodes = np.flatnonzero(state.feasible(pod))
        if len(nodes) == 0:
            return nodes, np.zeros((0, 1))
        self._refresh(state)
        growth = self._candidates(state, pod, nodes) - self._now[nodes, None]
        if pod.fractional:
            growth = np.where(state.free[nodes] >= pod.milli, growth, np.inf)
        return nodes, growth

    def place(self, state: PackState, pod: Pod, rng: np.random.Generator) -> Placement | None:
        """The feasible node (and GPU) where F grows least; see the module docstring."""
        if state is not self._state:
            self._bind(state)
        nodes = np.flatnonzero(state.feasible(pod))
        if len(nodes) == 0:
            return None
        self._refresh(state)
        scores = score(self._now[nodes, None], self._candidates(state, pod, nodes))
        if pod.fractional:
            fits = state.free[nodes] >= pod.milli  # padding cells are 0: they never fit
            scores = np.where(fits, scores, -1)
        gpu = scores.argmax(axis=1)  # the first GPU of best score
        best = np.zeros(state.size, dtype=np.int64)
        ok = np.zeros(state.size, dtype=bool)
        best[nodes], ok[nodes] = scores[np.arange(len(nodes)), gpu], True
        node = state.best(best, ok)
        if pod.fractional:
            return Placement(node, (int(gpu[np.searchsorted(nodes, node)]),))
        return Placement(node, lowest_free_gpus(state.free[node], pod.num_gpu))
