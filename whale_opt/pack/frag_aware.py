"""``frag-aware`` in the packing study: the engine's preference, for GPU shares.

The engine's ``frag-aware`` (:mod:`whale_opt.placement.search`) prefers, at
the earliest start, the placement that least shrinks the largest free NVLink
block, then the tightest fit. The packing study has no time, and a node's
"free block" is no longer one number once GPUs are shared: a node with three
whole GPUs and one GPU at 400 milli free can still host a 3-GPU pod, a share
of up to 1000 milli, and a 0.4 share besides. So here the block becomes the
node's **capacity for future pods**: for each pod shape m of the original
list (CPU, GPU milli, GPU count, ``gpu_spec``, with its frequency p_m), how
many copies of m the node could still host on its own, weighted by
p_m x m's GPU request::

    C(node) = sum_m p_m * request_m * copies_m(node)
    copies_m = 0 if m may not use the node's model, else
               min(CPU left // cpu_m, GPU copies)
    GPU copies = sum over GPUs of (free milli // milli_m)   for a share m
               = whole free GPUs // num_gpu_m                for k whole GPUs

The shapes are those of every pod. FGD's target workload (same key,
:class:`TargetWorkload`) stops at the commonest 95% of pods, which leaves
out the multi-GPU pods: 0.9% of the default list's pods, but 7.3% of its GPU
request, and the very pods a large free block is kept for.

A pod goes where C drops least (the least loss of capacity for future pods),
then to the tightest fit (least milli left on the chosen GPU, then least GPU
milli and CPU left on the node), then by the run's node order. CPU-only
shapes ask no GPU and weigh nothing; a CPU-only pod still costs capacity when
its CPU leaves a node too little for a GPU shape. Memory is left out, as in
FGD's measure.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from whale_opt.pack.fgd import AfterPlacing, TargetWorkload
from whale_opt.pack.state import MILLI, PackState, Placement, Pod, lowest_free_gpus
from whale_opt.pack.trace import PackCluster, PodList

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
NO_CPU_LIMIT = np.iinfo(np.int64).max // 4
ALL_SHAPES = 1.0  # the share of the pods whose shapes count: all of them


class Capacity:
    """C of node states for one target workload (see the module docstring)."""

    def __init__(self, workload: TargetWorkload) -> None:
        gpu = workload.milli > 0
        self.cpu = workload.cpu[gpu]
        self.milli = workload.milli[gpu]
        self.count = workload.num_gpu[gpu]
        self.weight = workload.frequency[gpu] * (self.count * self.milli)
        self.share = self.milli < MILLI
        # share copies depend on the milli alone: computed once per distinct milli
        self.divisor, self.of_shape = np.unique(
            np.where(self.share, self.milli, MILLI), return_inverse=True
        )
        self.allowed_by_model = workload.allowed[gpu].T.copy()  # [model, shape]

    def per_gpu(self, free: IntArray) -> IntArray:
        """Copies of a share of each distinct milli on each GPU: [..., GPU, milli]."""
        return free[..., None] // self.divisor

    def value_of(
        self, shares: IntArray, full: IntArray, cpu: IntArray, model: IntArray
    ) -> FloatArray:
        """C of states from the share copies summed over GPUs ([..., milli]), the whole
        free GPUs, CPU left and model ([...] each)."""
        gpu = np.where(self.share, shares[..., self.of_shape], full[..., None] // self.count)
        by_cpu = np.where(self.cpu > 0, cpu[..., None] // np.maximum(self.cpu, 1), NO_CPU_LIMIT)
        copies = np.minimum(gpu, by_cpu) * self.allowed_by_model[model]
        return np.asarray(copies @ self.weight, dtype=np.float64)

    def value(self, free: IntArray, full: IntArray, cpu: IntArray, model: IntArray) -> FloatArray:
        """C of states: weighted copies of the shapes the node's model allows."""
        return self.value_of(self.per_gpu(free).sum(axis=-2), full, cpu, model)


class FragAwarePolicy:
    """The least loss of capacity for future pods, then the tightest fit."""

    name = "frag-aware"

    def __init__(self, workload: TargetWorkload) -> None:
        self.workload = workload
        self.capacity = Capacity(workload)
        self._state: PackState | None = None

    @classmethod
    def of(cls, pods: PodList, cluster: PackCluster) -> FragAwarePolicy:
        """frag-aware for the pods to come: every shape of ``pods`` (FGD keeps the
        commonest 95%, which leaves out the rare multi-GPU pods and with them the
        large free blocks frag-aware protects)."""
        return cls(TargetWorkload.of(pods, cluster, popularity=ALL_SHAPES))

    def _bind(self, state: PackState) -> None:
        self._state = state
        self._now = np.zeros(state.size)
        self._seen = np.full(state.size, -1, dtype=np.int64)
        self._after = AfterPlacing(state.size, self._after_placing)

    def _refresh(self, state: PackState) -> None:
        stale = np.flatnonzero(state.node_epoch > self._seen)
        if len(stale):
            self._now[stale] = self.capacity.value(
                state.free[stale],
                state.full_count[stale],
                state.cpu_left[stale],
                state.model[stale],
            )
            self._seen[stale] = state.node_epoch[stale]

    def losses(self, state: PackState, pod: Pod, nodes: IntArray) -> FloatArray:
        """Capacity lost by placing ``pod`` on each of ``nodes`` ([node, GPU] for a share)."""
        if state is not self._state:
            self._bind(state)
        self._refresh(state)
        return np.round(self._now[nodes, None] - self._after.at(state, pod, nodes), 6)

    def _after_placing(self, state: PackState, pod: Pod, nodes: IntArray) -> FloatArray:
        free, full = state.free[nodes], state.full_count[nodes]
        cpu, model = state.cpu_left[nodes] - pod.cpu, state.model[nodes]
        if pod.num_gpu == 0:
            return self.capacity.value(free, full, cpu, model)[:, None]
        now = self.capacity.per_gpu(free)  # [node, GPU, milli]
        if not pod.fractional:  # k whole GPUs: each held MILLI // d copies of a share d
            shares = now.sum(axis=1) - pod.num_gpu * (MILLI // self.capacity.divisor)
            return self.capacity.value_of(shares, full - pod.num_gpu, cpu, model)[:, None]
        # one state per (node, GPU): the share on that GPU changes only that GPU's copies
        after = self.capacity.per_gpu(np.maximum(free - pod.milli, 0))
        shares = now.sum(axis=1)[:, None, :] - now + after
        whole = (free == MILLI).astype(np.int64)
        return self.capacity.value_of(shares, full[:, None] - whole, cpu[:, None], model[:, None])

    def place(self, state: PackState, pod: Pod, rng: np.random.Generator) -> Placement | None:
        """See the class docstring."""
        nodes = np.flatnonzero(state.feasible(pod))
        if len(nodes) == 0:
            return None
        loss = self.losses(state, pod, nodes)
        if pod.fractional:
            loss = np.where(state.free[nodes] >= pod.milli, loss, np.inf)  # padding never fits
        rows, cells = np.nonzero(loss == loss.min())  # the least loss, then the tie-breaks
        tied = nodes[rows]
        gpu_left = state.free[tied, cells] - pod.milli if pod.fractional else np.zeros(len(rows))
        node_left = state.total_free[tied] - pod.gpu_request
        cpu_left = state.cpu_left[tied] - pod.cpu
        best = int(
            np.lexsort((state.rank[tied], cpu_left, node_left, gpu_left))[0]
        )  # last key first
        node, cell = int(tied[best]), int(cells[best])
        if pod.fractional:
            return Placement(node, (cell,))
        return Placement(node, lowest_free_gpus(state.free[node], pod.num_gpu))
